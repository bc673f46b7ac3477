//! The bf16 GEMM's NEON tile: the 5 x 16 FMA emulation of the bf16
//! arithmetic (each product of two bf16 is exact in f32, so `fmla` in the
//! oracle's order gives its bits within the front's exponent bounds, as the
//! x86 emulations do).

use crate::kernels::arch::types::{BKernel, BKernelFn, RoundA};
use std::arch::aarch64::*;

/// The `R x 16` tile: per pair `q`, element `2q` (the high half of each
/// word of B) then `2q + 1` (the low half), one `fmla` each.
///
/// # Safety
/// A has R rows of `2 * kp` floats (as words) at stride `lda`, `b` holds
/// `kp * 16` words and C has R rows of 16 writable floats at stride `ldc`.
#[target_feature(enable = "neon")]
#[allow(clippy::too_many_arguments)]
unsafe fn kernel_rx16<const R: usize>(
    kp: usize,
    a: *const u32,
    lda: usize,
    b: *const u32,
    c: *mut f32,
    ldc: usize,
    load: bool,
    next: *const u32,
) {
    let a = a.cast::<f32>();
    let hi_mask = vdupq_n_u32(0xFFFF_0000);
    // SAFETY: all accesses stay inside the panels and the C tile (contract).
    unsafe {
        let mut acc = super::load_tile::<R>(c, ldc, load);
        let mut b = b;
        let mut next = next;
        for q in 0..kp {
            super::prefetch(next);
            next = next.wrapping_add(16);
            let w: [uint32x4_t; 4] = std::array::from_fn(|v| vld1q_u32(b.add(4 * v)));
            let hi = w.map(|w| vreinterpretq_f32_u32(vandq_u32(w, hi_mask)));
            let lo = w.map(|w| vreinterpretq_f32_u32(vshlq_n_u32::<16>(w)));
            for (i, row) in acc.iter_mut().enumerate() {
                let a0 = vld1q_dup_f32(a.add(i * lda + 2 * q));
                for (v, &h) in row.iter_mut().zip(&hi) {
                    *v = vfmaq_f32(*v, a0, h);
                }
            }
            for (i, row) in acc.iter_mut().enumerate() {
                let a1 = vld1q_dup_f32(a.add(i * lda + 2 * q + 1));
                for (v, &l) in row.iter_mut().zip(&lo) {
                    *v = vfmaq_f32(*v, a1, l);
                }
            }
            b = b.add(16);
        }
        super::store_tile(c, ldc, &acc);
    }
}

tiles!(KERNELS: BKernelFn = kernel_rx16, 1, 2, 3, 4, 5);

/// NEON: 5 x 16 emulation tiles over 256-pair blocks (the AVX2 panel
/// layout), A rounded to floats by the portable rounding.
pub(crate) static BKERNEL: BKernel = BKernel {
    mr: 5,
    nr: 16,
    kc: 256,
    tiles: &KERNELS,
    round_a: RoundA::Floats(crate::kernels::bgemm::round_row),
    race: false,
};
