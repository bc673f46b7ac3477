//! Portable code: the fallbacks when the CPU has none of the vector ISAs (or
//! `EMBD_SIMD=none`), and loops the vector modules compile again with their
//! target features.

pub(crate) mod bgemm;
pub(crate) mod ops;
pub(crate) mod qgemm;
