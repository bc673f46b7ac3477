#!/usr/bin/env bash
# Prepares everything bench/bench.py needs, idempotently (quick when already done):
#   bench/.venv          pinned onnxruntime, onnx, numpy, tokenizers, safetensors, sympy
#                        (bench/requirements.txt; recreated when that file changes)
#   models/              all-MiniLM-L6-v2 (.weights and the HF folder) via scripts/fetch_model.sh
#   target/release/embd  our CLI
#   bench/out/*.onnx     the ONNX model built from the safetensors weights and its
#                        ORT-fused version (rebuilt when export_onnx.py or the pins change)
# With --peers, also (for the timing run; --check does not need them):
#   bench/.venv          + openvino, nncf, ctranslate2 (bench/requirements-peers.txt, pinned;
#                        ~570 MB more, ~20 s; reinstalled when that file changes)
#   bench/out/ov/, ct2-*/, minilm.opt.int8.onnx   the peers' models (prepare_peers.py,
#                        ~1 min; rebuilt when the scripts, the pins or the weights change)
# With --torch, also (bench/rerank.py --torch, bench/rerank_precision.py; opt-in, not CI):
#   bench/.venv-torch    its own venv: requirements.txt + requirements-torch.txt (pinned torch
#                        2.15.0, transformers 5.24.0, sentence-transformers 6.2.0 and the
#                        CUDA wheels PyPI's torch imports; ~5.5 GB, ~2 min; recreated when
#                        either file changes)
#   models/minilm-reranker-hf, *.weights   scripts/fetch_reranker.sh
# With --modernbert (implies --torch; bench/modernbert.py; opt-in, not CI):
#   bench/.venv-torch    + openvino, nncf, onnxscript (bench/requirements-modernbert.txt, pinned,
#                        with the torch venv's pins as constraints; reinstalled when it changes)
#   bench/.cache/modernbert-{tiny,base}/   `modernbert.py prepare`: the random-weight
#                        ModernBERT-base folder, its ONNX / int8 / OpenVINO models, the
#                        reference vectors (rebuilt when a fixture's definition, PREPARE_VERSION
#                        in modernbert.py, or the pins change)
# With --splade (implies --torch; bench/splade.py; opt-in, not CI):
#   bench/.cache/splade-minilm/, bench/.cache/bgem3-base/   `splade.py prepare`: the SPLADE
#                        folder (all-MiniLM-L6-v2's BERT + a random MLM head), its ONNX / fused /
#                        int8 models and reference vectors, the random BGE-M3 base folder
#                        (rebuilt when PREPARE_VERSION in splade.py or the pins change); no
#                        package beyond the torch venv's, no reranker download
# With --decoders (implies --torch and the --modernbert packages; bench/decoders.py;
#   opt-in, not CI):
#   bench/.venv-torch    + sentencepiece, diskcache and llama-cpp-python built from its PyPI
#                        source distribution (bench/requirements-decoders.txt; CMake, nice -n 19,
#                        CMAKE_BUILD_PARALLEL_LEVEL=2, ~25-40 min on 2 busy cores; reinstalled
#                        when that file changes)
#   bench/.cache/llama-cpp-python/   the sdist and its unpacked tree (vendor/llama.cpp:
#                        convert_hf_to_gguf.py and gguf-py, which decoders.py runs)
#   bench/.cache/{qwen3-embedding-0.6b-shape,embeddinggemma-300m-shape,
#                qwen3-reranker-0.6b-shape}/   `decoders.py prepare` (the fixtures, their
#                        ONNX / GGUF models; ~9 GB, ~15 min; rebuilt when their keys change)
# With --nomic (implies --torch and the --modernbert packages; bench/modernbert.py --model nomic;
#   opt-in, not CI):
#   bench/.cache/nomic-embed-tiny/, bench/.cache/nomic-embed-v1.5-shape/   `modernbert.py prepare
#                        --model nomic-tiny|nomic`: the shared tiny NomicBERT folder in the native
#                        layout, the random-weight nomic-embed-text-v1.5-shape folder, their ONNX /
#                        int8 / OpenVINO models and reference vectors (keyed as ModernBERT's)
# With --static (bench/static.py; opt-in, not CI):
#   bench/.venv          + model2vec (bench/requirements-static.txt, pinned, with requirements.txt
#                        as constraints; reinstalled when it changes)
#   bench/.cache/potion-base-8m-shape/   `static.py prepare`: a random-weight potion-base-8M-sized
#                        model2vec folder (rebuilt when its definition or the pins change)
# With --mpnet, also (bench/mpnet.py): all-mpnet-base-v2 via scripts/fetch_mpnet.sh and
#   bench/out/mpnet.onnx (export_onnx.py; rebuilt when it, the pins or the weights change)
# Needs python3 with pip (and venv) and cargo. bench/.venv and bench/out are gitignored.
set -euo pipefail
peers=0
mpnet=0
torch=0
modernbert=0
splade=0
decoders=0
nomic=0
static=0
for a in "$@"; do
  case "$a" in
    --peers) peers=1 ;;
    --mpnet) mpnet=1 ;;
    --torch) torch=1 ;;
    --modernbert) modernbert=1; torch=1 ;;
    --splade) splade=1; torch=1 ;;
    --decoders) decoders=1; torch=1 ;;
    --nomic) nomic=1; torch=1 ;;
    --static) static=1 ;;
    *) echo "bench/setup.sh: unknown argument $a (--peers, --mpnet, --torch, --modernbert, --splade, --decoders, --nomic, --static)" >&2; exit 2 ;;
  esac
done
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
venv=bench/.venv
out=bench/out

# 1. The virtualenv, keyed by the hash of the requirements.
req_hash=$(sha256sum bench/requirements.txt | cut -d' ' -f1)
if [ ! -x "$venv/bin/python" ] || [ "$(cat "$venv/.requirements.sha256" 2>/dev/null)" != "$req_hash" ]; then
  echo "bench/setup.sh: creating $venv ..." >&2
  rm -rf "$venv"
  if ! python3 -m venv "$venv" 2>/dev/null; then
    # Debian/Ubuntu ship venv separately.
    if command -v apt-get >/dev/null; then
      if [ "$(id -u)" = 0 ]; then sudo=""; else sudo="sudo"; fi
      $sudo apt-get update -qq
      DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq python3-venv >/dev/null
    fi
    rm -rf "$venv"
    python3 -m venv "$venv"
  fi
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r bench/requirements.txt
  echo "$req_hash" > "$venv/.requirements.sha256"
fi
# extras VENV STAMP REQUIREMENTS WHAT CONSTRAINTS...: pip install -r REQUIREMENTS into VENV
# with CONSTRAINTS (the pins already there, which must not move), again when any of those
# files changes (keyed in VENV/.STAMP.sha256).
extras() {
  local v=$1 stamp=$2 req=$3 what=$4 hash c
  shift 4
  local cons=()
  hash=$(cat "$@" "$req" | sha256sum | cut -d' ' -f1)
  if [ "$(cat "$v/.$stamp.sha256" 2>/dev/null)" != "$hash" ]; then
    echo "bench/setup.sh: installing $what ($req) into $v ..." >&2
    for c in "$@"; do cons+=(-c "$c"); done
    "$v/bin/python" -m pip install --quiet --disable-pip-version-check -r "$req" "${cons[@]}"
    echo "$hash" > "$v/.$stamp.sha256"
  fi
}
if [ "$peers" = 1 ]; then
  extras "$venv" peers bench/requirements-peers.txt "the peers" bench/requirements.txt
fi
if [ "$static" = 1 ]; then
  extras "$venv" static bench/requirements-static.txt model2vec bench/requirements.txt
fi

# 1a. The torch venv, keyed by the hash of both requirement files.
if [ "$torch" = 1 ]; then
  tvenv=bench/.venv-torch
  torch_hash=$(cat bench/requirements.txt bench/requirements-torch.txt | sha256sum | cut -d' ' -f1)
  if [ ! -x "$tvenv/bin/python" ] || [ "$(cat "$tvenv/.requirements.sha256" 2>/dev/null)" != "$torch_hash" ]; then
    echo "bench/setup.sh: creating $tvenv (torch, ~5.5 GB, ~2 min) ..." >&2
    rm -rf "$tvenv"
    python3 -m venv "$tvenv"
    "$tvenv/bin/python" -m pip install --quiet --disable-pip-version-check \
      -r bench/requirements.txt -r bench/requirements-torch.txt
    echo "$torch_hash" > "$tvenv/.requirements.sha256"
  fi
  if [ "$modernbert" = 1 ] || [ "$decoders" = 1 ] || [ "$nomic" = 1 ]; then
    extras "$tvenv" modernbert bench/requirements-modernbert.txt "OpenVINO, NNCF, onnxscript" \
      bench/requirements.txt bench/requirements-torch.txt
  fi
  if [ "$decoders" = 1 ]; then
    dec_hash=$(cat bench/requirements.txt bench/requirements-torch.txt bench/requirements-modernbert.txt \
               bench/requirements-decoders.txt | sha256sum | cut -d' ' -f1)
    if [ "$(cat "$tvenv/.decoders.sha256" 2>/dev/null)" != "$dec_hash" ]; then
      llama_pin=$(grep -E '^llama-cpp-python==' bench/requirements-decoders.txt)
      llama_ver=${llama_pin#llama-cpp-python==}
      sdist_dir=bench/.cache/llama-cpp-python
      sdist="$sdist_dir/llama_cpp_python-$llama_ver.tar.gz"
      mkdir -p "$sdist_dir"
      if [ ! -f "$sdist" ]; then
        echo "bench/setup.sh: downloading the llama-cpp-python $llama_ver sdist ..." >&2
        "$tvenv/bin/python" -m pip download --quiet --disable-pip-version-check \
          --no-binary :all: --no-deps -d "$sdist_dir" "$llama_pin"
      fi
      rm -rf "$sdist_dir/llama_cpp_python-$llama_ver"
      tar xzf "$sdist" -C "$sdist_dir"
      echo "bench/setup.sh: building llama-cpp-python $llama_ver from source (llama.cpp, CMake;" \
           "~25-40 min on 2 busy cores) ..." >&2
      # the library only (no llava/mtmd, tools, examples, tests: llama-cpp-python's embed
      # path needs none of them); GGML_NATIVE stays on (its default): -march=native
      grep -v -E '^llama-cpp-python==' bench/requirements-decoders.txt > "$sdist_dir/deps.txt"
      "$tvenv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$sdist_dir/deps.txt" \
        -c bench/requirements.txt -c bench/requirements-torch.txt -c bench/requirements-modernbert.txt
      CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-2} \
      CMAKE_ARGS="-DLLAVA_BUILD=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_SERVER=OFF" \
        nice -n 19 "$tvenv/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps \
        --no-binary llama-cpp-python "$sdist"
      echo "$dec_hash" > "$tvenv/.decoders.sha256"
    fi
  fi
fi

# 2. Our binary and the model (fetch_model.sh does nothing when the model verifies).
cargo build --release --quiet --bin embd
# The rerankers' timing (rerank.py, decoders.py) calls ours through the Python binding,
# which loads target/release/libembedder.so: a fresh clone has none until the library is built.
if [ "$torch" = 1 ]; then cargo build --release --quiet --lib; fi
EMBD_BIN="$root/target/release/embd" scripts/fetch_model.sh
if [ "$torch" = 1 ] && [ "$modernbert" = 0 ] && [ "$splade" = 0 ] && [ "$decoders" = 0 ] \
   && [ "$nomic" = 0 ]; then
  EMBD_BIN="$root/target/release/embd" scripts/fetch_reranker.sh
fi

# 3. The ONNX models, keyed by the exporter, the pins and the weights.
mkdir -p "$out"
onnx_key=$(cat bench/export_onnx.py bench/requirements.txt | sha256sum | cut -d' ' -f1)
onnx_key="$onnx_key $(stat -c '%s %Y' models/all-MiniLM-L6-v2-hf/model.safetensors)"
if [ ! -f "$out/minilm.onnx" ] || [ ! -f "$out/minilm.opt.onnx" ] \
   || [ "$(cat "$out/.onnx.key" 2>/dev/null)" != "$onnx_key" ]; then
  echo "bench/setup.sh: building the ONNX models ..." >&2
  "$venv/bin/python" bench/export_onnx.py models/all-MiniLM-L6-v2-hf "$out"
  echo "$onnx_key" > "$out/.onnx.key"
fi

# 3a. MPNet: the model and its ONNX graph.
if [ "$mpnet" = 1 ]; then
  EMBD_BIN="$root/target/release/embd" scripts/fetch_mpnet.sh
  mpnet_key=$(cat bench/export_onnx.py bench/requirements.txt | sha256sum | cut -d' ' -f1)
  mpnet_key="$mpnet_key $(stat -c '%s %Y' models/all-mpnet-base-v2-hf/model.safetensors)"
  if [ ! -f "$out/mpnet.onnx" ] || [ "$(cat "$out/.mpnet.key" 2>/dev/null)" != "$mpnet_key" ]; then
    echo "bench/setup.sh: building the MPNet ONNX model ..." >&2
    "$venv/bin/python" bench/export_onnx.py models/all-mpnet-base-v2-hf "$out"
    echo "$mpnet_key" > "$out/.mpnet.key"
  fi
fi

# 3c. ModernBERT: the random-weight folders and their peers' models (idempotent: each
#     folder keeps a key of its definition and the pins; `modernbert.py run --model M`
#     prepares the other fixtures, qwen3 and gemma, on first use).
if [ "$modernbert" = 1 ]; then
  bench/.venv-torch/bin/python bench/modernbert.py prepare --model tiny
  bench/.venv-torch/bin/python bench/modernbert.py prepare --model base
fi

# 3f. NomicBERT: the shared tiny folder in the native layout and the random-weight
#     nomic-embed-text-v1.5-shape folder, with their peers' models (idempotent, keyed).
if [ "$nomic" = 1 ]; then
  bench/.venv-torch/bin/python bench/modernbert.py prepare --model nomic-tiny
  bench/.venv-torch/bin/python bench/modernbert.py prepare --model nomic
fi

# 3g. The static model2vec folder (idempotent, keyed).
if [ "$static" = 1 ]; then
  "$venv/bin/python" bench/static.py prepare
fi

# 3e. The decoder fixtures (Qwen3-Embedding, EmbeddingGemma, Qwen3-Reranker shapes) and their
#     ONNX / GGUF / .weights models (idempotent, keyed; `decoders.py prepare`).
if [ "$decoders" = 1 ]; then
  EMBD_BIN="${EMBD_BIN:-$root/target/release/embd}" nice -n 19 bench/.venv-torch/bin/python bench/decoders.py prepare
fi

# 3d. SPLADE and BGE-M3: the fixtures and the peers' models (idempotent, keyed as above).
if [ "$splade" = 1 ]; then
  EMBD_BIN="$root/target/release/embd" bench/.venv-torch/bin/python bench/splade.py prepare
fi

# 3b. The peers' models, keyed by their scripts, the pins, the ONNX export and the corpus
#     (NNCF calibrates on corpus texts).
if [ "$peers" = 1 ]; then
  corpus=""
  for d in "${EMBD_SHARED_DIR:-}" "$root/../shared" "$root/../../shared"; do
    if [ -n "$d" ] && [ -f "$d/bench/corpus.txt" ]; then corpus="$d/bench/corpus.txt"; break; fi
  done
  [ -n "$corpus" ] || { echo "bench/setup.sh: cannot find shared/bench/corpus.txt (set EMBD_SHARED_DIR)" >&2; exit 1; }
  peers_key=$(cat bench/prepare_peers.py bench/convert_ct2.py bench/requirements.txt bench/requirements-peers.txt \
              "$corpus" | sha256sum | cut -d' ' -f1)
  peers_key="$peers_key $onnx_key"
  if [ ! -f "$out/ov/int8.xml" ] || [ ! -f "$out/ct2-int8/model.bin" ] || [ ! -f "$out/minilm.opt.int8.onnx" ] \
     || [ "$(cat "$out/.peers.key" 2>/dev/null)" != "$peers_key" ]; then
    echo "bench/setup.sh: building the peers' models ..." >&2
    "$venv/bin/python" bench/prepare_peers.py models/all-MiniLM-L6-v2-hf "$out" "$corpus"
    echo "$peers_key" > "$out/.peers.key"
  fi
fi

# 4. The model in the page cache as a reader leaves it, not as the converter left it:
#    pages written by `embd convert` sit in the cache as 4 KiB pages, while a file read
#    from disk is cached in large folios (a user's model file, read after a reboot).
#    Mapping all 87 MB takes ~9 ms in the first state and ~2 ms in the second, which is
#    what the open-time measurement sees with CRC verification. So: write back, drop
#    the written pages (clean pages only; nothing is lost) and read the file once.
for f in models/all-MiniLM-L6-v2.weights; do
  python3 -c 'import os, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
os.fsync(fd)
os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
os.close(fd)' "$f"
  cat "$f" > /dev/null
done
