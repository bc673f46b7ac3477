#!/usr/bin/env bash
# The hub tests (test_hub.py): builds embd, embd-pull and embd-serve (release),
# creates the venv with huggingface_hub (setup_venv.sh, idempotent), runs pytest.
# Needs models/all-MiniLM-L6-v2-hf (scripts/fetch_model.sh).
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
cd "$ROOT"
if [ -z "${EMBD_BIN:-}" ]; then
  cargo build --release --quiet --bin embd
  cargo build --release --quiet -p embd-pull -p embd-server
fi
PY="$("$HERE/setup_venv.sh")"
exec "$PY" -m pytest -q -p no:cacheprovider "$HERE/test_hub.py" "$@"
