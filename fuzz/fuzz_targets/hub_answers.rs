//! cargo-fuzz target `hub_answers`: see `fuzz/harness.rs` (`fuzz_hub_answers`).
#![no_main]

#[path = "../harness.rs"]
mod harness;

libfuzzer_sys::fuzz_target!(|data: &[u8]| harness::fuzz_hub_answers(data));
