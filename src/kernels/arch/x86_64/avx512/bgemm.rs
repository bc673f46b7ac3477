//! The bf16 GEMM's AVX-512F/BW code: the 12 x 32 FMA emulation of
//! `vdpbf16ps`, the rounding of A, and the vector operand flush (also used by
//! [`avx512bf16`](super::super::avx512bf16)).

use crate::kernels::arch::types::{BKernel, BKernelFn as Kernel, RoundA};
use crate::kernels::bgemm::OPERAND_FLUSH_BITS;
use std::arch::x86_64::*;

/// [`bgemm::round_row`](crate::kernels::bgemm::round_row) compiled for
/// AVX-512 (vectorised).
///
/// # Safety
/// AVX-512F and AVX-512BW are available.
#[target_feature(enable = "avx512f,avx512bw,avx2")]
pub(crate) unsafe fn round_row(src: &[f32], dst: &mut [u32]) -> i16 {
    crate::kernels::bgemm::round_row(src, dst)
}

/// The lanes of `x` of magnitude below
/// [`OPERAND_MIN`](crate::kernels::bgemm::OPERAND_MIN) replaced by a zero of
/// their sign (NaN and the rest unchanged): the flush of
/// [`round_bf16_operand`](crate::kernels::bgemm::round_bf16_operand), before
/// `vcvtneps2bf16`.
///
/// # Safety
/// AVX-512F is available.
#[target_feature(enable = "avx512f")]
#[inline]
pub(crate) unsafe fn flush_small(x: __m512) -> __m512 {
    let xi = _mm512_castps_si512(x);
    let abs = _mm512_and_si512(xi, _mm512_set1_epi32(0x7FFF_FFFF));
    let small = _mm512_cmplt_epu32_mask(abs, _mm512_set1_epi32(OPERAND_FLUSH_BITS as i32));
    let sign = _mm512_set1_epi32(0x8000_0000u32 as i32);
    _mm512_castsi512_ps(_mm512_mask_and_epi32(xi, small, xi, sign))
}

/// The `R x 32` tile emulated with AVX-512 FMA (exact when the tile's
/// exponent bound holds, see the [`bgemm`](crate::kernels::bgemm) module
/// docs).
///
/// # Safety
/// AVX-512F and AVX-512BW are available; A has R rows of `2 * kp` floats (as words) at
/// stride `lda`, `b` holds `kp * 32` words and C has R rows of 32 writable
/// floats at stride `ldc`.
#[target_feature(enable = "avx512f,avx512bw,avx2,fma")]
#[allow(clippy::too_many_arguments)]
unsafe fn kernel_f512<const R: usize>(
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
    // The high 16-bit halves (a mask register, not a vector one: the 12 x 32
    // tile needs 24 accumulators, 4 B vectors and a broadcast).
    const HI: u32 = 0xAAAA_AAAA;
    let mut acc = [[_mm512_setzero_ps(); 2]; R];
    // SAFETY: all accesses stay inside the panels and the C tile (contract).
    unsafe {
        if load {
            for (i, row) in acc.iter_mut().enumerate() {
                row[0] = _mm512_loadu_ps(c.add(i * ldc));
                row[1] = _mm512_loadu_ps(c.add(i * ldc + 16));
            }
        }
        let mut b = b;
        let mut next = next;
        for q in 0..kp {
            _mm_prefetch::<_MM_HINT_T0>(next.cast());
            _mm_prefetch::<_MM_HINT_T0>(next.wrapping_add(16).cast());
            next = next.wrapping_add(32);
            let w0 = _mm512_loadu_si512(b.cast());
            let w1 = _mm512_loadu_si512(b.add(16).cast());
            let h0 = _mm512_castsi512_ps(_mm512_maskz_mov_epi16(HI, w0));
            let h1 = _mm512_castsi512_ps(_mm512_maskz_mov_epi16(HI, w1));
            let l0 = _mm512_castsi512_ps(_mm512_slli_epi32::<16>(w0));
            let l1 = _mm512_castsi512_ps(_mm512_slli_epi32::<16>(w1));
            for (i, row) in acc.iter_mut().enumerate() {
                // Element 2q first, then 2q + 1.
                let a0 = _mm512_set1_ps(*a.add(i * lda + 2 * q));
                let a1 = _mm512_set1_ps(*a.add(i * lda + 2 * q + 1));
                row[0] = _mm512_fmadd_ps(a0, h0, row[0]);
                row[1] = _mm512_fmadd_ps(a0, h1, row[1]);
                row[0] = _mm512_fmadd_ps(a1, l0, row[0]);
                row[1] = _mm512_fmadd_ps(a1, l1, row[1]);
            }
            b = b.add(32);
        }
        for (i, row) in acc.iter().enumerate() {
            _mm512_storeu_ps(c.add(i * ldc), row[0]);
            _mm512_storeu_ps(c.add(i * ldc + 16), row[1]);
        }
    }
}

/// The AVX-512F tiles of 1..=12 rows.
pub(crate) const KERNELS: [Kernel; 12] = [
    kernel_f512::<1>,
    kernel_f512::<2>,
    kernel_f512::<3>,
    kernel_f512::<4>,
    kernel_f512::<5>,
    kernel_f512::<6>,
    kernel_f512::<7>,
    kernel_f512::<8>,
    kernel_f512::<9>,
    kernel_f512::<10>,
    kernel_f512::<11>,
    kernel_f512::<12>,
];

/// Pairs per block of the 512-bit kernels (a 24 KiB panel; 128..256
/// measured alike), also those of [`avx512bf16`](super::super::avx512bf16).
pub(crate) const KC: usize = 192;

/// AVX-512F/BW: 12 x 32 FMA emulation tiles, A rounded to floats.
pub(crate) static BKERNEL: BKernel = BKernel {
    mr: 12,
    nr: 32,
    kc: KC,
    tiles: &KERNELS,
    round_a: RoundA::Floats(round_row),
    race: false,
};
