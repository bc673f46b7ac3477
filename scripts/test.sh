#!/usr/bin/env bash
# The whole test suite, as CI runs it (.ci/run calls exactly this). Installs what it
# needs (cmake, the model, the Python reference tools for the benchmark check), idempotently.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
export EMBD_SHARED_DIR="${EMBD_SHARED_DIR:-$root/../shared}"
step() { printf '\n==> %s\n' "$*"; }

step "tools"
scripts/install_deps.sh

step "model"
cargo build --release --quiet --bin embd
EMBD_BIN="$root/target/release/embd" scripts/fetch_model.sh

step "format and lint"
cargo fmt --check
cargo clippy --release --all-targets -- -D warnings

step "cargo test (unit, integration, reference parity, header freshness)"
cargo test --release

step "cargo doc (warnings are errors)"
RUSTDOCFLAGS="-D warnings" cargo doc --no-deps --quiet

if [ -x c_tests/run.sh ]; then
  step "C/C++ tests (CMake + ctest, valgrind)"
  c_tests/run.sh
fi

if [ -x examples/run_installed.sh ]; then
  step "examples against the installed package: C/C++ (ctest, valgrind), Go (go test via examples/go/run_tests.sh)"
  examples/run_installed.sh
elif [ -d examples/go ] && [ -f examples/go/go.mod ]; then
  step "Go binding (go test)"
  examples/go/run_tests.sh
fi

if [ -x bench/run.sh ]; then
  step "benchmark check mode (outputs agree with ONNX Runtime; no timing)"
  bench/run.sh --check
fi
step "all tests passed"
