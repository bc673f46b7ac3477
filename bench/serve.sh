#!/usr/bin/env bash
# The server benchmark, separate from bench/run.sh: embd serve
# against `embd bench` (the offline engine) on the same corpus, same machine,
# same run, printed as one table (and bench/out/serve.json).
#
#   1. offline: `embd bench` over the corpus (batch 32): texts/s;
#   2. start-up: from launching embd-serve to the first answered /embed;
#   3. a lone request: one ~20-token corpus text embedded in-process (same
#      model, same threads) and sent alone over HTTP, alternating blocks;
#      the difference is what the server adds;
#   4. 64 keep-alive clients each sending one text at a time (closed loop);
#   5. 8 clients sending batches of 32 (closed loop);
#   6. open loop: single-text requests due at half of step 4's throughput
#      (evenly spaced, 64 connections), latency from the time each was due.
# The whole set runs --repeat times (a fresh server each time); the table
# gives the median of each number, with every goal met or not.
#
# Usage: bench/serve.sh [--threads N] [--rounds R] [--limit N] [--repeat K]
# Env: EMBD_SHARED_DIR (corpus: shared/bench/corpus.txt), EMBD_MODEL.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
threads=0
rounds=1
limit=0
repeat=3
while [ $# -gt 0 ]; do
  case "$1" in
    --threads) threads="$2"; shift ;;
    --rounds) rounds="$2"; shift ;;
    --limit) limit="$2"; shift ;;
    --repeat) repeat="$2"; shift ;;
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

results=()
for rep in $(seq 1 "$repeat"); do
echo "== round $rep/$repeat: offline embd bench (batch 32, rounds $rounds), load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
offline=$("$bin/embd" bench -m "$model" --input "$corpus" --batch-size 32 --rounds "$rounds" \
  --limit "$limit" --latency-runs 0 "${tthreads[@]+"${tthreads[@]}"}")

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

sb() { "$bin/embd-serve-bench" --addr "$addr" --corpus "$corpus" "$@"; }
echo "== warm-up" >&2
sb --clients 8 --batch 8 --limit 400 > /dev/null
echo "== lone request: in-process vs HTTP, load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
lone=$(sb --lone --model "$model" "${tthreads[@]+"${tthreads[@]}"}")
echo "== lone client over the corpus (1 x 1 text), load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
c1=$(sb --clients 1 --batch 1 --rounds "$rounds" --limit "$limit")
echo "== 64 clients x 1 text, load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
c64=$(sb --clients 64 --batch 1 --rounds "$rounds" --limit "$limit")
echo "== 8 clients x 32 texts, load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
c8=$(sb --clients 8 --batch 32 --rounds "$rounds" --limit "$limit")
rate=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["texts_per_s"] / 2)' "$c64")
echo "== open loop: $rate requests/s (half of 64 x 1), load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
open=$(sb --clients 64 --batch 1 --rate "$rate" --rounds "$rounds" --limit "$limit")
kill -TERM $pid
wait $pid || { echo "embd-serve exited non-zero after SIGTERM" >&2; exit 1; }
trap - EXIT
rm -f "$port_file"
load=$(cut -d' ' -f1-3 /proc/loadavg)
results+=("{\"offline\": $offline, \"startup\": $startup, \"lone\": $lone, \"c1\": $c1, \"c64\": $c64, \"c8x32\": $c8, \"open\": $open, \"loadavg\": \"$load\"}")
summary=$(python3 -c '
import json, sys
r = json.loads(sys.argv[1])
print("64x1 %.0f/s, open p99 %.2f ms, lone +%.3f ms" % (r["c64"]["texts_per_s"], r["open"]["p99_ms"], r["lone"]["added_p50_ms"]))' "${results[-1]}")
echo "   round $rep: $summary (load $load)" >&2
done

python3 - "${results[@]}" <<'PY'
import json, statistics, sys
runs = [json.loads(a) for a in sys.argv[1:]]
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
def med(f):
    return statistics.median(f(r) for r in runs)
off = med(lambda r: find(r["offline"], "texts_per_s", "throughput_texts_per_s", "texts_per_sec"))
c64 = med(lambda r: r["c64"]["texts_per_s"])
r64 = med(lambda r: r["c64"]["texts_per_s"] / find(r["offline"], "texts_per_s", "throughput_texts_per_s", "texts_per_sec"))
r8 = med(lambda r: r["c8x32"]["texts_per_s"] / find(r["offline"], "texts_per_s", "throughput_texts_per_s", "texts_per_sec"))
c8 = med(lambda r: r["c8x32"]["texts_per_s"])
rate = med(lambda r: r["open"]["rate"])
op50 = med(lambda r: r["open"]["p50_ms"])
op99 = med(lambda r: r["open"]["p99_ms"])
lone_http = med(lambda r: r["lone"]["http_p50_ms"])
lone_in = med(lambda r: r["lone"]["inprocess_p50_ms"])
added = med(lambda r: r["lone"]["added_p50_ms"])
ratio99 = med(lambda r: r["open"]["p99_ms"] / r["lone"]["http_p50_ms"])
l1p50 = med(lambda r: r["c1"]["p50_ms"])
l1p99 = med(lambda r: r["c1"]["p99_ms"])
ratio99c = med(lambda r: r["open"]["p99_ms"] / r["c1"]["p99_ms"])
start = med(lambda r: r["startup"]["startup_to_first_answer_ms"])
tok = runs[0]["lone"]["text_tokens"]
def goal(ok):
    return "met" if ok else "NOT MET"
print(f"embd serve vs embd bench, median of {len(runs)} rounds, threads {runs[0]['lone']['threads']}")
print(f"{'':50} {'value':>12} {'goal':>10}  result")
print(f"{'offline embd bench (batch 32), texts/s':50} {off:12.1f}")
print(f"{'64 clients x 1 text (closed loop), texts/s':50} {c64:12.1f}")
print(f"{'  ratio to offline':50} {r64:12.1%} {'>= 90%':>10}  {goal(r64 >= 0.9)}")
print(f"{'8 clients x 32 texts, texts/s':50} {c8:12.1f}")
print(f"{'  ratio to offline':50} {r8:12.1%}")
print(f"{f'open loop at {rate:.0f} req/s (half of 64 x 1): p50 ms':50} {op50:12.2f}")
print(f"{'  p99 ms':50} {op99:12.2f}")
print(f"{'  p99 / lone request over HTTP (p50)':50} {ratio99:11.2f}x {'<= 2x':>10}  {goal(ratio99 <= 2)}")
print(f"{'  lone client over the same corpus texts: p50 ms':50} {l1p50:12.2f}")
print(f"{'  p99 ms':50} {l1p99:12.2f}")
print(f"{'  open-loop p99 / lone-client p99, same texts':50} {ratio99c:11.2f}x {'<= 2x':>10}  {goal(ratio99c <= 2)}")
print(f"{f'lone request, {tok} tokens, in-process p50 ms':50} {lone_in:12.3f}")
print(f"{'  over HTTP p50 ms':50} {lone_http:12.3f}")
print(f"{'  added by the server ms':50} {added:12.3f} {'<= 0.3':>10}  {goal(added <= 0.3)}")
print(f"{'start-up to first answered request ms':50} {start:12.1f} {'< 100':>10}  {goal(start < 100)}")
print("load average (1/5/15 min) after each round: " + "; ".join(r["loadavg"] for r in runs))
with open("bench/out/serve.json", "w") as fh:
    json.dump(runs, fh, indent=1)
PY
