//! The f32 GEMM's AVX2 + FMA code: the 6 x 16 register tile and the 8 x 8
//! transposes that pack B panels (used with every ISA: AVX-512 implies AVX2).

use crate::kernels::arch::types::{Kernel, SKernel};
use std::arch::x86_64::*;

/// Transposes 8 rows x `kc` columns (`kc` a multiple of 8) of `src` (row
/// stride `ld`) into `kc` rows of 8 floats at `dst` (row stride `ldd`), by
/// 8 x 8 register transposes.
///
/// # Safety
/// AVX2 is available; the 8 x kc source block and the kc x 8 destination
/// block are in bounds.
#[target_feature(enable = "avx2,fma")]
pub(crate) unsafe fn pack_transposed_8(
    src: *const f32,
    ld: usize,
    kc: usize,
    dst: *mut f32,
    ldd: usize,
) {
    let mut p = 0;
    while p < kc {
        // SAFETY: every load reads 8 floats of a row r < 8 at columns
        // p..p+8 <= kc, every store 8 floats of dst row p + q < kc (contract).
        unsafe {
            let r = |i: usize| _mm256_loadu_ps(src.add(i * ld + p));
            let (r0, r1, r2, r3) = (r(0), r(1), r(2), r(3));
            let (r4, r5, r6, r7) = (r(4), r(5), r(6), r(7));
            let t0 = _mm256_unpacklo_ps(r0, r1);
            let t1 = _mm256_unpackhi_ps(r0, r1);
            let t2 = _mm256_unpacklo_ps(r2, r3);
            let t3 = _mm256_unpackhi_ps(r2, r3);
            let t4 = _mm256_unpacklo_ps(r4, r5);
            let t5 = _mm256_unpackhi_ps(r4, r5);
            let t6 = _mm256_unpacklo_ps(r6, r7);
            let t7 = _mm256_unpackhi_ps(r6, r7);
            let s0 = _mm256_shuffle_ps::<0x44>(t0, t2);
            let s1 = _mm256_shuffle_ps::<0xEE>(t0, t2);
            let s2 = _mm256_shuffle_ps::<0x44>(t1, t3);
            let s3 = _mm256_shuffle_ps::<0xEE>(t1, t3);
            let s4 = _mm256_shuffle_ps::<0x44>(t4, t6);
            let s5 = _mm256_shuffle_ps::<0xEE>(t4, t6);
            let s6 = _mm256_shuffle_ps::<0x44>(t5, t7);
            let s7 = _mm256_shuffle_ps::<0xEE>(t5, t7);
            let d = dst.add(p * ldd);
            _mm256_storeu_ps(d, _mm256_permute2f128_ps::<0x20>(s0, s4));
            _mm256_storeu_ps(d.add(ldd), _mm256_permute2f128_ps::<0x20>(s1, s5));
            _mm256_storeu_ps(d.add(2 * ldd), _mm256_permute2f128_ps::<0x20>(s2, s6));
            _mm256_storeu_ps(d.add(3 * ldd), _mm256_permute2f128_ps::<0x20>(s3, s7));
            _mm256_storeu_ps(d.add(4 * ldd), _mm256_permute2f128_ps::<0x31>(s0, s4));
            _mm256_storeu_ps(d.add(5 * ldd), _mm256_permute2f128_ps::<0x31>(s1, s5));
            _mm256_storeu_ps(d.add(6 * ldd), _mm256_permute2f128_ps::<0x31>(s2, s6));
            _mm256_storeu_ps(d.add(7 * ldd), _mm256_permute2f128_ps::<0x31>(s3, s7));
        }
        p += 8;
    }
}

/// The `R x 16` register tile (R <= 6): `C[0..R][0..16] = (load ? C : 0) +
/// A · Bpanel` over `kc` steps, one FMA chain per element. A is read in place:
/// row `i` of the tile is `a[i·lda..i·lda + kc]`.
///
/// # Safety
/// AVX2 and FMA are available; A has R rows of `kc` floats at stride `lda`,
/// `b` holds `kc * 16` floats, and C has R rows of 16 writable floats at row
/// stride `ldc`.
#[target_feature(enable = "avx2,fma")]
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
        let mut acc = [[_mm256_setzero_ps(); 2]; R];
        if load {
            for (i, row) in acc.iter_mut().enumerate() {
                row[0] = _mm256_loadu_ps(c.add(i * ldc));
                row[1] = _mm256_loadu_ps(c.add(i * ldc + 8));
            }
        }
        let mut b = b;
        let mut next = next;
        for p in 0..kc {
            // One 64-byte line of the next panel per row of this one.
            _mm_prefetch::<_MM_HINT_T0>(next.cast());
            next = next.wrapping_add(16);
            let b0 = _mm256_loadu_ps(b);
            let b1 = _mm256_loadu_ps(b.add(8));
            for (i, row) in acc.iter_mut().enumerate() {
                let ai = _mm256_broadcast_ss(&*a.add(i * lda + p));
                row[0] = _mm256_fmadd_ps(ai, b0, row[0]);
                row[1] = _mm256_fmadd_ps(ai, b1, row[1]);
            }
            b = b.add(16);
        }
        for (i, row) in acc.iter().enumerate() {
            _mm256_storeu_ps(c.add(i * ldc), row[0]);
            _mm256_storeu_ps(c.add(i * ldc + 8), row[1]);
        }
    }
}

/// The AVX2 tiles of 1..=6 rows (index = rows - 1).
pub(crate) const KERNELS: [Kernel; 6] = [
    kernel_rx16::<1>,
    kernel_rx16::<2>,
    kernel_rx16::<3>,
    kernel_rx16::<4>,
    kernel_rx16::<5>,
    kernel_rx16::<6>,
];

/// AVX2 + FMA: 6 x 16 tiles over 384-deep blocks, the AVX2 row operations.
pub(crate) static SKERNEL: SKernel = SKernel {
    mr: 6,
    nr: 16,
    kc: 384,
    tiles: &KERNELS,
    ops: &super::ops::OPS,
};
