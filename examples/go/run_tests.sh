#!/usr/bin/env bash
# Tests the Go binding offline: gofmt, go vet, go test (plus a -race pass of the
# concurrency tests), and builds + runs cmd/embd-go-demo.
#
# The library comes from an installed prefix through pkg-config
# (#cgo pkg-config: embedder):
#   EMBEDDER_PREFIX=<prefix> examples/go/run_tests.sh   # use <prefix>/lib*/pkgconfig/embedder.pc
#   examples/go/run_tests.sh                            # build it: cargo build --release --lib, then
#                                                       # cmake --install into a temporary prefix
# Env: EMBD_MODEL (default <repo>/models/all-MiniLM-L6-v2.weights), EMBD_FAMILIES_DIR
# (the models of tests/data/families.tsv as <name>.weights; default: converted with embd
# into a temporary folder), EMBD_SHARED_DIR
# (reference data; default <repo>/../shared when it exists), CARGO_TARGET_DIR
# (default <repo>/target), JOBS (default 2).
# Runs: gofmt -l, go vet, go test -v, go test -race (concurrency tests),
# go test -asan (GO_ASAN=0 skips), cmd/embd-go-demo. -race and -asan are
# probed first and skipped only when this Go installation cannot build them.
# Installs Go (Debian golang-go) and pkg-config when missing. Exits non-zero on
# any failure.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
JOBS="${JOBS:-2}"
say() { printf '== %s\n' "$*"; }

apt_install() {
  if ! command -v apt-get >/dev/null; then
    echo "run_tests.sh: $* missing and apt-get not available; install it" >&2
    exit 1
  fi
  local sudo=""
  [ "$(id -u)" = 0 ] || sudo="sudo"
  # Only refresh the package lists when the package is not known yet.
  if ! apt-cache show "$@" >/dev/null 2>&1; then $sudo apt-get update -qq; fi
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "$@" >/dev/null
}

# --- tools -------------------------------------------------------------------
if ! command -v go >/dev/null; then
  if [ -x /usr/local/go/bin/go ]; then
    export PATH="/usr/local/go/bin:$PATH"
  else
    say "installing Go (Debian golang-go)"
    apt_install golang-go
  fi
fi
command -v pkg-config >/dev/null || { say "installing pkg-config"; apt_install pkg-config; }
command -v gcc >/dev/null || command -v cc >/dev/null || { say "installing gcc"; apt_install gcc libc6-dev; }
go version

# Offline and reproducible: no module downloads, no toolchain switching.
export GOPROXY=off GOFLAGS="${GOFLAGS:--mod=readonly}" GOTOOLCHAIN=local CGO_ENABLED=1
if [ -z "${HOME:-}" ] && [ -z "${GOCACHE:-}" ]; then export GOCACHE="$ROOT/target/go-cache"; fi

# --- the library, installed ----------------------------------------------------
tmp=""
cleanup() { [ -z "$tmp" ] || rm -rf "$tmp"; }
trap cleanup EXIT
if [ -z "${EMBEDDER_PREFIX:-}" ]; then
  tmp="$(mktemp -d)"
  export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target}"
  say "cargo build --release --lib"
  (cd "$ROOT" && cargo build --release --lib --quiet)
  if command -v cmake >/dev/null; then
    say "cmake --install into $tmp/prefix"
    cmake -S "$ROOT" -B "$ROOT/build-go" -DCMAKE_BUILD_TYPE=Release -DEMBEDDER_BUILD_TESTS=OFF \
      "-DEMBEDDER_CARGO_TARGET_DIR=$CARGO_TARGET_DIR" >/dev/null
    cmake --build "$ROOT/build-go" -j "$JOBS" >/dev/null
    cmake --install "$ROOT/build-go" --prefix "$tmp/prefix" >/dev/null
    EMBEDDER_PREFIX="$tmp/prefix"
  else
    # No cmake: a pkg-config file pointing at the cargo build and the source headers.
    say "no cmake: using $CARGO_TARGET_DIR/release through a generated embedder.pc"
    mkdir -p "$tmp/pkgconfig"
    cat >"$tmp/pkgconfig/embedder.pc" <<PC
libdir=$CARGO_TARGET_DIR/release
includedir=$ROOT/include
Name: embedder
Description: embedder (cargo build tree)
Version: 0.0.0
Libs: -L\${libdir} -lembedder
Cflags: -I\${includedir}
PC
    export PKG_CONFIG_PATH="$tmp/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
  fi
fi
if [ -n "${EMBEDDER_PREFIX:-}" ]; then
  pcdir="$(dirname "$(find "$EMBEDDER_PREFIX" -path '*/pkgconfig/embedder.pc' | head -n1)")"
  [ -f "$pcdir/embedder.pc" ] || { echo "run_tests.sh: no embedder.pc under $EMBEDDER_PREFIX" >&2; exit 1; }
  export PKG_CONFIG_PATH="$pcdir${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
fi
libdir="$(pkg-config --variable=libdir embedder)"
say "pkg-config embedder: $(pkg-config --modversion embedder), $(pkg-config --cflags --libs embedder)"
# Find the shared library at run time without LD_LIBRARY_PATH.
export CGO_LDFLAGS="${CGO_LDFLAGS:-} -Wl,-rpath,$libdir"

export EMBD_MODEL="${EMBD_MODEL:-$ROOT/models/all-MiniLM-L6-v2.weights}"
if [ -z "${EMBD_SHARED_DIR:-}" ] && [ -d "$ROOT/../shared" ]; then
  export EMBD_SHARED_DIR="$(cd "$ROOT/../shared" && pwd)"
fi
[ -f "$EMBD_MODEL" ] || echo "note: $EMBD_MODEL not found; the model tests will fail (CI) or skip" >&2
# TestFamilies and TestStaticModels: every model of tests/data/families.tsv and
# tests/data/static.tsv, its reference folder converted by embd into
# $EMBD_FAMILIES_DIR (unless that is set).
fam_dir=""
trap 'cleanup; [ -z "$fam_dir" ] || rm -rf "$fam_dir"' EXIT
if [ -z "${EMBD_FAMILIES_DIR:-}" ] && [ -d "${EMBD_SHARED_DIR:-}/reference" ]; then
  (cd "$ROOT" && CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target}" cargo build --release --quiet --bin embd)
  fam_dir="$(mktemp -d)"
  while read -r name folder; do
    say "embd convert $name"
    "${CARGO_TARGET_DIR:-$ROOT/target}/release/embd" convert "$EMBD_SHARED_DIR/reference/$folder" \
      -o "$fam_dir/$name.weights" >/dev/null
  done < <(awk -F'\t' '/^#/ || !NF { next } !h { for (i = 1; i <= NF; i++) c[$i] = i; h = 1; next }
                       { print $c["name"], $c["folder"] }' "$ROOT/tests/data/families.tsv")
  # TestStaticModels: tests/data/static.tsv, each in its library's behaviour.
  while read -r name folder behaviour; do
    say "embd convert $name"
    "${CARGO_TARGET_DIR:-$ROOT/target}/release/embd" convert "$EMBD_SHARED_DIR/reference/$folder" \
      --static-behaviour "$behaviour" -o "$fam_dir/$name.weights" >/dev/null
  done < <(awk -F'\t' '/^#/ || !NF { next } !h { for (i = 1; i <= NF; i++) c[$i] = i; h = 1; next }
                       { print $c["name"], $c["folder"], $c["behaviour"] }' "$ROOT/tests/data/static.tsv")
  export EMBD_FAMILIES_DIR="$fam_dir"
fi

# --- checks ------------------------------------------------------------------
cd "$HERE"
say "gofmt"
unformatted="$(gofmt -l .)"
if [ -n "$unformatted" ]; then
  echo "gofmt: not formatted:" >&2
  echo "$unformatted" >&2
  exit 1
fi
say "go vet"
go vet ./...
say "go test"
go test -count=1 -v ./...
# The race detector needs its runtime (shipped by most Go distributions for
# amd64/arm64): probe by compiling, then require the race pass to succeed.
if go test -race -count=1 -run '^$' . >/dev/null 2>&1; then
  say "go test -race (concurrency tests)"
  go test -race -count=1 -run 'TestConcurrent|TestCloseWhileInUse' .
else
  say "go test -race: not supported by this Go installation; skipped"
fi
# AddressSanitizer over the Go side and the cgo helpers (the C code in the
# preamble): same probe-then-require rule.
if [ "${GO_ASAN:-1}" != 0 ] && go test -asan -count=1 -run '^$' . >/dev/null 2>&1; then
  say "go test -asan"
  go test -asan -count=1 .
else
  say "go test -asan: not supported by this Go installation (or GO_ASAN=0); skipped"
fi
say "cmd/embd-go-demo"
mkdir -p "$ROOT/target"
go build -o "$ROOT/target/embd-go-demo" ./cmd/embd-go-demo
demo_out="$("$ROOT/target/embd-go-demo" -threads 2)"
printf '%s\n' "$demo_out"
case "$demo_out" in *"dim 384"*) ;; *) echo "embd-go-demo: unexpected output" >&2; exit 1 ;; esac
if "$ROOT/target/embd-go-demo" -m /nonexistent.weights 2>/dev/null; then
  echo "embd-go-demo: a missing model must fail" >&2
  exit 1
fi
say "Go binding: all checks passed"
