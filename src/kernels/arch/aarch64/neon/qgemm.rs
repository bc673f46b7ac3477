//! The int8 tiles' dequantizing store with NEON (shared by the `sdot` and
//! `smmla` tiles).

use crate::kernels::arch::types::Tile;
use std::arch::aarch64::*;

/// Stores an `R x 16` tile of int32 sums as
/// [`qgemm::dequant`](crate::kernels::qgemm::dequant) does, lane by lane:
/// `(acc - zc · wsum) as f32 · (sa · sw)`, plus C when accumulating (the
/// same IEEE operations as every other row).
///
/// # Safety
/// The tile's pointers are valid for R rows of 16 columns (see
/// `qgemm::Tile`).
#[target_feature(enable = "neon")]
#[inline]
pub(crate) unsafe fn store16<const R: usize>(t: &Tile, acc: &[[int32x4_t; 4]; R]) {
    // SAFETY: the column arrays hold 16 entries, C has R rows of 16.
    unsafe {
        let sw: [float32x4_t; 4] = std::array::from_fn(|q| vld1q_f32(t.sw.add(4 * q)));
        let ws: [int32x4_t; 4] = std::array::from_fn(|q| vld1q_s32(t.wsum.add(4 * q)));
        for (i, row) in acc.iter().enumerate() {
            let zc = vdupq_n_s32(*t.zc.add(i));
            let sa = vdupq_n_f32(*t.sa.add(i));
            for q in 0..4 {
                let tv = vsubq_s32(row[q], vmulq_s32(zc, ws[q]));
                let v = vmulq_f32(vcvtq_f32_s32(tv), vmulq_f32(sa, sw[q]));
                let cp = t.c.add(i * t.ldc + 4 * q);
                let v = if t.load {
                    vaddq_f32(vld1q_f32(cp), v)
                } else {
                    v
                };
                vst1q_f32(cp, v);
            }
        }
    }
}
