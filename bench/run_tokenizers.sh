#!/usr/bin/env bash
# The tokenizer speed table: our Unigram and byte-level BPE tokenizers against
# HF `tokenizers` (the Rust library through its Python binding, pinned in
# bench/requirements.txt), one thread each, in one run. Converts the reference models
# that carry the tokenizers into bench/out/ (ignored) first.
# Usage: bench/run_tokenizers.sh [--rounds N]
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
shared="${EMBD_SHARED_DIR:-$root/../shared}"
bench/setup.sh >&2
embd="${EMBD_BIN:-$root/target/release/embd}"
mkdir -p bench/out/families
for m in bert-unigram-tiny roberta-bpe-tiny; do
  if [ ! -f "bench/out/families/$m.weights" ]; then
    "$embd" convert "$shared/reference/families/$m" -o "bench/out/families/$m.weights" >&2
  fi
done
exec bench/.venv/bin/python bench/tokenizer_speed.py "$embd" bench/out/families "$shared" "$@"
