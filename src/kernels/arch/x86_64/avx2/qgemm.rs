//! The int8 GEMM's AVX2 code: the 4 x 16 tile (`vpmaddubsw` without
//! saturation, see [`qgemm`](crate::kernels::qgemm)), the dequantizing
//! store of 16-column tiles and the row quantization (both shared with
//! [`avxvnni`](super::super::avxvnni)).

use crate::kernels::arch::types::{QKernel, Tile, TileFn};
use std::arch::x86_64::*;

tiles!(KERNELS: TileFn = tile_avx2, 1, 2, 3, 4);

/// AVX2 without VNNI: 4 x 16 tiles, s8 activations. The int8 code is
/// compiled with FMA enabled (the row quantization shares the f32 helpers),
/// so every x86 variant needs it.
pub(crate) static QKERNEL: QKernel = QKernel {
    mr: 4,
    nr: 16,
    a_offset: 0,
    tiles: &KERNELS,
    quantize_row: Some(quantize_row),
};

/// The `R x 16` tile with AVX2: `|w| · (a · sign(w))` pairs never
/// saturate (see the module docs).
///
/// # Safety
/// AVX2 is available; the tile's pointers are valid for R rows of 16
/// columns (see `qgemm::Tile`).
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
/// columns (see `qgemm::Tile`).
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

/// Quantizes one row with AVX2 (the same values as
/// [`quantize_row_scalar`](crate::kernels::qgemm::quantize_row_scalar):
/// min/max are exact, the scale is computed by the same scalar code, the
/// products and the rounding are the same IEEE operations lane by lane).
///
/// # Safety
/// AVX2 is available; `mul`, when given, has at least `x.len()` factors;
/// `dst` has `x.len().next_multiple_of(4)` bytes.
#[target_feature(enable = "avx2,fma")]
pub(crate) unsafe fn quantize_row(
    x: &[f32],
    mul: Option<&[f32]>,
    dst: &mut [u8],
    off: i32,
) -> (f32, i32) {
    let n = x.len();
    debug_assert!(dst.len() >= n && mul.is_none_or(|f| f.len() >= n));
    let ones = [1.0f32; 8];
    // Column factors: `mul`, or 1 (a multiply by 1 is exact).
    let (fp, fstep) = match mul {
        Some(f) => (f.as_ptr(), 8),
        None => (ones.as_ptr(), 0),
    };
    let load = |i: usize| {
        // SAFETY: i + 8 <= n: x and the factors have 8 values there.
        unsafe {
            _mm256_mul_ps(
                _mm256_loadu_ps(x.as_ptr().add(i)),
                _mm256_loadu_ps(fp.add(i / 8 * fstep)),
            )
        }
    };
    // Lanes i..n (fewer than 8), the others 0.
    let load_tail = |i: usize| {
        let mask = _mm256_cmpgt_epi32(
            _mm256_set1_epi32((n - i) as i32),
            _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7),
        );
        // SAFETY: only the lanes of `mask` (inside x and the factors) are
        // read; the others load 0.
        unsafe {
            let f = if fstep == 0 {
                _mm256_set1_ps(1.0)
            } else {
                _mm256_maskload_ps(fp.add(i), mask)
            };
            _mm256_mul_ps(_mm256_maskload_ps(x.as_ptr().add(i), mask), f)
        }
    };
    // Four independent running minima and maxima (see the AVX-512 form).
    let mut lo4 = [_mm256_setzero_ps(); 4];
    let mut hi4 = [_mm256_setzero_ps(); 4];
    let mut i = 0;
    while i + 32 <= n {
        for u in 0..4 {
            let v = load(i + 8 * u);
            lo4[u] = _mm256_min_ps(v, lo4[u]);
            hi4[u] = _mm256_max_ps(v, hi4[u]);
        }
        i += 32;
    }
    while i + 8 <= n {
        let v = load(i);
        lo4[0] = _mm256_min_ps(v, lo4[0]);
        hi4[0] = _mm256_max_ps(v, hi4[0]);
        i += 8;
    }
    if i < n {
        // The masked-out lanes are 0, which the range includes anyway.
        let v = load_tail(i);
        lo4[0] = _mm256_min_ps(v, lo4[0]);
        hi4[0] = _mm256_max_ps(v, hi4[0]);
    }
    // `vminps`/`vmaxps` return the second operand (the running value) when
    // the first is NaN, so a NaN never enters the range (as with the scalar
    // fold's `f32::min`); from here on no operand is NaN.
    let vlo = _mm256_min_ps(_mm256_min_ps(lo4[0], lo4[1]), _mm256_min_ps(lo4[2], lo4[3]));
    let vhi = _mm256_max_ps(_mm256_max_ps(hi4[0], hi4[1]), _mm256_max_ps(hi4[2], hi4[3]));
    let lo = {
        let s = _mm_min_ps(_mm256_castps256_ps128(vlo), _mm256_extractf128_ps::<1>(vlo));
        let s = _mm_min_ps(s, _mm_movehl_ps(s, s));
        _mm_cvtss_f32(_mm_min_ss(s, _mm_shuffle_ps::<1>(s, s)))
    };
    let hi = super::ops::hmax8(vhi);
    let (scale, inv, zp) = crate::kernels::qgemm::row_params(lo, hi);
    let vinv = _mm256_set1_ps(inv);
    let vzp = _mm256_set1_epi32(zp);
    let (vmin, vmax) = (_mm256_set1_epi32(-127), _mm256_set1_epi32(127));
    let big = _mm256_set1_ps(1e9);
    let nbig = _mm256_set1_ps(-1e9);
    // `clamp(round_half_even(v · inv) + zp, -127, 127)` in 8 lanes.
    let one = |v: __m256| {
        // No explicit rounding: `vcvtps2dq` rounds to nearest even (the
        // default MXCSR mode, which Rust code never changes), and the clamp
        // to ±1e9 is exact on rounded and unrounded values alike.
        let r = _mm256_mul_ps(v, vinv);
        // NaN -> 0 like the scalar `as i32` (the ordered compare is false
        // for NaN), then the same clamp.
        let r = _mm256_and_ps(r, _mm256_cmp_ps::<_CMP_ORD_Q>(r, r));
        let r = _mm256_min_ps(_mm256_max_ps(r, nbig), big);
        let qv = _mm256_add_epi32(_mm256_cvtps_epi32(r), vzp);
        _mm256_min_epi32(_mm256_max_epi32(qv, vmin), vmax)
    };
    // `q + off` as bytes: the wrapping byte add of the offset.
    let voff = _mm256_set1_epi8(off as i8);
    let order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    let d = dst.as_mut_ptr();
    let mut i = 0;
    // SAFETY: the loads as above; the stores write 32 bytes at i + 32 <= n.
    unsafe {
        while i + 32 <= n {
            let q0 = one(load(i));
            let q1 = one(load(i + 8));
            let q2 = one(load(i + 16));
            let q3 = one(load(i + 24));
            // Within each 128-bit lane: [q0 q1] then [q2 q3] as i16, then
            // bytes; the permute restores the order (values are in range,
            // so the saturating packs are exact).
            let w01 = _mm256_packs_epi32(q0, q1);
            let w23 = _mm256_packs_epi32(q2, q3);
            let b = _mm256_permutevar8x32_epi32(_mm256_packs_epi16(w01, w23), order);
            _mm256_storeu_si256(d.add(i).cast(), _mm256_add_epi8(b, voff));
            i += 32;
        }
    }
    let mut lanes = [0i32; 8];
    while i < n {
        let v = if i + 8 <= n { load(i) } else { load_tail(i) };
        // SAFETY: `lanes` holds 8 i32.
        unsafe { _mm256_storeu_si256(lanes.as_mut_ptr().cast(), one(v)) };
        let w = 8.min(n - i);
        for (dv, &q) in dst[i..i + w].iter_mut().zip(&lanes) {
            *dv = (q + off) as u8;
        }
        i += w;
    }
    dst[n..].fill((zp + off) as u8);
    (scale, zp)
}
