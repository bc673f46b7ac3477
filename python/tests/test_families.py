"""XLM-RoBERTa + Unigram, BERT + Unigram, RoBERTa + byte-level BPE,
ModernBERT + byte-level BPE, Qwen3-Embedding (byte-level BPE, last-token
pooling) and EmbeddingGemma (SentencePiece BPE, Dense modules) through the
Python package: ids and embeddings
against sentence-transformers on every line of
``shared/reference/{families,architectures}/<name>_reference.jsonl``.

The models are the reference folders converted with ``embd convert``: taken from
``$EMBD_FAMILIES_DIR/<name>.weights`` when that is set, else converted into a
temporary folder with ``$EMBD_BIN`` (default ``target/release/embd``, which
``scripts/test_python.sh`` builds).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any, Dict, List

import numpy as np
import pytest

import embedder

REPO = Path(__file__).resolve().parents[2]
MODELS = [
    "xlmr-tiny",
    "bert-unigram-tiny",
    "roberta-bpe-tiny",
    "modernbert-tiny",
    "qwen3-embedding-tiny",
    "embeddinggemma-tiny",
]
# Reference lines of each model's reference file.
ARCHITECTURES = ["modernbert-tiny", "qwen3-embedding-tiny", "embeddinggemma-tiny"]
LINES = {name: 346 for name in ARCHITECTURES}
FAMILY_LINES = 353


def families() -> Path:
    env = os.environ.get("EMBD_SHARED_DIR")
    shared = Path(env) if env else REPO.parent / "shared"
    return shared / "reference" / "families"


def source(name: str) -> Path:
    """The folder holding ``name`` and its reference files."""
    arch = families().parent / "architectures"
    return arch if (arch / name).is_dir() else families()


def read_jsonl(p: Path) -> List[Dict[str, Any]]:
    if not p.is_file():
        pytest.fail(f"{p} is missing: set EMBD_SHARED_DIR to the shared/ folder")
    with p.open(encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


@pytest.fixture(scope="module")
def converted(tmp_path_factory: pytest.TempPathFactory) -> Dict[str, Path]:
    env = os.environ.get("EMBD_FAMILIES_DIR")
    if env:
        paths = {name: Path(env) / f"{name}.weights" for name in MODELS}
        for p in paths.values():
            if not p.is_file():
                pytest.fail(f"{p} is missing ($EMBD_FAMILIES_DIR)")
        return paths
    binary = Path(os.environ.get("EMBD_BIN", REPO / "target" / "release" / "embd"))
    if not binary.is_file():
        pytest.fail(
            f"{binary} is missing: run cargo build --release --bin embd, or set EMBD_BIN "
            "(or EMBD_FAMILIES_DIR to a folder of converted <name>.weights)"
        )
    out = tmp_path_factory.mktemp("families")
    paths = {}
    for name in MODELS:
        dst = out / f"{name}.weights"
        r = subprocess.run(
            [str(binary), "convert", str(source(name) / name), "-o", str(dst)],
            capture_output=True,
            text=True,
        )
        assert r.returncode == 0, f"embd convert {name}: {r.stderr}"
        paths[name] = dst
    return paths


def cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a64 = a.astype(np.float64)
    b64 = b.astype(np.float64)
    num = np.sum(a64 * b64, axis=1)
    c: np.ndarray = num / (np.linalg.norm(a64, axis=1) * np.linalg.norm(b64, axis=1))
    return c


@pytest.mark.parametrize("name", MODELS)
def test_ids_and_embeddings_every_reference_line(converted: Dict[str, Path], name: str) -> None:
    ref = read_jsonl(source(name) / f"{name}_reference.jsonl")
    lines = LINES.get(name, FAMILY_LINES)
    assert len(ref) == lines
    texts = [r["text"] for r in ref]
    want = np.asarray([r["embedding"] for r in ref], dtype=np.float32)
    with embedder.Embedder(converted[name], threads=1) as m:
        bad_ids = [
            (i + 1, r["text"][:40])
            for i, r in enumerate(ref)
            if m.tokenize(r["text"]) != r["input_ids"]
            or m.count_tokens(r["text"]) != len(r["input_ids"])
        ]
        assert not bad_ids, f"{name}: {len(bad_ids)} lines with other ids: {bad_ids[:5]}"
        got = m.encode(texts, batch_size=lines)
        assert got.shape == want.shape and got.dtype == np.float32
        diff = np.abs(got - want).max(axis=1)
        cos = cosines(got, want)
        bad = [
            (i + 1, float(d), float(c))
            for i, (d, c) in enumerate(zip(diff, cos))
            if not (d <= 1e-5 and c >= 0.99999)
        ]
        assert not bad, f"{name}: lines off the reference (line, max abs, cosine): {bad[:5]}"
        # One text per call: the same bits.
        assert np.array_equal(m.encode(texts, batch_size=1), got)
    with embedder.Embedder(converted[name], threads=2) as m2:
        assert np.array_equal(m2.encode(texts, batch_size=7), got)


def test_prompt_name_query(converted: Dict[str, Path]) -> None:
    ref = read_jsonl(families() / "bert-unigram-tiny_prompt_reference.jsonl")
    assert len(ref) == 60 and all(r["prompt_name"] == "query" for r in ref)
    want = np.asarray([r["embedding"] for r in ref], dtype=np.float32)
    with embedder.Embedder(converted["bert-unigram-tiny"], prompt_name="query") as m:
        got = m.encode([r["text"] for r in ref])
    assert np.abs(got - want).max() <= 1e-5
    assert cosines(got, want).min() >= 0.99999


CASES = {
    "xlmr-tiny": "unigram_cases.jsonl",
    "bert-unigram-tiny": "unigram_v5_cases.jsonl",
    "roberta-bpe-tiny": "bpe_cases.jsonl",
    "modernbert-tiny": "modernbert_bpe_cases.jsonl",
    "qwen3-embedding-tiny": "qwen3_bpe_cases.jsonl",
    "embeddinggemma-tiny": "gemma_spm_bpe_cases.jsonl",
}


@pytest.mark.parametrize("name", MODELS)
def test_ids_every_case_line(converted: Dict[str, Path], name: str) -> None:
    """The tokenizer case files (ids without truncation; 2,914 lines each)
    with the model carrying the same tokenizer.json: ids equal, and a text
    longer than the model is its reference ids cut on the right (the first
    ``max_seq_length - 1`` ids, then the closing special token)."""
    cases = read_jsonl(source(name) / CASES[name])
    assert len(cases) == (346 if name in ARCHITECTURES else 2914)
    with embedder.Embedder(converted[name], threads=1) as m:
        n = m.max_seq_length
        for c in cases:
            want = c["input_ids"]
            if len(want) > n:
                want = want[: n - 1] + want[-1:]
            assert m.tokenize(c["text"]) == want, c["text"]


@pytest.mark.parametrize(
    "name,default", [("qwen3-embedding-tiny", "query"), ("embeddinggemma-tiny", None)]
)
def test_architecture_prompts(converted: Dict[str, Path], name: str, default: Any) -> None:
    """Qwen3-Embedding's and EmbeddingGemma's stored prompts, by name, against
    ``<name>_prompt_reference.jsonl``: ids and vectors."""
    ref = read_jsonl(source(name) / f"{name}_prompt_reference.jsonl")
    groups: Dict[str, List[Dict[str, Any]]] = {}
    for r in ref:
        groups.setdefault(r.get("prompt_name") or default, []).append(r)
    for prompt, rows in groups.items():
        with embedder.Embedder(converted[name], prompt_name=prompt) as m:
            for r in rows:
                assert m.tokenize(r["text"]) == r["input_ids"], (prompt, r["text"])
            got = m.encode([r["text"] for r in rows])
        want = np.asarray([r["embedding"] for r in rows], dtype=np.float32)
        assert np.abs(got - want).max() <= 1e-5, prompt
        assert cosines(got, want).min() >= 0.99999, prompt
