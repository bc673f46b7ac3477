//! The f32 GEMM's NEON tile: 6 x 16, one `fmla` chain per element.

use crate::kernels::arch::types::{Kernel, SKernel};
use std::arch::aarch64::*;

/// The `R x 16` register tile (R <= 6): `C[0..R][0..16] = (load ? C : 0) +
/// A · Bpanel` over `kc` steps, one FMA chain per element in increasing `p`
/// (the definition, [`sgemm::fma_chain`](crate::kernels::sgemm::fma_chain)).
/// Per step: four B vectors, R broadcasts of A (`ld1r`), 4·R `fmla` into
/// 4·R accumulators (24 of the 32 registers at R = 6).
///
/// # Safety
/// A has R rows of `kc` floats at stride `lda`, `b` holds `kc * 16` floats,
/// and C has R rows of 16 writable floats at row stride `ldc`.
#[target_feature(enable = "neon")]
#[allow(clippy::too_many_arguments)]
unsafe fn kernel_rx16<const R: usize>(
    kc: usize,
    a: *const f32,
    lda: usize,
    b: *const f32,
    c: *mut f32,
    ldc: usize,
    load: bool,
    next: *const f32,
) {
    // SAFETY: all accesses stay inside the panels and the C tile (contract).
    unsafe {
        let mut acc = super::load_tile::<R>(c, ldc, load);
        let mut b = b;
        let mut next = next;
        for p in 0..kc {
            // One 64-byte line of the next panel per row of this one.
            super::prefetch(next);
            next = next.wrapping_add(16);
            let bv = [
                vld1q_f32(b),
                vld1q_f32(b.add(4)),
                vld1q_f32(b.add(8)),
                vld1q_f32(b.add(12)),
            ];
            for (i, row) in acc.iter_mut().enumerate() {
                let ai = vld1q_dup_f32(a.add(i * lda + p));
                for (v, &bq) in row.iter_mut().zip(&bv) {
                    *v = vfmaq_f32(*v, ai, bq);
                }
            }
            b = b.add(16);
        }
        super::store_tile(c, ldc, &acc);
    }
}

tiles!(KERNELS: Kernel = kernel_rx16, 1, 2, 3, 4, 5, 6);

/// NEON: 6 x 16 tiles over 384-deep blocks (the AVX2 panel layout, so
/// packed files are shared), the NEON row operations.
pub(crate) static SKERNEL: SKernel = SKernel {
    mr: 6,
    nr: 16,
    kc: 384,
    tiles: &KERNELS,
    ops: &super::ops::OPS,
};
