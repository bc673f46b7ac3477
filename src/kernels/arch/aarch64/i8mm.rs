//! FEAT_I8MM (`smmla`: Neoverse V1/V2/N2, Graviton3/4, Apple M2 and later):
//! the int8 GEMM's 4 x 16 tile.
//!
//! `smmla` multiplies a 2 x 8 block of A (two rows, 8 k) by an 8 x 2 block
//! of B (two columns) into a 2 x 2 block of int32 sums: 32 products per
//! instruction, twice `sdot`'s. The packed panels hold groups of 4 k (the
//! layout every other row reads), so each step zips two groups into the
//! 8-k column pairs `smmla` reads (one `zip1`/`zip2` per pair of columns),
//! and a last odd group runs with zeros for its missing half. Integer sums
//! are exact, so the tile gives the bits of every row.

use crate::kernels::arch::types::{QKernel, Tile, TileFn};
use std::arch::aarch64::*;
use std::arch::asm;

/// `acc + A·Bᵀ` for the 2 x 8 blocks `a` (rows) and `b` (columns), as a 2 x 2
/// block `[r0c0, r0c1, r1c0, r1c1]`. (`vmmlaq_s32` is not stable in Rust
/// yet: the instruction itself.)
#[target_feature(enable = "neon,i8mm")]
#[inline]
fn smmla(mut acc: int32x4_t, a: int8x16_t, b: int8x16_t) -> int32x4_t {
    // SAFETY: `smmla` reads and writes only these registers; the CPU has
    // FEAT_I8MM (the target feature of this function).
    unsafe {
        asm!(
            "smmla {acc:v}.4s, {a:v}.16b, {b:v}.16b",
            acc = inout(vreg) acc,
            a = in(vreg) a,
            b = in(vreg) b,
            options(pure, nomem, nostack, preserves_flags)
        );
    }
    acc
}

/// The 8 bytes of row `r` of A at group `q` and `q + 1` (only group `q`
/// when `half`: the row ends there; the rest zero).
///
/// # Safety
/// Row `r` of A has `4·(q + 1)` bytes, and `4·(q + 2)` unless `half`.
#[target_feature(enable = "neon")]
#[inline]
unsafe fn a8(t: &Tile, r: usize, q: usize, half: bool) -> u64 {
    // SAFETY: in bounds by the contract.
    unsafe {
        let p = t.a.add(r * t.lda + 4 * q);
        if half {
            u64::from(p.cast::<u32>().read_unaligned())
        } else {
            p.cast::<u64>().read_unaligned()
        }
    }
}

/// The `R x 16` tile (R <= 4): row pairs `(0, 1)`, `(2, 3)` (an odd last
/// row is paired with itself and its copy dropped), 8 column pairs, per
/// step of 8 k: 8 B loads, 8 zips, 2 A pairs, 2·8 `smmla` into 16
/// accumulators.
///
/// # Safety
/// The CPU has FEAT_I8MM; the tile's pointers are valid for R rows of 16
/// columns (see `qgemm::Tile`).
#[target_feature(enable = "neon,i8mm")]
unsafe fn tile_smmla<const R: usize>(t: &Tile) {
    const { assert!(R <= 4) };
    let pairs = R.div_ceil(2);
    // SAFETY: the A rows hold kq·4 bytes, the panel kq·64 (contract); the
    // reads below stay inside them.
    unsafe {
        let mut acc = [[vdupq_n_s32(0); 8]; 2];
        let b = t.b.cast::<i8>();
        let mut q = 0;
        while q < t.kq {
            super::neon::prefetch(t.next.wrapping_add(64 * q));
            super::neon::prefetch(t.next.wrapping_add(64 * q + 64));
            let half = q + 1 == t.kq;
            // Groups q and q + 1 (zeros past the end) of the 16 columns.
            let g0: [int32x4_t; 4] =
                std::array::from_fn(|v| vreinterpretq_s32_s8(vld1q_s8(b.add(64 * q + 16 * v))));
            let g1: [int32x4_t; 4] = std::array::from_fn(|v| {
                if half {
                    vdupq_n_s32(0)
                } else {
                    vreinterpretq_s32_s8(vld1q_s8(b.add(64 * (q + 1) + 16 * v)))
                }
            });
            // Column pair 2v + h: [c k0-3, c k4-7, c+1 k0-3, c+1 k4-7].
            let cols: [int8x16_t; 8] = std::array::from_fn(|j| {
                let (v, h) = (j / 2, j % 2);
                vreinterpretq_s8_s32(if h == 0 {
                    vzip1q_s32(g0[v], g1[v])
                } else {
                    vzip2q_s32(g0[v], g1[v])
                })
            });
            for (p, row) in acc.iter_mut().enumerate().take(pairs) {
                let r0 = 2 * p;
                let r1 = (2 * p + 1).min(R - 1);
                let rows = vcombine_u64(
                    vcreate_u64(a8(t, r0, q, half)),
                    vcreate_u64(a8(t, r1, q, half)),
                );
                let rows = vreinterpretq_s8_u64(rows);
                for (v, &c) in row.iter_mut().zip(&cols) {
                    *v = smmla(*v, rows, c);
                }
            }
            q += 2;
        }
        // Back to rows: pair block j holds [r0 c2j, r0 c2j+1, r1 c2j, r1 c2j+1].
        let mut out = [[vdupq_n_s32(0); 4]; R];
        for (i, row) in out.iter_mut().enumerate() {
            let (p, lo) = (i / 2, i % 2 == 0);
            for (v, o) in row.iter_mut().enumerate() {
                let (x, y) = (
                    vreinterpretq_s64_s32(acc[p][2 * v]),
                    vreinterpretq_s64_s32(acc[p][2 * v + 1]),
                );
                *o = vreinterpretq_s32_s64(if lo {
                    vzip1q_s64(x, y)
                } else {
                    vzip2q_s64(x, y)
                });
            }
        }
        super::neon::qgemm::store16(t, &out);
    }
}

tiles!(KERNELS: TileFn = tile_smmla, 1, 2, 3, 4);

/// FEAT_I8MM: 4 x 16 tiles, s8 activations, the portable row quantization.
pub(crate) static QKERNEL: QKernel = QKernel {
    mr: 4,
    nr: 16,
    a_offset: 0,
    tiles: &KERNELS,
    quantize_row: Some(super::neon::qgemm::quantize_row),
};
