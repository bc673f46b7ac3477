#!/usr/bin/env bash
# Runs the benchmark (or, with --check, the correctness check CI runs) after
# bench/setup.sh. Arguments go to bench/bench.py:
#   bench/run.sh --check           ORT vs ours vs reference, no timing (CI)
#   bench/run.sh [--rounds N]      the timing run, peers included; table + bench/out/results.json
#   bench/run.sh --isa avx2 [...]  the same with every engine that can be capped capped to AVX2 (not ORT);
#                                  on aarch64 --isa neon / dotprod (ours and CTranslate2 only)
#   bench/run.sh --peers none      the timing run without the peers (no OpenVINO/CT2 install)
#   bench/run.sh --check-peers     the peers' models vs the reference, no timing
#   bench/run.sh --mpnet [--rounds N] [--limit N] [--check]
#                                  bench/mpnet.py: ours on all-mpnet-base-v2 vs ours on MiniLM
#                                  (GFLOP/s) and ORT fp32 on MPNet, same run (no peers)
#   bench/run.sh --modernbert [--model base|tiny] [--rounds N] [--limit N] [--check] [--no-long]
#                                  bench/modernbert.py: a random-weight full-size ModernBERT-base,
#                                  ours vs ORT fp32/int8, OpenVINO fp32/NNCF int8 and
#                                  sentence-transformers (torch), and one 8,192-token text
#   bench/run.sh --nomic [--model nomic|nomic-tiny] [--rounds N] [--limit N] [--check]
#                                  bench/modernbert.py --model nomic: a random-weight full-size
#                                  nomic-embed-text-v1.5, the same engines as --modernbert
#   bench/run.sh --static [--rounds N] [--passes N] [--limit N] [--check]
#                                  bench/static.py: a random-weight potion-base-8M-sized model2vec
#                                  folder, ours vs model2vec's StaticModel.encode
#   bench/run.sh --splade [--rounds N] [--limit N] [--threads 1,2] [--peers ort,st] [--check]
#                                  bench/splade.py: SPLADE (all-MiniLM-L6-v2 + random MLM head),
#                                  ours `--emit sparse` vs ORT fp32/int8 and sentence-transformers'
#                                  SparseEncoder; BGE-M3 base: dense vs dense+sparse+multi-vector
#   bench/run.sh --decoders [--model qwen3|gemma|reranker|all] [--rounds N] [--limit N]
#                [--threads 1,2] [--peers llama,st,ort,ce,stbf16] [--latency-runs N]
#                                  bench/decoders.py: random-weight full-size Qwen3-Embedding-0.6B,
#                                  EmbeddingGemma-300m and Qwen3-Reranker-0.6B, ours f32/bf16/int8
#                                  vs llama.cpp (llama-cpp-python built from its sdist; F32, BF16,
#                                  F16, Q8_0 GGUFs by its converter), sentence-transformers
#                                  (torch) and ORT fp32/int8; a 20-token query's latency; rerank
#                                  1 query x 100 passages vs CrossEncoder and llama.cpp's rank pooling
# --check sets up without the peers (setup.sh); every other run with them (setup.sh --peers)
# unless --peers none.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
setup_args=(--peers)
prev=""
for a in "$@"; do
  case "$a" in
    --check|--help|-h|--peers=none) setup_args=() ;;
  esac
  if [ "$prev" = "--peers" ] && [ "$a" = none ]; then setup_args=(); fi
  prev="$a"
done
if [ "${1:-}" = --mpnet ]; then
  shift
  "$root/bench/setup.sh" --mpnet
  exec "$root/bench/.venv/bin/python" "$root/bench/mpnet.py" "$@"
fi
if [ "${1:-}" = --modernbert ]; then
  shift
  "$root/bench/setup.sh" --modernbert
  exec "$root/bench/.venv-torch/bin/python" "$root/bench/modernbert.py" run "$@"
fi
if [ "${1:-}" = --nomic ]; then
  shift
  "$root/bench/setup.sh" --nomic
  exec "$root/bench/.venv-torch/bin/python" "$root/bench/modernbert.py" run --model nomic "$@"
fi
if [ "${1:-}" = --static ]; then
  shift
  "$root/bench/setup.sh" --static
  exec "$root/bench/.venv/bin/python" "$root/bench/static.py" run "$@"
fi
if [ "${1:-}" = --splade ]; then
  shift
  "$root/bench/setup.sh" --splade
  exec "$root/bench/.venv-torch/bin/python" "$root/bench/splade.py" run "$@"
fi
if [ "${1:-}" = --decoders ]; then
  shift
  "$root/bench/setup.sh" --decoders
  exec "$root/bench/.venv-torch/bin/python" "$root/bench/decoders.py" run "$@"
fi
"$root/bench/setup.sh" "${setup_args[@]+"${setup_args[@]}"}"
exec "$root/bench/.venv/bin/python" "$root/bench/bench.py" "$@"
