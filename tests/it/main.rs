//! Integration tests: one binary, one module per area.

mod common;
mod convert;
mod engine;
mod formats;
mod tokenizer;
