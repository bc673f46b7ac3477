#!/usr/bin/env python3
"""Before/after: two `embd` builds on the same model files, same corpus, same run.

  bench/.venv/bin/python bench/ab.py --old OLD_EMBD --new NEW_EMBD -m FILE [-m FILE ...]
      [--precisions f32,bf16,int8] [--threads 1,2] [--rounds 3] [--limit 300]
      [--batch-size 32] [--name ab]

Every (model, precision, threads) configuration runs as `embd bench --rounds 1
--latency-runs 0 --warmup 20` in a fresh process per build and round; within a round the two
builds alternate (old first in odd rounds, new first in even ones), so that a change of the
machine's load hits both; best round kept. Copy each binary first (a rebuild during the run
then changes nothing). Prints texts/s of each build and old/new (of texts/s: below 1 the new
build is faster); every round goes to bench/out/<name>.json.
"""

from __future__ import annotations

import argparse
import os
import subprocess
from typing import Any

import harness  # bench/harness.py: corpus, `embd bench` through the RSS launcher, load


def version(binary: str) -> str:
    r = subprocess.run([binary, "--version"], capture_output=True, text=True, check=False)
    return r.stdout.strip() or r.stderr.strip()


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--old", required=True, help="the embd binary before the change")
    ap.add_argument("--new", required=True, help="the embd binary after the change")
    ap.add_argument("-m", "--model", action="append", required=True, help="model file")
    ap.add_argument("--precisions", default="f32,bf16,int8")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--limit", type=int, default=300, help="first N corpus texts (0 = all)")
    ap.add_argument("--batch-size", type=int, default=harness.BATCH)
    ap.add_argument("--name", default="ab", help="results file bench/out/<name>.json")
    args = ap.parse_args()
    os.makedirs(harness.CACHE, exist_ok=True)
    texts, corpus = harness.corpus_file(harness.CACHE, args.limit)
    builds = {"old": args.old, "new": args.new}
    configs = [
        (m, p, int(t))
        for m in args.model
        for p in args.precisions.split(",")
        for t in args.threads.split(",")
    ]
    print(
        f"{len(texts)} corpus texts, {len(configs)} configurations x 2 builds x {args.rounds} "
        f"rounds; old {version(args.old)}, new {version(args.new)}; load {harness.loadavg()}",
        flush=True,
    )
    log: list[dict[str, Any]] = []
    best: dict[tuple[str, str, int, str], float] = {}
    for rnd in range(args.rounds):
        order = ["old", "new"] if rnd % 2 == 0 else ["new", "old"]
        for m, p, t in configs:
            for b in order:
                cmd = harness.bench_cmd(m, corpus, t, args.batch_size, precision=p)
                cmd[0] = builds[b]
                load = harness.loadavg()
                res = harness.ours_bench(cmd + ["--warmup", "20"])
                name = f"{os.path.basename(m)} {p} {t}t {b}"
                if "seconds" not in res:
                    print(f"round {rnd + 1}: {name} FAILED {res.get('error')}", flush=True)
                    continue
                s = res["seconds"]
                log.append(
                    {
                        "round": rnd + 1,
                        "model": m,
                        "precision": p,
                        "threads": t,
                        "build": b,
                        "seconds": s,
                        "effective_precision": res.get("precision"),
                        "peak_rss_mb": res["peak_rss_mb"],
                        "load": load,
                    }
                )
                key = (m, p, t, b)
                best[key] = min(best.get(key, 1e30), s)
                print(
                    f"round {rnd + 1}: {name:44s} {len(texts) / s:8.1f} texts/s (load {load})",
                    flush=True,
                )
    rows = []
    print(
        f"\n{'model':36s} {'prec':5s} {'thr':>3s} {'old t/s':>9s} {'new t/s':>9s} {'old/new':>8s}"
    )
    for m, p, t in configs:
        o, n = best.get((m, p, t, "old")), best.get((m, p, t, "new"))
        if o is None or n is None:
            continue
        row = {
            "model": os.path.basename(m),
            "precision": p,
            "threads": t,
            "old_texts_per_s": len(texts) / o,
            "new_texts_per_s": len(texts) / n,
            "old_over_new": n / o,
        }
        rows.append(row)
        print(
            f"{row['model']:36s} {p:5s} {t:3d} {row['old_texts_per_s']:9.1f} "
            f"{row['new_texts_per_s']:9.1f} {row['old_over_new']:8.3f}"
        )
    harness.write_results(
        args.name,
        {
            "texts": len(texts),
            "old": {"binary": args.old, "version": version(args.old)},
            "new": {"binary": args.new, "version": version(args.new)},
            "rows": rows,
            "rounds": log,
            "load_end": harness.loadavg(),
        },
    )


if __name__ == "__main__":
    main()
