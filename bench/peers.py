#!/usr/bin/env python3
"""The quantized CPU peers: OpenVINO (+NNCF), CTranslate2, ONNX Runtime dynamic int8.

bench.py runs every peer configuration in a fresh process of this script ("worker"), so
that engines do not share a process (thread pools, allocators, spinning OpenMP threads)
and the process's peak RSS is that configuration's:

  peers.py --worker SPEC_JSON --result OUT_JSON

SPEC (a JSON object):
  engine    "ov" | "ct2" | "ort"
  model     path: OpenVINO IR .xml / CTranslate2 model folder / .onnx
  threads   1 or 2 (ov: INFERENCE_NUM_THREADS, ct2: intra_threads, ort: intra_op_num_threads)
  workers   1, or 2 = two workers: ORT, CTranslate2: two Python threads, each with its own
            ORT session / CTranslate2 replica (inter_threads=2), taking batches from one
            shared queue (the engines release the GIL while they compute); OpenVINO: an
            AsyncInferQueue of 2 infer requests fed in order
  streams   ov only: 2 = PERFORMANCE_HINT=THROUGHPUT, NUM_STREAMS=2 (one request per worker)
  hint      ov only: INFERENCE_PRECISION_HINT ("f32", "bf16"; absent = the CPU plugin's
            default, bf16 on CPUs with AVX512_BF16)
  batch     texts per call: 1 = one text per call, no padding; else texts sorted by token
            count and padded within the batch
  tasks     any of "accuracy" (reference file), "throughput" (corpus), "latency" (text)

Writes {"accuracy": {...}, "seconds": ..., "latency": {...}, "info": {...}} to OUT_JSON.
Tokenization (HF `tokenizers`, tokenizer.json, truncation at 256) is inside every timing;
single-thread configurations tokenize one text at a time, the others with encode_batch.
"""

import argparse
import json
import os
import sys
import threading
import time
from typing import Any

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HF_DIR = os.path.join(ROOT, "models", "all-MiniLM-L6-v2-hf")
HIDDEN, MAX_LEN = 384, 256


def read_lines(path):
    """Texts one per line, split exactly as `embd` reads them."""
    raw = open(path, "rb").read()
    lines = [ln[:-1] if ln.endswith(b"\r") else ln for ln in raw.split(b"\n")]
    if raw.endswith(b"\n"):
        lines.pop()
    return [ln.decode("utf-8") for ln in lines]


def make_tokenizer():
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(os.path.join(HF_DIR, "tokenizer.json"))
    tok.no_padding()
    tok.enable_truncation(max_length=MAX_LEN)
    return tok


def pad(id_lists):
    n, width = len(id_lists), max(len(x) for x in id_lists)
    ids = np.zeros((n, width), np.int64)
    mask = np.zeros((n, width), np.int64)
    for i, x in enumerate(id_lists):
        ids[i, : len(x)] = x
        mask[i, : len(x)] = 1
    return ids, mask


def mean_pool_normalize(hidden, mask):
    """sentence-transformers' Pooling(mean) + Normalize, on [n, seq, 384] float32."""
    m = mask[:, : hidden.shape[1], None].astype(np.float32)
    mean = (hidden * m).sum(1) / np.maximum(m.sum(1), 1e-9)
    return mean / np.maximum(np.linalg.norm(mean, axis=1, keepdims=True), 1e-12)


# --------------------------------------------------------------------------
# engines: each builds `workers` callables id_lists -> [n, 384] float32
# --------------------------------------------------------------------------


def ov_runners(spec, info):
    import openvino as ov
    import openvino.properties as props
    import openvino.properties.hint as hints

    core = ov.Core()
    cfg = {props.inference_num_threads: spec["threads"]}
    if spec.get("streams", 1) > 1:
        cfg[hints.performance_mode] = hints.PerformanceMode.THROUGHPUT
        cfg[props.num_streams] = spec["streams"]
    else:
        cfg[hints.performance_mode] = hints.PerformanceMode.LATENCY
        cfg[props.num_streams] = 1
    if spec.get("hint"):
        cfg[hints.inference_precision] = {"f32": ov.Type.f32, "bf16": ov.Type.bf16}[spec["hint"]]
    compiled = core.compile_model(spec["model"], "CPU", cfg)
    info["openvino"] = ov.get_version()
    info["inference_precision"] = compiled.get_property(hints.inference_precision).get_type_name()
    info["num_streams"] = int(compiled.get_property(props.num_streams))
    info["inference_num_threads"] = int(compiled.get_property(props.inference_num_threads))
    info["optimal_infer_requests"] = int(
        compiled.get_property(props.optimal_number_of_infer_requests)
    )

    def feeds(id_lists):
        ids, mask = pad(id_lists)
        return {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}

    req = compiled.create_infer_request()

    def run(id_lists):
        req.infer(feeds(id_lists))
        return req.get_output_tensor(0).data.copy()

    workers = spec.get("workers", 1)
    if workers > 1:
        # Several requests in flight: OpenVINO's AsyncInferQueue, one request per stream,
        # the way OpenVINO documents throughput mode (two Python threads each calling
        # infer() on its own request deadlocked once in ~40 runs here).
        queue = ov.AsyncInferQueue(compiled, workers)

        def many(batches):
            results = [None] * len(batches)

            def done(r, k):
                results[k] = r.get_output_tensor(0).data.copy()

            queue.set_callback(done)
            for k, b in enumerate(batches):
                queue.start_async(feeds(b), k)
            queue.wait_all()
            return results

        run.many = many  # type: ignore[attr-defined]  # looked up with hasattr by the caller
    return [run] * workers


def ct2_runners(spec, info):
    import ctranslate2

    workers = spec.get("workers", 1)
    enc = ctranslate2.Encoder(
        spec["model"],
        device="cpu",
        compute_type=spec.get("compute_type", "int8"),
        intra_threads=spec["threads"],
        inter_threads=workers,
    )
    info["ctranslate2"] = ctranslate2.__version__
    info["compute_type"] = enc.compute_type

    def run(id_lists):
        out = enc.forward_batch(id_lists)
        hidden = np.array(out.last_hidden_state)
        _, mask = pad(id_lists)
        return mean_pool_normalize(hidden, mask)

    return [run] * workers  # one Encoder; inter_threads=2 runs two calls at once


def ort_runners(spec, info):
    import onnxruntime as ort

    info["onnxruntime"] = ort.__version__

    def make():
        so = ort.SessionOptions()
        so.intra_op_num_threads = spec["threads"]
        so.inter_op_num_threads = 1
        so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        sess = ort.InferenceSession(spec["model"], so, providers=["CPUExecutionProvider"])

        def run(id_lists):
            ids, mask = pad(id_lists)
            return sess.run(
                ["sentence_embedding"],
                {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)},
            )[0]

        return run

    return [make() for _ in range(spec.get("workers", 1))]


ENGINES = {"ov": ov_runners, "ct2": ct2_runners, "ort": ort_runners}


# --------------------------------------------------------------------------
# the pipeline: tokenize, (sort, batch), run on the workers
# --------------------------------------------------------------------------


def embed_ids(runners, ids, batch):
    """Embeds token-id lists; returns [n, 384] in the input order. batch == 1: one text
    per call in input order; else sorted by token count, batches of `batch`. Several
    runners take the next batch from a shared queue, one Python thread each."""
    n = len(ids)
    out = np.empty((n, HIDDEN), np.float32)
    if batch <= 1:
        parts = [[i] for i in range(n)]
    else:
        order = sorted(range(n), key=lambda i: len(ids[i]))
        parts = [order[s : s + batch] for s in range(0, n, batch)]
    if len(runners) == 1:
        run = runners[0]
        for p in parts:
            out[p] = run([ids[i] for i in p])
        return out
    if hasattr(runners[0], "many"):  # the engine keeps several batches in flight itself
        for p, r in zip(parts, runners[0].many([[ids[i] for i in p] for p in parts]), strict=True):
            out[p] = r
        return out
    lock, nxt = threading.Lock(), [0]

    def work(run):
        while True:
            with lock:
                k = nxt[0]
                nxt[0] += 1
            if k >= len(parts):
                return
            p = parts[k]
            out[p] = run([ids[i] for i in p])

    threads = [threading.Thread(target=work, args=(r,)) for r in runners]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return out


def embed_texts(runners, tok, texts, batch, parallel_tokenize):
    if parallel_tokenize:
        ids = [e.ids for e in tok.encode_batch(texts)]
    elif batch <= 1 and len(runners) == 1:
        # one text per call: tokenize each text just before its call, as a user would
        out = np.empty((len(texts), HIDDEN), np.float32)
        run = runners[0]
        for i, t in enumerate(texts):
            out[i] = run([tok.encode(t).ids])[0]
        return out
    else:
        ids = [tok.encode(t).ids for t in texts]
    return embed_ids(runners, ids, batch)


def embed_texts_workers(runners, tok, texts, batch):
    """Two or more workers, one text per call: each worker tokenizes its own texts."""
    if batch > 1:
        return embed_texts(runners, tok, texts, batch, parallel_tokenize=True)
    out = np.empty((len(texts), HIDDEN), np.float32)
    lock, nxt = threading.Lock(), [0]

    def work(run):
        while True:
            with lock:
                k = nxt[0]
                nxt[0] += 1
            if k >= len(texts):
                return
            out[k] = run([tok.encode(texts[k]).ids])[0]

    threads = [threading.Thread(target=work, args=(r,)) for r in runners]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return out


def percentile(samples, q):
    s = sorted(samples)
    return s[max(1, int(np.ceil(q * len(s)))) - 1]


def worker(spec):
    info: dict[str, Any] = {}
    tok = make_tokenizer()
    t0 = time.perf_counter()
    runners = ENGINES[spec["engine"]](spec, info)
    info["load_s"] = time.perf_counter() - t0
    batch = spec.get("batch", 32)
    multi = len(runners) > 1 or spec["threads"] > 1
    res: dict[str, Any] = {"info": info}

    def embed(texts):
        if len(runners) > 1:
            return embed_texts_workers(runners, tok, texts, batch)
        return embed_texts(runners, tok, texts, batch, parallel_tokenize=multi)

    tasks = spec.get("tasks", [])
    if "accuracy" in tasks:
        # the reference's own input_ids go through the same pipeline as the corpus
        ref = [json.loads(ln) for ln in open(spec["reference"], encoding="utf-8") if ln.strip()]
        want = np.array([r["embedding"] for r in ref], np.float64)
        got = embed([r["text"] for r in ref]).astype(np.float64)
        c = (got * want).sum(1) / (np.linalg.norm(got, axis=1) * np.linalg.norm(want, axis=1))
        ids_ok = sum(tok.encode(r["text"]).ids == r["input_ids"] for r in ref)
        res["accuracy"] = {
            "lines": len(ref),
            "worst": float(c.min()),
            "mean": float(c.mean()),
            "worst_item": int(c.argmin()) + 1,
            "ids_identical": int(ids_ok),
        }
    if "throughput" in tasks:
        texts = read_lines(spec["corpus"])
        if spec.get("limit"):
            texts = texts[: spec["limit"]]
        embed(texts[: spec.get("warmup", 100)])
        t0 = time.perf_counter()
        embed(texts)
        res["seconds"] = time.perf_counter() - t0
        res["texts"] = len(texts)
    if "latency" in tasks:
        text, runs = spec["latency_text"], spec.get("latency_runs", 200)
        run = runners[0]
        samples = []
        for i in range(runs + 10):
            t0 = time.perf_counter()
            run([tok.encode(text).ids])
            if i >= 10:
                samples.append((time.perf_counter() - t0) * 1e3)
        res["latency"] = {
            "median_ms": percentile(samples, 0.5),
            "p90_ms": percentile(samples, 0.9),
            "tokens": len(tok.encode(text).ids),
            "runs": runs,
        }
    return res


def main():
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--worker", required=True, help="SPEC as JSON")
    ap.add_argument("--result", required=True, help="where to write the result JSON")
    args = ap.parse_args()
    res = worker(json.loads(args.worker))
    with open(args.result, "w") as f:
        json.dump(res, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
