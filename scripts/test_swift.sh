#!/usr/bin/env bash
# Builds and tests the Swift package (Package.swift at the repository root,
# sources in examples/swift) with Debian's Swift toolchain, in the Debian 13
# chroot of scripts/swift_chroot.sh (made on first use, then reused):
#   1. the library built with CMake on the host and installed (cmake --install)
#      into a prefix inside the chroot;
#   2. inside the chroot, with PKG_CONFIG_PATH=<prefix>/lib/pkgconfig:
#      the Embedder module in Swift 6 language mode with warnings as errors
#      (Sendable checking), swift build, swift test (XCTest against the
#      reference files of /work/shared, like the Go and Python tests),
#      swift run embedder-swift-demo;
#   3. a package that depends on this repository by URL (a file:// clone of
#      HEAD, as SwiftPM fetches a package added by URL) resolves, builds and runs.
# Exits non-zero on any failure. Skips (exit 0, with the reason) only where
# debootstrap or chroot cannot run at all (not root); never in CI ($CI set).
# Env: EMBD_MODEL, EMBD_MPNET_MODEL, EMBD_RERANK_MODEL (default models/*.weights),
# EMBD_SHARED_DIR (default <repo>/../shared), CARGO_TARGET_DIR (default
# <repo>/target), JOBS (default 2), SWIFT_TEST_FILTER (passed to swift test
# --filter), SKIP_URL_CHECK=1 to skip step 3, ALLOW_SKIP=1 to let tests
# whose model or reference file is missing skip instead of fail; EMBD_SWIFT_CHROOT and
# EMBD_DEBIAN_MIRROR as in scripts/swift_chroot.sh.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
JOBS="${JOBS:-2}"
TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target}"
CHROOT_SH="$ROOT/scripts/swift_chroot.sh"
say() { printf '== test_swift: %s\n' "$*"; }
t_start=$SECONDS
lap() { say "$1 ($((SECONDS - t_start)) s so far)"; }

# --- the chroot ---------------------------------------------------------------
rc=0
chroot_dir="$("$CHROOT_SH" ensure)" || rc=$?
if [ "$rc" = 77 ]; then
  if [ -n "${CI:-}" ]; then
    echo "test_swift: the Swift chroot cannot be made here, and CI must run the Swift tests" >&2
    exit 1
  fi
  say "skipped: the Swift chroot cannot be made here (see the reason above)"
  exit 0
fi
[ "$rc" = 0 ] || exit "$rc"
lap "chroot ready: $chroot_dir"

# Per-clone paths inside the chroot (several clones may share the chroot).
key="$(printf '%s' "$ROOT" | cksum | cut -d' ' -f1)"
prefix="/opt/embedder-$key"             # the installed library
scratch="/var/cache/embedder-swift/$key" # the Swift 6 check's build tree, kept between runs

# --- the library, installed into the chroot -----------------------------------
say "cmake: build the library and install it to $chroot_dir$prefix"
cmake -S "$ROOT" -B "$ROOT/build-swift/lib" -DCMAKE_BUILD_TYPE=Release -DEMBEDDER_BUILD_TESTS=OFF \
  "-DEMBEDDER_CARGO_TARGET_DIR=$TARGET_DIR" >/dev/null
cmake --build "$ROOT/build-swift/lib" -j "$JOBS" >/dev/null
rm -rf "${chroot_dir:?}$prefix"
cmake --install "$ROOT/build-swift/lib" --prefix "$chroot_dir$prefix" >/dev/null
pc="$(cd "$chroot_dir$prefix" && find . -path '*/pkgconfig/embedder.pc' -print -quit)"
[ -n "$pc" ] || { echo "test_swift: no embedder.pc under $chroot_dir$prefix" >&2; exit 1; }
pcdir="$prefix/$(dirname "${pc#./}")"
libdir="$(dirname "$pcdir")"
lap "library installed: $prefix (pkg-config dir $pcdir)"

# --- what the tests read --------------------------------------------------------
shared="${EMBD_SHARED_DIR:-$ROOT/../shared}"
binds=(--bind "$ROOT")
# A missing model or reference file fails its test (the tests skip only
# when CI is empty: ALLOW_SKIP=1, for a machine without the fixtures).
ci="${CI:-1}"
[ "${ALLOW_SKIP:-0}" != 1 ] || ci=""
envs=(CI="$ci" PKG_CONFIG_PATH="$pcdir")
if [ -d "$shared" ]; then
  shared="$(cd "$shared" && pwd -P)"
  case "$shared/" in "$ROOT"/*) ;; *) binds+=(--ro-bind "$shared") ;; esac
  envs+=(EMBD_SHARED_DIR="$shared")
else
  echo "note: $shared not found; the reference tests will fail (CI) or skip" >&2
fi
for var in EMBD_MODEL EMBD_MPNET_MODEL EMBD_RERANK_MODEL; do
  val="${!var:-}"
  [ -n "$val" ] || continue
  [ -e "$val" ] || { echo "test_swift: $var=$val does not exist" >&2; exit 1; }
  val="$(cd "$(dirname "$val")" && pwd -P)/$(basename "$val")"
  case "$val" in "$ROOT"/*) ;; *) binds+=(--ro-bind "$(dirname "$val")") ;; esac
  envs+=("$var=$val")
done
model="${EMBD_MODEL:-$ROOT/models/all-MiniLM-L6-v2.weights}"
[ -f "$model" ] || echo "note: $model not found; the model tests will fail (CI) or skip" >&2

# --- a package that adds this repository by URL -----------------------------------
url_check=""
if [ "${SKIP_URL_CHECK:-0}" != 1 ]; then
  rev="$(git -C "$ROOT" rev-parse HEAD)"
  url_check="/var/cache/embedder-swift/$key-url"
  # The consumer's build tree (build/) is kept between runs; the clone is fresh.
  rm -rf "${chroot_dir:?}$url_check/embedder.git" "${chroot_dir:?}$url_check/consumer"
  mkdir -p "$chroot_dir$url_check/consumer/Sources/consumer"
  # A bare clone of HEAD: what SwiftPM fetches for .package(url:). Committed
  # state only (uncommitted edits are not part of it).
  git clone --quiet --bare "$ROOT" "$chroot_dir$url_check/embedder.git"
  cat >"$chroot_dir$url_check/consumer/Package.swift" <<EOF
// swift-tools-version:5.9
import PackageDescription
let package = Package(
    name: "consumer",
    dependencies: [.package(url: "file://$url_check/embedder.git", revision: "$rev")],
    targets: [.executableTarget(name: "consumer", dependencies: [.product(name: "Embedder", package: "embedder")])]
)
EOF
  cat >"$chroot_dir$url_check/consumer/Sources/consumer/main.swift" <<'EOF'
import Embedder
let m = try Model(path: CommandLine.arguments[1], options: ModelOptions(threads: 1))
let v = try m.encode(["added by URL"])
print("consumer: embedder \(embedderVersion), \(v.dim) floats, \(v.info[0].tokens) tokens")
EOF
fi

# --- inside the chroot -------------------------------------------------------------
inner="$(cat <<'EOF'
set -eu
cd "$ROOT"
t0=$(date +%s)
lap() { echo "== test_swift (chroot): $1 ($(( $(date +%s) - t0 )) s)"; }
swift --version 2>&1 | head -n1
echo "pkg-config embedder: $(pkg-config --modversion embedder) $(pkg-config --cflags --libs embedder)"
rpath="-Xlinker -rpath -Xlinker $LIBDIR"
echo "== swift build --target Embedder (Swift 6 language mode, warnings as errors)"
swift build --scratch-path "$SCRATCH/swift6" --target Embedder \
  -Xswiftc -swift-version -Xswiftc 6 -Xswiftc -warnings-as-errors
lap "Swift 6 mode"
# The commands of examples/swift/README.md's quick start, as written (the
# build tree is the default .build/ in the clone).
echo "== swift build --build-tests"
swift build --build-tests $rpath
lap "swift build"
echo "== swift test"
if [ -n "$FILTER" ]; then
  swift test --skip-build $rpath --filter "$FILTER"
else
  swift test --skip-build $rpath
fi
lap "swift test"
echo "== swift run embedder-swift-demo"
out="$(swift run --skip-build $rpath embedder-swift-demo "$MODEL")"
printf '%s\n' "$out"
case "$out" in *"dim 384"*"expected error: file not found (status 20)"*) ;;
  *) echo "embedder-swift-demo: unexpected output" >&2; exit 1 ;; esac
lap "demo"
if [ -n "$URL_CHECK" ]; then
  echo "== a package that depends on this repository by URL: swift package resolve, swift build, run"
  cd "$URL_CHECK/consumer"
  swift package --scratch-path "$URL_CHECK/build" resolve
  swift build --scratch-path "$URL_CHECK/build" $rpath
  "$URL_CHECK/build/debug/consumer" "$MODEL"
  lap "by URL"
fi
EOF
)"
say "swift build, swift test, the demo and the by-URL package inside the chroot"
nice -n 10 "$CHROOT_SH" run "${binds[@]}" -- env "${envs[@]}" ROOT="$ROOT" SCRATCH="$scratch" LIBDIR="$libdir" \
  MODEL="$model" FILTER="${SWIFT_TEST_FILTER:-}" URL_CHECK="$url_check" HOME=/root \
  sh -c "$inner"
lap "Swift package: all checks passed"
