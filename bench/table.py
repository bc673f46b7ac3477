#!/usr/bin/env python3
"""Prints the markdown tables of a timing run (bench/out/results.json by default), as
pasted into bench/README.md: throughput with accuracy and RSS per configuration, the
single-text latency per engine and precision, and the ratios.

Usage: table.py [RESULTS_JSON]
"""

import json
import os
import sys


def main():
    path = (
        sys.argv[1]
        if len(sys.argv) > 1
        else os.path.join(os.path.dirname(os.path.abspath(__file__)), "out", "results.json")
    )
    r = json.load(open(path))
    rows = r["throughput"]
    print(
        "| config | threads | texts/s | tokens/s | worst cosine | mean cosine | peak RSS (MB) | rounds (s) |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---|")
    for x in rows:
        wc = f"{x['worst_cosine']:.6f}" if x["worst_cosine"] is not None else "-"
        mc = f"{x['mean_cosine']:.6f}" if x["mean_cosine"] is not None else "-"
        rss = f"{x['rss_mb']:.0f}" if x.get("rss_mb") is not None else "-"
        print(
            f"| {x['config']} | {x['threads']} | {x['texts_per_s']:.1f} | {x['tokens_per_s']:.0f} | {wc} | {mc} | "
            f"{rss} | {' '.join(f'{s:.2f}' for s in x['rounds_s'])} |"
        )
    lat = r["latency"]["best_median_and_p90_ms"]
    groups = []
    for k in lat:
        g = k.rsplit(" ", 1)[0]
        if g not in groups:
            groups.append(g)
    print(f"\nSingle-text latency, {r['latency']['text']!r}, median / p90 (ms), best of rounds:\n")
    print("| engine, precision | 1 thread | 2 threads |")
    print("|---|---:|---:|")
    for g in groups:
        cells = []
        for t in (1, 2):
            v = lat.get(f"{g} {t}t")
            cells.append(f"{v['median_ms']:.2f} / {v['p90_ms']:.2f}" if v else "-")
        print(f"| {g} | {cells[0]} | {cells[1]} |")
    print("\n| ratio | value | configurations | target |")
    print("|---|---:|---|---|")
    for k, v in r["ratios"].items():
        print(f"| {k} | {v['ratio']:.2f}x | {v['ours']} / {v['peer']} | {v['target']} |")


if __name__ == "__main__":
    main()
