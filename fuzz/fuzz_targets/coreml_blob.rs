//! cargo-fuzz target `coreml_blob`: see `fuzz/harness.rs` (`fuzz_coreml_blob`).
#![no_main]

#[path = "../harness.rs"]
mod harness;

libfuzzer_sys::fuzz_target!(|data: &[u8]| harness::fuzz_coreml_blob(data));
