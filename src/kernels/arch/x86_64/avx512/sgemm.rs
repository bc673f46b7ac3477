//! The f32 GEMM's AVX-512F code: the 12 x 32 register tile.

use crate::kernels::arch::types::{Kernel, SKernel};
use std::arch::x86_64::*;

/// The `R x 32` register tile (R <= 12) with AVX-512F (same arithmetic as
/// `avx2::sgemm::kernel_rx16`).
///
/// # Safety
/// AVX-512F is available; A has R rows of `kc` floats at stride `lda`, `b`
/// holds `kc * 32` floats, and C has R rows of 32 writable floats at row
/// stride `ldc`.
#[target_feature(enable = "avx512f,avx2,fma")]
#[allow(clippy::too_many_arguments)]
unsafe fn kernel_rx32<const R: usize>(
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
        let mut acc = [[_mm512_setzero_ps(); 2]; R];
        if load {
            for (i, row) in acc.iter_mut().enumerate() {
                row[0] = _mm512_loadu_ps(c.add(i * ldc));
                row[1] = _mm512_loadu_ps(c.add(i * ldc + 16));
            }
        }
        let mut b = b;
        let mut next = next;
        for p in 0..kc {
            // The next panel's rows (two 64-byte lines per row of this one).
            _mm_prefetch::<_MM_HINT_T0>(next.cast());
            _mm_prefetch::<_MM_HINT_T0>(next.wrapping_add(16).cast());
            next = next.wrapping_add(32);
            let b0 = _mm512_loadu_ps(b);
            let b1 = _mm512_loadu_ps(b.add(16));
            for (i, row) in acc.iter_mut().enumerate() {
                let ai = _mm512_set1_ps(*a.add(i * lda + p));
                row[0] = _mm512_fmadd_ps(ai, b0, row[0]);
                row[1] = _mm512_fmadd_ps(ai, b1, row[1]);
            }
            b = b.add(32);
        }
        for (i, row) in acc.iter().enumerate() {
            _mm512_storeu_ps(c.add(i * ldc), row[0]);
            _mm512_storeu_ps(c.add(i * ldc + 16), row[1]);
        }
    }
}

/// The AVX-512 tiles of 1..=12 rows (index = rows - 1).
pub(crate) const KERNELS: [Kernel; 12] = [
    kernel_rx32::<1>,
    kernel_rx32::<2>,
    kernel_rx32::<3>,
    kernel_rx32::<4>,
    kernel_rx32::<5>,
    kernel_rx32::<6>,
    kernel_rx32::<7>,
    kernel_rx32::<8>,
    kernel_rx32::<9>,
    kernel_rx32::<10>,
    kernel_rx32::<11>,
    kernel_rx32::<12>,
];

/// AVX-512F: 12 x 32 tiles over 256-deep blocks, the AVX-512 row
/// operations (allowed from `EMBD_SIMD=avxvnni` on).
pub(crate) static SKERNEL: SKernel = SKernel {
    mr: 12,
    nr: 32,
    kc: 256,
    tiles: &KERNELS,
    ops: &super::ops::OPS,
};
