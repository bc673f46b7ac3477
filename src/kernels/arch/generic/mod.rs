//! Portable code: the `none` row of every target's table (the fallbacks when
//! the CPU has none of the vector ISAs, or `EMBD_SIMD=none`), computing the
//! bits of every other row, and loops the vector modules compile again with
//! their target features.

pub(crate) mod bgemm;
pub(crate) mod ops;
pub(crate) mod qgemm;
pub(crate) mod sgemm;

use crate::kernels::isa::{Features, Variant};

/// The portable row: every precision, no CPU features.
pub(crate) const VARIANT: Variant = Variant {
    name: "none",
    needs: Features::NONE,
    f32: Some(&sgemm::SKERNEL),
    int8: Some(&qgemm::QKERNEL),
    bf16: Some(&bgemm::BKERNEL),
    init: None,
};
