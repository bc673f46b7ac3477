#!/usr/bin/env bash
# Builds the static library (libembedder.a) for the Apple targets the Swift
# package's XCFramework needs, with cargo only:
#   aarch64-apple-darwin, x86_64-apple-darwin, aarch64-apple-ios, aarch64-apple-ios-sim
# into target/apple/<target>/libembedder.a, then checks each archive holds
# Mach-O objects of the right CPU exporting the embd_* symbols.
#
# Only the staticlib is built (`cargo rustc --crate-type staticlib`): rustc
# writes the archive itself, so no Apple tool is needed. The cdylib
# (libembedder.dylib) needs Apple's linker (ld64 with the SDK's libSystem)
# and is not built. Assembling the XCFramework needs Apple tools too, and is
# only done where they exist (macOS with Xcode): `lipo` for the universal
# macOS archive (arm64 + x86_64) and `xcodebuild -create-xcframework`.
#
# Env: PROFILE (default release), CARGO_TARGET_DIR (default <repo>/target),
# TARGETS (default: the four above), ADD_TARGETS=0 to not `rustup target add`
# missing ones.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PROFILE="${PROFILE:-release}"
TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target}"
TARGETS="${TARGETS:-aarch64-apple-darwin x86_64-apple-darwin aarch64-apple-ios aarch64-apple-ios-sim}"
OUT="$TARGET_DIR/apple"
say() { printf '== build_apple_libs: %s\n' "$*"; }
profile_dir="$PROFILE"
[ "$PROFILE" != dev ] || profile_dir=debug

# A target whose prebuilt standard library cannot be installed (rustup's
# server has none, or no network) is built with nightly's -Zbuild-std from
# the rust-src component instead.
installed="$(rustup target list --installed 2>/dev/null || true)"
build_std=" "
for t in $TARGETS; do
  if ! grep -qx "$t" <<<"$installed"; then
    if [ "${ADD_TARGETS:-1}" = 1 ] && say "rustup target add $t" && rustup target add "$t" >/dev/null 2>&1; then
      continue
    fi
    if rustup component list --toolchain nightly --installed 2>/dev/null | grep '^rust-src' >/dev/null; then
      say "$t: no prebuilt standard library (rustup target add $t failed); building it with cargo +nightly -Zbuild-std"
      build_std="$build_std$t "
    else
      echo "build_apple_libs: rustup target add $t failed, and nightly with rust-src (for -Zbuild-std) is not installed" >&2
      exit 1
    fi
  fi
done

nm_tool=""
for c in llvm-nm "$(ls "$(rustc --print sysroot)"/lib/rustlib/*/bin/llvm-nm 2>/dev/null | head -n1)"; do
  if [ -n "$c" ] && command -v "$c" >/dev/null 2>&1; then nm_tool="$c"; break; fi
done

mkdir -p "$OUT"
for t in $TARGETS; do
  say "cargo rustc --lib --crate-type staticlib --profile $PROFILE --target $t"
  t0=$SECONDS
  case "$build_std" in
    *" $t "*) (cd "$ROOT" && nice -n 10 cargo +nightly rustc --quiet -Zbuild-std --lib --crate-type staticlib \
                 --profile "$PROFILE" --target "$t") ;;
    *) (cd "$ROOT" && nice -n 10 cargo rustc --quiet --lib --crate-type staticlib --profile "$PROFILE" --target "$t") ;;
  esac
  lib="$TARGET_DIR/$t/$profile_dir/libembedder.a"
  [ -f "$lib" ] || { echo "build_apple_libs: $lib missing" >&2; exit 1; }
  mkdir -p "$OUT/$t"
  cp "$lib" "$OUT/$t/libembedder.a"
  case "$t" in aarch64-*) want_cpu="arm64" ;; x86_64-*) want_cpu="x86_64" ;; esac
  # The first member that is an object file: Mach-O for the target's CPU.
  tmp="$(mktemp -d)"
  member="$(ar t "$lib" | awk '/\.o$/ && !f { print; f = 1 }')"  # reads all: no SIGPIPE under pipefail
  (cd "$tmp" && ar x "$lib" "$member")
  kind="$(file -b "$tmp/$member")"
  rm -rf "$tmp"
  case "$kind" in *Mach-O*"$want_cpu"*) ;; *) echo "build_apple_libs: $t: $member is '$kind'" >&2; exit 1 ;; esac
  syms="unchecked (no llvm-nm)"
  if [ -n "$nm_tool" ]; then
    n="$("$nm_tool" --defined-only --extern-only "$lib" 2>/dev/null | grep -c ' T _embd_' || true)"
    [ "$n" -gt 50 ] || { echo "build_apple_libs: $t: only $n embd_* symbols" >&2; exit 1; }
    syms="$n embd_* functions"
  fi
  say "$t: $(du -h "$OUT/$t/libembedder.a" | cut -f1), $kind, $syms ($((SECONDS - t0)) s)"
done

if command -v xcodebuild >/dev/null && command -v lipo >/dev/null; then
  say "lipo + xcodebuild -create-xcframework"
  hdr="$OUT/headers"
  rm -rf "$hdr" "$OUT/CEmbedder.xcframework"
  mkdir -p "$hdr" "$OUT/macos"
  cp "$ROOT/include/embedder.h" "$hdr/"
  printf 'module CEmbedder {\n    header "embedder.h"\n    export *\n}\n' >"$hdr/module.modulemap"
  lipo -create "$OUT/aarch64-apple-darwin/libembedder.a" "$OUT/x86_64-apple-darwin/libembedder.a" \
    -output "$OUT/macos/libembedder.a"
  xcodebuild -create-xcframework \
    -library "$OUT/macos/libembedder.a" -headers "$hdr" \
    -library "$OUT/aarch64-apple-ios/libembedder.a" -headers "$hdr" \
    -library "$OUT/aarch64-apple-ios-sim/libembedder.a" -headers "$hdr" \
    -output "$OUT/CEmbedder.xcframework"
  say "$OUT/CEmbedder.xcframework"
else
  say "no lipo/xcodebuild here (Apple tools): the static libraries are built; the XCFramework is assembled on macOS"
fi
