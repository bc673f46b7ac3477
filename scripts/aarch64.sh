#!/usr/bin/env bash
# The aarch64 checks without ARM hardware: installs what they need (Rust's
# aarch64 targets, Debian's cross linker and qemu-user), idempotently, then
#   1. clippy -D warnings for aarch64-unknown-linux-gnu (every target);
#   2. the library's tests under qemu-aarch64: at max (+ i8mm, bf16) the
#      kernel tests (every row the CPU has against the portable oracle) and the
#      C boundary's, vector and quantization tests; at cortex-a72 (NEON only)
#      and neoverse-n1 (+ dot product) the row choice;
#   3. the model-level check: the reference texts embedded natively and on
#      aarch64, compared byte for byte: each kernel at the level that runs it
#      (int8 at all three), the portable row, f32, bf16 and int8 (MiniLM,
#      MPNet, the tiny XLM-R, BERT-Unigram, RoBERTa, ModernBERT, Qwen3 and
#      EmbeddingGemma references);
#   4. cargo check for aarch64-apple-darwin and aarch64-apple-ios.
#
#   scripts/aarch64.sh [--skip-models | --only-models]
# Needs models/ (scripts/fetch_model.sh, scripts/fetch_mpnet.sh) for step 3,
# and the native release `embd` (target/release/embd).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
shared="${EMBD_SHARED_DIR:-$root/../shared}"
models=1 checks=1
case "${1:-}" in
  --skip-models) models=0 ;;
  --only-models) checks=0 ;;
esac
target=aarch64-unknown-linux-gnu
sysroot=/usr/aarch64-linux-gnu
levels=(cortex-a72 neoverse-n1 max)

need=()
command -v aarch64-linux-gnu-gcc >/dev/null || need+=(gcc-aarch64-linux-gnu libc6-dev-arm64-cross)
command -v qemu-aarch64 >/dev/null || need+=(qemu-user)
if [ ${#need[@]} -gt 0 ]; then
  echo "installing: ${need[*]}" >&2
  if [ "$(id -u)" = 0 ]; then sudo=""; else sudo="sudo"; fi
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${need[@]}" >/dev/null
fi
installed=$(rustup target list --installed)
for t in $target aarch64-apple-darwin aarch64-apple-ios; do
  grep -qx "$t" <<<"$installed" || rustup target add "$t"
done

timed() { # label command...
  local t0=$SECONDS
  "${@:2}"
  echo "aarch64: $1 took $((SECONDS - t0)) s"
}

if [ "$checks" = 1 ]; then
echo "== clippy, $target"
timed clippy cargo clippy --profile cross --quiet --target $target --all-targets -- -D warnings

echo "== library tests under qemu-aarch64"
timed "test build" cargo test --profile cross --quiet --lib --target $target --no-run
cargo build --profile cross --quiet --bin embd --target $target
# At the highest level the kernel tests (they iterate every row the CPU has,
# so `max` runs the neon, dotprod and i8mm rows, each against the portable
# oracle) and the C boundary's tests (the target's C types: `char` is unsigned
# on aarch64); at the lower levels the row choice (`kernels::isa`: the rows a
# CPU without dot product or i8mm picks). The rest of the suite is
# target-independent Rust over the same kernels, which the model-level check
# below covers end to end, int8 at every level.
for cpu in "${levels[@]}"; do
  echo "-- -cpu $cpu"
  export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER="qemu-aarch64 -cpu $cpu -L $sysroot"
  filters=(kernels::isa::)
  [ "$cpu" = max ] && filters=(kernels:: capi:: vector:: quantize::)
  timed "tests at $cpu" cargo test --profile cross --quiet --lib --target $target -- "${filters[@]}"
done
unset CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER
else
  cargo build --profile cross --quiet --bin embd --target $target
fi

if [ "$models" = 1 ]; then
  echo "== the same bits natively and on aarch64"
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  # qemu runs the aarch64 binary about 50x slower than native: a sample of
  # each reference set (MiniLM's first lines and every 1000th corpus text;
  # every 8th line of the tiny models' sets, which spread their scripts and
  # lengths through the file: the full sets took 37 min of CI).
  python3 - "$shared" "$work" <<'PY'
import json, sys
shared, work = sys.argv[1], sys.argv[2]
def texts(p):
    return [json.loads(l)["text"] for l in open(p, encoding="utf-8") if l.strip()]
def write(name, ts):
    with open(f"{work}/{name}.jsonl", "w", encoding="utf-8") as out:
        for t in ts:
            out.write(json.dumps({"text": t}) + "\n")
corpus = [l.rstrip("\n") for l in open(f"{shared}/bench/corpus.txt", encoding="utf-8")]
write("ref", texts(f"{shared}/reference/minilm_reference.jsonl")[:6] + corpus[::1000])
write("short", texts(f"{shared}/reference/mpnet_reference.jsonl")[:2])
write("fam", texts(f"{shared}/reference/families/xlmr-tiny_reference.jsonl")[::8])
for name in ("modernbert-tiny", "qwen3-embedding-tiny", "embeddinggemma-tiny"):
    write(name, texts(f"{shared}/reference/architectures/{name}_reference.jsonl")[::8])
PY
  native="$root/target/release/embd"
  arm="$root/target/$target/cross/embd"
  same=0 differ=0
  # check MODEL INPUT LABEL PRECISION@ROW,ROW...: the native x86-64 output
  # against the aarch64 binary's at each ISA row (a qemu CPU level, or
  # `none`: the portable row).
  check() {
    local model=$1 input=$2 label=$3 spec p cpu rows
    shift 3
    for spec in "$@"; do
      p=${spec%@*}
      "$native" encode -m "$model" --threads 1 --precision "$p" --jsonl --input "$input" > "$work/x86.jsonl"
      rows=${spec#*@}
      for cpu in ${rows//,/ }; do
        if [ "$cpu" = none ]; then
          EMBD_SIMD=none qemu-aarch64 -cpu max -L $sysroot "$arm" encode -m "$model" --threads 1 \
            --precision "$p" --jsonl --input "$input" > "$work/arm.jsonl"
        else
          qemu-aarch64 -cpu "$cpu" -L $sysroot "$arm" encode -m "$model" --threads 1 \
            --precision "$p" --jsonl --input "$input" > "$work/arm.jsonl"
        fi
        if cmp -s "$work/x86.jsonl" "$work/arm.jsonl"; then
          same=$((same + 1))
          echo "same bits: $label $p $cpu ($(wc -l < "$work/arm.jsonl") texts)"
        else
          differ=$((differ + 1))
          echo "DIFFERENT: $label $p $cpu"
        fi
      done
    done
  }
  t0=$SECONDS
  # Which rows run what (src/kernels/arch/aarch64/mod.rs): f32 and bf16 run
  # the `neon` kernels at every level, int8 has a kernel per level (neon,
  # dotprod, i8mm). So f32 and bf16 are checked at `max`, int8 at all three;
  # the portable row (scalar code, the slowest under qemu) on the tiny models.
  check "$root/models/all-MiniLM-L6-v2.weights" "$work/ref.jsonl" all-MiniLM-L6-v2 \
    f32@max bf16@max int8@cortex-a72,neoverse-n1,max
  # (MPNet's int8 calibrates at open, minutes under qemu: its int8 products
  # run the same tiles as MiniLM's.)
  check "$root/models/all-mpnet-base-v2.weights" "$work/short.jsonl" all-mpnet-base-v2 f32@max bf16@max
  # The other architectures: their own paths (RoPE, SiLU and GELU variants
  # through libm, Unigram/BPE tokenizers) in every precision, and the
  # portable row in f32.
  for m in families/xlmr-tiny families/bert-unigram-tiny families/roberta-bpe-tiny \
    architectures/modernbert-tiny architectures/qwen3-embedding-tiny \
    architectures/embeddinggemma-tiny; do
    name=${m#*/}
    "$native" convert "$shared/reference/$m" -o "$work/$name.weights" >/dev/null
    input="$work/fam.jsonl"
    case $m in architectures/*) input="$work/$name.jsonl" ;; esac
    check "$work/$name.weights" "$input" "$name" f32@max,none bf16@max int8@max
  done
  echo "aarch64: model check took $((SECONDS - t0)) s: $same same, $differ different"
  [ "$differ" = 0 ]
fi

echo "== cargo check for the Apple targets"
for t in aarch64-apple-darwin aarch64-apple-ios; do
  timed "check $t" cargo check --profile cross --quiet --lib --target "$t"
done
