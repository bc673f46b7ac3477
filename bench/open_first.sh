#!/usr/bin/env bash
# Open + first embedding and peak RSS of model files (packed
# bf16/int8 files among them). For each file: read it once (page cache warm), then
#   - `embd bench` (one 8-word text): open and open+first-embedding times, with
#     the CRCs checked (the default) and without;
#   - `/usr/bin/time embd encode` of that text: wall time and peak RSS of a
#     whole process.
#   bench/open_first.sh FILE...        (THREADS=2 by default)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
embd="${EMBD:-$root/target/release/embd}"
threads="${THREADS:-2}"
text="$(mktemp)"
trap 'rm -f "$text"' EXIT
echo "What is the capital of France?" > "$text"
for f in "$@"; do
  cat "$f" > /dev/null
  json=$("$embd" bench -m "$f" --input "$text" --limit 1 --rounds 1 --warmup 0 \
    --latency-runs 0 --threads "$threads" 2>/dev/null)
  times=$(python3 -c '
import json, sys
d = json.load(sys.stdin)
print("open %.0f ms, open+first %.0f ms (CRC checked); unchecked: open %.0f ms, open+first %.0f ms; %s"
      % (d["open_ms"], d["open_first_ms"], d["open_noverify_ms"], d["open_first_noverify_ms"], d["precision"]))
' <<< "$json")
  rss=$( { /usr/bin/time -f "%e s wall, peak RSS %M KB" "$embd" encode -m "$f" \
    --threads "$threads" < "$text" > /dev/null; } 2>&1 | tail -1)
  echo "$(basename "$f") ($(stat -c %s "$f") bytes): $times | encode process: $rss"
done
