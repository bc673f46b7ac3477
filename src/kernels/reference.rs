//! Plain scalar versions of every kernel, used as test oracles. They favour
//! obviousness over speed and accumulate in f64. The model-level oracles (the
//! BERT forward pass, pooling) are in [`crate::model::reference`].

/// `C[m x n] = A[m x k] · W[n x k]ᵀ`, triple loop, f64 accumulation.
pub fn matmul_nt(m: usize, n: usize, k: usize, a: &[f32], w: &[f32]) -> Vec<f32> {
    let mut c = vec![0.0f32; m * n];
    for i in 0..m {
        for j in 0..n {
            let mut s = 0.0f64;
            for p in 0..k {
                s += f64::from(a[i * k + p]) * f64::from(w[j * k + p]);
            }
            c[i * n + j] = s as f32;
        }
    }
    c
}

/// LayerNorm of one row (biased variance), in f64.
pub fn layer_norm(x: &[f32], gamma: &[f32], beta: &[f32], eps: f32) -> Vec<f32> {
    let n = x.len() as f64;
    let mean = x.iter().map(|&v| f64::from(v)).sum::<f64>() / n;
    let var = x
        .iter()
        .map(|&v| (f64::from(v) - mean).powi(2))
        .sum::<f64>()
        / n;
    let rstd = 1.0 / (var + f64::from(eps)).sqrt();
    x.iter()
        .zip(gamma)
        .zip(beta)
        .map(|((&v, &g), &b)| ((f64::from(v) - mean) * rstd * f64::from(g) + f64::from(b)) as f32)
        .collect()
}

/// Softmax of one row, in f64.
pub fn softmax(x: &[f32]) -> Vec<f32> {
    let m = x
        .iter()
        .fold(f64::NEG_INFINITY, |a, &v| a.max(f64::from(v)));
    let e: Vec<f64> = x.iter().map(|&v| (f64::from(v) - m).exp()).collect();
    let s: f64 = e.iter().sum();
    e.iter().map(|v| (v / s) as f32).collect()
}

/// `erfc(x)` in f64: continued fraction for `x >= 3` (full relative accuracy
/// in the tail), `1 - erf(x)` otherwise.
pub fn erfc_f64(x: f64) -> f64 {
    if x >= 3.0 {
        // erfc(x) = exp(-x^2)/sqrt(pi) * 1/(x + (1/2)/(x + 1/(x + (3/2)/(x + ...))))
        let mut f = x;
        for k in (1..120).rev() {
            f = x + (k as f64 / 2.0) / f;
        }
        (-x * x).exp() / std::f64::consts::PI.sqrt() / f
    } else {
        1.0 - erf_f64(x)
    }
}

/// `erf(x)` in f64 to about 1e-15: Taylor series below 3, `1 - erfc` above.
pub fn erf_f64(x: f64) -> f64 {
    let ax = x.abs();
    let r = if ax < 3.0 {
        // erf(x) = 2/sqrt(pi) * sum_n (-1)^n x^(2n+1) / (n! (2n+1))
        let mut term = ax;
        let mut s = ax;
        let x2 = ax * ax;
        for n in 1..200 {
            term *= -x2 / n as f64;
            let t = term / (2 * n + 1) as f64;
            s += t;
            if t.abs() < 1e-18 * s.abs() {
                break;
            }
        }
        s * 2.0 / std::f64::consts::PI.sqrt()
    } else {
        1.0 - erfc_f64(ax)
    };
    if x < 0.0 {
        -r
    } else {
        r
    }
}

/// Exact GELU computed in f64 as `x/2 · erfc(-x/√2)` (accurate in both tails).
pub fn gelu(x: f32) -> f32 {
    let x = f64::from(x);
    (0.5 * x * erfc_f64(-x / std::f64::consts::SQRT_2)) as f32
}

/// Tanh GELU computed in f64.
pub fn gelu_tanh(x: f32) -> f32 {
    let x = f64::from(x);
    let k = (2.0 / std::f64::consts::PI).sqrt();
    (0.5 * x * (1.0 + (k * (x + 0.044715 * x * x * x)).tanh())) as f32
}

/// Pseudo-random values in [-1, 1) from `seed` (an LCG), for the kernels'
/// tests.
#[cfg(test)]
pub(crate) fn rand_vec(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((s >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn erf_oracle_known_values() {
        let cases = [
            (0.0, 0.0),
            (0.5, 0.520_499_877_813_046_5),
            (1.0, 0.842_700_792_949_714_9),
            (2.0, 0.995_322_265_018_952_7),
            (3.0, 0.999_977_909_503_001_4),
            (3.5, 0.999_999_256_901_627_7),
            (-1.5, -0.966_105_146_475_310_7),
        ];
        assert!((erfc_f64(5.0) / 1.537_459_794_428_034_8e-12 - 1.0).abs() < 1e-13);
        assert!((erfc_f64(-1.0) - 1.842_700_792_949_715).abs() < 1e-14);
        for (x, want) in cases {
            assert!(
                (erf_f64(x) - want).abs() < 1e-14,
                "erf({x}) = {}",
                erf_f64(x)
            );
        }
    }
}
