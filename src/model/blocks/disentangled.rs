//! DeBERTa-v2's disentangled self-attention ([`RelativePositions::Disentangled`]).
//!
//! The relative embedding rows (`encoder.rel_embeddings`, `2 · span` of
//! them, normalized once by `encoder.LayerNorm` when `norm_rel_ebd` says
//! `layer_norm`) go through each layer's own query and key projections
//! (`share_att_key`): `pq_r`, `pk_r`. For query `i` and key `j` with
//! relative index `r = clamp(δ(i - j) + span, 0, 2·span - 1)`, where `δ` is
//! the log bucket of [`log_bucket`] (or the position itself without
//! buckets), the score is
//!
//! ```text
//! s(i, j) = (q_i · k_j + [c2p] q_i · pk_r + [p2c] k_j · pq_r) / sqrt(d · (1 + terms))
//! ```
//!
//! then the softmax over the visible keys and the values, as transformers'
//! `DisentangledSelfAttention` (its p2c gathers at `-δ(j - i)`, which is
//! `δ(i - j)`: the bucket is odd).
//!
//! [`RelativePositions::Disentangled`]: crate::model::arch::RelativePositions::Disentangled

use rayon::prelude::*;

use crate::kernels::gemm::Epilogue;
use crate::kernels::Par;

use super::attention::{Attention, AttentionScratch};

/// The relative embedding rows of a model, normalized, and the settings of
/// the relative positions.
pub struct Disentangled {
    /// `[2·span x h]`.
    pub rows: Vec<f32>,
    /// `pos_ebd_size`.
    pub span: usize,
    /// `position_buckets` (0: positions unbucketed).
    pub buckets: usize,
    /// `max_relative_positions`.
    pub max_position: usize,
    /// Content to position.
    pub c2p: bool,
    /// Position to content.
    pub p2c: bool,
}

/// transformers' `make_log_bucket_position` of one relative position, in
/// its float32 steps.
pub fn log_bucket(rel: i64, buckets: usize, max_position: usize) -> i64 {
    let mid = (buckets / 2) as i64;
    let abs = if rel < mid && rel > -mid {
        mid - 1
    } else {
        rel.abs()
    };
    if abs <= mid {
        return rel;
    }
    let num = (abs as f32 / mid as f32).ln();
    let den = ((max_position as f64 - 1.0) / mid as f64) as f32;
    let log_pos = (num / den.ln() * (mid - 1) as f32).ceil() + mid as f32;
    log_pos as i64 * rel.signum()
}

impl Disentangled {
    /// The number of score terms (`1 + len(pos_att_type)`).
    pub fn scale_factor(&self) -> usize {
        1 + usize::from(self.c2p) + usize::from(self.p2c)
    }

    /// The relative index of query `i` and key `j` (`i - j` = `delta`).
    fn index(&self, delta: i64) -> usize {
        let b = if self.buckets > 0 && self.max_position > 0 {
            log_bucket(delta, self.buckets, self.max_position)
        } else {
            delta
        };
        (b + self.span as i64).clamp(0, 2 * self.span as i64 - 1) as usize
    }

    /// Attention of every sequence (lengths `lens`) and head from `s.qkv`
    /// (already projected) into `s.ctx`.
    pub fn attend_all(&self, att: &Attention, lens: &[usize], s: &mut AttentionScratch, par: Par) {
        let heads = att.heads;
        let (nh, d) = (heads.q, heads.d);
        let (ld, cw) = (heads.qkv_width(), heads.ctx_width());
        let rows = 2 * self.span;
        // The relative rows through this layer's Q | K | V product.
        let mut pos = vec![0.0f32; rows * ld];
        let epi = att.qkv_b.as_deref().map_or(Epilogue::None, Epilogue::Bias);
        att.qkv
            .forward(&self.rows, rows, &mut pos, ld, false, epi, par, s.lin);
        let scale = 1.0 / ((d * self.scale_factor()) as f32).sqrt();
        let keys = s.keys;
        let mut o = 0;
        for (si, &len) in lens.iter().enumerate() {
            let visible = keys.map_or(len, |k| k[si].min(len));
            let idx: Vec<usize> = (0..2 * len.max(1) - 1)
                .map(|k| self.index(k as i64 - (len as i64 - 1)))
                .collect();
            let qkv = &s.qkv[o * ld..(o + len) * ld];
            let pos = &pos;
            let idx = &idx;
            let head = |hd: usize| -> Vec<f32> {
                let (qo, ko, vo) = (hd * d, nh * d + hd * d, 2 * nh * d + hd * d);
                let row = |t: usize, off: usize| &qkv[t * ld + off..t * ld + off + d];
                let prow = |r: usize, off: usize| &pos[r * ld + off..r * ld + off + d];
                let dot = |a: &[f32], b: &[f32]| a.iter().zip(b).map(|(x, y)| x * y).sum::<f32>();
                // c2p[i][r] = q_i · pk_r; p2c[j][r] = k_j · pq_r.
                let table = |off_t: usize, off_p: usize| -> Vec<f32> {
                    let mut t = vec![0.0f32; len * rows];
                    for i in 0..len {
                        for r in 0..rows {
                            t[i * rows + r] = dot(row(i, off_t), prow(r, off_p));
                        }
                    }
                    t
                };
                let c2p = self.c2p.then(|| table(qo, ko));
                let p2c = self.p2c.then(|| table(ko, qo));
                let mut out = vec![0.0f32; len * d];
                let mut sc = vec![0.0f32; visible];
                for i in 0..len {
                    let q = row(i, qo);
                    let mut max = f32::NEG_INFINITY;
                    for (j, v) in sc.iter_mut().enumerate() {
                        let r = idx[i + len - 1 - j];
                        let mut x = dot(q, row(j, ko));
                        if let Some(t) = &c2p {
                            x += t[i * rows + r];
                        }
                        if let Some(t) = &p2c {
                            x += t[j * rows + r];
                        }
                        *v = x * scale;
                        max = max.max(*v);
                    }
                    let mut sum = 0.0f32;
                    for v in sc.iter_mut() {
                        *v = (*v - max).exp();
                        sum += *v;
                    }
                    let dst = &mut out[i * d..(i + 1) * d];
                    for (j, &p) in sc.iter().enumerate() {
                        let w = p / sum;
                        for (a, &b) in dst.iter_mut().zip(row(j, vo)) {
                            *a += w * b;
                        }
                    }
                }
                out
            };
            let outs: Vec<Vec<f32>> = if par.tasks() > 1 {
                (0..nh).into_par_iter().map(head).collect()
            } else {
                (0..nh).map(head).collect()
            };
            let ctx = &mut s.ctx[o * cw..(o + len) * cw];
            for (hd, out) in outs.iter().enumerate() {
                for i in 0..len {
                    ctx[i * cw + hd * d..i * cw + (hd + 1) * d]
                        .copy_from_slice(&out[i * d..(i + 1) * d]);
                }
            }
            o += len;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_buckets_are_odd_and_exact_near_zero() {
        for r in -15..=15 {
            assert_eq!(log_bucket(r, 32, 512), r);
        }
        for r in 1..600 {
            assert_eq!(log_bucket(-r, 32, 512), -log_bucket(r, 32, 512));
        }
        // Past the middle the buckets grow logarithmically up to `buckets`.
        assert_eq!(log_bucket(16, 32, 512), 16);
        assert!(log_bucket(511, 32, 512) <= 31);
    }
}
