//! cargo-fuzz target `bpe`: see `fuzz/bpe_harness.rs` (`fuzz_bpe`).
#![no_main]

#[path = "../harness.rs"]
mod harness;

libfuzzer_sys::fuzz_target!(|data: &[u8]| harness::fuzz_bpe(data));
