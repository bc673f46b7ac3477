#!/usr/bin/env bash
# End to end, from the source tree: build the library with CMake (which drives
# cargo), install it to a temporary prefix, then build and run the examples
# against the *installed* package only:
#   1. C and C++ examples: examples/CMakeLists.txt configured standalone with
#      find_package(embedder CONFIG REQUIRED) (CMAKE_PREFIX_PATH=<prefix>),
#      built with -Wall -Wextra -Werror, run by ctest (shared library), then a
#      all again with ASan + UBSan, a subset under valgrind, plus a
#      static-library build of the C example;
#   2. C with pkg-config only: cc embed_lines.c $(pkg-config --cflags --libs embedder);
#   3. Go: examples/go/run_tests.sh with EMBEDDER_PREFIX=<prefix> (#cgo pkg-config).
# Exits non-zero on any failure.
# Env: EMBD_MODEL (default <repo>/models/all-MiniLM-L6-v2.weights), BUILD_ROOT
# (default <repo>/build-examples), CARGO_TARGET_DIR (default <repo>/target, shared
# with cargo so the crate is not rebuilt), PREFIX (default: a temporary
# directory, removed at exit), JOBS (default 2), SKIP_GO=1 to skip step 3,
# VALGRIND=0 to skip the valgrind pass, VALGRIND=full to run the larger
# example tests under valgrind too (several minutes).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/.." && pwd)"
BUILD_ROOT="${BUILD_ROOT:-$ROOT/build-examples}"
TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target}"
MODEL="${EMBD_MODEL:-$ROOT/models/all-MiniLM-L6-v2.weights}"
JOBS="${JOBS:-2}"
say() { printf '\n==> %s\n' "$*"; }

tmp=""
cleanup() { [ -z "$tmp" ] || rm -rf "$tmp"; }
trap cleanup EXIT
if [ -z "${PREFIX:-}" ]; then
  tmp="$(mktemp -d)"
  PREFIX="$tmp/prefix"
fi
[ -f "$MODEL" ] || echo "note: model $MODEL not found; the example tests will fail" >&2

say "build the library (cmake -> cargo build --release --lib) and install it to $PREFIX"
cmake -S "$ROOT" -B "$BUILD_ROOT/lib" -DCMAKE_BUILD_TYPE=Release -DEMBEDDER_BUILD_TESTS=OFF \
  "-DEMBEDDER_CARGO_TARGET_DIR=$TARGET_DIR"
cmake --build "$BUILD_ROOT/lib" -j "$JOBS"
cmake --install "$BUILD_ROOT/lib" --prefix "$PREFIX"

say "C and C++ examples against the installed package (find_package), shared library"
rm -rf "$BUILD_ROOT/examples" "$BUILD_ROOT/examples-static"
cmake -S "$HERE" -B "$BUILD_ROOT/examples" "-DCMAKE_PREFIX_PATH=$PREFIX" "-DEMBEDDER_EXAMPLES_MODEL=$MODEL"
cmake --build "$BUILD_ROOT/examples" -j "$JOBS"
ctest --test-dir "$BUILD_ROOT/examples" --output-on-failure -j "$JOBS"

say "C example linked statically (embedder::embedder_static)"
cmake -S "$HERE" -B "$BUILD_ROOT/examples-static" "-DCMAKE_PREFIX_PATH=$PREFIX" "-DEMBEDDER_EXAMPLES_MODEL=$MODEL" \
  -DEMBEDDER_EXAMPLES_STATIC=ON
cmake --build "$BUILD_ROOT/examples-static" -j "$JOBS" --target embed_lines
if ldd "$BUILD_ROOT/examples-static/embed_lines" | grep -q libembedder; then
  echo "embed_lines (static) still links libembedder.so" >&2
  exit 1
fi
ctest --test-dir "$BUILD_ROOT/examples-static" --output-on-failure -R '^example_c_embed_lines$'

say "C and C++ examples with ASan + UBSan (all example tests)"
rm -rf "$BUILD_ROOT/examples-asan"
cmake -S "$HERE" -B "$BUILD_ROOT/examples-asan" "-DCMAKE_PREFIX_PATH=$PREFIX" "-DEMBEDDER_EXAMPLES_MODEL=$MODEL" \
  -DCMAKE_BUILD_TYPE=Debug -DEMBEDDER_EXAMPLES_SANITIZE=ON
cmake --build "$BUILD_ROOT/examples-asan" -j "$JOBS"
ASAN_OPTIONS="detect_leaks=1:abort_on_error=0" UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1" \
  ctest --test-dir "$BUILD_ROOT/examples-asan" --output-on-failure -j "$JOBS"

if [ "${VALGRIND:-1}" != 0 ] && command -v valgrind >/dev/null; then
  say "C and C++ examples under valgrind (zero errors, zero definite/indirect leaks)"
  # Inference under valgrind is slow (about 15 s for one short text, minutes
  # for the larger tests): by default one text and the error paths;
  # VALGRIND=full adds the 5-line, semantic search and Swift-call tests.
  valgrind_tests='^example_(c_embed_lines_one|c_embed_lines_bad_utf8|c_embed_lines_missing_model|c_embed_lines_empty_input|c_embed_lines_usage|cpp_semantic_search_missing_model)$'
  if [ "${VALGRIND:-1}" = full ]; then
    valgrind_tests='^example_(c_embed_lines|c_embed_lines_one|c_embed_lines_bad_utf8|c_embed_lines_missing_model|c_embed_lines_empty_input|c_embed_lines_usage|cpp_semantic_search|cpp_semantic_search_missing_model|swift_c_calls)$'
  fi
  rm -rf "$BUILD_ROOT/examples-valgrind"
  cmake -S "$HERE" -B "$BUILD_ROOT/examples-valgrind" "-DCMAKE_PREFIX_PATH=$PREFIX" "-DEMBEDDER_EXAMPLES_MODEL=$MODEL" \
    -DCMAKE_BUILD_TYPE=Debug \
    "-DEMBEDDER_EXAMPLES_LAUNCHER=valgrind;--error-exitcode=99;--leak-check=full;--errors-for-leak-kinds=definite,indirect;--show-leak-kinds=definite,indirect;--suppressions=$ROOT/c_tests/valgrind.supp;--quiet"
  cmake --build "$BUILD_ROOT/examples-valgrind" -j "$JOBS"
  ctest --test-dir "$BUILD_ROOT/examples-valgrind" --output-on-failure -j "$JOBS" --timeout 1800 \
    -R "$valgrind_tests"
fi

say "C example with pkg-config only"
pcdir="$(dirname "$(find "$PREFIX" -path '*/pkgconfig/embedder.pc' | head -n1)")"
export PKG_CONFIG_PATH="$pcdir"
libdir="$(pkg-config --variable=libdir embedder)"
# shellcheck disable=SC2046  # word splitting of pkg-config output is intended
cc -std=c11 -Wall -Wextra -Werror -pedantic $(pkg-config --cflags embedder) "$HERE/c/embed_lines.c" \
  -o "$BUILD_ROOT/embed_lines_pc" $(pkg-config --libs embedder) "-Wl,-rpath,$libdir"
out="$(printf 'hello world\nsecond line\n' | "$BUILD_ROOT/embed_lines_pc" --array "$MODEL")"
[ "$(printf '%s\n' "$out" | wc -l)" = 2 ] || { echo "embed_lines_pc: expected 2 lines" >&2; exit 1; }
[ "$(printf '%s\n' "$out" | head -n1 | tr ',' '\n' | wc -l)" = 384 ] || { echo "embed_lines_pc: expected 384 numbers" >&2; exit 1; }
echo "embed_lines_pc: 2 lines of 384 numbers"

if [ "${SKIP_GO:-0}" != 1 ]; then
  say "Go binding against the installed package (pkg-config)"
  EMBEDDER_PREFIX="$PREFIX" EMBD_MODEL="$MODEL" "$HERE/go/run_tests.sh"
fi

say "examples against the installed package: all passed"
