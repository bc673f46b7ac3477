#!/usr/bin/env bash
# Configures, builds and runs the C/C++ tests of the embedder C API with ctest:
#   1. ASan + UBSan build of the C tests (EMBEDDER_SANITIZE=ON), all tests;
#   2. the same tests under valgrind (plain build), zero errors and zero
#      definite/indirect leaks required.
# Usage: c_tests/run.sh [--no-asan] [--no-valgrind | --valgrind-full] [-- extra ctest args]
#   By default the valgrind pass runs the tests that need no model (the
#   inference tests take minutes each under valgrind); --valgrind-full runs
#   them all (about 15-30 minutes on 2 cores).
# Env:   BUILD_ROOT (default: build-ctest), CARGO_TARGET_DIR (shared with cargo
#        by default so the crate is not rebuilt from scratch), EMBEDDER_TEST_MODEL,
#        EMBD_SHARED_DIR (reference data, default <repo>/../shared), EMBD_BIN (the
#        embd that converts the family models; default: cargo build --release --bin embd).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_ROOT="${BUILD_ROOT:-$ROOT/build-ctest}"
TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target}"
MODEL="${EMBEDDER_TEST_MODEL:-$ROOT/models/all-MiniLM-L6-v2.weights}"
JOBS="${JOBS:-2}"
asan=1
valgrind=1
ctest_args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --no-valgrind) valgrind=0 ;;
    --valgrind-full) valgrind=2 ;;
    --no-asan) asan=0 ;;
    --) shift; ctest_args=("$@"); break ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
  shift
done

if [ ! -f "$MODEL" ]; then
  echo "note: $MODEL not found; the model tests (label 'model') will fail" >&2
fi

# test_families.c: every model of tests/data/families.tsv converted by embd; every
# line of its sentence-transformers reference and of its tokenizer case file as
# expected values (c_tests/families_expected.py).
SHARED="${EMBD_SHARED_DIR:-$ROOT/../shared}"
FAMILIES="$BUILD_ROOT/families"
if [ -d "$SHARED/reference/families" ]; then
  if [ -z "${EMBD_BIN:-}" ]; then
    (cd "$ROOT" && CARGO_TARGET_DIR="$TARGET_DIR" cargo build --release --quiet --bin embd)
    EMBD_BIN="$TARGET_DIR/release/embd"
  fi
  python3 "$ROOT/c_tests/families_expected.py" "$ROOT/tests/data/families.tsv" "$SHARED" \
    "$EMBD_BIN" "$FAMILIES"
else
  echo "note: $SHARED/reference/families not found; the families test will fail" >&2
fi

common=(-DEMBEDDER_BUILD_TESTS=ON "-DEMBEDDER_TEST_FAMILIES_DIR=$FAMILIES" -DEMBEDDER_TEST_PANIC=ON
        "-DEMBEDDER_CARGO_TARGET_DIR=$TARGET_DIR" "-DEMBEDDER_TEST_MODEL=$MODEL"
        -DCMAKE_BUILD_TYPE=Debug)
status=0

if [ "$asan" = 1 ]; then
  echo "== ASan + UBSan =="
  cmake -S "$ROOT" -B "$BUILD_ROOT/asan" "${common[@]}" -DEMBEDDER_SANITIZE=ON
  cmake --build "$BUILD_ROOT/asan" -j "$JOBS"
  # Rust's allocations are not instrumented, but the C side is; leaks of
  # library-owned memory still show up through LeakSanitizer's malloc hooks.
  ASAN_OPTIONS="detect_leaks=1:abort_on_error=0" UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1" \
    ctest --test-dir "$BUILD_ROOT/asan" --output-on-failure -j "$JOBS" "${ctest_args[@]}" || status=1
fi

if [ "$valgrind" != 0 ]; then
  if command -v valgrind >/dev/null; then
    echo "== valgrind =="
    cmake -S "$ROOT" -B "$BUILD_ROOT/valgrind" "${common[@]}" -DEMBEDDER_SANITIZE=OFF \
      "-DEMBEDDER_TEST_LAUNCHER=valgrind;--error-exitcode=1;--leak-check=full;--errors-for-leak-kinds=definite,indirect;--show-leak-kinds=definite,indirect;--suppressions=$ROOT/c_tests/valgrind.supp;--quiet"
    cmake --build "$BUILD_ROOT/valgrind" -j "$JOBS"
    # the install test runs compilers, not our code: skip it under valgrind
    exclude='install'
    [ "$valgrind" = 1 ] && exclude='install|model'
    EMBD_TEST_ROUNDS=1 ctest --test-dir "$BUILD_ROOT/valgrind" --output-on-failure -j "$JOBS" -LE "$exclude" \
      --timeout 3600 "${ctest_args[@]}" || status=1
  else
    echo "valgrind not installed: skipping the valgrind pass" >&2
  fi
fi
exit $status
