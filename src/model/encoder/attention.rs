//! The self-attention block (HF `BertAttention`: `BertSelfAttention` +
//! `BertSelfOutput`): Q, K, V in one product, softmax attention per sequence
//! and head over the sequence's own rows (with the family's attention bias
//! hook), the output projection, residual add and LayerNorm.

use rayon::prelude::*;

use crate::kernels::gemm::Epilogue;
use crate::kernels::{attention, ops, Par};
use crate::model::arch;
use crate::model::linear::{Linear, LinearScratch};
use crate::model::param::Param;

use super::for_rows;

/// The weights of one layer's attention block.
pub(super) struct SelfAttention {
    /// Q, K and V side by side (`[3h x h]`).
    pub(super) qkv: Linear,
    /// The Q, K and V biases, concatenated.
    pub(super) qkv_b: Vec<f32>,
    /// Output projection (`BertSelfOutput.dense`).
    pub(super) out: Linear,
    pub(super) out_b: Param,
    /// `BertSelfOutput.LayerNorm`.
    pub(super) ln_g: Param,
    pub(super) ln_b: Param,
}

/// The attention bias hook, resolved for a model: per head the bias of every
/// relative position `j - i` in `-(max_position-1)..=max_position-1`.
pub(super) struct RelativeBias {
    /// `[heads x width]`.
    table: Vec<f32>,
    /// `2·max_position − 1`.
    width: usize,
    /// Index of relative position 0 in a head's row.
    centre: usize,
}

impl RelativeBias {
    /// The bias of every head for every relative position, from the
    /// `[buckets x heads]` table of T5/MPNet relative buckets.
    pub(super) fn from_buckets(
        buckets_table: &[f32],
        buckets: usize,
        heads: usize,
        max_distance: usize,
        max_position: usize,
    ) -> RelativeBias {
        let width = 2 * max_position - 1;
        let centre = max_position - 1;
        let mut table = vec![0.0; heads * width];
        for r in 0..width {
            let b = arch::relative_bucket(r as i64 - centre as i64, buckets, max_distance);
            for hd in 0..heads {
                table[hd * width + r] = buckets_table[b * heads + hd];
            }
        }
        RelativeBias {
            table,
            width,
            centre,
        }
    }

    fn head(&self, hd: usize) -> (&[f32], usize) {
        (
            &self.table[hd * self.width..(hd + 1) * self.width],
            self.centre,
        )
    }
}

/// Shapes and buffers of one attention pass over a packed chunk.
pub(super) struct AttentionScratch<'a> {
    /// `[total x 3h]`: Q | K | V rows.
    pub(super) qkv: &'a mut [f32],
    /// `[total x h]`: the heads' outputs side by side.
    pub(super) ctx: &'a mut [f32],
    /// Attention scores: one [`attention::scratch_len`] per parallel head.
    pub(super) scores: &'a mut [f32],
    /// `[max_len x h]` when heads run in parallel.
    pub(super) heads: &'a mut [f32],
    pub(super) lin: &'a mut LinearScratch,
}

impl SelfAttention {
    /// `Q | K | V = x · Wᵀ + b` for all `total` rows of `x` into `s.qkv`.
    pub(super) fn project_qkv(&self, x: &[f32], total: usize, s: &mut AttentionScratch, par: Par) {
        let n = self.qkv_b.len();
        let epi = Epilogue::Bias(&self.qkv_b);
        self.qkv
            .forward(x, total, &mut s.qkv[..total * n], n, false, epi, par, s.lin);
    }

    /// Attention of every sequence (lengths `lens`, packed) and head, from
    /// `s.qkv` into `s.ctx`: heads in parallel when `par` has several tasks.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn attend_all(
        lens: impl Iterator<Item = usize>,
        h: usize,
        nh: usize,
        bias: Option<&RelativeBias>,
        s: &mut AttentionScratch,
        par: Par,
    ) {
        let d = h / nh;
        let scale = 1.0 / (d as f32).sqrt();
        let par_heads = par.tasks() > 1;
        let mut o = 0;
        for len in lens {
            let q_s = &s.qkv[o * 3 * h..(o + len) * 3 * h];
            let ctx_s = &mut s.ctx[o * h..(o + len) * h];
            if par_heads {
                let heads = &mut s.heads[..len * h];
                let per = attention::scratch_len(len, d);
                let scores = &mut s.scores[..nh * per];
                heads
                    .par_chunks_mut(len * d)
                    .zip(scores.par_chunks_mut(per))
                    .enumerate()
                    .for_each(|(hd, (dst, sc))| {
                        let b = bias.map(|b| b.head(hd));
                        attend(q_s, len, h, d, hd, scale, b, sc, dst, d);
                    });
                for (i, row) in ctx_s.chunks_exact_mut(h).enumerate() {
                    for hd in 0..nh {
                        let src = &heads[hd * len * d + i * d..hd * len * d + (i + 1) * d];
                        row[hd * d..(hd + 1) * d].copy_from_slice(src);
                    }
                }
            } else {
                let sc = &mut s.scores[..attention::scratch_len(len, d)];
                for hd in 0..nh {
                    let b = bias.map(|b| b.head(hd));
                    attend(q_s, len, h, d, hd, scale, b, sc, &mut ctx_s[hd * d..], h);
                }
            }
            o += len;
        }
    }

    /// `hidden = LayerNorm(hidden + ctx · Wᵀ + b)` (`BertSelfOutput`).
    pub(super) fn output(
        &self,
        ctx: &[f32],
        total: usize,
        hidden: &mut [f32],
        eps: f32,
        par: Par,
        lin: &mut LinearScratch,
    ) {
        let h = self.out_b.as_slice().len();
        self.out
            .forward(ctx, total, hidden, h, true, Epilogue::None, par, lin);
        let (bb, g, b) = (
            self.out_b.as_slice(),
            self.ln_g.as_slice(),
            self.ln_b.as_slice(),
        );
        for_rows(hidden, h, par, |r| ops::bias_layer_norm(r, bb, g, b, eps));
    }
}

/// One attention head of one sequence: `dst = softmax(scale · Q Kᵀ + B) · V`.
/// `qkv` holds the sequence's `[len x 3h]` rows (Q | K | V); `dst` receives
/// `len x d` values with row stride `ldd`; `scratch` holds
/// [`attention::scratch_len`] floats. `bias` (the attention bias hook): the
/// head's bias by relative position and the index of relative position 0 in
/// it; `B[i][j] = bias[centre + j - i]`.
#[allow(clippy::too_many_arguments)]
fn attend(
    qkv: &[f32],
    len: usize,
    h: usize,
    d: usize,
    head: usize,
    scale: f32,
    bias: Option<(&[f32], usize)>,
    scratch: &mut [f32],
    dst: &mut [f32],
    ldd: usize,
) {
    let c = head * d;
    let x = attention::HeadInput {
        qkv,
        ld: 3 * h,
        len,
        d,
        q: c,
        k: h + c,
        v: 2 * h + c,
        bias,
    };
    attention::attend(x, scale, scratch, dst, ldd);
}
