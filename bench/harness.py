"""The harness bench/modernbert.py, bench/splade.py and bench/decoders.py share: paths, corpus
and reference files, tokenization and padding, sorted padded batches, prepared-folder keys and
timed steps, the ORT session, worker processes and their peak RSS, single-text latency,
`embd convert` / `embd bench` / `embd encode`, the interleaved timing rounds and the throughput
table.

Imported as a sibling module (`import harness`): both scripts run as `python bench/X.py`,
and so do their workers, so bench/ is on sys.path.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Any, Callable, TypeVar

import numpy as np
import numpy.typing as npt

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "bench", "out")
CACHE = os.path.join(ROOT, "bench", ".cache")
EMBD = os.environ.get("EMBD_BIN") or os.path.join(ROOT, "target", "release", "embd")
BATCH = 32

F32 = npt.NDArray[np.float32]
I64 = npt.NDArray[np.int64]
Runner = Callable[[list[list[int]]], F32]
T = TypeVar("T")


def prog() -> str:
    """The running script's name (modernbert.py, splade.py), for messages."""
    return os.path.basename(sys.argv[0])


# --------------------------------------------------------------------------
# files, tokens
# --------------------------------------------------------------------------


def shared_dir() -> str:
    """The project's shared/ folder: $EMBD_SHARED_DIR, else next to the repository."""
    for c in [
        os.environ.get("EMBD_SHARED_DIR", ""),
        os.path.join(ROOT, "..", "shared"),
        os.path.join(ROOT, "..", "..", "shared"),
    ]:
        if c and os.path.isfile(os.path.join(c, "bench", "corpus.txt")):
            return os.path.abspath(c)
    sys.exit(f"{prog()}: cannot find shared/bench/corpus.txt (set EMBD_SHARED_DIR)")


def read_lines(path: str) -> list[str]:
    """Texts one per line, split exactly as `embd` reads them."""
    with open(path, "rb") as f:
        raw = f.read()
    lines = [ln[:-1] if ln.endswith(b"\r") else ln for ln in raw.split(b"\n")]
    if raw.endswith(b"\n"):
        lines.pop()
    return [ln.decode("utf-8") for ln in lines]


def write_lines(path: str, texts: list[str]) -> None:
    with open(path, "wb") as f:
        f.write(("\n".join(texts) + "\n").encode("utf-8"))


def read_json(path: str) -> dict[str, Any]:
    with open(path) as f:
        d: dict[str, Any] = json.load(f)
    return d


def write_json(path: str, d: Any, indent: int | None = 2) -> None:
    with open(path, "w") as f:
        json.dump(d, f, indent=indent)


def corpus_file(d: str, limit: int) -> tuple[list[str], str]:
    """The first `limit` corpus texts (0 = all) and a copy of them in d, one file per
    limit (so that runs may overlap)."""
    texts = read_lines(os.path.join(shared_dir(), "bench", "corpus.txt"))
    if limit:
        texts = texts[:limit]
    path = os.path.join(d, f"corpus-{len(texts)}.txt")
    write_lines(path, texts)
    return texts, path


def config_of(folder: str) -> dict[str, Any]:
    return read_json(os.path.join(folder, "config.json"))


def max_len_of(folder: str) -> int:
    """sentence-transformers 6.2's max_seq_length: the tokenizer's model_max_length."""
    return int(read_json(os.path.join(folder, "tokenizer_config.json"))["model_max_length"])


def loadavg() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def make_tokenizer(folder: str, max_len: int) -> Any:
    """HF tokenizers as sentence-transformers runs the folder: template with the special
    tokens, truncation at max_len, no padding (batches are padded here)."""
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(os.path.join(folder, "tokenizer.json"))
    tok.no_padding()
    tok.enable_truncation(max_length=max_len)
    return tok


def tokenize(tok: Any, texts: list[str], threads: int) -> list[list[int]]:
    """Id lists: encode_batch with more than one thread, else one text at a time."""
    if threads > 1:
        return [e.ids for e in tok.encode_batch(texts)]
    return [tok.encode(t).ids for t in texts]


def pad(id_lists: list[list[int]], pad_id: int) -> tuple[I64, I64]:
    n, width = len(id_lists), max(len(x) for x in id_lists)
    ids = np.full((n, width), pad_id, np.int64)
    mask = np.zeros((n, width), np.int64)
    for k, x in enumerate(id_lists):
        ids[k, : len(x)] = x
        mask[k, : len(x)] = 1
    return ids, mask


def sorted_batches(run: Runner, ids: list[list[int]], dim: int, batch: int = BATCH) -> F32:
    """Runs id lists sorted by length in padded batches; returns vectors in input order."""
    order = sorted(range(len(ids)), key=lambda k: len(ids[k]))
    out = np.empty((len(ids), dim), np.float32)
    for s in range(0, len(order), batch):
        part = order[s : s + batch]
        out[part] = run([ids[k] for k in part])
    return out


def latency_text(tok: Any, texts: list[str], n_tokens: int = 20) -> str:
    """The first text of exactly n_tokens tokens (special tokens included) under tok, else
    the closest one: the single-text latency input (`embd bench --latency-text`)."""
    lens = [len(e.ids) for e in tok.encode_batch(texts)]
    k = min(range(len(texts)), key=lambda i: (abs(lens[i] - n_tokens), i))
    return texts[k]


def cosines(a: npt.ArrayLike, b: npt.ArrayLike) -> npt.NDArray[np.float64]:
    x, y = np.asarray(a, np.float64), np.asarray(b, np.float64)
    out: npt.NDArray[np.float64] = (x * y).sum(1) / (
        np.linalg.norm(x, axis=1) * np.linalg.norm(y, axis=1)
    )
    return out


def last_line(stderr: str) -> str:
    return (stderr.strip().splitlines() or ["?"])[-1]


# --------------------------------------------------------------------------
# prepare: keys of prepared folders, timed steps, the peers' ONNX files
# --------------------------------------------------------------------------


def key_of(definition: str, requirements: list[str]) -> str:
    """What a prepared folder depends on: its definition and the pins (bench/<requirements>)."""
    h = hashlib.sha256(definition.encode())
    for r in requirements:
        p = os.path.join(ROOT, "bench", r)
        if os.path.isfile(p):
            with open(p, "rb") as f:
                h.update(f.read())
    return h.hexdigest()


def up_to_date(d: str, key: str) -> bool:
    """True (and says so) when d was prepared with this key."""
    stamp = os.path.join(d, ".key")
    if os.path.isfile(stamp):
        with open(stamp) as f:
            if f.read() == key:
                print(f"{prog()} prepare: {d} is up to date")
                return True
    return False


def fresh_dir(d: str) -> None:
    if os.path.isdir(d):
        shutil.rmtree(d)
    os.makedirs(d)


def write_key(d: str, key: str) -> None:
    with open(os.path.join(d, ".key"), "w") as f:
        f.write(key)


def stepper(meta: dict[str, Any], label: str) -> Callable[[str, Callable[[], T]], T]:
    """step(name, fn): runs fn, keeps its seconds in meta["seconds"][name] and prints them."""

    def step(name: str, fn: Callable[[], T]) -> T:
        t0 = time.perf_counter()
        r = fn()
        meta["seconds"][name] = round(time.perf_counter() - t0, 1)
        print(f"prepare {label}: {name} ({meta['seconds'][name]} s)", flush=True)
        return r

    return step


def st_vectors(folder: str, texts: list[str]) -> F32:
    """sentence-transformers, one text per call: the reference of fixtures whose pooling
    and Dense layers are the ST folder's (Qwen3, Gemma, BGE-M3 dense)."""
    from sentence_transformers import SentenceTransformer

    st = SentenceTransformer(folder, device="cpu")
    rows = [st.encode([t], batch_size=1, convert_to_numpy=True)[0] for t in texts]
    return np.stack(rows).astype(np.float32)


def ort_int8(src: str, dst: str) -> None:
    """quantize_dynamic as bench/prepare_peers.py does it. The dynamo exporter's graphs
    (Gemma) carry value_info that quantize_dynamic's shape inference rejects: then the
    graph is quantized without it (ORT infers the shapes again)."""
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    def go(path: str) -> None:
        quantize_dynamic(
            path,
            dst,
            weight_type=QuantType.QInt8,
            per_channel=True,
            reduce_range=False,
            extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT},
        )

    try:
        go(src)
    except onnx.shape_inference.InferenceError:
        m = onnx.load(src)
        del m.graph.value_info[:]
        with tempfile.TemporaryDirectory() as tmp:
            plain = os.path.join(tmp, "plain.onnx")
            onnx.save(m, plain)
            go(plain)


def op_counts(path: str) -> dict[str, int]:
    import onnx

    counts: dict[str, int] = {}
    for n in onnx.load(path, load_external_data=False).graph.node:
        counts[n.op_type] = counts.get(n.op_type, 0) + 1
    return dict(sorted(counts.items()))


# --------------------------------------------------------------------------
# workers: one engine configuration in a fresh process, its peak RSS
# --------------------------------------------------------------------------


def ort_runner(path: str, threads: int, pad_id: int, output: str) -> Runner:
    """An ORT session (intra-op threads = threads, sequential, ORT_ENABLE_ALL) as a runner
    of padded batches returning `output`."""
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])

    def run(id_lists: list[list[int]]) -> F32:
        ids, mask = pad(id_lists, pad_id)
        out: F32 = sess.run([output], {"input_ids": ids, "attention_mask": mask})[0]
        return out

    return run


def vm_rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    return float("nan")


def median_ms(f: Callable[[], Any], runs: int, warmup: int = 3) -> dict[str, float]:
    """f() timed `runs` times after `warmup` calls: median, p90 and min milliseconds."""
    for _ in range(warmup):
        f()
    ts = []
    for _ in range(runs):
        t0 = time.perf_counter()
        f()
        ts.append((time.perf_counter() - t0) * 1e3)
    ts.sort()
    return {"median_ms": ts[len(ts) // 2], "p90_ms": ts[int(len(ts) * 0.9)], "min_ms": ts[0]}


def timed_encode(encode: Callable[[list[str]], Any], corpus: str) -> float:
    """Seconds of encode(corpus texts) after a warm-up batch."""
    texts = read_lines(corpus)
    encode(texts[:BATCH])  # warm-up
    t0 = time.perf_counter()
    encode(texts)
    return time.perf_counter() - t0


def worker_main(worker: Callable[[dict[str, Any], str], None]) -> bool:
    """`X.py --worker SPEC --result OUT`: runs worker(spec, OUT); False if not a worker."""
    if len(sys.argv) < 2 or sys.argv[1] != "--worker":
        return False
    ap = argparse.ArgumentParser()
    ap.add_argument("--worker", required=True)
    ap.add_argument("--result", required=True)
    a = ap.parse_args()
    worker(read_json(a.worker), a.result)
    return True


# Runs argv[1:] and prints its exit status and peak RSS (KiB): a small launcher, so that
# the measured child does not start from this process's RSS (ru_maxrss survives exec).
RSS_LAUNCHER = (
    "import os, subprocess, sys\n"
    "p = subprocess.Popen(sys.argv[1:], stdout=subprocess.PIPE)\n"
    "out = p.stdout.read()\n"
    "_, status, usage = os.wait4(p.pid, 0)\n"
    "sys.stderr.buffer.write(out)\n"
    "print(os.waitstatus_to_exitcode(status), usage.ru_maxrss)\n"
)


def measured(cmd: list[str]) -> tuple[int, float, str]:
    """Runs cmd through the launcher: (exit status, peak RSS in MB, its stdout)."""
    r = subprocess.run(
        [sys.executable, "-c", RSS_LAUNCHER] + cmd, capture_output=True, text=True, check=True
    )
    status, kib = r.stdout.split()
    return int(status), int(kib) / 1024.0, r.stderr


def run_worker(script: str, spec: dict[str, Any]) -> dict[str, Any]:
    """`script --worker` on spec in a fresh process: its result and its peak RSS."""
    with tempfile.TemporaryDirectory() as tmp:
        spec_path, res_path = os.path.join(tmp, "spec.json"), os.path.join(tmp, "res.json")
        write_json(spec_path, spec, indent=None)
        cmd = [sys.executable, script, "--worker", spec_path, "--result", res_path]
        status, rss, _ = measured(cmd)
        if status != 0 or not os.path.isfile(res_path):
            return {"error": f"worker exited with {status}"}
        res = read_json(res_path)
        res["peak_rss_mb"] = rss
        return res


def peer_specs(
    engines: list[tuple[str, str, str]], threads: list[int], base: dict[str, Any], d: str
) -> dict[str, dict[str, Any]]:
    """{"<name> <t>t": worker spec} for every (name, engine, model file in d) and thread
    count."""
    peers: dict[str, dict[str, Any]] = {}
    for name, engine, model in engines:
        for t in threads:
            peers[f"{name} {t}t"] = base | {
                "engine": engine,
                "model": os.path.join(d, model),
                "threads": t,
                "tasks": [],
            }
    return peers


def only_peers(engines: list[tuple[str, str, str]], peers: str) -> list[tuple[str, str, str]]:
    """--peers a,b: the engines of those kinds (all when empty)."""
    if not peers:
        return engines
    keep = set(peers.split(","))
    return [e for e in engines if e[1] in keep]


# --------------------------------------------------------------------------
# ours: `embd convert`, `embd bench`, `embd encode`
# --------------------------------------------------------------------------


def ours_weights(d: str, dtype: str = "f32", src: str = "st") -> tuple[str | None, str]:
    """Converts d/<src> (d/st) with `embd convert --dtype` (again when embd is newer):
    d/ours.weights (f32, `--packed`: the layers stored in the f32 kernels' layout, as for bf16
    and int8, so that no engine packs a copy of its weights at open) or d/ours-<dtype>.weights
    (another src: d/ours-<src>[-<dtype>].weights); (path, "") or (None, why)."""
    stem = "ours" if src == "st" else f"ours-{src}"
    w = os.path.join(d, f"{stem}.weights" if dtype == "f32" else f"{stem}-{dtype}.weights")
    if not os.path.isfile(EMBD):
        return None, f"no {EMBD} (cargo build --release --bin embd)"
    if os.path.isfile(w) and os.path.getmtime(w) >= os.path.getmtime(EMBD):
        return w, ""
    r = subprocess.run(
        [EMBD, "convert", os.path.join(d, src), "-o", w, "--dtype", dtype]
        + (["--packed"] if dtype == "f32" else []),
        capture_output=True,
        text=True,
    )
    if r.returncode != 0:
        if os.path.exists(w):
            os.unlink(w)
        return None, f"embd convert refuses the folder: {last_line(r.stderr)}"
    return w, ""


def bench_cmd(
    w: str, inp: str, threads: int, batch: int = BATCH, emit: str = "", precision: str = ""
) -> list[str]:
    """`embd bench`, one round, no latency runs (add --warmup, --limit)."""
    cmd = [EMBD, "bench", "-m", w, "--input", inp, "--threads", str(threads), "--batch-size"]
    cmd += [str(batch), "--rounds", "1", "--latency-runs", "0"]
    cmd += ["--emit", emit] if emit else []
    return cmd + (["--precision", precision] if precision else [])


def precision_support(
    w: str, probe: str, precisions: list[str], batch: int, emit: str = ""
) -> dict[str, str | None]:
    """{precision: None if `embd bench [--emit E] --precision P` runs on w, else why not}."""
    if emit:
        r = subprocess.run([EMBD, "bench", "--help"], capture_output=True, text=True)
        if "--emit" not in r.stdout:
            return {p: "embd bench has no --emit yet" for p in precisions}
    got: dict[str, str | None] = {}
    for p in precisions:
        cmd = bench_cmd(w, probe, 1, batch, emit, p) + ["--limit", "2", "--warmup", "0"]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            got[p] = last_line(r.stderr)
            continue
        eff = json.loads(r.stdout).get("precision")
        got[p] = None if eff == p else f"computes in {eff}"
    return got


def ours_bench(cmd: list[str]) -> dict[str, Any]:
    """`embd bench` through the RSS launcher: its JSON, "seconds" (its best round) and
    "peak_rss_mb"; or {"error", "status"}."""
    status, rss, out = measured(cmd)
    if status != 0:
        return {"error": f"embd bench exited with {status}", "status": status}
    res: dict[str, Any] = json.loads(out)
    res["seconds"] = res["best_s"]
    res["peak_rss_mb"] = rss
    return res


def embd_encode(w: str, inp: str, fmt: str, args: list[str]) -> tuple[Any, str]:
    """`embd encode --format npy|jsonl`: (the array or the JSONL records, "") or
    (None, the last line of its stderr)."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, f"v.{fmt}")
        cmd = [EMBD, "encode", "-m", w, "--input", inp, "--format", fmt, "--output", out]
        r = subprocess.run(cmd + args, capture_output=True, text=True)
        if r.returncode != 0:
            return None, last_line(r.stderr)
        if fmt == "npy":
            return np.load(out), ""
        with open(out, encoding="utf-8") as f:
            return [json.loads(x) for x in f if x.strip()], ""


# --------------------------------------------------------------------------
# run: interleaved rounds, the table, the results file, the command line
# --------------------------------------------------------------------------


def interleaved_rounds(
    configs: list[str],
    rounds: int,
    measure: Callable[[str], dict[str, Any]],
    n_texts: int,
    flops: Callable[[str], float],
    log: list[dict[str, Any]],
) -> tuple[dict[str, list[float]], dict[str, float]]:
    """Every config once per round, in order (measure(config) -> {"seconds", "peak_rss_mb"}
    or {"error"}); prints each, appends it to log. Returns the seconds of each config's
    rounds and its lowest peak RSS. flops(config): the linear-layer FLOPs of the corpus."""
    times: dict[str, list[float]] = {k: [] for k in configs}
    rss: dict[str, float] = {}
    for rnd in range(rounds):
        for k in configs:
            load = loadavg()
            res = measure(k)
            if "seconds" not in res:
                print(f"round {rnd + 1}: {k:20s} FAILED {res.get('error')}", flush=True)
                continue
            times[k].append(res["seconds"])
            rss[k] = min(rss.get(k, 1e12), res["peak_rss_mb"])
            log.append(
                {
                    "round": rnd + 1,
                    "config": k,
                    "seconds": res["seconds"],
                    "peak_rss_mb": res["peak_rss_mb"],
                    "load": load,
                }
            )
            print(
                f"round {rnd + 1}: {k:20s} {n_texts / res['seconds']:7.1f} texts/s "
                f"{flops(k) / res['seconds'] / 1e9:6.1f} GFLOP/s  peak RSS "
                f"{res['peak_rss_mb']:6.0f} MB (load {load})",
                flush=True,
            )
    return times, rss


def throughput_table(
    times: dict[str, list[float]],
    rss: dict[str, float],
    n_texts: int,
    work: Callable[[str], tuple[int, int]],
) -> list[dict[str, Any]]:
    """Prints and returns each config's best round: texts/s, tokens/s, GFLOP/s, peak RSS.
    work(config): (tokens of the corpus, linear-layer FLOPs per token)."""
    rows = []
    print(
        f"\n{'config':22s} {'texts/s':>8s} {'tokens/s':>9s} {'GFLOP/s':>8s} {'peak RSS MB':>11s}  rounds"
    )
    for k, ts in times.items():
        if not ts:
            continue
        best = min(ts)
        tk, fpt = work(k)
        row: dict[str, Any] = {
            "config": k,
            "best_s": best,
            "rounds_s": ts,
            "texts_per_s": n_texts / best,
            "tokens_per_s": tk / best,
            "gflops": fpt * tk / best / 1e9,
            "peak_rss_mb": rss[k],
        }
        rows.append(row)
        print(
            f"{k:22s} {row['texts_per_s']:8.1f} {row['tokens_per_s']:9.0f} {row['gflops']:8.1f} "
            f"{rss[k]:11.0f}  {len(ts)}"
        )
    return rows


def write_results(name: str, results: dict[str, Any]) -> None:
    os.makedirs(OUT, exist_ok=True)
    path = os.path.join(OUT, f"{name}.json")
    write_json(path, results, indent=1)
    print(f"wrote {path}")


def add_run_args(
    ap: argparse.ArgumentParser, rounds: int, limit: int, limit_help: str, peers_help: str
) -> None:
    """The command (prepare | run) and the options both scripts take."""
    ap.add_argument("cmd", choices=["prepare", "run"], nargs="?", default="run")
    ap.add_argument("--rounds", type=int, default=rounds)
    ap.add_argument("--limit", type=int, default=limit, help=limit_help)
    ap.add_argument("--threads", default="1,2", help="thread counts to time (default 1,2)")
    ap.add_argument("--peers", default="", help=peers_help)
