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
//! `ops.rs` holds the row operations' vector code, written once as a macro
//! that `avx2::ops` and `avx512::ops` expand over their own vector type
//! (and `row_ops!` of [`arch`](super) gathers them into the module's `OPS`
//! table for the f32 descriptor). Each variant's descriptor (`SKERNEL`, `QKERNEL`,
//! `BKERNEL`) stands in the module of its tiles.

#[macro_use]
mod ops;

/// `pub(crate) const $name: [$ty; N]`: `$kernel::<R>` for the tile heights
/// `R` listed (index = rows - 1).
macro_rules! tiles {
    ($name:ident: $ty:ty = $kernel:ident, $($r:literal),*) => {
        pub(crate) const $name: [$ty; [$($r),*].len()] = [$($kernel::<$r>),*];
    };
}

pub(crate) mod avx2;
pub(crate) mod avx512;
pub(crate) mod avx512bf16;
pub(crate) mod avx512vnni;
pub(crate) mod avxvnni;
