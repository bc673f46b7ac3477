//! x86-64 kernels, one module per ISA. Each function here has the target
//! features of its ISA enabled, so it may only run once
//! [`isa`](crate::kernels::isa) has reported that ISA (that is the safety
//! contract of every `unsafe` call into these modules).
//!
//! | module | ISA | f32 GEMM | row ops | int8 GEMM | bf16 GEMM |
//! |---|---|---|---|---|---|
//! | [`avx2`] | AVX2 + FMA | 6 x 16 tile, B packing transposes | yes | 4 x 16 tile (`vpmaddubsw`), 16-column store, row quantization (also for AVX-VNNI) | 5 x 16 emulation, A rounding |
//! | [`avx512`] | AVX-512F/BW | 12 x 32 tile | yes | row quantization | 12 x 32 emulation, A rounding, operand flush |
//! | [`avx512vnni`] | AVX-512 VNNI | | | 12 x 32 tile | |
//! | [`avxvnni`] | AVX-VNNI | | | 6 x 16 tile | |
//! | [`avx512bf16`] | AVX512_BF16 | | | | 12 x 32 `vdpbf16ps` tile, A rounding to pairs |
//!
//! `avx2::ops` and `avx512::ops` expand the row operations' vector code of
//! [`simd`](super::simd) over their own vector type (and `row_ops!` of
//! [`arch`](super) gathers them into the module's `OPS` table for the f32
//! descriptor). Each descriptor (`SKERNEL`, `QKERNEL`, `BKERNEL`) stands in
//! the module of its tiles; [`VARIANTS`] is the target's table of rows.

pub(crate) mod avx2;
pub(crate) mod avx512;
pub(crate) mod avx512bf16;
pub(crate) mod avx512vnni;
pub(crate) mod avxvnni;

use super::generic;
use crate::kernels::isa::{Features, Variant};

/// What every x86-64 row needs: the rows above `avx2` build on its packing
/// and quantization code.
const BASE: Features = Features::AVX2.and(Features::FMA);
/// AVX-512 F and BW.
const AVX512: Features = BASE.and(Features::AVX512F).and(Features::AVX512BW);

/// The x86-64 rows, best first (see [`isa`](crate::kernels::isa)).
pub static VARIANTS: [Variant; 6] = [
    Variant {
        name: "avx512bf16",
        needs: AVX512.and(Features::AVX512VL).and(Features::AVX512BF16),
        f32: None,
        int8: None,
        bf16: Some(&avx512bf16::BKERNEL),
        init: None,
    },
    Variant {
        name: "avx512vnni",
        needs: AVX512.and(Features::AVX512VNNI),
        f32: None,
        int8: Some(&avx512vnni::QKERNEL),
        bf16: None,
        init: None,
    },
    Variant {
        name: "avx512",
        needs: AVX512,
        f32: Some(&avx512::sgemm::SKERNEL),
        int8: None,
        bf16: Some(&avx512::bgemm::BKERNEL),
        init: None,
    },
    Variant {
        name: "avxvnni",
        needs: BASE.and(Features::AVXVNNI),
        f32: None,
        int8: Some(&avxvnni::QKERNEL),
        bf16: None,
        init: None,
    },
    Variant {
        name: "avx2",
        needs: BASE,
        f32: Some(&avx2::sgemm::SKERNEL),
        int8: Some(&avx2::qgemm::QKERNEL),
        bf16: Some(&avx2::bgemm::BKERNEL),
        init: None,
    },
    generic::VARIANT,
];
