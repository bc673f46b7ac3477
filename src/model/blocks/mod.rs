//! The shared transformer blocks every architecture's forward is written
//! with (llama.cpp's `build_norm` / `build_attn` / `build_ffn`, in candle's
//! module-per-block style): [`norm`] (LayerNorm with or without bias,
//! RMSNorm, Gemma's `(1 + w)` RMSNorm), [`rope`] (rotary positions),
//! [`attention`] (fused or stacked Q/K/V, GQA, bands, relative bias),
//! [`mlp`] (plain or gated), [`embeddings`] (the embedding tables). Where
//! the norms sit and in what order the blocks run is each architecture's
//! `forward` in [`crate::model::arch`].

pub mod attention;
pub mod disentangled;
pub mod embeddings;
pub mod mlp;
pub mod norm;
pub mod rope;

use rayon::prelude::*;

use crate::kernels::Par;
use crate::model::linear::{Linear, LinearScratch};
use crate::model::param::Param;
use crate::model::precision::Product;

use attention::{Attention, AttentionScratch, RelativeBias};
use mlp::Mlp;
use norm::Norm;

/// Row passes over fewer floats than this run on one thread (splitting them
/// costs more in synchronisation than the pass itself).
const MIN_SPLIT_ROW_FLOATS: usize = 1 << 15;

/// Applies `f` to each `width`-wide row of `buf`, in parallel if asked.
pub fn for_rows(buf: &mut [f32], width: usize, par: Par, f: impl Fn(&mut [f32]) + Sync + Send) {
    let rows = buf.len() / width.max(1);
    match par {
        Par::Threads(t) if t > 1 && rows > 1 && buf.len() >= MIN_SPLIT_ROW_FLOATS => {
            let per = rows.div_ceil(t);
            buf.par_chunks_mut(per * width)
                .for_each(|c| c.chunks_exact_mut(width).for_each(&f));
        }
        _ => buf.chunks_exact_mut(width).for_each(f),
    }
}

/// One transformer layer's weights: attention and feed-forward blocks with
/// the norms the architecture places around them (`None` where it has
/// none, such as ModernBERT's first layer's attention norm).
pub struct Layer {
    /// The attention block's norm (before or after it, as the family says).
    pub attn_norm: Option<Norm>,
    /// The attention block.
    pub attention: Attention,
    /// The feed-forward block's norm.
    pub mlp_norm: Option<Norm>,
    /// The feed-forward block.
    pub mlp: Mlp,
    /// The norm of the attention block's output before the residual add
    /// (Gemma's `post_attention_layernorm`), if any.
    pub post_attn_norm: Option<Norm>,
    /// The norm of the feed-forward block's output before the residual add
    /// (Gemma's `post_feedforward_layernorm`), if any.
    pub post_mlp_norm: Option<Norm>,
}

impl Layer {
    /// The dense products, in forward order.
    pub fn linears(&self) -> [&Linear; 4] {
        let [qkv, out] = self.attention.linears();
        let [up, down] = self.mlp.linears();
        [qkv, out, up, down]
    }

    /// The small parameters (biases and norms, not the Q, K, V biases).
    pub fn params(&self) -> impl Iterator<Item = &Param> {
        self.attention
            .params()
            .chain(self.attn_norm.iter().flat_map(Norm::params))
            .chain(self.mlp.params())
            .chain(self.mlp_norm.iter().flat_map(Norm::params))
            .chain(self.post_attn_norm.iter().flat_map(Norm::params))
            .chain(self.post_mlp_norm.iter().flat_map(Norm::params))
    }
}

/// `x += y`, row by row over `width`-wide rows (a residual add).
pub fn add_rows(x: &mut [f32], y: &[f32], width: usize, par: Par) {
    match par {
        Par::Threads(t) if t > 1 && x.len() >= MIN_SPLIT_ROW_FLOATS => {
            let per = (x.len() / width.max(1)).div_ceil(t) * width;
            x.par_chunks_mut(per)
                .zip(y.par_chunks(per))
                .for_each(|(a, b)| a.iter_mut().zip(b).for_each(|(a, b)| *a += b));
        }
        _ => x.iter_mut().zip(y).for_each(|(a, b)| *a += b),
    }
}

/// A point of the forward pass reported to a [`Trace`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// The input of a product (`[total_tokens x k]`).
    Input(Product),
    /// After the attention block (its residual add, and norm if post-norm).
    Attention,
    /// After the feed-forward block (the layer's output).
    FeedForward,
}

/// The callback of a traced forward pass: `(layer, stage, values)`.
pub type Trace<'a> = &'a mut dyn FnMut(usize, Stage, &[f32]);

/// The buffers and settings one layer's forward runs with.
pub struct LayerRun<'a, 'b> {
    /// `[total x h]`: the residual stream, updated in place.
    pub hidden: &'a mut [f32],
    /// `[total x h]`: a pre-norm's normalized input.
    pub normed: &'a mut [f32],
    /// The attention buffers.
    pub s: AttentionScratch<'a>,
    /// `[total x up_width]`: a gated MLP's up projection.
    pub wide: &'a mut [f32],
    /// `[total x inter]`: the MLP's activations.
    pub inter: &'a mut [f32],
    /// The sequences' lengths (packed one after another).
    pub lens: &'a [usize],
    /// Tokens in all.
    pub total: usize,
    /// Hidden size.
    pub h: usize,
    /// MPNet's relative position bias, if the model has one.
    pub bias: Option<&'a RelativeBias>,
    /// DeBERTa-v2's relative embeddings, if the model has them.
    pub disentangled: Option<&'a disentangled::Disentangled>,
    /// How the products split over threads.
    pub par: Par,
    /// Where the hidden states are reported, if anywhere.
    pub trace: &'a mut Option<Trace<'b>>,
    /// This layer's index (for the trace).
    pub layer: usize,
}

impl LayerRun<'_, '_> {
    /// Reports `values` at `stage` to the trace, if any.
    pub fn trace(&mut self, stage: Stage, which: Traced) {
        if let Some(t) = self.trace.as_mut() {
            let v: &[f32] = match which {
                Traced::Hidden => self.hidden,
                Traced::Normed => self.normed,
                Traced::Ctx => self.s.ctx,
                Traced::Inter => self.inter,
            };
            t(self.layer, stage, v);
        }
    }

    /// The attention buffers' linear scratch.
    pub fn lin(&mut self) -> &mut LinearScratch {
        self.s.lin
    }
}

/// Which buffer a trace point reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Traced {
    /// The residual stream.
    Hidden,
    /// A pre-norm's normalized input.
    Normed,
    /// The attention heads' outputs.
    Ctx,
    /// The feed-forward activations.
    Inter,
}
