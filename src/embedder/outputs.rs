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
use crate::model::outputs::{EncodeTask, HeadCall, Output, OutputKind, Outputs};
use crate::model::sparse::SparseVector;
use crate::options::{CallOptions, Truncation};
use crate::runtime::Track;

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

/// The outputs of [`Embedder::encode`]: the values of each kind asked for,
/// one entry per text.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Encoded {
    /// The values, keyed by kind.
    pub outputs: Outputs,
    /// Tokens and truncation of each text.
    pub info: Vec<TextInfo>,
}

impl Encoded {
    /// The dense vectors (`texts x dim` floats), if asked for.
    pub fn dense(&self) -> Option<&[f32]> {
        match self.outputs.get(OutputKind::Dense)? {
            Output::Dense { vectors, .. } => Some(vectors),
            _ => None,
        }
    }

    /// Floats per dense vector (0 without the dense output).
    pub fn dim(&self) -> usize {
        match self.outputs.get(OutputKind::Dense) {
            Some(Output::Dense { dim, .. }) => *dim,
            _ => 0,
        }
    }

    /// Text `i`'s dense vector, if asked for.
    pub fn dense_row(&self, i: usize) -> Option<&[f32]> {
        let dim = self.dim();
        self.dense().map(|d| &d[i * dim..(i + 1) * dim])
    }

    /// The sparse vectors, if asked for.
    pub fn sparse(&self) -> Option<&[SparseVector]> {
        match self.outputs.get(OutputKind::Sparse)? {
            Output::Sparse(v) => Some(v),
            _ => None,
        }
    }

    /// The vectors of each text, if asked for.
    pub fn multi_vector(&self) -> Option<&[MultiVector]> {
        match self.outputs.get(OutputKind::MultiVector)? {
            Output::MultiVector(v) => Some(v),
            _ => None,
        }
    }

    /// The sparse vectors, taken out (empty if not asked for).
    pub fn into_sparse(mut self) -> Vec<SparseVector> {
        match self.outputs.take(OutputKind::Sparse) {
            Some(Output::Sparse(v)) => v,
            _ => Vec::new(),
        }
    }

    /// The vectors of each text, taken out (empty if not asked for).
    pub fn into_multi_vector(mut self) -> Vec<MultiVector> {
        match self.outputs.take(OutputKind::MultiVector) {
            Some(Output::MultiVector(v)) => v,
            _ => Vec::new(),
        }
    }

    /// Removes the first `n` texts' outputs, of every kind, and returns
    /// them.
    pub fn split_front(&mut self, n: usize) -> Encoded {
        let n = n.min(self.info.len());
        Encoded {
            outputs: self.outputs.split_front(n),
            info: self.info.drain(..n).collect(),
        }
    }
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

/// What the heads compute for a call.
pub(super) struct Want<'a> {
    pub(super) kinds: &'a [OutputKind],
    /// Each head's share of the call's options.
    pub(super) call: HeadCall,
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
            call: HeadCall {
                dense: plan.pass,
                top_k: req.top_k.or(self.heads.top_k),
                colbert_document: route == Route::Colbert(false),
            },
        };
        let mut outs = Outputs::empty(&kinds, plan.dim());
        let mut info: Vec<TextInfo> = Vec::with_capacity(texts.len());
        let named = |i: usize, e: Error| Error::new(e.kind(), format!("text {i}: {}", e.message()));
        if route == Route::Encoder && self.window_overlap.is_some() {
            // A text is several sequences: the windows group texts themselves.
            self.run_windows(texts, TEXT_GROUP, &want, track, |_, o, i| {
                outs.append(o);
                info.extend(i);
            })?;
        } else if route == Route::StaticQuery {
            // No encoder: the static weights of each query's ids.
            let q = self.heads.static_query.as_ref();
            let mut vs = Vec::with_capacity(texts.len());
            for start in (0..texts.len()).step_by(TEXT_GROUP) {
                let end = (start + TEXT_GROUP).min(texts.len());
                let framed = self.rt.map_parallel(start..end, |i| {
                    self.frame(texts[i].as_ref(), &plan, route)
                        .map_err(|e| named(i, e))
                });
                for f in framed {
                    let (ids, i, _) = f?;
                    info.push(i);
                    if let Some(q) = q {
                        let mut v = q.apply(&ids);
                        if let Some(k) = want.call.top_k {
                            v.keep_top(k);
                        }
                        vs.push(v);
                    }
                }
                track.report(end)?;
            }
            outs.insert(Output::Sparse(vs));
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
                |_, o: Outputs| outs.append(o),
            )?;
        }
        Ok(Encoded {
            outputs: outs,
            info,
        })
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
            call: HeadCall {
                dense: DenseOpts {
                    pool_from: 0,
                    ..plan.pass
                },
                top_k: req.top_k.or(self.heads.top_k),
                colbert_document: false,
            },
        };
        let mut track = Track::new(self.rt.progress(), ids.len());
        let mut outs = Outputs::empty(&kinds, plan.dim());
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
            |_, o: Outputs| outs.append(o),
        )?;
        Ok(Encoded {
            outputs: outs,
            info,
        })
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
    ) -> Result<Outputs> {
        let mut outs = Outputs::empty(want.kinds, want.call.dense.dim);
        self.rt.run(
            Seqs::untyped(seqs).with_keys(keys),
            track,
            |chunk, hidden, scratch, par| self.apply_heads(chunk.ids, hidden, scratch, par, want),
            |_, o: Outputs| outs.append(o),
        )?;
        Ok(outs)
    }

    /// The outputs `want` asks for of one chunk: each asked kind's head of
    /// the table.
    fn apply_heads(
        &self,
        seqs: &[&[u32]],
        hidden: &[f32],
        mut scratch: HeadScratch<'_>,
        par: Par,
        want: &Want<'_>,
    ) -> Outputs {
        let mut outs = Outputs::default();
        for head in self
            .heads
            .table()
            .filter(|h| want.kinds.contains(&h.kind()))
        {
            outs.insert(head.apply(seqs, hidden, scratch.reborrow(), par, &want.call));
        }
        outs
    }
}
