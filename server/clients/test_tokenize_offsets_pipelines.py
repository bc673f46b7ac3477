"""/tokenize's ids and byte offsets for the SentencePiece-Unigram and byte-level
BPE tokenizers, against the reference tools on every line of the reference case
files (shared/reference/families/{unigram,unigram_v5,bpe}_cases.jsonl: NFD,
full-width forms, zero-width and control characters, whitespace runs, literal
`<mask>` and `<s>`, ...):

- the tokenizer as written (`embd convert --tokenizer-layout as-written`)
  against HF `tokenizers` (`Tokenizer.from_file(tokenizer.json).encode(text)
  .offsets`);
- the transformers 5 layout (the default) against transformers'
  `AutoTokenizer.from_pretrained(folder)(text, return_offsets_mapping=True)`
  (transformers runs without torch for tokenizers; the test fails if it is
  missing).

HF gives character offsets; ours are bytes of the input: the test converts
HF's. The models are the reference folders xlmr-tiny (classic Unigram layout),
bert-unigram-tiny (transformers 5 Unigram layout) and roberta-bpe-tiny,
converted by the built `embd` into a temporary directory and served by one
`embd-serve` (loopback, a free port, stopped with SIGTERM).

Env: EMBD_SERVE_BIN, EMBD_BIN (default target/release/{embd-serve,embd}),
EMBD_SHARED_DIR. Run: `python -m pytest server/clients/test_tokenize_offsets_pipelines.py`
with a Python that has tokenizers 0.23.3, transformers 5, requests, pytest.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
from serve_process import serve

REPO = Path(__file__).resolve().parents[2]
SERVE = Path(os.environ.get("EMBD_SERVE_BIN", REPO / "target" / "release" / "embd-serve"))
EMBD = Path(os.environ.get("EMBD_BIN", REPO / "target" / "release" / "embd"))

# (served name, reference folder, layout, case file)
MODELS = [
    ("xlmr-written", "xlmr-tiny", "as-written", "unigram_cases.jsonl"),
    ("xlmr-tf", "xlmr-tiny", "transformers", "unigram_cases.jsonl"),
    ("v5-written", "bert-unigram-tiny", "as-written", "unigram_v5_cases.jsonl"),
    ("v5-tf", "bert-unigram-tiny", "transformers", "unigram_v5_cases.jsonl"),
    ("bpe-written", "roberta-bpe-tiny", "as-written", "bpe_cases.jsonl"),
    ("bpe-tf", "roberta-bpe-tiny", "transformers", "bpe_cases.jsonl"),
]


def shared_dir() -> Path:
    env = os.environ.get("EMBD_SHARED_DIR")
    if env:
        return Path(env)
    for p in (REPO.parent / "shared", REPO.parent.parent / "shared"):
        if (p / "reference").is_dir():
            return p
    return REPO.parent / "shared"


FAMILIES = shared_dir() / "reference" / "families"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    for p in (SERVE, EMBD):
        if not p.exists():
            pytest.fail(f"{p} is missing (cargo build --release -p embd-server; cargo build --release)")
    out = tmp_path_factory.mktemp("offsets-models")
    args = []
    for name, folder, layout, _ in MODELS:
        path = out / f"{name}.weights"
        subprocess.run(
            [str(EMBD), "convert", str(FAMILIES / folder), "-o", str(path),
             "--tokenizer-layout", layout],
            check=True, capture_output=True,
        )
        args += ["--model", f"{name}={path}"]
    with serve(SERVE, [*args, "--max-client-batch-size", "64"]) as url:
        yield url


def cases(name: str) -> list[str]:
    with open(FAMILIES / name, encoding="utf-8") as f:
        return [json.loads(line)["text"] for line in f if line.strip()]


def byte_offsets(text: str, a: int, b: int) -> tuple[int, int]:
    return len(text[:a].encode()), len(text[:b].encode())


def reference(folder: str, layout: str) -> Any:
    """A function text -> (ids, char offsets) of the reference tool."""
    if layout == "as-written":
        from tokenizers import Tokenizer

        tok = Tokenizer.from_file(str(FAMILIES / folder / "tokenizer.json"))
        tok.no_truncation()
        tok.no_padding()

        def run(text: str) -> tuple[list[int], list[tuple[int, int]]]:
            e = tok.encode(text)
            return e.ids, e.offsets

        return run
    from transformers import AutoTokenizer

    auto = AutoTokenizer.from_pretrained(str(FAMILIES / folder))

    def run_tf(text: str) -> tuple[list[int], list[tuple[int, int]]]:
        e = auto(text, truncation=False, return_offsets_mapping=True)
        return e["input_ids"], [tuple(o) for o in e["offset_mapping"]]

    return run_tf


@pytest.mark.parametrize("name,folder,layout,case_file", MODELS, ids=[m[0] for m in MODELS])
def test_offsets_match_the_reference_tool(
    server: str, name: str, folder: str, layout: str, case_file: str
) -> None:
    run = reference(folder, layout)
    texts = cases(case_file)
    assert len(texts) == 2914
    s = requests.Session()
    checked = 0
    bad: list[str] = []
    for k in range(0, len(texts), 64):
        batch = texts[k : k + 64]
        got = s.post(server + "/tokenize", json={"inputs": batch, "model": name}, timeout=300)
        assert got.status_code == 200, got.text
        for text, toks in zip(batch, got.json()):
            ids, offsets = run(text)
            if [t["id"] for t in toks] != ids:
                bad.append(f"ids differ: {text!r}: ours {[t['id'] for t in toks]} ref {ids}")
                continue
            # The first and last are the template's <s> and </s> (no text).
            assert toks[0]["start"] is None and toks[-1]["start"] is None
            for t, (a, b) in zip(toks[1:-1], offsets[1:-1]):
                want = byte_offsets(text, a, b)
                if (t["start"], t["stop"]) != want:
                    bad.append(f"{text!r}: token {t} want {want}")
                    break
                checked += 1
    assert not bad, f"{len(bad)} texts differ; first 10:\n" + "\n".join(bad[:10])
    assert checked > 20000, checked
