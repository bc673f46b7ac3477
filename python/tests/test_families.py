"""Every model of ``tests/data/families.tsv`` (one row per reference model:
XLM-RoBERTa + Unigram, BERT + Unigram, RoBERTa + byte-level BPE, ModernBERT,
Qwen3-Embedding, EmbeddingGemma, NomicBERT, GTE, DistilBERT, jina-v3, mmBERT,
EuroBERT, ...) through the Python package: ids and
embeddings against sentence-transformers on every line of
``shared/reference/<folder>_reference.jsonl``, its tokenizer case file and its
prompt reference.

The models are the reference folders converted with ``embd convert``: taken from
``$EMBD_FAMILIES_DIR/<name>.weights`` when that is set, else converted into a
temporary folder with ``$EMBD_BIN`` (default ``target/release/embd``, which
``scripts/test_python.sh`` builds).
"""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import numpy as np
import pytest

import embedder

REPO = Path(__file__).resolve().parents[2]


def reference_dir() -> Path:
    env = os.environ.get("EMBD_SHARED_DIR")
    shared = Path(env) if env else REPO.parent / "shared"
    return shared / "reference"


@dataclass(frozen=True)
class Family:
    """A row of ``tests/data/families.tsv`` (its header says what each column means)."""

    name: str
    folder: str
    tokenizer: str
    dim: int
    max_tokens: int
    lines: int
    cases: Optional[Tuple[str, int]]
    prompts: Optional[Tuple[int, Optional[str]]]

    @property
    def dir(self) -> Path:
        return reference_dir() / self.folder

    @property
    def reference(self) -> Path:
        return reference_dir() / f"{self.folder}_reference.jsonl"

    @property
    def prompt_reference(self) -> Path:
        return reference_dir() / f"{self.folder}_prompt_reference.jsonl"

    @property
    def normalizes(self) -> bool:
        """Whether sentence-transformers normalizes (a Normalize module in
        ``modules.json``): the package normalizes by default, distiluse's
        folder does not."""
        modules = json.loads((self.dir / "modules.json").read_text(encoding="utf-8"))
        return any(str(m["type"]).endswith("Normalize") for m in modules)


def read_families() -> List[Family]:
    rows = [
        line.rstrip("\n").split("\t")
        for line in (REPO / "tests" / "data" / "families.tsv")
        .read_text(encoding="utf-8")
        .splitlines()
        if line.strip() and not line.startswith("#")
    ]
    header, out = rows[0], []
    for r in rows[1:]:
        assert len(r) == len(header), r
        v = {h: (None if x == "-" else x) for h, x in zip(header, r)}
        cases = (v["cases"], int(v["case_lines"] or 0)) if v["cases"] else None
        prompts = (int(v["prompt_lines"]), v["prompt_default"]) if v["prompt_lines"] else None
        out.append(
            Family(
                name=str(v["name"]),
                folder=str(v["folder"]),
                tokenizer=str(v["tokenizer"]),
                dim=int(v["dim"] or 0),
                max_tokens=int(v["max_tokens"] or 0),
                lines=int(v["lines"] or 0),
                cases=cases,
                prompts=prompts,
            )
        )
    return out


FAMILIES = read_families()
BY_NAME = {f.name: f for f in FAMILIES}
MODELS = [f.name for f in FAMILIES]


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
            [str(binary), "convert", str(BY_NAME[name].dir), "-o", str(dst)],
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
    fam = BY_NAME[name]
    ref = read_jsonl(fam.reference)
    lines = fam.lines
    assert len(ref) == lines
    texts = [r["text"] for r in ref]
    want = np.asarray([r["embedding"] for r in ref], dtype=np.float32)
    with embedder.Embedder(converted[name], threads=1, normalize=fam.normalizes) as m:
        assert (m.dim, m.max_seq_length) == (fam.dim, fam.max_tokens)
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
    with embedder.Embedder(converted[name], threads=2, normalize=fam.normalizes) as m2:
        assert np.array_equal(m2.encode(texts, batch_size=7), got)


@pytest.mark.parametrize("name", [f.name for f in FAMILIES if f.prompts])
def test_prompts(converted: Dict[str, Path], name: str) -> None:
    """Each model's stored prompts, by name, against ``<folder>_prompt_reference.jsonl``:
    ids (where the file has them) and vectors."""
    fam = BY_NAME[name]
    assert fam.prompts is not None
    count, default = fam.prompts
    ref = read_jsonl(fam.prompt_reference)
    assert len(ref) == count
    groups: Dict[str, List[Dict[str, Any]]] = {}
    for r in ref:
        prompt = r.get("prompt_name") or default
        assert prompt, f"{name}: a line without prompt_name and no default prompt"
        groups.setdefault(prompt, []).append(r)
    for prompt, rows in groups.items():
        with embedder.Embedder(converted[name], prompt_name=prompt, normalize=fam.normalizes) as m:
            for r in rows:
                if "input_ids" in r:
                    assert m.tokenize(r["text"]) == r["input_ids"], (prompt, r["text"])
            got = m.encode([r["text"] for r in rows])
        want = np.asarray([r["embedding"] for r in rows], dtype=np.float32)
        assert np.abs(got - want).max() <= 1e-5, prompt
        assert cosines(got, want).min() >= 0.99999, prompt


@pytest.mark.parametrize("name", [f.name for f in FAMILIES if f.cases])
def test_ids_every_case_line(converted: Dict[str, Path], name: str) -> None:
    """The tokenizer case files (ids without truncation) with the model
    carrying the same tokenizer.json: ids equal, and a text longer than the
    model is its reference ids cut on the right (the first
    ``max_seq_length - 1`` ids, then the closing special token)."""
    fam = BY_NAME[name]
    assert fam.cases is not None
    cases = read_jsonl(reference_dir() / fam.cases[0])
    assert len(cases) == fam.cases[1]
    with embedder.Embedder(converted[name], threads=1) as m:
        n = m.max_seq_length
        for c in cases:
            want = c["input_ids"]
            if len(want) > n:
                want = want[: n - 1] + want[-1:]
            assert m.tokenize(c["text"]) == want, c["text"]
