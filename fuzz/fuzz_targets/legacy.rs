//! cargo-fuzz target `legacy`: see `fuzz/harness.rs` (`fuzz_legacy`).
#![no_main]

#[path = "../harness.rs"]
mod harness;

libfuzzer_sys::fuzz_target!(|data: &[u8]| harness::fuzz_legacy(data));
