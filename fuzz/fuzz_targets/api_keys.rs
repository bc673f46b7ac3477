//! cargo-fuzz target `api_keys`: see `fuzz/server_harness.rs` (`fuzz_api_keys`).
#![no_main]

#[path = "../server_harness.rs"]
mod server_harness;

libfuzzer_sys::fuzz_target!(|data: &[u8]| server_harness::fuzz_api_keys(data));
