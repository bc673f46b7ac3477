//! cargo-fuzz target `embedder`: see `fuzz/harness.rs` (`fuzz_embedder`).
#![no_main]

#[path = "../harness.rs"]
mod harness;

libfuzzer_sys::fuzz_target!(|data: &[u8]| harness::fuzz_embedder(data));
