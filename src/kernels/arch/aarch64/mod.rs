//! aarch64 kernels, one module per extension, chosen at run time
//! (`is_aarch64_feature_detected!`, on Linux and Apple platforms alike).
//! Each function has the target features of its extension enabled, so it
//! may only run once [`isa`](crate::kernels::isa) has reported them (the
//! safety contract of every call through the descriptors).
//!
//! | module | extension | f32 GEMM | row ops, attention | int8 GEMM | bf16 GEMM |
//! |---|---|---|---|---|---|
//! | [`neon`] | Advanced SIMD (every core) | 6 x 16 `fmla` | yes | dequantizing store, row quantization | 5 x 16 `fmla` emulation |
//! | [`dotprod`] | FEAT_DotProd | | | 6 x 16 `sdot` | |
//! | [`i8mm`] | FEAT_I8MM | | | 4 x 16 `smmla` | |
//!
//! FEAT_BF16's `bfdot`/`bfmmla` are not used: they round their partial sums
//! otherwise than the bf16 arithmetic every other row computes (see
//! [`bgemm`](crate::kernels::bgemm)), so they would give other bits.

pub(crate) mod dotprod;
pub(crate) mod i8mm;
pub(crate) mod neon;

use super::generic;
use crate::kernels::isa::{Features, Variant};

/// The aarch64 rows, best first (see [`isa`](crate::kernels::isa)).
pub static VARIANTS: [Variant; 4] = [
    Variant {
        name: "i8mm",
        needs: Features::DOTPROD.and(Features::I8MM),
        f32: None,
        int8: Some(&i8mm::QKERNEL),
        bf16: None,
        init: None,
    },
    Variant {
        name: "dotprod",
        needs: Features::DOTPROD,
        f32: None,
        int8: Some(&dotprod::QKERNEL),
        bf16: None,
        init: None,
    },
    Variant {
        name: "neon",
        needs: Features::NONE,
        f32: Some(&neon::sgemm::SKERNEL),
        int8: None,
        bf16: Some(&neon::bgemm::BKERNEL),
        init: None,
    },
    generic::VARIANT,
];
