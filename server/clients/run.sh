#!/usr/bin/env bash
# The server's client tests: builds embd-serve (release), creates the venv of
# real clients (setup_venv.sh, idempotent), runs test_clients.py,
# test_tokenize_offsets_pipelines.py and test_embed_api_clients.py (Ollama's
# and Cohere's clients, API keys) with pytest.
# Env: see test_clients.py (EMBD_SERVE_BIN, EMBD_TEST_MODEL, EMBD_SHARED_DIR,
# SCHEMATHESIS_EXAMPLES, LOAD_REQUESTS).
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
cd "$ROOT"
if [ -z "${EMBD_SERVE_BIN:-}" ]; then
  cargo build --release --quiet -p embd-server --bin embd-serve
fi
PY="$("$HERE/setup_venv.sh")"
if [ -z "${EMBD_BIN:-}" ]; then
  cargo build --release --quiet --bin embd  # converts the family models
fi
exec "$PY" -m pytest -q -p no:cacheprovider "$HERE/test_clients.py" \
  "$HERE/test_tokenize_offsets_pipelines.py" "$HERE/test_embed_api_clients.py" "$@"
