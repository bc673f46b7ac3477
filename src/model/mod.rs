//! The BERT encoder, pooling and configuration.

pub mod bert;
pub mod config;
pub mod pooling;
