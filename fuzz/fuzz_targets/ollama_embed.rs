//! cargo-fuzz target `ollama_embed`: see `fuzz/server_harness.rs` (`fuzz_ollama_embed`).
#![no_main]

#[path = "../server_harness.rs"]
mod server_harness;

libfuzzer_sys::fuzz_target!(|data: &[u8]| server_harness::fuzz_ollama_embed(data));
