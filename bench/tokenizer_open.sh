#!/usr/bin/env bash
# What a real-size XLM-R vocabulary (250,002 pieces, synthetic,
# stored in an EMBD file built from families/xlmr-tiny) costs to open and to hold.
# Prints the best-of-N time of `model::tokenizer::open` (page cache warm) and the
# heap held, counted by a counting global allocator (tests/it/vocab_250k.rs).
# Usage: bench/tokenizer_open.sh [ROUNDS]   (default 20)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
EMBD_OPEN_ROUNDS="${1:-20}" cargo test --release --quiet --test it vocab_250k::open_250k_report \
  -- --ignored --nocapture --test-threads=1 2>&1 | grep -E "^(250,002|heap)"
