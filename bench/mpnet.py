#!/usr/bin/env python3
"""MPNet (all-mpnet-base-v2) next to MiniLM (all-MiniLM-L6-v2) and ONNX Runtime fp32
on MPNet, in the same run: is the engine as efficient per FLOP on the larger family?

Run through bench/run.sh --mpnet (which prepares bench/.venv, both models and
bench/out/mpnet.onnx, exported by bench/export_onnx.py). Steps:
  1. checks: the ONNX MPNet graph vs sentence-transformers (shared/reference/
     mpnet_reference.jsonl, one text per call; worst cosine >= 0.99999, token ids
     of HF tokenizers identical) and ours (`embd encode`) vs the same reference;
  2. throughput, `rounds` rounds interleaved, best per configuration: ours on
     MiniLM and on MPNet (`embd bench`, 2 threads and 1, 32 texts per call) and ORT
     fp32 on MPNet (2 threads and 1, sorted padded batches of 32, tokenization
     included as in bench.py);
  3. useful GFLOP/s = tokens x linear-layer FLOPs per token (from each config.json:
     2 x (4 H^2 + 2 H I) x layers) / seconds; the MPNet / MiniLM ratio per thread count.
Results: a table on stdout and bench/out/mpnet.json.

  mpnet.py [--rounds N] [--limit N] [--check]
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

import bench as common  # bench/bench.py: paths, corpus, cosines, embd helpers

ROOT = common.ROOT
OUT = common.OUT
EMBD = common.EMBD
MODELS = {
    "MiniLM": os.path.join(ROOT, "models", "all-MiniLM-L6-v2"),
    "MPNet": os.path.join(ROOT, "models", "all-mpnet-base-v2"),
}
ONNX_MPNET = os.path.join(OUT, "mpnet.onnx")


def shape(name):
    cfg = json.load(open(MODELS[name] + "-hf/config.json"))
    st = json.load(open(MODELS[name] + "-hf/sentence_bert_config.json"))
    return cfg, st["max_seq_length"]


def flops_per_token(cfg):
    h, i, n = cfg["hidden_size"], cfg["intermediate_size"], cfg["num_hidden_layers"]
    return 2 * (4 * h * h + 2 * h * i) * n


def tokenizer(name):
    from tokenizers import Tokenizer

    _, max_len = shape(name)
    tok = Tokenizer.from_file(MODELS[name] + "-hf/tokenizer.json")
    tok.no_padding()
    tok.enable_truncation(max_length=max_len)
    return tok


def ort_run(sess, id_lists, hidden):
    """MPNet graph: input_ids padded with the pad id 1, attention_mask; no token types."""
    n, width = len(id_lists), max(len(x) for x in id_lists)
    ids = np.ones((n, width), np.int64)
    mask = np.zeros((n, width), np.int64)
    for k, x in enumerate(id_lists):
        ids[k, : len(x)] = x
        mask[k, : len(x)] = 1
    return sess.run(["sentence_embedding"], {"input_ids": ids, "attention_mask": mask})[0]


def ort_sorted(sess, tok, texts, hidden, batch=32, parallel_tokenize=True):
    ids = (
        [e.ids for e in tok.encode_batch(texts)]
        if parallel_tokenize
        else [tok.encode(t).ids for t in texts]
    )
    order = sorted(range(len(ids)), key=lambda k: len(ids[k]))
    out = np.empty((len(ids), hidden), np.float32)
    for s in range(0, len(order), batch):
        part = order[s : s + batch]
        out[part] = ort_run(sess, [ids[k] for k in part], hidden)
    return out


def embd_bench(weights, corpus, threads, batch, warmup=20):
    cmd = [
        EMBD,
        "bench",
        "-m",
        weights,
        "--input",
        corpus,
        "--threads",
        str(threads),
        "--batch-size",
        str(batch),
        "--rounds",
        "1",
        "--latency-runs",
        "0",
        "--warmup",
        str(warmup),
    ]
    return json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)


def embd_encode_ref(weights, ref_path):
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "v.npy")
        subprocess.run(
            [
                EMBD,
                "encode",
                "-m",
                weights,
                "--jsonl",
                "--input",
                ref_path,
                "--format",
                "npy",
                "--output",
                out,
                "--threads",
                "2",
            ],
            check=True,
            capture_output=True,
        )
        return np.load(out)


def check(ref, ref_path):
    """ORT's MPNet graph and ours vs the reference. Returns a list of failures."""
    failures = []
    cfg, _ = shape("MPNet")
    tok = tokenizer("MPNet")
    want = np.array([r["embedding"] for r in ref])
    ids_ok = sum(tok.encode(r["text"]).ids == r["input_ids"] for r in ref)
    print(f"HF tokenizers vs reference ids: {ids_ok}/{len(ref)} identical")
    if ids_ok != len(ref):
        failures.append("HF tokenizers ids differ from the reference")
    sess = common.make_session(ONNX_MPNET, 2)
    got = np.concatenate(
        [ort_run(sess, [tok.encode(r["text"]).ids], cfg["hidden_size"]) for r in ref]
    )
    c = common.cosines(got, want)
    print(
        f"ORT fp32 MPNet (one text per call) vs reference: worst cosine {common.fmt_cos(c)}, mean {c.mean():.9f}"
    )
    if c.min() < common.REF_COS_ONNX:
        failures.append(f"ORT MPNet graph vs reference: worst cosine {c.min():.8f}")
    batched = ort_sorted(sess, tok, [r["text"] for r in ref], cfg["hidden_size"])
    cb = common.cosines(batched, want)
    print(
        f"ORT fp32 MPNet (sorted padded batches of 32) vs reference: worst cosine {common.fmt_cos(cb)}"
    )
    ours = embd_encode_ref(MODELS["MPNet"] + ".weights", ref_path)
    co = common.cosines(ours, want)
    diff = np.abs(ours - want).max()
    print(
        f"ours f32 MPNet vs reference: worst cosine {common.fmt_cos(co)}, max abs diff {diff:.2e}"
    )
    if co.min() < 0.99999 or diff > 1e-4:
        failures.append(f"ours MPNet vs reference: worst cosine {co.min():.8f}, max abs {diff:.2e}")
    return failures


def main():
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--limit", type=int, default=500, help="first N corpus texts (0 = all 2000)")
    ap.add_argument("--check", action="store_true", help="the checks only (no timing)")
    args = ap.parse_args()

    shared = common.shared_dir()
    ref_path = os.path.join(shared, "reference", "mpnet_reference.jsonl")
    ref = common.read_reference(ref_path)
    failures = check(ref, ref_path)
    if failures:
        sys.exit("MPNET CHECK FAILED:\n  " + "\n  ".join(failures))
    if args.check:
        print("mpnet check: all outputs agree")
        return

    texts = common.read_lines(os.path.join(shared, "bench", "corpus.txt"))
    if args.limit:
        texts = texts[: args.limit]
    with tempfile.NamedTemporaryFile("wb", suffix=".txt", delete=False) as f:
        f.write(("\n".join(texts) + "\n").encode("utf-8"))
        corpus = f.name
    toks = {m: tokenizer(m) for m in MODELS}
    tokens = {m: sum(len(e.ids) for e in toks[m].encode_batch(texts)) for m in MODELS}
    fpt = {m: flops_per_token(shape(m)[0]) for m in MODELS}
    hidden = shape("MPNet")[0]["hidden_size"]
    for m in MODELS:
        print(
            f"{m}: {len(texts)} texts, {tokens[m]} tokens, {tokens[m] * fpt[m] / 1e12:.3f} TFLOP in the linear layers"
        )

    sessions = {t: common.make_session(ONNX_MPNET, t) for t in (1, 2)}
    for s in sessions.values():
        ort_sorted(s, toks["MPNet"], texts[:64], hidden)
    configs = []
    for t in (2, 1):
        configs += [("ours", "MiniLM", t), ("ours", "MPNet", t), ("ORT fp32", "MPNet", t)]
    times: dict[tuple[str, str, int], list[float]] = {c: [] for c in configs}
    for r in range(args.rounds):
        load = common.loadavg()
        for c in configs:
            engine, m, t = c
            if engine == "ours":
                res = embd_bench(MODELS[m] + ".weights", corpus, t, 32)
                times[c].append(res["best_s"])
            else:
                t0 = time.perf_counter()
                ort_sorted(sessions[t], toks[m], texts, hidden, parallel_tokenize=t > 1)
                times[c].append(time.perf_counter() - t0)
            print(
                f"round {r + 1}: {engine:8s} {m:6s} {t}t {len(texts) / times[c][-1]:7.1f} texts/s "
                f"(load {load})",
                flush=True,
            )
    os.unlink(corpus)

    rows = []
    print(
        f"\n{'engine':9s} {'model':7s} {'thr':>3s} {'texts/s':>8s} {'tokens/s':>9s} {'GFLOP/s':>8s}"
    )
    for c in configs:
        engine, m, t = c
        best = min(times[c])
        gf = tokens[m] * fpt[m] / best / 1e9
        rows.append(
            {
                "engine": engine,
                "model": m,
                "threads": t,
                "best_s": best,
                "rounds_s": times[c],
                "texts_per_s": len(texts) / best,
                "tokens_per_s": tokens[m] / best,
                "gflops": gf,
            }
        )
        print(
            f"{engine:9s} {m:7s} {t:3d} {len(texts) / best:8.1f} {tokens[m] / best:9.0f} {gf:8.1f}"
        )
    by = {(r["engine"], r["model"], r["threads"]): r["gflops"] for r in rows}
    for t in (2, 1):
        ratio = by[("ours", "MPNet", t)] / by[("ours", "MiniLM", t)]
        vs_ort = by[("ours", "MPNet", t)] / by[("ORT fp32", "MPNet", t)]
        print(
            f"{t} thread(s): ours MPNet / ours MiniLM GFLOP/s = {ratio:.3f}; ours / ORT fp32 on MPNet = {vs_ort:.2f}x"
        )
    os.makedirs(OUT, exist_ok=True)
    with open(os.path.join(OUT, "mpnet.json"), "w") as f:
        json.dump(
            {"cpu": common.cpu_info(), "texts": len(texts), "tokens": tokens, "rows": rows},
            f,
            indent=1,
        )


if __name__ == "__main__":
    main()
