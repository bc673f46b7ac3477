"""Sentence embeddings on the CPU.

>>> from embedder import Embedder
>>> model = Embedder("models/all-MiniLM-L6-v2.weights")   # or $EMBD_MODEL
>>> vectors = model.encode(["first text", "second text"])  # float32 (2, 384)
>>> model.similarity(vectors[0], vectors[1])
>>> from embedder import Reranker
>>> reranker = Reranker("models/minilm-reranker.weights")
>>> reranker.rank("a query", ["a passage", "another"], top_k=1)

The inference is the Rust library (``libembedder``, shipped inside this
package) called through its C ABI; computation releases the GIL.
``embedder.ray.EmbedBatches`` embeds Ray Data datasets (extra ``[ray]``).
"""

from __future__ import annotations

from ._embedder import OUTPUT_PRECISIONS, PRECISIONS, Embedder, similarity
from ._native import lib as _lib
from ._outputs import OUTPUTS, max_sim, sparse_dot
from ._reranker import Reranker
from .errors import (
    CancelledError,
    ClosedError,
    EmbedderError,
    InvalidArgumentError,
    ModelFileError,
    ModelNotFoundError,
    Status,
)

__all__ = [
    "Embedder",
    "Reranker",
    "EmbedderError",
    "InvalidArgumentError",
    "ClosedError",
    "ModelNotFoundError",
    "ModelFileError",
    "CancelledError",
    "Status",
    "PRECISIONS",
    "OUTPUT_PRECISIONS",
    "similarity",
    "OUTPUTS",
    "max_sim",
    "sparse_dot",
    "library_version",
    "__version__",
]


def library_version() -> str:
    """Version of the loaded native library (``embd_version()``)."""
    return str(_lib().embd_version().decode())


try:
    from importlib.metadata import PackageNotFoundError, version

    try:
        __version__ = version("embedder")
    except PackageNotFoundError:  # run from a source tree
        __version__ = "0+unknown"
except ImportError:  # pragma: no cover
    __version__ = "0+unknown"
