#!/usr/bin/env bash
# Prepares everything bench/bench.py needs, idempotently (quick when already done):
#   bench/.venv          pinned onnxruntime, onnx, numpy, tokenizers, safetensors, sympy
#                        (bench/requirements.txt; recreated when that file changes)
#   models/              all-MiniLM-L6-v2 (.weights and the HF folder) via scripts/fetch_model.sh
#   target/release/embd  our CLI
#   bench/out/*.onnx     the ONNX model built from the safetensors weights and its
#                        ORT-fused version (rebuilt when export_onnx.py or the pins change)
# Needs python3 with pip (and venv) and cargo. bench/.venv and bench/out are gitignored.
set -euo pipefail
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

# 2. Our binary and the model (fetch_model.sh does nothing when the model verifies).
cargo build --release --quiet --bin embd
EMBD_BIN="$root/target/release/embd" scripts/fetch_model.sh

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
