#!/usr/bin/env python3
"""Benchmark: our engine (`embd bench`) against ONNX Runtime on the same corpus.

Run through bench/run.sh, which creates bench/.venv and the ONNX models first.

  bench.py [--rounds N] [--limit N]     timing run: table on stdout, bench/out/results.json
  bench.py --check                      correctness only (CI): ORT vs reference vs ours

What one timing run does, in this order:
  1. verifies the ONNX models (plain and ORT-fused) against the reference embeddings;
  2. throughput: `rounds` rounds; in each round every configuration runs once over the
     whole corpus, ORT configurations in this process and ours as `embd bench`
     subprocesses (one round per invocation), alternating ORT / ours, plus a GEMM
     ceiling measurement (numpy float32 matmul on the model's shapes, 1 and 2 threads);
  3. single-text latency of a ~20-token corpus sentence, ours and ORT, interleaved;
  4. open time (ours: open + first embedding; ORT: session creation + first run);
  5. peak RSS of `embd encode` over the corpus and of an ORT process doing the same.
Tokenization is included in every timing, for both engines.
"""

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "bench", "out")
HF_DIR = os.path.join(ROOT, "models", "all-MiniLM-L6-v2-hf")
WEIGHTS = os.path.join(ROOT, "models", "all-MiniLM-L6-v2.weights")
ONNX_PLAIN = os.path.join(OUT, "minilm.onnx")
ONNX_FUSED = os.path.join(OUT, "minilm.opt.onnx")
EMBD = os.path.join(ROOT, "target", "release", "embd")

# all-MiniLM-L6-v2 shapes, for the FLOP count and the GEMM ceiling.
HIDDEN, INTER, LAYERS, MAX_LEN = 384, 1536, 6, 256
# Useful linear-layer FLOPs per token: Q, K, V, O (H x H each) and the two FFN
# matrices (H x I, I x H), a multiply-add = 2 FLOPs, for every layer.
FLOPS_PER_TOKEN = 2 * (4 * HIDDEN * HIDDEN + 2 * HIDDEN * INTER) * LAYERS

REF_COS_ONNX = 0.99999  # ONNX model vs sentence-transformers reference
COS_OURS = 0.9999  # ours vs ORT and ours vs reference (check mode)


def shared_dir():
    """The project's shared/ folder: $EMBD_SHARED_DIR, else next to the repository."""
    cands = [os.environ.get("EMBD_SHARED_DIR", ""), os.path.join(ROOT, "..", "shared"),
             os.path.join(ROOT, "..", "..", "shared")]
    for c in cands:
        if c and os.path.isfile(os.path.join(c, "bench", "corpus.txt")):
            return os.path.abspath(c)
    sys.exit("bench: cannot find shared/bench/corpus.txt (set EMBD_SHARED_DIR)")


def read_lines(path):
    """Texts one per line, split exactly as `embd` reads them (src/bin/embd/io_util.rs)."""
    raw = open(path, "rb").read()
    lines = [ln[:-1] if ln.endswith(b"\r") else ln for ln in raw.split(b"\n")]
    if raw.endswith(b"\n"):
        lines.pop()
    return [ln.decode("utf-8") for ln in lines]


def read_reference(path):
    return [json.loads(line) for line in open(path, encoding="utf-8") if line.strip()]


def cosines(a, b):
    """Row-wise cosine similarity of two [n, d] arrays, in float64."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


def fmt_cos(c):
    """Worst cosine with its distance from 1 (8 decimals alone hide the difference)."""
    return f"{c.min():.8f} (1-cos {1 - c.min():.1e}, item {int(c.argmin()) + 1})"


def cpu_info():
    """CPU model and the SIMD flags that matter for fp32 GEMM."""
    model, flags = platform.machine(), set()
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name") and model == platform.machine():
                model = line.split(":", 1)[1].strip()
            elif line.startswith("flags"):
                flags = set(line.split(":", 1)[1].split())
                break
    except OSError:
        pass
    return {"model": model, "simd": sorted(flags & {"avx2", "fma", "avx512f", "avx512_bf16", "amx_tile"})}


def loadavg():
    return [round(x, 2) for x in os.getloadavg()]


# --------------------------------------------------------------------------
# ONNX Runtime side
# --------------------------------------------------------------------------

def make_tokenizer():
    """HF `tokenizers` with the model's tokenizer.json, set up as sentence-transformers
    uses it: no padding (we pad ourselves, within a batch), truncation at 256 tokens."""
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(os.path.join(HF_DIR, "tokenizer.json"))
    tok.no_padding()
    tok.enable_truncation(max_length=MAX_LEN)
    return tok


def make_session(path, threads):
    """An ORT CPU session with `threads` intra-op threads and all graph optimizations."""
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])


def ort_run(sess, id_lists):
    """Embeds token-id lists in one call: padded to the longest, attention mask 0 on
    padding, token types 0. Returns [n, 384] float32."""
    n, width = len(id_lists), max(len(x) for x in id_lists)
    ids = np.zeros((n, width), np.int64)
    mask = np.zeros((n, width), np.int64)
    for i, x in enumerate(id_lists):
        ids[i, :len(x)] = x
        mask[i, :len(x)] = 1
    feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
    return sess.run(["sentence_embedding"], feeds)[0]


def ort_single(sess, tok, texts):
    """One text per call (no padding). Returns the embeddings."""
    return np.concatenate([ort_run(sess, [tok.encode(t).ids]) for t in texts])


def ort_sorted_batches(sess, tok, texts, batch=32, parallel_tokenize=True):
    """Tokenize all, sort by length, run batches of `batch` padded within the batch.
    Returns the embeddings in the original order. `encode_batch` tokenizes on all
    cores; single-thread configurations pass parallel_tokenize=False."""
    if parallel_tokenize:
        ids = [e.ids for e in tok.encode_batch(texts)]
    else:
        ids = [tok.encode(t).ids for t in texts]
    order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
    out = np.empty((len(ids), HIDDEN), np.float32)
    for s in range(0, len(order), batch):
        part = order[s:s + batch]
        out[part] = ort_run(sess, [ids[i] for i in part])
    return out


def ort_two_sessions(sessions, tok, texts):
    """Two single-thread sessions in parallel (Python threads; ORT releases the GIL in
    run()), each embedding one half of the corpus one text per call."""
    half = len(texts) // 2
    parts = [texts[:half], texts[half:]]
    results = [None, None]

    def work(k):
        results[k] = ort_single(sessions[k], tok, parts[k])

    threads = [threading.Thread(target=work, args=(k,)) for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return np.concatenate(results)


# --------------------------------------------------------------------------
# our side: the embd binary
# --------------------------------------------------------------------------

def embd_bench(corpus, threads, batch, limit=0, latency_runs=0, latency_text=None, warmup=100):
    """One `embd bench` invocation (a fresh process); returns its JSON."""
    cmd = [EMBD, "bench", "-m", WEIGHTS, "--input", corpus, "--threads", str(threads),
           "--batch-size", str(batch), "--rounds", "1", "--limit", str(limit),
           "--latency-runs", str(latency_runs), "--warmup", str(warmup)]
    if latency_text is not None:
        cmd += ["--latency-text", latency_text]
    return json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)


def embd_encode_npy(input_path, jsonl=False, threads=2):
    """Embeds a file with `embd encode` and returns the [n, 384] array."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "v.npy")
        cmd = [EMBD, "encode", "-m", WEIGHTS, "--input", input_path, "--format", "npy",
               "--output", out, "--threads", str(threads)]
        if jsonl:
            cmd.append("--jsonl")
        subprocess.run(cmd, check=True, stderr=subprocess.DEVNULL)
        return np.load(out)


# Runs argv[1:] and prints its peak RSS in KiB. On Linux a child's ru_maxrss starts
# from its parent's RSS at fork (the old address space's high-water mark survives
# exec), so measuring straight from this process (hundreds of MB with the ORT
# sessions loaded) would report our own size. This small launcher forks from a
# ~10 MB interpreter instead; its own size is then the floor of the measurement.
RSS_LAUNCHER = (
    "import os, subprocess, sys\n"
    "p = subprocess.Popen(sys.argv[1:], stdout=subprocess.DEVNULL)\n"
    "_, status, usage = os.wait4(p.pid, 0)\n"
    "print(os.waitstatus_to_exitcode(status), usage.ru_maxrss)\n"
)


def peak_rss_mb(cmd):
    """Runs cmd to completion; returns (exit status, its peak RSS in MB)."""
    out = subprocess.run([sys.executable, "-c", RSS_LAUNCHER] + cmd, check=True, capture_output=True,
                         text=True).stdout.split()
    return int(out[0]), int(out[1]) / 1024.0  # ru_maxrss is in KiB on Linux


# --------------------------------------------------------------------------
# GEMM ceiling
# --------------------------------------------------------------------------

# One layer's linear layers over a 2048-token chunk: (M, K, N) of Q, K, V, O, FFN in, out.
GEMM_SHAPES = [(2048, 384, 384)] * 4 + [(2048, 384, 1536), (2048, 1536, 384)]


def gemm_child():
    """Measures numpy float32 matmul (OpenBLAS) GFLOP/s over GEMM_SHAPES; prints JSON.
    Runs in a subprocess whose OPENBLAS/OMP thread variables fix the thread count."""
    rng = np.random.default_rng(0)
    mats = {}
    for m, k, n in set(GEMM_SHAPES):
        mats[(m, k, n)] = (rng.standard_normal((m, k), np.float32), rng.standard_normal((k, n), np.float32),
                           np.empty((m, n), np.float32))
    best = {}
    for _ in range(5):  # best of 5 passes of 10 calls per shape
        for shape, (a, b, c) in mats.items():
            np.matmul(a, b, out=c)
            t0 = time.perf_counter()
            for _ in range(10):
                np.matmul(a, b, out=c)
            dt = (time.perf_counter() - t0) / 10
            best[shape] = min(best.get(shape, dt), dt)
    flops = sum(2 * m * k * n for m, k, n in GEMM_SHAPES)
    secs = sum(best[s] for s in GEMM_SHAPES)
    print(json.dumps({"gflops": flops / secs / 1e9,
                      "per_shape": {f"{m}x{k}x{n}": 2 * m * k * n / best[(m, k, n)] / 1e9
                                    for (m, k, n) in mats}}))


def gemm_ceiling(threads):
    env = dict(os.environ)
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        env[var] = str(threads)
    out = subprocess.run([sys.executable, os.path.abspath(__file__), "--gemm-child"], env=env,
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def ort_encode_child(corpus):
    """An ORT process that does what `embd encode` does: embeds the corpus (fused model,
    2-thread session, length-sorted batches of 32) and writes JSONL vectors to /dev/null."""
    tok = make_tokenizer()
    sess = make_session(ONNX_FUSED, 2)
    emb = ort_sorted_batches(sess, tok, read_lines(corpus))
    with open(os.devnull, "w") as f:
        for row in emb:
            f.write(json.dumps({"embedding": row.tolist()}) + "\n")


# --------------------------------------------------------------------------
# correctness
# --------------------------------------------------------------------------

def verify_onnx(tok, ref):
    """The ONNX models against the sentence-transformers reference (all lines).
    Returns {name: worst cosine}; also checks the tokenizer's ids."""
    bad_ids = sum(tok.encode(r["text"]).ids != r["input_ids"] for r in ref)
    print(f"tokenizer: {len(ref) - bad_ids}/{len(ref)} reference lines with identical input_ids")
    want = np.array([r["embedding"] for r in ref], np.float32)
    worst = {}
    ids = [r["input_ids"] for r in ref]
    order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
    for name, path in (("unfused", ONNX_PLAIN), ("fused", ONNX_FUSED)):
        sess = make_session(path, 2)
        if name == "unfused":  # one text per call
            got = np.concatenate([ort_run(sess, [x]) for x in ids])
        else:  # length-sorted padded batches of 32 (exercises the attention mask)
            got = np.empty((len(ids), HIDDEN), np.float32)
            for s in range(0, len(order), 32):
                got[order[s:s + 32]] = ort_run(sess, [ids[i] for i in order[s:s + 32]])
        c = cosines(got, want)
        worst[name] = float(c.min())
        how = "one text per call" if name == "unfused" else "sorted batches of 32"
        print(f"ORT {name:8s} ({how}) vs reference: {len(ref)} lines, worst cosine {fmt_cos(c)}, max |diff| {np.abs(got - want).max():.2e}")
    ok = bad_ids == 0 and all(w >= REF_COS_ONNX for w in worst.values())
    return ok, {"tokenizer_mismatches": int(bad_ids), "worst_cosine": worst}


def check(args, tok, ref, corpus_path):
    """--check: outputs agree (no timing). Returns the process exit code."""
    failures = []
    ok, onnx_res = verify_onnx(tok, ref)
    if not ok:
        failures.append(f"ONNX models vs reference below {REF_COS_ONNX} or token ids differ")

    texts = read_lines(corpus_path)
    n = len(texts) if args.check_texts == 0 else min(args.check_texts, len(texts))
    texts = texts[:n]
    # Token ids: ours (embd tokenize) vs HF tokenizers on the whole corpus, so both
    # engines do the same work in the timing runs.
    ours_ids = [json.loads(ln)["input_ids"] for ln in subprocess.run(
        [EMBD, "tokenize", "-m", WEIGHTS, "--input", corpus_path], check=True, capture_output=True,
        text=True).stdout.splitlines()]
    hf_ids = [e.ids for e in tok.encode_batch(read_lines(corpus_path))]
    id_diff = sum(a != b for a, b in zip(ours_ids, hf_ids)) + abs(len(ours_ids) - len(hf_ids))
    print(f"corpus token ids: ours vs HF tokenizers: {len(hf_ids) - id_diff}/{len(hf_ids)} identical")
    if id_diff:
        failures.append(f"{id_diff} corpus texts tokenize differently")

    with tempfile.NamedTemporaryFile("wb", suffix=".txt", delete=False) as f:
        f.write(("\n".join(texts) + "\n").encode("utf-8"))
        subset = f.name
    try:
        ours = embd_encode_npy(subset)
    finally:
        os.unlink(subset)
    for name, path, run in (("unfused", ONNX_PLAIN, ort_single),
                            ("fused", ONNX_FUSED, ort_sorted_batches)):
        c = cosines(ours, run(make_session(path, 2), tok, texts))
        how = "one text per call" if run is ort_single else "sorted padded batches of 32"
        print(f"ours vs ORT {name:8s} ({how}): {n} corpus texts, worst cosine {fmt_cos(c)}")
        if c.min() < COS_OURS:
            failures.append(f"ours vs ORT {name}: worst cosine {c.min():.8f} < {COS_OURS}")

    ref_path = os.path.join(shared_dir(), "reference", "minilm_reference.jsonl")
    ours_ref = embd_encode_npy(ref_path, jsonl=True)
    c = cosines(ours_ref, np.array([r["embedding"] for r in ref]))
    print(f"ours vs reference: {len(ref)} lines, worst cosine {fmt_cos(c)}")
    if c.min() < COS_OURS:
        failures.append(f"ours vs reference: worst cosine {c.min():.8f} < {COS_OURS}")

    # `embd bench` runs and prints the fields bench.py reads.
    try:
        b = embd_bench(corpus_path, 2, 32, limit=20, latency_runs=3, warmup=2)
        missing = [k for k in ("texts_per_s", "tokens_per_s", "open_first_ms", "latency") if k not in b]
        print(f"embd bench: ran ({b['texts']} texts, {b['tokens']} tokens)" +
              (f", missing fields {missing}" if missing else ""))
        if missing:
            failures.append(f"embd bench output lacks {missing}")
    except (subprocess.CalledProcessError, json.JSONDecodeError, KeyError) as e:
        failures.append(f"embd bench failed: {e}")

    if failures:
        print("\nCHECK FAILED:\n  " + "\n  ".join(failures))
        return 1
    print("\ncheck: all outputs agree")
    return 0


# --------------------------------------------------------------------------
# timing
# --------------------------------------------------------------------------

# Our configurations: (name, threads, texts per call).
OURS = [("ours 1t single", 1, 1), ("ours 1t batch32", 1, 32),
        ("ours 2t batch32", 2, 32), ("ours 2t batch256", 2, 256)]
# ORT configurations: (name, threads, function(sessions, tok, texts)).
ORT = [("ORT 1t single", 1, lambda s, tok, t: ort_single(s["1t"], tok, t)),
       ("ORT 1t sorted batch32", 1, lambda s, tok, t: ort_sorted_batches(s["1t"], tok, t, parallel_tokenize=False)),
       ("ORT 2t sorted batch32", 2, lambda s, tok, t: ort_sorted_batches(s["2t"], tok, t)),
       ("ORT 2x1t sessions", 2, lambda s, tok, t: ort_two_sessions([s["1t"], s["1t_b"]], tok, t))]


def percentile(samples, q):
    """Nearest-rank quantile, as `embd bench` computes it."""
    s = sorted(samples)
    return s[max(1, int(np.ceil(q * len(s)))) - 1]


def timing(args, tok, ref, corpus_path):
    ok, onnx_res = verify_onnx(tok, ref)
    if not ok:
        sys.exit("bench: the ONNX models do not match the reference; not timing them")
    texts = read_lines(corpus_path)
    if args.limit:
        texts = texts[:args.limit]
        tmp = tempfile.NamedTemporaryFile("wb", suffix=".txt", delete=False)
        tmp.write(("\n".join(texts) + "\n").encode("utf-8"))
        tmp.close()
        corpus_path = tmp.name
    lengths = [len(e.ids) for e in tok.encode_batch(texts)]
    tokens = sum(lengths)
    flops = tokens * FLOPS_PER_TOKEN
    print(f"\ncorpus: {len(texts)} texts, {tokens} tokens, {flops / 1e12:.3f} TFLOP in the linear layers")

    sessions = {"1t": make_session(ONNX_FUSED, 1), "1t_b": make_session(ONNX_FUSED, 1),
                "2t": make_session(ONNX_FUSED, 2)}
    for s in sessions.values():  # warm-up, as `embd bench` does
        ort_sorted_batches(s, tok, texts[:100])

    times = {name: [] for name, _, _ in ORT + OURS}
    gemm = {1: [], 2: []}
    loads = []
    for r in range(args.rounds):
        before = loadavg()
        # Alternate ORT and ours, config by config, so that both see the same load.
        for (oname, _, fn), (name, threads, batch) in zip(ORT, OURS):
            t0 = time.perf_counter()
            fn(sessions, tok, texts)
            times[oname].append(time.perf_counter() - t0)
            res = embd_bench(corpus_path, threads, batch)
            times[name].append(res["best_s"])
            print(f"round {r + 1}: {oname:22s} {len(texts) / times[oname][-1]:7.1f} texts/s | "
                  f"{name:17s} {res['texts_per_s']:7.1f} texts/s", flush=True)
        for n in (1, 2):
            gemm[n].append(gemm_ceiling(n)["gflops"])
        loads.append({"round": r + 1, "before": before, "after": loadavg()})
        print(f"round {r + 1}: GEMM ceiling 1t {gemm[1][-1]:.1f} GFLOP/s, 2t {gemm[2][-1]:.1f} GFLOP/s; "
              f"load {before} -> {loads[-1]['after']}", flush=True)

    ceiling = {n: max(v) for n, v in gemm.items()}
    rows = []
    for name, threads, _ in ORT + OURS:
        best = min(times[name])
        gf = flops / best / 1e9
        rows.append({"config": name, "threads": threads, "best_s": best, "rounds_s": times[name],
                     "texts_per_s": len(texts) / best, "tokens_per_s": tokens / best,
                     "gflops": gf, "ceiling_fraction": gf / ceiling[threads]})
    by = {r["config"]: r for r in rows}

    def best_of(names):
        return max((by[n] for n in names), key=lambda r: r["texts_per_s"])

    ratios = {}
    for t in (1, 2):
        ort_best = best_of([n for n, th, _ in ORT if th == t])
        ours_best = best_of([n for n, th, _ in OURS if th == t])
        ratios[f"{t}t"] = {"ours": ours_best["config"], "ort": ort_best["config"],
                           "ratio": ours_best["texts_per_s"] / ort_best["texts_per_s"]}

    # Single-text latency of the same ~20-token sentence, interleaved.
    lat_text = min(texts, key=lambda t: abs(len(tok.encode(t).ids) - 20))
    lat = {"ours 2t": [], "ours 1t": [], "ORT 1t": [], "ORT 2t": []}
    open_ours, open_ort = [], {"ORT 1t": [], "ORT 2t": []}
    for _ in range(args.rounds):
        for key, threads in (("ours 2t", 2), ("ours 1t", 1)):
            res = embd_bench(corpus_path, threads, 1, limit=1, warmup=0, latency_runs=args.latency_runs,
                             latency_text=lat_text)
            lat[key].append(res["latency"]["median_ms"])
            lat.setdefault(key + " p90", []).append(res["latency"]["p90_ms"])
            open_ours.append(res)
        for key, sess in (("ORT 1t", sessions["1t"]), ("ORT 2t", sessions["2t"])):
            samples = []
            for i in range(args.latency_runs + 10):
                t0 = time.perf_counter()
                ort_run(sess, [tok.encode(lat_text).ids])
                if i >= 10:
                    samples.append((time.perf_counter() - t0) * 1e3)
            lat[key].append(percentile(samples, 0.5))
            lat.setdefault(key + " p90", []).append(percentile(samples, 0.9))
        # ORT open: session creation + first run, fused model (file in the page cache).
        for key, threads in (("ORT 1t", 1), ("ORT 2t", 2)):
            t0 = time.perf_counter()
            sess = make_session(ONNX_FUSED, threads)
            ort_run(sess, [tok.encode(lat_text).ids])
            open_ort[key].append((time.perf_counter() - t0) * 1e3)
            del sess
    latency = {k: min(v) for k, v in lat.items()}  # best-of-rounds median / p90
    ort_best_lat = min(("ORT 1t", "ORT 2t"), key=lambda k: latency[k])
    open_time = {
        "ours open+first (verify CRCs)": min(r["open_first_ms"] for r in open_ours),
        "ours open+first (no CRC check)": min(r["open_first_noverify_ms"] for r in open_ours),
        "ORT 1t session+first run": min(open_ort["ORT 1t"]),
        "ORT 2t session+first run": min(open_ort["ORT 2t"]),
    }

    # Peak RSS over the full corpus (one run each; memory is not load-sensitive).
    full = read_lines(corpus_path)
    rss = {}
    for threads in (1, 2):
        rc, mb = peak_rss_mb([EMBD, "encode", "-m", WEIGHTS, "--input", corpus_path, "--output", os.devnull,
                              "--threads", str(threads)])
        rss[f"embd encode --threads {threads}"] = mb if rc == 0 else float("nan")
    rc, mb = peak_rss_mb([sys.executable, os.path.abspath(__file__), "--ort-encode", corpus_path])
    rss["ORT process (fused, 2t, batch32)"] = mb if rc == 0 else float("nan")
    rss["(launcher floor: /bin/true)"] = peak_rss_mb(["true"])[1]
    sizes = {"weights": os.path.getsize(WEIGHTS) / 2**20, "onnx fused": os.path.getsize(ONNX_FUSED) / 2**20}

    # --- report -------------------------------------------------------------
    import onnxruntime

    print(f"\nCPU {cpu_info()}, {os.cpu_count()} cores, onnxruntime {onnxruntime.__version__}")
    print(f"{len(full)} texts, {tokens} tokens; best of {args.rounds} rounds; "
          f"GEMM ceiling (numpy/OpenBLAS float32, model shapes M=2048): "
          f"1t {ceiling[1]:.1f}, 2t {ceiling[2]:.1f} GFLOP/s")
    print(f"{'config':24s} {'thr':>3s} {'texts/s':>8s} {'tokens/s':>9s} {'GFLOP/s':>8s} {'of GEMM':>8s}  rounds (s)")
    for r in rows:
        print(f"{r['config']:24s} {r['threads']:3d} {r['texts_per_s']:8.1f} {r['tokens_per_s']:9.0f} "
              f"{r['gflops']:8.1f} {r['ceiling_fraction'] * 100:7.1f}%  "
              + " ".join(f"{x:.2f}" for x in r["rounds_s"]))
    for t, v in ratios.items():
        print(f"ratio {t}: {v['ours']} / {v['ort']} = {v['ratio']:.2f}x")
    print(f"\nsingle-text latency, {len(tok.encode(lat_text).ids)} tokens ({lat_text!r}), "
          f"{args.latency_runs} calls, best-of-rounds median / p90:")
    for k in ("ours 2t", "ours 1t", "ORT 1t", "ORT 2t"):
        print(f"  {k:8s} {latency[k]:7.2f} ms / {latency[k + ' p90']:7.2f} ms")
    print(f"  ours 2t / ORT best ({ort_best_lat}) median: {latency['ours 2t'] / latency[ort_best_lat]:.2f}x")
    print("\nopen time (best of rounds):")
    for k, v in open_time.items():
        print(f"  {k:32s} {v:8.1f} ms")
    print("\npeak RSS over the corpus:")
    for k, v in rss.items():
        print(f"  {k:34s} {v:7.1f} MB")
    print(f"  model files: .weights {sizes['weights']:.1f} MB, fused .onnx {sizes['onnx fused']:.1f} MB")
    print(f"\nload average per round: {[(l['before'], l['after']) for l in loads]}")

    results = {
        "machine": {"cpu": cpu_info(), "nproc": os.cpu_count(),
                    "onnxruntime": onnxruntime.__version__, "numpy": np.__version__},
        "corpus": {"texts": len(texts), "tokens": tokens, "linear_flops": flops},
        "onnx_verification": onnx_res, "gemm_ceiling_gflops": {"1t": gemm[1], "2t": gemm[2]},
        "throughput": rows, "ratios": ratios,
        "latency": {"text": lat_text, "best_median_and_p90_ms": latency, "rounds": lat,
                    "ours_2t_over_ort_best": latency["ours 2t"] / latency[ort_best_lat]},
        "open_ms": open_time, "peak_rss_mb": rss, "model_size_mb": sizes, "loadavg": loads,
    }
    os.makedirs(OUT, exist_ok=True)
    with open(os.path.join(OUT, "results.json"), "w") as f:
        json.dump(results, f, indent=1)
    print(f"wrote {os.path.join(OUT, 'results.json')}")
    if args.limit:
        os.unlink(corpus_path)
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true", help="verify outputs agree (no timing)")
    ap.add_argument("--check-texts", type=int, default=200, help="corpus texts compared in --check (0 = all)")
    ap.add_argument("--rounds", type=int, default=3, help="timing rounds (best is reported)")
    ap.add_argument("--limit", type=int, default=0, help="use only the first N corpus texts (0 = all)")
    ap.add_argument("--latency-runs", type=int, default=200, help="single-text calls per latency sample")
    ap.add_argument("--gemm-child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--ort-encode", metavar="CORPUS", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.gemm_child:
        return gemm_child()
    if args.ort_encode:
        return ort_encode_child(args.ort_encode)

    for path in (EMBD, WEIGHTS, ONNX_PLAIN, ONNX_FUSED):
        if not os.path.exists(path):
            sys.exit(f"bench: {path} is missing; run bench/run.sh (it builds everything)")
    shared = shared_dir()
    corpus = os.path.join(shared, "bench", "corpus.txt")
    ref = read_reference(os.path.join(shared, "reference", "minilm_reference.jsonl"))
    tok = make_tokenizer()
    if args.check:
        return check(args, tok, ref, corpus)
    return timing(args, tok, ref, corpus)


if __name__ == "__main__":
    sys.exit(main())
