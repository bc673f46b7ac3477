#!/usr/bin/env bash
# The server benchmark (issue 23), separate from bench/run.sh: embd serve
# against `embd bench` (the offline engine) on the same corpus, same machine,
# same run, printed as one table (and bench/out/serve.json).
#
#   1. offline: `embd bench` over the corpus (batch 32): texts/s, and the
#      in-process latency of one ~20-token text;
#   2. start-up: from launching embd-serve to the first answered /embed;
#   3. a lone client (1 x 1 text): the latency of one request over HTTP;
#   4. 64 keep-alive clients each sending one text at a time;
#   5. 32 clients one text at a time (about half of that load): p99;
#   6. 8 clients sending batches of 32.
#
# Usage: bench/serve.sh [--threads N] [--rounds R] [--limit N]
# Env: EMBD_SHARED_DIR (corpus: shared/bench/corpus.txt), EMBD_MODEL.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
threads=0
rounds=1
limit=0
while [ $# -gt 0 ]; do
  case "$1" in
    --threads) threads="$2"; shift ;;
    --rounds) rounds="$2"; shift ;;
    --limit) limit="$2"; shift ;;
    *) echo "bench/serve.sh: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done
shared="${EMBD_SHARED_DIR:-}"
if [ -z "$shared" ]; then
  for c in "$root/../shared" "$root/../../shared"; do
    if [ -f "$c/bench/corpus.txt" ]; then shared="$c"; break; fi
  done
fi
corpus="$shared/bench/corpus.txt"
[ -f "$corpus" ] || { echo "bench/serve.sh: $corpus not found (set EMBD_SHARED_DIR)" >&2; exit 1; }
model="${EMBD_MODEL:-$root/models/all-MiniLM-L6-v2.weights}"
cd "$root"
cargo build --release --quiet -p embedder --bin embd
cargo build --release --quiet -p embd-server --bin embd-serve --bin embd-serve-bench
bin="$root/target/release"
mkdir -p bench/out
tthreads=()
[ "$threads" != 0 ] && tthreads=(--threads "$threads")

echo "== offline: embd bench (batch 32, rounds $rounds)" >&2
offline=$("$bin/embd" bench -m "$model" --input "$corpus" --batch-size 32 --rounds "$rounds" \
  --limit "$limit" "${tthreads[@]+"${tthreads[@]}"}")

port_file=$(mktemp)
since=$(date +%s%N)
"$bin/embd-serve" -m "$model" --port 0 "${tthreads[@]+"${tthreads[@]}"}" 2> "$port_file" &
pid=$!
trap 'kill -TERM $pid 2>/dev/null || true; rm -f "$port_file"' EXIT
addr=""
for _ in $(seq 1 2000); do
  addr=$(grep -o 'http://[0-9.]*:[0-9]*' "$port_file" | head -1 | sed 's|http://||' || true)
  [ -n "$addr" ] && break
  sleep 0.005
done
[ -n "$addr" ] || { echo "embd-serve did not start: $(cat "$port_file")" >&2; exit 1; }
startup=$("$bin/embd-serve-bench" --addr "$addr" --first --since-ns "$since")

run() { # clients batch
  "$bin/embd-serve-bench" --addr "$addr" --corpus "$corpus" --clients "$1" --batch "$2" \
    --rounds "$rounds" --limit "$limit"
}
echo "== warm-up" >&2
"$bin/embd-serve-bench" --addr "$addr" --corpus "$corpus" --clients 8 --batch 8 --limit 400 > /dev/null
echo "== lone client" >&2
lone=$("$bin/embd-serve-bench" --addr "$addr" --corpus "$corpus" --clients 1 --batch 1 --limit 300)
echo "== 64 clients x 1 text" >&2
c64=$(run 64 1)
echo "== 32 clients x 1 text" >&2
c32=$(run 32 1)
echo "== 8 clients x 32 texts" >&2
c8=$(run 8 32)
kill -TERM $pid
wait $pid || { echo "embd-serve exited non-zero after SIGTERM" >&2; exit 1; }
trap - EXIT
rm -f "$port_file"

python3 - "$offline" "$startup" "$lone" "$c64" "$c32" "$c8" <<'PY'
import json, os, sys
off, start, lone, c64, c32, c8 = (json.loads(a) for a in sys.argv[1:])
def find(d, *keys):
    for k in keys:
        if k in d:
            return d[k]
    for v in d.values():
        if isinstance(v, dict):
            r = find(v, *keys)
            if r is not None:
                return r
    return None
tps = find(off, "texts_per_s", "throughput_texts_per_s", "texts_per_sec")
lat = (off.get("latency") or {}).get("median_ms")
rows = [
    ("offline embd bench (batch 32)", tps, lat, None),
    ("lone client, 1 text/request", lone["texts_per_s"], lone["p50_ms"], lone["p99_ms"]),
    ("64 clients x 1 text", c64["texts_per_s"], c64["p50_ms"], c64["p99_ms"]),
    ("32 clients x 1 text", c32["texts_per_s"], c32["p50_ms"], c32["p99_ms"]),
    ("8 clients x 32 texts", c8["texts_per_s"], c8["p50_ms"], c8["p99_ms"]),
]
print(f"{'run':34} {'texts/s':>9} {'vs offline':>10} {'p50 ms':>8} {'p99 ms':>8}")
for name, t, p50, p99 in rows:
    ratio = f"{t / tps:.0%}" if tps and t else "-"
    f = lambda x: "-" if x is None else f"{x:.2f}"
    print(f"{name:34} {t:9.1f} {ratio:>10} {f(p50):>8} {f(p99):>8}")
print(f"start-up to first answered request: {start['startup_to_first_answer_ms']:.1f} ms")
if lat is not None:
    print(f"lone request over HTTP vs in-process call (p50): +{lone['p50_ms'] - lat:.2f} ms")
print(f"p99 at ~half load (32 clients) / lone p50: {c32['p99_ms'] / lone['p50_ms']:.2f}x")
print(f"load average: {os.getloadavg()}")
out = {"offline": off, "startup": start, "lone": lone, "c64": c64, "c32": c32, "c8x32": c8,
       "loadavg": os.getloadavg()}
with open("bench/out/serve.json", "w") as fh:
    json.dump(out, fh, indent=1)
PY
