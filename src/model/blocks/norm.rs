//! Normalization layers (HF `nn.LayerNorm` with or without bias, `RMSNorm`
//! in Qwen's form and Gemma's `(1 + w)` form), applied row by row. Where a
//! norm sits (before or after a sub-layer) is the architecture's forward.

use std::sync::Arc;

use crate::error::Result;
use crate::formats::ModelFile;
use crate::kernels::{ops, Par};
use crate::model::param::{load_param, Param};

use super::for_rows;

/// The kind of a normalization layer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NormKind {
    /// `(x - mean) / sqrt(var + eps) · w (+ b)`, the biased variance.
    Layer,
    /// `x / sqrt(mean(x²) + eps) · w` (Llama, Qwen).
    Rms,
    /// `x / sqrt(mean(x²) + eps) · (1 + w)` (Gemma).
    RmsUnitOffset,
}

/// What a model's norms are: kind, bias or not, epsilon (a family's norms
/// all share one).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NormSpec {
    /// The kind.
    pub kind: NormKind,
    /// Whether each has a bias.
    pub bias: bool,
    /// The epsilon.
    pub eps: f32,
}

/// One normalization layer over rows of `width` values.
pub struct Norm {
    kind: NormKind,
    weight: Param,
    /// The bias, or zeros for a LayerNorm without one (adding +0 changes no
    /// value).
    bias: Option<Param>,
    zeros: Vec<f32>,
    eps: f32,
}

impl Norm {
    /// Loads module `module` (`{module}.weight`, and `{module}.bias` when
    /// `bias`) of `width` values.
    ///
    /// # Errors
    /// A missing or misshapen tensor, named.
    pub fn load(
        file: &Arc<ModelFile>,
        module: &str,
        kind: NormKind,
        width: usize,
        bias: bool,
        eps: f32,
        int8: bool,
    ) -> Result<Norm> {
        let p = |kind: &str| load_param(file, &format!("{module}.{kind}"), &[width], int8);
        Ok(Norm {
            kind,
            weight: p("weight")?,
            bias: if bias { Some(p("bias")?) } else { None },
            zeros: if bias { Vec::new() } else { vec![0.0; width] },
            eps,
        })
    }

    /// Loads module `module` of `width` values as `spec` says.
    ///
    /// # Errors
    /// A missing or misshapen tensor, named.
    pub fn with_spec(
        file: &Arc<ModelFile>,
        module: &str,
        spec: NormSpec,
        width: usize,
        int8: bool,
    ) -> Result<Norm> {
        Norm::load(file, module, spec.kind, width, spec.bias, spec.eps, int8)
    }

    /// The parameters held.
    pub fn params(&self) -> impl Iterator<Item = &Param> {
        std::iter::once(&self.weight).chain(self.bias.as_ref())
    }

    fn beta(&self) -> &[f32] {
        self.bias.as_ref().map_or(&self.zeros, Param::as_slice)
    }

    /// Normalizes every `width`-wide row of `x` in place.
    pub fn apply(&self, x: &mut [f32], width: usize, par: Par) {
        let (g, eps) = (self.weight.as_slice(), self.eps);
        match self.kind {
            NormKind::Layer => {
                let b = self.beta();
                for_rows(x, width, par, |r| ops::layer_norm(r, g, b, eps));
            }
            NormKind::Rms => for_rows(x, width, par, |r| rms_norm(r, g, 0.0, eps)),
            NormKind::RmsUnitOffset => for_rows(x, width, par, |r| rms_norm(r, g, 1.0, eps)),
        }
    }

    /// `x = norm(x + bias)` row by row: the post-norm residual of BERT's
    /// `BertSelfOutput` / `BertOutput`, with the dense layer's bias added in
    /// the same pass (a LayerNorm).
    pub fn apply_with_bias(&self, x: &mut [f32], bias: &[f32], width: usize, par: Par) {
        let (g, eps) = (self.weight.as_slice(), self.eps);
        if self.kind == NormKind::Layer {
            let b = self.beta();
            for_rows(x, width, par, |r| ops::bias_layer_norm(r, bias, g, b, eps));
        } else {
            for_rows(x, width, par, |r| {
                ops::add_assign(r, bias);
                rms_norm(
                    r,
                    g,
                    f32::from(u8::from(self.kind == NormKind::RmsUnitOffset)),
                    eps,
                )
            });
        }
    }

    /// `dst = norm(src)` row by row (a pre-norm's input to a sub-layer).
    pub fn apply_to(&self, src: &[f32], dst: &mut [f32], width: usize, par: Par) {
        dst.copy_from_slice(src);
        self.apply(dst, width, par);
    }
}

/// RMSNorm of one row in place, as torch computes HF's `Qwen3RMSNorm` /
/// `Gemma3RMSNorm` in f32: `x · rsqrt(mean(x²) + eps) · (offset + w)`, the
/// sum of squares accumulated in f64 (`vector::dot_f64`: exact
/// products, eight partial sums) and rounded to f32 once (torch sums in f32
/// in a vectorized order of its own).
pub fn rms_norm(x: &mut [f32], w: &[f32], offset: f32, eps: f32) {
    let n = x.len().min(w.len());
    if n == 0 {
        return;
    }
    let ss = crate::vector::dot_f64(&x[..n], &x[..n]) as f32;
    let inv = 1.0 / (ss / n as f32 + eps).sqrt();
    for (v, &g) in x[..n].iter_mut().zip(w) {
        *v = (*v * inv) * (offset + g);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rms_norm_matches_f64() {
        let x: Vec<f32> = (0..96)
            .map(|i| ((i * 37) % 23) as f32 * 0.3 - 3.0)
            .collect();
        let w: Vec<f32> = (0..96).map(|i| ((i * 11) % 7) as f32 * 0.1 - 0.2).collect();
        for offset in [0.0f32, 1.0] {
            let mut y = x.clone();
            rms_norm(&mut y, &w, offset, 1e-6);
            let ms = x.iter().map(|&v| f64::from(v).powi(2)).sum::<f64>() / 96.0;
            let inv = 1.0 / (ms + 1e-6).sqrt();
            for i in 0..96 {
                let want = f64::from(x[i]) * inv * (f64::from(offset) + f64::from(w[i]));
                assert!((f64::from(y[i]) - want).abs() < 1e-5 * (1.0 + want.abs()));
            }
        }
    }
}
