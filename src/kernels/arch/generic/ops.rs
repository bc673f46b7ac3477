//! The row operations in portable code: the `none` row's, and the loops the
//! vector modules compile again with their target features
//! (`#[inline(always)]` so that they inline into those; Rust never contracts
//! `a * b + c` into an FMA, so every build gives the same bits). GELU, tanh
//! GELU and softmax are the shared vector kernels of
//! [`simd`](super::super::simd) over sixteen scalar lanes, so they give the
//! vector ISAs' bits.

use crate::kernels::ops::consts::*;
use crate::kernels::ops::{sum, sum_sq_dev};

/// `dst[i] += src[i]`.
#[inline(always)]
pub(crate) fn add_assign(dst: &mut [f32], src: &[f32]) {
    for (d, s) in dst.iter_mut().zip(src) {
        *d += *s;
    }
}

/// `x[i] *= s`.
#[inline(always)]
pub(crate) fn scale(x: &mut [f32], s: f32) {
    for v in x {
        *v *= s;
    }
}

/// LayerNorm of one row in place: `(x - mean) / sqrt(var + eps) * gamma + beta`
/// with the biased variance, as torch computes it.
#[inline(always)]
pub(crate) fn layer_norm(x: &mut [f32], gamma: &[f32], beta: &[f32], eps: f32) {
    let n = x.len();
    if n == 0 {
        return;
    }
    let mean = sum(x) / n as f32;
    let var = sum_sq_dev(x, mean) / n as f32;
    let rstd = 1.0 / (var + eps).sqrt();
    for ((v, g), b) in x.iter_mut().zip(gamma).zip(beta) {
        *v = (*v - mean) * rstd * *g + *b;
    }
}

/// `x += bias`, then LayerNorm in place (one row).
#[inline(always)]
pub(crate) fn bias_layer_norm(x: &mut [f32], bias: &[f32], gamma: &[f32], beta: &[f32], eps: f32) {
    add_assign(x, bias);
    layer_norm(x, gamma, beta, eps);
}

// The 16-lane vector of the shared row kernels (`simd_kernels!`), as
// sixteen scalars: each helper is the lane-wise IEEE operation the vector
// ISAs perform (fused multiply-adds through `f32::mul_add`, x86's
// `min`/`max`, the same reduction tree), so the portable code gives their
// bits.

/// Vectors the activation loop runs interleaved (no effect on the bits).
const ACT_VECTORS: usize = 2;

type V = [f32; 16];
type M = [bool; 16];

#[inline(always)]
fn map(a: V, f: impl Fn(f32) -> f32) -> V {
    a.map(f)
}

#[inline(always)]
fn zip(a: V, b: V, f: impl Fn(f32, f32) -> f32) -> V {
    std::array::from_fn(|l| f(a[l], b[l]))
}

/// Mask of the last `k` lanes, `0 < k < 16`.
#[inline(always)]
fn last_lanes(k: usize) -> M {
    std::array::from_fn(|l| l >= 16 - k)
}

#[inline(always)]
fn splat(v: f32) -> V {
    [v; 16]
}

/// # Safety
/// `p..p+16` is readable.
#[inline(always)]
unsafe fn load(p: *const f32) -> V {
    // SAFETY: forwarded contract.
    unsafe { std::ptr::read_unaligned(p.cast::<V>()) }
}

/// Lanes `0..k` from `p`, the others `fill`.
///
/// # Safety
/// `k < 16` and `p..p+k` is readable.
#[inline(always)]
unsafe fn load_part(p: *const f32, k: usize, fill: f32) -> V {
    let mut v = [fill; 16];
    // SAFETY: `p..p+k` is readable (contract), `v` holds 16 > k floats.
    unsafe { std::ptr::copy_nonoverlapping(p, v.as_mut_ptr(), k) };
    v
}

/// # Safety
/// `p..p+16` is writable.
#[inline(always)]
unsafe fn store(p: *mut f32, v: V) {
    // SAFETY: forwarded contract.
    unsafe { std::ptr::write_unaligned(p.cast::<V>(), v) }
}

#[inline(always)]
fn add(a: V, b: V) -> V {
    zip(a, b, |x, y| x + y)
}

#[inline(always)]
fn sub(a: V, b: V) -> V {
    zip(a, b, |x, y| x - y)
}

#[inline(always)]
fn mul(a: V, b: V) -> V {
    zip(a, b, |x, y| x * y)
}

#[inline(always)]
fn div(a: V, b: V) -> V {
    zip(a, b, |x, y| x / y)
}

/// `a·b + c`, rounded once.
#[inline(always)]
fn fma(a: V, b: V, c: V) -> V {
    std::array::from_fn(|l| a[l].mul_add(b[l], c[l]))
}

/// `c - a·b`, rounded once.
#[inline(always)]
fn fnma(a: V, b: V, c: V) -> V {
    std::array::from_fn(|l| (-a[l]).mul_add(b[l], c[l]))
}

/// `a > b ? a : b` (so `b` when either is NaN), as x86's `maxps`.
#[inline(always)]
fn max2(a: f32, b: f32) -> f32 {
    if a > b {
        a
    } else {
        b
    }
}

/// `a < b ? a : b` (so `b` when either is NaN), as x86's `minps`.
#[inline(always)]
fn min2(a: f32, b: f32) -> f32 {
    if a < b {
        a
    } else {
        b
    }
}

#[inline(always)]
fn max(a: V, b: V) -> V {
    zip(a, b, max2)
}

#[inline(always)]
fn min(a: V, b: V) -> V {
    zip(a, b, min2)
}

#[inline(always)]
fn abs(a: V) -> V {
    map(a, |x| f32::from_bits(x.to_bits() & 0x7FFF_FFFF))
}

/// `a < b` (false with NaN).
#[inline(always)]
fn lt(a: V, b: V) -> M {
    std::array::from_fn(|l| a[l] < b[l])
}

/// `m ? t : f` per lane.
#[inline(always)]
fn select(m: M, t: V, f: V) -> V {
    std::array::from_fn(|l| if m[l] { t[l] } else { f[l] })
}

/// `2^n` from `k = n + ROUND` (integral `n` in `[-126, 127]`): the low bits
/// of `k` hold `n`, shifting them into the exponent field drops the rest.
#[inline(always)]
fn pow2_of_rounded(k: V) -> V {
    map(k, |k| {
        f32::from_bits((k.to_bits() << 23).wrapping_add(127 << 23))
    })
}

/// A first guess at `1/u` for positive finite `u`, within 12% (integer
/// arithmetic on the bits, as every ISA does it).
#[inline(always)]
fn recip_seed(u: V) -> V {
    map(u, |u| {
        f32::from_bits((RECIP_MAGIC as u32).wrapping_sub(u.to_bits()))
    })
}

/// Sum of the lanes in the vector ISAs' tree: `l + (l + 8)`, then
/// `l + (l + 4)`, `l + (l + 2)`, `l + (l + 1)`.
#[inline(always)]
fn hsum(v: V) -> f32 {
    let s8: [f32; 8] = std::array::from_fn(|l| v[l] + v[l + 8]);
    let s4: [f32; 4] = std::array::from_fn(|l| s8[l] + s8[l + 4]);
    let s2: [f32; 2] = std::array::from_fn(|l| s4[l] + s4[l + 2]);
    s2[0] + s2[1]
}

/// Maximum of the lanes, in [`hsum`]'s tree with x86's `max`.
#[inline(always)]
fn hmax(v: V) -> f32 {
    let s8: [f32; 8] = std::array::from_fn(|l| max2(v[l], v[l + 8]));
    let s4: [f32; 4] = std::array::from_fn(|l| max2(s8[l], s8[l + 4]));
    let s2: [f32; 2] = std::array::from_fn(|l| max2(s4[l], s4[l + 2]));
    max2(s2[0], s2[1])
}

simd_kernels!();

// The portable row operations (the f32 family's code when no vector ISA
// is chosen).
row_ops!(None);
