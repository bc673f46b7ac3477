//! Element-wise and row kernels: LayerNorm, GELU (erf and tanh forms), softmax,
//! residual add, scaling, and the vectorisable `exp`/`erf` they use.
//!
//! The loops are written so that LLVM vectorises them (fixed-width lane
//! accumulators, branch-free polynomials). The public functions run the same
//! code compiled for AVX-512 or AVX2 when the CPU has it (selected with
//! [`sgemm::isa`]); Rust never contracts `a * b + c` into an FMA, so every
//! build computes the same bits. Each function's result for a row depends only
//! on that row.

use super::sgemm::{self, Isa};

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
fn sum_sq_dev(x: &[f32], mean: f32) -> f32 {
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

/// `dst[i] += src[i]`.
#[inline(always)]
fn add_assign_impl(dst: &mut [f32], src: &[f32]) {
    for (d, s) in dst.iter_mut().zip(src) {
        *d += *s;
    }
}

/// `x[i] *= s`.
#[inline(always)]
fn scale_impl(x: &mut [f32], s: f32) {
    for v in x {
        *v *= s;
    }
}

/// LayerNorm of one row in place: `(x - mean) / sqrt(var + eps) * gamma + beta`
/// with the biased variance, as torch computes it.
#[inline(always)]
fn layer_norm_impl(x: &mut [f32], gamma: &[f32], beta: &[f32], eps: f32) {
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
fn bias_layer_norm_impl(x: &mut [f32], bias: &[f32], gamma: &[f32], beta: &[f32], eps: f32) {
    add_assign_impl(x, bias);
    layer_norm_impl(x, gamma, beta, eps);
}

/// `exp(x)` in f32, branch-free (Cephes polynomial, about 1 ulp; 0 below -87.3,
/// saturating at 88.7). Vectorises when used in a loop.
#[inline(always)]
#[allow(clippy::excessive_precision)]
pub fn exp(x: f32) -> f32 {
    const LOG2E: f32 = std::f32::consts::LOG2_E;
    const C1: f32 = 0.693359375;
    const C2: f32 = -2.12194440e-4;
    // 1.5 * 2^23: adding and subtracting rounds to the nearest integer.
    const ROUND: f32 = 12_582_912.0;
    let under = x < -87.3;
    let x = x.clamp(-87.3, 88.7);
    let n = (x * LOG2E + ROUND) - ROUND;
    let r = x - n * C1 - n * C2;
    let mut p = 1.9875691500e-4f32;
    p = p * r + 1.3981999507e-3;
    p = p * r + 8.3334519073e-3;
    p = p * r + 4.1665795894e-2;
    p = p * r + 1.6666665459e-1;
    p = p * r + 5.0000001201e-1;
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

/// Exact GELU, `x/2 · (1 + erf(x/√2))` (HF `gelu`, torch's default). For
/// `|x/√2| >= 0.75` it uses `erfc` directly (`x/2 · erfc(|x|/√2)` for negative
/// x), so the negative tail keeps its relative accuracy instead of suffering
/// the cancellation in `1 + erf`.
#[inline(always)]
pub fn gelu(x: f32) -> f32 {
    let u = x * std::f32::consts::FRAC_1_SQRT_2;
    let a = u.abs();
    let small = 0.5 * x * (1.0 + erf_rational(u));
    let half_tail = 0.5 * x * erfc_pos(a);
    let big = if x < 0.0 { half_tail } else { x - half_tail };
    if a < ERF_SPLIT {
        small
    } else {
        big
    }
}

/// Tanh GELU, `x/2 · (1 + tanh(√(2/π)(x + 0.044715x³)))`.
#[inline]
pub fn gelu_tanh(x: f32) -> f32 {
    const K: f32 = 0.797_884_6; // sqrt(2/pi)
    0.5 * x * (1.0 + (K * (x + 0.044_715 * x * x * x)).tanh())
}

/// `x = gelu(x + bias)` element-wise.
#[inline(always)]
fn bias_gelu_impl(x: &mut [f32], bias: &[f32]) {
    for (v, b) in x.iter_mut().zip(bias) {
        *v = gelu(*v + *b);
    }
}

/// `x = gelu_tanh(x + bias)` element-wise.
#[inline(always)]
fn bias_gelu_tanh_impl(x: &mut [f32], bias: &[f32]) {
    for (v, b) in x.iter_mut().zip(bias) {
        *v = gelu_tanh(*v + *b);
    }
}

/// Softmax of one row in place (max-subtracted).
#[inline(always)]
fn softmax_impl(x: &mut [f32]) {
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

/// L2-normalises in place like torch `F.normalize`: `x / max(‖x‖, 1e-12)`.
pub fn l2_normalize(x: &mut [f32]) {
    let n: f64 = x.iter().map(|&v| f64::from(v) * f64::from(v)).sum();
    let norm = (n.sqrt() as f32).max(1e-12);
    for v in x {
        *v /= norm;
    }
}

// Dispatching entry points: the same scalar code compiled for AVX-512 or
// AVX2 (LLVM vectorises it wider; no FMA contraction, so the values are the
// same bits as the baseline build), chosen with the GEMM kernels' ISA.
/// `dst[i] += src[i]`.
#[inline]
pub fn add_assign(dst: &mut [f32], src: &[f32]) {
    #[cfg(target_arch = "x86_64")]
    {
        #[target_feature(enable = "avx512f,avx2,fma")]
        unsafe fn wide(dst: &mut [f32], src: &[f32]) {
            add_assign_impl(dst, src)
        }
        #[target_feature(enable = "avx2,fma")]
        unsafe fn narrow(dst: &mut [f32], src: &[f32]) {
            add_assign_impl(dst, src)
        }
        match sgemm::isa() {
            // SAFETY: `isa()` reports AVX-512F only when the CPU has it.
            Some(Isa::Avx512) => return unsafe { wide(dst, src) },
            // SAFETY: `isa()` reports AVX2 only when the CPU has AVX2 and FMA.
            Some(Isa::Avx2) => return unsafe { narrow(dst, src) },
            None => {}
        }
    }
    add_assign_impl(dst, src)
}

/// `x[i] *= s`.
#[inline]
pub fn scale(x: &mut [f32], s: f32) {
    #[cfg(target_arch = "x86_64")]
    {
        #[target_feature(enable = "avx512f,avx2,fma")]
        unsafe fn wide(x: &mut [f32], s: f32) {
            scale_impl(x, s)
        }
        #[target_feature(enable = "avx2,fma")]
        unsafe fn narrow(x: &mut [f32], s: f32) {
            scale_impl(x, s)
        }
        match sgemm::isa() {
            // SAFETY: `isa()` reports AVX-512F only when the CPU has it.
            Some(Isa::Avx512) => return unsafe { wide(x, s) },
            // SAFETY: `isa()` reports AVX2 only when the CPU has AVX2 and FMA.
            Some(Isa::Avx2) => return unsafe { narrow(x, s) },
            None => {}
        }
    }
    scale_impl(x, s)
}

/// LayerNorm of one row in place: `(x - mean) / sqrt(var + eps) * gamma + beta`
/// with the biased variance, as torch computes it.
#[inline]
pub fn layer_norm(x: &mut [f32], gamma: &[f32], beta: &[f32], eps: f32) {
    #[cfg(target_arch = "x86_64")]
    {
        #[target_feature(enable = "avx512f,avx2,fma")]
        unsafe fn wide(x: &mut [f32], gamma: &[f32], beta: &[f32], eps: f32) {
            layer_norm_impl(x, gamma, beta, eps)
        }
        #[target_feature(enable = "avx2,fma")]
        unsafe fn narrow(x: &mut [f32], gamma: &[f32], beta: &[f32], eps: f32) {
            layer_norm_impl(x, gamma, beta, eps)
        }
        match sgemm::isa() {
            // SAFETY: `isa()` reports AVX-512F only when the CPU has it.
            Some(Isa::Avx512) => return unsafe { wide(x, gamma, beta, eps) },
            // SAFETY: `isa()` reports AVX2 only when the CPU has AVX2 and FMA.
            Some(Isa::Avx2) => return unsafe { narrow(x, gamma, beta, eps) },
            None => {}
        }
    }
    layer_norm_impl(x, gamma, beta, eps)
}

/// `x += bias`, then LayerNorm in place (one row).
#[inline]
pub fn bias_layer_norm(x: &mut [f32], bias: &[f32], gamma: &[f32], beta: &[f32], eps: f32) {
    #[cfg(target_arch = "x86_64")]
    {
        #[target_feature(enable = "avx512f,avx2,fma")]
        unsafe fn wide(x: &mut [f32], bias: &[f32], gamma: &[f32], beta: &[f32], eps: f32) {
            bias_layer_norm_impl(x, bias, gamma, beta, eps)
        }
        #[target_feature(enable = "avx2,fma")]
        unsafe fn narrow(x: &mut [f32], bias: &[f32], gamma: &[f32], beta: &[f32], eps: f32) {
            bias_layer_norm_impl(x, bias, gamma, beta, eps)
        }
        match sgemm::isa() {
            // SAFETY: `isa()` reports AVX-512F only when the CPU has it.
            Some(Isa::Avx512) => return unsafe { wide(x, bias, gamma, beta, eps) },
            // SAFETY: `isa()` reports AVX2 only when the CPU has AVX2 and FMA.
            Some(Isa::Avx2) => return unsafe { narrow(x, bias, gamma, beta, eps) },
            None => {}
        }
    }
    bias_layer_norm_impl(x, bias, gamma, beta, eps)
}

/// `x = gelu(x + bias)` element-wise.
#[inline]
pub fn bias_gelu(x: &mut [f32], bias: &[f32]) {
    #[cfg(target_arch = "x86_64")]
    {
        #[target_feature(enable = "avx512f,avx2,fma")]
        unsafe fn wide(x: &mut [f32], bias: &[f32]) {
            bias_gelu_impl(x, bias)
        }
        #[target_feature(enable = "avx2,fma")]
        unsafe fn narrow(x: &mut [f32], bias: &[f32]) {
            bias_gelu_impl(x, bias)
        }
        match sgemm::isa() {
            // SAFETY: `isa()` reports AVX-512F only when the CPU has it.
            Some(Isa::Avx512) => return unsafe { wide(x, bias) },
            // SAFETY: `isa()` reports AVX2 only when the CPU has AVX2 and FMA.
            Some(Isa::Avx2) => return unsafe { narrow(x, bias) },
            None => {}
        }
    }
    bias_gelu_impl(x, bias)
}

/// `x = gelu_tanh(x + bias)` element-wise.
#[inline]
pub fn bias_gelu_tanh(x: &mut [f32], bias: &[f32]) {
    #[cfg(target_arch = "x86_64")]
    {
        #[target_feature(enable = "avx512f,avx2,fma")]
        unsafe fn wide(x: &mut [f32], bias: &[f32]) {
            bias_gelu_tanh_impl(x, bias)
        }
        #[target_feature(enable = "avx2,fma")]
        unsafe fn narrow(x: &mut [f32], bias: &[f32]) {
            bias_gelu_tanh_impl(x, bias)
        }
        match sgemm::isa() {
            // SAFETY: `isa()` reports AVX-512F only when the CPU has it.
            Some(Isa::Avx512) => return unsafe { wide(x, bias) },
            // SAFETY: `isa()` reports AVX2 only when the CPU has AVX2 and FMA.
            Some(Isa::Avx2) => return unsafe { narrow(x, bias) },
            None => {}
        }
    }
    bias_gelu_tanh_impl(x, bias)
}

/// Softmax of one row in place (max-subtracted).
#[inline]
pub fn softmax(x: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    {
        #[target_feature(enable = "avx512f,avx2,fma")]
        unsafe fn wide(x: &mut [f32]) {
            softmax_impl(x)
        }
        #[target_feature(enable = "avx2,fma")]
        unsafe fn narrow(x: &mut [f32]) {
            softmax_impl(x)
        }
        match sgemm::isa() {
            // SAFETY: `isa()` reports AVX-512F only when the CPU has it.
            Some(Isa::Avx512) => return unsafe { wide(x) },
            // SAFETY: `isa()` reports AVX2 only when the CPU has AVX2 and FMA.
            Some(Isa::Avx2) => return unsafe { narrow(x) },
            None => {}
        }
    }
    softmax_impl(x)
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

            let mut y = x.clone();
            l2_normalize(&mut y);
            let nn: f64 = y.iter().map(|&v| f64::from(v) * f64::from(v)).sum();
            assert!((nn - 1.0).abs() < 1e-6);
        }
        let mut z = vec![0.0f32; 5];
        l2_normalize(&mut z);
        assert!(z.iter().all(|&v| v == 0.0));
        let mut s = vec![1.0f32, -2.0];
        scale(&mut s, 0.5);
        assert_eq!(s, vec![0.5, -1.0]);
    }
}

/// Speed of the element-wise and row kernels in ns per element, for the path
/// [`sgemm::isa`] selects (run again with `EMBD_SIMD=avx2` or `EMBD_SIMD=none`
/// for the other paths):
/// `cargo test --release --lib ops::speed -- --ignored --nocapture`
#[cfg(test)]
mod speed {
    use super::*;

    fn cpu() -> f64 {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: `ts` is a valid, writable timespec.
        unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
        ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
    }

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

    /// Pseudo-random values in `[-r, r)`.
    fn data(len: usize, r: f32) -> Vec<f32> {
        let mut s = 0x2545_f491_u32;
        (0..len)
            .map(|_| {
                s ^= s << 13;
                s ^= s >> 17;
                s ^= s << 5;
                (s >> 8) as f32 / (1u32 << 24) as f32 * 2.0 * r - r
            })
            .collect()
    }

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
        eprintln!("ISA {:?}", sgemm::isa());
        let bias = data(1536, 0.5);
        for n in [25usize, 32, 128, 1536] {
            let g = ns_per_element(n, 6.0, |r| bias_gelu(r, &bias));
            let t = ns_per_element(n, 6.0, |r| bias_gelu_tanh(r, &bias));
            let s = ns_per_element(n, 10.0, softmax);
            eprintln!(
                "n = {n:4}: bias_gelu {g:6.3} ns/el, bias_gelu_tanh {t:6.3} ns/el, softmax {s:6.3} ns/el"
            );
        }
    }
}
