"""Models by name: ``Embedder("org/name")`` opens a model from the local
HuggingFace cache (laid out as ``huggingface_hub`` writes it: blobs,
relative snapshot symlinks, ``refs/main``) through ``embd_open``, converted
once into ``EMBD_CACHE_DIR``; vectors as the reference
(``shared/reference/families/xlmr-tiny_reference.jsonl``)."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import numpy as np
import pytest
from conftest import shared_dir

import embedder

REPO = "tiny-org/xlmr-tiny"
COMMIT = "2" * 40


def fill_cache(root: Path, src: Path) -> None:
    repo = root / ("models--" + REPO.replace("/", "--"))
    for f in sorted(src.rglob("*")):
        if not f.is_file():
            continue
        data = f.read_bytes()
        etag = hashlib.sha256(data).hexdigest()
        blob = repo / "blobs" / etag
        blob.parent.mkdir(parents=True, exist_ok=True)
        blob.write_bytes(data)
        rel = f.relative_to(src)
        link = repo / "snapshots" / COMMIT / rel
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(os.path.relpath(blob, link.parent))
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(COMMIT)


def test_a_hub_id_opens_from_the_hf_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    families = shared_dir() / "reference" / "families"
    fill_cache(tmp_path / "hf", families / "xlmr-tiny")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf"))
    monkeypatch.setenv("EMBD_CACHE_DIR", str(tmp_path / "embd"))
    ref = [
        json.loads(x)
        for x in (families / "xlmr-tiny_reference.jsonl").read_text().splitlines()[:16]
    ]
    want = np.asarray([r["embedding"] for r in ref], dtype=np.float32)
    for name in (REPO, f"{REPO}@{COMMIT}"):
        with embedder.Embedder(name, threads=1) as m:
            got = m.encode([r["text"] for r in ref])
        assert np.abs(got - want).max() <= 1e-5
    assert len(list((tmp_path / "embd").rglob("*.weights"))) == 1
    with pytest.raises(embedder.ModelNotFoundError, match="embd pull tiny-org/absent"):
        embedder.Embedder("tiny-org/absent")
