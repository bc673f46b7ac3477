#!/usr/bin/env python3
"""Benchmark: our engine (`embd bench`) against ONNX Runtime and the quantized CPU peers
(OpenVINO + NNCF, CTranslate2, ONNX Runtime dynamic int8) on the same corpus.

Run through bench/run.sh, which creates bench/.venv and the models first.

  bench.py [--rounds N] [--limit N]     timing run: tables on stdout, bench/out/results.json
  bench.py --check                      correctness only (CI): ORT vs reference vs ours
                                        (our f32, bf16, int8 against their accuracy bars)
  bench.py --check-peers                the peers' models vs the reference (no timing)

What one timing run does, in this order:
  1. verifies the ONNX models (plain and ORT-fused) and the peers' unquantized
     conversions (CTranslate2 float32, OpenVINO fp32 in f32) against the reference, and
     measures our precisions' accuracy on every reference line;
  2. throughput: `rounds` rounds; in each round every configuration runs once over the
     whole corpus, interleaved engine by engine: ORT fp32 in this process, ours as
     `embd bench --precision P` subprocesses, every peer configuration as a fresh
     peers.py worker process (which in round 1 also embeds the reference lines through
     the same pipeline, for its accuracy, and whose peak RSS is recorded); plus a GEMM
     ceiling measurement (numpy float32 matmul on the model's shapes, 1 and 2 threads);
  3. single-text latency of a ~20-token corpus sentence, every engine and precision,
     1 thread and 2, interleaved;
  4. open time (ours per precision: open + first embedding; ORT: session + first run);
  5. peak RSS of `embd encode` over the corpus per precision and of an ORT process.
Tokenization is included in every timing, for every engine.
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
from typing import Any

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "bench", "out")
# --isa: the environment that caps each engine's kernels (ONNX Runtime has no such switch).
# On aarch64 only ours and CTranslate2 can be capped (ONNX Runtime's MLAS and
# OpenVINO's ACL choose their kernels themselves).
ISA_CAPS = {
    "avx2": {
        "EMBD_SIMD": "avx2",
        "CT2_FORCE_CPU_ISA": "AVX2",
        "ONEDNN_MAX_CPU_ISA": "AVX2",
        "DNNL_MAX_CPU_ISA": "AVX2",
        "MKL_ENABLE_INSTRUCTIONS": "AVX2",
        "OPENBLAS_CORETYPE": "Haswell",
    },
    "dotprod": {"EMBD_SIMD": "dotprod", "CT2_FORCE_CPU_ISA": "NEON"},
    "neon": {"EMBD_SIMD": "neon", "CT2_FORCE_CPU_ISA": "NEON"},
}
HF_DIR = os.path.join(ROOT, "models", "all-MiniLM-L6-v2-hf")
WEIGHTS = os.path.join(ROOT, "models", "all-MiniLM-L6-v2.weights")
ONNX_PLAIN = os.path.join(OUT, "minilm.onnx")
ONNX_FUSED = os.path.join(OUT, "minilm.opt.onnx")
# $EMBD_BIN: time another build (e.g. a copy, so a rebuild of target/ during a run changes nothing)
EMBD = os.environ.get("EMBD_BIN") or os.path.join(ROOT, "target", "release", "embd")

# all-MiniLM-L6-v2 shapes, for the FLOP count and the GEMM ceiling.
HIDDEN, INTER, LAYERS, MAX_LEN = 384, 1536, 6, 256
# Useful linear-layer FLOPs per token: Q, K, V, O (H x H each) and the two FFN
# matrices (H x I, I x H), a multiply-add = 2 FLOPs, for every layer.
FLOPS_PER_TOKEN = 2 * (4 * HIDDEN * HIDDEN + 2 * HIDDEN * INTER) * LAYERS

REF_COS_ONNX = 0.99999  # ONNX model vs sentence-transformers reference
COS_OURS = 0.9999  # ours vs ORT and ours vs reference (check mode)
# Ours vs the reference, per precision: (worst cosine, mean cosine or None).
ACCURACY_BARS = {"f32": (COS_OURS, None), "bf16": (0.9999, None), "int8": (0.995, 0.999)}


def shared_dir():
    """The project's shared/ folder: $EMBD_SHARED_DIR, else next to the repository."""
    cands = [
        os.environ.get("EMBD_SHARED_DIR", ""),
        os.path.join(ROOT, "..", "shared"),
        os.path.join(ROOT, "..", "..", "shared"),
    ]
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
    """CPU model and the SIMD flags that choose the kernels (x86 `flags`,
    aarch64 `Features`: asimddp = dot product, i8mm, bf16)."""
    model, part = platform.machine(), None
    flags: set[str] = set()
    try:
        for line in open("/proc/cpuinfo"):
            key = line.split(":", 1)[0].strip()
            if key == "model name" and model == platform.machine():
                model = line.split(":", 1)[1].strip()
            elif key == "CPU part" and part is None:
                part = line.split(":", 1)[1].strip()
            elif key in ("flags", "Features") and not flags:
                flags = set(line.split(":", 1)[1].split())
    except OSError:
        pass
    if part and model == platform.machine():
        model = f"{model} (CPU part {part})"
    simd = {
        "avx2",
        "fma",
        "avx512f",
        "avx512_vnni",
        "avx512_bf16",
        "amx_tile",
        "asimd",
        "asimddp",
        "i8mm",
        "bf16",
        "sve",
    }
    return {"model": model, "simd": sorted(flags & simd)}


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
        ids[i, : len(x)] = x
        mask[i, : len(x)] = 1
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
        part = order[s : s + batch]
        out[part] = ort_run(sess, [ids[i] for i in part])
    return out


def ort_two_sessions(sessions, tok, texts):
    """Two single-thread sessions in parallel (Python threads; ORT releases the GIL in
    run()), each embedding one half of the corpus one text per call."""
    half = len(texts) // 2
    parts = [texts[:half], texts[half:]]
    results: list[Any] = [None, None]

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

PRECISIONS = ("f32", "bf16", "int8")
_cache: dict[str, Any] = {}


def embd_has_precision_flag():
    """Whether `embd bench` and `embd encode` take `--precision` (older builds have no such flag)."""
    if "flag" not in _cache:
        helps = [
            subprocess.run([EMBD, cmd, "--help"], capture_output=True, text=True).stdout
            for cmd in ("bench", "encode")
        ]
        _cache["flag"] = all("--precision" in h for h in helps)
    return _cache["flag"]


def embd_precisions():
    """{precision: None if `embd` runs it, else why not}. Without `--precision` only f32
    runs (without the flag, as before it existed). With it, each precision is probed by a
    two-text `embd bench`: a non-zero exit, or a reported effective precision other than
    the one asked for, means not supported (yet)."""
    if "support" in _cache:
        return _cache["support"]
    if not embd_has_precision_flag():
        why = "embd has no --precision flag yet"
        _cache["support"] = {"f32": None, "bf16": why, "int8": why}
        return _cache["support"]
    support: dict[str, str | None] = {}
    probe = os.path.join(shared_dir(), "bench", "corpus.txt")
    for p in PRECISIONS:
        r = subprocess.run(
            [
                EMBD,
                "bench",
                "-m",
                WEIGHTS,
                "--input",
                probe,
                "--threads",
                "1",
                "--batch-size",
                "2",
                "--limit",
                "2",
                "--warmup",
                "0",
                "--latency-runs",
                "0",
                "--precision",
                p,
            ],
            capture_output=True,
            text=True,
        )
        if r.returncode != 0:
            support[p] = (
                f"embd bench --precision {p} fails: {(r.stderr.strip().splitlines() or ['?'])[-1]}"
            )
            continue
        try:
            got = json.loads(r.stdout).get("precision", p)
        except json.JSONDecodeError:
            support[p] = f"embd bench --precision {p}: output is not JSON"
            continue
        support[p] = None if got == p else f"embd bench --precision {p} computes in {got}"
    _cache["support"] = support
    return support


def precision_args(precision):
    """`--precision P` for `embd` (nothing while the flag does not exist: f32 only)."""
    if embd_has_precision_flag():
        return ["--precision", precision]
    if precision != "f32":
        raise ValueError(f"embd has no --precision flag: cannot run {precision}")
    return []


def embd_bench(
    corpus, threads, batch, limit=0, latency_runs=0, latency_text=None, warmup=100, precision="f32"
):
    """One `embd bench` invocation (a fresh process); returns its JSON."""
    cmd = [
        EMBD,
        "bench",
        "-m",
        WEIGHTS,
        "--input",
        corpus,
        "--threads",
        str(threads),
        "--batch-size",
        str(batch),
        "--rounds",
        "1",
        "--limit",
        str(limit),
        "--latency-runs",
        str(latency_runs),
        "--warmup",
        str(warmup),
    ] + precision_args(precision)
    if latency_text is not None:
        cmd += ["--latency-text", latency_text]
    return json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)


def embd_encode_npy(input_path, jsonl=False, threads=2, precision="f32"):
    """Embeds a file with `embd encode` and returns the [n, 384] array."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "v.npy")
        cmd = [
            EMBD,
            "encode",
            "-m",
            WEIGHTS,
            "--input",
            input_path,
            "--format",
            "npy",
            "--output",
            out,
            "--threads",
            str(threads),
        ] + precision_args(precision)
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
    out = subprocess.run(
        [sys.executable, "-c", RSS_LAUNCHER] + cmd, check=True, capture_output=True, text=True
    ).stdout.split()
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
        mats[(m, k, n)] = (
            rng.standard_normal((m, k), np.float32),
            rng.standard_normal((k, n), np.float32),
            np.empty((m, n), np.float32),
        )
    best: dict[tuple[int, int, int], float] = {}
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
    print(
        json.dumps(
            {
                "gflops": flops / secs / 1e9,
                "per_shape": {
                    f"{m}x{k}x{n}": 2 * m * k * n / best[(m, k, n)] / 1e9 for (m, k, n) in mats
                },
            }
        )
    )


def gemm_ceiling(threads):
    env = dict(os.environ)
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        env[var] = str(threads)
    out = subprocess.run(
        [sys.executable, os.path.abspath(__file__), "--gemm-child"],
        env=env,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
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
                got[order[s : s + 32]] = ort_run(sess, [ids[i] for i in order[s : s + 32]])
        c = cosines(got, want)
        worst[name] = float(c.min())
        how = "one text per call" if name == "unfused" else "sorted batches of 32"
        print(
            f"ORT {name:8s} ({how}) vs reference: {len(ref)} lines, worst cosine {fmt_cos(c)}, max |diff| {np.abs(got - want).max():.2e}"
        )
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
    ours_ids = [
        json.loads(ln)["input_ids"]
        for ln in subprocess.run(
            [EMBD, "tokenize", "-m", WEIGHTS, "--input", corpus_path],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.splitlines()
    ]
    hf_ids = [e.ids for e in tok.encode_batch(read_lines(corpus_path))]
    id_diff = sum(a != b for a, b in zip(ours_ids, hf_ids, strict=False)) + abs(
        len(ours_ids) - len(hf_ids)
    )
    print(
        f"corpus token ids: ours vs HF tokenizers: {len(hf_ids) - id_diff}/{len(hf_ids)} identical"
    )
    if id_diff:
        failures.append(f"{id_diff} corpus texts tokenize differently")

    with tempfile.NamedTemporaryFile("wb", suffix=".txt", delete=False) as f:
        f.write(("\n".join(texts) + "\n").encode("utf-8"))
        subset = f.name
    try:
        ours = embd_encode_npy(subset)
    finally:
        os.unlink(subset)
    for name, path, run in (
        ("unfused", ONNX_PLAIN, ort_single),
        ("fused", ONNX_FUSED, ort_sorted_batches),
    ):
        c = cosines(ours, run(make_session(path, 2), tok, texts))
        how = "one text per call" if run is ort_single else "sorted padded batches of 32"
        print(f"ours vs ORT {name:8s} ({how}): {n} corpus texts, worst cosine {fmt_cos(c)}")
        if c.min() < COS_OURS:
            failures.append(f"ours vs ORT {name}: worst cosine {c.min():.8f} < {COS_OURS}")

    # Ours vs the reference in every precision `embd` runs (f32: as before).
    ref_path = os.path.join(shared_dir(), "reference", "minilm_reference.jsonl")
    want = np.array([r["embedding"] for r in ref])
    vectors = {}
    for p, why in embd_precisions().items():
        if why:
            print(f"ours {p:4s} vs reference: SKIPPED ({why})")
            continue
        vectors[p] = embd_encode_npy(ref_path, jsonl=True, precision=p)
        c = cosines(vectors[p], want)
        worst_bar, mean_bar = ACCURACY_BARS[p]
        same = p != "f32" and "f32" in vectors and np.array_equal(vectors[p], vectors["f32"])
        print(
            f"ours {p:4s} vs reference: {len(ref)} lines, worst cosine {fmt_cos(c)}, mean {c.mean():.8f} "
            f"(bars: worst >= {worst_bar}"
            + (f", mean >= {mean_bar})" if mean_bar else ")")
            + (
                "\n     note: bit for bit the f32 vectors (this precision still computes in f32?)"
                if same
                else ""
            )
        )
        if c.min() < worst_bar:
            failures.append(f"ours {p} vs reference: worst cosine {c.min():.8f} < {worst_bar}")
        if mean_bar and c.mean() < mean_bar:
            failures.append(f"ours {p} vs reference: mean cosine {c.mean():.8f} < {mean_bar}")

    # `embd bench` runs and prints the fields bench.py reads.
    for p, why in embd_precisions().items():
        if why:
            continue
        try:
            b = embd_bench(corpus_path, 2, 32, limit=20, latency_runs=3, warmup=2, precision=p)
            missing = [
                k for k in ("texts_per_s", "tokens_per_s", "open_first_ms", "latency") if k not in b
            ]
            print(
                f"embd bench{''.join(' ' + a for a in precision_args(p))}: ran ({b['texts']} texts, {b['tokens']} tokens)"
                + (f", missing fields {missing}" if missing else "")
            )
            if missing:
                failures.append(f"embd bench output lacks {missing}")
        except (subprocess.CalledProcessError, json.JSONDecodeError, KeyError) as e:
            failures.append(f"embd bench ({p}) failed: {e}")

    if failures:
        print("\nCHECK FAILED:\n  " + "\n  ".join(failures))
        return 1
    print("\ncheck: all outputs agree")
    return 0


# --------------------------------------------------------------------------
# timing
# --------------------------------------------------------------------------

# Our configurations: (precision, threads, texts per call). f32 keeps the four of the
# fp32 comparison; bf16 and int8 run with 1 thread and 2 (two batch sizes, the best counts).
OURS = [
    ("f32", 1, 1),
    ("f32", 1, 32),
    ("f32", 2, 32),
    ("f32", 2, 256),
    ("bf16", 1, 32),
    ("bf16", 2, 32),
    ("bf16", 2, 256),
    ("int8", 1, 32),
    ("int8", 2, 32),
    ("int8", 2, 256),
]


def ours_name(precision, threads, batch):
    return f"ours {precision} {threads}t " + ("single" if batch == 1 else f"batch{batch}")


# ORT fp32 configurations, in this process: (name, threads, function(sessions, tok, texts)).
ORT = [
    ("ORT fp32 1t single", 1, lambda s, tok, t: ort_single(s["1t"], tok, t)),
    (
        "ORT fp32 1t sorted batch32",
        1,
        lambda s, tok, t: ort_sorted_batches(s["1t"], tok, t, parallel_tokenize=False),
    ),
    ("ORT fp32 2t sorted batch32", 2, lambda s, tok, t: ort_sorted_batches(s["2t"], tok, t)),
    ("ORT fp32 2x1t sessions", 2, lambda s, tok, t: ort_two_sessions([s["1t"], s["1t_b"]], tok, t)),
]

PEERS_PY = os.path.join(ROOT, "bench", "peers.py")
ORT_INT8 = os.path.join(OUT, "minilm.opt.int8.onnx")
CT2_INT8, CT2_F32 = os.path.join(OUT, "ct2-int8"), os.path.join(OUT, "ct2-float32")
OV_DIR = os.path.join(OUT, "ov")
PEER_ENGINES = ("ort-int8", "ct2", "ov")


def peer_model_files(engine):
    return {
        "ort-int8": [ORT_INT8],
        "ct2": [CT2_INT8, CT2_F32],
        "ov": [os.path.join(OV_DIR, m + ".xml") for m in ("fp32", "int8", "int8wo")],
    }[engine]


def peer_configs(engines, ov_hints, ov_models=("int8", "int8wo", "fp32")):
    """The peers' throughput configurations and, per engine/precision group, the
    single-text latency configurations (1 thread and 2). Each is a worker spec for
    peers.py plus a name, a group and the cores it uses."""
    thr, lat = [], []

    def add(group, name, cores, **spec):
        thr.append({"name": f"{group} {name}", "group": group, "threads": cores, "spec": spec})

    def add_latency(group, one, two):
        lat.append({"group": group, "1t": one, "2t": two})

    if "ort-int8" in engines:
        g, m = "ORT int8", {"engine": "ort", "model": ORT_INT8}
        add(g, "1t single", 1, threads=1, batch=1, **m)
        add(g, "1t sorted batch32", 1, threads=1, batch=32, **m)
        add(g, "2t sorted batch32", 2, threads=2, batch=32, **m)
        add(g, "2x1t sessions", 2, threads=1, workers=2, batch=1, **m)
        add_latency(g, dict(threads=1, **m), dict(threads=2, **m))
    if "ct2" in engines:
        g, m = "CT2 int8", {"engine": "ct2", "model": CT2_INT8, "compute_type": "int8"}
        add(g, "1t batch32", 1, threads=1, batch=32, **m)
        add(g, "2t batch32", 2, threads=2, batch=32, **m)
        add(g, "2 workers batch32", 2, threads=1, workers=2, batch=32, **m)
        add_latency(g, dict(threads=1, **m), dict(threads=2, **m))
    if "ov" in engines:
        for model in ov_models:
            for hint in ov_hints:
                g = f"OV {model}/{hint}"
                m = {"engine": "ov", "model": os.path.join(OV_DIR, model + ".xml"), "hint": hint}
                add(g, "1t batch32", 1, threads=1, batch=32, **m)
                add(g, "2 streams batch32", 2, threads=2, streams=2, workers=2, batch=32, **m)
                add_latency(g, dict(threads=1, **m), dict(threads=2, **m))
    return thr, lat


# RSS_LAUNCHER with a time limit (argv[1], seconds): a worker that hangs is killed
# (exit status -9) instead of stalling the run.
TIMED_LAUNCHER = (
    "import os, signal, subprocess, sys, time\n"
    "limit = time.monotonic() + float(sys.argv[1])\n"
    "p = subprocess.Popen(sys.argv[2:], stdout=subprocess.DEVNULL)\n"
    "while True:\n"
    "    pid, status, usage = os.wait4(p.pid, os.WNOHANG)\n"
    "    if pid:\n"
    "        break\n"
    "    if time.monotonic() > limit:\n"
    "        p.send_signal(signal.SIGKILL)\n"
    "    time.sleep(0.02)\n"
    "print(os.waitstatus_to_exitcode(status), usage.ru_maxrss)\n"
)
PEER_TIMEOUT_S = 600


def run_peer(spec):
    """One peers.py worker process; returns its result with "rss_mb", or {"error": ...}."""
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "result.json")
        out = subprocess.run(
            [
                sys.executable,
                "-c",
                TIMED_LAUNCHER,
                str(PEER_TIMEOUT_S),
                sys.executable,
                PEERS_PY,
                "--worker",
                json.dumps(spec),
                "--result",
                path,
            ],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.split()
        rc, mb = int(out[0]), int(out[1]) / 1024.0
        if rc != 0 or not os.path.exists(path):
            why = f"killed after {PEER_TIMEOUT_S} s" if rc == -9 else f"exited with {rc}"
            return {"error": f"peers.py {why}"}
        res = json.load(open(path))
    res["rss_mb"] = mb
    return res


def verify_peers(engines, ref_path):
    """The peers' conversions before quantization, against the reference: CTranslate2's
    float32 model (our torch-free conversion) and OpenVINO's fp32 IR computed in f32.
    Returns (ok, {name: accuracy})."""
    out, ok = {}, True
    checks = []
    if "ct2" in engines:
        checks.append(
            (
                "CT2 float32 (conversion check)",
                {"engine": "ct2", "model": CT2_F32, "compute_type": "float32"},
            )
        )
    if "ov" in engines:
        checks.append(
            (
                "OV fp32/f32 (conversion check)",
                {"engine": "ov", "model": os.path.join(OV_DIR, "fp32.xml"), "hint": "f32"},
            )
        )
    for name, spec in checks:
        res = run_peer(dict(spec, threads=2, batch=32, tasks=["accuracy"], reference=ref_path))
        if "error" in res:
            print(f"{name}: FAILED ({res['error']})")
            ok = False
            continue
        a = res["accuracy"]
        out[name] = a
        print(
            f"{name} vs reference: {a['lines']} lines, worst cosine {a['worst']:.8f} "
            f"(1-cos {1 - a['worst']:.1e}), mean {a['mean']:.8f}"
        )
        ok = ok and a["worst"] >= REF_COS_ONNX
    return ok, out


def default_ov_precision():
    """What OpenVINO's CPU plugin computes in without INFERENCE_PRECISION_HINT, here."""
    code = (
        "import openvino as ov, openvino.properties.hint as h\n"
        "print(ov.Core().get_property('CPU', h.inference_precision).get_type_name())"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    return r.stdout.strip() or f"unknown ({r.stderr.strip()[-200:]})"


def percentile(samples, q):
    """Nearest-rank quantile, as `embd bench` computes it."""
    s = sorted(samples)
    return s[max(1, int(np.ceil(q * len(s)))) - 1]


def interleave(groups):
    """Round-robin over lists: a1 b1 c1 a2 b2 c2 ..."""
    out, i = [], 0
    while any(i < len(g) for g in groups):
        out += [g[i] for g in groups if i < len(g)]
        i += 1
    return out


def peers_available(requested):
    """Which requested peer engines have their models (bench/setup.sh --peers)."""
    avail = []
    for e in requested:
        missing = [p for p in peer_model_files(e) if not os.path.exists(p)]
        if missing:
            print(f"peer {e}: SKIPPED ({missing[0]} missing; run bench/setup.sh --peers)")
        else:
            avail.append(e)
    return avail


def timing(args, tok, ref, corpus_path):
    ok, onnx_res = verify_onnx(tok, ref)
    if not ok:
        sys.exit("bench: the ONNX models do not match the reference; not timing them")
    ref_path = os.path.join(shared_dir(), "reference", "minilm_reference.jsonl")
    want = np.array([r["embedding"] for r in ref])
    engines = peers_available([e for e in PEER_ENGINES if e in args.peers])
    peers_ok, peer_verification = verify_peers(engines, ref_path)
    if not peers_ok:
        sys.exit("bench: a peer's conversion does not match the reference; not timing it")
    ov_default = default_ov_precision() if "ov" in engines else None
    if ov_default:
        print(
            f"OpenVINO CPU default inference precision here (no INFERENCE_PRECISION_HINT): {ov_default}"
        )

    # Our precisions: which run, and their accuracy (all reference lines, `embd encode`).
    support = embd_precisions()
    precisions = [p for p in PRECISIONS if support[p] is None and p in args.precisions]
    for p in PRECISIONS:
        if support[p]:
            print(f"ours {p}: SKIPPED ({support[p]})")
    accuracy, vectors = {}, {}
    for p in precisions:
        vectors[p] = embd_encode_npy(ref_path, jsonl=True, precision=p)
        c = cosines(vectors[p], want)
        same = p != "f32" and "f32" in vectors and np.array_equal(vectors[p], vectors["f32"])
        accuracy[f"ours {p}"] = {
            "lines": len(ref),
            "worst": float(c.min()),
            "mean": float(c.mean()),
            "worst_item": int(c.argmin()) + 1,
            "identical_to_f32": bool(same),
        }
        print(
            f"ours {p} vs reference: worst cosine {fmt_cos(c)}, mean {c.mean():.8f}"
            + (" (bit for bit the f32 vectors: still computed in f32?)" if same else "")
        )

    texts = read_lines(corpus_path)
    if args.limit:
        texts = texts[: args.limit]
        tmp = tempfile.NamedTemporaryFile("wb", suffix=".txt", delete=False)
        tmp.write(("\n".join(texts) + "\n").encode("utf-8"))
        tmp.close()
        corpus_path = tmp.name
    lengths = [len(e.ids) for e in tok.encode_batch(texts)]
    tokens = sum(lengths)
    flops = tokens * FLOPS_PER_TOKEN
    print(
        f"\ncorpus: {len(texts)} texts, {tokens} tokens, {flops / 1e12:.3f} TFLOP in the linear layers"
    )

    sessions = {
        "1t": make_session(ONNX_FUSED, 1),
        "1t_b": make_session(ONNX_FUSED, 1),
        "2t": make_session(ONNX_FUSED, 2),
    }
    for s in sessions.values():  # warm-up, as `embd bench` does
        ort_sorted_batches(s, tok, texts[:100])

    peer_thr, peer_lat = peer_configs(engines, args.ov_hints, args.ov_models)
    ours = [("ours", ours_name(p, t, b), (p, t, b)) for p, t, b in OURS if p in precisions]
    ort = [("ort", name, (fn,)) for name, _, fn in ORT]
    by_engine: dict[str, Any] = {}
    for c in peer_thr:
        by_engine.setdefault(c["spec"]["engine"], []).append(("peer", c["name"], (c,)))
    schedule = interleave([ours, ort] + list(by_engine.values()))
    threads_of = {ours_name(p, t, b): t for p, t, b in OURS}
    threads_of.update({name: t for name, t, _ in ORT})
    threads_of.update({c["name"]: c["threads"] for c in peer_thr})
    group_of = {ours_name(p, t, b): f"ours {p}" for p, t, b in OURS}
    group_of.update({name: "ORT fp32" for name, _, _ in ORT})
    group_of.update({c["name"]: c["group"] for c in peer_thr})

    times: dict[str, list[float]] = {name: [] for _, name, _ in schedule}
    peer_rss: dict[str, Any] = {}
    peer_info: dict[str, Any] = {}
    failed: dict[str, Any] = {}
    gemm: dict[int, list[float]] = {1: [], 2: []}
    loads = []
    print(f"{len(schedule)} configurations per round, {args.rounds} rounds")
    for rnd in range(args.rounds):
        before = loadavg()
        for kind, name, extra in schedule:
            if name in failed:
                continue
            if kind == "ours":
                p, t, b = extra
                res = embd_bench(corpus_path, t, b, precision=p)
                times[name].append(res["best_s"])
            elif kind == "ort":
                t0 = time.perf_counter()
                extra[0](sessions, tok, texts)
                times[name].append(time.perf_counter() - t0)
            else:
                tasks = ["throughput"] + (["accuracy"] if rnd == 0 else [])
                res = run_peer(
                    dict(extra[0]["spec"], tasks=tasks, corpus=corpus_path, reference=ref_path)
                )
                if "error" in res:
                    failed[name] = res["error"]
                    print(f"round {rnd + 1}: {name}: FAILED ({res['error']}); dropped", flush=True)
                    continue
                times[name].append(res["seconds"])
                peer_rss.setdefault(name, []).append(res["rss_mb"])
                peer_info[name] = res["info"]
                got, hint = res["info"].get("inference_precision"), extra[0]["spec"].get("hint")
                if hint and got and got != hint:
                    print(f"note: {name} asked OpenVINO for {hint}, it computes in {got}")
                if "accuracy" in res:
                    accuracy[name] = res["accuracy"]
            print(
                f"round {rnd + 1}: {name:34s} {len(texts) / times[name][-1]:7.1f} texts/s",
                flush=True,
            )
        for n in (1, 2):
            gemm[n].append(gemm_ceiling(n)["gflops"])
        loads.append({"round": rnd + 1, "before": before, "after": loadavg()})
        print(
            f"round {rnd + 1}: GEMM ceiling 1t {gemm[1][-1]:.1f} GFLOP/s, 2t {gemm[2][-1]:.1f} GFLOP/s; "
            f"load {before} -> {loads[-1]['after']}",
            flush=True,
        )

    # ORT fp32's accuracy: the fused model in sorted batches (verify_onnx, same pipeline).
    got = ort_sorted_batches(sessions["2t"], tok, [r["text"] for r in ref])
    c = cosines(got, want)
    accuracy["ORT fp32"] = {
        "lines": len(ref),
        "worst": float(c.min()),
        "mean": float(c.mean()),
        "worst_item": int(c.argmin()) + 1,
    }

    ceiling = {n: max(v) for n, v in gemm.items()}
    rows = []
    for _, name, _ in schedule:
        if not times[name]:
            continue
        best = min(times[name])
        gf = flops / best / 1e9
        th = threads_of[name]
        acc = accuracy.get(name) or accuracy.get(group_of[name]) or {}
        rows.append(
            {
                "config": name,
                "group": group_of[name],
                "threads": th,
                "best_s": best,
                "rounds_s": times[name],
                "texts_per_s": len(texts) / best,
                "tokens_per_s": tokens / best,
                "gflops": gf,
                "ceiling_fraction": gf / ceiling[th],
                "worst_cosine": acc.get("worst"),
                "mean_cosine": acc.get("mean"),
                "rss_mb": min(peer_rss[name]) if name in peer_rss else None,
                "info": peer_info.get(name),
            }
        )
    rows.sort(
        key=lambda r: (
            r["group"].startswith("ours") is False,
            r["group"],
            r["threads"],
            r["config"],
        )
    )

    def best_of(pred):
        cands = [r for r in rows if pred(r)]
        return max(cands, key=lambda r: r["texts_per_s"]) if cands else None

    # --- single-text latency of the same ~20-token sentence, interleaved ----
    lat_text = min(texts, key=lambda t: abs(len(tok.encode(t).ids) - 20))
    lat: dict[tuple[str, int], Any] = {}
    open_ours: dict[str, list[Any]] = {p: [] for p in precisions}
    open_ort: dict[str, list[Any]] = {"ORT 1t": [], "ORT 2t": []}

    def add_lat(key, median, p90):
        lat.setdefault(key, {"median": [], "p90": []})
        lat[key]["median"].append(median)
        lat[key]["p90"].append(p90)

    for _ in range(args.rounds):
        for p in precisions:
            for threads in (2, 1):
                res = embd_bench(
                    corpus_path,
                    threads,
                    1,
                    limit=1,
                    warmup=0,
                    latency_runs=args.latency_runs,
                    latency_text=lat_text,
                    precision=p,
                )
                add_lat(
                    (f"ours {p}", threads), res["latency"]["median_ms"], res["latency"]["p90_ms"]
                )
                open_ours[p].append(res)
        for key, sess, threads in (
            ("ORT fp32", sessions["1t"], 1),
            ("ORT fp32", sessions["2t"], 2),
        ):
            samples = []
            for i in range(args.latency_runs + 10):
                t0 = time.perf_counter()
                ort_run(sess, [tok.encode(lat_text).ids])
                if i >= 10:
                    samples.append((time.perf_counter() - t0) * 1e3)
            add_lat((key, threads), percentile(samples, 0.5), percentile(samples, 0.9))
        for c in peer_lat:
            for threads in (1, 2):
                res = run_peer(
                    dict(
                        c[f"{threads}t"],
                        tasks=["latency"],
                        latency_text=lat_text,
                        latency_runs=args.latency_runs,
                    )
                )
                if "error" in res:
                    print(f"latency {c['group']} {threads}t: FAILED ({res['error']})")
                    continue
                add_lat(
                    (c["group"], threads), res["latency"]["median_ms"], res["latency"]["p90_ms"]
                )
        # ORT open: session creation + first run, fused model (file in the page cache).
        for key, threads in (("ORT 1t", 1), ("ORT 2t", 2)):
            t0 = time.perf_counter()
            sess = make_session(ONNX_FUSED, threads)
            ort_run(sess, [tok.encode(lat_text).ids])
            open_ort[key].append((time.perf_counter() - t0) * 1e3)
            del sess
    latency = {
        f"{g} {t}t": {
            "median_ms": min(v["median"]),
            "p90_ms": min(v["p90"]),
            "rounds_ms": v["median"],
        }
        for (g, t), v in lat.items()
    }  # best-of-rounds median / p90

    def best_latency(pred):
        cands = [(k, v["median_ms"]) for k, v in latency.items() if pred(k)]
        return min(cands, key=lambda kv: kv[1]) if cands else None

    open_time = {}
    for p in precisions:
        open_time[f"ours {p} open+first (verify CRCs)"] = min(
            r["open_first_ms"] for r in open_ours[p]
        )
        open_time[f"ours {p} open+first (no CRC check)"] = min(
            r["open_first_noverify_ms"] for r in open_ours[p]
        )
    open_time["ORT fp32 1t session+first run"] = min(open_ort["ORT 1t"])
    open_time["ORT fp32 2t session+first run"] = min(open_ort["ORT 2t"])

    # --- peak RSS over the full corpus (one run each) -----------------------
    rss = {}
    for p in precisions:
        for threads in (1, 2):
            rc, mb = peak_rss_mb(
                [
                    EMBD,
                    "encode",
                    "-m",
                    WEIGHTS,
                    "--input",
                    corpus_path,
                    "--output",
                    os.devnull,
                    "--threads",
                    str(threads),
                ]
                + precision_args(p)
            )
            rss[
                f"embd encode {' '.join(precision_args(p))} --threads {threads}".replace("  ", " ")
            ] = mb if rc == 0 else float("nan")
    rc, mb = peak_rss_mb([sys.executable, os.path.abspath(__file__), "--ort-encode", corpus_path])
    rss["ORT fp32 process (fused, 2t, batch32)"] = mb if rc == 0 else float("nan")
    rss["(launcher floor: /bin/true)"] = peak_rss_mb(["true"])[1]
    for p in precisions:
        for t in (1, 2):
            key = f"embd encode {' '.join(precision_args(p))} --threads {t}".replace("  ", " ")
            for rr in rows:
                if rr["group"] == f"ours {p}" and rr["threads"] == t:
                    rr["rss_mb"] = rss[key]
    sizes = {
        "weights": os.path.getsize(WEIGHTS) / 2**20,
        "onnx fused": os.path.getsize(ONNX_FUSED) / 2**20,
    }
    for e in engines:
        for f in peer_model_files(e):
            paths = [f] if os.path.isfile(f) else [os.path.join(f, x) for x in os.listdir(f)]
            if f.endswith(".xml"):
                paths.append(f[:-4] + ".bin")
            sizes[os.path.relpath(f, OUT)] = sum(os.path.getsize(x) for x in paths) / 2**20

    # --- ratios -------------------------------------------------------------
    ratios = {}
    for t in (1, 2):
        o = best_of(lambda r, t=t: r["group"] == "ours f32" and r["threads"] == t)
        e = best_of(lambda r, t=t: r["group"] == "ORT fp32" and r["threads"] == t)
        if o and e:
            ratios[f"ours f32 / ORT fp32, {t}t"] = {
                "ours": o["config"],
                "peer": e["config"],
                "ratio": o["texts_per_s"] / e["texts_per_s"],
                "target": ">= 1.15",
            }
        i8 = best_of(lambda r, t=t: r["group"] == "ours int8" and r["threads"] == t)
        pe = best_of(lambda r, t=t: not r["group"].startswith("ours") and r["threads"] == t)
        if i8 and pe:
            ratios[f"ours int8 / fastest peer, {t}t"] = {
                "ours": i8["config"],
                "peer": pe["config"],
                "ratio": i8["texts_per_s"] / pe["texts_per_s"],
                "target": ">= 1.3",
            }
        # Capped run: the same against the peers that were capped (not ONNX Runtime).
        pc = best_of(
            lambda r, t=t: not r["group"].startswith(("ours", "ORT")) and r["threads"] == t
        )
        if args.isa and i8 and pc:
            ratios[f"ours int8 / fastest capped peer, {t}t"] = {
                "ours": i8["config"],
                "peer": pc["config"],
                "ratio": i8["texts_per_s"] / pc["texts_per_s"],
                "target": ">= 1.3",
            }
        b16 = best_of(lambda r, t=t: r["group"] == "ours bf16" and r["threads"] == t)
        f32 = best_of(lambda r, t=t: r["group"] == "ours f32" and r["threads"] == t)
        if b16 and f32:
            ratios[f"ours bf16 / ours f32, {t}t"] = {
                "ours": b16["config"],
                "peer": f32["config"],
                "ratio": b16["texts_per_s"] / f32["texts_per_s"],
                "target": ">= 1.8",
            }
    ol, pl = (
        best_latency(lambda k: k.startswith("ours f32")),
        best_latency(lambda k: k.startswith("ORT fp32")),
    )
    if ol and pl:
        ratios["latency: ours f32 / ORT fp32"] = {
            "ours": ol[0],
            "peer": pl[0],
            "ratio": ol[1] / pl[1],
            "target": "<= 0.6",
        }
    il, bl = (
        best_latency(lambda k: k.startswith("ours int8")),
        best_latency(lambda k: not k.startswith("ours")),
    )
    if il and bl:
        ratios["latency: ours int8 / best peer"] = {
            "ours": il[0],
            "peer": bl[0],
            "ratio": il[1] / bl[1],
            "target": "<= 0.7",
        }
    cl = best_latency(lambda k: not k.startswith(("ours", "ORT")))
    if args.isa and il and cl:
        ratios["latency: ours int8 / best capped peer"] = {
            "ours": il[0],
            "peer": cl[0],
            "ratio": il[1] / cl[1],
            "target": "<= 0.7",
        }

    # --- report -------------------------------------------------------------
    import onnxruntime

    versions = {"onnxruntime": onnxruntime.__version__, "numpy": np.__version__}
    for mod in [
        m for e in engines for m in {"ov": ("openvino", "nncf"), "ct2": ("ctranslate2",)}.get(e, ())
    ]:
        ver = subprocess.run(
            [sys.executable, "-c", f"import {mod}; print({mod}.__version__)"],
            capture_output=True,
            text=True,
        )
        versions[mod] = ver.stdout.strip().split("-")[0] or "?"
    print(
        f"\nCPU {cpu_info()}, {os.cpu_count()} cores, "
        + ", ".join(f"{k} {v}" for k, v in versions.items())
    )
    if args.isa:
        print(
            f"capped to {args.isa}: "
            + " ".join(f"{k}={v}" for k, v in ISA_CAPS[args.isa].items())
            + " (ONNX Runtime cannot be capped: it picks its kernels from cpuid)"
        )
    if ov_default:
        print(
            f"OpenVINO: without INFERENCE_PRECISION_HINT this CPU computes in {ov_default}; "
            "'OV m/bf16' and 'OV m/f32' set the hint explicitly"
        )
    print(
        f"{len(texts)} texts, {tokens} tokens; best of {args.rounds} rounds; "
        f"GEMM ceiling (numpy/OpenBLAS float32, model shapes M=2048): "
        f"1t {ceiling[1]:.1f}, 2t {ceiling[2]:.1f} GFLOP/s"
    )
    print(
        f"{'config':36s} {'thr':>3s} {'texts/s':>8s} {'tokens/s':>9s} {'GFLOP/s':>8s} {'of GEMM':>8s} "
        f"{'worst cos':>10s} {'mean cos':>10s} {'RSS MB':>7s}  rounds (s)"
    )
    for r in rows:
        wc = f"{r['worst_cosine']:.6f}" if r["worst_cosine"] is not None else "-"
        mc = f"{r['mean_cosine']:.6f}" if r["mean_cosine"] is not None else "-"
        rs = f"{r['rss_mb']:.0f}" if r["rss_mb"] is not None else "-"
        print(
            f"{r['config']:36s} {r['threads']:3d} {r['texts_per_s']:8.1f} {r['tokens_per_s']:9.0f} "
            f"{r['gflops']:8.1f} {r['ceiling_fraction'] * 100:7.1f}% {wc:>10s} {mc:>10s} {rs:>7s}  "
            + " ".join(f"{x:.2f}" for x in r["rounds_s"])
        )
    for name, why in failed.items():
        print(f"{name}: FAILED ({why})")
    print(
        "(RSS: ours = embd encode over the corpus with that thread count; peers = the worker process "
        "(Python, tokenizer, engine) embedding the corpus in that configuration; ORT fp32: below)"
    )
    print("\naccuracy vs reference (all lines, each engine's own pipeline):")
    for k, a in accuracy.items():
        print(
            f"  {k:36s} worst {a['worst']:.8f} (1-cos {1 - a['worst']:.1e}, item {a['worst_item']}), "
            f"mean {a['mean']:.8f}"
        )
    for k, a in peer_verification.items():
        print(
            f"  {k:36s} worst {a['worst']:.8f} (1-cos {1 - a['worst']:.1e}), mean {a['mean']:.8f}"
        )
    print(
        f"\nsingle-text latency, {len(tok.encode(lat_text).ids)} tokens ({lat_text!r}), "
        f"{args.latency_runs} calls, best-of-rounds median / p90:"
    )
    groups = []
    for g, _t in lat:
        if g not in groups:
            groups.append(g)
    for g in groups:
        cells = []
        for t in (1, 2):
            v = latency.get(f"{g} {t}t")
            cells.append(f"{t}t {v['median_ms']:6.2f} / {v['p90_ms']:6.2f} ms" if v else f"{t}t -")
        print(f"  {g:22s} " + "   ".join(cells))
    print("\nratios (against their targets):")
    for k, v in ratios.items():
        print(f"  {k:34s} {v['ratio']:5.2f}x  ({v['ours']} / {v['peer']}; target {v['target']})")
    for p in ("int8", "bf16"):
        if p not in precisions:
            print(f"  ours {p}: not measured ({support.get(p) or 'not requested'})")
    print("\nopen time (best of rounds):")
    for k, v in open_time.items():
        print(f"  {k:36s} {v:8.1f} ms")
    print("\npeak RSS over the corpus:")
    for k, mb in rss.items():
        print(f"  {k:44s} {mb:7.1f} MB")
    print("  model files: " + ", ".join(f"{k} {v:.1f} MB" for k, v in sizes.items()))
    print(f"\nload average per round: {[(ld['before'], ld['after']) for ld in loads]}")

    results = {
        "machine": {
            "cpu": cpu_info(),
            "nproc": os.cpu_count(),
            "versions": versions,
            "openvino_default_precision": ov_default,
        },
        "corpus": {"texts": len(texts), "tokens": tokens, "linear_flops": flops},
        "onnx_verification": onnx_res,
        "peer_verification": peer_verification,
        "precision_support": support,
        "gemm_ceiling_gflops": {"1t": gemm[1], "2t": gemm[2]},
        "throughput": rows,
        "failed": failed,
        "accuracy": accuracy,
        "ratios": ratios,
        "latency": {"text": lat_text, "best_median_and_p90_ms": latency},
        "open_ms": open_time,
        "peak_rss_mb": rss,
        "model_size_mb": sizes,
        "loadavg": loads,
    }
    os.makedirs(OUT, exist_ok=True)
    results["isa_cap"] = {
        "isa": args.isa,
        "env": ISA_CAPS.get(args.isa, {}),
        "uncapped": (["ONNX Runtime"] + (["OpenVINO"] if args.isa in ("neon", "dotprod") else []))
        if args.isa
        else [],
    }
    name = f"results-{args.isa}.json" if args.isa else "results.json"
    with open(os.path.join(OUT, name), "w") as f:
        json.dump(results, f, indent=1)
    print(f"wrote {os.path.join(OUT, name)}")
    if args.limit:
        os.unlink(corpus_path)
    return 0


def check_peers(ref_path):
    """--check-peers: the peers' conversions and their quantized models' accuracy (no timing)."""
    engines = peers_available(PEER_ENGINES)
    ok, _ = verify_peers(engines, ref_path)
    thr, _ = peer_configs(engines, ("bf16", "f32"))
    seen = set()
    for c in thr:
        if c["group"] in seen:
            continue
        seen.add(c["group"])
        res = run_peer(dict(c["spec"], tasks=["accuracy"], reference=ref_path))
        if "error" in res:
            print(f"{c['name']}: FAILED ({res['error']})")
            ok = False
            continue
        a = res["accuracy"]
        print(
            f"{c['name']:36s} vs reference: worst {a['worst']:.6f} (item {a['worst_item']}), mean {a['mean']:.6f}"
        )
    return 0 if ok else 1


def main():
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--check", action="store_true", help="verify outputs agree (no timing)")
    ap.add_argument(
        "--check-texts", type=int, default=200, help="corpus texts compared in --check (0 = all)"
    )
    ap.add_argument(
        "--check-peers",
        action="store_true",
        help="verify the peers' models against the reference (no timing; needs setup.sh --peers)",
    )
    ap.add_argument("--rounds", type=int, default=3, help="timing rounds (best is reported)")
    ap.add_argument(
        "--limit", type=int, default=0, help="use only the first N corpus texts (0 = all)"
    )
    ap.add_argument(
        "--latency-runs", type=int, default=200, help="single-text calls per latency sample"
    )
    ap.add_argument(
        "--peers",
        default=",".join(PEER_ENGINES),
        help=f"peer engines to time, comma-separated, from {','.join(PEER_ENGINES)}; 'none' for none "
        "(default: all; each needs bench/setup.sh --peers)",
    )
    ap.add_argument(
        "--ov-hints",
        default="bf16,f32",
        help="OpenVINO INFERENCE_PRECISION_HINTs to time (default: bf16,f32)",
    )
    ap.add_argument(
        "--precisions",
        default=",".join(PRECISIONS),
        help="our precisions to time (default: all that embd supports)",
    )
    ap.add_argument(
        "--isa",
        choices=sorted(ISA_CAPS),
        default=None,
        help="cap every engine that can be capped to this instruction set (avx2: EMBD_SIMD=avx2, "
        "CT2_FORCE_CPU_ISA=AVX2, ONEDNN_MAX_CPU_ISA=AVX2 for OpenVINO and CTranslate2's oneDNN, "
        "MKL_ENABLE_INSTRUCTIONS=AVX2, OPENBLAS_CORETYPE=Haswell for the GEMM ceiling; on "
        "aarch64 neon or dotprod: EMBD_SIMD and CT2_FORCE_CPU_ISA=NEON only); "
        "ONNX Runtime cannot be capped (MLAS picks its kernels from cpuid), nor OpenVINO on "
        "aarch64. Results go to bench/out/results-ISA.json",
    )
    ap.add_argument("--gemm-child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--ort-encode", metavar="CORPUS", help=argparse.SUPPRESS)
    args = ap.parse_args()
    args.ov_models = ("int8", "int8wo", "fp32")
    if args.isa:
        # Every child process (ours, the peers' workers, the GEMM ceiling) inherits these.
        os.environ.update(ISA_CAPS[args.isa])
        # Under ONEDNN_MAX_CPU_ISA=AVX2 OpenVINO 2026.4 rejects the bf16 hint (no bf16
        # below AVX-512) and its weight-only int8 model returns empty outputs.
        args.ov_hints = "f32"
        args.ov_models = ("int8", "fp32")
        print(
            f"--isa {args.isa}: OpenVINO with the f32 hint only, without int8wo "
            "(bf16 needs AVX-512; int8wo returns no output under the cap)"
        )
    if args.gemm_child:
        return gemm_child()
    if args.ort_encode:
        return ort_encode_child(args.ort_encode)
    args.peers = [] if args.peers == "none" else args.peers.split(",")
    bad = [e for e in args.peers if e not in PEER_ENGINES]
    if bad:
        sys.exit(f"bench: unknown peer {bad[0]} (known: {', '.join(PEER_ENGINES)})")
    args.ov_hints = args.ov_hints.split(",")
    args.precisions = args.precisions.split(",")

    for path in (EMBD, WEIGHTS, ONNX_PLAIN, ONNX_FUSED):
        if not os.path.exists(path):
            sys.exit(f"bench: {path} is missing; run bench/run.sh (it builds everything)")
    shared = shared_dir()
    corpus = os.path.join(shared, "bench", "corpus.txt")
    ref_path = os.path.join(shared, "reference", "minilm_reference.jsonl")
    ref = read_reference(ref_path)
    tok = make_tokenizer()
    if args.check_peers:
        return check_peers(ref_path)
    if args.check:
        return check(args, tok, ref, corpus)
    return timing(args, tok, ref, corpus)


if __name__ == "__main__":
    sys.exit(main())
