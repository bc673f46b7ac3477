//! cargo-fuzz target `safetensors`: see `fuzz/harness.rs` (`fuzz_safetensors`).
#![no_main]

#[path = "../harness.rs"]
mod harness;

libfuzzer_sys::fuzz_target!(|data: &[u8]| harness::fuzz_safetensors(data));
