//! cargo-fuzz target `lwt`: see `fuzz/harness.rs` (`fuzz_lwt`).
#![no_main]

#[path = "../harness.rs"]
mod harness;

libfuzzer_sys::fuzz_target!(|data: &[u8]| harness::fuzz_lwt(data));
