//! Vector maths on embeddings: dot product, L2 norm, L2 normalisation and
//! cosine similarity, with one rule for zero and tiny vectors; the
//! Matryoshka recipes that cut a vector ([`Matryoshka`]).
//!
//! The one home of these operations: the engine's pooling, the C API
//! (`embd_similarity`), the cpp_embedder compatibility layer and the static
//! (finalfusion) embeddings all call these, so every surface gives the same
//! bits for the same vectors.
//!
//! Sums run in f64, which makes the results independent of summation order to
//! within f32 rounding. The zero rule is torch's `F.normalize`: a vector is
//! divided by `max(‖x‖, NORM_EPS)`, so a zero vector stays zero, and a cosine
//! with a zero vector is 0.

use crate::error::{Error, Result};

/// The smallest norm [`l2_normalize`] divides by (torch `F.normalize`'s `eps`).
pub const NORM_EPS: f32 = 1e-12;

/// `Σ a_i·b_i` over the common prefix of `a` and `b` in f64 (every product
/// exact) over eight interleaved partial sums, independent chains that stay
/// in vector registers, added pairwise at the end: the same value on every
/// CPU (no FMA contraction, a fixed order), and within f64 rounding of the
/// sequential sum, far below a rounding to f32.
pub(crate) fn dot_f64(a: &[f32], b: &[f32]) -> f64 {
    const L: usize = 8;
    let n = a.len().min(b.len());
    let (ca, cb) = (a[..n].chunks_exact(L), b[..n].chunks_exact(L));
    let mut tail = 0f64;
    for (&x, &y) in ca.remainder().iter().zip(cb.remainder()) {
        tail += f64::from(x) * f64::from(y);
    }
    let mut acc = [0f64; L];
    for (x, y) in ca.zip(cb) {
        for l in 0..L {
            acc[l] += f64::from(x[l]) * f64::from(y[l]);
        }
    }
    ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7])) + tail
}

/// Sum of squares, accumulated in f64.
fn sum_sq(x: &[f32]) -> f64 {
    dot_f64(x, x)
}

/// Dot product of the common prefix of `a` and `b`, accumulated in f64.
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    dot_f64(a, b) as f32
}

/// The Euclidean (L2) norm.
pub fn norm(x: &[f32]) -> f32 {
    sum_sq(x).sqrt() as f32
}

/// L2-normalises in place like torch `F.normalize`: `x / max(‖x‖, 1e-12)`.
/// Returns the norm before normalisation.
pub fn l2_normalize(x: &mut [f32]) -> f32 {
    let n = norm(x);
    let d = n.max(NORM_EPS);
    for v in x {
        *v /= d;
    }
    n
}

/// Cosine similarity of the common prefix of `a` and `b`; 0 when either is
/// the zero vector.
pub fn cosine(a: &[f32], b: &[f32]) -> f32 {
    let n = a.len().min(b.len());
    let (a, b) = (&a[..n], &b[..n]);
    let (na, nb) = (sum_sq(a), sum_sq(b));
    if na == 0.0 || nb == 0.0 {
        return 0.0;
    }
    (dot_f64(a, b) / (na.sqrt() * nb.sqrt())) as f32
}

/// How a sentence vector becomes its Matryoshka output (the recipe of
/// `Options::matryoshka`). No model file says which one a model
/// wants: the user names it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum Matryoshka {
    /// sentence-transformers' `truncate_dim`: the first `dimensions`
    /// components, L2-normalized again when the model normalizes.
    #[default]
    Truncate,
    /// nomic-embed-text-v1.5's recipe: a layer norm without affine (eps
    /// 1e-5) over the whole sentence vector, then the first `dimensions`
    /// components, L2-normalized (`F.layer_norm` -> `[:, :k]` ->
    /// `F.normalize`).
    LayerNorm,
}

impl Matryoshka {
    /// Every recipe, by name.
    pub const ALL: [Matryoshka; 2] = [Matryoshka::Truncate, Matryoshka::LayerNorm];

    /// The name the CLI and the bindings use (`truncate`, `layer-norm`).
    pub fn name(self) -> &'static str {
        match self {
            Matryoshka::Truncate => "truncate",
            Matryoshka::LayerNorm => "layer-norm",
        }
    }

    /// The recipe called `name`.
    ///
    /// # Errors
    /// [`crate::error::ErrorKind::InvalidArgument`] naming the recipes.
    pub fn from_name(name: &str) -> Result<Matryoshka> {
        Matryoshka::ALL
            .into_iter()
            .find(|m| m.name() == name)
            .ok_or_else(|| {
                Error::invalid_argument(format!(
                    "Matryoshka recipe '{name}' is not one of truncate, layer-norm"
                ))
            })
    }
}

/// `F.layer_norm`'s default eps, which nomic's recipe uses.
const MATRYOSHKA_LAYER_NORM_EPS: f64 = 1e-5;

/// `(x - mean) / sqrt(var + 1e-5)` over one vector (no weight or bias; the
/// biased variance and default eps of `F.layer_norm`), computed in f64 and
/// rounded once: [`Matryoshka::LayerNorm`]'s first step.
pub fn plain_layer_norm(x: &mut [f32]) {
    let eps = MATRYOSHKA_LAYER_NORM_EPS;
    let n = x.len() as f64;
    if x.is_empty() {
        return;
    }
    let mean = x.iter().map(|&v| f64::from(v)).sum::<f64>() / n;
    let var = x
        .iter()
        .map(|&v| (f64::from(v) - mean).powi(2))
        .sum::<f64>()
        / n;
    let inv = 1.0 / (var + eps).sqrt();
    for v in x.iter_mut() {
        *v = ((f64::from(*v) - mean) * inv) as f32;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dot_f64_matches_the_sequential_sum_after_rounding_to_f32() {
        // Lengths around the lane count, values of mixed sign and scale.
        for n in [0, 1, 7, 8, 9, 15, 16, 17, 768, 3072] {
            let a: Vec<f32> = (0..n)
                .map(|i| ((i * 37 % 101) as f32 - 50.0) * 0.013)
                .collect();
            let b: Vec<f32> = (0..n)
                .map(|i| ((i * 53 % 89) as f32 - 44.0) * 1.7e-3)
                .collect();
            let seq: f64 = a
                .iter()
                .zip(&b)
                .map(|(&x, &y)| f64::from(x) * f64::from(y))
                .sum();
            let got = dot_f64(&a, &b);
            assert!(
                (got - seq).abs() <= 1e-12 * seq.abs().max(1.0),
                "n {n}: {got} vs {seq}"
            );
            assert_eq!(got as f32, seq as f32, "n {n}");
        }
        // The common prefix only.
        assert_eq!(dot_f64(&[1.0, 2.0, 3.0], &[4.0, 5.0]), 14.0);
    }

    #[test]
    fn normalize_gives_unit_norm_and_keeps_zero() {
        let mut x = vec![3.0f32, -4.0, 0.0];
        assert_eq!(l2_normalize(&mut x), 5.0);
        assert_eq!(x, vec![0.6, -0.8, 0.0]);
        let mut z = vec![0.0f32; 5];
        assert_eq!(l2_normalize(&mut z), 0.0);
        assert!(z.iter().all(|&v| v == 0.0));
        // Tiny but non-zero: divided by NORM_EPS, not by its own norm.
        let mut t = vec![1e-20f32, 0.0];
        l2_normalize(&mut t);
        assert_eq!(t[0], 1e-20 / NORM_EPS);
    }

    #[test]
    fn cosine_dot_and_norm() {
        let a = [1.0f32, 0.0, 0.0];
        let b = [1.0f32, 1.0, 0.0];
        assert!((cosine(&a, &b) - std::f32::consts::FRAC_1_SQRT_2).abs() < 1e-7);
        assert_eq!(cosine(&a, &[0.0; 3]), 0.0);
        assert_eq!(cosine(&[0.0; 3], &[0.0; 3]), 0.0);
        assert_eq!(dot(&a, &b), 1.0);
        assert_eq!(norm(&[3.0, 4.0]), 5.0);
        // Mismatched lengths: the common prefix.
        assert_eq!(cosine(&[1.0, 2.0], &[1.0, 2.0, 9.0]), 1.0);
    }
}
