//! FEAT_DotProd (`sdot`: ARMv8.2+ cores such as Neoverse N1, Cortex-A76 and
//! later, Apple M1 and later): the int8 GEMM's 6 x 16 tile.
//!
//! `sdot` sums four s8 · s8 products into each int32 lane, the layout the
//! packed panels already have (for each group of 4 k, the 4 bytes of every
//! column), so A needs no offset (`qa` as s8, as the AVX2 and portable
//! rows). Integer sums are exact, so the tile gives the bits of every row.

use crate::kernels::arch::types::{QKernel, Tile, TileFn};
use std::arch::aarch64::*;
use std::arch::asm;

/// `acc + Σ` of the four byte products in each lane of `a` and `b`.
/// (`vdotq_s32` is not stable in Rust yet: the instruction itself.)
#[target_feature(enable = "neon,dotprod")]
#[inline]
pub(crate) fn sdot(mut acc: int32x4_t, a: int8x16_t, b: int8x16_t) -> int32x4_t {
    // SAFETY: `sdot` reads and writes only these registers; the CPU has
    // FEAT_DotProd (the target feature of this function).
    unsafe {
        asm!(
            "sdot {acc:v}.4s, {a:v}.16b, {b:v}.16b",
            acc = inout(vreg) acc,
            a = in(vreg) a,
            b = in(vreg) b,
            options(pure, nomem, nostack, preserves_flags)
        );
    }
    acc
}

/// The `R x 16` tile: per group of 4 k, four 16-byte B vectors (4 columns
/// each), the group's 4 bytes of every row of A broadcast, and 4·R `sdot`
/// into 4·R accumulators (24 at R = 6).
///
/// # Safety
/// The CPU has FEAT_DotProd; the tile's pointers are valid for R rows of 16
/// columns (see `qgemm::Tile`).
#[target_feature(enable = "neon,dotprod")]
unsafe fn tile_sdot<const R: usize>(t: &Tile) {
    // SAFETY: the A rows hold kq·4 bytes, the panel kq·64 (contract).
    unsafe {
        let mut acc = [[vdupq_n_s32(0); 4]; R];
        let mut b = t.b.cast::<i8>();
        let mut next = t.next;
        for q in 0..t.kq {
            super::neon::prefetch(next);
            next = next.wrapping_add(64);
            let bv: [int8x16_t; 4] = std::array::from_fn(|v| vld1q_s8(b.add(16 * v)));
            for (i, row) in acc.iter_mut().enumerate() {
                let word = t.a.add(i * t.lda + 4 * q).cast::<i32>().read_unaligned();
                let ai = vreinterpretq_s8_s32(vdupq_n_s32(word));
                for (v, &bq) in row.iter_mut().zip(&bv) {
                    *v = sdot(*v, bq, ai);
                }
            }
            b = b.add(64);
        }
        super::neon::qgemm::store16(t, &acc);
    }
}

tiles!(KERNELS: TileFn = tile_sdot, 1, 2, 3, 4, 5, 6);

/// FEAT_DotProd: 6 x 16 tiles, s8 activations, the portable row
/// quantization.
pub(crate) static QKERNEL: QKernel = QKernel {
    mr: 6,
    nr: 16,
    a_offset: 0,
    tiles: &KERNELS,
    quantize_row: Some(super::neon::qgemm::quantize_row),
};
