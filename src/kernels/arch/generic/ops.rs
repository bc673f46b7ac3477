//! The row operations in portable code: the fallback without SIMD, and the
//! loops the x86-64 modules compile again with their target features
//! (`#[inline(always)]` so that they inline into those; Rust never contracts
//! `a * b + c` into an FMA, so every build gives the same bits). GELU, tanh
//! GELU and softmax have explicit vector forms there instead (see
//! `arch/x86_64/ops.rs`), with FMAs: the same accuracy, not the same bits.

use crate::kernels::ops::{exp, gelu, gelu_tanh, sum, sum_sq_dev};

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

/// `x = gelu(x + bias)` element-wise (portable fallback).
#[inline(always)]
pub(crate) fn bias_gelu(x: &mut [f32], bias: &[f32]) {
    for (v, b) in x.iter_mut().zip(bias) {
        *v = gelu(*v + *b);
    }
}

/// `x = gelu_tanh(x + bias)` element-wise (portable fallback).
#[inline(always)]
pub(crate) fn bias_gelu_tanh(x: &mut [f32], bias: &[f32]) {
    for (v, b) in x.iter_mut().zip(bias) {
        *v = gelu_tanh(*v + *b);
    }
}

/// Softmax of one row in place (max-subtracted; portable fallback).
#[inline(always)]
pub(crate) fn softmax(x: &mut [f32]) {
    if x.is_empty() {
        return;
    }
    let mut m = f32::NEG_INFINITY;
    for &v in x.iter() {
        m = m.max(v);
    }
    for v in x.iter_mut() {
        *v = exp(*v - m);
    }
    let s = sum(x);
    let inv = 1.0 / s;
    for v in x.iter_mut() {
        *v *= inv;
    }
}

// The portable row operations (the f32 family's code when no vector ISA
// is chosen).
row_ops!(None);
