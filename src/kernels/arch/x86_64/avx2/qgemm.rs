//! The int8 GEMM's AVX2 code: the 4 x 16 tile (`vpmaddubsw` without
//! saturation, see [`qgemm`](crate::kernels::qgemm)) and the dequantizing
//! store of 16-column tiles (shared with [`avxvnni`](super::super::avxvnni)).

use crate::kernels::qgemm::{Tile, TileFn};
use std::arch::x86_64::*;

tiles!(KERNELS: TileFn = tile_avx2, 1, 2, 3, 4);

/// The `R x 16` tile with AVX2: `|w| · (a · sign(w))` pairs never
/// saturate (see the module docs).
///
/// # Safety
/// AVX2 is available; the tile's pointers are valid for R rows of 16
/// columns (see `qgemm::gemm_cols`).
#[target_feature(enable = "avx2,fma")]
unsafe fn tile_avx2<const R: usize>(t: &Tile) {
    // SAFETY: all accesses stay inside A's R rows, the panel, the column
    // arrays (16 entries) and C's R x 16 tile (contract).
    unsafe {
        let ones = _mm256_set1_epi16(1);
        let mut acc = [[_mm256_setzero_si256(); 2]; R];
        let mut b = t.b;
        let mut next = t.next;
        for q in 0..t.kq {
            _mm_prefetch::<_MM_HINT_T0>(next.cast());
            next = next.wrapping_add(64);
            let b0 = _mm256_loadu_si256(b.cast());
            let b1 = _mm256_loadu_si256(b.add(32).cast());
            let (u0, u1) = (_mm256_abs_epi8(b0), _mm256_abs_epi8(b1));
            for (i, row) in acc.iter_mut().enumerate() {
                let ai =
                    _mm256_set1_epi32(t.a.add(i * t.lda + 4 * q).cast::<i32>().read_unaligned());
                let p0 = _mm256_maddubs_epi16(u0, _mm256_sign_epi8(ai, b0));
                let p1 = _mm256_maddubs_epi16(u1, _mm256_sign_epi8(ai, b1));
                row[0] = _mm256_add_epi32(row[0], _mm256_madd_epi16(p0, ones));
                row[1] = _mm256_add_epi32(row[1], _mm256_madd_epi16(p1, ones));
            }
            b = b.add(64);
        }
        store8(t, &acc);
    }
}

/// The dequantizing store of an `R x 16` tile of int32 sums.
///
/// # Safety
/// AVX2 is available; the tile's pointers are valid for R rows of 16
/// columns (see `qgemm::gemm_cols`).
#[target_feature(enable = "avx2,fma")]
#[inline]
pub(crate) unsafe fn store8<const R: usize>(t: &Tile, acc: &[[__m256i; 2]; R]) {
    // SAFETY: the column arrays hold 16 entries, C has R rows of 16.
    unsafe {
        let sw = [_mm256_loadu_ps(t.sw), _mm256_loadu_ps(t.sw.add(8))];
        let ws = [
            _mm256_loadu_si256(t.wsum.cast()),
            _mm256_loadu_si256(t.wsum.add(8).cast()),
        ];
        for (i, row) in acc.iter().enumerate() {
            let zc = _mm256_set1_epi32(*t.zc.add(i));
            let sa = _mm256_set1_ps(*t.sa.add(i));
            for h in 0..2 {
                let tv = _mm256_sub_epi32(row[h], _mm256_mullo_epi32(zc, ws[h]));
                let v = _mm256_mul_ps(_mm256_cvtepi32_ps(tv), _mm256_mul_ps(sa, sw[h]));
                let cp = t.c.add(i * t.ldc + 8 * h);
                let v = if t.load {
                    _mm256_add_ps(_mm256_loadu_ps(cp), v)
                } else {
                    v
                };
                _mm256_storeu_ps(cp, v);
            }
        }
    }
}
