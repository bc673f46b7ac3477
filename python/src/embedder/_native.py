"""Loading the shared library and declaring the C signatures (ctypes).

One native file serves both modules: ``embedder`` uses the ``embd_*`` API of
``include/embedder.h``, ``cpp_embedder`` the cpp_embedder compatibility API
(``include/cpp_embedder/c_api.h``) exported by the same library.

ctypes releases the GIL for the duration of every foreign call made through a
``ctypes.CDLL``, so encoding from several Python threads runs in parallel.
"""

from __future__ import annotations

import ctypes
import os
import sys
import threading
from pathlib import Path
from typing import Optional

__all__ = ["EmbdRanked", "EmbdText", "PROGRESS_FN", "lib", "lib_file_name", "library_path"]

c_size_p = ctypes.POINTER(ctypes.c_size_t)
c_float_p = ctypes.POINTER(ctypes.c_float)
c_uint32_p = ctypes.POINTER(ctypes.c_uint32)
c_uint8_p = ctypes.POINTER(ctypes.c_uint8)

#: ``embd_progress_fn``: ``int (*)(void *user, size_t done, size_t total)``.
PROGRESS_FN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_size_t)


class EmbdText(ctypes.Structure):
    """``embd_text``: a length-delimited UTF-8 text."""

    _fields_ = [("ptr", ctypes.c_char_p), ("len", ctypes.c_size_t)]


class EmbdRanked(ctypes.Structure):
    """``embd_ranked``: one document of a ranking."""

    _fields_ = [("index", ctypes.c_size_t), ("score", ctypes.c_float), ("logit", ctypes.c_float)]


def lib_file_name() -> str:
    """The library's file name on this platform."""
    if sys.platform == "darwin":
        return "libembedder.dylib"
    if sys.platform == "win32":
        return "embedder.dll"
    return "libembedder.so"


def library_path() -> Path:
    """Where the library is loaded from: ``$EMBEDDER_LIB_PATH`` when set (a
    development override), else the copy inside this package."""
    env = os.environ.get("EMBEDDER_LIB_PATH")
    if env:
        return Path(env)
    return Path(__file__).resolve().parent / lib_file_name()


_lock = threading.Lock()
_lib: Optional[ctypes.CDLL] = None


def lib() -> ctypes.CDLL:
    """The loaded library with every ``embd_*`` signature declared (loaded once)."""
    global _lib
    with _lock:
        if _lib is None:
            path = library_path()
            if not path.is_file():
                raise OSError(
                    f"{path} does not exist: the embedder package was installed without its "
                    "library (install it with pip install ./python from the repository), or "
                    "EMBEDDER_LIB_PATH points to a missing file"
                )
            _lib = _declare(ctypes.CDLL(str(path)))
        return _lib


def _fn(dll: ctypes.CDLL, name: str, restype: object, *argtypes: object) -> None:
    f = getattr(dll, name)
    f.restype = restype
    f.argtypes = list(argtypes)


def _declare(dll: ctypes.CDLL) -> ctypes.CDLL:
    vp = ctypes.c_void_p
    st = ctypes.c_int32
    sz = ctypes.c_size_t
    _fn(dll, "embd_options_new", vp)
    _fn(dll, "embd_options_free", None, vp)
    _fn(dll, "embd_options_set_threads", st, vp, sz)
    _fn(dll, "embd_options_set_max_seq_length", st, vp, sz)
    _fn(dll, "embd_options_set_normalize", st, vp, ctypes.c_int)
    _fn(dll, "embd_options_set_verify_checksums", st, vp, ctypes.c_int)
    _fn(dll, "embd_options_set_prepack_weights", st, vp, ctypes.c_int)
    _fn(dll, "embd_options_set_precision", st, vp, ctypes.c_int32)
    _fn(dll, "embd_options_set_dimensions", st, vp, sz)
    _fn(dll, "embd_options_set_prompt", st, vp, ctypes.c_char_p)
    _fn(dll, "embd_options_set_prompt_name", st, vp, ctypes.c_char_p)
    _fn(dll, "embd_options_set_matryoshka", st, vp, ctypes.c_char_p)
    _fn(dll, "embd_options_set_windows", st, vp, ctypes.c_int, sz)
    _fn(dll, "embd_options_set_output_ranges", st, vp, c_float_p, sz)
    _fn(dll, "embd_options_set_progress", st, vp, PROGRESS_FN, vp)
    _fn(dll, "embd_open", st, ctypes.c_char_p, vp, ctypes.POINTER(vp))
    _fn(dll, "embd_free", None, vp)
    for name in ("embd_dim", "embd_max_seq_length", "embd_num_layers", "embd_num_heads"):
        _fn(dll, name, sz, vp)
    _fn(dll, "embd_vocab_size", sz, vp)
    _fn(dll, "embd_model_name", ctypes.c_char_p, vp)
    _fn(dll, "embd_pooling", ctypes.c_char_p, vp)
    _fn(dll, "embd_normalizes", ctypes.c_int, vp)
    _fn(dll, "embd_model_precision", ctypes.c_int32, vp)
    _fn(dll, "embd_precision_name", ctypes.c_char_p, ctypes.c_int32)
    _fn(dll, "embd_encode_texts", st, vp, ctypes.POINTER(EmbdText), sz, c_float_p, sz)
    _fn(
        dll,
        "embd_encode_ex",
        st,
        vp,
        ctypes.POINTER(EmbdText),
        sz,
        c_float_p,
        sz,
        c_size_p,
        c_uint8_p,
    )
    _fn(dll, "embd_call_options_new", vp)
    _fn(dll, "embd_call_options_free", None, vp)
    _fn(dll, "embd_call_options_set_normalize", st, vp, ctypes.c_int)
    _fn(dll, "embd_call_options_set_dimensions", st, vp, sz)
    _fn(dll, "embd_call_options_set_prompt", st, vp, ctypes.c_char_p)
    _fn(dll, "embd_call_options_set_prompt_name", st, vp, ctypes.c_char_p)
    _fn(dll, "embd_call_options_set_truncation", st, vp, ctypes.c_int32)
    _fn(dll, "embd_call_dim", st, vp, vp, c_size_p)
    _fn(
        dll,
        "embd_encode_with",
        st,
        vp,
        vp,
        ctypes.POINTER(EmbdText),
        sz,
        c_float_p,
        sz,
        c_size_p,
        c_uint8_p,
    )
    _fn(
        dll,
        "embd_encode_tokens",
        st,
        vp,
        vp,
        ctypes.POINTER(EmbdText),
        sz,
        c_float_p,
        sz,
        c_size_p,
        c_size_p,
        c_uint8_p,
    )
    _fn(dll, "embd_output_len", st, vp, ctypes.c_int32, sz, c_size_p)
    _fn(dll, "embd_has_output", ctypes.c_int, vp, ctypes.c_char_p)
    _fn(dll, "embd_multi_vector_dim", sz, vp)
    _fn(
        dll,
        "embd_encode_sparse",
        st,
        vp,
        vp,
        ctypes.c_int32,
        ctypes.POINTER(EmbdText),
        sz,
        sz,
        c_size_p,
        c_uint32_p,
        c_float_p,
        sz,
        c_size_p,
    )
    _fn(
        dll,
        "embd_encode_multi_vector",
        st,
        vp,
        vp,
        ctypes.c_int32,
        ctypes.POINTER(EmbdText),
        sz,
        c_float_p,
        sz,
        c_size_p,
        c_size_p,
    )
    _fn(
        dll,
        "embd_encode_quantized",
        st,
        vp,
        ctypes.POINTER(EmbdText),
        sz,
        ctypes.c_int32,
        vp,
        sz,
        c_size_p,
        c_uint8_p,
    )
    _fn(dll, "embd_has_output_ranges", ctypes.c_int32, vp)
    _fn(dll, "embd_tokenize", st, vp, ctypes.c_char_p, sz, c_uint32_p, sz, c_size_p)
    _fn(dll, "embd_count_tokens", st, vp, ctypes.c_char_p, sz, c_size_p)
    _fn(dll, "embd_similarity", st, c_float_p, c_float_p, sz, c_float_p)
    _fn(dll, "embd_rerank_open", st, ctypes.c_char_p, vp, ctypes.POINTER(vp))
    _fn(dll, "embd_rerank_free", None, vp)
    _fn(dll, "embd_rerank_num_labels", sz, vp)
    _fn(dll, "embd_rerank_max_seq_length", sz, vp)
    _fn(
        dll,
        "embd_rerank_tokenize",
        st,
        vp,
        EmbdText,
        EmbdText,
        c_uint32_p,
        c_uint32_p,
        sz,
        c_size_p,
    )
    _fn(
        dll,
        "embd_rerank_score_prompted",
        st,
        vp,
        ctypes.c_char_p,
        ctypes.POINTER(EmbdText),
        ctypes.POINTER(EmbdText),
        sz,
        c_float_p,
        c_float_p,
        sz,
        c_size_p,
        c_uint8_p,
    )
    _fn(
        dll,
        "embd_rerank_rank_prompted",
        st,
        vp,
        ctypes.c_char_p,
        EmbdText,
        ctypes.POINTER(EmbdText),
        sz,
        sz,
        ctypes.c_int,
        ctypes.POINTER(EmbdRanked),
        sz,
        c_size_p,
    )
    _fn(
        dll,
        "embd_rerank_score",
        st,
        vp,
        ctypes.POINTER(EmbdText),
        ctypes.POINTER(EmbdText),
        sz,
        c_float_p,
        c_float_p,
        sz,
        c_size_p,
        c_uint8_p,
    )
    _fn(
        dll,
        "embd_rerank_rank",
        st,
        vp,
        EmbdText,
        ctypes.POINTER(EmbdText),
        sz,
        sz,
        ctypes.c_int,
        ctypes.POINTER(EmbdRanked),
        sz,
        c_size_p,
    )
    _fn(dll, "embd_last_error", ctypes.c_char_p)
    _fn(dll, "embd_status_str", ctypes.c_char_p, ctypes.c_int32)
    _fn(dll, "embd_version", ctypes.c_char_p)
    _fn(dll, "embd_version_number", ctypes.c_uint32)
    return dll
