#!/usr/bin/env bash
# Runs the benchmark (or, with --check, the correctness check CI runs) after
# bench/setup.sh. Arguments go to bench/bench.py:
#   bench/run.sh --check           ORT vs ours vs reference, no timing (CI)
#   bench/run.sh [--rounds N]      the timing run; table + bench/out/results.json
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
"$root/bench/setup.sh"
exec "$root/bench/.venv/bin/python" "$root/bench/bench.py" "$@"
