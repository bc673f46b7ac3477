#!/usr/bin/env bash
# Creates (idempotently) the virtual environment of the hub tests in
# scripts/hub/.venv (git-ignored) from requirements.txt. Prints its python.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
VENV="${EMBD_HUB_VENV:-$HERE/.venv}"
REQS="$HERE/requirements.txt"
stamp="$VENV/.requirements.sha256"
want="$(sha256sum "$REQS" | cut -d' ' -f1)"
if [ ! -x "$VENV/bin/python" ]; then
  python3 -m venv "$VENV" >&2 || {
    apt-get install -y python3-venv >&2
    python3 -m venv "$VENV" >&2
  }
fi
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -r "$REQS" >&2
  echo "$want" > "$stamp"
fi
echo "$VENV/bin/python"
