//! [`Reranker`]: a cross-encoder (HF `*ForSequenceClassification`) scoring
//! text pairs as sentence-transformers' `CrossEncoder` does.
//!
//! ```no_run
//! use embedder::{Options, Reranker};
//! let r = Reranker::open("models/minilm-reranker.weights", &Options::new())?;
//! let scores = r.score(&[("a query", "a passage"), ("a query", "another")])?;
//! let best = r.rank("a query", &["a passage", "another"], Some(1))?;
//! # Ok::<(), embedder::Error>(())
//! ```
//!
//! It is a face of the runtime every model runs on, as
//! [`crate::Embedder`] is, with a different output stage: the pairs are
//! framed on the workers and run padding-free through the same group loop
//! and batching over the worker pool (chunks of whole pairs, long batches
//! split over the threads, progress and cancellation between chunks); on
//! each chunk the classification head
//! ([`crate::model::head::ClassificationHead`]: its pooling, the first token
//! `[CLS]` / `<s>` or as `classifier_pooling` says, then its products or an
//! LLM's logit score) turns the last hidden states into logits, and the
//! model's activation into scores.

use std::path::Path;

use crate::error::{Error, ErrorKind, Result};
use crate::formats::ModelFile;
use crate::kernels::Par;
use crate::limits::{MAX_BATCH, MAX_TEXT_BYTES};
use crate::model::encoder::{HeadScratch, Seqs};
use crate::model::head::{ClassificationHead, ScoreActivation, Task};
use crate::model::pair_template::{self, PairTemplate};
use crate::model::precision::Precision;
use crate::options::Options;
use crate::runtime::{open_model_file, Framed, Runtime, Track};
use crate::runtime::{ModelInfo, TextInfo};
use crate::tokenizer::template::Template;
use crate::tokenizer::Tokenizer;

/// A text pair as the model reads it ([`Reranker::tokenize_pair`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PairEncoding {
    /// The ids, special tokens included.
    pub ids: Vec<u32>,
    /// The token type of each id (BERT: 0 for the query's part, 1 for the
    /// passage's; RoBERTa/XLM-R: 0 everywhere).
    pub type_ids: Vec<u32>,
    /// Ids of either text were cut to fit.
    pub truncated: bool,
}

/// A run of text ids with their token types.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Part {
    ids: Vec<u32>,
    types: Vec<u32>,
}

/// How the tokenizer frames a pair: `prefix A middle B suffix` (BERT
/// `[CLS] A [SEP] B [SEP]`, RoBERTa/XLM-R `<s> A </s></s> B </s>`), with the
/// token type of each text's ids. Read once at open from the tokenizer's own
/// pair encoding ([`Tokenizer::encode_pair`]), so that a query's ids can be
/// computed once and joined to every passage's ([`PairFrame::join`]) with
/// the same result as encoding each pair whole.
#[derive(Debug, Clone, PartialEq, Eq)]
struct PairFrame {
    prefix: Part,
    type_a: u32,
    middle: Part,
    type_b: u32,
    suffix: Part,
}

impl PairFrame {
    /// The frame of `tok`'s pairs, found by where a probe text's ids land in
    /// `encode_pair(probe, "")` and `encode_pair("", probe)` around the bare
    /// frame `encode_pair("", "")`. `None` when that is not unambiguous (the
    /// probe's ids would look like frame ids) or a probe pair does not come
    /// back the same as the tokenizer's own: the caller then encodes each
    /// pair whole.
    fn probe(tok: &Tokenizer) -> Option<PairFrame> {
        let (f_ids, f_types) = tok.encode_pair("", "", None);
        let mut probe = Vec::new();
        tok.encode_raw("a", &mut probe);
        if probe.is_empty() || probe.iter().any(|id| f_ids.contains(id)) {
            return None;
        }
        // The one cut of the frame where the probe's ids were inserted.
        let cut = |ids: &[u32]| -> Option<usize> {
            let mut at = (0..=f_ids.len()).filter(|&c| {
                ids.len() == f_ids.len() + probe.len()
                    && ids[..c] == f_ids[..c]
                    && ids[c..c + probe.len()] == probe[..]
                    && ids[c + probe.len()..] == f_ids[c..]
            });
            let c = at.next()?;
            at.next().is_none().then_some(c)
        };
        let (a_ids, a_types) = tok.encode_pair("a", "", None);
        let (b_ids, b_types) = tok.encode_pair("", "a", None);
        let (ca, cb) = (cut(&a_ids)?, cut(&b_ids)?);
        if ca > cb {
            return None;
        }
        let part = |r: std::ops::Range<usize>| Part {
            ids: f_ids[r.clone()].to_vec(),
            types: f_types[r].to_vec(),
        };
        let frame = PairFrame {
            prefix: part(0..ca),
            type_a: a_types[ca],
            middle: part(ca..cb),
            type_b: b_types[cb],
            suffix: part(cb..f_ids.len()),
        };
        // A check on a pair of two texts, with and without a cut.
        let (qa, pb) = ("what is a probe?", "a probe is a test text.");
        let (mut ia, mut ib) = (Vec::new(), Vec::new());
        tok.encode_raw(qa, &mut ia);
        tok.encode_raw(pb, &mut ib);
        for max in [None, Some(frame.len() + 3)] {
            let want = tok.encode_pair(qa, pb, max);
            let got = frame.join(&ia, &ib, max.unwrap_or(usize::MAX));
            if (got.ids, got.type_ids) != want {
                return None;
            }
        }
        Some(frame)
    }

    /// Special ids in a pair.
    fn len(&self) -> usize {
        self.prefix.ids.len() + self.middle.ids.len() + self.suffix.ids.len()
    }

    /// The pair of texts with ids `a` and `b` (no special ids), cut by HF's
    /// `longest_first` to `max` ids in all.
    fn join(&self, a: &[u32], b: &[u32], max: usize) -> PairEncoding {
        let room = max.saturating_sub(self.len());
        let (ka, kb) = Template::longest_first(a.len(), b.len(), room);
        let n = ka + kb + self.len();
        let (mut ids, mut types) = (Vec::with_capacity(n), Vec::with_capacity(n));
        ids.extend_from_slice(&self.prefix.ids);
        types.extend_from_slice(&self.prefix.types);
        ids.extend_from_slice(&a[..ka]);
        types.resize(ids.len(), self.type_a);
        ids.extend_from_slice(&self.middle.ids);
        types.extend_from_slice(&self.middle.types);
        ids.extend_from_slice(&b[..kb]);
        types.resize(ids.len(), self.type_b);
        ids.extend_from_slice(&self.suffix.ids);
        types.extend_from_slice(&self.suffix.types);
        PairEncoding {
            ids,
            type_ids: types,
            truncated: ka < a.len() || kb < b.len(),
        }
    }
}

/// How pairs are tokenized: the query's ids once per query and each
/// passage's joined to them ([`PairFrame`]), or, for a tokenizer whose frame
/// could not be read, each pair whole.
struct PairCoder<'a> {
    tok: &'a Tokenizer,
    frame: Option<&'a PairFrame>,
    max: usize,
    /// Whether the model reads token types (a model without a token type
    /// table, ModernBERT, gets type 0 everywhere: its template's types are
    /// not model inputs).
    types: bool,
    /// An LLM reranker's prompt template, the ids of its tail, and the
    /// instruction of this call (`None`: the template's default).
    template: Option<(&'a PairTemplate, &'a [u32], Option<&'a str>)>,
}

impl PairCoder<'_> {
    /// The ids of a query (empty without a frame: they are not used).
    fn query_ids(&self, q: &str) -> Vec<u32> {
        let mut ids = Vec::new();
        if self.frame.is_some() && self.template.is_none() {
            self.tok.encode_raw(q, &mut ids);
        }
        ids
    }

    /// The pair `(q, p)` rendered by an LLM reranker's template and
    /// tokenized whole; beyond `max` ids, the text before the tail is cut
    /// and the tail's ids restored (see [`crate::model::pair_template`]).
    fn templated(
        &self,
        tpl: &PairTemplate,
        tail_ids: &[u32],
        instr: Option<&str>,
        q: &str,
        p: &str,
    ) -> PairEncoding {
        let (head, tail) = tpl.render(instr, q);
        let mut text = String::with_capacity(head.len() + p.len() + tail.len());
        text.push_str(&head);
        text.push_str(p);
        let body_len = text.len();
        text.push_str(&tail);
        let mut ids = Vec::new();
        self.tok.encode_raw(&text, &mut ids);
        let truncated = ids.len() > self.max;
        if truncated {
            ids.clear();
            let keep = self.max.saturating_sub(tail_ids.len());
            self.tok
                .encode_raw_bounded(&text[..body_len], keep, &mut ids);
            ids.truncate(keep);
            ids.extend_from_slice(tail_ids);
        }
        let type_ids = vec![0; ids.len()];
        PairEncoding {
            ids,
            type_ids,
            truncated,
        }
    }

    /// The pair `(q, p)`, `q_ids` being [`PairCoder::query_ids`]`(q)`.
    fn pair(&self, q: &str, q_ids: &[u32], p: &str) -> PairEncoding {
        if let Some((tpl, tail_ids, instr)) = self.template {
            return self.templated(tpl, tail_ids, instr, q, p);
        }
        let mut enc = match self.frame {
            Some(f) => {
                let mut p_ids = Vec::new();
                self.tok.encode_raw(p, &mut p_ids);
                f.join(q_ids, &p_ids, self.max)
            }
            None => encode_pair(self.tok, q, p, self.max),
        };
        if !self.types {
            enc.type_ids.fill(0);
        }
        enc
    }
}

/// [`Tokenizer::encode_pair`] with the truncation flag: a pair that fills
/// `max` ids is tokenized again without the cut to tell whether it lost any.
fn encode_pair(tok: &Tokenizer, a: &str, b: &str, max: usize) -> PairEncoding {
    let (ids, type_ids) = tok.encode_pair(a, b, Some(max));
    let truncated = ids.len() >= max && tok.encode_pair(a, b, None).0.len() > ids.len();
    PairEncoding {
        ids,
        type_ids,
        truncated,
    }
}

/// One document of a ranking ([`Reranker::rank_ex`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Ranked {
    /// The document's index in the call.
    pub index: usize,
    /// Its score (the model's activation of the logit).
    pub score: f32,
    /// Its logit.
    pub logit: f32,
}

/// An open cross-encoder: immutable, `Send + Sync`, shareable across threads.
pub struct Reranker {
    /// The encoder, tokenizer, workers and workspaces.
    rt: Runtime,
    /// The classifier (its pooling, products and activation).
    head: ClassificationHead,
    /// The pair framing, `None` for a tokenizer whose frame could not be read.
    frame: Option<PairFrame>,
    /// Whether the model reads token types ([`PairCoder`]).
    types: bool,
    /// An LLM reranker's prompt template and the ids of its tail.
    template: Option<(PairTemplate, Vec<u32>)>,
    /// The instruction set at open ([`Options::prompt`]), if any.
    prompt: Option<String>,
}

impl std::fmt::Debug for Reranker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reranker")
            .field("model", &self.rt.config().model_name)
            .field("labels", &self.head.num_labels())
            .finish()
    }
}

/// The message refusing a prompt for a cross-encoder without a template.
fn no_prompt_template() -> Error {
    Error::invalid_argument(
        "this cross-encoder takes no prompt: only an LLM reranker with a prompt template \
         (Qwen3-Reranker) scores pairs under an instruction",
    )
}

impl Reranker {
    /// Opens a cross-encoder file (any container the embedder reads).
    ///
    /// Options that apply: `threads`, `max_seq_length` (sentence-transformers'
    /// `CrossEncoder(max_length=...)`; default the model's), `precision`,
    /// `verify_checksums`, `prepack_weights`, `progress`. The embedding
    /// options (`normalize`, `dimensions`, `output_ranges`, prompts,
    /// `window_overlap`) are refused.
    ///
    /// # Errors
    /// As [`crate::Embedder::open`]; [`ErrorKind::Model`] naming the mistake for an
    /// embedding model; [`ErrorKind::InvalidArgument`] for an embedding option.
    pub fn open(path: impl AsRef<Path>, opts: &Options) -> Result<Reranker> {
        let path = path.as_ref();
        let file = open_model_file(path, opts)?;
        Reranker::from_model_file(file, opts).map_err(|e| e.context(path.display()))
    }

    /// Builds the reranker over a parsed model file.
    ///
    /// # Errors
    /// As [`Reranker::open`].
    pub fn from_model_file(file: ModelFile, opts: &Options) -> Result<Reranker> {
        if Task::of(&file.metadata)? != Task::Classification {
            return Err(crate::model::head::not_a_classifier());
        }
        let template = match file.metadata.get(pair_template::KEY) {
            Some(j) => Some(PairTemplate::from_json(j)?),
            None => None,
        };
        if template.is_none() && opts.prompt.as_deref().is_some_and(|p| !p.is_empty()) {
            return Err(no_prompt_template());
        }
        let refused = [
            ("normalize", opts.normalize.is_some()),
            ("dimensions", opts.dimensions.is_some()),
            ("output_ranges", opts.output_ranges.is_some()),
            ("prompt_name", opts.prompt_name.is_some()),
            ("window_overlap", opts.window_overlap.is_some()),
        ];
        if let Some((name, _)) = refused.iter().find(|(_, set)| *set) {
            return Err(Error::invalid_argument(format!(
                "option '{name}' applies to embedders, not to a reranker"
            )));
        }
        let prompt = opts.prompt.clone().filter(|p| !p.is_empty());
        let (rt, file) = Runtime::open(file, opts)?;
        let types = rt.config().family()?.embeddings.token_type.is_some();
        let head = ClassificationHead::load(&file, rt.config().hidden_size)?;
        let frame = match template {
            Some(_) => None,
            None => PairFrame::probe(rt.tokenizer()),
        };
        let template = template.map(|t| {
            let (_, tail) = t.render(None, "");
            let mut ids = Vec::new();
            rt.tokenizer().encode_raw(&tail, &mut ids);
            (t, ids)
        });
        Ok(Reranker {
            rt,
            head,
            frame,
            types,
            template,
            prompt,
        })
    }

    /// Logits per pair.
    pub fn num_labels(&self) -> usize {
        self.head.num_labels()
    }

    /// The labels' names (`id2label`).
    pub fn labels(&self) -> &[String] {
        &self.head.config().labels
    }

    /// The function from logits to scores.
    pub fn activation(&self) -> ScoreActivation {
        self.head.config().activation
    }

    /// Effective maximum length of a pair in tokens, special tokens included.
    pub fn max_seq_length(&self) -> usize {
        self.rt.max_seq_length()
    }

    /// Arithmetic of the encoder's dense layers (the head runs in f32).
    pub fn precision(&self) -> Precision {
        self.rt.precision()
    }

    /// Worker threads used by one call.
    pub fn threads(&self) -> usize {
        self.rt.threads()
    }

    /// Packs the layers' weight matrices for the kernels now, on the calling
    /// thread, if that is not done yet (see [`Options::prepack_weights`], which
    /// does it in the background from the first call on). Results do not change.
    pub fn prepack(&self) {
        self.rt.prepack();
    }

    /// Facts about the encoder (`dim` is its hidden size).
    pub fn info(&self) -> ModelInfo {
        self.rt.info(self.head.hidden(), self.head.pooling(), false)
    }

    /// A pair as the model reads it: ids, token types, truncation.
    pub fn tokenize_pair(&self, query: &str, passage: &str) -> PairEncoding {
        let c = self.coder(None);
        c.pair(query, &c.query_ids(query), passage)
    }

    /// [`Reranker::tokenize_pair`] under the instruction `prompt` (see
    /// [`Reranker::predict_prompted`]).
    ///
    /// # Errors
    /// [`ErrorKind::InvalidArgument`] for a prompt to a cross-encoder without
    /// a prompt template.
    pub fn tokenize_pair_prompted(
        &self,
        query: &str,
        passage: &str,
        prompt: Option<&str>,
    ) -> Result<PairEncoding> {
        self.check_prompt(prompt)?;
        let c = self.coder(prompt);
        Ok(c.pair(query, &c.query_ids(query), passage))
    }

    /// Whether the model takes a prompt (an LLM reranker's instruction,
    /// sentence-transformers' CrossEncoder `prompt`).
    pub fn takes_prompt(&self) -> bool {
        self.template.is_some()
    }

    /// The instruction pairs are scored under when a call gives none: the
    /// prompt set at open, else the template's default (`None` for a
    /// cross-encoder without a prompt template).
    pub fn default_prompt(&self) -> Option<&str> {
        let (t, _) = self.template.as_ref()?;
        Some(self.prompt.as_deref().unwrap_or(&t.default_instruction))
    }

    /// The pair tokenizer of this model, under the instruction `prompt`
    /// (`None`: the open-time one, else the template's default).
    fn coder<'a>(&'a self, prompt: Option<&'a str>) -> PairCoder<'a> {
        PairCoder {
            tok: self.rt.tokenizer(),
            frame: self.frame.as_ref(),
            max: self.max_seq_length(),
            types: self.types,
            template: self
                .template
                .as_ref()
                .map(|(t, tail)| (t, tail.as_slice(), prompt.or(self.prompt.as_deref()))),
        }
    }

    /// Checks a call's prompt: only a model with a prompt template takes one.
    fn check_prompt(&self, prompt: Option<&str>) -> Result<()> {
        if prompt.is_some() && self.template.is_none() {
            return Err(no_prompt_template());
        }
        Ok(())
    }

    /// Scores of pairs (`(query, passage)`), after the model's activation:
    /// `n x num_labels` values, row-major. Each pair's score is the one it
    /// gets alone.
    ///
    /// # Errors
    /// [`ErrorKind::LimitExceeded`] beyond [`MAX_BATCH`] pairs or a text beyond
    /// [`MAX_TEXT_BYTES`]; [`ErrorKind::Cancelled`] from the progress callback.
    pub fn score<Q, P>(&self, pairs: &[(Q, P)]) -> Result<Vec<f32>>
    where
        Q: AsRef<str> + Sync,
        P: AsRef<str> + Sync,
    {
        let mut out = vec![0.0; pairs.len() * self.num_labels()];
        self.predict_into(pairs, Some(&mut out), None, None)?;
        Ok(out)
    }

    /// The logits of pairs (no activation), `n x num_labels`.
    ///
    /// # Errors
    /// As [`Reranker::score`].
    pub fn logits<Q, P>(&self, pairs: &[(Q, P)]) -> Result<Vec<f32>>
    where
        Q: AsRef<str> + Sync,
        P: AsRef<str> + Sync,
    {
        let mut out = vec![0.0; pairs.len() * self.num_labels()];
        self.predict_into(pairs, None, Some(&mut out), None)?;
        Ok(out)
    }

    /// Scores and/or logits of pairs into caller buffers (each at least
    /// `n x num_labels`), and each pair's token count and truncation flag
    /// into `info` (at least `n` entries) when given.
    ///
    /// # Errors
    /// As [`Reranker::score`]; [`ErrorKind::BufferTooSmall`] for a short
    /// buffer. On [`ErrorKind::Cancelled`], the rows the progress callback
    /// last counted are complete.
    pub fn predict_into<Q, P>(
        &self,
        pairs: &[(Q, P)],
        scores: Option<&mut [f32]>,
        logits: Option<&mut [f32]>,
        info: Option<&mut [TextInfo]>,
    ) -> Result<()>
    where
        Q: AsRef<str> + Sync,
        P: AsRef<str> + Sync,
    {
        self.predict_prompted(pairs, None, scores, logits, info)
    }

    /// [`Reranker::predict_into`] under the instruction `prompt` (an LLM
    /// reranker's CrossEncoder prompt; `None`: the open-time one, else the
    /// template's default).
    ///
    /// # Errors
    /// As [`Reranker::predict_into`]; [`ErrorKind::InvalidArgument`] for a
    /// prompt to a cross-encoder without a prompt template.
    pub fn predict_prompted<Q, P>(
        &self,
        pairs: &[(Q, P)],
        prompt: Option<&str>,
        scores: Option<&mut [f32]>,
        logits: Option<&mut [f32]>,
        info: Option<&mut [TextInfo]>,
    ) -> Result<()>
    where
        Q: AsRef<str> + Sync,
        P: AsRef<str> + Sync,
    {
        self.check_prompt(prompt)?;
        check_count(pairs.len(), "pairs")?;
        for (i, (q, p)) in pairs.iter().enumerate() {
            check_text(q.as_ref(), &format!("pair {i}: query"))?;
            check_text(p.as_ref(), &format!("pair {i}: passage"))?;
        }
        // Consecutive pairs with the same query share its ids, computed
        // once: `firsts` holds the first pair of each run of one query,
        // `slot[i]` the run of pair i.
        let n = pairs.len();
        let (mut firsts, mut slot) = (Vec::new(), Vec::with_capacity(n));
        for i in 0..n {
            if i == 0 || pairs[i].0.as_ref() != pairs[i - 1].0.as_ref() {
                firsts.push(i);
            }
            slot.push(firsts.len() - 1);
        }
        let coder = self.coder(prompt);
        let q_ids = self.rt.map_parallel(0..firsts.len(), |k| {
            coder.query_ids(pairs[firsts[k]].0.as_ref())
        });
        self.run_pairs(
            n,
            |i| {
                let (q, p) = (pairs[i].0.as_ref(), pairs[i].1.as_ref());
                coder.pair(q, &q_ids[slot[i]], p)
            },
            scores,
            logits,
            info,
        )
    }

    /// Ranks documents for a query: `(index, score)` best first (ties by
    /// index), the first `top_k` (all for `None`), as sentence-transformers'
    /// `CrossEncoder.rank`.
    ///
    /// # Errors
    /// As [`Reranker::rank_ex`].
    pub fn rank<S: AsRef<str> + Sync>(
        &self,
        query: &str,
        docs: &[S],
        top_k: Option<usize>,
    ) -> Result<Vec<(usize, f32)>> {
        Ok(self
            .rank_ex(query, docs, top_k, false, None)?
            .into_iter()
            .map(|r| (r.index, r.score))
            .collect())
    }

    /// [`Reranker::rank`] with each document's logit too, ordered by logit
    /// instead of score when `raw` (sentence-transformers' `rank` with the
    /// identity activation), and each pair's token count and truncation flag
    /// in `info` (by document index; at least `docs.len()` entries).
    ///
    /// # Errors
    /// [`ErrorKind::InvalidArgument`] for an empty (or whitespace-only) query,
    /// no documents, a `top_k` of 0 or more than the documents, or a model
    /// with several labels (rank needs one score per pair);
    /// [`ErrorKind::LimitExceeded`] beyond [`MAX_BATCH`] documents or a text
    /// beyond [`MAX_TEXT_BYTES`]; [`ErrorKind::Cancelled`].
    pub fn rank_ex<S: AsRef<str> + Sync>(
        &self,
        query: &str,
        docs: &[S],
        top_k: Option<usize>,
        raw: bool,
        info: Option<&mut [TextInfo]>,
    ) -> Result<Vec<Ranked>> {
        self.rank_prompted(query, docs, top_k, raw, None, info)
    }

    /// [`Reranker::rank_ex`] under the instruction `prompt` (see
    /// [`Reranker::predict_prompted`]).
    ///
    /// # Errors
    /// As [`Reranker::rank_ex`] and [`Reranker::predict_prompted`].
    pub fn rank_prompted<S: AsRef<str> + Sync>(
        &self,
        query: &str,
        docs: &[S],
        top_k: Option<usize>,
        raw: bool,
        prompt: Option<&str>,
        info: Option<&mut [TextInfo]>,
    ) -> Result<Vec<Ranked>> {
        self.check_prompt(prompt)?;
        if self.num_labels() != 1 {
            return Err(Error::invalid_argument(format!(
                "rank needs a model with one label; this one has {} (score the pairs instead)",
                self.num_labels()
            )));
        }
        if query.trim().is_empty() {
            return Err(Error::invalid_argument(
                "the query is empty (or only whitespace)",
            ));
        }
        if docs.is_empty() {
            return Err(Error::invalid_argument("no documents to rank"));
        }
        check_count(docs.len(), "documents")?;
        match top_k {
            Some(0) => return Err(Error::invalid_argument("top_k is 0; ask for at least 1")),
            Some(k) if k > docs.len() => {
                return Err(Error::invalid_argument(format!(
                    "top_k {k} is more than the {} documents",
                    docs.len()
                )))
            }
            _ => {}
        }
        check_text(query, "query")?;
        for (i, d) in docs.iter().enumerate() {
            check_text(d.as_ref(), &format!("document {i}"))?;
        }
        let coder = self.coder(prompt);
        let q_ids = coder.query_ids(query);
        let n = docs.len();
        let mut logits = vec![0.0f32; n];
        self.run_pairs(
            n,
            |i| coder.pair(query, &q_ids, docs[i].as_ref()),
            None,
            Some(&mut logits),
            info,
        )?;
        let act = self.activation();
        let mut out: Vec<Ranked> = logits
            .iter()
            .enumerate()
            .map(|(index, &logit)| {
                let mut s = [logit];
                act.apply(&mut s);
                Ranked {
                    index,
                    score: s[0],
                    logit,
                }
            })
            .collect();
        let key = |r: &Ranked| if raw { r.logit } else { r.score };
        out.sort_by(|a, b| key(b).total_cmp(&key(a)).then(a.index.cmp(&b.index)));
        out.truncate(top_k.unwrap_or(n));
        Ok(out)
    }

    /// The one pipeline: `n` pairs made by `encode` (in parallel on the
    /// workers, in groups), through the embedder's batching (first-token
    /// states), then the head (logits) and the activation (scores).
    fn run_pairs(
        &self,
        n: usize,
        encode: impl Fn(usize) -> PairEncoding + Sync + Send,
        mut scores: Option<&mut [f32]>,
        mut logits: Option<&mut [f32]>,
        mut info: Option<&mut [TextInfo]>,
    ) -> Result<()> {
        let labels = self.num_labels();
        let need = n * labels;
        for (what, len) in [
            ("scores", scores.as_deref().map(<[f32]>::len)),
            ("logits", logits.as_deref().map(<[f32]>::len)),
        ] {
            if let Some(len) = len.filter(|&l| l < need) {
                return Err(Error::new(
                    ErrorKind::BufferTooSmall,
                    format!("{what} holds {len} values, {n} pairs x {labels} labels = {need} are needed"),
                ));
            }
        }
        crate::runtime::check_info(n, info.as_deref())?;
        let mut track = Track::new(self.rt.progress(), n);
        let frame = |i: usize| {
            let e = encode(i);
            let info = TextInfo {
                tokens: e.ids.len(),
                truncated: e.truncated,
            };
            Ok(Framed {
                keys: e.ids.len(),
                ids: e.ids,
                types: Some(e.type_ids),
                info,
            })
        };
        self.rt.run_groups(
            n,
            &mut track,
            frame,
            |first, frames| {
                if let Some(info) = info.as_deref_mut() {
                    for (k, f) in frames.iter().enumerate() {
                        info[first + k] = f.info;
                    }
                }
                Ok(())
            },
            // On the workers: each chunk's states through the head.
            |chunk: Seqs<'_>, states: &[f32], _: HeadScratch<'_>, _: Par| {
                self.head.apply(chunk.ids, states)
            },
            // Each chunk's rows as they complete (after a cancel, the rows
            // the callback counted are complete).
            |first: usize, rows: Vec<f32>| {
                for (k, row) in rows.chunks_exact(labels).enumerate() {
                    let i = first + k;
                    if let Some(l) = logits.as_deref_mut() {
                        l[i * labels..(i + 1) * labels].copy_from_slice(row);
                    }
                    if let Some(s) = scores.as_deref_mut() {
                        let s = &mut s[i * labels..(i + 1) * labels];
                        s.copy_from_slice(row);
                        self.head.config().activation.apply(s);
                    }
                }
            },
        )
    }
}

/// At most [`MAX_BATCH`] pairs or documents.
fn check_count(n: usize, what: &str) -> Result<()> {
    if n > MAX_BATCH {
        return Err(Error::new(
            ErrorKind::LimitExceeded,
            format!("{n} {what} exceed the limit of {MAX_BATCH} per call"),
        ));
    }
    Ok(())
}

/// A text within [`MAX_TEXT_BYTES`].
fn check_text(t: &str, what: &str) -> Result<()> {
    if t.len() > MAX_TEXT_BYTES {
        return Err(Error::new(
            ErrorKind::LimitExceeded,
            format!(
                "{what} has {} bytes, more than the limit of {MAX_TEXT_BYTES}",
                t.len()
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tokenizer::vocab::Vocab;
    use crate::tokenizer::TokenizerConfig;

    /// Texts with ids of several lengths, empty ones and specials written out.
    const TEXTS: [&str; 7] = [
        "",
        "a",
        "what is the capital of france?",
        "paris is the capital and largest city of france, on the seine.",
        "[SEP] <s> </s> [CLS]",
        "a a a a a a a a a a a a a a a a a a a a a a a a a a a a a a a a a a a",
        "  ",
    ];

    /// The frame joins each pair as the tokenizer's own `encode_pair` does,
    /// with and without the cut, at every length from none of the texts to
    /// all of them.
    fn joins_like_encode_pair(tok: &Tokenizer) {
        let frame = PairFrame::probe(tok).expect("the frame is read");
        for a in TEXTS {
            for b in TEXTS {
                let (mut ia, mut ib) = (Vec::new(), Vec::new());
                tok.encode_raw(a, &mut ia);
                tok.encode_raw(b, &mut ib);
                for max in 0..frame.len() + ia.len() + ib.len() + 2 {
                    let want = encode_pair(tok, a, b, max);
                    assert_eq!(frame.join(&ia, &ib, max), want, "{a:?} / {b:?}, max {max}");
                }
            }
        }
    }

    #[test]
    fn bert_pairs_join_like_encode_pair() {
        let tokens = [
            "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "what", "is", "the",
        ];
        let vocab =
            Vocab::from_tokens_bert(tokens.iter().map(|t| t.to_string()).collect()).expect("vocab");
        let tok = Tokenizer::new(vocab, TokenizerConfig::bert_uncased());
        let frame = PairFrame::probe(&tok).expect("frame");
        assert_eq!(
            (frame.prefix.ids.clone(), frame.prefix.types.clone()),
            (vec![2], vec![0])
        );
        assert_eq!(
            (frame.middle.ids.clone(), frame.middle.types.clone()),
            (vec![3], vec![0])
        );
        assert_eq!(
            (frame.suffix.ids.clone(), frame.suffix.types.clone()),
            (vec![3], vec![1])
        );
        assert_eq!((frame.type_a, frame.type_b), (0, 1));
        joins_like_encode_pair(&tok);
    }

    /// The XLM-R reranker of the shared reference data (Unigram,
    /// `<s> A </s></s> B </s>`), when present.
    #[test]
    fn xlmr_pairs_join_like_encode_pair() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../shared/reference/families/xlmr-reranker-tiny");
        if !dir.is_dir() {
            eprintln!("skipped: {} is absent", dir.display());
            return;
        }
        let r = Reranker::open(&dir, &Options::new()).expect("opens");
        let frame = r.frame.as_ref().expect("frame");
        assert_eq!(frame.len(), 4);
        assert_eq!(frame.middle.ids.len(), 2);
        joins_like_encode_pair(r.rt.tokenizer());
    }
}
