//! cargo-fuzz target `hf_tokenizer`: see `fuzz/harness.rs` (`fuzz_hf_tokenizer`).
#![no_main]

#[path = "../harness.rs"]
mod harness;

libfuzzer_sys::fuzz_target!(|data: &[u8]| harness::fuzz_hf_tokenizer(data));
