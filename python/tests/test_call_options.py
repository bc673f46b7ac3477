"""Per-call options of ``Embedder.encode`` (``embd_encode_with``): each
against an embedder opened with the same option, bit for bit, on the one
open model (no second handle)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List

import numpy as np
import pytest

from embedder import Embedder, InvalidArgumentError, Status

TEXTS = [
    "The quick brown fox jumps over the lazy dog.",
    "Embeddings map sentences to vectors.",
    "",
]
LONG = " ".join(["river stone", "quiet lamp", "north garden"] * 200)


def test_defaults_are_the_plain_vectors_and_match_the_reference(
    model: Embedder, reference: List[Dict[str, Any]]
) -> None:
    texts = [r["text"] for r in reference[:20]]
    plain = model.encode(texts)
    same = model.encode(texts, normalize_embeddings=True, prompt="", truncation="right")
    assert np.array_equal(plain, same)
    want = np.array([r["embedding"] for r in reference[:20]], dtype=np.float32)
    cos = np.sum(same * want, axis=1) / np.linalg.norm(want, axis=1)
    assert cos.min() > 0.9999


def test_normalize_dimensions_prompt_per_call(model: Embedder, model_file: Path) -> None:
    with Embedder(model_file, normalize=False) as raw:
        assert np.array_equal(model.encode(TEXTS, normalize_embeddings=False), raw.encode(TEXTS))
    # No second handle is opened for it.
    assert model._twin is None
    for k in (16, 128):
        with Embedder(model_file, dimensions=k) as cut:
            got = model.encode(TEXTS, dimensions=k)
            assert got.shape == (3, k)
            assert np.array_equal(got, cut.encode(TEXTS))
    with Embedder(model_file, prompt="query: ") as q:
        assert np.array_equal(model.encode(TEXTS, prompt="query: "), q.encode(TEXTS))
        assert np.array_equal(q.encode(TEXTS, prompt=""), model.encode(TEXTS))
    with pytest.raises(InvalidArgumentError, match="stores none"):
        model.encode(TEXTS, prompt_name="query")
    with pytest.raises(InvalidArgumentError, match="1..=384"):
        model.encode(TEXTS, dimensions=385)
    with pytest.raises(InvalidArgumentError, match="float32"):
        model.encode(TEXTS, precision="ubinary", dimensions=8)


def test_truncation_per_call(model: Embedder) -> None:
    right, tokens, cut = model.encode([LONG], return_token_info=True)
    assert tokens[0] == 256 and cut[0]
    assert np.array_equal(model.encode([LONG], truncation="right"), right)
    left, tokens, cut = model.encode([LONG], truncation="left", return_token_info=True)
    assert tokens[0] == 256 and cut[0]
    assert not np.array_equal(left, right)
    # Left truncation keeps the end: the text's last words alone, with enough of
    # them to fill the window, give the same vector.
    words = LONG.split(" ")
    assert np.array_equal(model.encode([" ".join(words[-254:])]), left)
    with pytest.raises(InvalidArgumentError) as e:
        model.encode(["short", LONG], truncation="refuse")
    assert e.value.status == Status.LIMIT_EXCEEDED
    assert "text 1" in str(e.value)
    with pytest.raises(InvalidArgumentError, match="right, left, refuse"):
        model.encode(TEXTS, truncation="middle")


def test_token_vectors_pool_to_the_reference(
    model: Embedder, reference: List[Dict[str, Any]]
) -> None:
    rows = reference[:30]
    got = model.encode_tokens([r["text"] for r in rows], batch_size=7)
    assert isinstance(got, list) and len(got) == len(rows)
    for tv, r in zip(got, rows):
        # One vector per reference id; all-MiniLM-L6-v2 mean-pools every
        # token and normalizes.
        assert tv.dtype == np.float32 and tv.shape == (len(r["input_ids"]), 384)
        mean = tv.astype(np.float64).mean(axis=0)
        mean /= np.linalg.norm(mean)
        assert np.abs(mean - np.asarray(r["embedding"])).max() <= 1e-5
    # Batch invariance, and a str gives one array.
    alone = model.encode_tokens(rows[4]["text"])
    assert np.array_equal(alone, got[4])
    # Not normalized by default; per token with normalize_embeddings=True.
    assert abs(float(np.linalg.norm(alone[1])) - 1.0) > 1e-3
    cut = model.encode_tokens(rows[4]["text"], dimensions=32, normalize_embeddings=True)
    assert cut.shape == (alone.shape[0], 32)
    assert np.allclose(np.linalg.norm(cut, axis=1), 1.0, atol=1e-5)
    # The prompt's tokens come first.
    p = model.encode_tokens("a b", prompt="query: ")
    assert p.shape[0] == model.count_tokens("query: a b")
    with pytest.raises(InvalidArgumentError, match="1..=384"):
        model.encode_tokens("x", dimensions=1000)
    with pytest.raises(InvalidArgumentError):
        model.encode_tokens([LONG], truncation="refuse")
    assert model.encode_tokens([]) == []
