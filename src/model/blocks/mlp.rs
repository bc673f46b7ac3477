//! The feed-forward block: plain (HF `BertIntermediate` + `BertOutput`:
//! `down(act(up(x) + b))`) or gated (GeGLU, SwiGLU: `down(act(g) · u)`,
//! where `g | u` come from one fused up-projection, ModernBERT's `Wi`, or
//! two projections stacked side by side, Qwen's `gate_proj` and
//! `up_proj`). The residual and the norm around it are the architecture's.

use crate::kernels::gemm::Epilogue;
use crate::kernels::{ops, Par};
use crate::model::linear::{Linear, LinearScratch};
use crate::model::param::Param;

use super::for_rows;

/// The feed-forward activation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Activation {
    /// GELU, exact erf form (HF `gelu`).
    Gelu,
    /// GELU, tanh approximation (HF `gelu_new` / `gelu_pytorch_tanh`).
    GeluTanh,
    /// SiLU (`x · sigmoid(x)`, HF `silu`: Qwen's SwiGLU gate).
    Silu,
}

impl Activation {
    /// The metadata spelling.
    pub fn name(self) -> &'static str {
        match self {
            Activation::Gelu => "gelu",
            Activation::GeluTanh => "gelu_tanh",
            Activation::Silu => "silu",
        }
    }
}

/// The feed-forward block of a layer.
pub struct Mlp {
    /// The up projection: `[inter x h]`, or `[2·inter x h]` (gate | up)
    /// when gated.
    pub up: Linear,
    /// The up projection's bias, if any.
    pub up_b: Option<Param>,
    /// The down projection `[h x inter]`.
    pub down: Linear,
    /// The down projection's bias, if any.
    pub down_b: Option<Param>,
    /// The activation (of the gate half when gated).
    pub act: Activation,
    /// Whether the up projection's output is `gate | up` (a GLU).
    pub gated: bool,
    /// Whether a gated up projection's output is `up | gate` instead (GTE).
    pub up_first: bool,
    /// `inter` zeros: the epilogue's bias of a projection without one.
    pub zeros: Vec<f32>,
}

impl Mlp {
    /// Width of the up projection's output.
    pub fn up_width(&self) -> usize {
        self.up.n()
    }

    /// Width of the down projection's input (`inter`).
    pub fn inter(&self) -> usize {
        self.down.k()
    }

    /// `inter = act(x · Wupᵀ + b)` for `total` rows (plain), or, gated, `up
    /// = x · Wupᵀ` into `wide` (`[total x 2·inter]`) and `inter = act(g) ·
    /// u` row by row.
    #[allow(clippy::too_many_arguments)]
    pub fn up(
        &self,
        x: &[f32],
        total: usize,
        wide: &mut [f32],
        inter: &mut [f32],
        par: Par,
        lin: &mut LinearScratch,
    ) {
        let b = self.up_b.as_ref().map_or(&self.zeros[..], Param::as_slice);
        if !self.gated {
            let epi = match self.act {
                Activation::Gelu => Epilogue::BiasGelu(b),
                Activation::GeluTanh => Epilogue::BiasGeluTanh(b),
                Activation::Silu => Epilogue::Bias(b),
            };
            let n = self.up.n();
            self.up.forward(x, total, inter, n, false, epi, par, lin);
            if self.act == Activation::Silu {
                for_rows(inter, n, par, |r| {
                    r.iter_mut().for_each(|v| *v = ops::silu(*v))
                });
            }
            return;
        }
        let (n, i) = (self.up.n(), self.inter());
        let epi = match &self.up_b {
            Some(b) => Epilogue::Bias(b.as_slice()),
            None => Epilogue::None,
        };
        self.up.forward(x, total, wide, n, false, epi, par, lin);
        let act = self.act;
        let zeros = &self.zeros[..i];
        let up_first = self.up_first;
        for_rows(wide, n, par, |r| {
            let (g, u) = r.split_at_mut(i);
            if up_first {
                // `up | gate`: the product goes where `gate | up` puts it.
                for (a, b) in g.iter_mut().zip(u.iter_mut()) {
                    std::mem::swap(a, b);
                }
            }
            match act {
                Activation::Gelu => ops::bias_gelu(g, zeros),
                Activation::GeluTanh => ops::bias_gelu_tanh(g, zeros),
                Activation::Silu => g.iter_mut().for_each(|v| *v = ops::silu(*v)),
            }
            for (a, &b) in g.iter_mut().zip(u.iter()) {
                *a *= b;
            }
        });
        for (dst, src) in inter.chunks_exact_mut(i).zip(wide.chunks_exact(n)) {
            dst.copy_from_slice(&src[..i]);
        }
    }

    /// `dst = inter · Wdownᵀ`: the down projection alone, for a norm between
    /// it and the residual (Gemma's `post_feedforward_layernorm`).
    pub fn down_to(
        &self,
        inter: &[f32],
        total: usize,
        dst: &mut [f32],
        par: Par,
        lin: &mut LinearScratch,
    ) {
        let h = self.down.n();
        self.down
            .forward(inter, total, dst, h, false, Epilogue::None, par, lin);
    }

    /// `hidden += inter · Wdownᵀ` (the bias, if any, is the caller's: a
    /// post-norm adds it inside the norm, the caller adds [`Mlp::down_bias`] otherwise).
    pub fn down(
        &self,
        inter: &[f32],
        total: usize,
        hidden: &mut [f32],
        par: Par,
        lin: &mut LinearScratch,
    ) {
        let h = self.down.n();
        self.down
            .forward(inter, total, hidden, h, true, Epilogue::None, par, lin);
    }

    /// The down projection's bias, if it has one.
    pub fn down_bias(&self) -> Option<&[f32]> {
        self.down_b.as_ref().map(Param::as_slice)
    }

    /// The dense products.
    pub fn linears(&self) -> [&Linear; 2] {
        [&self.up, &self.down]
    }

    /// The small parameters held.
    pub fn params(&self) -> impl Iterator<Item = &Param> {
        self.up_b.iter().chain(self.down_b.iter())
    }
}
