//! cargo-fuzz target `pair_template`: see `fuzz/harness.rs` (`fuzz_pair_template`).
#![no_main]

#[path = "../harness.rs"]
mod harness;

libfuzzer_sys::fuzz_target!(|data: &[u8]| harness::fuzz_pair_template(data));
