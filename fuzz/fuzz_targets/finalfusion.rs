//! cargo-fuzz target `finalfusion`: see `fuzz/harness.rs` (`fuzz_finalfusion`).
#![no_main]

#[path = "../harness.rs"]
mod harness;

libfuzzer_sys::fuzz_target!(|data: &[u8]| harness::fuzz_finalfusion(data));
