//! cargo-fuzz target `cohere_embed`: see `fuzz/server_harness.rs` (`fuzz_cohere_embed`).
#![no_main]

#[path = "../server_harness.rs"]
mod server_harness;

libfuzzer_sys::fuzz_target!(|data: &[u8]| server_harness::fuzz_cohere_embed(data));
