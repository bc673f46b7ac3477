//! Integration tests: one binary, one module per area.

mod common;
mod convert;
mod formats;
mod header;
mod tokenizer;
