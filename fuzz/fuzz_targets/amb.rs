//! cargo-fuzz target `amb`: see `fuzz/harness.rs` (`fuzz_amb`).
#![no_main]

#[path = "../harness.rs"]
mod harness;

libfuzzer_sys::fuzz_target!(|data: &[u8]| harness::fuzz_amb(data));
