//! cargo-fuzz target `container`: see `fuzz/harness.rs` (`fuzz_container`).
#![no_main]

#[path = "../harness.rs"]
mod harness;

libfuzzer_sys::fuzz_target!(|data: &[u8]| harness::fuzz_container(data));
