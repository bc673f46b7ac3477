#!/usr/bin/env python3
"""Static embeddings: a random-weight potion-base-8M-sized model2vec folder, model2vec's own
`StaticModel.encode` next to ours on the same folder (`embd convert --static-behaviour
model2vec`), in the same run.

Run through `bench/run.sh --static [...]`, which prepares `bench/.venv` with model2vec
(`requirements-static.txt`) and calls `static.py prepare` before `static.py run`.

prepare   (idempotent: rebuilt when this script's definition or the pins change)
  bench/.cache/potion-base-8m-shape/
    m2v/           a model2vec 0.10 folder in the layout of shared/reference/encoders/potion-tiny
                   (config.json, model.safetensors with `embeddings`, tokenizer.json,
                   modules.json): potion-tiny's tokenizer (bge-base-en-v1.5's WordPiece, the
                   real 30,522 ids, as potion-base-8M) and a seeded random float32 table of
                   30,522 x 256 scaled as potion-tiny's (1.5 / ln(id + 3), rows 1-99 zero)
    ours.weights   `embd convert m2v/ --static-behaviour model2vec` (at run time, again when
                   `embd` is newer)

run [--rounds N] [--passes N] [--limit N] [--batch-size N] [--check]
  1. accuracy: model2vec's vectors of the corpus (one encode call) vs `embd encode` of the
     same texts: worst and mean cosine, max |diff|, texts whose ids differ in count;
  2. throughput, each configuration in a fresh process per round, rounds interleaved, best
     kept: model2vec `StaticModel.encode(texts, batch_size)` (1 thread: RAYON_NUM_THREADS=1
     and TOKENIZERS_PARALLELISM=false for HF tokenizers, one BLAS/OpenMP thread; default:
     none of these set), one warm-up pass then `--passes` timed passes, best kept; ours
     the same in `embd bench --threads 1|default --batch-size N --warmup <corpus> --rounds
     <passes>` (one warm-up pass, `--passes` timed passes, best kept; the static runtime runs
     on one thread either way); tokenization included on both sides; peak RSS of each
     process;
  3. end to end: one process that starts, opens the model, embeds every text and exits
     (`python -c` with model2vec; `embd encode --format npy --output /dev/null`), wall time.
  Results: a table on stdout and bench/out/static.json.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
from typing import Any

import numpy as np

import harness  # bench/harness.py: paths, corpus, workers, RSS, `embd` helpers
from harness import cosines, read_lines, shared_dir

HERE = os.path.abspath(__file__)
NAME = "potion-base-8m-shape"
TINY = "potion-tiny"  # shared/reference/encoders/potion-tiny: the layout and the tokenizer
DIM = 256  # potion-base-8M's width
SEED = 31
PREPARE_VERSION = 1
REQUIREMENTS = ["requirements.txt", "requirements-static.txt"]
# The environment of a one-thread model2vec process: HF tokenizers' Rayon pool off, one
# BLAS / OpenMP thread for numpy.
ONE_THREAD = {
    "RAYON_NUM_THREADS": "1",
    "TOKENIZERS_PARALLELISM": "false",
    "OMP_NUM_THREADS": "1",
    "OPENBLAS_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
}


def cache_dir() -> str:
    return os.path.join(harness.CACHE, NAME)


def tiny_folder() -> str:
    return os.path.join(shared_dir(), "reference", "encoders", TINY)


def key() -> str:
    return harness.key_of(f"{PREPARE_VERSION} {SEED} {DIM} {TINY}", REQUIREMENTS)


def prepare() -> None:
    d = cache_dir()
    k = key()
    if harness.up_to_date(d, k):
        return
    from safetensors.numpy import save_file

    harness.fresh_dir(d)
    dst = os.path.join(d, "m2v")
    shutil.copytree(tiny_folder(), dst)
    cfg = harness.config_of(dst)
    rows = len(harness.read_json(os.path.join(dst, "tokenizer.json"))["model"]["vocab"])
    cfg |= {"hidden_dim": DIM, "apply_pca": DIM}
    harness.write_json(os.path.join(dst, "config.json"), cfg, indent=4)
    rng = np.random.default_rng(SEED)
    table = rng.standard_normal((rows, DIM), dtype=np.float32) / np.float32(DIM**0.5)
    table *= (1.5 / np.log(np.arange(rows, dtype=np.float64) + 3.0)).astype(np.float32)[:, None]
    table[1:100] = 0.0  # [unused*], as potion-tiny
    save_file({"embeddings": np.ascontiguousarray(table)}, os.path.join(dst, "model.safetensors"))
    harness.write_json(
        os.path.join(d, "prepare.json"), {"rows": rows, "dim": DIM, "seed": SEED}, indent=1
    )
    print(f"static.py prepare: {dst}: {rows} x {DIM} float32, tokenizer of {TINY}")
    harness.write_key(d, k)


def ours_weights(d: str) -> tuple[str | None, str]:
    """`embd convert m2v/ --static-behaviour model2vec` -> d/ours.weights (again when embd
    is newer)."""
    w = os.path.join(d, "ours.weights")
    if not os.path.isfile(harness.EMBD):
        return None, f"no {harness.EMBD} (cargo build --release --bin embd)"
    if os.path.isfile(w) and os.path.getmtime(w) >= os.path.getmtime(harness.EMBD):
        return w, ""
    cmd = [harness.EMBD, "convert", os.path.join(d, "m2v"), "-o", w]
    r = subprocess.run(
        cmd + ["--static-behaviour", "model2vec"], capture_output=True, text=True, check=False
    )
    if r.returncode != 0:
        return None, f"embd convert refuses the folder: {harness.last_line(r.stderr)}"
    return w, ""


# --------------------------------------------------------------------------
# worker: model2vec in a fresh process
# --------------------------------------------------------------------------


def worker(spec: dict[str, Any], result_path: str) -> None:
    from model2vec import StaticModel

    t0 = time.perf_counter()
    model = StaticModel.from_pretrained(spec["folder"])
    res: dict[str, Any] = {"load_s": time.perf_counter() - t0}
    texts = read_lines(spec["corpus"])
    batch = spec["batch"]
    if spec.get("vectors"):
        v = np.asarray(model.encode(texts, batch_size=batch), np.float32)
        np.save(spec["vectors"], v)
        res["ids"] = [len(x) for x in model.tokenize(texts)]
    else:
        model.encode(texts, batch_size=batch)  # warm-up pass
        secs = []
        for _ in range(spec["passes"]):
            t0 = time.perf_counter()
            model.encode(texts, batch_size=batch)
            secs.append(time.perf_counter() - t0)
        res["rounds_s"] = secs
        res["seconds"] = min(secs)
    harness.write_json(result_path, res, indent=None)


def run_m2v(spec: dict[str, Any], one_thread: bool) -> dict[str, Any]:
    """The worker in a fresh process (one-thread environment or the default)."""
    saved = dict(os.environ)
    try:
        if one_thread:
            os.environ.update(ONE_THREAD)
        return harness.run_worker(HERE, spec)
    finally:
        os.environ.clear()
        os.environ.update(saved)


M2V_E2E = (
    "import sys\n"
    "from model2vec import StaticModel\n"
    "m = StaticModel.from_pretrained(sys.argv[1])\n"
    "texts = open(sys.argv[2], encoding='utf-8').read().splitlines()\n"
    "m.encode(texts, batch_size=int(sys.argv[3]))\n"
)


def wall(cmd: list[str], env: dict[str, str] | None = None) -> float:
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, env=env)
    return time.perf_counter() - t0


# --------------------------------------------------------------------------
# run
# --------------------------------------------------------------------------


def run(args: argparse.Namespace) -> None:
    prepare()
    d = cache_dir()
    folder = os.path.join(d, "m2v")
    texts, corpus = harness.corpus_file(d, args.limit)
    print(
        f"{NAME}: {len(texts)} corpus texts; load average {harness.loadavg()}",
        flush=True,
    )
    w, why = ours_weights(d)
    if w is None:
        sys.exit(f"static.py: {why}")
    results: dict[str, Any] = {"model": NAME, "texts": len(texts), "rounds": [], "notes": []}

    # 1. accuracy on every text
    vec = os.path.join(d, "m2v-vectors.npy")
    r = harness.run_worker(
        HERE, {"folder": folder, "corpus": corpus, "batch": args.batch_size, "vectors": vec}
    )
    if "error" in r:
        sys.exit(f"static.py: model2vec worker failed: {r['error']}")
    ref = np.load(vec)
    ours, why = harness.embd_encode(w, corpus, "npy", ["--threads", "2"])
    if ours is None:
        sys.exit(f"static.py: embd encode failed: {why}")
    zero_ref = np.linalg.norm(ref, axis=1) == 0
    zero_ours = np.linalg.norm(ours, axis=1) == 0
    both = ~(zero_ref | zero_ours)
    c = cosines(ours[both], ref[both])
    acc = {
        "worst_cos": float(c.min()),
        "mean_cos": float(c.mean()),
        "max_abs": float(np.abs(ours - ref).max()),
        "zero_vectors_model2vec": int(zero_ref.sum()),
        "zero_vectors_ours": int(zero_ours.sum()),
        "zero_mismatch": int((zero_ref != zero_ours).sum()),
    }
    results["accuracy"] = acc
    print(
        f"accuracy, ours vs model2vec on {len(texts)} texts: worst cosine {acc['worst_cos']:.9f} "
        f"(1-cos {1 - acc['worst_cos']:.1e}), mean {acc['mean_cos']:.9f}, max abs diff "
        f"{acc['max_abs']:.2e}; zero vectors {acc['zero_vectors_model2vec']} / "
        f"{acc['zero_vectors_ours']} (mismatched {acc['zero_mismatch']})",
        flush=True,
    )
    ok = acc["worst_cos"] >= 0.99999 and acc["zero_mismatch"] == 0
    if args.check:
        if not ok:
            sys.exit("static check FAILED: ours and model2vec disagree")
        print("static check: ours agrees with model2vec (worst cosine >= 0.99999)")
        return

    # 2. throughput, interleaved
    base = {"folder": folder, "corpus": corpus, "batch": args.batch_size, "passes": args.passes}
    configs = ["model2vec 1t", "ours 1t", "model2vec default", "ours default"]

    def measure(k: str) -> dict[str, Any]:
        if k.startswith("model2vec"):
            return run_m2v(base, k.endswith("1t"))
        # As model2vec's worker: one warm-up pass, then `passes` timed passes, best kept
        # (`embd bench`'s "best_s"), tokenization included.
        threads = ["--threads", "1"] if k.endswith("1t") else []
        cmd = [harness.EMBD, "bench", "-m", w or "", "--input", corpus]
        cmd += ["--batch-size", str(args.batch_size), "--warmup", str(len(texts))]
        cmd += ["--rounds", str(args.passes), "--latency-runs", "0"] + threads
        return harness.ours_bench(cmd)

    times, rss = harness.interleaved_rounds(
        configs, args.rounds, measure, len(texts), lambda k: 0.0, results["rounds"]
    )
    rows: list[dict[str, Any]] = []
    print(f"\n{'config':20s} {'texts/s':>10s} {'ms / corpus':>12s} {'peak RSS MB':>11s}")
    for k, ts in times.items():
        if not ts:
            continue
        best = min(ts)
        rows.append(
            {"config": k, "best_s": best, "texts_per_s": len(texts) / best, "peak_rss_mb": rss[k]}
        )
        print(f"{k:20s} {len(texts) / best:10.0f} {best * 1e3:12.2f} {rss[k]:11.0f}")
    results["rows"] = rows
    by: dict[str, float] = {r["config"]: r["texts_per_s"] for r in rows}
    for t in ["1t", "default"]:
        if f"ours {t}" in by and f"model2vec {t}" in by:
            ratio = by[f"ours {t}"] / by[f"model2vec {t}"]
            results[f"ratio_{t}"] = ratio
            print(f"{t}: ours / model2vec = {ratio:.2f}x")

    # 3. end to end, one process each, interleaved
    e2e: dict[str, list[float]] = {"model2vec": [], "ours": []}
    py = [sys.executable, "-c", M2V_E2E, folder, corpus, str(args.batch_size)]
    ours_cmd = [harness.EMBD, "encode", "-m", w, "--input", corpus, "--format", "npy"]
    ours_cmd += ["--output", "/dev/null", "--batch-size", str(args.batch_size)]
    for _ in range(args.rounds):
        e2e["model2vec"].append(wall(py))
        e2e["ours"].append(wall(ours_cmd))
    results["end_to_end_s"] = e2e
    print(
        "end to end (start, open, embed every text, exit; default threads), best of "
        f"{args.rounds}: model2vec {min(e2e['model2vec']):.3f} s, ours {min(e2e['ours']):.3f} s "
        f"({min(e2e['model2vec']) / min(e2e['ours']):.1f}x)"
    )
    results["load_end"] = harness.loadavg()
    harness.write_results("static", results)


def main() -> None:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the folder is local
    if harness.worker_main(worker):
        return
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("cmd", choices=["prepare", "run"], nargs="?", default="run")
    ap.add_argument("--rounds", type=int, default=3, help="interleaved rounds (default 3)")
    ap.add_argument("--passes", type=int, default=5, help="timed passes per process (default 5)")
    ap.add_argument("--limit", type=int, default=0, help="first N corpus texts (0 = all 2,000)")
    ap.add_argument(
        "--batch-size", type=int, default=1024, help="texts per call (model2vec's default 1024)"
    )
    ap.add_argument("--check", action="store_true", help="accuracy only, no timing")
    args = ap.parse_args()
    if args.cmd == "prepare":
        prepare()
    else:
        run(args)


if __name__ == "__main__":
    main()
