//! AVX2 + FMA.

pub(crate) mod bgemm;
pub(crate) mod ops;
pub(crate) mod qgemm;
pub(crate) mod sgemm;
