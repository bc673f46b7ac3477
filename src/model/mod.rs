//! The encoder (BERT and the other registered families), pooling and
//! configuration.

pub mod arch;
pub mod blocks;
pub mod calibrate;
pub mod config;
pub mod dense;
pub mod encoder;
pub mod head;
pub mod linear;
pub mod multi_vector;
pub mod names;
pub mod outputs;
pub mod packed;
pub mod pair_template;
pub mod param;
pub mod pooling;
pub mod precision;
pub mod reference;
pub mod report;
pub mod sparse;
pub mod static_vocab;
pub mod static_words;
pub mod tokenizer;
