//! Integration tests (one binary).

mod tokenizer;
