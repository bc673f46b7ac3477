#!/usr/bin/env python3
"""Before/after for cross-encoders: two `libembedder.so` builds ranking the same passages.

  bench/.venv/bin/python bench/rerank_ab.py make-deberta TINY_FOLDER OUT_FOLDER
  bench/.venv/bin/python bench/rerank_ab.py run MODEL --old OLD_LIB --new NEW_LIB
      [--rounds 3] [--threads 1,2] [--workloads lines:32,long:8] [--precision file]

`make-deberta` writes a random-weight cross-encoder folder in DeBERTa-v3-base's shape
(mxbai-rerank-base-v1's config: 12 x 768, 12 heads, intermediate 3,072, vocabulary
128,100, position_buckets 256, max_relative_positions -1, pos_att_type p2c + c2p,
share_att_key, norm_rel_ebd layer_norm, no absolute positions, no token types) with the
tokenizer files of TINY_FOLDER (shared/reference/encoders/deberta-reranker-tiny): tensors
named and shaped as transformers' `DebertaV2ForSequenceClassification` saves them and
initialised as its `_init_weights` does (normal(0, 0.02) weights, zero biases, LayerNorms
1 / 0); numpy and safetensors only. Convert it with `embd convert OUT_FOLDER -o FILE`.

`run` times `Reranker.rank(query, passages, top_k=10)` (tokenization included) of the
Python binding over each library, each run in a fresh process after one untimed call;
within a round the builds alternate; the median of the rounds is kept. Workloads: `lines:N`
ranks corpus lines 2..N+1 for line 1; `long:N` ranks N passages of 8 consecutive lines.
Prints texts/s per build, new/old, the tokens ranked and whether both builds gave the same
top 10, with the load average before and after.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
SHARED = os.environ.get("EMBD_SHARED_DIR", os.path.join(HERE, "..", "..", "shared"))
PYTHON_SRC = os.path.join(HERE, "..", "python", "src")


def corpus() -> list[str]:
    with open(os.path.join(SHARED, "bench", "corpus.txt"), encoding="utf-8") as f:
        return [line.rstrip("\n") for line in f if line.strip()]


def workload(spec: str) -> tuple[str, list[str]]:
    kind, n_text = spec.split(":")
    n, texts = int(n_text), corpus()
    if kind == "lines":
        return texts[0], texts[1 : n + 1]
    if kind == "long":
        return texts[0], [" ".join(texts[1 + 8 * i : 9 + 8 * i]) for i in range(n)]
    raise SystemExit(f"unknown workload {kind!r} (lines:N, long:N)")


def make_deberta(src: str, dst: str) -> None:
    import numpy as np
    from safetensors.numpy import save_file

    os.makedirs(dst, exist_ok=True)
    with open(os.path.join(src, "config.json"), encoding="utf-8") as f:
        cfg = json.load(f)
    h, inter, layers, vocab, span = 768, 3072, 12, 128100, 256
    cfg.update(
        {
            "hidden_size": h,
            "num_hidden_layers": layers,
            "num_attention_heads": 12,
            "intermediate_size": inter,
            "vocab_size": vocab,
            "position_buckets": span,
            "max_relative_positions": -1,
            "pos_att_type": ["p2c", "c2p"],
            "share_att_key": True,
            "norm_rel_ebd": "layer_norm",
            "position_biased_input": False,
            "type_vocab_size": 0,
            "relative_attention": True,
            "pooler_hidden_size": h,
            "initializer_range": 0.02,
            "max_position_embeddings": 512,
        }
    )
    with open(os.path.join(dst, "config.json"), "w", encoding="utf-8") as f:
        json.dump(cfg, f, indent=2)
    for name in os.listdir(src):
        if name not in ("config.json", "model.safetensors"):
            shutil.copy(os.path.join(src, name), dst)
    rng = np.random.default_rng(0)

    def w(*shape: int) -> Any:
        return (rng.standard_normal(shape, dtype=np.float32) * 0.02).astype(np.float32)

    def zeros(n: int) -> Any:
        return np.zeros(n, np.float32)

    def ones(n: int) -> Any:
        return np.ones(n, np.float32)

    t: dict[str, Any] = {
        "deberta.embeddings.word_embeddings.weight": w(vocab, h),
        "deberta.embeddings.LayerNorm.weight": ones(h),
        "deberta.embeddings.LayerNorm.bias": zeros(h),
        "deberta.encoder.rel_embeddings.weight": w(2 * span, h),
        "deberta.encoder.LayerNorm.weight": ones(h),
        "deberta.encoder.LayerNorm.bias": zeros(h),
        "pooler.dense.weight": w(h, h),
        "pooler.dense.bias": zeros(h),
        "classifier.weight": w(1, h),
        "classifier.bias": zeros(1),
    }
    for layer in range(layers):
        p = f"deberta.encoder.layer.{layer}."
        for n in ("query_proj", "key_proj", "value_proj"):
            t[p + f"attention.self.{n}.weight"] = w(h, h)
            t[p + f"attention.self.{n}.bias"] = zeros(h)
        for module, (rows, cols) in {
            "attention.output.dense": (h, h),
            "intermediate.dense": (inter, h),
            "output.dense": (h, inter),
        }.items():
            t[p + module + ".weight"] = w(rows, cols)
            t[p + module + ".bias"] = zeros(rows)
        for norm in ("attention.output.LayerNorm", "output.LayerNorm"):
            t[p + norm + ".weight"] = ones(h)
            t[p + norm + ".bias"] = zeros(h)
    save_file(t, os.path.join(dst, "model.safetensors"), metadata={"format": "pt"})
    print(f"{dst}: {sum(a.size for a in t.values()):,} parameters")


def child(lib: str, model: str, threads: int, spec: str, precision: str) -> None:
    os.environ["EMBEDDER_LIB_PATH"] = lib
    sys.path.insert(0, PYTHON_SRC)
    import embedder

    prec = None if precision == "file" else precision
    r = embedder.Reranker(model, threads=threads, compute_precision=prec)
    query, docs = workload(spec)
    tokens = sum(len(r.tokenize(query, d)[0]) for d in docs)
    top_k = min(10, len(docs))
    r.rank(query, docs, top_k=top_k)
    t0 = time.perf_counter()
    top = r.rank(query, docs, top_k=top_k)
    secs = time.perf_counter() - t0
    ids = [x["corpus_id"] for x in top]
    print(json.dumps({"texts_s": len(docs) / secs, "tokens": tokens, "top": ids}))


def run(args: argparse.Namespace) -> None:
    libs = {"old": args.old, "new": args.new}
    rows: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    print(f"load before {os.getloadavg()}", flush=True)
    for rnd in range(args.rounds):
        order = list(libs.items()) if rnd % 2 == 0 else list(libs.items())[::-1]
        for spec in args.workloads.split(","):
            for threads in args.threads.split(","):
                for name, lib in order:
                    cmd = [
                        sys.executable,
                        __file__,
                        "child",
                        lib,
                        args.model,
                        threads,
                        spec,
                    ]
                    out = subprocess.run(
                        cmd + [args.precision],
                        capture_output=True,
                        text=True,
                        check=False,
                    )
                    if out.returncode:
                        raise SystemExit(out.stderr)
                    r = json.loads(out.stdout)
                    rows.setdefault((spec, threads, name), []).append(r)
                    print(
                        f"round {rnd} {spec} threads {threads} {name}: {r['texts_s']:.2f} texts/s",
                        flush=True,
                    )
    print(f"load after {os.getloadavg()}")
    for spec in args.workloads.split(","):
        for threads in args.threads.split(","):
            old, new = rows[(spec, threads, "old")], rows[(spec, threads, "new")]
            o = statistics.median(r["texts_s"] for r in old)
            n = statistics.median(r["texts_s"] for r in new)
            same = all(a["top"] == b["top"] for a, b in zip(old, new, strict=True))
            print(
                f"{spec} threads {threads}: old {o:.2f}, new {n:.2f} texts/s, "
                f"new/old {n / o:.2f}x, {old[0]['tokens']} tokens, same top 10: {same}"
            )


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "child":
        lib, model, threads, spec, precision = sys.argv[2:7]
        child(lib, model, int(threads), spec, precision)
        return
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    mk = sub.add_parser("make-deberta")
    mk.add_argument("tiny")
    mk.add_argument("out")
    rn = sub.add_parser("run")
    rn.add_argument("model")
    rn.add_argument("--old", required=True)
    rn.add_argument("--new", required=True)
    rn.add_argument("--rounds", type=int, default=3)
    rn.add_argument("--threads", default="1,2")
    rn.add_argument("--workloads", default="lines:32,long:8")
    rn.add_argument("--precision", default="file")
    args = ap.parse_args()
    if args.cmd == "make-deberta":
        make_deberta(args.tiny, args.out)
    else:
        run(args)


if __name__ == "__main__":
    main()
