"""Sparse and multi-vector outputs against shared/reference/architectures:
SPLADE, inference-free SPLADE, BGE-M3's three outputs, ColBERT."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Dict, List

import numpy as np
import pytest

import embedder

REPO = Path(__file__).resolve().parents[2]
_SHARED = os.environ.get("EMBD_SHARED_DIR")
ARCH = (Path(_SHARED) if _SHARED else REPO.parent / "shared") / "reference" / "architectures"


def _ref(name: str, n: int = 40) -> List[Dict[str, Any]]:
    p = ARCH / f"{name}_reference.jsonl"
    if not p.is_file():
        pytest.fail(f"{p} is missing: set EMBD_SHARED_DIR to the shared/ folder")
    with p.open(encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()][:n]


def _assert_sparse(what: str, got: Any, want: Dict[str, Any]) -> None:
    ids, vals = got
    assert ids.dtype == np.uint32 and vals.dtype == np.float32
    assert ids.tolist() == want["indices"], what
    top = max((abs(v) for v in want["values"]), default=0.0)
    assert np.all(np.abs(vals - np.asarray(want["values"], np.float32)) <= 1e-5 * top), what


def _assert_multi(what: str, got: Any, want: List[List[float]]) -> None:
    w = np.asarray(want, np.float64)
    assert got.shape == w.shape, what
    g = got.astype(np.float64)
    cos = (g * w).sum(1) / (np.linalg.norm(g, axis=1) * np.linalg.norm(w, axis=1))
    assert cos.min() >= 0.99999, what


def _open(name: str) -> embedder.Embedder:
    return embedder.Embedder(ARCH / name)


def test_splade_sparse_and_csr() -> None:
    refs = _ref("splade-tiny")
    with _open("splade-tiny") as m:
        assert m.outputs == ["sparse"]
        texts = [r["text"] for r in refs]
        got = m.encode(texts, output="sparse", batch_size=7)
        for i, (g, r) in enumerate(zip(got, refs)):
            _assert_sparse(f"text {i}", g, r["sparse"])
        one = m.encode_sparse(texts[3])
        assert one[0].tolist() == got[3][0].tolist()
        top = m.encode_sparse(texts[:5], top_k=3)
        assert all(len(ids) <= 3 for ids, _ in top)
        with pytest.raises(embedder.EmbedderError, match="sparse"):
            m.encode("dense is refused")
        with pytest.raises(embedder.InvalidArgumentError):
            m.encode_sparse("x", task="summary")
        pytest.importorskip("scipy")
        csr = m.encode(texts[:4], output="sparse", as_csr=True)
        assert csr.shape == (4, 30522)
        assert csr[1].indices.tolist() == got[1][0].tolist()
        assert embedder.sparse_dot(got[0], got[1]) == pytest.approx(
            float(csr[0].multiply(csr[1]).sum()), rel=1e-5
        )


def test_inference_free_query_route() -> None:
    refs = _ref("splade-inference-free-tiny")
    with _open("splade-inference-free-tiny") as m:
        texts = [r["text"] for r in refs]
        q = m.encode_query(texts)
        d = m.encode_document(texts)
        for i, r in enumerate(refs):
            _assert_sparse(f"query {i}", q[i], r["query_sparse"])
            _assert_sparse(f"document {i}", d[i], r["document_sparse"])


def test_bgem3_three_outputs() -> None:
    refs = [r for r in _ref("bgem3-tiny", 200) if "colbert_vecs" in r][:20]
    with _open("bgem3-tiny") as m:
        assert m.outputs == ["dense", "sparse", "multi-vector"]
        texts = [r["text"] for r in refs]
        dense = m.encode(texts)
        sparse = m.encode(texts, output="sparse")
        multi = m.encode(texts, output="multi-vector")
        for i, r in enumerate(refs):
            assert float(np.dot(dense[i], r["dense"])) >= 0.99999
            lw = sorted((int(k), v) for k, v in r["lexical_weights"].items())
            _assert_sparse(
                f"lexical {i}",
                sparse[i],
                {"indices": [k for k, _ in lw], "values": [v for _, v in lw]},
            )
            _assert_multi(f"colbert {i}", multi[i], r["colbert_vecs"])


def test_colbert_queries_documents_and_max_sim() -> None:
    refs = _ref("colbert-tiny")
    with _open("colbert-tiny") as m:
        assert m.outputs == ["multi-vector"]
        texts = [r["text"] for r in refs]
        q = m.encode_query(texts)
        d = m.encode_document(texts)
        for i, r in enumerate(refs):
            _assert_multi(f"query {i}", q[i], r["query_vectors"])
            _assert_multi(f"document {i}", d[i], r["document_vectors"])
        s = embedder.max_sim(q[5], d[5])
        want = float((q[5] @ d[5].T).max(axis=1).sum())
        assert s == pytest.approx(want)
        with pytest.raises(embedder.EmbedderError, match="multi-vector"):
            m.encode_sparse("no sparse output")


def test_bad_output_name(tmp_path: Path) -> None:
    del tmp_path
    with _open("splade-tiny") as m:
        with pytest.raises(embedder.InvalidArgumentError, match="output"):
            m.encode("x", output="lexicon")  # type: ignore[call-overload]
