//! Long texts as overlapping windows ([`crate::Options::window_overlap`]):
//! a text longer than `max_seq_length` is cut into windows of at most
//! `max_seq_length` tokens (the tokenizer's special tokens around each),
//! consecutive windows sharing `overlap` text tokens; every window runs
//! through the encoder, and the text's outputs are made from its windows':
//!
//! - dense: the mean of the windows' vectors weighted by their token counts
//!   (in f64), normalized when the model normalizes;
//! - sparse: as the head pools tokens ([`crate::model::sparse::SparseHead::merge`]: the largest
//!   weight per id, or the sum for SPLADE sum pooling), then the top-k;
//! - multi-vector: the windows' vectors in text order, each text token's
//!   vector once (from the first window that has it), the leading special
//!   tokens' from the first window and the trailing ones' from the last.
//!
//! A text that fits is one window and gets exactly the outputs it gets
//! without windows.

use super::outputs::{SeqOut, Want};
use super::{Embedder, TextInfo, TEXT_GROUP};
use crate::error::Result;
use crate::model::encoder::Seqs;
use crate::model::multi_vector::MultiVector;
use crate::runtime::Track;

/// The windows of a group of texts.
struct Windows {
    /// Every window's ids, the texts' in order.
    ids: Vec<Vec<u32>>,
    /// `owner[w]`: window w's text in the group.
    owner: Vec<usize>,
    /// Each text's token count (specials included, nothing cut).
    tokens: Vec<usize>,
}

impl Embedder {
    /// The windows of `texts` (each tokenized in full, on the workers).
    fn windows<S: AsRef<str> + Sync>(&self, texts: &[S], overlap: usize) -> Windows {
        let (pre, post) = self.tokenizer().single_frame();
        let body = self.max_seq_length() - pre.len() - post.len();
        let stride = body - overlap;
        let full = self
            .rt
            .map_parallel(0..texts.len(), |k| self.tokenize_full(texts[k].as_ref()));
        let mut w = Windows {
            ids: Vec::new(),
            owner: Vec::new(),
            tokens: full.iter().map(Vec::len).collect(),
        };
        for (k, ids) in full.iter().enumerate() {
            let raw = &ids[pre.len()..ids.len() - post.len()];
            let mut start = 0;
            loop {
                let end = (start + body).min(raw.len());
                let mut win = Vec::with_capacity(end - start + pre.len() + post.len());
                win.extend_from_slice(&pre);
                win.extend_from_slice(&raw[start..end]);
                win.extend_from_slice(&post);
                w.ids.push(win);
                w.owner.push(k);
                if end == raw.len() {
                    break;
                }
                start += stride;
            }
        }
        w
    }

    /// Dense vectors of `texts` from their windows into `out` (`n x dim`).
    pub(super) fn embed_windows<S: AsRef<str> + Sync>(
        &self,
        texts: &[S],
        overlap: usize,
        out: &mut [f32],
        mut info: Option<&mut [TextInfo]>,
        track: &mut Track<'_>,
    ) -> Result<()> {
        let dim = self.dim();
        let call_base = track.base;
        // With a progress callback, smaller groups: it is called after each.
        let group_len = if track.cb.is_some() { 16 } else { TEXT_GROUP };
        for (g, (group, dst)) in texts
            .chunks(group_len)
            .zip(out.chunks_mut(group_len * dim.max(1)))
            .enumerate()
        {
            let w = self.windows(group, overlap);
            if let Some(i) = info.as_deref_mut() {
                for (k, &tokens) in w.tokens.iter().enumerate() {
                    i[g * group_len + k] = TextInfo {
                        tokens,
                        truncated: false,
                    };
                }
            }
            let refs: Vec<&[u32]> = w.ids.iter().map(Vec::as_slice).collect();
            let mut vecs = vec![0.0f32; refs.len() * dim];
            let seqs = Seqs::untyped(&refs);
            self.run(seqs, self.pass(), &mut vecs, &mut Track::new(None, 0))?;
            combine_windows(&vecs, dim, &refs, &w.owner, self.normalize, dst);
            track.report(call_base + g * group_len + group.len())?;
        }
        Ok(())
    }

    /// The outputs `want` asks for of a group of texts from their windows,
    /// with each text's [`TextInfo`].
    pub(super) fn encode_windows<S: AsRef<str> + Sync>(
        &self,
        texts: &[S],
        overlap: usize,
        want: &Want<'_>,
    ) -> Result<(Vec<SeqOut>, Vec<TextInfo>)> {
        let w = self.windows(texts, overlap);
        let refs: Vec<&[u32]> = w.ids.iter().map(Vec::as_slice).collect();
        // The top-k applies to the text's vector, not to each window's.
        let per_window = Want {
            top_k: None,
            ..*want
        };
        let outs = self.run_heads(&refs, None, &per_window, &mut Track::new(None, 0))?;
        let (pre, post) = self.tokenizer().single_frame();
        let (dim, normalize) = (want.pass.dim, want.pass.normalize);
        let mut texts_out = Vec::with_capacity(texts.len());
        let mut first = 0;
        for k in 0..texts.len() {
            let mut last = first;
            while last < w.owner.len() && w.owner[last] == k {
                last += 1;
            }
            let (wins, parts) = (&refs[first..last], &outs[first..last]);
            let mut o = SeqOut::default();
            if !parts[0].dense.is_empty() {
                let vecs: Vec<f32> = parts.iter().flat_map(|p| p.dense.iter().copied()).collect();
                o.dense = vec![0.0; dim];
                combine_windows(
                    &vecs,
                    dim,
                    wins,
                    &vec![0; wins.len()],
                    normalize,
                    &mut o.dense,
                );
            }
            if let (Some(head), true) = (&self.heads.sparse, parts[0].sparse.is_some()) {
                let mut v = head.merge(parts.iter().filter_map(|p| p.sparse.clone()).collect());
                if let Some(top) = want.top_k {
                    v.keep_top(top);
                }
                o.sparse = Some(v);
            }
            if let (Some(head), true) = (&self.heads.multi_vector, parts[0].multi.is_some()) {
                let skip = usize::from(head.skips_first());
                let n = parts.len();
                let mut mv = MultiVector {
                    dim: head.dim(),
                    data: Vec::new(),
                };
                for (j, (ids, p)) in wins.iter().zip(parts).enumerate() {
                    let Some(m) = &p.multi else { continue };
                    // Window j's token positions that give the text's
                    // vectors: not the leading specials and the overlap
                    // after the first window, not the trailing specials
                    // before the last.
                    let from = if j == 0 { 0 } else { pre.len() + overlap };
                    let to = if j + 1 == n {
                        ids.len()
                    } else {
                        ids.len() - post.len()
                    };
                    for pos in from.max(skip)..to {
                        mv.data.extend_from_slice(m.row(pos - skip));
                    }
                }
                o.multi = Some(mv);
            }
            texts_out.push(o);
            first = last;
        }
        let info = w
            .tokens
            .iter()
            .map(|&tokens| TextInfo {
                tokens,
                truncated: false,
            })
            .collect();
        Ok((texts_out, info))
    }
}

/// Each text's vector from its windows' (`vecs`, row w for window
/// `windows[w]` of text `owner[w]`, owners in increasing order): the mean
/// weighted by the windows' token counts (in f64), L2-normalized when
/// `normalize`. A text with one window keeps that window's vector exactly.
fn combine_windows(
    vecs: &[f32],
    dim: usize,
    windows: &[&[u32]],
    owner: &[usize],
    normalize: bool,
    out: &mut [f32],
) {
    let mut w = 0;
    for (k, dst) in out.chunks_exact_mut(dim).enumerate() {
        let first = w;
        while w < owner.len() && owner[w] == k {
            w += 1;
        }
        if w - first == 1 {
            dst.copy_from_slice(&vecs[first * dim..(first + 1) * dim]);
            continue;
        }
        let mut acc = vec![0.0f64; dim];
        let mut total = 0.0f64;
        for (v, ids) in vecs[first * dim..w * dim]
            .chunks_exact(dim)
            .zip(&windows[first..w])
        {
            let weight = ids.len() as f64;
            total += weight;
            for (a, &x) in acc.iter_mut().zip(v) {
                *a += weight * f64::from(x);
            }
        }
        for (d, a) in dst.iter_mut().zip(&acc) {
            *d = (a / total) as f32;
        }
        if normalize {
            crate::vector::l2_normalize(dst);
        }
    }
}
