//! cargo-fuzz target `torch_pt`: see `fuzz/harness.rs` (`fuzz_torch_pt`).
#![no_main]

#[path = "../harness.rs"]
mod harness;

libfuzzer_sys::fuzz_target!(|data: &[u8]| harness::fuzz_torch_pt(data));
