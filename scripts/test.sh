#!/usr/bin/env bash
# The whole test suite, as CI runs it (.ci/run calls exactly this). Installs what it
# needs (cmake, the models (all-MiniLM-L6-v2, all-mpnet-base-v2), the Python reference tools for the benchmark check), idempotently.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
export EMBD_SHARED_DIR="${EMBD_SHARED_DIR:-$root/../shared}"
# Every build of the suite (cargo, and cargo under CMake and pip) without
# cross-crate LTO and line tables: the same code and the same bits (neither
# changes a float operation), and every link of the suite's many binaries
# shorter on 2 cores. A release build outside the suite keeps Cargo.toml's
# profile.
export CARGO_PROFILE_RELEASE_LTO="${CARGO_PROFILE_RELEASE_LTO:-false}"
export CARGO_PROFILE_RELEASE_DEBUG="${CARGO_PROFILE_RELEASE_DEBUG:-0}"
steps=0
# Each step's wall time, printed as it ends and again at the end.
times=() step_name="" step_t0=$SECONDS
step_done() {
  [ -n "$step_name" ] || return 0
  times+=("$(printf '%5d s  %s' $((SECONDS - step_t0)) "${step_name:0:90}")")
  printf '(%s: %d s)\n' "${step_name:0:60}" $((SECONDS - step_t0))
}
step() {
  step_done
  steps=$((steps + 1)) step_name="$*" step_t0=$SECONDS
  printf '\n==> %s\n' "$*"
}

step "tools"
scripts/install_deps.sh

step "model"
cargo build --release --quiet --bin embd
EMBD_BIN="$root/target/release/embd" scripts/fetch_model.sh
EMBD_BIN="$root/target/release/embd" scripts/fetch_mpnet.sh
EMBD_BIN="$root/target/release/embd" scripts/fetch_reranker.sh

step "format and lint"
cargo fmt --all --check
cargo clippy --release --all-targets -- -D warnings
cargo clippy --release -p embd-server --all-targets -- -D warnings
cargo clippy --release -p embd-pull --all-targets -- -D warnings

step "cargo doc (warnings are errors)"
RUSTDOCFLAGS="-D warnings" cargo doc --no-deps --quiet

step "cargo test (unit, integration, reference parity, header freshness)"
cargo test --release

step "aarch64: clippy, library tests under qemu-aarch64 (max; the row choice at cortex-a72, neoverse-n1), the same bits as x86-64 on the references, Apple targets' cargo check"
scripts/aarch64.sh

step "HTTP server: cargo test -p embd-server (routes vs reference, Ollama and Cohere embed APIs, API keys, batching, limits, bad input, request-body fuzz seeds and mutations, slow clients, SIGTERM)"
cargo test --release -p embd-server

step "HTTP server with real clients: openai SDK, huggingface_hub, requests, Ollama (ollama, langchain-ollama, llama-index), Cohere embed and LiteLLM, with and without API keys, HF tokenizers offsets, schemathesis, 64-client load"
server/clients/run.sh

step "models by name: embd pull and embd -m / embd serve -m against a loopback hub, with huggingface_hub (scripts/hub)"
cargo build --release --quiet -p embd-pull
EMBD_BIN="$root/target/release/embd" scripts/hub/run.sh

step "Python package: fresh venv, pip install ./python[dev,ray], ruff, mypy (python/ and bench/), pytest (incl. Ray)"
scripts/test_python.sh --fresh

step "output precision: bit-exact against sentence-transformers' quantize_embeddings (numpy venv)"
EMBD_BIN="$root/target/release/embd" scripts/quantize/parity.sh

step "C/C++ tests (CMake + ctest: ASan+UBSan, then valgrind)"
c_tests/run.sh

step "examples against the installed package: C/C++ (ctest, ASan, valgrind), Go (go test)"
examples/run_installed.sh

step "Swift package in a Debian 13 chroot (Debian's swiftlang): swift build, swift test, demo, added by URL"
scripts/test_swift.sh

if [ -x bench/run.sh ]; then
  step "benchmark check mode (outputs agree with ONNX Runtime; no timing)"
  bench/run.sh --check
  step "benchmark check mode, MPNet (the ONNX MPNet graph and ours vs mpnet_reference.jsonl; no timing)"
  bench/run.sh --mpnet --check
fi
# Every step above exits non-zero on failure (set -e), so reaching here means all passed.
step_done
printf '\n%s\n' "${times[@]}"
printf '\nsteps: %d passed, 0 failed in %d s\n' "$steps" "$SECONDS"
