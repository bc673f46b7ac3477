#!/usr/bin/env bash
# Rebuilds the reference cross-encoder minilm-reranker (a BertForSequenceClassification
# whose encoder is all-MiniLM-L6-v2) as models/minilm-reranker-hf/ and converts it to
# models/minilm-reranker.weights. Idempotent: does nothing when the converted file
# exists and verifies. Only the head ships with the shared reference data
# (families/minilm-reranker-head.safetensors); the encoder comes from the
# all-MiniLM-L6-v2 folder that scripts/fetch_model.sh fetches (run first if absent),
# joined by the reference's own assemble_minilm_reranker.py in a venv with numpy and
# safetensors (models/cache/venv-reranker/, ignored).
# Also converts the shared tiny random XLM-R cross-encoder (families/xlmr-reranker-tiny,
# Unigram tokenizer, RoBERTa head; local, nothing to fetch) to
# models/xlmr-reranker-tiny.weights, which the CLI, C, Go and Python tests read.
#
#   scripts/fetch_reranker.sh                         assemble + convert (f32)
#   EMBD_BIN=path/to/embd scripts/fetch_reranker.sh   use an already built embd
#   EMBD_SHARED_DIR=...                               the shared data (default ../shared)
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
models="$root/models"
shared="${EMBD_SHARED_DIR:-}"
if [ -z "$shared" ]; then
  shared="$root/../shared"
  [ -d "$shared/reference" ] || shared="$root/../../shared"
fi
fam="$shared/reference/families"
minilm="$models/all-MiniLM-L6-v2-hf"
hf="$models/minilm-reranker-hf"
out="$models/minilm-reranker.weights"
venv="$models/cache/venv-reranker"
sha="3a75ca4903854195671adb67297686f42b43e538681e805cf46dd80b89e2b499"

if [ ! -f "$fam/assemble_minilm_reranker.py" ]; then
  echo "error: $fam/assemble_minilm_reranker.py is absent (set EMBD_SHARED_DIR)" >&2
  exit 1
fi

embd="${EMBD_BIN:-}"
if [ -z "$embd" ]; then
  (cd "$root" && cargo build --release --quiet --bin embd)
  embd="$root/target/release/embd"
fi

mkdir -p "$models"
xlmr_out="$models/xlmr-reranker-tiny.weights"
if [ ! -f "$xlmr_out" ] || ! "$embd" verify "$xlmr_out" >/dev/null 2>&1 \
   || [ "$fam/xlmr-reranker-tiny/model.safetensors" -nt "$xlmr_out" ]; then
  echo "converting $fam/xlmr-reranker-tiny -> $xlmr_out ..." >&2
  "$embd" convert "$fam/xlmr-reranker-tiny" -o "$xlmr_out" --name xlmr-reranker-tiny
  "$embd" verify "$xlmr_out"
fi

# The shared tiny random cross-encoders of the architectures (ModernBERT with
# classifier_pooling mean; Qwen3-Reranker, an LLM scored on two tokens), for
# the same tests. Converted again when the converter is newer than the file.
# The decoder embedders' tiny references too (Qwen3-Embedding, EmbeddingGemma),
# for the server's tests, and the DeBERTa-v2 cross-encoder of encoders/.
for src in "$fam"/../architectures/{modernbert-reranker-tiny,qwen3-reranker-tiny,qwen3-embedding-tiny,embeddinggemma-tiny} \
           "$fam"/../encoders/deberta-reranker-tiny; do
  name=$(basename "$src")
  dst="$models/$name.weights"
  if [ -d "$src" ] && { [ ! -f "$dst" ] || ! "$embd" verify "$dst" >/dev/null 2>&1 \
     || [ "$src/model.safetensors" -nt "$dst" ] || [ "$embd" -nt "$dst" ]; }; then
    echo "converting $src -> $dst ..." >&2
    "$embd" convert "$src" -o "$dst" --name "$name"
    "$embd" verify "$dst"
  fi
done

if [ -f "$out" ] && "$embd" verify "$out" >/dev/null 2>&1; then
  exit 0
fi

if [ ! -f "$minilm/model.safetensors" ]; then
  EMBD_BIN="$embd" "$root/scripts/fetch_model.sh"
fi

if [ ! -f "$hf/model.safetensors" ] || ! echo "$sha  $hf/model.safetensors" | sha256sum -c --status; then
  if [ ! -x "$venv/bin/python" ]; then
    echo "creating $venv (numpy, safetensors) ..." >&2
    python3 -m venv "$venv"
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check numpy safetensors
  fi
  tmp=$(mktemp -d "$models/.fetch-reranker.XXXXXX")
  trap 'rm -rf "$tmp"' EXIT
  cp -r "$fam/minilm-reranker" "$tmp/minilm-reranker"
  "$venv/bin/python" "$fam/assemble_minilm_reranker.py" "$minilm" \
    "$fam/minilm-reranker-head.safetensors" "$tmp/minilm-reranker" >&2
  if ! echo "$sha  $tmp/minilm-reranker/model.safetensors" | sha256sum -c --status; then
    echo "error: the assembled model.safetensors does not have the expected sha256 $sha" >&2
    exit 1
  fi
  rm -rf "$hf"
  mv "$tmp/minilm-reranker" "$hf"
fi

echo "converting $hf -> $out ..." >&2
"$embd" convert "$hf" -o "$out" --name minilm-reranker
"$embd" verify "$out"
