//! AVX512_BF16 (with AVX-512F/VL): the bf16 GEMM's `vdpbf16ps` 12 x 32 tile
//! and the `vcvtneps2bf16` rounding of A into pairs.

use crate::kernels::arch::types::{BKernel, BKernelFn as Kernel, RoundA};
use std::arch::x86_64::*;

/// One row of A rounded to bf16 pairs as
/// [`round_bf16_operand`](crate::kernels::bgemm::round_bf16_operand) does:
/// magnitudes below [`OPERAND_MIN`](crate::kernels::bgemm::OPERAND_MIN)
/// flushed ([`flush_small`](super::avx512::bgemm::flush_small)), then
/// `vcvtneps2bf16` (the rounding of
/// [`round_bf16`](crate::kernels::bgemm::round_bf16)), halves swapped so that
/// element `2q` is the high half.
///
/// # Safety
/// AVX512_BF16, AVX512VL and AVX-512F are available; `dst` holds at least
/// `src.len().div_ceil(2)` words.
#[target_feature(enable = "avx512f,avx512bf16,avx512vl")]
pub(crate) unsafe fn round_pairs(src: &[f32], dst: &mut [u32]) {
    let k = src.len();
    debug_assert!(dst.len() >= k.div_ceil(2));
    let (s, d) = (src.as_ptr(), dst.as_mut_ptr());
    let mut p = 0;
    while p < k {
        let rem = (k - p).min(16);
        let lanes = ((1u32 << rem) - 1) as u16;
        let words = ((1u32 << rem.div_ceil(2)) - 1) as u8;
        // SAFETY: the masked load reads only the `rem` floats src[p..p+rem]
        // and zeroes the rest; the masked store writes only the
        // rem.div_ceil(2) words d[p/2..], inside dst (contract).
        unsafe {
            let x = super::avx512::bgemm::flush_small(_mm512_maskz_loadu_ps(lanes, s.add(p)));
            let h: __m256i = std::mem::transmute(_mm512_cvtneps_pbh(x));
            let w = _mm256_ror_epi32::<16>(h);
            _mm256_mask_storeu_epi32(d.add(p / 2).cast(), words, w);
        }
        p += 16;
    }
}

/// The `R x 32` tile with `vdpbf16ps`.
///
/// # Safety
/// AVX512_BF16 and AVX-512F are available; A has R rows of `kp` words at
/// stride `lda`, `b` holds `kp * 32` words and C has R rows of 32 writable
/// floats at stride `ldc`.
#[target_feature(enable = "avx512f,avx512bf16")]
#[allow(clippy::too_many_arguments)]
unsafe fn kernel_bf16<const R: usize>(
    kp: usize,
    a: *const u32,
    lda: usize,
    b: *const u32,
    c: *mut f32,
    ldc: usize,
    load: bool,
    next: *const u32,
) {
    let mut acc = [[_mm512_setzero_ps(); 2]; R];
    // SAFETY: all accesses stay inside the panels and the C tile (contract);
    // the transmutes reinterpret 64-byte integer vectors as bf16 vectors (no
    // invalid bit patterns).
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
            // The next panel's rows (two 64-byte lines per row of this one).
            _mm_prefetch::<_MM_HINT_T0>(next.cast());
            _mm_prefetch::<_MM_HINT_T0>(next.wrapping_add(16).cast());
            next = next.wrapping_add(32);
            let b0: __m512bh = std::mem::transmute(_mm512_loadu_si512(b.cast()));
            let b1: __m512bh = std::mem::transmute(_mm512_loadu_si512(b.add(16).cast()));
            for (i, row) in acc.iter_mut().enumerate() {
                let ai: __m512bh =
                    std::mem::transmute(_mm512_set1_epi32(*a.add(i * lda + q) as i32));
                row[0] = _mm512_dpbf16_ps(row[0], ai, b0);
                row[1] = _mm512_dpbf16_ps(row[1], ai, b1);
            }
            b = b.add(32);
        }
        for (i, row) in acc.iter().enumerate() {
            _mm512_storeu_ps(c.add(i * ldc), row[0]);
            _mm512_storeu_ps(c.add(i * ldc + 16), row[1]);
        }
    }
}

/// The `vdpbf16ps` tiles of 1..=12 rows (index = rows - 1).
pub(crate) const KERNELS: [Kernel; 12] = [
    kernel_bf16::<1>,
    kernel_bf16::<2>,
    kernel_bf16::<3>,
    kernel_bf16::<4>,
    kernel_bf16::<5>,
    kernel_bf16::<6>,
    kernel_bf16::<7>,
    kernel_bf16::<8>,
    kernel_bf16::<9>,
    kernel_bf16::<10>,
    kernel_bf16::<11>,
    kernel_bf16::<12>,
];

/// AVX512_BF16: 12 x 32 `vdpbf16ps` tiles, A rounded to pairs (the
/// conversion needs AVX512VL).
pub(crate) static BKERNEL: BKernel = BKernel {
    mr: 12,
    nr: 32,
    kc: super::avx512::bgemm::KC,
    tiles: &KERNELS,
    round_a: RoundA::Pairs(round_pairs),
    race: true,
};
