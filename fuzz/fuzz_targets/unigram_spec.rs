//! cargo-fuzz target `unigram_spec`: see `fuzz/harness.rs` (`fuzz_unigram_spec`).
#![no_main]

#[path = "../harness.rs"]
mod harness;

libfuzzer_sys::fuzz_target!(|data: &[u8]| harness::fuzz_unigram_spec(data));
