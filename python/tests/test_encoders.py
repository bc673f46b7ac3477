"""What the encoder families of ``shared/reference/encoders`` need beyond the
table of test families (``tests/data/families.tsv``, run by
``test_families.py``): nomic's Matryoshka recipe (``matryoshka="layer-norm"``)
and a static model in both libraries' ways, through the Python package.

The reference folders are converted into a temporary folder with
``$EMBD_BIN`` (default ``target/release/embd``, which
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


def encoders() -> Path:
    env = os.environ.get("EMBD_SHARED_DIR")
    shared = Path(env) if env else REPO.parent / "shared"
    return shared / "reference" / "encoders"


def read_jsonl(p: Path) -> List[Dict[str, Any]]:
    if not p.is_file():
        pytest.fail(f"{p} is missing: set EMBD_SHARED_DIR to the shared/ folder")
    with p.open(encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def convert(src: Path, dst: Path, *extra: str) -> Path:
    binary = Path(os.environ.get("EMBD_BIN", REPO / "target" / "release" / "embd"))
    if not binary.is_file():
        pytest.fail(f"{binary} is missing: run cargo build --release --bin embd, or set EMBD_BIN")
    r = subprocess.run(
        [str(binary), "convert", str(src), "-o", str(dst), *extra],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, f"embd convert {src.name}: {r.stderr}"
    return dst


@pytest.fixture(scope="module")
def converted(tmp_path_factory: pytest.TempPathFactory) -> Dict[str, Path]:
    out = tmp_path_factory.mktemp("encoders")
    return {n: convert(encoders() / n, out / f"{n}.weights") for n in ["nomic-embed-tiny"]}


def cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a64 = a.astype(np.float64)
    b64 = b.astype(np.float64)
    num = np.sum(a64 * b64, axis=1)
    den = np.linalg.norm(a64, axis=1) * np.linalg.norm(b64, axis=1)
    c: np.ndarray = np.where(den > 0, num / np.where(den > 0, den, 1.0), 1.0)
    return c


def assert_close(name: str, got: np.ndarray, want: np.ndarray) -> None:
    assert got.shape == want.shape and got.dtype == np.float32, name
    diff = np.abs(got - want).max(axis=1)
    cos = cosines(got, want)
    bad = [
        (i + 1, float(d), float(c))
        for i, (d, c) in enumerate(zip(diff, cos))
        if not (d <= 1e-5 and c >= 0.99999)
    ]
    assert not bad, f"{name}: lines off the reference (line, max abs, cosine): {bad[:5]}"


def test_nomic_matryoshka_recipe(converted: Dict[str, Path]) -> None:
    ref = read_jsonl(encoders() / "nomic-embed-tiny_matryoshka_reference.jsonl")
    assert len(ref) == 160
    for dims in (16, 8):
        rows = [r for r in ref if r["dimensions"] == dims]
        want = np.asarray([r["embedding"] for r in rows], dtype=np.float32)
        texts = [r["text"] for r in rows]
        path = converted["nomic-embed-tiny"]
        with embedder.Embedder(
            path, prompt_name="query", dimensions=dims, matryoshka="layer-norm"
        ) as m:
            assert m.dim == dims
            assert_close(f"nomic layer-norm {dims}", m.encode(texts), want)
        with embedder.Embedder(path, prompt_name="query", dimensions=dims) as m:
            assert cosines(m.encode(texts), want).min() < 0.9999, "truncation is not the recipe"
    with pytest.raises(embedder.InvalidArgumentError, match="truncate, layer-norm"):
        embedder.Embedder(converted["nomic-embed-tiny"], matryoshka="pca")


@pytest.mark.parametrize("behaviour", ["sentence-transformers", "model2vec"])
def test_static_model_in_both_ways(tmp_path: Path, behaviour: str) -> None:
    name = "potion-vq-tiny"
    path = convert(encoders() / name, tmp_path / f"{name}.weights", "--static-behaviour", behaviour)
    file = (
        f"{name}_model2vec_reference.jsonl"
        if behaviour == "model2vec"
        else f"{name}_reference.jsonl"
    )
    ref = read_jsonl(encoders() / file)
    want = np.asarray([r["embedding"] for r in ref], dtype=np.float32)
    with embedder.Embedder(path) as m:
        assert [m.tokenize(r["text"]) for r in ref] == [r["input_ids"] for r in ref]
        assert_close(f"{name} {behaviour}", m.encode([r["text"] for r in ref]), want)
