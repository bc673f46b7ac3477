//! cargo-fuzz target `hf_dir`: see `fuzz/harness.rs` (`fuzz_hf_dir`).
#![no_main]

#[path = "../harness.rs"]
mod harness;

libfuzzer_sys::fuzz_target!(|data: &[u8]| harness::fuzz_hf_dir(data));
