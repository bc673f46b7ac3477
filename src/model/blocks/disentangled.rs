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

use crate::kernels::gemm::{self, Epilogue};
use crate::kernels::{ops, Par};

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

    /// The relative indexes `lo..hi` a sequence of `len` queries over its
    /// first `keys` keys reaches (`i - j` from `1 - keys` to `len - 1`;
    /// [`Self::index`] is non-decreasing).
    fn reach(&self, len: usize, keys: usize) -> (usize, usize) {
        (self.index(1 - keys as i64), self.index(len as i64 - 1) + 1)
    }

    /// Attention of every sequence (lengths `lens`) and head from `s.qkv`
    /// (already projected) into `s.ctx`: heads in parallel when `par` has
    /// several tasks.
    ///
    /// Per sequence and head, with `nr` the relative rows the sequence
    /// reaches (`reach`: at most `len + keys - 1`, not `2·span`):
    /// the content scores `Q Kᵀ` (`len x keys`), the c2p table `Q PKᵀ`
    /// (`len x nr`) and the p2c table `K PQᵀ` (`keys x nr`) as GEMMs,
    /// then per score row `(q·k + c2p) + p2c`, scaled, the row softmax
    /// ([`ops::softmax`]) and `P V` as a GEMM. Every product element is one
    /// FMA chain over its own row and column ([`gemm`]) and the rest is
    /// element by element or row by row within the sequence, so a
    /// sequence's values depend neither on the other sequences of the batch
    /// nor on `par`. Only the relative rows some sequence of the batch
    /// reaches go through the layer's projection, and only through its Q
    /// and K columns (each row's values do not depend on which others are
    /// projected with it, in every precision).
    pub fn attend_all(&self, att: &Attention, lens: &[usize], s: &mut AttentionScratch, par: Par) {
        let heads = att.heads;
        let (nh, d) = (heads.q, heads.d);
        debug_assert_eq!(heads.kv, nh, "disentangled attention has no grouped heads");
        let (ld, cw) = (heads.qkv_width(), heads.ctx_width());
        let keys = s.keys;
        let visible = |si: usize, len: usize| keys.map_or(len, |k| k[si].min(len));
        // The relative rows any sequence reaches, and the largest scratch a
        // head needs.
        let (mut lo, mut hi, mut per_head) = (usize::MAX, 0, 0);
        for (si, &len) in lens.iter().enumerate() {
            let vis = visible(si, len);
            if len == 0 || vis == 0 {
                continue;
            }
            let (a, b) = self.reach(len, vis);
            (lo, hi) = (lo.min(a), hi.max(b));
            per_head = per_head.max(self.scratch_floats(len, vis, b - a));
        }
        if hi == 0 {
            // No sequence has a key: every context row is zero.
            s.ctx[..lens.iter().sum::<usize>() * cw].fill(0.0);
            return;
        }
        // The reached relative rows through this layer's Q | K product (V
        // is not needed).
        let (hw, pld) = (att.qkv.k(), 2 * nh * d);
        let groups = par.tasks().min(nh).max(1);
        let per_group = nh.div_ceil(groups);
        let (pos_len, scratch_len) = ((hi - lo) * pld, nh.div_ceil(per_group) * per_head);
        if s.relative.len() < pos_len + scratch_len {
            s.relative.resize(pos_len + scratch_len, 0.0);
        }
        // Both parts are written before they are read (the products store).
        let (pos, scratch) = s.relative.split_at_mut(pos_len);
        let scratch = &mut scratch[..scratch_len];
        let epi = att.qkv_b.as_deref().map_or(Epilogue::None, Epilogue::Bias);
        att.qkv.forward_cols(
            &self.rows[lo * hw..hi * hw],
            hi - lo,
            pld,
            pos,
            pld,
            false,
            epi,
            par,
            s.lin,
        );
        let scale = 1.0 / ((d * self.scale_factor()) as f32).sqrt();
        let mut o = 0;
        for (si, &len) in lens.iter().enumerate() {
            let vis = visible(si, len);
            let ctx = &mut s.ctx[o * cw..(o + len) * cw];
            if vis == 0 {
                ctx.fill(0.0);
                o += len;
                continue;
            }
            let (a, b) = self.reach(len, vis);
            // idx[t] = the relative row of i - j = t + 1 - vis, from a.
            let idx: Vec<u32> = (0..len + vis - 1)
                .map(|t| (self.index(t as i64 + 1 - vis as i64) - a) as u32)
                .collect();
            let seq = Seq {
                qkv: &s.qkv[o * ld..(o + len) * ld],
                pos: &pos[(a - lo) * pld..(b - lo) * pld],
                ld,
                pld,
                len,
                keys: vis,
                nr: b - a,
                d,
                idx: &idx,
                scale,
            };
            let cols = |hd: usize| (hd * d, nh * d + hd * d, 2 * nh * d + hd * d);
            if groups > 1 {
                // Each group of heads into its own `len x d` blocks of
                // `s.heads`, then side by side into the context rows.
                let out = &mut s.heads[..len * cw];
                out.par_chunks_mut(per_group * len * d)
                    .zip(scratch.par_chunks_mut(per_head))
                    .enumerate()
                    .for_each(|(g, (dst, sc))| {
                        for (h, dst) in dst.chunks_mut(len * d).enumerate() {
                            self.head(&seq, cols(g * per_group + h), sc, dst, d);
                        }
                    });
                for (i, row) in ctx.chunks_exact_mut(cw).enumerate() {
                    for hd in 0..nh {
                        let src = &out[hd * len * d + i * d..hd * len * d + (i + 1) * d];
                        row[hd * d..(hd + 1) * d].copy_from_slice(src);
                    }
                }
            } else {
                for hd in 0..nh {
                    self.head(&seq, cols(hd), scratch, &mut ctx[hd * d..], cw);
                }
            }
            o += len;
        }
    }

    /// The most floats of [`AttentionScratch::relative`] that
    /// [`Self::attend_all`] takes for a batch whose longest sequence has
    /// `max_len` tokens (`nh` heads of width `d`): every sequence's reach
    /// lies within the longest one's with all its tokens keys
    /// (the relative index is non-decreasing in `i - j`).
    pub fn relative_floats(&self, max_len: usize, nh: usize, d: usize, par: Par) -> usize {
        if max_len == 0 {
            return 0;
        }
        let (a, b) = self.reach(max_len, max_len);
        let per_group = nh.div_ceil(par.tasks().min(nh).max(1));
        (b - a) * 2 * nh * d + nh.div_ceil(per_group) * self.scratch_floats(max_len, max_len, b - a)
    }

    /// Floats of scratch one head of a sequence needs: the scores and the
    /// tables this model has.
    fn scratch_floats(&self, len: usize, keys: usize, nr: usize) -> usize {
        len * keys + usize::from(self.c2p) * len * nr + usize::from(self.p2c) * keys * nr
    }

    /// One head of one sequence: the context rows into `dst` (row stride
    /// `ldd`); `(qo, ko, vo)`: the head's columns of Q, K and V.
    fn head(
        &self,
        x: &Seq<'_>,
        (qo, ko, vo): (usize, usize, usize),
        scratch: &mut [f32],
        dst: &mut [f32],
        ldd: usize,
    ) {
        let (len, vis, nr, d, ld) = (x.len, x.keys, x.nr, x.d, x.ld);
        let (scores, rest) = scratch.split_at_mut(len * vis);
        let (c2p, rest) = rest.split_at_mut(if self.c2p { len * nr } else { 0 });
        let p2c = &mut rest[..if self.p2c { vis * nr } else { 0 }];
        let (q, k, v) = (&x.qkv[qo..], &x.qkv[ko..], &x.qkv[vo..]);
        let serial = Par::Serial;
        gemm::matmul_nt(len, vis, d, 1.0, q, ld, k, ld, false, scores, vis, serial);
        // c2p[i][r] = q_i · pk_r; p2c[j][r] = k_j · pq_r.
        if self.c2p {
            let pk = &x.pos[ko..];
            gemm::matmul_nt(len, nr, d, 1.0, q, ld, pk, x.pld, false, c2p, nr, serial);
        }
        if self.p2c {
            let pq = &x.pos[qo..];
            gemm::matmul_nt(vis, nr, d, 1.0, k, ld, pq, x.pld, false, p2c, nr, serial);
        }
        for (i, row) in scores.chunks_exact_mut(vis).enumerate() {
            // The relative rows of keys 0..vis, last key first.
            let rel = &x.idx[i..i + vis];
            match (self.c2p, self.p2c) {
                (true, true) => {
                    let c = &c2p[i * nr..(i + 1) * nr];
                    for ((v, &r), p) in row
                        .iter_mut()
                        .zip(rel.iter().rev())
                        .zip(p2c.chunks_exact(nr))
                    {
                        let r = r as usize;
                        *v = (*v + c[r] + p[r]) * x.scale;
                    }
                }
                (true, false) => {
                    let c = &c2p[i * nr..(i + 1) * nr];
                    for (v, &r) in row.iter_mut().zip(rel.iter().rev()) {
                        *v = (*v + c[r as usize]) * x.scale;
                    }
                }
                (false, true) => {
                    for ((v, &r), p) in row
                        .iter_mut()
                        .zip(rel.iter().rev())
                        .zip(p2c.chunks_exact(nr))
                    {
                        *v = (*v + p[r as usize]) * x.scale;
                    }
                }
                (false, false) => ops::scale(row, x.scale),
            }
            ops::softmax(row);
        }
        gemm::matmul_nn(len, d, vis, scores, vis, v, ld, dst, ldd, serial);
    }
}

/// One sequence's inputs of [`Disentangled::head`].
struct Seq<'a> {
    /// The sequence's `len` Q | K | V rows (stride `ld`).
    qkv: &'a [f32],
    /// The `nr` relative rows it reaches through the same product's Q | K
    /// (stride `pld`).
    pos: &'a [f32],
    ld: usize,
    pld: usize,
    len: usize,
    /// Keys: the first `keys` tokens.
    keys: usize,
    nr: usize,
    /// Width of a head.
    d: usize,
    /// The relative row (from the first reached) of `i - j = t + 1 - keys`
    /// at `t`.
    idx: &'a [u32],
    scale: f32,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::attention::Band;
    use crate::kernels::reference;
    use crate::model::blocks::attention::Heads;
    use crate::model::linear::{Linear, LinearScratch};
    use crate::model::precision::Precision;

    /// The plain definition of [`Disentangled::attend_all`]: every relative
    /// row projected, every score a scalar sum over the head in order, the
    /// softmax with `f32::exp`. Also gives, per context element, a bound of
    /// the difference of any two f32 evaluations in another summation order
    /// (see [`fast_path_matches_the_scalar_definition`]).
    fn attend_scalar(
        dis: &Disentangled,
        att: &Attention,
        lens: &[usize],
        qkv: &[f32],
        keys: Option<&[usize]>,
    ) -> (Vec<f32>, Vec<f64>) {
        let heads = att.heads;
        let (nh, d) = (heads.q, heads.d);
        let (ld, cw) = (heads.qkv_width(), heads.ctx_width());
        let rows = 2 * dis.span;
        let mut pos = vec![0.0f32; rows * ld];
        let epi = att.qkv_b.as_deref().map_or(Epilogue::None, Epilogue::Bias);
        let mut lin = LinearScratch::default();
        att.qkv.forward(
            &dis.rows,
            rows,
            &mut pos,
            ld,
            false,
            epi,
            Par::Serial,
            &mut lin,
        );
        let scale = 1.0 / ((d * dis.scale_factor()) as f32).sqrt();
        let total: usize = lens.iter().sum();
        let mut ctx = vec![0.0f32; total * cw];
        let mut bound = vec![0.0f64; total * cw];
        let u = f64::from(f32::EPSILON) / 2.0;
        let gamma = |n: usize| n as f64 * u / (1.0 - n as f64 * u);
        let mut o = 0;
        for (si, &len) in lens.iter().enumerate() {
            let visible = keys.map_or(len, |k| k[si].min(len));
            let row = |t: usize, off: usize| &qkv[(o + t) * ld + off..(o + t) * ld + off + d];
            let prow = |r: usize, off: usize| &pos[r * ld + off..r * ld + off + d];
            let dot = |a: &[f32], b: &[f32]| a.iter().zip(b).map(|(x, y)| x * y).sum::<f32>();
            let adot = |a: &[f32], b: &[f32]| {
                a.iter()
                    .zip(b)
                    .map(|(&x, &y)| (f64::from(x) * f64::from(y)).abs())
                    .sum::<f64>()
            };
            for hd in 0..nh {
                let (qo, ko, vo) = (hd * d, nh * d + hd * d, 2 * nh * d + hd * d);
                for i in 0..len {
                    let q = row(i, qo);
                    let mut sc = vec![0.0f32; visible];
                    // δ: the largest difference of a score between two
                    // orders: 2·γ(d+3) of its magnitude (three dots of d
                    // terms, two adds, the scale).
                    let mut delta = 0.0f64;
                    for (j, v) in sc.iter_mut().enumerate() {
                        let r = dis.index(i as i64 - j as i64);
                        let k = row(j, ko);
                        let mut x = dot(q, k);
                        let mut a = adot(q, k);
                        if dis.c2p {
                            x += dot(q, prow(r, ko));
                            a += adot(q, prow(r, ko));
                        }
                        if dis.p2c {
                            x += dot(k, prow(r, qo));
                            a += adot(k, prow(r, qo));
                        }
                        *v = x * scale;
                        delta = delta.max(2.0 * gamma(d + 3) * a * f64::from(scale));
                    }
                    if visible == 0 {
                        // No key: a zero context row, exactly.
                        continue;
                    }
                    let max = sc.iter().copied().fold(f32::NEG_INFINITY, f32::max);
                    let min = sc.iter().copied().fold(f32::INFINITY, f32::min);
                    let mut sum = 0.0f32;
                    for v in sc.iter_mut() {
                        *v = (*v - max).exp();
                        sum += *v;
                    }
                    // Relative error of a probability: the scores' δ on
                    // both sides of the ratio, the rounding of s - max
                    // (u·range each way), the two exps (1 ulp each), the
                    // two sums of `visible` terms and the normalization.
                    let range = f64::from(max - min);
                    let rho = (2.0 * delta).exp_m1()
                        + 2.0 * u * range
                        + 4.0 * u
                        + 2.0 * gamma(visible)
                        + 6.0 * u;
                    let dst = &mut ctx[(o + i) * cw + hd * d..(o + i) * cw + (hd + 1) * d];
                    for (j, &p) in sc.iter().enumerate() {
                        let w = p / sum;
                        for (a, &b) in dst.iter_mut().zip(row(j, vo)) {
                            *a += w * b;
                        }
                    }
                    // The context: Σ |Δp_j| |v_j| plus the two sums'
                    // roundings (2 steps per term unfused).
                    for e in 0..d {
                        let vmax = (0..visible)
                            .map(|j| f64::from(row(j, vo)[e]).abs())
                            .fold(0.0, f64::max);
                        bound[(o + i) * cw + hd * d + e] =
                            (rho * (1.0 + rho) + 2.0 * gamma(2 * visible + 1)) * vmax;
                    }
                }
            }
            o += len;
        }
        (ctx, bound)
    }

    struct Case {
        dis: Disentangled,
        att: Attention,
    }

    /// A random layer: `nh` heads of `d`, hidden `nh·d`, relative rows of
    /// `span` with `buckets` log buckets up to `max_position`.
    fn case(nh: usize, d: usize, span: usize, buckets: usize, terms: (bool, bool)) -> Case {
        case_in(nh, d, span, buckets, terms, Precision::F32)
    }

    /// [`case`] with the Q | K | V product in `precision`.
    fn case_in(
        nh: usize,
        d: usize,
        span: usize,
        buckets: usize,
        terms: (bool, bool),
        precision: Precision,
    ) -> Case {
        let h = nh * d;
        let w: Vec<f32> = reference::rand_vec(3 * h * h, 11)
            .iter()
            .map(|v| v / (h as f32).sqrt() * 2.0)
            .collect();
        let out = Linear::from_f32(reference::rand_vec(h * h, 12), h, h, Precision::F32);
        let att = Attention {
            heads: Heads { q: nh, kv: nh, d },
            qkv: Linear::from_f32(w, 3 * h, h, precision),
            qkv_b: Some(reference::rand_vec(3 * h, 13)),
            out,
            out_b: None,
            band: Band::FULL,
            rope: None,
            q_norm: None,
            k_norm: None,
            scale: 1.0 / (d as f32).sqrt(),
        };
        let dis = Disentangled {
            rows: reference::rand_vec(2 * span * h, 14),
            span,
            buckets,
            max_position: 4 * span,
            c2p: terms.0,
            p2c: terms.1,
        };
        Case { dis, att }
    }

    /// `attend_all` over the packed `lens` (Q | K | V rows `qkv`) into a
    /// fresh context, as the encoder sizes its scratch.
    fn run(c: &Case, lens: &[usize], qkv: &[f32], keys: Option<&[usize]>, par: Par) -> Vec<f32> {
        let cw = c.att.heads.ctx_width();
        let total: usize = lens.iter().sum();
        let max_len = lens.iter().copied().max().unwrap_or(0);
        let mut qkv = qkv.to_vec();
        let mut ctx = vec![f32::NAN; total * cw];
        let mut scores = vec![0.0f32; 0];
        let mut heads = vec![f32::NAN; max_len * cw];
        let mut lin = LinearScratch::default();
        // Stale values from an earlier call must not reach the result.
        let bound = c
            .dis
            .relative_floats(max_len, c.att.heads.q, c.att.heads.d, par);
        let mut relative = vec![f32::NAN; bound];
        let mut s = AttentionScratch {
            qkv: &mut qkv,
            ctx: &mut ctx,
            scores: &mut scores,
            heads: &mut heads,
            lin: &mut lin,
            relative: &mut relative,
            keys,
        };
        c.dis.attend_all(&c.att, lens, &mut s, par);
        // The bound the encoder reports covers what the call took.
        assert_eq!(
            relative.len(),
            bound,
            "relative scratch grew past its bound"
        );
        ctx
    }

    fn bits(v: &[f32]) -> Vec<u32> {
        v.iter().map(|x| x.to_bits()).collect()
    }

    /// The GEMM path against the scalar definition on random layers: c2p
    /// only, p2c only, both; lengths from 1 past the bucket middle and
    /// past the span (clamped rows), with and without key limits, and
    /// without buckets. The tolerance is the bound of
    /// [`attend_scalar`]: both are f32 evaluations of the same sums in
    /// other orders (FMA chains against sequential unfused sums), so each
    /// score differs by at most 2·γ(d+3)·Σ|terms|, each probability
    /// relatively by about twice that plus the softmax's own roundings, and
    /// each context value by that times the largest value.
    #[test]
    fn fast_path_matches_the_scalar_definition() {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(2)
            .build()
            .unwrap();
        for (nh, d, span, buckets) in [(3, 16, 16, 16), (2, 12, 12, 0), (4, 32, 24, 24)] {
            for terms in [(true, true), (true, false), (false, true)] {
                let c = case(nh, d, span, buckets, terms);
                let ld = c.att.heads.qkv_width();
                let lens = [1usize, 5, 9, 17, 30, 2 * span + 7];
                let total: usize = lens.iter().sum();
                let qkv = reference::rand_vec(total * ld, (nh * d + span) as u64);
                let limits: Vec<usize> = lens.iter().map(|&l| l.div_ceil(3)).collect();
                let mut zero = limits.clone();
                zero[1] = 0;
                for keys in [None, Some(&limits[..]), Some(&zero[..])] {
                    let (want, bound) = attend_scalar(&c.dis, &c.att, &lens, &qkv, keys);
                    let got = run(&c, &lens, &qkv, keys, Par::Serial);
                    let mut worst = 0.0f64;
                    for (i, ((&g, &w), &b)) in got.iter().zip(&want).zip(&bound).enumerate() {
                        let e = (f64::from(g) - f64::from(w)).abs();
                        worst = worst.max(e / b.max(f64::MIN_POSITIVE));
                        assert!(
                            e <= b,
                            "{nh}x{d} span {span} {terms:?} {keys:?} [{i}]: {g} vs {w} (bound {b:e})"
                        );
                    }
                    eprintln!(
                        "{nh}x{d} span {span} {terms:?}: worst error {worst:.3} of the bound"
                    );
                    let threads = pool.install(|| run(&c, &lens, &qkv, keys, Par::Threads(2)));
                    assert_eq!(bits(&threads), bits(&got), "Threads(2) vs Serial");
                }
            }
        }
    }

    /// A sequence alone and in a batch with others, serially and on two
    /// threads, with and without key limits, with the relative rows
    /// projected in every precision: the same bits.
    #[test]
    fn results_are_independent_of_the_batch_and_threads() {
        for p in [Precision::F32, Precision::Bf16, Precision::Int8] {
            batch_and_threads(&case_in(4, 16, 32, 32, (true, true), p));
        }
    }

    fn batch_and_threads(c: &Case) {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(2)
            .build()
            .unwrap();
        let (ld, cw) = (c.att.heads.qkv_width(), c.att.heads.ctx_width());
        let lens = [3usize, 40, 1, 70, 17];
        let total: usize = lens.iter().sum();
        let qkv = reference::rand_vec(total * ld, 21);
        let limits = [3usize, 25, 1, 70, 9];
        for keys in [None, Some(&limits[..])] {
            let all = run(c, &lens, &qkv, keys, Par::Serial);
            let all2 = pool.install(|| run(c, &lens, &qkv, keys, Par::Threads(2)));
            assert_eq!(bits(&all), bits(&all2));
            let mut o = 0;
            for (si, &len) in lens.iter().enumerate() {
                let one_keys = keys.map(|k| vec![k[si]]);
                let rows = &qkv[o * ld..(o + len) * ld];
                for par in [Par::Serial, Par::Threads(2)] {
                    let alone = pool.install(|| run(c, &[len], rows, one_keys.as_deref(), par));
                    assert_eq!(
                        bits(&alone),
                        bits(&all[o * cw..(o + len) * cw]),
                        "sequence {si} alone, {par:?}, keys {keys:?}"
                    );
                }
                o += len;
            }
            // Two batches sharing a sequence, in other places.
            let (a, b) = (&lens[1..3], &lens[3..]);
            let start_b = (lens[0] + lens[1] + lens[2]) * ld;
            let ka = keys.map(|k| k[1..3].to_vec());
            let kb = keys.map(|k| k[3..].to_vec());
            let ra = run(
                c,
                a,
                &qkv[lens[0] * ld..start_b],
                ka.as_deref(),
                Par::Serial,
            );
            let rb = run(c, b, &qkv[start_b..], kb.as_deref(), Par::Serial);
            let mut joined = ra;
            joined.extend_from_slice(&rb);
            assert_eq!(bits(&joined), bits(&all[lens[0] * cw..]));
        }
    }

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
