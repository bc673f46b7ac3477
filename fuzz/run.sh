#!/usr/bin/env bash
# Runs fuzz targets one after the other (one worker each; the machine is shared).
#   fuzz/run.sh [RUNS] [TARGET...]     default: 1000000 runs, every target
# New corpus entries go to fuzz/target/corpus-work/<target>/ (not committed);
# the committed seeds in fuzz/corpus/<target>/ are read only. Crashes land in
# fuzz/artifacts/<target>/; copy each into tests/data/fuzz/<target>/ once fixed.
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${1:-1000000}
STATUS=0
# The hf_dir target writes a scratch folder per input: keep it in memory.
if [ -z "${EMBD_FUZZ_TMP:-}" ] && [ -d /dev/shm ]; then
  export EMBD_FUZZ_TMP=/dev/shm
fi
shift || true
TARGETS=("$@")
if [ ${#TARGETS[@]} -eq 0 ]; then
  TARGETS=(embd legacy finalfusion coreml_blob amb lwt container safetensors hf_dir tokenizer unigram_spec model_file bpe hf_tokenizer split torch_pt pair_template ollama_embed cohere_embed api_keys hub_answers)
fi
for t in "${TARGETS[@]}"; do
  mkdir -p "fuzz/target/corpus-work/$t" "fuzz/artifacts/$t"
  echo "== $t: $RUNS runs"
  cargo +nightly fuzz run "$t" "fuzz/target/corpus-work/$t" "fuzz/corpus/$t" -- \
    -runs="$RUNS" -workers=1 -jobs=1 -max_len=8192 -timeout=10 \
    -rss_limit_mb=2048 -malloc_limit_mb=256 -print_final_stats=1 \
    -artifact_prefix="fuzz/artifacts/$t/" || { echo "!! $t: crash, see fuzz/artifacts/$t/"; STATUS=1; }
done
exit $STATUS
