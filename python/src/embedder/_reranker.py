"""The :class:`Reranker`: a cross-encoder opened through the C API
(``embd_rerank_*``), with sentence-transformers' ``CrossEncoder`` shapes."""

from __future__ import annotations

import ctypes
import os
import threading
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

from ._embedder import (
    _PROGRESS,
    PRECISIONS,
    PathLike,
    ProgressCallback,
    _cstr,
    _non_negative,
    _Progress,
    _utf8,
    _Watch,
)
from ._native import EmbdRanked, EmbdText, c_float_p, c_size_p, c_uint8_p, c_uint32_p, lib
from .errors import ClosedError, InvalidArgumentError, Status, raise_status

__all__ = ["Reranker"]

Pair = Union[Tuple[str, str], Sequence[str]]


def _texts(items: Sequence[bytes]) -> "ctypes.Array[EmbdText]":
    return (EmbdText * len(items))(*[EmbdText(b, len(b)) for b in items])


class Reranker:
    """A cross-encoder (reranker) loaded from a model file converted from a HF
    ``*ForSequenceClassification`` folder. Scores are those of
    sentence-transformers' ``CrossEncoder``.

    ``model`` is a path (``None``: ``$EMBD_RERANK_MODEL``). Keyword options:

    * ``threads``: worker threads per call (``None``: all CPUs);
    * ``max_length``: tokens of a pair, special tokens included, as
      ``CrossEncoder(max_length=...)`` (``None``: the model's own);
    * ``compute_precision``: ``"f32"``, ``"bf16"``, ``"int8"`` or ``None``
      (the file's own);
    * ``verify_checksums``, ``prepack_weights``: as ``embd_options_set_*``;
    * ``prompt``: an LLM reranker's instruction for every call (Qwen3-Reranker;
      ``None``: the model's default); refused by other cross-encoders.
    """

    def __init__(
        self,
        model: Optional[PathLike] = None,
        *,
        threads: Optional[int] = None,
        max_length: Optional[int] = None,
        compute_precision: Optional[str] = None,
        verify_checksums: bool = True,
        prepack_weights: bool = True,
        prompt: Optional[str] = None,
    ) -> None:
        self._lock = threading.Lock()
        self._handle_value: Optional[int] = None
        if model is None:
            env = os.environ.get("EMBD_RERANK_MODEL")
            if not env:
                raise InvalidArgumentError(
                    Status.INVALID_ARGUMENT, "no model given: pass a path or set EMBD_RERANK_MODEL"
                )
            model = env
        prec = "default" if compute_precision is None else compute_precision
        if prec not in PRECISIONS:
            raise InvalidArgumentError(
                Status.INVALID_ARGUMENT,
                f"compute_precision {compute_precision!r} is not supported; "
                "accepted: f32, bf16, int8, None",
            )
        self._path = os.fsencode(os.fspath(model))
        threads = _non_negative("threads", threads)
        max_length = _non_negative("max_length", max_length)
        L = lib()
        opts = L.embd_options_new()
        if not opts:
            raise_status(Status.INTERNAL)
        try:
            if threads is not None:
                raise_status(L.embd_options_set_threads(opts, threads))
            if max_length is not None:
                raise_status(L.embd_options_set_max_seq_length(opts, max_length))
            raise_status(L.embd_options_set_precision(opts, PRECISIONS[prec]))
            raise_status(L.embd_options_set_verify_checksums(opts, 1 if verify_checksums else 0))
            raise_status(L.embd_options_set_prepack_weights(opts, 1 if prepack_weights else 0))
            raise_status(L.embd_options_set_progress(opts, _PROGRESS, None))
            if prompt is not None:
                raise_status(L.embd_options_set_prompt(opts, _cstr(prompt, "prompt")))
            handle = ctypes.c_void_p()
            raise_status(L.embd_rerank_open(self._path, opts, ctypes.byref(handle)))
        finally:
            L.embd_options_free(opts)
        self._handle_value = handle.value
        self._progress = _PROGRESS  # the handle's callback, kept alive with it
        self._num_labels = int(L.embd_rerank_num_labels(self._handle_value))
        self._max_length = int(L.embd_rerank_max_seq_length(self._handle_value))

    # ------------------------------------------------------------------ life

    def close(self) -> None:
        """Frees the model. Idempotent; later calls raise :class:`ClosedError`."""
        with self._lock:
            h, self._handle_value = self._handle_value, None
        if h is not None:
            lib().embd_rerank_free(h)

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._handle_value is None

    def __enter__(self) -> "Reranker":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        if getattr(self, "_lock", None) is not None:
            try:
                self.close()
            except Exception:  # interpreter shutdown
                pass

    def __repr__(self) -> str:
        state = "closed" if self.closed else f"num_labels={self._num_labels}"
        return f"Reranker({os.fsdecode(self._path)!r}, {state})"

    def _handle(self) -> int:
        h = self._handle_value
        if h is None:
            raise ClosedError(Status.INVALID_HANDLE, "the reranker is closed")
        return h

    # ---------------------------------------------------------------- facts

    @property
    def num_labels(self) -> int:
        """Scores per pair."""
        self._handle()
        return self._num_labels

    @property
    def max_length(self) -> int:
        """Tokens of a pair, special tokens included."""
        self._handle()
        return self._max_length

    def tokenize(self, query: str, passage: str) -> Tuple[List[int], List[int]]:
        """The pair as the model reads it: ``(input_ids, token_type_ids)``,
        special tokens included, cut to :attr:`max_length` by HF's
        ``longest_first`` truncation (as ``CrossEncoder``'s tokenizer call)."""
        q = _utf8(query, "query")
        p = _utf8(passage, "passage")
        h = self._handle()
        n = ctypes.c_size_t(0)
        cap = 64
        while True:
            ids = (ctypes.c_uint32 * cap)()
            types = (ctypes.c_uint32 * cap)()
            status = lib().embd_rerank_tokenize(
                h,
                EmbdText(q, len(q)),
                EmbdText(p, len(p)),
                ctypes.cast(ids, c_uint32_p),
                ctypes.cast(types, c_uint32_p),
                cap,
                ctypes.byref(n),
            )
            if status == Status.BUFFER_TOO_SMALL and n.value > cap:
                cap = n.value
                continue
            raise_status(status)
            return list(ids[: n.value]), list(types[: n.value])

    # ------------------------------------------------------------- scoring

    def predict(
        self,
        sentences: Union[Pair, Sequence[Pair]],
        *,
        batch_size: int = 32,
        show_progress_bar: bool = False,
        apply_softmax: bool = False,
        raw: bool = False,
        return_token_info: bool = False,
        progress_callback: Optional[ProgressCallback] = None,
        prompt: Optional[str] = None,
    ) -> Any:
        """Scores ``(query, passage)`` pairs as ``CrossEncoder.predict``: a
        float32 array of shape ``(n,)`` for a one-label model, ``(n,
        num_labels)`` otherwise; one pair (not in a list) gives one value (or
        row). ``raw=True`` gives the logits (the identity activation);
        ``apply_softmax`` applies a softmax over the labels of several-label
        models. ``return_token_info=True`` also returns each pair's token
        count (int64) and truncation flag (bool). ``batch_size`` pairs go to
        the library per call; a pair's score does not depend on its batch.
        ``prompt``: the instruction of an LLM reranker (Qwen3-Reranker, a
        CrossEncoder prompt; ``None``: the one set at open, else the model's);
        a cross-encoder without a prompt template refuses one.
        """
        pr = None if prompt is None else _cstr(prompt, "prompt")
        single = _is_single_pair(sentences)
        pairs: Sequence[Any] = [sentences] if single else sentences
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise InvalidArgumentError(
                Status.INVALID_ARGUMENT, f"batch_size must be an int >= 1, got {batch_size!r}"
            )
        qs: List[bytes] = []
        ps: List[bytes] = []
        for i, p in enumerate(pairs):
            if isinstance(p, (str, bytes)) or len(p) != 2:
                raise InvalidArgumentError(
                    Status.INVALID_ARGUMENT, f"pair {i} is not a (query, passage) pair"
                )
            qs.append(_utf8(p[0], f"pairs[{i}][0]"))
            ps.append(_utf8(p[1], f"pairs[{i}][1]"))
        n = len(qs)
        labels = self.num_labels
        h = self._handle()
        out = np.empty((n, labels), np.float32)
        tokens = np.zeros(n, np.uintp)
        truncated = np.zeros(n, np.uint8)
        L = lib()
        bar = _Progress(n) if show_progress_bar else None
        with _Watch(n, bar, progress_callback) as watch:
            for start in range(0, n, batch_size):
                k = len(qs[start : start + batch_size])
                dest = out[start : start + k]
                ptr = dest.ctypes.data_as(c_float_p)
                tok_p = tokens[start:].ctypes.data_as(c_size_p) if return_token_info else None
                tr_p = truncated[start:].ctypes.data_as(c_uint8_p) if return_token_info else None
                watch.start = start
                scores_p, logits_p = (None, ptr) if raw else (ptr, None)
                status = L.embd_rerank_score_prompted(
                    h,
                    pr,
                    _texts(qs[start : start + k]),
                    _texts(ps[start : start + k]),
                    k,
                    scores_p,
                    logits_p,
                    dest.size,
                    tok_p,
                    tr_p,
                )
                watch.check(status)
        if bar is not None:
            bar.done()
        if apply_softmax and labels > 1:
            e = np.exp(out - out.max(axis=1, keepdims=True))
            out = (e / e.sum(axis=1, keepdims=True)).astype(np.float32)
        result: Any = out[:, 0] if labels == 1 else out
        if single:
            result = result[0]
        if not return_token_info:
            return result
        tok = tokens.astype(np.int64)
        trunc = truncated.astype(np.bool_)
        if single:
            return result, tok.reshape(()), trunc.reshape(())
        return result, tok, trunc

    def rank(
        self,
        query: str,
        documents: Sequence[str],
        top_k: Optional[int] = None,
        return_documents: bool = False,
        *,
        raw: bool = False,
        show_progress_bar: bool = False,
        progress_callback: Optional[ProgressCallback] = None,
        prompt: Optional[str] = None,
    ) -> List[Dict[str, Any]]:
        """Ranks documents for a query as ``CrossEncoder.rank``: a list of
        ``{"corpus_id": i, "score": s}`` (and ``"text"`` with
        ``return_documents``), best first, ties by index; the first ``top_k``
        (``None``: all). ``raw=True`` ranks by
        logit and reports it as the score. An empty query, no documents, or a
        ``top_k`` of 0 or above the number of documents raise
        :class:`~embedder.InvalidArgumentError`. ``prompt``: as in
        :meth:`predict`.
        """
        pr = None if prompt is None else _cstr(prompt, "prompt")
        if isinstance(documents, str):
            raise TypeError("documents must be a sequence of str, not str")
        q = _utf8(query, "query")
        docs = [_utf8(d, f"documents[{i}]") for i, d in enumerate(documents)]
        n = len(docs)
        if top_k is not None:
            if isinstance(top_k, bool) or not isinstance(top_k, int):
                raise TypeError(f"top_k must be an int or None, got {type(top_k).__name__}")
        k = n if top_k is None else top_k
        if k < 0:
            raise InvalidArgumentError(Status.INVALID_ARGUMENT, f"top_k must be >= 1, got {k}")
        h = self._handle()
        out = (EmbdRanked * max(k, 1))()
        n_out = ctypes.c_size_t(0)
        bar = _Progress(n) if show_progress_bar else None
        with _Watch(n, bar, progress_callback) as watch:
            status = lib().embd_rerank_rank_prompted(
                h,
                pr,
                EmbdText(q, len(q)),
                _texts(docs),
                n,
                k,
                1 if raw else 0,
                out,
                len(out),
                ctypes.byref(n_out),
            )
            watch.check(status)
        if bar is not None:
            bar.done()
        result: List[Dict[str, Any]] = []
        for r in out[: n_out.value]:
            item: Dict[str, Any] = {"corpus_id": int(r.index), "score": float(r.score)}
            if return_documents:
                item["text"] = documents[int(r.index)]
            result.append(item)
        return result


def _is_single_pair(x: Any) -> bool:
    """One ``(query, passage)`` pair rather than a list of pairs (as
    sentence-transformers decides)."""
    if not isinstance(x, (list, tuple)):
        return True
    return len(x) > 0 and not isinstance(x[0], (list, tuple))
