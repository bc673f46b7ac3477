//! The row operations with Advanced SIMD (NEON): `V` is four `float32x4_t`
//! (lanes 0..4, 4..8, 8..12, 12..16). `min`, `max` and the reductions
//! follow x86's semantics and tree exactly (see [`simd`](super::super::super::simd)),
//! so every result has the bits of the x86 and portable rows.

use crate::kernels::ops::consts::*;
use std::arch::aarch64::*;

/// Vectors the activation loop runs interleaved: 32 registers hold four GELU
/// chains of four registers each with room for their constants.
const ACT_VECTORS: usize = 4;

#[derive(Clone, Copy)]
struct V([float32x4_t; 4]);
type M = [uint32x4_t; 4];

#[target_feature(enable = "neon")]
#[inline]
fn map(a: V, f: impl Fn(float32x4_t) -> float32x4_t) -> V {
    V(a.0.map(f))
}

#[target_feature(enable = "neon")]
#[inline]
fn zip(a: V, b: V, f: impl Fn(float32x4_t, float32x4_t) -> float32x4_t) -> V {
    V([
        f(a.0[0], b.0[0]),
        f(a.0[1], b.0[1]),
        f(a.0[2], b.0[2]),
        f(a.0[3], b.0[3]),
    ])
}

/// Mask of the last `k` lanes, `0 < k < 16`.
#[target_feature(enable = "neon")]
#[inline]
fn last_lanes(k: usize) -> M {
    let from = vdupq_n_u32((16 - k) as u32);
    let idx = [0u32, 1, 2, 3];
    // SAFETY: `idx` holds four lanes.
    let base = unsafe { vld1q_u32(idx.as_ptr()) };
    std::array::from_fn(|q| vcgeq_u32(vaddq_u32(base, vdupq_n_u32(4 * q as u32)), from))
}

#[target_feature(enable = "neon")]
#[inline]
fn splat(v: f32) -> V {
    V([vdupq_n_f32(v); 4])
}

/// # Safety
/// `p..p+16` is readable.
#[target_feature(enable = "neon")]
#[inline]
unsafe fn load(p: *const f32) -> V {
    // SAFETY: forwarded contract.
    unsafe {
        V([
            vld1q_f32(p),
            vld1q_f32(p.add(4)),
            vld1q_f32(p.add(8)),
            vld1q_f32(p.add(12)),
        ])
    }
}

/// Lanes `0..k` from `p`, the others `fill`.
///
/// # Safety
/// `k < 16` and `p..p+k` is readable.
#[target_feature(enable = "neon")]
#[inline]
unsafe fn load_part(p: *const f32, k: usize, fill: f32) -> V {
    let mut buf = [fill; 16];
    // SAFETY: `p..p+k` is readable (contract); `buf` holds 16 > k floats.
    unsafe {
        std::ptr::copy_nonoverlapping(p, buf.as_mut_ptr(), k);
        load(buf.as_ptr())
    }
}

/// # Safety
/// `p..p+16` is writable.
#[target_feature(enable = "neon")]
#[inline]
unsafe fn store(p: *mut f32, v: V) {
    // SAFETY: forwarded contract.
    unsafe {
        for (q, &x) in v.0.iter().enumerate() {
            vst1q_f32(p.add(4 * q), x);
        }
    }
}

#[target_feature(enable = "neon")]
#[inline]
fn add(a: V, b: V) -> V {
    zip(a, b, |x, y| vaddq_f32(x, y))
}

#[target_feature(enable = "neon")]
#[inline]
fn sub(a: V, b: V) -> V {
    zip(a, b, |x, y| vsubq_f32(x, y))
}

#[target_feature(enable = "neon")]
#[inline]
fn mul(a: V, b: V) -> V {
    zip(a, b, |x, y| vmulq_f32(x, y))
}

#[target_feature(enable = "neon")]
#[inline]
fn div(a: V, b: V) -> V {
    zip(a, b, |x, y| vdivq_f32(x, y))
}

/// `a·b + c`, rounded once.
#[target_feature(enable = "neon")]
#[inline]
fn fma(a: V, b: V, c: V) -> V {
    V(std::array::from_fn(|q| vfmaq_f32(c.0[q], a.0[q], b.0[q])))
}

/// `c - a·b`, rounded once.
#[target_feature(enable = "neon")]
#[inline]
fn fnma(a: V, b: V, c: V) -> V {
    V(std::array::from_fn(|q| vfmsq_f32(c.0[q], a.0[q], b.0[q])))
}

/// `a > b ? a : b` (so `b` when either is NaN: x86's `maxps`, not `fmax`).
#[target_feature(enable = "neon")]
#[inline]
fn max4(a: float32x4_t, b: float32x4_t) -> float32x4_t {
    vbslq_f32(vcgtq_f32(a, b), a, b)
}

/// `a < b ? a : b` (so `b` when either is NaN: x86's `minps`, not `fmin`).
#[target_feature(enable = "neon")]
#[inline]
fn min4(a: float32x4_t, b: float32x4_t) -> float32x4_t {
    vbslq_f32(vcltq_f32(a, b), a, b)
}

#[target_feature(enable = "neon")]
#[inline]
fn max(a: V, b: V) -> V {
    zip(a, b, |x, y| max4(x, y))
}

#[target_feature(enable = "neon")]
#[inline]
fn min(a: V, b: V) -> V {
    zip(a, b, |x, y| min4(x, y))
}

#[target_feature(enable = "neon")]
#[inline]
fn abs(a: V) -> V {
    map(a, |x| vabsq_f32(x))
}

/// `a < b` (false with NaN).
#[target_feature(enable = "neon")]
#[inline]
fn lt(a: V, b: V) -> M {
    std::array::from_fn(|q| vcltq_f32(a.0[q], b.0[q]))
}

/// `m ? t : f` per lane.
#[target_feature(enable = "neon")]
#[inline]
fn select(m: M, t: V, f: V) -> V {
    V(std::array::from_fn(|q| vbslq_f32(m[q], t.0[q], f.0[q])))
}

/// `2^n` from `k = n + ROUND` (integral `n` in `[-126, 127]`): the low
/// bits of `k` hold `n`, shifting them into the exponent field drops the
/// rest.
#[target_feature(enable = "neon")]
#[inline]
fn pow2_of_rounded(k: V) -> V {
    let b = vdupq_n_u32(127 << 23);
    map(k, |k| {
        vreinterpretq_f32_u32(vaddq_u32(vshlq_n_u32::<23>(vreinterpretq_u32_f32(k)), b))
    })
}

/// A first guess at `1/u` for positive finite `u`, within 12% (integer
/// arithmetic on the bits, as every ISA does it).
#[target_feature(enable = "neon")]
#[inline]
fn recip_seed(u: V) -> V {
    let m = vdupq_n_u32(RECIP_MAGIC as u32);
    map(u, |u| {
        vreinterpretq_f32_u32(vsubq_u32(m, vreinterpretq_u32_f32(u)))
    })
}

/// Sum of the lanes in the x86 tree: `l + (l + 8)`, `l + (l + 4)`,
/// `l + (l + 2)`, `l + (l + 1)`.
#[target_feature(enable = "neon")]
#[inline]
fn hsum(v: V) -> f32 {
    let s4 = vaddq_f32(vaddq_f32(v.0[0], v.0[2]), vaddq_f32(v.0[1], v.0[3]));
    let s2 = vaddq_f32(s4, vextq_f32::<2>(s4, s4));
    vgetq_lane_f32::<0>(s2) + vgetq_lane_f32::<1>(s2)
}

/// Maximum of the lanes, in [`hsum`]'s tree with x86's `max`.
#[target_feature(enable = "neon")]
#[inline]
fn hmax(v: V) -> f32 {
    let s4 = max4(max4(v.0[0], v.0[2]), max4(v.0[1], v.0[3]));
    let s2 = max4(s4, vextq_f32::<2>(s4, s4));
    let (a, b) = (vgetq_lane_f32::<0>(s2), vgetq_lane_f32::<1>(s2));
    if a > b {
        a
    } else {
        b
    }
}

simd_kernels!(#[target_feature(enable = "neon")]);
portable_loops!(#[target_feature(enable = "neon")]);
simd_attention!(2, #[target_feature(enable = "neon")]);
row_ops!(Some(attend));
