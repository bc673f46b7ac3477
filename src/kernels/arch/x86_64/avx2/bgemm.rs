//! The bf16 GEMM's AVX2 + FMA code: the 5 x 16 FMA emulation of `vdpbf16ps`
//! and the rounding of A.

use crate::kernels::arch::types::{BKernel, BKernelFn as Kernel, RoundA};
use std::arch::x86_64::*;

/// [`bgemm::round_row`](crate::kernels::bgemm::round_row) compiled for
/// AVX2 (vectorised).
///
/// # Safety
/// AVX2 is available.
#[target_feature(enable = "avx2")]
pub(crate) unsafe fn round_row(src: &[f32], dst: &mut [u32]) -> i16 {
    crate::kernels::bgemm::round_row(src, dst)
}

/// The `R x 16` tile emulated with AVX2 + FMA (same arithmetic as
/// `avx512::bgemm::kernel_f512`).
///
/// # Safety
/// AVX2 and FMA are available; A has R rows of `2 * kp` floats (as words) at
/// stride `lda`, `b` holds `kp * 16` words and C has R rows of 16 writable
/// floats at stride `ldc`.
#[target_feature(enable = "avx2,fma")]
#[allow(clippy::too_many_arguments)]
unsafe fn kernel_f256<const R: usize>(
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
    let hi_mask = _mm256_set1_epi32(0xFFFF_0000u32 as i32);
    let mut acc = [[_mm256_setzero_ps(); 2]; R];
    // SAFETY: all accesses stay inside the panels and the C tile (contract).
    unsafe {
        if load {
            for (i, row) in acc.iter_mut().enumerate() {
                row[0] = _mm256_loadu_ps(c.add(i * ldc));
                row[1] = _mm256_loadu_ps(c.add(i * ldc + 8));
            }
        }
        let mut b = b;
        let mut next = next;
        for q in 0..kp {
            _mm_prefetch::<_MM_HINT_T0>(next.cast());
            next = next.wrapping_add(16);
            let w0 = _mm256_loadu_si256(b.cast());
            let w1 = _mm256_loadu_si256(b.add(8).cast());
            let h0 = _mm256_castsi256_ps(_mm256_and_si256(w0, hi_mask));
            let h1 = _mm256_castsi256_ps(_mm256_and_si256(w1, hi_mask));
            let l0 = _mm256_castsi256_ps(_mm256_slli_epi32::<16>(w0));
            let l1 = _mm256_castsi256_ps(_mm256_slli_epi32::<16>(w1));
            for (i, row) in acc.iter_mut().enumerate() {
                // Element 2q first, then 2q + 1.
                let a0 = _mm256_broadcast_ss(&*a.add(i * lda + 2 * q));
                let a1 = _mm256_broadcast_ss(&*a.add(i * lda + 2 * q + 1));
                row[0] = _mm256_fmadd_ps(a0, h0, row[0]);
                row[1] = _mm256_fmadd_ps(a0, h1, row[1]);
                row[0] = _mm256_fmadd_ps(a1, l0, row[0]);
                row[1] = _mm256_fmadd_ps(a1, l1, row[1]);
            }
            b = b.add(16);
        }
        for (i, row) in acc.iter().enumerate() {
            _mm256_storeu_ps(c.add(i * ldc), row[0]);
            _mm256_storeu_ps(c.add(i * ldc + 8), row[1]);
        }
    }
}

/// The AVX2 tiles of 1..=5 rows.
pub(crate) const KERNELS: [Kernel; 5] = [
    kernel_f256::<1>,
    kernel_f256::<2>,
    kernel_f256::<3>,
    kernel_f256::<4>,
    kernel_f256::<5>,
];

/// AVX2 + FMA: 5 x 16 tiles (10 accumulators, 4 B vectors and 2
/// broadcasts: 16 registers) over 256-pair blocks, A rounded to floats.
pub(crate) static BKERNEL: BKernel = BKernel {
    mr: 5,
    nr: 16,
    kc: 256,
    tiles: &KERNELS,
    round_a: RoundA::Floats(round_row),
    race: false,
};
