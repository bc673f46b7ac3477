//! Integration tests: one binary, one module per area.

mod common;
mod containers;
mod convert;
mod engine;
mod formats;
mod fuzz_regressions;
mod tokenizer;
