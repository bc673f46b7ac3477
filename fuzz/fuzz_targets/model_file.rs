//! cargo-fuzz target `model_file`: see `fuzz/harness.rs` (`fuzz_model_file`).
#![no_main]

#[path = "../harness.rs"]
mod harness;

libfuzzer_sys::fuzz_target!(|data: &[u8]| harness::fuzz_model_file(data));
