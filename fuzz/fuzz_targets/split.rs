//! cargo-fuzz target `split`: see `fuzz/harness.rs` (`fuzz_split`).
#![no_main]

#[path = "../harness.rs"]
mod harness;

libfuzzer_sys::fuzz_target!(|data: &[u8]| harness::fuzz_split(data));
