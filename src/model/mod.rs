//! The BERT encoder, pooling and configuration.

pub mod config;
