#!/usr/bin/env bash
# The main job on a fresh machine: build embd, fetch and convert all-MiniLM-L6-v2 if it
# is missing, then embed a few sentences and print their cosine similarities.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
cargo build --release --quiet --bin embd
EMBD_BIN="$root/target/release/embd" scripts/fetch_model.sh
exec target/release/embd similarity -m models/all-MiniLM-L6-v2.weights \
  "A man is playing a guitar." \
  "Someone plays an acoustic guitar on stage." \
  "The new movie is awesome." \
  "Le chat dort sur le canapé." \
  "A cat is sleeping on the sofa."
