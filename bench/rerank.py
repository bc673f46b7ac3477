#!/usr/bin/env python3
"""Reranking latency of the library: one query against 100 (and 1,000) passages
of shared/bench/corpus.txt, at 1 and 2 threads, f32 and int8, through the Python
binding (``embedder.Reranker.rank``; the pairs run
padding-free over the threads).

The peers the issue names (ONNX Runtime on a fused ONNX export of the same
classifier, sentence-transformers' CrossEncoder) are not measured by this
script yet: it prints only our rows.

usage: EMBEDDER_LIB_PATH=target/release/libembedder.so PYTHONPATH=python/src \\
       python3 bench/rerank.py [MODEL] [--rounds N]
MODEL defaults to models/minilm-reranker.weights (scripts/fetch_reranker.sh).
"""

import argparse
import os
import statistics
import time
from pathlib import Path

import embedder

ROOT = Path(__file__).resolve().parents[1]


def corpus() -> list:
    shared = Path(os.environ.get("EMBD_SHARED_DIR", ROOT.parent / "shared"))
    lines = (shared / "bench" / "corpus.txt").read_text(encoding="utf-8").splitlines()
    return [t for t in lines if t.strip()]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("model", nargs="?", default=str(ROOT / "models" / "minilm-reranker.weights"))
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    texts = corpus()
    query = texts[0]
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print("| precision | threads | passages | median ms | pairs/s |")
    print("|---|---|---|---|---|")
    for precision in ("f32", "int8"):
        for threads in (1, 2):
            r = embedder.Reranker(args.model, threads=threads, compute_precision=precision)
            for n in (100, 1000):
                docs = texts[1 : n + 1]
                r.rank(query, docs[:10])  # warm-up (packs the weights)
                times = []
                for _ in range(args.rounds if n == 100 else max(1, args.rounds // 2)):
                    t0 = time.perf_counter()
                    r.rank(query, docs, top_k=10)
                    times.append(time.perf_counter() - t0)
                ms = statistics.median(times) * 1e3
                print(f"| {precision} | {threads} | {n} | {ms:.1f} | {n / ms * 1e3:.0f} |")
            r.close()
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
