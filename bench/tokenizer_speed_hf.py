"""HF `tokenizers` speed on the architecture cases (one thread), for comparison
with `cargo test --release --test it arch_tokenizers::speed -- --ignored
--nocapture` (same texts, 20 passes, best of 5; ids without special tokens).

    python3 -m venv .venv && .venv/bin/pip install tokenizers==0.23.3
    RAYON_NUM_THREADS=1 .venv/bin/python bench/tokenizer_speed_hf.py [shared/reference/architectures]
"""

import json
import os
import sys
import time

os.environ.setdefault("RAYON_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
from tokenizers import Tokenizer  # noqa: E402

base = (
    sys.argv[1]
    if len(sys.argv) > 1
    else os.path.join(os.path.dirname(__file__), "..", "..", "shared", "reference", "architectures")
)
for folder, cases in [
    ("modernbert-tiny", "modernbert_bpe_cases.jsonl"),
    ("qwen3-embedding-tiny", "qwen3_bpe_cases.jsonl"),
    ("embeddinggemma-tiny", "gemma_spm_bpe_cases.jsonl"),
]:
    tok = Tokenizer.from_file(os.path.join(base, folder, "tokenizer.json"))
    texts = [json.loads(line)["text"] for line in open(os.path.join(base, cases), encoding="utf-8")]
    nbytes = sum(len(t.encode("utf-8")) for t in texts)
    best = float("inf")
    for _ in range(5):
        t0 = time.perf_counter()
        n_ids = 0
        for _ in range(20):
            for enc in tok.encode_batch(texts, add_special_tokens=False):
                n_ids += len(enc.ids)
        best = min(best, time.perf_counter() - t0)
    print(
        f"{folder}: {nbytes * 20 / best / 1e6:.1f} MB/s, {n_ids / best / 1e6:.2f} M ids/s "
        f"({len(texts)} texts x 20, {nbytes} bytes each pass, best of 5)"
    )
