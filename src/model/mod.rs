//! The BERT encoder, pooling and configuration.

pub mod bert;
pub mod calibrate;
pub mod config;
pub mod linear;
pub mod param;
pub mod pooling;
pub mod report;
