//! The int8 rows' NEON parts (shared by the `sdot` and `smmla` tiles): the
//! dequantizing store and the activation row quantization.

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

/// Quantizes one row with NEON (the same values as
/// [`quantize_row_scalar`](crate::kernels::qgemm::quantize_row_scalar):
/// min/max are exact, the scale is computed by the same scalar code, the
/// products and the rounding are the same IEEE operations lane by lane).
///
/// # Safety
/// `mul`, when given, has at least `x.len()` factors; `dst` has
/// `x.len().next_multiple_of(4)` bytes.
#[target_feature(enable = "neon")]
pub(crate) unsafe fn quantize_row(
    x: &[f32],
    mul: Option<&[f32]>,
    dst: &mut [u8],
    off: i32,
) -> (f32, i32) {
    let n = x.len();
    debug_assert!(dst.len() >= n.next_multiple_of(4) && mul.is_none_or(|f| f.len() >= n));
    // Values i..i + 4 (each times its column factor).
    let load = |i: usize| {
        // SAFETY: i + 4 <= n: x and the factors have 4 values there.
        unsafe {
            let v = vld1q_f32(x.as_ptr().add(i));
            match mul {
                Some(f) => vmulq_f32(v, vld1q_f32(f.as_ptr().add(i))),
                None => v,
            }
        }
    };
    // Values i..n (fewer than 4), the other lanes 0 (inside the range
    // anyway; their bytes are never stored).
    let load_tail = |i: usize| {
        let mut v = [0f32; 4];
        for (d, c) in v.iter_mut().zip(i..n) {
            *d = mul.map_or(x[c], |f| x[c] * f[c]);
        }
        // SAFETY: `v` holds 4 floats.
        unsafe { vld1q_f32(v.as_ptr()) }
    };
    // Four independent running minima and maxima. `fminnm`/`fmaxnm` return
    // the other operand when one is a (quiet) NaN, as the scalar fold's
    // `f32::min`/`f32::max` do, so a NaN never enters the range.
    let mut lo4 = [vdupq_n_f32(0.0); 4];
    let mut hi4 = [vdupq_n_f32(0.0); 4];
    let mut i = 0;
    while i + 16 <= n {
        for u in 0..4 {
            let v = load(i + 4 * u);
            lo4[u] = vminnmq_f32(lo4[u], v);
            hi4[u] = vmaxnmq_f32(hi4[u], v);
        }
        i += 16;
    }
    while i + 4 <= n {
        let v = load(i);
        lo4[0] = vminnmq_f32(lo4[0], v);
        hi4[0] = vmaxnmq_f32(hi4[0], v);
        i += 4;
    }
    if i < n {
        let v = load_tail(i);
        lo4[0] = vminnmq_f32(lo4[0], v);
        hi4[0] = vmaxnmq_f32(hi4[0], v);
    }
    let lo = vminnmvq_f32(vminnmq_f32(
        vminnmq_f32(lo4[0], lo4[1]),
        vminnmq_f32(lo4[2], lo4[3]),
    ));
    let hi = vmaxnmvq_f32(vmaxnmq_f32(
        vmaxnmq_f32(hi4[0], hi4[1]),
        vmaxnmq_f32(hi4[2], hi4[3]),
    ));
    let (scale, inv, zp) = crate::kernels::qgemm::row_params(lo, hi);
    let vinv = vdupq_n_f32(inv);
    let (big, nbig) = (vdupq_n_f32(1e9), vdupq_n_f32(-1e9));
    let (vzp, voff) = (vdupq_n_s32(zp), vdupq_n_s32(off));
    let (vmin, vmax) = (vdupq_n_s32(-127), vdupq_n_s32(127));
    // `clamp(round_half_even(v · inv) + zp, -127, 127) + off` in 4 lanes.
    let one = |v: float32x4_t| {
        let r = vmulq_f32(v, vinv);
        // `fmax`/`fmin` keep a NaN (unlike the range's `fmaxnm`), and
        // `fcvtns` (round to nearest, ties to even) maps it to 0 as the
        // scalar `as i32` does; the clamp to ±1e9 is exact on rounded and
        // unrounded values alike.
        let r = vminq_f32(vmaxq_f32(r, nbig), big);
        let q = vaddq_s32(vcvtnq_s32_f32(r), vzp);
        vaddq_s32(vminq_s32(vmaxq_s32(q, vmin), vmax), voff)
    };
    // `q + off` as bytes: the truncating narrows keep the low byte, which
    // is the wrapping `as u8` of the scalar form.
    let bytes8 = |a: int32x4_t, b: int32x4_t| vmovn_s16(vcombine_s16(vmovn_s32(a), vmovn_s32(b)));
    let d = dst.as_mut_ptr();
    let mut i = 0;
    // SAFETY: the loads as above; the stores write 16 bytes at i + 16 <= n.
    unsafe {
        while i + 16 <= n {
            let b0 = bytes8(one(load(i)), one(load(i + 4)));
            let b1 = bytes8(one(load(i + 8)), one(load(i + 12)));
            vst1q_u8(d.add(i), vreinterpretq_u8_s8(vcombine_s8(b0, b1)));
            i += 16;
        }
    }
    let mut lanes = [0i32; 4];
    while i < n {
        let v = if i + 4 <= n { load(i) } else { load_tail(i) };
        // SAFETY: `lanes` holds 4 i32.
        unsafe { vst1q_s32(lanes.as_mut_ptr(), one(v)) };
        let w = 4.min(n - i);
        for (dv, &q) in dst[i..i + w].iter_mut().zip(&lanes) {
            *dv = q as u8;
        }
        i += w;
    }
    dst[n..].fill((zp + off) as u8);
    (scale, zp)
}
