//! The output stage's runtime: [`Embedder::encode`] runs texts once through
//! the encoder (the same chunks, workers, workspaces, progress and
//! cancellation as every call) and hands each chunk's hidden states to the
//! heads the request asks for: the pooled dense vector, the sparse vector,
//! the multi-vector. One forward pass gives all of them (BGE-M3's three
//! outputs).
//!
//! A request's [`EncodeTask`] is sentence-transformers' `encode_query` /
//! `encode_document`: the prompt of that name when the model stores one, a
//! Router's query route (an inference-free SPLADE's static weights), and
//! ColBERT's markers, query expansion and skip-list.

use super::{CallPlan, DenseOpts, Embedder, Framed, TextInfo, TEXT_GROUP};
use crate::error::{Error, ErrorKind, Result};
use crate::kernels::Par;
use crate::model::encoder::{HeadScratch, Seqs};
use crate::model::multi_vector::{ColbertFrame, MultiVector};
use crate::model::outputs::{EncodeTask, OutputKind};
use crate::model::sparse::SparseVector;
use crate::options::{CallOptions, Truncation};
use crate::runtime::Track;

/// The [`Encoded`] of `kinds` from each input's outputs.
fn assemble(
    kinds: &[OutputKind],
    dim: usize,
    mut outs: Vec<SeqOut>,
    info: Vec<TextInfo>,
) -> Encoded {
    let has = |k: OutputKind| kinds.contains(&k);
    Encoded {
        dim,
        dense: has(OutputKind::Dense)
            .then(|| outs.iter().flat_map(|o| o.dense.iter().copied()).collect()),
        sparse: has(OutputKind::Sparse).then(|| {
            outs.iter_mut()
                .map(|o| o.sparse.take().unwrap_or_default())
                .collect()
        }),
        multi_vector: has(OutputKind::MultiVector).then(|| {
            outs.iter_mut()
                .map(|o| o.multi.take().unwrap_or_default())
                .collect()
        }),
        info,
    }
}

/// What [`Embedder::encode`] computes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EncodeRequest {
    /// The outputs wanted (empty: every output the model has).
    pub outputs: Vec<OutputKind>,
    /// Query or document (`None`: neither; ColBERT then encodes documents,
    /// a Router takes its default route).
    pub task: Option<EncodeTask>,
    /// Prompt, dimensions, normalization and truncation, as for dense calls.
    pub call: CallOptions,
    /// Keep only the largest this many sparse weights (sentence-transformers'
    /// `max_active_dims`; `None`: the model's setting, if any).
    pub top_k: Option<usize>,
}

impl EncodeRequest {
    /// A request for `outputs` with default options.
    pub fn new(outputs: &[OutputKind]) -> EncodeRequest {
        EncodeRequest {
            outputs: outputs.to_vec(),
            ..EncodeRequest::default()
        }
    }

    /// The same request for `task`.
    pub fn task(mut self, task: EncodeTask) -> EncodeRequest {
        self.task = Some(task);
        self
    }
}

/// The outputs of [`Embedder::encode`], one entry per text for each output
/// asked for (`None` for the others).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Encoded {
    /// Floats per dense vector.
    pub dim: usize,
    /// `texts x dim` floats.
    pub dense: Option<Vec<f32>>,
    /// One sparse vector per text.
    pub sparse: Option<Vec<SparseVector>>,
    /// The vectors of each text.
    pub multi_vector: Option<Vec<MultiVector>>,
    /// Tokens and truncation of each text.
    pub info: Vec<TextInfo>,
}

/// How a call's texts become outputs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Route {
    /// Through the encoder as for dense vectors.
    Encoder,
    /// An inference-free model's static query weights (no encoder).
    StaticQuery,
    /// ColBERT's framing of a query (`true`) or a document.
    Colbert(bool),
}

/// One sequence's outputs.
#[derive(Default)]
pub(super) struct SeqOut {
    pub(super) dense: Vec<f32>,
    pub(super) sparse: Option<SparseVector>,
    pub(super) multi: Option<MultiVector>,
}

/// What the heads compute for a call.
pub(super) struct Want<'a> {
    pub(super) kinds: &'a [OutputKind],
    pub(super) pass: DenseOpts,
    pub(super) top_k: Option<usize>,
    pub(super) route: Route,
}

impl Embedder {
    /// The outputs this model has (dense for every embedding model; sparse
    /// for SPLADE and BGE-M3; multi-vector for ColBERT and BGE-M3).
    pub fn outputs(&self) -> &[OutputKind] {
        &self.heads.kinds
    }

    /// Floats per multi-vector vector, if the model has that output.
    pub fn multi_vector_dim(&self) -> Option<usize> {
        self.heads.multi_vector.as_ref().map(|m| m.dim())
    }

    /// Whether queries take a route of their own (an inference-free sparse
    /// model, ColBERT's query markers and expansion).
    pub fn has_query_route(&self) -> bool {
        self.heads.static_query.is_some()
            || self
                .heads
                .multi_vector
                .as_ref()
                .is_some_and(|m| m.colbert.is_some())
    }

    /// Whether [`Embedder::encode_ids`] takes token ids for `task`: not on
    /// ColBERT or a Router's query route, which frame texts themselves.
    pub fn takes_token_ids(&self, task: Option<EncodeTask>) -> bool {
        let colbert = self
            .heads
            .multi_vector
            .as_ref()
            .is_some_and(|m| m.colbert.is_some());
        let static_query = task == Some(EncodeTask::Query) && self.heads.static_query.is_some();
        !colbert && !static_query
    }

    /// Encodes `texts` into the outputs `req` asks for, from one forward
    /// pass per text. Every output is bit-identical whatever the batch and
    /// thread count.
    ///
    /// # Errors
    /// [`ErrorKind::Unsupported`] naming the model's outputs when it lacks
    /// one asked for (or for outputs other than dense on a model opened with
    /// long-text windows); the errors of [`Embedder::plan`] and
    /// [`Embedder::tokenize_planned`] (the text's index in the message);
    /// [`ErrorKind::Cancelled`] when the progress callback stops the call.
    pub fn encode<S: AsRef<str> + Sync>(
        &self,
        texts: &[S],
        req: &EncodeRequest,
    ) -> Result<Encoded> {
        let mut track = Track::new(self.rt.progress(), texts.len());
        self.encode_tracked(texts, req, &mut track)
    }

    fn encode_tracked<S: AsRef<str> + Sync>(
        &self,
        texts: &[S],
        req: &EncodeRequest,
        track: &mut Track<'_>,
    ) -> Result<Encoded> {
        let (kinds, route, plan) = self.resolve(texts.len(), req)?;
        let want = Want {
            kinds: &kinds,
            pass: plan.pass,
            top_k: req.top_k.or(self.heads.top_k),
            route,
        };
        let mut outs: Vec<SeqOut> = Vec::with_capacity(texts.len());
        let mut info: Vec<TextInfo> = Vec::with_capacity(texts.len());
        let named = |i: usize, e: Error| Error::new(e.kind(), format!("text {i}: {}", e.message()));
        if route == Route::Encoder && self.window_overlap.is_some() {
            // A text is several sequences: the windows group texts themselves.
            self.run_windows(texts, TEXT_GROUP, &want, track, |_, o, i| {
                outs.extend(o);
                info.extend(i);
            })?;
        } else if route == Route::StaticQuery {
            // No encoder: the static weights of each query's ids.
            let q = self.heads.static_query.as_ref();
            for start in (0..texts.len()).step_by(TEXT_GROUP) {
                let end = (start + TEXT_GROUP).min(texts.len());
                let framed = self.rt.map_parallel(start..end, |i| {
                    self.frame(texts[i].as_ref(), &plan, route)
                        .map_err(|e| named(i, e))
                });
                for f in framed {
                    let (ids, i, _) = f?;
                    info.push(i);
                    outs.push(SeqOut {
                        sparse: q.map(|q| {
                            let mut v = q.apply(&ids);
                            if let Some(k) = want.top_k {
                                v.keep_top(k);
                            }
                            v
                        }),
                        ..SeqOut::default()
                    });
                }
                track.report(end)?;
            }
        } else {
            self.rt.run_groups(
                texts.len(),
                track,
                |i| {
                    let (ids, info, keys) = self
                        .frame(texts[i].as_ref(), &plan, route)
                        .map_err(|e| named(i, e))?;
                    Ok(Framed {
                        ids,
                        types: None,
                        keys,
                        info,
                    })
                },
                |_, frames| {
                    info.extend(frames.iter().map(|f| f.info));
                    Ok(())
                },
                |chunk, hidden, scratch, par| {
                    self.apply_heads(chunk.ids, hidden, scratch, par, &want)
                },
                |_, o: Vec<SeqOut>| outs.extend(o),
            )?;
        }
        Ok(assemble(&kinds, plan.dim(), outs, info))
    }

    /// Encodes already tokenized inputs (each framed with the tokenizer's
    /// special tokens, at most `max_seq_length` ids, every id below the
    /// vocabulary size, as [`Embedder::embed_ids`] takes them) into the
    /// outputs `req` asks for. No prompt is added and every token is pooled;
    /// `req.call` sets the normalization and dimensions.
    ///
    /// # Errors
    /// As [`Embedder::encode`]; [`ErrorKind::InvalidArgument`] naming the
    /// first bad input; [`ErrorKind::Unsupported`] on ColBERT and on a
    /// Router's query route, which frame texts themselves.
    pub fn encode_ids(&self, ids: &[&[u32]], req: &EncodeRequest) -> Result<Encoded> {
        let (kinds, route, plan) = self.resolve(ids.len(), req)?;
        if route != Route::Encoder {
            return Err(Error::unsupported(
                "token-id inputs take the encoder's route only: ColBERT's markers and query \
                 expansion, and an inference-free model's query route, are made from texts",
            ));
        }
        self.check_id_inputs(ids)?;
        let want = Want {
            kinds: &kinds,
            pass: DenseOpts {
                pool_from: 0,
                ..plan.pass
            },
            top_k: req.top_k.or(self.heads.top_k),
            route,
        };
        let mut track = Track::new(self.rt.progress(), ids.len());
        let mut outs: Vec<SeqOut> = Vec::with_capacity(ids.len());
        let mut info: Vec<TextInfo> = Vec::with_capacity(ids.len());
        self.rt.run_groups(
            ids.len(),
            &mut track,
            |i| {
                let tokens = ids[i].len();
                let info = TextInfo {
                    tokens,
                    truncated: false,
                };
                Ok(Framed::ids(ids[i].to_vec(), info))
            },
            |_, frames| {
                info.extend(frames.iter().map(|f| f.info));
                Ok(())
            },
            |chunk, hidden, scratch, par| self.apply_heads(chunk.ids, hidden, scratch, par, &want),
            |_, o: Vec<SeqOut>| outs.extend(o),
        )?;
        Ok(assemble(&kinds, plan.dim(), outs, info))
    }

    /// A request's outputs (checked against the model's), route and plan,
    /// for `n` inputs.
    fn resolve(&self, n: usize, req: &EncodeRequest) -> Result<(Vec<OutputKind>, Route, CallPlan)> {
        if n > crate::limits::MAX_BATCH {
            return Err(Error::new(
                ErrorKind::LimitExceeded,
                format!(
                    "{n} texts exceed the batch limit of {}",
                    crate::limits::MAX_BATCH
                ),
            ));
        }
        let kinds: Vec<OutputKind> = if req.outputs.is_empty() {
            self.heads.kinds.clone()
        } else {
            let mut k = req.outputs.clone();
            k.sort();
            k.dedup();
            k
        };
        self.heads.check(&kinds)?;
        if req.top_k == Some(0) {
            return Err(Error::invalid_argument("top_k must be at least 1"));
        }
        let colbert = self
            .heads
            .multi_vector
            .as_ref()
            .and_then(|m| m.colbert.as_ref());
        let route = match (req.task, colbert) {
            (Some(EncodeTask::Query), _) if self.heads.static_query.is_some() => {
                if kinds != [OutputKind::Sparse] {
                    return Err(Error::unsupported(
                        "this model's query route gives only the sparse output",
                    ));
                }
                Route::StaticQuery
            }
            (task, Some(_)) => Route::Colbert(task == Some(EncodeTask::Query)),
            _ => Route::Encoder,
        };
        // The task's prompt, when the model stores one of that name and the
        // call names none.
        let mut call = req.call.clone();
        if let Some(t) = req.task {
            if call.prompt.is_none()
                && call.prompt_name.is_none()
                && self.prompts.contains_key(t.name())
            {
                call.prompt_name = Some(t.name().to_string());
            }
        }
        if self.window_overlap.is_some() && matches!(route, Route::Colbert(_)) {
            return Err(Error::unsupported(
                "long-text windows (window_overlap) do not apply to ColBERT, which frames \
                 queries and documents at its own query and document lengths",
            ));
        }
        Ok((kinds, route, self.plan(&call)?))
    }

    /// The ids of `text` on `route` under `plan`, its [`TextInfo`], and how
    /// many of its first tokens are attention keys.
    fn frame(
        &self,
        text: &str,
        plan: &super::CallPlan,
        route: Route,
    ) -> Result<(Vec<u32>, TextInfo, usize)> {
        let colbert = || -> Option<&ColbertFrame> {
            self.heads
                .multi_vector
                .as_ref()
                .and_then(|m| m.colbert.as_ref())
        };
        match route {
            Route::Encoder => {
                let (ids, info) = self.tokenize_planned(text, plan)?;
                let n = ids.len();
                Ok((ids, info, n))
            }
            Route::StaticQuery => {
                // The query's ids without special tokens, cut at
                // max_seq_length ids (SparseStaticEmbedding's tokenizer call);
                // with long-text windows, not cut (static weights need no
                // window).
                let text = self.prompted_text(text, plan)?;
                let max = match self.window_overlap {
                    Some(_) => usize::MAX - 1,
                    None => self.max_seq_length(),
                };
                let mut raw = Vec::new();
                if plan.truncation() == Truncation::Left {
                    self.tokenizer().encode_raw(&text, &mut raw);
                } else {
                    self.tokenizer()
                        .encode_raw_bounded(&text, max + 1, &mut raw);
                }
                let truncated = raw.len() > max;
                if truncated {
                    match plan.truncation() {
                        Truncation::Right => raw.truncate(max),
                        Truncation::Left => {
                            raw.drain(..raw.len() - max);
                        }
                        Truncation::Refuse => {
                            return Err(Error::new(
                                ErrorKind::LimitExceeded,
                                format!(
                                    "query has more than the model's max_seq_length {max} tokens, \
                                     and truncation is off"
                                ),
                            ))
                        }
                    }
                }
                let n = raw.len();
                Ok((
                    raw,
                    TextInfo {
                        tokens: n,
                        truncated,
                    },
                    n,
                ))
            }
            Route::Colbert(query) => {
                let Some(f) = colbert() else {
                    return Err(Error::new(
                        ErrorKind::Internal,
                        "ColBERT route without a frame",
                    ));
                };
                let len = if query {
                    f.query_length
                } else {
                    f.document_length
                };
                let len = len.min(self.max_seq_length());
                // [CLS] marker text [SEP]: the text's frame one token
                // shorter, the marker after the frame's prefix.
                let (mut ids, mut info) = self.colbert_ids(text, plan, len - 1)?;
                let (pre, _) = self.tokenizer().single_frame();
                let at = pre.len().min(ids.len());
                ids.insert(
                    at,
                    if query {
                        f.query_prefix
                    } else {
                        f.document_prefix
                    },
                );
                info.tokens = ids.len();
                let keys = ids.len();
                if query {
                    ids.resize(len, f.mask);
                }
                let keys = if query && f.attend_to_expansion {
                    ids.len()
                } else {
                    keys
                };
                Ok((ids, info, keys))
            }
        }
    }

    /// The framed ids of `text` cut at `max` tokens (the plan's prompt and
    /// truncation).
    fn colbert_ids(
        &self,
        text: &str,
        plan: &super::CallPlan,
        max: usize,
    ) -> Result<(Vec<u32>, TextInfo)> {
        let text = self.prompted_text(text, plan)?;
        let mut raw = Vec::new();
        if plan.truncation() == Truncation::Left {
            self.tokenizer().encode_raw(&text, &mut raw);
        } else {
            self.tokenizer()
                .encode_raw_bounded(&text, max + 1, &mut raw);
        }
        self.wrap(&raw, plan.truncation(), max)
    }

    /// Runs validated sequences through the runtime and the heads `want`
    /// names (keys: each sequence's attention-key limit), reporting to
    /// `track`.
    pub(super) fn run_heads(
        &self,
        seqs: &[&[u32]],
        keys: Option<&[usize]>,
        want: &Want<'_>,
        track: &mut Track<'_>,
    ) -> Result<Vec<SeqOut>> {
        let mut outs = Vec::with_capacity(seqs.len());
        self.rt.run(
            Seqs::untyped(seqs).with_keys(keys),
            track,
            |chunk, hidden, scratch, par| self.apply_heads(chunk.ids, hidden, scratch, par, want),
            |_, o: Vec<SeqOut>| outs.extend(o),
        )?;
        Ok(outs)
    }

    /// The heads of one chunk.
    fn apply_heads(
        &self,
        seqs: &[&[u32]],
        hidden: &[f32],
        mut scratch: HeadScratch<'_>,
        par: Par,
        want: &Want<'_>,
    ) -> Vec<SeqOut> {
        let h = self.heads.dense.hidden();
        let mut outs: Vec<SeqOut> = seqs.iter().map(|_| SeqOut::default()).collect();
        if want.kinds.contains(&OutputKind::Dense) {
            let dim = want.pass.dim;
            let v = self.heads.dense.apply(seqs, hidden, want.pass);
            for (d, out) in v.chunks_exact(dim.max(1)).zip(outs.iter_mut()) {
                out.dense = d.to_vec();
            }
        }
        if want.kinds.contains(&OutputKind::Sparse) {
            if let Some(head) = &self.heads.sparse {
                let vs = head.apply(hidden, seqs, h, scratch.reborrow(), par);
                for (v, out) in vs.into_iter().zip(outs.iter_mut()) {
                    let mut v = v;
                    if let Some(k) = want.top_k {
                        v.keep_top(k);
                    }
                    out.sparse = Some(v);
                }
            }
        }
        if want.kinds.contains(&OutputKind::MultiVector) {
            if let Some(head) = &self.heads.multi_vector {
                let skip = match (want.route, &head.colbert) {
                    (Route::Colbert(false), Some(f)) => Some(&f.skiplist),
                    _ => None,
                };
                let keep = |s: usize, i: usize| skip.is_none_or(|l| !l.contains(&seqs[s][i]));
                let vs = head.apply(hidden, seqs, keep, scratch.reborrow(), par);
                for (v, out) in vs.into_iter().zip(outs.iter_mut()) {
                    out.multi = Some(v);
                }
            }
        }
        outs
    }
}
