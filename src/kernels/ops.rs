//! Element-wise and row kernels: LayerNorm, GELU (erf and tanh forms), softmax,
//! residual add, scaling, and the vectorisable `exp`/`erf` they use.
//!
//! This file holds the scalar definitions (`exp`, `erf`, `gelu`, the
//! fixed-order sums) and the entry points, each a call of the row operation
//! in the descriptor of the ISA that [`isa::fp32`] selects (the f32 GEMM's:
//! its `ops`, a `RowOps` table, `OPS` in `arch::x86_64::{avx512,
//! avx2}::ops`), or of the portable `arch::generic::ops` when it selects
//! none.
//! GELU, tanh GELU and softmax have explicit SIMD forms (AVX-512F, and AVX2 +
//! FMA), written once over a 16-lane vector so that both run the same
//! operations and give the same bits; the portable code computes the same
//! formulas without FMAs (same accuracy, not the same bits). The other loops
//! are written so that LLVM vectorises them (fixed-width lane accumulators)
//! and are compiled for AVX-512 or AVX2 when the CPU has it; Rust never
//! contracts `a * b + c` into an FMA, so those compute the same bits on every
//! path. Element-wise results depend only on the element, row results only on
//! the row.

use super::arch::types::RowOps;
use super::isa;
#[cfg(test)]
use super::sgemm::Isa;

/// Lanes of the manual accumulators (keeps reductions vectorisable and their
/// order fixed).
const LANES: usize = 8;

/// Sum of a slice with a fixed 8-lane order.
#[inline]
pub fn sum(x: &[f32]) -> f32 {
    let mut acc = [0.0f32; LANES];
    let chunks = x.chunks_exact(LANES);
    let rest = chunks.remainder();
    for c in chunks {
        for l in 0..LANES {
            acc[l] += c[l];
        }
    }
    let mut s = ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
    for &v in rest {
        s += v;
    }
    s
}

/// Sum of squared deviations from `mean`, fixed 8-lane order.
#[inline]
pub(crate) fn sum_sq_dev(x: &[f32], mean: f32) -> f32 {
    let mut acc = [0.0f32; LANES];
    let chunks = x.chunks_exact(LANES);
    let rest = chunks.remainder();
    for c in chunks {
        for l in 0..LANES {
            let d = c[l] - mean;
            acc[l] += d * d;
        }
    }
    let mut s = ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
    for &v in rest {
        let d = v - mean;
        s += d * d;
    }
    s
}

/// `exp(x)` in f32, branch-free (Cephes polynomial, about 1 ulp): 0 below
/// -87.3, +inf from 88.38 on (the argument is clamped to 88.7, where
/// `2^128` overflows), NaN stays NaN. Vectorises when used in a loop.
#[inline(always)]
pub fn exp(x: f32) -> f32 {
    let under = x < EXP_MIN;
    let x = x.clamp(EXP_MIN, EXP_MAX);
    let n = (x * LOG2E + ROUND) - ROUND;
    let r = x - n * EXP_C1 - n * EXP_C2;
    let mut p = EXP_P[0];
    for &c in &EXP_P[1..] {
        p = p * r + c;
    }
    let y = p * r * r + r + 1.0;
    let pow2 = f32::from_bits(((n as i32 + 127) as u32) << 23);
    if under {
        0.0
    } else {
        y * pow2
    }
}

/// Below this |x| [`erf`] uses the rational approximation; above, `1 - erfc`.
const ERF_SPLIT: f32 = 0.75;

/// Eigen's rational approximation of `erf` on [-4, 4] (relative error about
/// 1e-7 near 0, absolute error up to 4e-7 in the tails).
#[inline(always)]
#[allow(clippy::excessive_precision)]
fn erf_rational(x: f32) -> f32 {
    let x = x.clamp(-4.0, 4.0);
    let x2 = x * x;
    let mut p = x2 * -2.72614225801306e-10 + 2.77068142495902e-08;
    p = x2 * p + -2.10102402082508e-06;
    p = x2 * p + -5.69250639462346e-05;
    p = x2 * p + -7.34990630326855e-04;
    p = x2 * p + -2.95459980854025e-03;
    p = x2 * p + -1.60960333262415e-02;
    p *= x;
    let mut q = x2 * -1.45660718464996e-05 + -2.13374055278905e-04;
    q = x2 * q + -1.68282697438203e-03;
    q = x2 * q + -7.37332916720468e-03;
    q = x2 * q + -1.42647390514189e-02;
    p / q
}

/// `erfc(z)` for `z >= 0`: Chebyshev fit with relative error below 1.2e-7
/// (Numerical Recipes `erfcc`), evaluated with [`exp`].
#[inline(always)]
#[allow(clippy::excessive_precision)]
fn erfc_pos(z: f32) -> f32 {
    let t = 1.0 / (1.0 + 0.5 * z);
    let mut p = t * 0.17087277 + -0.82215223;
    p = t * p + 1.48851587;
    p = t * p + -1.13520398;
    p = t * p + 0.27886807;
    p = t * p + -0.18628806;
    p = t * p + 0.09678418;
    p = t * p + 0.37409196;
    p = t * p + 1.00002368;
    p = t * p + -1.26551223;
    t * exp(-z * z + p)
}

/// `erf(x)` in f32, branch-free: the rational form near 0, `1 - erfc` beyond
/// (absolute error about 1e-7, relative about 2e-7 near 0).
#[inline(always)]
pub fn erf(x: f32) -> f32 {
    let a = x.abs();
    let small = erf_rational(x);
    let big = (1.0 - erfc_pos(a)).copysign(x);
    if a < ERF_SPLIT {
        small
    } else {
        big
    }
}

/// Constants of the GELU and `exp` evaluations, shared by the scalar code and
/// the vector kernels.
#[allow(clippy::excessive_precision)]
pub(crate) mod consts {
    /// `exp` gives 0 below this argument.
    pub const EXP_MIN: f32 = -87.3;
    /// `exp` clamps its argument to this (the result is +inf from 88.38 on).
    pub const EXP_MAX: f32 = 88.7;
    pub const LOG2E: f32 = std::f32::consts::LOG2_E;
    /// `ln 2 = EXP_C1 + EXP_C2`, `EXP_C1` with few significant bits (Cody-Waite).
    pub const EXP_C1: f32 = 0.693359375;
    pub const EXP_C2: f32 = -2.12194440e-4;
    /// `1.5 · 2^23`: adding and subtracting it rounds to the nearest integer.
    pub const ROUND: f32 = 12_582_912.0;
    /// Cephes `expf` polynomial, highest degree first.
    pub const EXP_P: [f32; 6] = [
        1.9875691500e-4,
        1.3981999507e-3,
        8.3334519073e-3,
        4.1665795894e-2,
        1.6666665459e-1,
        5.0000001201e-1,
    ];
    /// `1/(2√2)`: `1 + |x|·ERFC_HALF_Z = 1 + z/2` for `z = |x|/√2`.
    pub const ERFC_HALF_Z: f32 = 0.5 * std::f32::consts::FRAC_1_SQRT_2;
    /// Numerical Recipes `erfcc` fit, `erfc(z) ≈ t·exp(-z² + P(t))` with
    /// `t = 1/(1 + z/2)` (relative error below 1.2e-7 for every `z >= 0`),
    /// as a polynomial in `h = t/2`: coefficient `k` is `c_k · 2^k` (exact
    /// scalings, so Horner in `h` rounds exactly like Horner in `t`). Highest
    /// degree first.
    pub const ERFC_H: [f32; 10] = [
        0.17087277 * 512.0,
        -0.82215223 * 256.0,
        1.48851587 * 128.0,
        -1.13520398 * 64.0,
        0.27886807 * 32.0,
        -0.18628806 * 16.0,
        0.09678418 * 8.0,
        0.37409196 * 4.0,
        1.00002368 * 2.0,
        -1.26551223,
    ];
    /// `-2·√(2/π)` (tanh GELU: `0.5·(1 + tanh(y)) = 1/(1 + exp(-2y))`).
    pub const TANH_M2K: f32 = -2.0 * 0.797_884_560_802_865_4;
    pub const TANH_C: f32 = 0.044715;
    /// `bits(1/u) ≈ RECIP_MAGIC - bits(u)` within 12% for positive normal
    /// `u` (the vector GELU's division-free reciprocal starts there).
    pub const RECIP_MAGIC: i32 = 0x7EF3_11C3;
    /// The vector GELU computes `1/(1 + |x|/(2√2))` for `|x|` up to this
    /// (beyond it `Φ(-|x|)` is 0 in f32 whatever the factor is).
    pub const GELU_A_MAX: f32 = 1.0e4;
}
use consts::*;

/// Exact GELU, `x·Φ(x) = x/2 · (1 + erf(x/√2))` (HF `gelu`, torch's default),
/// from one `erfc` evaluation: with `q = erfc(|x|/√2)/2 = Φ(-|x|)`,
/// `Φ(x) = q` for negative x and `1 - q` otherwise. Neither tail suffers
/// cancellation (torch's `1 + erf` loses the negative one). Relative error
/// about 3e-7 (absolute below 1e-7 for |x| <= 1); in the far negative tail
/// the rounding of the argument of `exp(-x²/2 + ...)` adds about `x²/2` ulp
/// of relative error. `gelu(+inf) = +inf`, `gelu(-inf) = -0` (the limit),
/// NaN stays NaN. The vector kernels compute the same with FMAs.
#[inline(always)]
pub fn gelu(v: f32) -> f32 {
    // -inf -> -MAX so that the product below is -MAX·0 = -0, not NaN
    // (written as a comparison so that NaN passes through).
    let x = if v < -f32::MAX { -f32::MAX } else { v };
    let a = x.abs();
    let h = 0.5 / (1.0 + a * ERFC_HALF_Z);
    let mut p = ERFC_H[0];
    for &c in &ERFC_H[1..] {
        p = p * h + c;
    }
    let q = h * exp(-0.5 * a * a + p);
    let phi = if x < 0.0 { q } else { 1.0 - q };
    x * phi
}

/// Tanh GELU, `x/2 · (1 + tanh(√(2/π)(x + 0.044715x³)))`, evaluated as
/// `x / (1 + exp(-2√(2/π)·x·(1 + 0.044715x²)))` (no cancellation in the
/// negative tail). `gelu_tanh(+inf) = +inf`, `gelu_tanh(-inf) = -0`, NaN
/// stays NaN.
#[inline(always)]
pub fn gelu_tanh(v: f32) -> f32 {
    let x = if v < -f32::MAX { -f32::MAX } else { v };
    let e = exp(x * (1.0 + TANH_C * (x * x)) * TANH_M2K);
    x / (1.0 + e)
}

/// SiLU, `x · sigmoid(x)`, evaluated as torch does, `x / (1 + exp(-x))`
/// (HF `silu`, the SwiGLU gate of Qwen and Llama). `silu(+inf) = +inf`,
/// `silu(-inf) = -0`, NaN stays NaN. One scalar definition for every ISA.
#[inline(always)]
pub fn silu(v: f32) -> f32 {
    let x = if v < -f32::MAX { -f32::MAX } else { v };
    x / (1.0 + (-x).exp())
}

/// The row operations of the ISA [`isa::fp32`] selects, read from its
/// descriptor (the portable ones when it selects none).
#[inline(always)]
pub(crate) fn row_ops() -> &'static RowOps {
    isa::fp32().kernel().ops
}

/// Runs `$f` of [`row_ops`]: the one ISA dispatch of this file (a new ISA
/// is its descriptor, not a line here).
macro_rules! dispatch {
    ($f:ident($($arg:expr),*)) => {
        // SAFETY: `isa::fp32()` reports a variant only when the CPU has the
        // features its descriptor needs, which are those of its row
        // operations; the portable ones need none.
        unsafe { (row_ops().$f)($($arg),*) }
    };
}

/// `dst[i] += src[i]`.
#[inline]
pub fn add_assign(dst: &mut [f32], src: &[f32]) {
    dispatch!(add_assign(dst, src))
}

/// `x[i] *= s`.
#[inline]
pub fn scale(x: &mut [f32], s: f32) {
    dispatch!(scale(x, s))
}

/// LayerNorm of one row in place: `(x - mean) / sqrt(var + eps) * gamma + beta`
/// with the biased variance, as torch computes it.
#[inline]
pub fn layer_norm(x: &mut [f32], gamma: &[f32], beta: &[f32], eps: f32) {
    dispatch!(layer_norm(x, gamma, beta, eps))
}

/// `x += bias`, then LayerNorm in place (one row).
#[inline]
pub fn bias_layer_norm(x: &mut [f32], bias: &[f32], gamma: &[f32], beta: &[f32], eps: f32) {
    dispatch!(bias_layer_norm(x, bias, gamma, beta, eps))
}

/// `x = gelu(x + bias)` element-wise (over `min(x.len(), bias.len())`
/// elements). Each output depends only on its own `x` and `bias` element,
/// with the same bits in the vector body and the tail.
#[inline]
pub fn bias_gelu(x: &mut [f32], bias: &[f32]) {
    dispatch!(bias_gelu(x, bias))
}

/// `x = gelu_tanh(x + bias)` element-wise (over `min(x.len(), bias.len())`
/// elements), element by element like [`bias_gelu`].
#[inline]
pub fn bias_gelu_tanh(x: &mut [f32], bias: &[f32]) {
    dispatch!(bias_gelu_tanh(x, bias))
}

/// Softmax of one row in place (max-subtracted). The result depends only on
/// the row's values (not on its length beyond them or its address).
#[inline]
pub fn softmax(x: &mut [f32]) {
    dispatch!(softmax(x))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::reference;

    fn grid() -> impl Iterator<Item = f32> {
        (-200_000..=200_000).map(|i| i as f32 * 6e-5)
    }

    #[test]
    fn erf_is_accurate() {
        let mut worst_abs = 0.0f64;
        let mut worst_rel = 0.0f64;
        for x in grid().chain([1e-20, -1e-30, 1e-8, 100.0, -100.0, 4.5]) {
            let want = reference::erf_f64(f64::from(x));
            let got = f64::from(erf(x));
            worst_abs = worst_abs.max((got - want).abs());
            if want.abs() > 1e-30 {
                worst_rel = worst_rel.max(((got - want) / want).abs());
            }
        }
        eprintln!("erf: worst abs {worst_abs:e}, worst rel {worst_rel:e}");
        assert!(worst_abs < 2e-7, "erf abs {worst_abs}");
        assert!(worst_rel < 3e-7, "erf rel {worst_rel}");
    }

    #[test]
    fn gelu_matches_oracle() {
        let mut worst_rel = 0.0f64;
        for x in grid().chain([-10.0, 10.0, 0.0, -0.0, 1e-20, -30.0]) {
            let want = reference::gelu(x);
            let got = gelu(x);
            if x > -3.0 && want != 0.0 {
                worst_rel =
                    worst_rel.max(((f64::from(got) - f64::from(want)) / f64::from(want)).abs());
            }
            // Relative 6e-7; in the far negative tail the f32 rounding of x²
            // inside exp(-x²/2) adds about x² ulp (torch's `1 + erf` form loses
            // everything there instead).
            let tol = (6e-7 + 1.5e-7 * x * x) * want.abs() + 1e-30;
            assert!((got - want).abs() <= tol, "gelu({x}) = {got} vs {want}");
            let want_t = reference::gelu_tanh(x);
            assert!(
                (gelu_tanh(x) - want_t).abs() <= 1e-6 * x.abs().max(1.0),
                "gelu_tanh({x})"
            );
        }
        eprintln!("gelu: worst rel {worst_rel:e}");
    }

    /// The vector GELU (division-free reciprocal) against the f64 oracle over
    /// the whole grid and the special values, and the AVX-512 and AVX2 row
    /// kernels against each other bit for bit (both run whenever the CPU
    /// has them, whatever `EMBD_SIMD` says).
    #[test]
    fn vector_gelu_matches_oracle_and_isas_agree() {
        let specials = [
            f32::INFINITY,
            f32::NEG_INFINITY,
            f32::MAX,
            -f32::MAX,
            1e30,
            -1e30,
            9_999.0,
            -10_001.0,
            -30.0,
            1e-38,
            -1e-45,
            0.0,
            -0.0,
        ];
        let x: Vec<f32> = grid().chain(specials).collect();
        let zero = vec![0.0f32; x.len()];
        let mut got = x.clone();
        bias_gelu(&mut got, &zero);
        for (&xi, &g) in x.iter().zip(&got) {
            // The limits at ±inf (the f64 oracle gives NaN at -inf).
            let want = if xi.is_infinite() {
                xi.max(-0.0)
            } else {
                reference::gelu(xi)
            };
            if xi.is_infinite() || want == 0.0 {
                assert_eq!(g, want, "gelu({xi}) = {g}");
                continue;
            }
            let tol = (6e-7 + 1.5e-7 * xi * xi) * want.abs() + 1e-30;
            assert!((g - want).abs() <= tol, "gelu({xi}) = {g} vs {want}");
        }
        let mut nan = [f32::NAN; 3];
        bias_gelu(&mut nan, &[0.0; 3]);
        assert!(nan.iter().all(|v| v.is_nan()));

        // Bias and lengths that exercise the tails: every row gives the
        // portable row's bits.
        let b: Vec<f32> = (0..x.len()).map(|i| (i % 7) as f32 * 0.01).collect();
        let rows: Vec<_> = Isa::all().filter(|i| i.supported()).collect();
        for n in [1, 5, 16, 17, 31, 33, 1536, x.len()] {
            let mut want = x[..n].to_vec();
            // SAFETY: the portable row needs no CPU feature.
            unsafe { (rows.last().unwrap().kernel().ops.bias_gelu)(&mut want, &b[..n]) };
            for isa in &rows {
                let mut p = x[..n].to_vec();
                // SAFETY: the CPU has the row's features.
                unsafe { (isa.kernel().ops.bias_gelu)(&mut p, &b[..n]) };
                let bits = |v: &[f32]| v.iter().map(|v| v.to_bits()).collect::<Vec<u32>>();
                assert_eq!(bits(&p), bits(&want), "bias_gelu {isa:?} vs none, n={n}");
            }
        }
    }

    #[test]
    fn exp_is_accurate() {
        for i in -100_000..=10_000 {
            let x = i as f32 * 1e-3;
            let want = f64::from(x).exp();
            let got = f64::from(exp(x));
            let rel = ((got - want) / want).abs();
            assert!(
                rel < 3e-7 || (want < 1e-37 && got.abs() < 1e-37),
                "exp({x}) rel {rel}"
            );
        }
        assert_eq!(exp(-1000.0), 0.0);
        assert_eq!(exp(f32::NEG_INFINITY), 0.0);
        assert_eq!(exp(0.0), 1.0);
    }

    #[test]
    fn row_ops_match_oracles_on_awkward_lengths() {
        for n in [1usize, 2, 7, 8, 9, 15, 16, 17, 63, 64, 65, 384] {
            let x: Vec<f32> = (0..n)
                .map(|i| ((i * 37 % 11) as f32 - 5.0) * 0.7 + 0.1)
                .collect();
            let g: Vec<f32> = (0..n).map(|i| 1.0 + (i % 5) as f32 * 0.1).collect();
            let b: Vec<f32> = (0..n).map(|i| (i % 3) as f32 * 0.2 - 0.1).collect();

            let mut y = x.clone();
            layer_norm(&mut y, &g, &b, 1e-12);
            let want = reference::layer_norm(&x, &g, &b, 1e-12);
            for (a, e) in y.iter().zip(&want) {
                assert!((a - e).abs() < 2e-6, "ln n={n}: {a} vs {e}");
            }

            let mut y = x.clone();
            bias_layer_norm(&mut y, &b, &g, &b, 1e-5);
            let xb: Vec<f32> = x.iter().zip(&b).map(|(a, c)| a + c).collect();
            let want = reference::layer_norm(&xb, &g, &b, 1e-5);
            for (a, e) in y.iter().zip(&want) {
                assert!((a - e).abs() < 2e-6, "bias ln n={n}");
            }

            let mut y = x.clone();
            softmax(&mut y);
            let want = reference::softmax(&x);
            for (a, e) in y.iter().zip(&want) {
                assert!((a - e).abs() < 1e-7 + 1e-6 * e, "softmax n={n}: {a} vs {e}");
            }

            let mut y = x.clone();
            bias_gelu(&mut y, &b);
            for (i, v) in y.iter().enumerate() {
                let e = reference::gelu(x[i] + b[i]);
                assert!((v - e).abs() < 1e-6, "bias_gelu");
            }

            let s = sum(&x);
            let e: f64 = x.iter().map(|&v| f64::from(v)).sum();
            assert!((f64::from(s) - e).abs() < 1e-4);
        }
        let mut s = vec![1.0f32, -2.0];
        scale(&mut s, 0.5);
        assert_eq!(s, vec![0.5, -1.0]);
    }

    type Ew = &'static (dyn Fn(&mut [f32], &[f32]) + Sync);
    type Row = &'static (dyn Fn(&mut [f32]) + Sync);

    /// The implementations of `(bias_gelu, bias_gelu_tanh, softmax, exp)`
    /// this CPU can run: every row of the ISA table with f32 kernels, best
    /// first (the portable row last).
    #[allow(clippy::type_complexity)]
    fn paths() -> Vec<(&'static str, Ew, Ew, Row, Row)> {
        Isa::all()
            .filter(|i| i.supported())
            .map(|isa| {
                let ops = isa.kernel().ops;
                // The CPU has the row's features (`supported` above).
                let g: Ew = Box::leak(Box::new(move |x: &mut [f32], b: &[f32]| {
                    // SAFETY: the CPU has the row's features.
                    unsafe { (ops.bias_gelu)(x, b) }
                }));
                let t: Ew = Box::leak(Box::new(move |x: &mut [f32], b: &[f32]| {
                    // SAFETY: as above.
                    unsafe { (ops.bias_gelu_tanh)(x, b) }
                }));
                let s: Row = Box::leak(Box::new(move |x: &mut [f32]| {
                    // SAFETY: as above.
                    unsafe { (ops.softmax)(x) }
                }));
                let e: Row = Box::leak(Box::new(move |x: &mut [f32]| {
                    // SAFETY: as above.
                    unsafe { (ops.exp)(x) }
                }));
                (isa.name(), g, t, s, e)
            })
            .collect()
    }

    /// `f` (with bias -0, which keeps every input, -0 included) of every
    /// element of `x`, 1000 at a time.
    fn apply(f: Ew, x: &[f32]) -> Vec<f32> {
        let mut y = x.to_vec();
        let zero = [-0.0f32; 1000];
        for c in y.chunks_mut(1000) {
            f(c, &zero);
        }
        y
    }

    fn gelu_f64(x: f64) -> f64 {
        0.5 * x * reference::erfc_f64(-x / std::f64::consts::SQRT_2)
    }

    fn gelu_tanh_f64(x: f64) -> f64 {
        let k = (2.0 / std::f64::consts::PI).sqrt();
        0.5 * x * (1.0 + (k * (x + 0.044715 * x * x * x)).tanh())
    }

    /// A dense sweep of [-12, 12] plus values around 0 at every scale.
    fn sweep() -> Vec<f32> {
        let mut v: Vec<f32> = (-400_000..=400_000).map(|i| i as f32 * 3e-5).collect();
        for e in -40..=0 {
            for m in [1.0f32, 1.37, 2.9, 5.5, 7.77] {
                let x = m * 10f32.powi(e);
                v.extend([x, -x]);
            }
        }
        v
    }

    #[test]
    fn gelu_paths_are_accurate() {
        let xs = sweep();
        for (name, g, t, _, _) in paths() {
            let (mut abs_small, mut rel_big, mut rel_all) = (0.0f64, 0.0f64, 0.0f64);
            let (mut tanh_abs, mut tanh_rel) = (0.0f64, 0.0f64);
            let mut tail = 0.0f64;
            let mut worst_x = 0.0f32;
            for (&x, (&y, &yt)) in xs.iter().zip(apply(g, &xs).iter().zip(&apply(t, &xs))) {
                let want = gelu_f64(f64::from(x));
                let err = (f64::from(y) - want).abs();
                if want.abs() <= 1.0 {
                    abs_small = abs_small.max(err);
                } else {
                    rel_big = rel_big.max(err / want.abs());
                }
                if want != 0.0 {
                    let rel = err / want.abs();
                    if x > -3.0 && rel > rel_all {
                        rel_all = rel;
                        worst_x = x;
                    }
                    // Beyond -3 the rounding of x²/2 inside exp(-x²/2 + ...)
                    // adds up to about x²/2 ulp (torch's `1 + erf` form
                    // loses all digits there).
                    let tol = 6e-7 + 6e-8 * f64::from(x * x);
                    if x <= -3.0 {
                        tail = tail.max(rel / (1.0 + f64::from(x * x) / 10.0));
                    }
                    assert!(
                        rel <= tol || err < 1e-40,
                        "{name}: gelu({x:e}) = {y:e}, want {want:e}, rel {rel:e}"
                    );
                }
                let want_t = gelu_tanh_f64(f64::from(x));
                let err_t = (f64::from(yt) - want_t).abs();
                tanh_abs = tanh_abs.max(err_t / want_t.abs().max(1.0));
                if want_t.abs() > 1e-30 && x > -3.0 {
                    tanh_rel = tanh_rel.max(err_t / want_t.abs());
                }
            }
            eprintln!(
                "{name}: gelu abs err (|gelu| <= 1) {abs_small:.2e}, rel err (|gelu| > 1) \
                 {rel_big:.2e}, rel err (x > -3) {rel_all:.2e} at {worst_x}, rel err / (1 + x²/10) \
                 (x <= -3) {tail:.2e}; gelu_tanh err {tanh_abs:.2e}, rel (x > -3) \
                 {tanh_rel:.2e}"
            );
            assert!(abs_small < 1.5e-7, "{name}: gelu abs {abs_small:e}");
            assert!(rel_big < 2e-7, "{name}: gelu rel {rel_big:e}");
            assert!(tanh_abs < 3e-7, "{name}: gelu_tanh {tanh_abs:e}");
            assert!(tanh_rel < 2e-6, "{name}: gelu_tanh rel {tanh_rel:e}");
        }
    }

    #[test]
    fn gelu_edge_cases() {
        let nan = f32::NAN;
        let big = [1e4, 3e9, 1e20, 1e30, f32::MAX, f32::INFINITY];
        for (name, g, t, _, _) in paths() {
            for f in [g, t] {
                let one = |x: f32| apply(f, &[x])[0];
                assert_eq!(one(0.0).to_bits(), 0.0f32.to_bits(), "{name}");
                assert_eq!(one(-0.0).to_bits(), (-0.0f32).to_bits(), "{name}");
                for x in [1e-30f32, -1e-30, 1e-40, -1e-40, 1e-45, -1e-45] {
                    // gelu(x) = x/2 + O(x²) for tiny x.
                    let y = one(x);
                    assert!(
                        (y - 0.5 * x).abs() <= 3e-7 * (0.5 * x).abs(),
                        "{name} {x}: {y}"
                    );
                }
                for &x in &big {
                    assert_eq!(one(x), x, "{name}: large {x}");
                    let y = one(-x);
                    assert!(y == 0.0 && y.is_sign_negative(), "{name}: -{x} -> {y}");
                }
                assert_eq!(one(10.0), 10.0, "{name}");
                let y = one(-20.0);
                assert!(y == 0.0 && y.is_sign_negative(), "{name}: -20 -> {y}");
                assert!(one(nan).is_nan(), "{name}: NaN");
            }
            let y = apply(g, &[-10.0])[0];
            let want = gelu_f64(-10.0);
            assert!(
                ((f64::from(y) - want) / want).abs() < 1e-5,
                "{name}: {y} {want}"
            );
        }
    }

    /// Every output of the element-wise kernels depends only on its own
    /// input: the same bits in the vector body, the overlapping last vector
    /// and the short masked form, for every length and offset.
    #[test]
    fn elementwise_results_do_not_depend_on_position() {
        let x: Vec<f32> = (0..48)
            .map(|i| match i {
                5 => f32::NAN,
                17 => f32::NEG_INFINITY,
                30 => -0.0,
                _ => ((i * 37 % 23) as f32 - 11.0) * 0.61,
            })
            .collect();
        let b: Vec<f32> = (0..48).map(|i| ((i * 7 % 5) as f32 - 2.0) * 0.13).collect();
        for (name, g, t, _, _) in paths() {
            for f in [g, t] {
                let single: Vec<f32> = (0..48)
                    .map(|j| {
                        let mut v = [x[j]];
                        f(&mut v, &b[j..j + 1]);
                        v[0]
                    })
                    .collect();
                for len in 1..=40 {
                    for off in 0..=48 - len {
                        let mut y = x[off..off + len].to_vec();
                        f(&mut y, &b[off..]);
                        for (i, v) in y.iter().enumerate() {
                            let s = single[off + i];
                            assert!(
                                v.to_bits() == s.to_bits() || (v.is_nan() && s.is_nan()),
                                "{name}: len {len} off {off} element {i}: {v} vs {s}"
                            );
                        }
                    }
                }
                // Only min(x.len(), bias.len()) elements are touched.
                let mut y = x[..20].to_vec();
                f(&mut y, &b[..18]);
                assert_eq!(y[18..].to_vec(), x[18..20].to_vec(), "{name}");
            }
        }
    }

    /// Every row's kernels run the same operations and give the bits of
    /// the portable row.
    #[test]
    fn every_row_gives_the_portable_bits() {
        let p = paths();
        let base = p.last().unwrap();
        assert_eq!(base.0, "none");
        let mut xs = sweep();
        xs.extend([
            f32::INFINITY,
            f32::NEG_INFINITY,
            f32::MAX,
            -f32::MAX,
            1e-45,
            f32::NAN,
        ]);
        let same = |u: &[f32], v: &[f32]| {
            u.iter()
                .zip(v)
                .all(|(a, b)| a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan()))
        };
        let (yg, yt) = (apply(base.1, &xs), apply(base.2, &xs));
        let mut ye = xs.clone();
        (base.4)(&mut ye);
        for a in &p[..p.len() - 1] {
            assert!(same(&apply(a.1, &xs), &yg), "{}: gelu", a.0);
            assert!(same(&apply(a.2, &xs), &yt), "{}: tanh gelu", a.0);
            let mut ea = xs.clone();
            (a.4)(&mut ea);
            assert!(same(&ea, &ye), "{}: exp", a.0);
            for n in (1..=200).chain([255, 256, 257, 384, 1000]) {
                let row: Vec<f32> = (0..n)
                    .map(|i| ((i * 53 % 97) as f32 - 48.0) * 0.37)
                    .collect();
                let (mut ra, mut rb) = (row.clone(), row);
                (a.3)(&mut ra);
                (base.3)(&mut rb);
                assert!(same(&ra, &rb), "{}: softmax n = {n}", a.0);
            }
        }
        eprintln!(
            "rows checked: {:?}",
            p.iter().map(|r| r.0).collect::<Vec<_>>()
        );
    }

    #[test]
    fn exp_paths_are_accurate() {
        let xs: Vec<f32> = (-870_000..=880_000)
            .map(|i| i as f32 * 1e-4)
            .chain([-0.0, 1e-30, -1e-30, 1e-7, -1e-7])
            .collect();
        for (name, _, _, _, e) in paths() {
            let mut y = xs.clone();
            e(&mut y);
            let mut worst = 0.0f64;
            for (&x, &v) in xs.iter().zip(&y) {
                let want = f64::from(x).exp();
                if x < -87.3 {
                    assert_eq!(v, 0.0, "{name}: exp({x})");
                } else if want < f64::from(f32::MAX) && x < 88.37 {
                    worst = worst.max(((f64::from(v) - want) / want).abs());
                }
            }
            eprintln!("{name}: exp worst rel {worst:.2e}");
            assert!(worst < 2.5e-7, "{name}: exp rel {worst:e}");
            let mut s = [
                0.0,
                -1000.0,
                f32::NEG_INFINITY,
                f32::NAN,
                100.0,
                f32::INFINITY,
            ];
            e(&mut s);
            assert_eq!(s[..3], [1.0, 0.0, 0.0], "{name}");
            assert!(s[3].is_nan(), "{name}");
            assert_eq!(s[4..], [f32::INFINITY; 2], "{name}");
        }
    }

    #[test]
    fn softmax_paths_are_accurate_and_row_local() {
        let mut worst = 0.0f64;
        for (name, _, _, s, _) in paths() {
            for n in (1..=200).chain([255, 256, 257, 384]) {
                for pattern in 0..4 {
                    let row: Vec<f32> = (0..n)
                        .map(|i| {
                            let u = ((i * 53 + pattern * 11) % 97) as f32 / 97.0;
                            match pattern {
                                0 => u * 20.0 - 10.0,
                                1 => u * 2000.0 - 1000.0,
                                2 if i % 3 == 1 => f32::NEG_INFINITY,
                                2 => u * 8.0,
                                _ => 1.5,
                            }
                        })
                        .collect();
                    let mut y = row.clone();
                    s(&mut y);
                    let m = row
                        .iter()
                        .fold(f64::NEG_INFINITY, |a, &v| a.max(f64::from(v)));
                    let ex: Vec<f64> = row.iter().map(|&v| (f64::from(v) - m).exp()).collect();
                    let total: f64 = ex.iter().sum();
                    for (i, (&v, &e)) in y.iter().zip(&ex).enumerate() {
                        let want = e / total;
                        let err = (f64::from(v) - want).abs();
                        if want > 1e-30 {
                            worst = worst.max(err / want);
                        }
                        // Rounding x - max to f32 (as torch does) costs up to
                        // |x - max|/2 ulp.
                        let d = m - f64::from(row[i]);
                        assert!(
                            err <= (4e-7 + 6e-8 * d) * want + 1e-37 || (want == 0.0 && v == 0.0),
                            "{name}: n {n} pattern {pattern} [{i}] = {v:e}, want {want:e}"
                        );
                    }
                    // The same row anywhere in memory gives the same bits.
                    for off in [1usize, 3, 8, 15] {
                        let mut buf = vec![7.0f32; n + 32];
                        buf[off..off + n].copy_from_slice(&row);
                        s(&mut buf[off..off + n]);
                        assert_eq!(&buf[off..off + n], &y[..], "{name}: n {n} off {off}");
                        assert!(buf[..off].iter().chain(&buf[off + n..]).all(|&v| v == 7.0));
                    }
                }
                let mut r = vec![0.5f32; n];
                r[n / 2] = f32::NAN;
                s(&mut r);
                assert!(r.iter().all(|v| v.is_nan()), "{name}: NaN row n {n}");
            }
            let mut one = [42.0f32];
            s(&mut one);
            assert_eq!(one, [1.0], "{name}");
            s(&mut []);
        }
        eprintln!("softmax: worst rel {worst:.2e}");
    }
}

/// Speed of the element-wise and row kernels in ns per element, for the path
/// [`isa::fp32`] selects (run again with `EMBD_SIMD=avx2` or `EMBD_SIMD=none`
/// for the other paths):
/// `cargo test --release --lib ops::speed -- --ignored --nocapture`
#[cfg(test)]
mod speed {
    use super::*;

    use crate::kernels::thread_cpu_seconds as cpu;

    /// Best seconds per call of `f` over 9 runs of about 30 ms.
    fn best(mut f: impl FnMut()) -> f64 {
        let mut b = f64::INFINITY;
        for _ in 0..9 {
            let t = cpu();
            let mut reps = 0;
            while cpu() - t < 0.03 {
                f();
                reps += 1;
            }
            b = b.min((cpu() - t) / reps as f64);
        }
        b
    }

    use crate::testutil::pseudo_random as data;

    /// ns per element of `op` on every `n`-float row of a 32 KiB buffer that
    /// is restored before each pass (the restore is timed alone and
    /// subtracted).
    fn ns_per_element(n: usize, r: f32, op: impl Fn(&mut [f32])) -> f64 {
        let rows = 8192 / n;
        let src = data(rows * n, r);
        let mut buf = src.clone();
        let copy = best(|| {
            buf.copy_from_slice(std::hint::black_box(&src));
            std::hint::black_box(&mut buf);
        });
        let total = best(|| {
            buf.copy_from_slice(std::hint::black_box(&src));
            for row in buf.chunks_exact_mut(n) {
                op(row);
            }
            std::hint::black_box(&mut buf);
        });
        (total - copy) / (rows * n) as f64 * 1e9
    }

    #[test]
    #[ignore]
    fn speed() {
        eprintln!("ISA {:?}", isa::fp32());
        let bias = data(1536, 0.5);
        for n in [12usize, 25, 32, 128, 1536] {
            let g = ns_per_element(n, 6.0, |r| bias_gelu(r, &bias));
            let t = ns_per_element(n, 6.0, |r| bias_gelu_tanh(r, &bias));
            let s = ns_per_element(n, 10.0, softmax);
            eprintln!(
                "n = {n:4}: bias_gelu {g:6.3} ns/el, bias_gelu_tanh {t:6.3} ns/el, softmax {s:6.3} ns/el"
            );
        }
    }
}
