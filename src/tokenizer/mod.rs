//! BERT tokenization matching HuggingFace's fast tokenizer id for id.

pub mod vocab;
