"""The :class:`Embedder`: a model opened through the C API, used from Python."""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import threading
from dataclasses import dataclass, replace
from types import FrameType
from typing import (
    Any,
    Callable,
    Dict,
    List,
    Literal,
    Optional,
    Sequence,
    Tuple,
    Union,
    overload,
)

import numpy as np
import numpy.typing as npt

from . import _outputs
from ._native import PROGRESS_FN, EmbdText, c_float_p, c_size_p, c_uint8_p, lib
from .errors import CancelledError, ClosedError, InvalidArgumentError, Status, raise_status

__all__ = ["Embedder", "OUTPUT_PRECISIONS", "PRECISIONS", "similarity"]

PathLike = Union[str, "os.PathLike[str]"]
FloatArray = npt.NDArray[np.float32]

#: Names accepted by ``precision=`` and their ``EMBD_PRECISION_*`` values.
PRECISIONS: Dict[str, int] = {"default": 0, "f32": 1, "bf16": 2, "int8": 3}

#: Names accepted by ``encode(precision=...)`` (sentence-transformers'
#: ``quantize_embeddings`` names): ``EMBD_OUTPUT_*`` value and numpy dtype.
OUTPUT_PRECISIONS: Dict[str, Tuple[int, Any]] = {
    "float32": (0, np.float32),
    "int8": (1, np.int8),
    "uint8": (2, np.uint8),
    "binary": (3, np.int8),
    "ubinary": (4, np.uint8),
}

#: Per-call hook of ``encode``: ``(done, total)`` texts; ``True`` cancels.
ProgressCallback = Callable[[int, int], Optional[bool]]


class _CallState(threading.local):
    """What the progress trampoline sees on the thread running an encode call
    (the library calls it on the calling thread)."""

    hook: Optional[Callable[[int, int], bool]] = None
    interrupted: bool = False
    error: Optional[BaseException] = None


_state = _CallState()


def _trampoline(user: Optional[int], done: int, total: int) -> int:
    """The one C progress callback installed on every model at open. It never
    raises (an exception cannot cross the library): it returns 1 to cancel
    when Ctrl-C was pressed during the call or the per-call hook cancelled."""
    try:
        st = _state
        if st.interrupted:
            return 1
        hook = st.hook
        if hook is not None and hook(int(done), int(total)):
            return 1
        return 0
    except BaseException as e:  # noqa: BLE001 - handed to the caller
        _state.error = e
        return 1


#: Alive for the life of the process, so longer than any handle using it.
_PROGRESS = PROGRESS_FN(_trampoline)


@dataclass(frozen=True)
class _OpenOptions:
    """Everything ``embd_open`` is given. A new option is a field here and a
    line in :meth:`apply` (plus the keyword in :class:`Embedder`)."""

    threads: Optional[int] = None
    max_seq_length: Optional[int] = None
    normalize: bool = True
    precision: str = "default"
    verify_checksums: bool = True
    prepack_weights: bool = True
    dimensions: Optional[int] = None
    matryoshka: Optional[str] = None
    prompt: Optional[str] = None
    prompt_name: Optional[str] = None
    window_overlap: Optional[int] = None
    output_ranges: Optional[Tuple[float, ...]] = None

    def apply(self, opts: int) -> None:
        L = lib()
        steps: List[Tuple[Callable[..., int], Any]] = []
        if self.threads is not None:
            steps.append((L.embd_options_set_threads, self.threads))
        if self.max_seq_length is not None:
            steps.append((L.embd_options_set_max_seq_length, self.max_seq_length))
        steps.append((L.embd_options_set_normalize, 1 if self.normalize else 0))
        steps.append((L.embd_options_set_verify_checksums, 1 if self.verify_checksums else 0))
        steps.append((L.embd_options_set_prepack_weights, 1 if self.prepack_weights else 0))
        steps.append((L.embd_options_set_precision, PRECISIONS[self.precision]))
        if self.dimensions is not None:
            steps.append((L.embd_options_set_dimensions, self.dimensions))
        if self.matryoshka is not None:
            steps.append((L.embd_options_set_matryoshka, _cstr(self.matryoshka, "matryoshka")))
        if self.prompt is not None:
            steps.append((L.embd_options_set_prompt, _cstr(self.prompt, "prompt")))
        if self.prompt_name is not None:
            steps.append((L.embd_options_set_prompt_name, _cstr(self.prompt_name, "prompt_name")))
        if self.window_overlap is not None:
            steps.append((lambda o, v: L.embd_options_set_windows(o, 1, v), self.window_overlap))
        if self.output_ranges is not None:
            r = (ctypes.c_float * len(self.output_ranges))(*self.output_ranges)
            steps.append((lambda o, v: L.embd_options_set_output_ranges(o, v, len(v)), r))
        steps.append((lambda o, v: L.embd_options_set_progress(o, v, None), _PROGRESS))
        for setter, value in steps:
            raise_status(setter(opts, value))


def _cstr(text: str, what: str) -> bytes:
    data = _utf8(text, what)
    if b"\0" in data:
        raise InvalidArgumentError(Status.INVALID_ARGUMENT, f"{what} must not contain NUL")
    return data


def _ranges(value: Any) -> Optional[Tuple[float, ...]]:
    if value is None:
        return None
    a = np.asarray(value, dtype=np.float32)
    if a.ndim != 2 or a.shape[0] != 2:
        raise InvalidArgumentError(
            Status.INVALID_ARGUMENT,
            f"output_ranges must have shape (2, dim) (minima, maxima), got {a.shape}",
        )
    return tuple(float(x) for x in a.reshape(-1))


def _non_negative(name: str, value: Optional[int]) -> Optional[int]:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int or None, got {type(value).__name__}")
    if value < 0:
        raise InvalidArgumentError(Status.INVALID_ARGUMENT, f"{name} must be >= 0, got {value}")
    return value


class _Model:
    """One open ``embd_model`` handle; freed exactly once."""

    def __init__(self, path: bytes, options: _OpenOptions) -> None:
        L = lib()
        opts = L.embd_options_new()
        if not opts:
            raise_status(Status.INTERNAL)
        try:
            options.apply(opts)
            handle = ctypes.c_void_p()
            raise_status(L.embd_open(path, opts, ctypes.byref(handle)))
        finally:
            L.embd_options_free(opts)
        self.handle: Optional[int] = handle.value
        self._progress = _PROGRESS  # the handle's callback, kept alive with it

    def free(self) -> None:
        h, self.handle = self.handle, None
        if h is not None:
            lib().embd_free(h)


def _utf8(text: str, what: str) -> bytes:
    if not isinstance(text, str):
        raise TypeError(f"{what} must be str, got {type(text).__name__}")
    return text.encode("utf-8", "surrogatepass")


class Embedder:
    """A sentence-embedding model, loaded from a memory-mapped model file.

    ``model`` is a path to any supported file (EMBD ``.weights``, legacy
    cpp_embedder files, ...), or ``None`` for ``$EMBD_MODEL``. Keyword options:

    * ``threads``: worker threads per call (``None``: all CPUs);
    * ``max_seq_length``: token limit per text (``None``: the model's own);
    * ``normalize``: L2-normalize the vectors (default ``True``);
    * ``compute_precision`` (older name: ``precision``): arithmetic of the
      dense layers, ``"f32"``, ``"bf16"``, ``"int8"`` or ``None`` for the
      file's own (the output type is ``encode(precision=...)``);
    * ``verify_checksums``, ``prepack_weights``: as ``embd_options_set_*``;
    * ``dimensions`` (alias ``truncate_dim``): keep the first ``dimensions``
      components (Matryoshka), renormalized when the model normalizes;
      :attr:`dim` then is ``dimensions``;
    * ``matryoshka``: how a vector is cut to ``dimensions``: ``"truncate"``
      (the default, sentence-transformers' ``truncate_dim``) or
      ``"layer-norm"`` (nomic-embed-text-v1.5's recipe: layer norm without
      affine, cut, normalize; applied with or without ``dimensions``);
    * ``prompt``: text prepended to every text; ``prompt_name``: a prompt
      stored in the model file (not both); ``prompt=""`` turns the model's
      default prompt off;
    * ``window_overlap``: ``None`` truncates long texts to
      ``max_seq_length``; an int embeds them as windows sharing that many
      tokens, averaged;
    * ``output_ranges``: float32 array ``(2, dim)`` (minima, maxima) for
      ``encode(precision="int8"/"uint8")``, as sentence-transformers'
      ``ranges`` (else the ranges stored in the model file, if any).

    One embedder may be used from many Python threads at once; the computation
    runs without the GIL. :meth:`close` (or a ``with`` block) frees the model;
    using it afterwards raises :class:`~embedder.ClosedError`.
    """

    def __init__(
        self,
        model: Optional[PathLike] = None,
        *,
        threads: Optional[int] = None,
        max_seq_length: Optional[int] = None,
        normalize: bool = True,
        precision: Optional[str] = None,
        verify_checksums: bool = True,
        prepack_weights: bool = True,
        compute_precision: Optional[str] = None,
        dimensions: Optional[int] = None,
        truncate_dim: Optional[int] = None,
        matryoshka: Optional[str] = None,
        prompt: Optional[str] = None,
        prompt_name: Optional[str] = None,
        window_overlap: Optional[int] = None,
        output_ranges: Optional[npt.ArrayLike] = None,
    ) -> None:
        self._lock = threading.Lock()
        self._model: Optional[_Model] = None
        self._twin: Optional[_Model] = None
        if model is None:
            env = os.environ.get("EMBD_MODEL")
            if not env:
                raise InvalidArgumentError(
                    Status.INVALID_ARGUMENT, "no model given: pass a path or set EMBD_MODEL"
                )
            model = env
        if compute_precision is not None and precision is not None:
            if compute_precision != precision:
                raise InvalidArgumentError(
                    Status.INVALID_ARGUMENT,
                    "precision is the older name of compute_precision: give one of them",
                )
        if compute_precision is not None:
            precision = compute_precision
        if dimensions is not None and truncate_dim is not None and dimensions != truncate_dim:
            raise InvalidArgumentError(
                Status.INVALID_ARGUMENT, "truncate_dim is an alias of dimensions: give one of them"
            )
        dims = _non_negative("dimensions", dimensions if dimensions is not None else truncate_dim)
        prec = "default" if precision is None else precision
        if prec not in PRECISIONS:
            raise InvalidArgumentError(
                Status.INVALID_ARGUMENT,
                f"precision {precision!r} is not supported; accepted: f32, bf16, int8, None",
            )
        self._path = os.fsencode(os.fspath(model))
        self._options = _OpenOptions(
            threads=_non_negative("threads", threads),
            max_seq_length=_non_negative("max_seq_length", max_seq_length),
            normalize=bool(normalize),
            precision=prec,
            verify_checksums=bool(verify_checksums),
            prepack_weights=bool(prepack_weights),
            dimensions=dims,
            matryoshka=matryoshka,
            prompt=prompt,
            prompt_name=prompt_name,
            window_overlap=_non_negative("window_overlap", window_overlap),
            output_ranges=_ranges(output_ranges),
        )
        self._model = _Model(self._path, self._options)
        h = self._model.handle
        L = lib()
        self._dim = int(L.embd_dim(h))
        self._max_seq_length = int(L.embd_max_seq_length(h))

    # ------------------------------------------------------------------ life

    def close(self) -> None:
        """Frees the model. Idempotent. Calls running in other threads finish
        (the library keeps the model alive for them); later calls raise."""
        with self._lock:
            model, twin = self._model, self._twin
            self._model = self._twin = None
        for m in (model, twin):
            if m is not None:
                m.free()

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._model is None

    def __enter__(self) -> "Embedder":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        if getattr(self, "_lock", None) is not None:
            try:
                self.close()
            except Exception:  # interpreter shutdown: module globals may be gone
                pass

    def __repr__(self) -> str:
        state = (
            "closed" if self.closed else f"dim={self._dim}, max_seq_length={self._max_seq_length}"
        )
        return f"Embedder({os.fsdecode(self._path)!r}, {state})"

    def _handle(self, normalize: Optional[bool] = None) -> int:
        """The handle to encode with: the model's, or for a per-call
        normalization other than the one the model was opened with, a second
        handle of the same file opened with it (once, on first use)."""
        model = self._model
        if model is None or model.handle is None:
            raise ClosedError(Status.INVALID_HANDLE, "the embedder is closed")
        if normalize is None or bool(normalize) == self._options.normalize:
            return model.handle
        with self._lock:
            if self._model is None:
                raise ClosedError(Status.INVALID_HANDLE, "the embedder is closed")
            if self._twin is None:
                self._twin = _Model(self._path, replace(self._options, normalize=bool(normalize)))
            twin = self._twin.handle
        assert twin is not None
        return twin

    # ---------------------------------------------------------------- facts

    @property
    def dim(self) -> int:
        """Length of a vector."""
        self._handle()
        return self._dim

    def get_sentence_embedding_dimension(self) -> int:
        """sentence-transformers' name for :attr:`dim`."""
        return self.dim

    @property
    def max_seq_length(self) -> int:
        """Tokens per text (``[CLS]`` and ``[SEP]`` included); longer texts are truncated."""
        self._handle()
        return self._max_seq_length

    @property
    def precision(self) -> str:
        """The precision the model runs: ``"f32"``, ``"bf16"`` or ``"int8"``."""
        L = lib()
        name = L.embd_precision_name(L.embd_model_precision(self._handle()))
        return str(name.decode()) if name else "unknown"

    @property
    def info(self) -> Dict[str, Any]:
        """The model's metadata."""
        L = lib()
        h = self._handle()
        name = L.embd_model_name(h)
        pooling = L.embd_pooling(h)
        return {
            "model_name": name.decode("utf-8", "replace") if name else "",
            "embedding_dim": self._dim,
            "max_seq_length": self._max_seq_length,
            "num_layers": int(L.embd_num_layers(h)),
            "num_attention_heads": int(L.embd_num_heads(h)),
            "vocab_size": int(L.embd_vocab_size(h)),
            "pooling": pooling.decode() if pooling else "",
            "normalize": bool(L.embd_normalizes(h)),
            "precision": self.precision,
            "path": os.fsdecode(self._path),
        }

    # ------------------------------------------------------------- tokenize

    def tokenize(self, text: str) -> List[int]:
        """Token ids as the model sees them: ``[CLS]``, the WordPiece ids
        truncated to ``max_seq_length - 2``, ``[SEP]``."""
        data = _utf8(text, "text")
        h = self._handle()
        L = lib()
        cap = self._max_seq_length
        ids = (ctypes.c_uint32 * cap)()
        n = ctypes.c_size_t()
        raise_status(L.embd_tokenize(h, data, len(data), ids, cap, ctypes.byref(n)))
        return list(ids[: n.value])

    def count_tokens(self, text: str) -> int:
        """Number of tokens of a text (``[CLS]``/``[SEP]`` included, after truncation)."""
        data = _utf8(text, "text")
        n = ctypes.c_size_t()
        raise_status(lib().embd_count_tokens(self._handle(), data, len(data), ctypes.byref(n)))
        return int(n.value)

    # --------------------------------------------------------------- encode

    @overload
    def encode(
        self,
        texts: Union[str, Sequence[str]],
        *,
        batch_size: int = ...,
        normalize_embeddings: Optional[bool] = ...,
        show_progress_bar: bool = ...,
        out: Optional[npt.NDArray[Any]] = ...,
        precision: str = ...,
        return_token_info: Literal[False] = ...,
        progress_callback: Optional[ProgressCallback] = ...,
        prompt: Optional[str] = ...,
        prompt_name: Optional[str] = ...,
        dimensions: Optional[int] = ...,
        truncation: Optional[str] = ...,
        output: Literal["dense"] = ...,
        task: Optional[str] = ...,
    ) -> npt.NDArray[Any]: ...

    @overload
    def encode(
        self,
        texts: Union[str, Sequence[str]],
        *,
        batch_size: int = ...,
        normalize_embeddings: Optional[bool] = ...,
        show_progress_bar: bool = ...,
        out: Optional[npt.NDArray[Any]] = ...,
        precision: str = ...,
        return_token_info: Literal[True],
        progress_callback: Optional[ProgressCallback] = ...,
        prompt: Optional[str] = ...,
        prompt_name: Optional[str] = ...,
        dimensions: Optional[int] = ...,
        truncation: Optional[str] = ...,
        output: Literal["dense"] = ...,
        task: Optional[str] = ...,
    ) -> Tuple[npt.NDArray[Any], npt.NDArray[np.int64], npt.NDArray[np.bool_]]: ...

    @overload
    def encode(
        self,
        texts: Union[str, Sequence[str]],
        *,
        batch_size: int = ...,
        prompt: Optional[str] = ...,
        prompt_name: Optional[str] = ...,
        truncation: Optional[str] = ...,
        output: Literal["sparse", "multi-vector", "multi_vector", "colbert"],
        task: Optional[str] = ...,
        top_k: Optional[int] = ...,
        as_csr: bool = ...,
    ) -> Any: ...

    def encode(
        self,
        texts: Union[str, Sequence[str]],
        *,
        batch_size: int = 64,
        normalize_embeddings: Optional[bool] = None,
        show_progress_bar: bool = False,
        out: Optional[npt.NDArray[Any]] = None,
        precision: str = "float32",
        return_token_info: bool = False,
        progress_callback: Optional[ProgressCallback] = None,
        prompt: Optional[str] = None,
        prompt_name: Optional[str] = None,
        dimensions: Optional[int] = None,
        truncation: Optional[str] = None,
        output: str = "dense",
        task: Optional[str] = None,
        top_k: Optional[int] = None,
        as_csr: bool = False,
    ) -> Any:
        """Embeds texts. A ``str`` gives an array of shape ``(dim,)``, a
        sequence of ``n`` strings ``(n, dim)``. The library writes straight into
        the returned array, or into ``out`` (of that dtype and shape,
        C-contiguous, writable) when given, which is then returned.

        ``precision`` is the output type, as sentence-transformers'
        ``quantize_embeddings``: ``"float32"`` (default), ``"int8"`` /
        ``"uint8"`` (one byte per component; need ``output_ranges`` or ranges
        stored in the model file), ``"binary"`` (int8) / ``"ubinary"`` (uint8):
        the bits ``x > 0`` packed 8 per byte, ``(dim + 7) // 8`` bytes.

        ``batch_size`` texts go to the library per call (each call uses the
        embedder's threads); ``normalize_embeddings`` overrides the embedder's
        ``normalize`` for this call (``None``: keep it). A vector does not
        depend on the batch it is computed in.

        ``return_token_info=True`` returns ``(vectors, tokens, truncated)``:
        per text the number of tokens the model saw (int64, ``[CLS]``/``[SEP]``
        and the prompt included) and whether it was cut at ``max_seq_length``
        (bool); 0-d arrays for a ``str``.

        Per-call options, on the one open model (no second handle): ``prompt``
        / ``prompt_name`` replace the prompt the embedder was opened with
        (``prompt=""``: none); ``dimensions`` keeps the first components of
        the model's full vector (renormalized when normalizing);
        ``truncation`` is ``"right"`` (keep the first tokens, the default),
        ``"left"`` (keep the last) or ``"refuse"`` (a longer text raises
        :class:`~embedder.InvalidArgumentError` with status
        ``LIMIT_EXCEEDED``). These apply to ``float32`` output only.

        ``show_progress_bar`` prints progress to stderr; ``progress_callback``
        is called as ``callback(done, total)`` (texts of this call, rising)
        while the library works; returning ``True`` or raising cancels the call
        with :class:`~embedder.CancelledError` (the raised exception as its
        ``__cause__``). Ctrl-C during the call stops it and raises
        ``KeyboardInterrupt``.

        ``output`` is ``"dense"`` (the vectors above), ``"sparse"``
        (:meth:`encode_sparse`, with ``top_k`` and ``as_csr``) or
        ``"multi-vector"`` (:meth:`encode_multi_vector`); ``task`` is
        ``"query"`` / ``"document"`` (sentence-transformers'
        ``encode_query`` / ``encode_document``; for dense vectors: the model's
        prompt of that name, if it stores one).
        """
        output = _outputs.output_name(output)
        if output == "sparse":
            return self.encode_sparse(
                texts,
                task=task,
                top_k=top_k,
                batch_size=batch_size,
                prompt=prompt,
                prompt_name=prompt_name,
                truncation=truncation,
                as_csr=as_csr,
            )
        if output == "multi-vector":
            return self.encode_multi_vector(
                texts,
                task=task,
                batch_size=batch_size,
                prompt=prompt,
                prompt_name=prompt_name,
                truncation=truncation,
            )
        if top_k is not None or as_csr:
            raise InvalidArgumentError(
                Status.INVALID_ARGUMENT, "top_k and as_csr apply to output='sparse' only"
            )
        if task is not None and prompt is None and prompt_name is None:
            prompt_name = self._task_prompt(task)
        single, items = _texts_arg(texts, batch_size)
        if precision not in OUTPUT_PRECISIONS:
            raise InvalidArgumentError(
                Status.INVALID_ARGUMENT,
                f"precision {precision!r} is not an output precision; accepted: "
                + ", ".join(OUTPUT_PRECISIONS),
            )
        code, dtype = OUTPUT_PRECISIONS[precision]
        data = [_utf8(t, f"texts[{i}]") for i, t in enumerate(items)]
        n = len(data)
        per_call = (prompt, prompt_name, dimensions, truncation) != (None, None, None, None)
        if per_call and code != 0:
            raise InvalidArgumentError(
                Status.INVALID_ARGUMENT,
                "prompt, prompt_name, dimensions and truncation apply to float32 output only",
            )
        call = None
        if code == 0 and (per_call or self._options.window_overlap is None):
            # float32: every per-call option (normalize too) goes through one
            # embd_call_options on the model's own handle (a windowed model
            # takes none: its per-call normalize uses a second handle).
            h = self._handle()
            call = _CallOptions(normalize_embeddings, prompt, prompt_name, dimensions, truncation)
        else:
            h = self._handle(normalize_embeddings)
        tokens = np.zeros(n, np.uintp)  # size_t
        truncated = np.zeros(n, np.uint8)
        bar = _Progress(n) if show_progress_bar else None
        try:
            dim = self._dim if call is None else call.dim(h)
            width = dim if precision in ("float32", "int8", "uint8") else (dim + 7) // 8
            shape = (width,) if single else (n, width)
            result = _check_out(out, shape, dtype) if out is not None else np.empty(shape, dtype)
            self._encode_batches(
                h,
                call,
                code,
                data,
                result.reshape(n, width),
                tokens,
                truncated,
                return_token_info,
                batch_size,
                bar,
                progress_callback,
            )
        finally:
            if call is not None:
                call.free()
        if bar is not None:
            bar.done()
        if not return_token_info:
            return result
        tok = tokens.astype(np.int64)
        trunc = truncated.astype(np.bool_)
        if single:
            return result, tok.reshape(()), trunc.reshape(())
        return result, tok, trunc

    def _encode_batches(
        self,
        h: int,
        call: Optional["_CallOptions"],
        code: int,
        data: List[bytes],
        flat: npt.NDArray[Any],
        tokens: npt.NDArray[Any],
        truncated: npt.NDArray[Any],
        return_token_info: bool,
        batch_size: int,
        bar: Optional["_Progress"],
        progress_callback: Optional[ProgressCallback],
    ) -> None:
        L = lib()
        n = len(data)
        with _Watch(n, bar, progress_callback) as watch:
            for start in range(0, n, batch_size):
                chunk = data[start : start + batch_size]
                k = len(chunk)
                arr = (EmbdText * k)(*[EmbdText(b, len(b)) for b in chunk])
                dest = flat[start : start + k]
                tok_p = tokens[start:].ctypes.data_as(c_size_p) if return_token_info else None
                tr_p = truncated[start:].ctypes.data_as(c_uint8_p) if return_token_info else None
                watch.start = start
                if call is not None:
                    ptr = dest.ctypes.data_as(c_float_p)
                    status = L.embd_encode_with(h, call.handle, arr, k, ptr, dest.size, tok_p, tr_p)
                elif code == 0:
                    ptr = dest.ctypes.data_as(c_float_p)
                    status = L.embd_encode_ex(h, arr, k, ptr, dest.size, tok_p, tr_p)
                else:
                    vptr = dest.ctypes.data_as(ctypes.c_void_p)
                    status = L.embd_encode_quantized(h, arr, k, code, vptr, dest.size, tok_p, tr_p)
                watch.check(status)

    @overload
    def encode_tokens(  # type: ignore[overload-overlap]  # a str is a Sequence[str]
        self,
        texts: str,
        *,
        batch_size: int = ...,
        normalize_embeddings: Optional[bool] = ...,
        prompt: Optional[str] = ...,
        prompt_name: Optional[str] = ...,
        dimensions: Optional[int] = ...,
        truncation: Optional[str] = ...,
    ) -> FloatArray: ...

    @overload
    def encode_tokens(
        self,
        texts: Sequence[str],
        *,
        batch_size: int = ...,
        normalize_embeddings: Optional[bool] = ...,
        prompt: Optional[str] = ...,
        prompt_name: Optional[str] = ...,
        dimensions: Optional[int] = ...,
        truncation: Optional[str] = ...,
    ) -> List[FloatArray]: ...

    def encode_tokens(
        self,
        texts: Union[str, Sequence[str]],
        *,
        batch_size: int = 64,
        normalize_embeddings: Optional[bool] = None,
        prompt: Optional[str] = None,
        prompt_name: Optional[str] = None,
        dimensions: Optional[int] = None,
        truncation: Optional[str] = None,
    ) -> Union[FloatArray, List[FloatArray]]:
        """Token vectors, un-pooled, as sentence-transformers'
        ``encode(output_value="token_embeddings")``: the last hidden state of
        every token the model sees (``[CLS]``/``[SEP]`` and the prompt's tokens
        included). A ``str`` gives a float32 array of shape ``(tokens, dim)``,
        a sequence a list of such arrays (``embd_encode_tokens``).

        ``prompt``, ``prompt_name``, ``dimensions`` and ``truncation`` are
        those of :meth:`encode`; the vectors are normalized (each token's)
        only with ``normalize_embeddings=True`` (the model's Normalize module
        is for sentence vectors). A text's vectors do not depend on its batch.
        """
        single, items = _texts_arg(texts, batch_size)
        data = [_utf8(t, f"texts[{i}]") for i, t in enumerate(items)]
        L = lib()
        h = self._handle()
        call = _CallOptions(normalize_embeddings, prompt, prompt_name, dimensions, truncation)
        result: List[FloatArray] = []
        try:
            dim = call.dim(h)
            for start in range(0, len(data), batch_size):
                chunk = data[start : start + batch_size]
                k = len(chunk)
                arr = (EmbdText * k)(*[EmbdText(b, len(b)) for b in chunk])
                tokens = np.zeros(k, np.uintp)  # size_t
                need = ctypes.c_size_t(0)
                # The size first (the texts' token counts), then the vectors.
                status = L.embd_encode_tokens(
                    h,
                    call.handle,
                    arr,
                    k,
                    None,
                    0,
                    ctypes.byref(need),
                    tokens.ctypes.data_as(c_size_p),
                    None,
                )
                if status != Status.BUFFER_TOO_SMALL:
                    raise_status(status)
                flat = np.empty(need.value, np.float32)
                raise_status(
                    L.embd_encode_tokens(
                        h,
                        call.handle,
                        arr,
                        k,
                        flat.ctypes.data_as(c_float_p),
                        flat.size,
                        ctypes.byref(need),
                        None,
                        None,
                    )
                )
                at = 0
                for t in tokens.tolist():
                    result.append(flat[at : at + t * dim].reshape(t, dim))
                    at += t * dim
        finally:
            call.free()
        return result[0] if single else result

    def similarity(self, a: npt.ArrayLike, b: npt.ArrayLike) -> Union[float, FloatArray]:
        """Cosine similarity; see :func:`embedder.similarity`."""
        return similarity(a, b)

    # ------------------------------------------- sparse and multi-vector

    @property
    def outputs(self) -> List[str]:
        """The outputs this model has: ``"dense"`` (every embedding model),
        ``"sparse"`` (SPLADE, BGE-M3), ``"multi-vector"`` (ColBERT, BGE-M3)."""
        return _outputs.model_outputs(self._handle())

    def encode_sparse(
        self,
        texts: Union[str, Sequence[str]],
        *,
        task: Optional[str] = None,
        top_k: Optional[int] = None,
        batch_size: int = 64,
        prompt: Optional[str] = None,
        prompt_name: Optional[str] = None,
        truncation: Optional[str] = None,
        as_csr: bool = False,
    ) -> Any:
        """Sparse vectors (sentence-transformers' ``SparseEncoder``; BGE-M3's
        lexical weights): for a ``str`` one ``(indices, values)`` pair (uint32
        ids ascending, float32 weights), for a sequence a list of pairs, or
        with ``as_csr=True`` a ``scipy.sparse.csr_matrix`` of shape
        ``(n, vocab_size)``. ``task`` is ``"query"`` / ``"document"``
        (``encode_query`` / ``encode_document``: an inference-free model's
        query route, the model's prompt of that name); ``top_k`` keeps the
        largest weights (``max_active_dims``)."""
        single, items = _texts_arg(texts, batch_size)
        data = [_utf8(t, f"texts[{i}]") for i, t in enumerate(items)]
        code = _outputs.task_code(task)
        k = _non_negative("top_k", top_k)
        if k == 0:
            raise InvalidArgumentError(Status.INVALID_ARGUMENT, "top_k must be at least 1")
        h = self._handle()
        call = _CallOptions(None, prompt, prompt_name, None, truncation)
        try:
            pairs = _outputs.encode_sparse(h, call.handle, code, data, k or 0, batch_size)
        finally:
            call.free()
        if as_csr:
            return _outputs.to_csr(pairs, int(lib().embd_vocab_size(h)))
        return pairs[0] if single else pairs

    def encode_multi_vector(
        self,
        texts: Union[str, Sequence[str]],
        *,
        task: Optional[str] = None,
        batch_size: int = 32,
        prompt: Optional[str] = None,
        prompt_name: Optional[str] = None,
        truncation: Optional[str] = None,
    ) -> Union[FloatArray, List[FloatArray]]:
        """Multi-vectors (ColBERT; BGE-M3's ColBERT vectors): for a ``str``
        a float32 array ``(vectors, dim)``, for a sequence a list of them.
        ``task="query"`` frames ColBERT queries (marker, ``[MASK]``
        expansion), ``"document"`` (the default for ColBERT) documents
        (marker, punctuation skip-list). Score with :func:`max_sim`."""
        single, items = _texts_arg(texts, batch_size)
        data = [_utf8(t, f"texts[{i}]") for i, t in enumerate(items)]
        code = _outputs.task_code(task)
        h = self._handle()
        call = _CallOptions(None, prompt, prompt_name, None, truncation)
        try:
            vecs = _outputs.encode_multi_vector(
                h, call.handle, code, data, batch_size, self._max_seq_length
            )
        finally:
            call.free()
        return vecs[0] if single else vecs

    def encode_query(self, texts: Union[str, Sequence[str]], **kwargs: Any) -> Any:
        """sentence-transformers' ``encode_query``: :meth:`encode` with
        ``task="query"`` (``output`` defaults to the model's first output)."""
        kwargs.setdefault("output", self.outputs[0])
        return self.encode(texts, task="query", **kwargs)

    def encode_document(self, texts: Union[str, Sequence[str]], **kwargs: Any) -> Any:
        """sentence-transformers' ``encode_document``: :meth:`encode` with
        ``task="document"``."""
        kwargs.setdefault("output", self.outputs[0])
        return self.encode(texts, task="document", **kwargs)

    def _task_prompt(self, task: Optional[str]) -> Optional[str]:
        """The prompt name a dense call with ``task`` takes: the task's name
        when the model stores a prompt of that name."""
        if task is None:
            return None
        _outputs.task_code(task)
        call = _CallOptions(None, None, task, None, None)
        try:
            call.dim(self._handle())
            return task
        except InvalidArgumentError:
            return None
        finally:
            call.free()


def _texts_arg(texts: Union[str, Sequence[str]], batch_size: int) -> Tuple[bool, Sequence[str]]:
    """``(single, items)`` of an encode call's ``texts``, with ``batch_size``
    checked."""
    single = isinstance(texts, str)
    items: Sequence[str] = [texts] if single else texts  # type: ignore[list-item]
    if isinstance(items, (bytes, bytearray)):
        raise TypeError("texts must be str or a sequence of str, not bytes")
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise InvalidArgumentError(
            Status.INVALID_ARGUMENT, f"batch_size must be an int >= 1, got {batch_size!r}"
        )
    return single, items


TRUNCATIONS = {"right": 0, "left": 1, "refuse": 2}


class _CallOptions:
    """One ``embd_call_options`` for one :meth:`Embedder.encode` call."""

    def __init__(
        self,
        normalize: Optional[bool],
        prompt: Optional[str],
        prompt_name: Optional[str],
        dimensions: Optional[int],
        truncation: Optional[str],
    ) -> None:
        if truncation is not None and truncation not in TRUNCATIONS:
            raise InvalidArgumentError(
                Status.INVALID_ARGUMENT,
                f"truncation {truncation!r} is not supported; accepted: right, left, refuse",
            )
        dims = _non_negative("dimensions", dimensions)
        if dims == 0:
            raise InvalidArgumentError(Status.INVALID_ARGUMENT, "dimensions must be at least 1")
        L = lib()
        h = L.embd_call_options_new()
        if not h:
            raise_status(Status.INTERNAL)
        self.handle: Optional[int] = h
        try:
            if normalize is not None:
                raise_status(L.embd_call_options_set_normalize(h, 1 if normalize else 0))
            if dims is not None:
                raise_status(L.embd_call_options_set_dimensions(h, dims))
            if prompt is not None:
                raise_status(L.embd_call_options_set_prompt(h, _cstr(prompt, "prompt")))
            if prompt_name is not None:
                raise_status(
                    L.embd_call_options_set_prompt_name(h, _cstr(prompt_name, "prompt_name"))
                )
            if truncation is not None:
                raise_status(L.embd_call_options_set_truncation(h, TRUNCATIONS[truncation]))
        except BaseException:
            self.free()
            raise

    def dim(self, model: int) -> int:
        d = ctypes.c_size_t(0)
        raise_status(lib().embd_call_dim(model, self.handle, ctypes.byref(d)))
        return int(d.value)

    def free(self) -> None:
        if self.handle is not None:
            lib().embd_call_options_free(self.handle)
            self.handle = None


def _check_out(out: Any, shape: Tuple[int, ...], dtype: Any) -> npt.NDArray[Any]:
    if not isinstance(out, np.ndarray):
        raise InvalidArgumentError(
            Status.INVALID_ARGUMENT, f"out must be a numpy.ndarray, got {type(out).__name__}"
        )
    if out.dtype != dtype:
        raise InvalidArgumentError(
            Status.INVALID_ARGUMENT, f"out must have dtype {np.dtype(dtype)}, got {out.dtype}"
        )
    if out.shape != shape:
        raise InvalidArgumentError(
            Status.INVALID_ARGUMENT, f"out must have shape {shape}, got {out.shape}"
        )
    if not out.flags.c_contiguous or not out.flags.writeable:
        raise InvalidArgumentError(Status.INVALID_ARGUMENT, "out must be C-contiguous and writable")
    return out


class _Watch:
    """One encode call's progress and cancellation: installs the per-call hook
    the trampoline forwards to, and (on the main thread, when Python's own
    handler is in place) a SIGINT handler that only sets a flag the trampoline
    turns into a cancellation; KeyboardInterrupt is raised after the library
    returned."""

    def __init__(
        self, total: int, bar: Optional["_Progress"], callback: Optional[ProgressCallback]
    ) -> None:
        self.total = total
        self.bar = bar
        self.callback = callback
        self.start = 0
        self._saved: Tuple[Any, bool, Optional[BaseException]] = (None, False, None)
        self._old_handler: Any = None

    def _hook(self, done: int, _batch_total: int) -> bool:
        now = self.start + done
        if self.bar is not None:
            self.bar.update(now)
        return self.callback is not None and bool(self.callback(now, self.total))

    def __enter__(self) -> "_Watch":
        st = _state
        self._saved = (st.hook, st.interrupted, st.error)
        st.hook = self._hook if (self.bar is not None or self.callback is not None) else None
        st.interrupted = False
        st.error = None
        if (
            threading.current_thread() is threading.main_thread()
            and signal.getsignal(signal.SIGINT) is signal.default_int_handler
        ):
            self._old_handler = signal.signal(signal.SIGINT, _on_sigint)
        return self

    def check(self, status: int) -> None:
        st = _state
        if st.interrupted:
            raise KeyboardInterrupt
        err, st.error = st.error, None
        if err is not None:
            if isinstance(err, KeyboardInterrupt):
                raise err
            raise CancelledError(
                Status.CANCELLED, f"encode cancelled: progress_callback raised {err!r}"
            ) from err
        raise_status(status)

    def __exit__(self, exc_type: Any, *exc: object) -> None:
        if self._old_handler is not None:
            signal.signal(signal.SIGINT, self._old_handler)
        st = _state
        interrupted = st.interrupted
        st.hook, st.interrupted, st.error = self._saved
        if interrupted and exc_type is None:
            raise KeyboardInterrupt


def _on_sigint(signum: int, frame: Optional[FrameType]) -> None:
    _state.interrupted = True


class _Progress:
    def __init__(self, total: int) -> None:
        self.total = total

    def update(self, done: int) -> None:
        sys.stderr.write(f"\rencode: {done}/{self.total} texts")
        sys.stderr.flush()

    def done(self) -> None:
        sys.stderr.write("\n")
        sys.stderr.flush()


def similarity(a: npt.ArrayLike, b: npt.ArrayLike) -> Union[float, FloatArray]:
    """Cosine similarity. Two vectors give a ``float`` (computed by the library,
    in double precision); otherwise 1-D inputs count as one row and the result
    is the float32 matrix ``[len(a), len(b)]`` of row cosines (0 for a zero row).
    """
    x = np.asarray(a, dtype=np.float32)
    y = np.asarray(b, dtype=np.float32)
    if x.ndim not in (1, 2) or y.ndim not in (1, 2):
        raise InvalidArgumentError(Status.INVALID_ARGUMENT, "similarity takes 1-D or 2-D arrays")
    if x.shape[-1] != y.shape[-1]:
        raise InvalidArgumentError(
            Status.INVALID_ARGUMENT,
            f"similarity: vectors of different lengths ({x.shape[-1]} and {y.shape[-1]})",
        )
    if x.ndim == 1 and y.ndim == 1:
        xc = np.ascontiguousarray(x)
        yc = np.ascontiguousarray(y)
        s = ctypes.c_float()
        raise_status(
            lib().embd_similarity(
                xc.ctypes.data_as(c_float_p), yc.ctypes.data_as(c_float_p), xc.size, ctypes.byref(s)
            )
        )
        return float(s.value)
    x2 = np.atleast_2d(x).astype(np.float64)
    y2 = np.atleast_2d(y).astype(np.float64)
    nx = np.linalg.norm(x2, axis=1, keepdims=True)
    ny = np.linalg.norm(y2, axis=1, keepdims=True)
    xn = np.divide(x2, nx, out=np.zeros_like(x2), where=nx > 0)
    yn = np.divide(y2, ny, out=np.zeros_like(y2), where=ny > 0)
    res: FloatArray = (xn @ yn.T).astype(np.float32)
    return res
