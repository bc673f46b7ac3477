//! AVX-512F (with AVX2 and FMA).

pub(crate) mod bgemm;
pub(crate) mod ops;
pub(crate) mod qgemm;
pub(crate) mod sgemm;
