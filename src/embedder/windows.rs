//! Long texts as overlapping windows ([`crate::Options::window_overlap`]):
//! a text longer than `max_seq_length` is cut into windows of at most
//! `max_seq_length` tokens (the tokenizer's special tokens around each),
//! consecutive windows sharing `overlap` text tokens; every window runs
//! through the encoder, and each head of the output table
//! ([`crate::model::outputs::Head::merge`]) makes the text's output from its
//! windows':
//!
//! - dense ([`DenseHead::merge`]): the mean of the windows' vectors weighted
//!   by their token counts (in f64), normalized when the model normalizes;
//! - sparse ([`crate::model::sparse::SparseHead::merge`]): as the head pools
//!   tokens (the largest weight per id, or the sum for SPLADE sum pooling),
//!   then the top-k;
//! - multi-vector ([`crate::model::multi_vector::MultiVectorHead::merge`]):
//!   the windows' vectors in text order, each text token's vector once.
//!
//! A text that fits is one window and gets exactly the outputs it gets
//! without windows.

use super::outputs::Want;
use super::{Embedder, TextInfo};
use crate::error::Result;
#[cfg(doc)]
use crate::model::dense::DenseHead;
use crate::model::outputs::{HeadCall, Outputs, WindowFrame};
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

    /// The outputs `want` asks for of `texts` from their windows, in groups
    /// of `group_len` texts: after each group, `sink(first, outputs, info)`
    /// takes its texts' outputs and [`TextInfo`] (`first`: the index of its
    /// first text), and the progress callback hears of them.
    pub(super) fn run_windows<S: AsRef<str> + Sync>(
        &self,
        texts: &[S],
        group_len: usize,
        want: &Want<'_>,
        track: &mut Track<'_>,
        mut sink: impl FnMut(usize, Outputs, Vec<TextInfo>),
    ) -> Result<()> {
        let Some(overlap) = self.window_overlap else {
            return Ok(());
        };
        let call_base = track.base;
        for start in (0..texts.len()).step_by(group_len) {
            let end = (start + group_len).min(texts.len());
            let (outs, info) = self.encode_windows(&texts[start..end], overlap, want)?;
            sink(start, outs, info);
            track.report(call_base + end)?;
        }
        Ok(())
    }

    /// The outputs `want` asks for of a group of texts from their windows,
    /// with each text's [`TextInfo`].
    fn encode_windows<S: AsRef<str> + Sync>(
        &self,
        texts: &[S],
        overlap: usize,
        want: &Want<'_>,
    ) -> Result<(Outputs, Vec<TextInfo>)> {
        let w = self.windows(texts, overlap);
        let refs: Vec<&[u32]> = w.ids.iter().map(Vec::as_slice).collect();
        // The top-k applies to the text's vector, not to each window's.
        let per_window = Want {
            call: HeadCall {
                top_k: None,
                ..want.call
            },
            ..*want
        };
        let mut outs = self.run_heads(&refs, None, &per_window, &mut Track::new(None, 0))?;
        let (pre, post) = self.tokenizer().single_frame();
        let frame = WindowFrame {
            pre: pre.len(),
            post: post.len(),
            overlap,
        };
        let mut texts_out = Outputs::empty(want.kinds, want.call.dense.dim);
        let mut first = 0;
        for k in 0..texts.len() {
            let mut last = first;
            while last < w.owner.len() && w.owner[last] == k {
                last += 1;
            }
            let wins = &refs[first..last];
            let mut parts = outs.split_front(last - first);
            let mut o = Outputs::default();
            for head in self.heads.table() {
                if let Some(p) = parts.take(head.kind()) {
                    o.insert(head.merge(wins, p, frame, &want.call));
                }
            }
            texts_out.append(o);
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
