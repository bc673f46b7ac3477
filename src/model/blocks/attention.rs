//! The self-attention block: Q, K and V in one product (one fused tensor,
//! ModernBERT's `Wqkv`, or separate ones stacked, BERT's `query`/`key`/
//! `value`), optional rotary positions, softmax attention per sequence and
//! head over the sequence's own rows with a [`Band`] mask (full, causal,
//! sliding window) and MPNet's relative bias, query heads and key/value
//! heads counted separately (grouped-query attention), then the output
//! projection added to the residual. The norm around it is the
//! architecture's.

use std::sync::Arc;

use rayon::prelude::*;

use crate::kernels::attention::{self, Band};
use crate::kernels::gemm::Epilogue;
use crate::kernels::Par;
use crate::model::linear::{Linear, LinearScratch};
use crate::model::param::Param;

use super::norm::Norm;
use super::rope::Rope;

/// The shape of a layer's attention: query heads, key/value heads, width.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Heads {
    /// Query heads.
    pub q: usize,
    /// Key/value heads (`q` is a multiple; equal without GQA).
    pub kv: usize,
    /// Width of one head.
    pub d: usize,
}

impl Heads {
    /// Columns of one fused Q | K | V row.
    pub fn qkv_width(self) -> usize {
        (self.q + 2 * self.kv) * self.d
    }

    /// Columns of the heads' outputs side by side.
    pub fn ctx_width(self) -> usize {
        self.q * self.d
    }
}

/// The weights and settings of one layer's attention block.
pub struct Attention {
    /// Query and key/value heads.
    pub heads: Heads,
    /// Q, K and V side by side (`[qkv_width x h]`).
    pub qkv: Linear,
    /// The Q, K and V biases, concatenated, if the projections have them.
    pub qkv_b: Option<Vec<f32>>,
    /// Output projection.
    pub out: Linear,
    /// The output projection's bias, if any.
    pub out_b: Option<Param>,
    /// Which keys a query sees.
    pub band: Band,
    /// Rotary positions of this layer, if any.
    pub rope: Option<Arc<Rope>>,
    /// The norm of every query head (Qwen3's and Gemma3's `q_norm`), before
    /// the rotary positions.
    pub q_norm: Option<Norm>,
    /// The norm of every key head (`k_norm`).
    pub k_norm: Option<Norm>,
    /// Score scale (`1/sqrt(d)` unless the model says otherwise).
    pub scale: f32,
}

/// The attention bias hook, resolved for a model: per head the bias of every
/// relative position `j - i` in `-(max_position-1)..=max_position-1`.
pub struct RelativeBias {
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
    pub fn from_buckets(
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
            let b = relative_bucket(r as i64 - centre as i64, buckets, max_distance);
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
pub struct AttentionScratch<'a> {
    /// `[total x qkv_width]`: Q | K | V rows.
    pub qkv: &'a mut [f32],
    /// `[total x ctx_width]`: the heads' outputs side by side.
    pub ctx: &'a mut [f32],
    /// Attention scores: one [`attention::scratch_len`] per parallel head.
    pub scores: &'a mut [f32],
    /// `[max_len x ctx_width]` when heads run in parallel.
    pub heads: &'a mut [f32],
    /// The products' scratch (quantized activations).
    pub lin: &'a mut LinearScratch,
    /// Disentangled attention's projected relative rows and per-head score
    /// tables (empty for every other attention): grown to what a layer
    /// needs, kept across layers and calls.
    pub relative: &'a mut Vec<f32>,
    /// Per sequence, how many of its first tokens are keys (the others are
    /// queries only: an attention mask of 0 on tokens that still get an
    /// output, ColBERT's query expansion); `None`: every token.
    pub keys: Option<&'a [usize]>,
}

impl Attention {
    /// `Q | K | V = x · Wᵀ + b` for all `total` rows of `x` into `s.qkv`,
    /// then each query and key head's norm (if any) and the rotary
    /// positions of Q and K (positions from 0 in each sequence of `lens`).
    pub fn project_qkv(&self, x: &[f32], lens: &[usize], s: &mut AttentionScratch, par: Par) {
        let total: usize = lens.iter().sum();
        let n = self.heads.qkv_width();
        let epi = self.qkv_b.as_deref().map_or(Epilogue::None, Epilogue::Bias);
        self.qkv
            .forward(x, total, &mut s.qkv[..total * n], n, false, epi, par, s.lin);
        if self.rope.is_none() && self.q_norm.is_none() && self.k_norm.is_none() {
            return;
        }
        let Heads { q, kv, d } = self.heads;
        let rows = &mut s.qkv[..total * n];
        // The first row of each sequence.
        let mut starts = Vec::with_capacity(lens.len());
        let mut o = 0;
        for &l in lens {
            starts.push(o);
            o += l;
        }
        let per_row = |(row_i, row): (usize, &mut [f32])| {
            if let Some(norm) = &self.q_norm {
                norm.apply(&mut row[..q * d], d, Par::Serial);
            }
            if let Some(norm) = &self.k_norm {
                norm.apply(&mut row[q * d..(q + kv) * d], d, Par::Serial);
            }
            if let Some(rope) = &self.rope {
                // The row's position in its sequence.
                let k = starts.partition_point(|&st| st <= row_i) - 1;
                let pos = row_i - starts[k];
                rope.rotate(row, 0, q, pos);
                rope.rotate(row, q * d, kv, pos);
            }
        };
        match par {
            Par::Threads(t) if t > 1 && total * n >= 1 << 15 => {
                rows.par_chunks_mut(n).enumerate().for_each(per_row)
            }
            _ => rows.chunks_mut(n).enumerate().for_each(per_row),
        }
    }

    /// Attention of every sequence (lengths `lens`, packed) and head, from
    /// `s.qkv` into `s.ctx`: heads in parallel when `par` has several tasks.
    pub fn attend_all<'a>(
        &self,
        lens: &[usize],
        bias: Option<&'a RelativeBias>,
        s: &'a mut AttentionScratch,
        par: Par,
    ) {
        let Heads { q: nh, kv: nkv, d } = self.heads;
        let (ld, cw) = (self.heads.qkv_width(), self.heads.ctx_width());
        let group = nh / nkv.max(1);
        let par_heads = par.tasks() > 1;
        let keys = s.keys;
        let head_input =
            move |qkv: &'a [f32], len: usize, band: Band, hd: usize| -> attention::HeadInput<'a> {
                let g = hd / group;
                attention::HeadInput {
                    qkv,
                    ld,
                    len,
                    d,
                    q: hd * d,
                    k: nh * d + g * d,
                    v: (nh + nkv) * d + g * d,
                    bias: bias.map(|b| b.head(hd)),
                    band,
                }
            };
        let mut o = 0;
        for (si, &len) in lens.iter().enumerate() {
            let band = match keys {
                Some(k) => self.band.with_keys(k[si]),
                None => self.band,
            };
            let q_s = &s.qkv[o * ld..(o + len) * ld];
            let ctx_s = &mut s.ctx[o * cw..(o + len) * cw];
            if par_heads {
                let heads = &mut s.heads[..len * cw];
                let per = attention::scratch_len(len, d);
                let scores = &mut s.scores[..nh * per];
                heads
                    .par_chunks_mut(len * d)
                    .zip(scores.par_chunks_mut(per))
                    .enumerate()
                    .for_each(|(hd, (dst, sc))| {
                        attention::attend(head_input(q_s, len, band, hd), self.scale, sc, dst, d);
                    });
                for (i, row) in ctx_s.chunks_exact_mut(cw).enumerate() {
                    for hd in 0..nh {
                        let src = &heads[hd * len * d + i * d..hd * len * d + (i + 1) * d];
                        row[hd * d..(hd + 1) * d].copy_from_slice(src);
                    }
                }
            } else {
                let sc = &mut s.scores[..attention::scratch_len(len, d)];
                for hd in 0..nh {
                    let x = head_input(q_s, len, band, hd);
                    attention::attend(x, self.scale, sc, &mut ctx_s[hd * d..], cw);
                }
            }
            o += len;
        }
    }

    /// `hidden += ctx · Wᵀ` (the bias, if any, is the caller's: a post-norm
    /// adds it inside the norm).
    pub fn output(
        &self,
        ctx: &[f32],
        total: usize,
        hidden: &mut [f32],
        par: Par,
        lin: &mut LinearScratch,
    ) {
        let h = self.out.n();
        self.out
            .forward(ctx, total, hidden, h, true, Epilogue::None, par, lin);
    }

    /// `dst = ctx · Wᵀ`: the output projection alone, for a norm between it
    /// and the residual (Gemma's `post_attention_layernorm`).
    pub fn output_to(
        &self,
        ctx: &[f32],
        total: usize,
        dst: &mut [f32],
        par: Par,
        lin: &mut LinearScratch,
    ) {
        let h = self.out.n();
        self.out
            .forward(ctx, total, dst, h, false, Epilogue::None, par, lin);
    }

    /// The output projection's bias, if it has one.
    pub fn out_bias(&self) -> Option<&[f32]> {
        self.out_b.as_ref().map(Param::as_slice)
    }

    /// The dense products.
    pub fn linears(&self) -> [&Linear; 2] {
        [&self.qkv, &self.out]
    }

    /// The small parameters held (not the concatenated Q, K, V biases).
    pub fn params(&self) -> impl Iterator<Item = &Param> {
        self.out_b.iter().chain(
            self.q_norm
                .iter()
                .chain(self.k_norm.iter())
                .flat_map(Norm::params),
        )
    }
}

/// Bucket of a relative position (T5 / MPNet, bidirectional): `rel` = key
/// position − query position. Half the buckets are for keys after the query;
/// within a half, distances below a quarter of the buckets are exact and
/// larger ones fall into logarithmically wider buckets up to `max_distance`
/// (and beyond, the last bucket).
///
/// HF computes the logarithmic part in float32 as
/// `trunc(ln(n / e) / ln(max_distance / e) · (half − e))` with `e` = half / 2;
/// this evaluates the same expression exactly in integers when `max_distance
/// / e` is a power of two and `half - e` a multiple of its log2 (32 buckets,
/// 128: `trunc(2 · log2(n / 8))` = `⌊log2(n²)⌋ − 6`), which equals the float32
/// result for every distance (checked at the exact boundaries n = 16, 32, 64),
/// and falls back to f64 otherwise.
pub fn relative_bucket(rel: i64, num_buckets: usize, max_distance: usize) -> usize {
    let half = (num_buckets / 2) as i64;
    let mut ret = if rel > 0 { half } else { 0 };
    let n = rel.unsigned_abs();
    let exact = (half / 2) as u64;
    if n < exact {
        return (ret + n as i64) as usize;
    }
    let ratio = (max_distance as u64).checked_div(exact).unwrap_or(0);
    let span = (half as u64).saturating_sub(exact);
    let large = if exact > 0 && ratio.is_power_of_two() && ratio > 1 {
        let log_ratio = u64::from(ratio.trailing_zeros());
        if span.is_multiple_of(log_ratio) {
            // trunc(log2(n / exact) · span / log_ratio) with span / log_ratio =
            // m: floor(log2((n / exact)^m)) = floor(log2(n^m)) − m·log2(exact).
            let m = span / log_ratio;
            let lg_exact = u64::from(exact.trailing_zeros());
            if exact.is_power_of_two() && m <= 2 {
                let nm = u128::from(n).pow(m as u32);
                let lg = 127 - u64::from(nm.leading_zeros());
                exact + lg - m * lg_exact
            } else {
                exact + float_large(n, exact, max_distance, span)
            }
        } else {
            exact + float_large(n, exact, max_distance, span)
        }
    } else {
        exact + float_large(n, exact, max_distance, span)
    };
    ret += large.min(half as u64 - 1) as i64;
    ret as usize
}

fn float_large(n: u64, exact: u64, max_distance: usize, span: u64) -> u64 {
    let v = ((n as f64 / exact as f64).ln() / (max_distance as f64 / exact as f64).ln()
        * span as f64) as i64;
    v.max(0) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_buckets_match_the_float_formula() {
        // The HF expression in f64 away from the exact boundaries, and the
        // boundaries themselves (powers of two) by hand.
        for rel in -600i64..=600 {
            let b = relative_bucket(rel, 32, 128);
            let n = rel.unsigned_abs();
            let base = if rel > 0 { 16 } else { 0 };
            let want = if n < 8 {
                n as usize
            } else {
                let v = ((n as f64 / 8.0).ln() / 16f64.ln() * 8.0 + 1e-9) as usize;
                8 + v.min(7)
            };
            assert_eq!(b, base + want, "rel {rel}");
        }
        assert_eq!(relative_bucket(0, 32, 128), 0);
        assert_eq!(relative_bucket(-15, 32, 128), 9);
        assert_eq!(relative_bucket(-16, 32, 128), 10);
        assert_eq!(relative_bucket(16, 32, 128), 26);
        assert_eq!(relative_bucket(-127, 32, 128), 15);
        assert_eq!(relative_bucket(-128, 32, 128), 15);
        assert_eq!(relative_bucket(1000, 32, 128), 31);
    }
}
