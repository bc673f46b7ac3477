#!/usr/bin/env bash
# Manual race check (NOT part of CI): one embd_model handle shared by 8 threads,
# run natively, under valgrind's helgrind (raw and with helgrind.supp) and, if a
# nightly toolchain is present, under ThreadSanitizer. See README.md.
#
#   c_tests/race/run.sh            # everything
#   RACE_TSAN=0 c_tests/race/run.sh   # skip the ThreadSanitizer pass
#
# Knobs: ROUNDS (native run, default 200), HG_ROUNDS (helgrind, default 2),
# TSAN_ROUNDS (default 20), THREADS_PER_CALL (default 2), OUT (default
# target/race). Logs go to $OUT/*.log. Exit status is non-zero if a run
# reports a mismatch or fails; race reports themselves do not fail the script
# (they need reading, see README.md).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
cd "$root"
OUT=${OUT:-$root/target/race}
ROUNDS=${ROUNDS:-200}
HG_ROUNDS=${HG_ROUNDS:-2}
TSAN_ROUNDS=${TSAN_ROUNDS:-20}
TPC=${THREADS_PER_CALL:-2}
mkdir -p "$OUT"

echo "== build (release lib)"
cargo build --release --lib

echo "== tiny model (the tests' one tiny-BERT builder, embedder::testutil)"
EMBD_RACE_MODEL="$OUT/tiny.weights" \
  cargo test --release --test it engine::write_race_model -- --ignored --exact --quiet

echo "== race_threads (native, $ROUNDS rounds)"
cc -std=c11 -O1 -g -Wall -Wextra -pthread -Iinclude "$here/race_threads.c" -o "$OUT/race_threads" \
  -L"$root/target/release" -lembedder -Wl,-rpath,"$root/target/release"
"$OUT/race_threads" "$OUT/tiny.weights" "$ROUNDS" "$TPC"

summary() { grep -h "ERROR SUMMARY" "$1" | sed 's/^==[0-9]*== //'; }

if command -v valgrind >/dev/null; then
  echo "== helgrind, no suppressions ($HG_ROUNDS rounds)"
  valgrind --tool=helgrind --error-limit=no --num-callers=30 --log-file="$OUT/helgrind-raw.log" \
    "$OUT/race_threads" "$OUT/tiny.weights" "$HG_ROUNDS" "$TPC"
  echo "helgrind raw:        $(summary "$OUT/helgrind-raw.log")"
  echo "== helgrind, with c_tests/race/helgrind.supp"
  valgrind --tool=helgrind --error-limit=no --num-callers=30 --suppressions="$here/helgrind.supp" \
    --log-file="$OUT/helgrind-supp.log" "$OUT/race_threads" "$OUT/tiny.weights" "$HG_ROUNDS" "$TPC"
  echo "helgrind suppressed: $(summary "$OUT/helgrind-supp.log")"
else
  echo "valgrind not installed: helgrind pass skipped (apt-get install valgrind)"
fi

if [ "${RACE_TSAN:-1}" != 0 ] && rustup run nightly rustc --version >/dev/null 2>&1; then
  echo "== ThreadSanitizer (nightly, uninstrumented std: no rust-src for -Zbuild-std)"
  # Without -Cunsafe-allow-abi-mismatch=sanitizer rustc refuses to mix a TSan
  # crate with the precompiled (uninstrumented) core/std.
  RUSTFLAGS="-Zsanitizer=thread -Cunsafe-allow-abi-mismatch=sanitizer" CARGO_TARGET_DIR=target/tsan \
    cargo +nightly build --release --lib --target x86_64-unknown-linux-gnu
  tlib="$root/target/tsan/x86_64-unknown-linux-gnu/release"
  # Instrument the C file with gcc, but link the toolchain's own LLVM TSan
  # runtime: gcc 12's libtsan lacks __tsan_memset/__tsan_memcpy/__tsan_memmove
  # that the LLVM-instrumented library calls.
  rt="$(rustup run nightly rustc --print sysroot)/lib/rustlib/x86_64-unknown-linux-gnu/lib/librustc-nightly_rt.tsan.a"
  cc -std=c11 -O1 -g -fsanitize=thread -pthread -Iinclude -c "$here/race_threads.c" -o "$OUT/race_threads_tsan.o"
  cc -pthread "$OUT/race_threads_tsan.o" -o "$OUT/race_threads_tsan" \
    -Wl,--whole-archive "$rt" -Wl,--no-whole-archive -rdynamic \
    -L"$tlib" -lembedder -Wl,-rpath,"$tlib" -ldl -lm -lstdc++
  rm -f "$OUT"/tsan.*
  set +e
  TSAN_OPTIONS="halt_on_error=0 report_signal_unsafe=0 history_size=4 log_path=$OUT/tsan" \
    "$OUT/race_threads_tsan" "$OUT/tiny.weights" "$TSAN_ROUNDS" "$TPC"
  rc=$?
  set -e
  n=$(cat "$OUT"/tsan.* 2>/dev/null | grep -c "WARNING: ThreadSanitizer" || true)
  echo "ThreadSanitizer: exit $rc, $n warning(s); reports in $OUT/tsan.*"
  # TSan exits 66 when it reported something; the program's own result is in
  # its last lines above.
  [ "$rc" = 0 ] || [ "$rc" = 66 ] || exit "$rc"
fi
echo "== done; logs in $OUT"
