//! Per-call options ([`CallOptions`]): one open model serves every call with
//! its own normalization, Matryoshka size, prompt and truncation, without a
//! second open. [`Embedder::embed_with`] is the one entry point over texts;
//! [`Embedder::plan`], [`Embedder::tokenize_planned`],
//! [`Embedder::wrap_ids`] and [`Embedder::embed_planned`] are its steps, for
//! callers that tokenize on arrival and batch later (the HTTP server).

use super::{
    check_batch, check_dimensions, check_info, check_sizes, DenseOpts, Embedder, TextInfo,
};
use super::{Framed, Seqs, Track};
use crate::error::{Error, ErrorKind, Result};
use crate::options::{CallOptions, Truncation};

/// A call's [`CallOptions`] resolved against one model: the prompt, the
/// pooling, the output size and the truncation. Made by [`Embedder::plan`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallPlan {
    prompt: String,
    pub(super) pass: DenseOpts,
    truncation: Truncation,
}

impl CallPlan {
    /// Floats per vector.
    pub fn dim(&self) -> usize {
        self.pass.dim
    }

    /// The vectors are L2-normalized.
    pub fn normalize(&self) -> bool {
        self.pass.normalize
    }

    /// The prompt prepended to each text (empty: none).
    pub fn prompt(&self) -> &str {
        &self.prompt
    }

    /// What a too-long text becomes.
    pub fn truncation(&self) -> Truncation {
        self.truncation
    }

    /// Tokens at the start of each sequence left out of pooling (the prompt's
    /// and `[CLS]` when the model's pooling leaves the prompt out), else 0.
    pub fn pool_from(&self) -> usize {
        self.pass.pool_from
    }

    /// True when sequences tokenized under `self` and under `other` can run in
    /// one [`Embedder::embed_planned`] call (same pooling and output).
    pub fn same_pass(&self, other: &CallPlan) -> bool {
        self.pass == other.pass
    }

    /// The plan gives token vectors ([`Embedder::plan_tokens`]), not sentence
    /// vectors.
    pub fn token_vectors(&self) -> bool {
        self.pass.tokens
    }

    /// Vectors [`Embedder::embed_planned`] writes for `seqs`: one per
    /// sequence, or one per token for token vectors (each [`CallPlan::dim`]
    /// floats).
    pub fn rows(&self, seqs: &[&[u32]]) -> usize {
        self.pass.rows(seqs)
    }
}

impl Embedder {
    /// Resolves per-call options against this model.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidArgument`]: both a prompt and a prompt name, a
    /// prompt name the model does not store, `dimensions` outside
    /// `1..=hidden_size`; [`ErrorKind::Unsupported`] for non-default options
    /// on a model opened with [`crate::Options::window_overlap`].
    pub fn plan(&self, opts: &CallOptions) -> Result<CallPlan> {
        if self.window_overlap.is_some() && *opts != CallOptions::default() {
            return Err(Error::unsupported(
                "per-call options are not supported on a model opened with long-text windows \
                 (window_overlap)",
            ));
        }
        let prompt = match (&opts.prompt, &opts.prompt_name) {
            (Some(_), Some(_)) => {
                return Err(Error::invalid_argument(
                    "give a prompt or a prompt name, not both",
                ))
            }
            (Some(p), None) => p.clone(),
            (None, Some(n)) => self.prompts.get(n).cloned().ok_or_else(|| {
                let names: Vec<&str> = self.prompts.keys().map(String::as_str).collect();
                Error::invalid_argument(format!(
                    "prompt name '{n}' is not one of the model's prompts ({})",
                    if names.is_empty() {
                        "it stores none".to_string()
                    } else {
                        format!("it stores {}", names.join(", "))
                    }
                ))
            })?,
            (None, None) => self.prompt.clone(),
        };
        let pool_from = if prompt == self.prompt {
            self.pool_from
        } else if prompt.is_empty() || self.include_prompt {
            0
        } else {
            // As at open: the prompt's ids with [CLS], without [SEP].
            self.tokenizer()
                .encode(&prompt, Some(self.max_seq_length()))
                .len()
                - 1
        };
        let dim = match opts.dimensions {
            None => self.dim,
            k => check_dimensions(k, self.heads.dense.out_dim())?,
        };
        Ok(CallPlan {
            prompt,
            pass: DenseOpts {
                pool_from,
                normalize: opts.normalize.unwrap_or(self.normalize),
                dim,
                tokens: false,
                matryoshka: self.matryoshka,
            },
            truncation: opts.truncation,
        })
    }

    /// Resolves per-call options for token vectors ([`Embedder::embed_tokens_with`]):
    /// the last hidden state of every token, special and prompt tokens
    /// included, un-pooled, as sentence-transformers'
    /// `encode(output_value="token_embeddings")` and TEI's `/embed_all`.
    /// The prompt, truncation and `dimensions` apply as for sentence vectors;
    /// token vectors are normalized only when `normalize` is `Some(true)`
    /// (the model's Normalize module applies to sentence vectors).
    ///
    /// # Errors
    /// As [`Embedder::plan`]; [`ErrorKind::Unsupported`] on a model opened
    /// with [`crate::Options::window_overlap`].
    pub fn plan_tokens(&self, opts: &CallOptions) -> Result<CallPlan> {
        if self.window_overlap.is_some() {
            return Err(Error::unsupported(
                "token vectors are not available on a model opened with long-text windows \
                 (window_overlap)",
            ));
        }
        let sentence = CallOptions {
            normalize: Some(opts.normalize.unwrap_or(false)),
            ..opts.clone()
        };
        let mut plan = self.plan(&sentence)?;
        plan.pass.pool_from = 0;
        plan.pass.tokens = true;
        // Token vectors are the hidden states: the Dense modules after
        // pooling, if any, do not apply to them (nor their width).
        let (full, hidden) = (self.heads.dense.out_dim(), self.heads.dense.hidden());
        if full != hidden {
            plan.pass.dim = check_dimensions(opts.dimensions, hidden)?;
        }
        Ok(plan)
    }

    /// The ids the model sees for `text` under `plan`: `[CLS]`, the ids of
    /// the prompt and the text (cut as `plan` says when longer than
    /// `max_seq_length - 2`), `[SEP]`; and the text's [`TextInfo`].
    ///
    /// # Errors
    /// [`ErrorKind::LimitExceeded`] for a text over [`crate::limits::MAX_TEXT_BYTES`],
    /// or longer than the model with [`Truncation::Refuse`] (the message gives
    /// the token count); [`ErrorKind::InvalidArgument`] when
    /// [`Truncation::Left`] would cut into a prompt left out of pooling.
    pub fn tokenize_planned(&self, text: &str, plan: &CallPlan) -> Result<(Vec<u32>, TextInfo)> {
        let text = self.prompted_text(text, plan)?;
        let text = text.as_ref();
        let max = self.max_seq_length();
        if plan.truncation == Truncation::Right {
            let mut ids = Vec::new();
            let cut = self.tokenizer().encode_into_checked(text, max, &mut ids);
            let tokens = ids.len();
            return Ok((
                ids,
                TextInfo {
                    tokens,
                    truncated: cut,
                },
            ));
        }
        let mut raw = Vec::new();
        self.tokenizer().encode_raw(text, &mut raw);
        let (pre, post) = self.tokenizer().single_frame();
        let body = max.saturating_sub(pre.len() + post.len());
        if plan.truncation == Truncation::Left && raw.len() > body && plan.pass.pool_from > 0 {
            return Err(Error::invalid_argument(
                "left truncation would cut into the prompt, which this model leaves out of \
                 pooling",
            ));
        }
        self.wrap(&raw, plan.truncation, max)
    }

    /// `text` with the plan's prompt before it, checked against
    /// [`crate::limits::MAX_TEXT_BYTES`].
    pub(super) fn prompted_text<'a>(
        &self,
        text: &'a str,
        plan: &CallPlan,
    ) -> Result<std::borrow::Cow<'a, str>> {
        if text.len() > crate::limits::MAX_TEXT_BYTES {
            return Err(Error::new(
                ErrorKind::LimitExceeded,
                format!(
                    "text has {} bytes, more than the limit of {}",
                    text.len(),
                    crate::limits::MAX_TEXT_BYTES
                ),
            ));
        }
        Ok(if plan.prompt.is_empty() {
            std::borrow::Cow::Borrowed(text)
        } else {
            std::borrow::Cow::Owned(format!("{}{text}", plan.prompt))
        })
    }

    /// `[CLS]` + `raw` (text token ids, without specials) + `[SEP]`, cut as
    /// `truncation` says when `raw` has more than `max_seq_length - 2` ids; and
    /// its [`TextInfo`]. For callers that send token ids instead of text
    /// (OpenAI's `input: [int]`).
    ///
    /// # Errors
    /// [`ErrorKind::InvalidArgument`] naming the first id not below the
    /// vocabulary size; [`ErrorKind::LimitExceeded`] for too many ids with
    /// [`Truncation::Refuse`].
    pub fn wrap_ids(&self, raw: &[u32], truncation: Truncation) -> Result<(Vec<u32>, TextInfo)> {
        let vocab = self.config().vocab_size;
        if let Some((j, id)) = raw.iter().enumerate().find(|(_, &id)| id as usize >= vocab) {
            return Err(Error::invalid_argument(format!(
                "token id {id} at position {j} is not below the vocabulary size {vocab}"
            )));
        }
        self.wrap(raw, truncation, self.max_seq_length())
    }

    pub(super) fn wrap(
        &self,
        raw: &[u32],
        truncation: Truncation,
        max: usize,
    ) -> Result<(Vec<u32>, TextInfo)> {
        // The frame the tokenizer puts around one text ([CLS] ... [SEP],
        // <s> ... </s>).
        let (pre, post) = self.tokenizer().single_frame();
        let frame = pre.len() + post.len();
        let body = max.saturating_sub(frame);
        let kept = if raw.len() <= body {
            raw
        } else {
            match truncation {
                Truncation::Right => &raw[..body],
                Truncation::Left => &raw[raw.len() - body..],
                Truncation::Refuse => {
                    return Err(Error::new(
                        ErrorKind::LimitExceeded,
                        format!(
                            "input has {} tokens with [CLS] and [SEP], more than the model's \
                             max_seq_length {max}, and truncation is off",
                            raw.len() + frame
                        ),
                    ))
                }
            }
        };
        let mut ids = Vec::with_capacity(kept.len() + frame);
        ids.extend_from_slice(&pre);
        ids.extend_from_slice(kept);
        ids.extend_from_slice(&post);
        let tokens = ids.len();
        Ok((
            ids,
            TextInfo {
                tokens,
                truncated: kept.len() < raw.len(),
            },
        ))
    }

    /// Embeds sequences made by [`Embedder::tokenize_planned`] or
    /// [`Embedder::wrap_ids`] under `plan` (any mix of calls whose plans have
    /// [`CallPlan::same_pass`]) into `out` (`plan.rows(seqs) x plan.dim()`
    /// floats: a vector per sequence, or per token for token vectors, in
    /// order). Each vector is bit-identical to the one its sequence gets
    /// alone.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidArgument`] naming the first bad sequence (length
    /// outside `2..=max_seq_length`, id out of range),
    /// [`ErrorKind::BufferTooSmall`], [`ErrorKind::LimitExceeded`] beyond
    /// [`crate::MAX_BATCH`].
    pub fn embed_planned(&self, seqs: &[&[u32]], plan: &CallPlan, out: &mut [f32]) -> Result<()> {
        check_sizes(seqs.len(), 0, 0)?;
        let (rows, dim) = (plan.rows(seqs), plan.pass.dim);
        let need = rows * dim;
        if out.len() < need {
            return Err(Error::new(
                ErrorKind::BufferTooSmall,
                format!(
                    "output buffer holds {} floats, {rows} vectors x {dim} = {need} are needed",
                    out.len()
                ),
            ));
        }
        self.check_id_inputs(seqs)?;
        let mut track = Track::new(self.rt.progress(), seqs.len());
        self.run(Seqs::untyped(seqs), plan.pass, &mut out[..need], &mut track)
    }

    /// Embeds `texts` under per-call `opts` into `out` (row-major, at least
    /// `n x dim` floats, `dim` = [`CallPlan::dim`] of `opts`), filling `info`
    /// when given. `CallOptions::default()` is [`Embedder::embed_into_ex`]
    /// exactly; other options give each text the vector it gets alone under
    /// them.
    ///
    /// # Errors
    /// As [`Embedder::embed_into_ex`] and [`Embedder::plan`]; a text refused by
    /// [`Embedder::tokenize_planned`] is named by its index.
    pub fn embed_with<S: AsRef<str> + Sync>(
        &self,
        texts: &[S],
        opts: &CallOptions,
        out: &mut [f32],
        info: Option<&mut [TextInfo]>,
    ) -> Result<()> {
        if *opts == CallOptions::default() {
            return self.embed_into_ex(texts, out, info);
        }
        let plan = self.plan(opts)?;
        let need = check_batch(texts, out.len(), plan.dim())?;
        check_info(texts.len(), info.as_deref())?;
        let mut track = Track::new(self.rt.progress(), texts.len());
        let frame = |k: usize| self.frame_planned(texts, k, &plan);
        self.run_dense(
            texts.len(),
            &mut track,
            frame,
            info,
            plan.pass,
            &mut out[..need],
        )
    }
}

impl Embedder {
    /// Token vectors of `texts` under per-call `opts` (see
    /// [`Embedder::plan_tokens`]): for each text, its tokens' vectors,
    /// `tokens x dim` floats row-major (`dim` = [`CallPlan::dim`]), the
    /// token count and truncation in `info` when given. Each text gets the
    /// vectors it gets alone.
    ///
    /// # Errors
    /// As [`Embedder::embed_with`] and [`Embedder::plan_tokens`].
    pub fn embed_tokens_with<S: AsRef<str> + Sync>(
        &self,
        texts: &[S],
        opts: &CallOptions,
        mut info: Option<&mut [TextInfo]>,
    ) -> Result<Vec<Vec<f32>>> {
        let plan = self.plan_tokens(opts)?;
        let dim = plan.dim();
        check_batch(texts, 0, 0)?;
        check_info(texts.len(), info.as_deref())?;
        let mut track = Track::new(self.rt.progress(), texts.len());
        let mut tokens = Vec::with_capacity(texts.len());
        let mut flat = Vec::new();
        self.rt.run_groups(
            texts.len(),
            &mut track,
            |k| self.frame_planned(texts, k, &plan),
            |first, frames| {
                for (k, f) in frames.iter().enumerate() {
                    if let Some(info) = info.as_deref_mut() {
                        info[first + k] = f.info;
                    }
                    tokens.push(f.ids.len());
                }
                Ok(())
            },
            |chunk, hidden, _, _| self.heads.dense.vectors(chunk.ids, hidden, plan.pass),
            |_, rows: Vec<f32>| flat.extend_from_slice(&rows),
        )?;
        let mut at = 0;
        Ok(tokens
            .iter()
            .map(|&t| {
                let v = flat[at..at + t * dim].to_vec();
                at += t * dim;
                v
            })
            .collect())
    }

    /// Text `k` of `texts` framed under `plan` ([`Embedder::tokenize_planned`]);
    /// a refusal names the text.
    fn frame_planned<S: AsRef<str>>(
        &self,
        texts: &[S],
        k: usize,
        plan: &CallPlan,
    ) -> Result<Framed> {
        let (ids, info) = self
            .tokenize_planned(texts[k].as_ref(), plan)
            .map_err(|e| Error::new(e.kind(), format!("text {k}: {}", e.message())))?;
        Ok(Framed::ids(ids, info))
    }
}
