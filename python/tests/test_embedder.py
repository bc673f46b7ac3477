"""embedder.Embedder: parity with sentence-transformers and the API."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List

import numpy as np
import pytest

import embedder

# The same bars as the Rust precision tests: worst and mean cosine
# to the sentence-transformers reference.
BARS = {"f32": (0.99999, 0.99999), "bf16": (0.9999, 0.9999), "int8": (0.995, 0.999)}


def ref_matrix(reference: List[Dict[str, Any]]) -> np.ndarray:
    m: np.ndarray = np.asarray([r["embedding"] for r in reference], dtype=np.float32)
    return m


def cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a64 = a.astype(np.float64)
    b64 = b.astype(np.float64)
    num = np.sum(a64 * b64, axis=1)
    c: np.ndarray = num / (np.linalg.norm(a64, axis=1) * np.linalg.norm(b64, axis=1))
    return c


def test_parity_every_reference_line(
    model: embedder.Embedder, reference: List[Dict[str, Any]]
) -> None:
    texts = [r["text"] for r in reference]
    got = model.encode(texts)
    want = ref_matrix(reference)
    assert got.dtype == np.float32 and got.shape == (len(texts), 384)
    diff = np.abs(got - want).max(axis=1)
    bad = [(i, float(d)) for i, d in enumerate(diff) if d > 1e-4]
    assert not bad, f"lines over 1e-4: {bad[:5]}"
    assert cosines(got, want).min() >= BARS["f32"][0]


def test_token_ids_every_reference_line(
    model: embedder.Embedder, reference: List[Dict[str, Any]]
) -> None:
    for r in reference:
        assert model.tokenize(r["text"]) == r["input_ids"], r["text"][:60]
        assert model.count_tokens(r["text"]) == len(r["input_ids"])


def test_single_text_shape_and_batch_independence(
    model: embedder.Embedder, reference: List[Dict[str, Any]]
) -> None:
    texts = [r["text"] for r in reference[:40]]
    batch = model.encode(texts)
    one = model.encode(texts[7])
    assert one.shape == (384,) and one.dtype == np.float32
    assert np.array_equal(one, batch[7])
    for bs in (1, 3, 64):
        assert np.array_equal(model.encode(texts, batch_size=bs), batch)
    assert model.encode([]).shape == (0, 384)


def test_out_buffer_is_written_and_returned(
    model: embedder.Embedder, reference: List[Dict[str, Any]]
) -> None:
    texts = [r["text"] for r in reference[:5]]
    out = np.zeros((5, 384), dtype=np.float32)
    res = model.encode(texts, out=out)
    assert res is out
    assert np.abs(out - ref_matrix(reference[:5])).max() <= 1e-4
    vec = np.zeros(384, dtype=np.float32)
    assert model.encode(texts[0], out=vec) is vec
    assert np.array_equal(vec, out[0])


def test_normalize_option_and_per_call_override(
    model_file: Path, model: embedder.Embedder, reference: List[Dict[str, Any]]
) -> None:
    texts = [r["text"] for r in reference[:10]]
    unit = model.encode(texts)
    with embedder.Embedder(model_file, normalize=False) as raw_model:
        raw = raw_model.encode(texts)
        norms = np.linalg.norm(raw.astype(np.float64), axis=1)
        assert (np.abs(norms - 1.0) > 1e-3).all(), "raw mean-pooled vectors are not unit length"
        # The direction is the reference's.
        assert cosines(raw, ref_matrix(reference[:10])).min() >= BARS["f32"][0]
        # Per-call override both ways, bit-identical to the model opened that way.
        assert np.array_equal(raw_model.encode(texts, normalize_embeddings=True), unit)
        assert np.array_equal(raw_model.encode(texts, normalize_embeddings=False), raw)
    assert np.array_equal(model.encode(texts, normalize_embeddings=False), raw)
    assert np.array_equal(model.encode(texts, normalize_embeddings=None), unit)


def test_info_and_properties(model: embedder.Embedder, model_file: Path) -> None:
    info = model.info
    # all-MiniLM-L6-v2's published configuration.
    assert info["model_name"] == "all-MiniLM-L6-v2"
    assert info["embedding_dim"] == 384 == model.dim == model.get_sentence_embedding_dimension()
    assert info["num_layers"] == 6
    assert info["num_attention_heads"] == 12
    assert info["vocab_size"] == 30522
    assert info["pooling"] == "mean"
    assert info["normalize"] is True
    assert info["max_seq_length"] == 256 == model.max_seq_length
    assert info["precision"] == "f32" == model.precision
    assert str(model_file) in repr(model)


def test_max_seq_length_truncates(model_file: Path, reference: List[Dict[str, Any]]) -> None:
    long = next(r for r in reference if len(r["input_ids"]) > 40)
    with embedder.Embedder(model_file, max_seq_length=16) as m:
        assert m.max_seq_length == 16
        assert m.tokenize(long["text"]) == long["input_ids"][:15] + [102]
        assert m.count_tokens(long["text"]) == 16


def test_threads_give_identical_bits(
    model_file: Path, model: embedder.Embedder, reference: List[Dict[str, Any]]
) -> None:
    texts = [r["text"] for r in reference[:24]]
    with embedder.Embedder(model_file, threads=1) as one:
        assert np.array_equal(one.encode(texts), model.encode(texts))


@pytest.mark.parametrize("precision", ["f32", "bf16", "int8"])
def test_precision_meets_its_bar(
    model_file: Path, reference: List[Dict[str, Any]], precision: str
) -> None:
    with embedder.Embedder(model_file, precision=precision) as m:
        assert m.precision == precision
        got = m.encode([r["text"] for r in reference])
    c = cosines(got, ref_matrix(reference))
    worst, mean = BARS[precision]
    assert c.min() >= worst and c.mean() >= mean, (precision, c.min(), c.mean())


def test_similarity(reference: List[Dict[str, Any]], model: embedder.Embedder) -> None:
    refs = ref_matrix(reference[:6]).astype(np.float64)
    want = refs @ refs.T / np.outer(np.linalg.norm(refs, axis=1), np.linalg.norm(refs, axis=1))
    got = model.similarity(ref_matrix(reference[:6]), ref_matrix(reference[:6]))
    assert isinstance(got, np.ndarray) and got.shape == (6, 6)
    assert np.abs(got - want).max() < 1e-6
    pair = embedder.similarity(ref_matrix(reference[:1])[0], ref_matrix(reference[1:2])[0])
    assert isinstance(pair, float) and abs(pair - want[0, 1]) < 1e-6
    row = model.similarity(ref_matrix(reference[:1])[0], ref_matrix(reference[:6]))
    assert isinstance(row, np.ndarray) and row.shape == (1, 6)
    assert embedder.similarity(np.zeros(4), np.ones(4)) == 0.0


def test_model_from_environment(
    model_file: Path, monkeypatch: pytest.MonkeyPatch, model: embedder.Embedder
) -> None:
    monkeypatch.setenv("EMBD_MODEL", str(model_file))
    with embedder.Embedder() as m:
        assert np.array_equal(m.encode("environment"), model.encode("environment"))


def test_progress_bar_reports_on_stderr(
    model: embedder.Embedder, capsys: pytest.CaptureFixture[str]
) -> None:
    model.encode(["a", "b", "c"], batch_size=2, show_progress_bar=True)
    err = capsys.readouterr().err
    assert "2/3" in err and "3/3" in err


def test_versions() -> None:
    assert embedder.library_version() == embedder.__version__
