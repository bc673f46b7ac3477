//! cargo-fuzz target `embd`: see `fuzz/harness.rs` (`fuzz_embd`).
#![no_main]

#[path = "../harness.rs"]
mod harness;

libfuzzer_sys::fuzz_target!(|data: &[u8]| harness::fuzz_embd(data));
