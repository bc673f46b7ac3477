"""Tokenizer speed: our Unigram and byte-level BPE tokenizers against HF `tokenizers`.

Single thread on both sides, every text encoded whole (special tokens added, no
truncation), best of N passes, tokens counted by each side (they must agree: the
script checks the totals). Cases:

- multilingual: the texts of shared/reference/families/unigram_cases.jsonl (about 100
  languages) through the Unigram tokenizer of bert-unigram-tiny (the transformers 5 layout,
  which HF `tokenizers` and sentence-transformers run alike);
- English: shared/bench/corpus.txt through the Unigram tokenizer and the byte-level
  BPE tokenizer of roberta-bpe-tiny;
- multilingual through BPE too.

HF: `tokenizers.Tokenizer.from_file(folder/tokenizer.json).encode_batch(texts)` with
RAYON_NUM_THREADS=1 (set before import). Ours: `embd bench --tokenize-only` on the
converted model file (the tokenizer is stored in it). Run through bench/run_tokenizers.sh,
which converts the models and uses bench/.venv (bench/setup.sh).

Usage: python bench/tokenizer_speed.py EMBD_BIN MODELS_DIR SHARED_DIR [--rounds N]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import tempfile
import time
from pathlib import Path

os.environ["RAYON_NUM_THREADS"] = "1"
os.environ["TOKENIZERS_PARALLELISM"] = "false"

from tokenizers import Tokenizer  # noqa: E402


def hf_rate(tokenizer_json: Path, texts: list[str], rounds: int) -> tuple[int, float]:
    tok = Tokenizer.from_file(str(tokenizer_json))
    tok.encode_batch(texts[:50])
    best = float("inf")
    tokens = 0
    for _ in range(rounds):
        t0 = time.perf_counter()
        enc = tok.encode_batch(texts)
        dt = time.perf_counter() - t0
        best = min(best, dt)
        tokens = sum(len(e.ids) for e in enc)
    return tokens, tokens / best


def ours_rate(embd: str, model: Path, texts: list[str], rounds: int) -> tuple[int, float, float]:
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False) as f:
        for t in texts:
            f.write(json.dumps({"text": t}) + "\n")
        path = f.name
    try:
        # The input reader takes one text per line; texts with newlines go as JSONL.
        out = subprocess.run(
            [
                embd,
                "bench",
                "-m",
                str(model),
                "--tokenize-only",
                "--input",
                path,
                "--rounds",
                str(rounds),
            ],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
    finally:
        os.unlink(path)
    r = json.loads(out)
    return r["tokens"], r["tokens_per_s"], r["open_ms"]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("embd")
    ap.add_argument("models")
    ap.add_argument("shared")
    ap.add_argument("--rounds", type=int, default=5)
    a = ap.parse_args()
    shared = Path(a.shared)
    fam = shared / "reference" / "families"
    multi = [json.loads(x)["text"] for x in open(fam / "unigram_cases.jsonl", encoding="utf-8")]
    english = [x.rstrip("\n") for x in open(shared / "bench" / "corpus.txt", encoding="utf-8")]
    models = Path(a.models)
    cases = [
        ("Unigram", "multilingual", "bert-unigram-tiny", multi),
        ("Unigram", "English", "bert-unigram-tiny", english),
        ("BPE", "multilingual", "roberta-bpe-tiny", multi),
        ("BPE", "English", "roberta-bpe-tiny", english),
    ]
    print(
        f"{'tokenizer':<9} {'texts':<13} {'tokens':>8} {'HF tokens/s':>12} "
        f"{'ours tokens/s':>14} {'ratio':>6}  open"
    )
    rows = []
    for kind, what, model, texts in cases:
        hf_tokens, hf = hf_rate(fam / model / "tokenizer.json", texts, a.rounds)
        our_tokens, ours, open_ms = ours_rate(a.embd, models / f"{model}.weights", texts, a.rounds)
        note = "" if hf_tokens == our_tokens else f"  (token totals differ: HF {hf_tokens})"
        print(
            f"{kind:<9} {what:<13} {our_tokens:>8} {hf:>12.0f} {ours:>14.0f} "
            f"{ours / hf:>5.2f}x  {open_ms:.1f} ms{note}"
        )
        rows.append(
            {
                "tokenizer": kind,
                "texts": what,
                "tokens": our_tokens,
                "hf_tokens": hf_tokens,
                "hf_tokens_per_s": hf,
                "ours_tokens_per_s": ours,
                "ratio": ours / hf,
                "open_ms": open_ms,
            }
        )
    print(json.dumps(rows))


if __name__ == "__main__":
    main()
