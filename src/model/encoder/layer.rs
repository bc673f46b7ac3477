//! One encoder layer (HF `BertLayer`): [`SelfAttention`] then
//! [`FeedForward`] (`BertIntermediate` + `BertOutput`).

use crate::kernels::gemm::Epilogue;
use crate::kernels::{ops, Par};
use crate::model::config::Activation;
use crate::model::linear::{Linear, LinearScratch};
use crate::model::param::Param;

use super::attention::SelfAttention;
use super::for_rows;

/// The feed-forward block of a layer.
pub(super) struct FeedForward {
    /// `BertIntermediate.dense` (followed by the activation).
    pub(super) up: Linear,
    pub(super) up_b: Param,
    /// `BertOutput.dense`.
    pub(super) down: Linear,
    pub(super) down_b: Param,
    /// `BertOutput.LayerNorm`.
    pub(super) ln_g: Param,
    pub(super) ln_b: Param,
}

impl FeedForward {
    /// `inter = act(hidden · Wupᵀ + b)` for `total` rows.
    pub(super) fn up(
        &self,
        hidden: &[f32],
        total: usize,
        inter: &mut [f32],
        activation: Activation,
        par: Par,
        lin: &mut LinearScratch,
    ) {
        let b = self.up_b.as_slice();
        let epi = match activation {
            Activation::Gelu => Epilogue::BiasGelu(b),
            Activation::GeluTanh => Epilogue::BiasGeluTanh(b),
        };
        self.up
            .forward(hidden, total, inter, b.len(), false, epi, par, lin);
    }

    /// `hidden = LayerNorm(hidden + inter · Wdownᵀ + b)`.
    pub(super) fn down(
        &self,
        inter: &[f32],
        total: usize,
        hidden: &mut [f32],
        eps: f32,
        par: Par,
        lin: &mut LinearScratch,
    ) {
        let h = self.down_b.as_slice().len();
        self.down
            .forward(inter, total, hidden, h, true, Epilogue::None, par, lin);
        let (bb, g, b) = (
            self.down_b.as_slice(),
            self.ln_g.as_slice(),
            self.ln_b.as_slice(),
        );
        for_rows(hidden, h, par, |r| ops::bias_layer_norm(r, bb, g, b, eps));
    }
}

/// Weights of one encoder layer.
pub(super) struct Layer {
    pub(super) attention: SelfAttention,
    pub(super) ffn: FeedForward,
}

impl Layer {
    /// The dense products, in forward order.
    pub(super) fn linears(&self) -> [&Linear; 4] {
        [
            &self.attention.qkv,
            &self.attention.out,
            &self.ffn.up,
            &self.ffn.down,
        ]
    }

    /// The small parameters (biases and LayerNorms, not the Q, K, V biases).
    pub(super) fn params(&self) -> [&Param; 7] {
        let (a, f) = (&self.attention, &self.ffn);
        [
            &a.out_b, &a.ln_g, &a.ln_b, &f.up_b, &f.down_b, &f.ln_g, &f.ln_b,
        ]
    }
}
