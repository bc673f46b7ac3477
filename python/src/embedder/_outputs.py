"""Sparse and multi-vector outputs (``embd_encode_sparse``,
``embd_encode_multi_vector``): SPLADE, inference-free SPLADE, BGE-M3's lexical
weights and ColBERT vectors, and sentence-transformers' ``encode_query`` /
``encode_document`` tasks."""

from __future__ import annotations

import ctypes
from typing import Any, List, Optional, Sequence, Tuple

import numpy as np
import numpy.typing as npt

from ._native import EmbdText, c_float_p, c_size_p, c_uint32_p, lib
from .errors import InvalidArgumentError, Status, raise_status

#: One sparse vector: ids ascending (uint32) and their weights (float32).
SparsePair = Tuple[npt.NDArray[np.uint32], npt.NDArray[np.float32]]

#: The outputs a model may have.
OUTPUTS = ("dense", "sparse", "multi-vector")

#: ``embd_task`` codes.
TASKS = {None: 0, "query": 1, "document": 2}

# A first guess of the non-zero weights per text; a call that needs more is
# run again with the exact size the library reports.
_SPARSE_GUESS = 2048


def task_code(task: Optional[str]) -> int:
    """The ``embd_task`` of ``task`` (None, "query", "document")."""
    if task not in TASKS:
        raise InvalidArgumentError(
            Status.INVALID_ARGUMENT,
            f"task {task!r} is not supported; accepted: None, 'query', 'document'",
        )
    return TASKS[task]


def output_name(output: str) -> str:
    """``output`` checked against :data:`OUTPUTS` (``multi_vector`` and
    ``colbert`` are taken for ``multi-vector``)."""
    name = {"multi_vector": "multi-vector", "colbert": "multi-vector"}.get(output, output)
    if name not in OUTPUTS:
        raise InvalidArgumentError(
            Status.INVALID_ARGUMENT,
            f"output {output!r} is not supported; accepted: {', '.join(OUTPUTS)}",
        )
    return name


def model_outputs(handle: int) -> List[str]:
    """The outputs the model has, in order."""
    L = lib()
    return [o for o in OUTPUTS if L.embd_has_output(handle, o.encode()) == 1]


def _texts(chunk: Sequence[bytes]) -> Any:
    return (EmbdText * len(chunk))(*[EmbdText(b, len(b)) for b in chunk])


def encode_sparse(
    handle: int,
    call: Optional[int],
    task: int,
    data: Sequence[bytes],
    top_k: int,
    batch_size: int,
) -> List[SparsePair]:
    """The sparse vector of every text, ``batch_size`` texts per call."""
    L = lib()
    vocab = int(L.embd_vocab_size(handle))
    out: List[SparsePair] = []
    for start in range(0, len(data), batch_size):
        chunk = data[start : start + batch_size]
        k = len(chunk)
        arr = _texts(chunk)
        per = min(vocab, top_k if top_k else _SPARSE_GUESS)
        cap = max(1, k * per)
        offsets = np.zeros(k + 1, np.uintp)
        nnz = ctypes.c_size_t(0)
        while True:
            indices = np.empty(cap, np.uint32)
            values = np.empty(cap, np.float32)
            status = L.embd_encode_sparse(
                handle,
                call,
                task,
                arr,
                k,
                top_k,
                offsets.ctypes.data_as(c_size_p),
                indices.ctypes.data_as(c_uint32_p),
                values.ctypes.data_as(c_float_p),
                cap,
                ctypes.byref(nnz),
            )
            if status == Status.BUFFER_TOO_SMALL and nnz.value > cap:
                cap = int(nnz.value)
                continue
            raise_status(status)
            break
        o = offsets.tolist()
        for i in range(k):
            out.append((indices[o[i] : o[i + 1]].copy(), values[o[i] : o[i + 1]].copy()))
    return out


def encode_multi_vector(
    handle: int,
    call: Optional[int],
    task: int,
    data: Sequence[bytes],
    batch_size: int,
    max_seq_length: int,
) -> List[npt.NDArray[np.float32]]:
    """The vectors of every text (each ``(vectors, dim)``), ``batch_size``
    texts per call."""
    L = lib()
    dim = int(L.embd_multi_vector_dim(handle))
    out: List[npt.NDArray[np.float32]] = []
    for start in range(0, len(data), batch_size):
        chunk = data[start : start + batch_size]
        k = len(chunk)
        arr = _texts(chunk)
        counts = np.zeros(k, np.uintp)
        need = ctypes.c_size_t(0)
        # A guess from the texts' byte lengths (ids are rarely fewer than a
        # third of the bytes' count, capped at the model's length), then the
        # exact size the library reports if that was short.
        rows = sum(min(max_seq_length, len(b) // 2 + 40) for b in chunk)
        cap = max(1, rows * max(dim, 1))
        while True:
            flat = np.empty(cap, np.float32)
            status = L.embd_encode_multi_vector(
                handle,
                call,
                task,
                arr,
                k,
                flat.ctypes.data_as(c_float_p),
                cap,
                ctypes.byref(need),
                counts.ctypes.data_as(c_size_p),
            )
            if status == Status.BUFFER_TOO_SMALL and need.value > cap:
                cap = int(need.value)
                continue
            raise_status(status)
            break
        at = 0
        for n in counts.tolist():
            out.append(flat[at : at + n * dim].reshape(n, dim).copy())
            at += n * dim
    return out


def to_csr(pairs: Sequence[SparsePair], vocab: int) -> Any:
    """``pairs`` as a ``scipy.sparse.csr_matrix`` of shape ``(len(pairs),
    vocab)`` (needs scipy)."""
    try:
        import scipy.sparse  # type: ignore[import-untyped, unused-ignore]
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError("as_csr=True needs scipy (pip install scipy)") from e
    indptr = np.zeros(len(pairs) + 1, np.int64)
    for i, (ids, _) in enumerate(pairs):
        indptr[i + 1] = indptr[i] + len(ids)
    cols = np.concatenate([p[0] for p in pairs]) if pairs else np.zeros(0, np.uint32)
    vals = np.concatenate([p[1] for p in pairs]) if pairs else np.zeros(0, np.float32)
    return scipy.sparse.csr_matrix((vals, cols.astype(np.int64), indptr), shape=(len(pairs), vocab))


def sparse_dot(a: SparsePair, b: SparsePair) -> float:
    """The dot product of two sparse vectors."""
    common, ia, ib = np.intersect1d(a[0], b[0], assume_unique=True, return_indices=True)
    del common
    return float(np.dot(a[1][ia].astype(np.float64), b[1][ib].astype(np.float64)))


def max_sim(query: npt.ArrayLike, document: npt.ArrayLike) -> float:
    """ColBERT's late interaction: for each query vector the largest dot
    product with a document vector, summed."""
    q = np.asarray(query, np.float32)
    d = np.asarray(document, np.float32)
    if q.size == 0 or d.size == 0:
        return 0.0
    return float((q @ d.T).max(axis=1).sum())
