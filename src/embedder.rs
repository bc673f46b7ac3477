//! The safe public engine: open a model file, tokenize, embed.
//!
//! ```no_run
//! use embedder::{Embedder, Options};
//! let model = Embedder::open("models/all-MiniLM-L6-v2.weights", &Options::new())?;
//! let v = model.embed(&["The cat sits outside", "A man is playing guitar"])?;
//! assert_eq!(v.len(), 2 * model.dim());
//! # Ok::<(), embedder::Error>(())
//! ```

use std::path::Path;

use crate::error::{Error, ErrorKind, Result};
use crate::formats::ModelFile;
use crate::model::config::ModelConfig;
use crate::model::dense::DenseOpts;
use crate::model::encoder::Seqs;
use crate::model::head::Task;
use crate::model::outputs::{HeadCall, Output, OutputHeads, OutputKind};
use crate::model::precision::Precision;
use crate::options::Options;
use crate::quantize::{quantize_embeddings, OutputPrecision, OutputRanges};
use crate::runtime::{Framed, Runtime, Track, GROUP as TEXT_GROUP};
use crate::tokenizer::Tokenizer;
use crate::vector::Matryoshka;

pub use crate::limits::{MAX_BATCH, MAX_TEXT_BYTES};
pub(crate) use crate::runtime::check_info;
pub use crate::runtime::{ModelInfo, TextInfo, CHUNK_TOKENS};

mod call;
mod outputs;
mod windows;
pub use call::CallPlan;
pub use outputs::{EncodeRequest, Encoded};

/// An open model: immutable, `Send + Sync`, shareable across threads.
///
/// Its memory per call and per model are the runtime's (see
/// [`CHUNK_TOKENS`]): one workspace per worker thread, bounded whatever the
/// batch size, and the memory-mapped file with the weights' packed copies.
pub struct Embedder {
    /// The encoder, tokenizer, workers and workspaces.
    rt: Runtime,
    normalize: bool,
    /// Output dimension: the model's, or the [`Options::dimensions`] cut.
    dim: usize,
    /// How a sentence vector is cut to `dim` ([`Options::matryoshka`]).
    matryoshka: Matryoshka,
    /// Ranges of `int8` / `uint8` output: the caller's, else the file's.
    output_ranges: Option<OutputRanges>,
    /// Prepended to every text (empty: none).
    prompt: String,
    /// The model's stored prompts (name -> prompt), for per-call prompt names.
    prompts: std::collections::BTreeMap<String, String>,
    /// The model's pooling includes the prompt's tokens.
    include_prompt: bool,
    /// Tokens at the start of each prompted text left out of pooling
    /// (`include_prompt: false`: `[CLS]` and the prompt's tokens), else 0.
    pool_from: usize,
    /// Long texts as overlapping windows ([`Options::window_overlap`]).
    window_overlap: Option<usize>,
    /// The model's outputs and their heads.
    heads: OutputHeads,
}

impl std::fmt::Debug for Embedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Embedder")
            .field("model", &self.rt.config().model_name)
            .field("threads", &self.rt.threads())
            .finish()
    }
}

impl Embedder {
    /// Opens a model file (any supported container), validates it and prepares
    /// the engine.
    ///
    /// # Errors
    /// I/O, format, checksum, unsupported or model errors, naming the problem.
    pub fn open(path: impl AsRef<Path>, opts: &Options) -> Result<Embedder> {
        Self::from_model_file(crate::runtime::open_model_file(path.as_ref(), opts)?, opts)
    }

    /// Builds the engine over an already parsed model file.
    ///
    /// # Errors
    /// [`ErrorKind::Model`] / [`ErrorKind::Unsupported`] for bad metadata or a
    /// missing, mistyped or misshapen tensor (named in the message);
    /// [`ErrorKind::InvalidArgument`] for options out of range;
    /// [`ErrorKind::Model`] naming `Reranker` for a cross-encoder file
    /// (metadata `task` = `classification`).
    pub fn from_model_file(file: ModelFile, opts: &Options) -> Result<Embedder> {
        if Task::of(&file.metadata)? == Task::Classification {
            return Err(crate::model::head::not_an_embedder());
        }
        let (rt, file) = Runtime::open(file, opts)?;
        let cfg = rt.config();
        let max_seq_length = cfg.max_seq_length;
        let normalize = opts.normalize.unwrap_or(cfg.normalize);
        let tokenizer = rt.tokenizer();
        let prompt = resolve_prompt(&file.metadata, opts)?;
        let include_prompt = file
            .metadata
            .get("pooling_include_prompt")
            .is_none_or(|v| v.trim() != "false");
        // sentence-transformers' prompt length: the prompt's ids with the
        // tokens before a text ([CLS]), without those after it ([SEP]).
        let (pre, post) = tokenizer.single_frame();
        let pool_from = if prompt.is_empty() || include_prompt {
            0
        } else {
            tokenizer.encode(&prompt, Some(max_seq_length)).len() - post.len()
        };
        if let Some(o) = opts.window_overlap {
            let body = max_seq_length.saturating_sub(pre.len() + post.len());
            if o >= body {
                return Err(Error::invalid_argument(format!(
                    "window overlap {o} must be less than the {body} text tokens of a window \
                     (max_seq_length {max_seq_length} minus the {} special tokens around a text)",
                    pre.len() + post.len()
                )));
            }
            if pool_from > 0 {
                return Err(Error::invalid_argument(
                    "long-text windows with a prompt left out of pooling (include_prompt \
                     false) are not supported",
                ));
            }
        }
        let sp = tokenizer.vocab().specials();
        let heads = OutputHeads::load(
            &file,
            cfg,
            rt.precision(),
            vec![sp.cls, sp.sep, sp.pad, sp.unk],
        )?;
        let full_dim = heads.dense.out_dim();
        let dim = check_dimensions(opts.dimensions, full_dim)?;
        let output_ranges =
            crate::quantize::resolve_ranges(&file, opts.output_ranges.as_ref(), full_dim, dim)?;
        if opts.matryoshka == Matryoshka::LayerNorm && opts.window_overlap.is_some() {
            return Err(Error::invalid_argument(
                "long-text windows with the layer-norm Matryoshka recipe are not supported \
                 (the recipe is defined on one vector per text)",
            ));
        }
        Ok(Embedder {
            normalize,
            dim,
            matryoshka: opts.matryoshka,
            output_ranges,
            prompt,
            prompts: parse_prompts(&file.metadata)?,
            include_prompt,
            pool_from,
            window_overlap: opts.window_overlap,
            heads,
            rt,
        })
    }

    /// Output dimension: the model's hidden size, or `K` of
    /// [`Options::dimensions`].
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// Effective maximum sequence length (tokens incl. `[CLS]`/`[SEP]`).
    pub fn max_seq_length(&self) -> usize {
        self.rt.max_seq_length()
    }

    /// The model's configuration (as read from the file).
    pub fn config(&self) -> &ModelConfig {
        self.rt.config()
    }

    /// Facts about the model.
    pub fn info(&self) -> ModelInfo {
        self.rt
            .info(self.dim, self.rt.config().pooling, self.normalize)
    }

    /// Packs the layers' weight matrices for the kernels now, on the calling
    /// thread, if that is not done yet (see [`Options::prepack_weights`], which
    /// does it in the background from the first call on). Results do not change.
    pub fn prepack(&self) {
        self.rt.prepack();
    }

    /// Layers whose weights are packed so far, and the bytes those copies hold.
    pub fn packed_layers(&self) -> (usize, usize) {
        self.rt.packed_layers()
    }

    /// Arithmetic of the dense layers in use.
    pub fn precision(&self) -> Precision {
        self.rt.precision()
    }

    /// Worker threads used by one call.
    pub fn threads(&self) -> usize {
        self.rt.threads()
    }

    /// The model's tokenizer (no prompt applied; see [`Embedder::tokenize`]).
    pub fn tokenizer(&self) -> &Tokenizer {
        self.rt.tokenizer()
    }

    /// Token ids as the model sees them: `[CLS]`, text ids truncated to
    /// `max_seq_length - 2`, `[SEP]`.
    /// With a prompt ([`Options::prompt`]), of the prompt followed by the text.
    pub fn tokenize(&self, text: &str) -> Vec<u32> {
        self.tokenizer()
            .encode(&self.prompted(text), Some(self.max_seq_length()))
    }

    /// Token ids without truncation (still with `[CLS]`/`[SEP]` and the prompt).
    pub fn tokenize_full(&self, text: &str) -> Vec<u32> {
        self.tokenizer().encode(&self.prompted(text), None)
    }

    /// `tokenize(text).len()`, without building the vector when possible.
    pub fn count_tokens(&self, text: &str) -> usize {
        self.tokenizer()
            .count_tokens(&self.prompted(text), Some(self.max_seq_length()))
    }

    /// The prompt prepended to every text (empty: none).
    pub fn prompt(&self) -> &str {
        &self.prompt
    }

    /// The text as the model reads it: the prompt, then the text.
    fn prompted<'a>(&self, text: &'a str) -> std::borrow::Cow<'a, str> {
        if self.prompt.is_empty() {
            std::borrow::Cow::Borrowed(text)
        } else {
            std::borrow::Cow::Owned(format!("{}{text}", self.prompt))
        }
    }

    /// Embeds a batch into a new row-major `n x dim` vector.
    ///
    /// Each text gets exactly the vector it gets alone (batch-invariant).
    pub fn embed<S: AsRef<str> + Sync>(&self, texts: &[S]) -> Result<Vec<f32>> {
        let mut out = vec![0.0; texts.len() * self.dim()];
        self.embed_into(texts, &mut out)?;
        Ok(out)
    }

    /// Embeds a batch into `out` (row-major, at least `n x dim` floats).
    ///
    /// # Errors
    /// [`ErrorKind::BufferTooSmall`] if `out` is too short,
    /// [`ErrorKind::LimitExceeded`] beyond [`MAX_BATCH`] / [`MAX_TEXT_BYTES`].
    pub fn embed_into<S: AsRef<str> + Sync>(&self, texts: &[S], out: &mut [f32]) -> Result<()> {
        self.embed_into_ex(texts, out, None)
    }

    /// As [`Embedder::embed_into`], and when `info` is given (at least one
    /// element per text) fills `info[i]` with text `i`'s token count and
    /// truncation flag.
    ///
    /// # Errors
    /// As [`Embedder::embed_into`]; [`ErrorKind::BufferTooSmall`] if `info`
    /// is shorter than `texts`.
    pub fn embed_into_ex<S: AsRef<str> + Sync>(
        &self,
        texts: &[S],
        out: &mut [f32],
        info: Option<&mut [TextInfo]>,
    ) -> Result<()> {
        let mut track = Track::new(self.rt.progress(), texts.len());
        self.embed_into_tracked(texts, out, info, &mut track)
    }

    /// [`Embedder::embed_into_ex`] reporting to `track` (whose `base` is the
    /// index of `texts[0]` in the whole call).
    pub(crate) fn embed_into_tracked<S: AsRef<str> + Sync>(
        &self,
        texts: &[S],
        out: &mut [f32],
        info: Option<&mut [TextInfo]>,
        track: &mut Track<'_>,
    ) -> Result<()> {
        let need = check_batch(texts, out.len(), self.dim())?;
        check_info(texts.len(), info.as_deref())?;
        if self.window_overlap.is_some() {
            return self.embed_windows(texts, &mut out[..need], info, track);
        }
        let max = self.max_seq_length();
        // Token counts asked for: tokenize one id further, to tell a text of
        // exactly max_seq_length tokens from a longer one.
        let counted = info.is_some();
        let frame = |k: usize| {
            if !counted {
                let ids = self.tokenize(texts[k].as_ref());
                return Ok(Framed::ids(ids, TextInfo::default()));
            }
            let text = self.prompted(texts[k].as_ref());
            let mut v = Vec::new();
            let truncated = self.tokenizer().encode_into_checked(&text, max, &mut v);
            let tokens = v.len();
            Ok(Framed::ids(v, TextInfo { tokens, truncated }))
        };
        self.run_dense(
            texts.len(),
            track,
            frame,
            info,
            self.pass(),
            &mut out[..need],
        )
    }

    /// Dense vectors of `texts` from their windows into `out` (`n x dim`),
    /// each text's [`TextInfo`] into `info` when given.
    fn embed_windows<S: AsRef<str> + Sync>(
        &self,
        texts: &[S],
        out: &mut [f32],
        mut info: Option<&mut [TextInfo]>,
        track: &mut Track<'_>,
    ) -> Result<()> {
        if !texts.is_empty() {
            self.heads.check(&[OutputKind::Dense])?;
        }
        let want = outputs::Want {
            kinds: &[OutputKind::Dense],
            call: HeadCall {
                dense: self.pass(),
                top_k: None,
                colbert_document: false,
            },
        };
        // With a progress callback, smaller groups: it is called after each.
        let group_len = if track.cb.is_some() { 16 } else { TEXT_GROUP };
        let dim = self.dim();
        self.run_windows(texts, group_len, &want, track, |first, outs, inf| {
            if let Some(Output::Dense { vectors, .. }) = outs.get(OutputKind::Dense) {
                out[first * dim..first * dim + vectors.len()].copy_from_slice(vectors);
            }
            if let Some(info) = info.as_deref_mut() {
                info[first..first + inf.len()].copy_from_slice(&inf);
            }
        })
    }

    /// The dense outputs of `n` inputs framed by `frame` under `pass` into
    /// `out` (`pass.rows x pass.dim` floats), each input's [`TextInfo`] into
    /// `info` when given: [`Runtime::run_groups`] through the dense head.
    fn run_dense(
        &self,
        n: usize,
        track: &mut Track<'_>,
        frame: impl Fn(usize) -> Result<Framed> + Sync + Send,
        mut info: Option<&mut [TextInfo]>,
        pass: DenseOpts,
        out: &mut [f32],
    ) -> Result<()> {
        let mut at = 0;
        self.rt.run_groups(
            n,
            track,
            frame,
            |first, frames| {
                if let Some(info) = info.as_deref_mut() {
                    for (k, f) in frames.iter().enumerate() {
                        info[first + k] = f.info;
                    }
                }
                if pass.tokens {
                    Ok(())
                } else {
                    self.heads.check(&[OutputKind::Dense])
                }
            },
            |chunk, hidden, _, _| self.heads.dense.vectors(chunk.ids, hidden, pass),
            |_, rows: Vec<f32>| {
                out[at..at + rows.len()].copy_from_slice(&rows);
                at += rows.len();
            },
        )
    }

    /// Embeds a batch into a new row-major `n x dim` vector, with each text's
    /// [`TextInfo`].
    pub fn embed_with_info<S: AsRef<str> + Sync>(
        &self,
        texts: &[S],
    ) -> Result<(Vec<f32>, Vec<TextInfo>)> {
        let mut out = vec![0.0; texts.len() * self.dim()];
        let mut info = vec![TextInfo::default(); texts.len()];
        self.embed_into_ex(texts, &mut out, Some(&mut info))?;
        Ok((out, info))
    }

    /// The ranges `int8` / `uint8` output uses: [`Options::output_ranges`],
    /// else those stored in the model file, else none.
    pub fn output_ranges(&self) -> Option<&OutputRanges> {
        self.output_ranges.as_ref()
    }

    /// Embeds a batch and quantizes the vectors to `precision` into `out`
    /// (row-major, `n x precision.row_len(dim)` bytes; `int8` and `binary`
    /// elements as two's-complement bytes), as sentence-transformers'
    /// `quantize_embeddings` with this model's [`Embedder::output_ranges`].
    ///
    /// # Errors
    /// As [`Embedder::embed_into_ex`]; [`ErrorKind::InvalidArgument`] for
    /// `float32` (use [`Embedder::embed_into`]) and for `int8`/`uint8` without
    /// ranges.
    pub fn embed_quantized_into<S: AsRef<str> + Sync>(
        &self,
        texts: &[S],
        precision: OutputPrecision,
        out: &mut [u8],
        info: Option<&mut [TextInfo]>,
    ) -> Result<()> {
        let mut track = Track::new(self.rt.progress(), texts.len());
        embed_quantized(
            texts,
            self.dim(),
            precision,
            self.output_ranges(),
            out,
            info,
            |t, o, i, base| {
                track.base = base;
                let r = self.embed_into_tracked(t, o, i, &mut track);
                (r, track.done.saturating_sub(base))
            },
        )
    }

    /// Embeds one text.
    pub fn embed_one(&self, text: &str) -> Result<Vec<f32>> {
        self.embed(&[text])
    }

    /// Embeds already tokenized inputs (each with `[CLS]`/`[SEP]`, at most
    /// `max_seq_length` ids, every id below the vocabulary size). No prompt is
    /// added, and every token is pooled.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidArgument`] naming the first bad input (length outside
    /// `2..=max_seq_length`, id out of range), [`ErrorKind::BufferTooSmall`],
    /// [`ErrorKind::LimitExceeded`] beyond [`MAX_BATCH`].
    pub fn embed_ids(&self, ids: &[&[u32]], out: &mut [f32]) -> Result<()> {
        let need = self.check_batch(ids.len(), out.len())?;
        self.check_id_inputs(ids)?;
        let mut track = Track::new(self.rt.progress(), ids.len());
        let pass = DenseOpts {
            pool_from: 0,
            ..self.pass()
        };
        self.run(Seqs::untyped(ids), pass, &mut out[..need], &mut track)
    }

    /// Checks token id inputs: each within the frame's length (the special
    /// tokens around a text, at least 1) and `max_seq_length`, every id below
    /// the vocabulary size.
    pub(crate) fn check_id_inputs(&self, ids: &[&[u32]]) -> Result<()> {
        let vocab = self.config().vocab_size;
        let max = self.max_seq_length();
        let (pre, post) = self.tokenizer().single_frame();
        let min = (pre.len() + post.len()).max(1);
        for (i, s) in ids.iter().enumerate() {
            if s.len() < min || s.len() > max {
                return Err(Error::invalid_argument(format!(
                    "input {i} has {} token ids; expected {min}..={} (the special tokens around a text included)",
                    s.len(),
                    max
                )));
            }
            if let Some((j, id)) = s.iter().enumerate().find(|(_, &id)| id as usize >= vocab) {
                return Err(Error::invalid_argument(format!(
                    "input {i}: token id {id} at position {j} is not below the vocabulary size {vocab}"
                )));
            }
        }
        Ok(())
    }

    /// Checks the batch size and output length; returns `n x dim`.
    fn check_batch(&self, n: usize, out_len: usize) -> Result<usize> {
        check_sizes(n, out_len, self.dim())
    }

    /// The pass every call runs unless its [`crate::CallOptions`] say otherwise.
    fn pass(&self) -> DenseOpts {
        DenseOpts {
            pool_from: self.pool_from,
            normalize: self.normalize,
            dim: self.dim,
            tokens: false,
            matryoshka: self.matryoshka,
        }
    }

    /// Runs validated sequences through the runtime and the dense head
    /// under `pass` into `out` (`pass.rows(seqs) x pass.dim` floats),
    /// reporting to `track`. Every vector is bit-identical to the one its
    /// text gets alone.
    fn run(
        &self,
        seqs: Seqs<'_>,
        pass: DenseOpts,
        out: &mut [f32],
        track: &mut Track<'_>,
    ) -> Result<()> {
        if !pass.tokens {
            self.heads.check(&[OutputKind::Dense])?;
        }
        let mut at = 0;
        self.rt.run(
            seqs,
            track,
            |chunk, hidden, _, _| self.heads.dense.vectors(chunk.ids, hidden, pass),
            |_, rows: Vec<f32>| {
                out[at..at + rows.len()].copy_from_slice(&rows);
                at += rows.len();
            },
        )
    }
}

/// The output dimension for [`Options::dimensions`] on a model of `full`
/// dimensions: `k` when it is in `1..=full`, `full` for `None`.
pub(crate) fn check_dimensions(k: Option<usize>, full: usize) -> Result<usize> {
    match k {
        None => Ok(full),
        Some(k) if (1..=full).contains(&k) => Ok(k),
        Some(k) => Err(Error::invalid_argument(format!(
            "dimensions {k} must be in 1..={full} (the model's output dimension)"
        ))),
    }
}

/// The body of every `embed_quantized_into`: embeds groups of texts into f32
/// scratch with `embed` and quantizes each group into `out`.
pub(crate) fn embed_quantized<S: AsRef<str> + Sync>(
    texts: &[S],
    dim: usize,
    precision: OutputPrecision,
    ranges: Option<&OutputRanges>,
    out: &mut [u8],
    mut info: Option<&mut [TextInfo]>,
    mut embed: impl FnMut(&[S], &mut [f32], Option<&mut [TextInfo]>, usize) -> (Result<()>, usize),
) -> Result<()> {
    let row = precision.row_len(dim);
    let need = texts.len().saturating_mul(row);
    if out.len() < need {
        return Err(Error::new(
            ErrorKind::BufferTooSmall,
            format!(
                "output holds {} elements, {} x {row} = {need} are needed",
                out.len(),
                texts.len()
            ),
        ));
    }
    check_info(texts.len(), info.as_deref())?;
    if precision == OutputPrecision::Float32 || (precision.needs_ranges() && ranges.is_none()) {
        // The error, before any work.
        return quantize_embeddings(&[], dim, precision, ranges, &mut []);
    }
    let mut scratch = vec![0.0f32; TEXT_GROUP.min(texts.len()) * dim];
    for (g, (group, dst)) in texts
        .chunks(TEXT_GROUP)
        .zip(out[..need].chunks_mut(TEXT_GROUP * row.max(1)))
        .enumerate()
    {
        let f = &mut scratch[..group.len() * dim];
        let inf = info
            .as_deref_mut()
            .map(|i| &mut i[g * TEXT_GROUP..g * TEXT_GROUP + group.len()]);
        // `embed` returns how many of the group's rows are complete, which
        // matters when it was cancelled: those rows are quantized too.
        let (r, done) = embed(group, f, inf, g * TEXT_GROUP);
        if let Err(e) = r {
            if e.kind() == ErrorKind::Cancelled {
                let k = done.min(group.len());
                quantize_embeddings(&f[..k * dim], dim, precision, ranges, &mut dst[..k * row])?;
            }
            return Err(e);
        }
        quantize_embeddings(f, dim, precision, ranges, dst)?;
    }
    Ok(())
}

/// The prompt [`Options`] ask for on a model with metadata `md` (`prompts`: a
/// JSON object of name -> prompt; `default_prompt_name`); empty for none.
pub(crate) fn resolve_prompt(
    md: &std::collections::BTreeMap<String, String>,
    opts: &Options,
) -> Result<String> {
    let prompts = parse_prompts(md)?;
    let names = || {
        if prompts.is_empty() {
            "it stores none".to_string()
        } else {
            let n: Vec<&str> = prompts.keys().map(String::as_str).collect();
            format!("it stores {}", n.join(", "))
        }
    };
    match (&opts.prompt, &opts.prompt_name) {
        (Some(_), Some(_)) => Err(Error::invalid_argument(
            "give a prompt or a prompt name, not both",
        )),
        (Some(p), None) => Ok(p.clone()),
        (None, Some(n)) => prompts.get(n).cloned().ok_or_else(|| {
            Error::invalid_argument(format!(
                "prompt name '{n}' is not one of the model's prompts ({})",
                names()
            ))
        }),
        (None, None) => match md.get("default_prompt_name") {
            Some(d) => prompts.get(d).cloned().ok_or_else(|| {
                Error::model(format!(
                    "metadata 'default_prompt_name' '{d}' is not one of the prompts ({})",
                    names()
                ))
            }),
            None => Ok(String::new()),
        },
    }
}

/// The model's stored prompts: metadata `prompts`, a JSON object of name ->
/// prompt (none without it).
pub(crate) fn parse_prompts(
    md: &std::collections::BTreeMap<String, String>,
) -> Result<std::collections::BTreeMap<String, String>> {
    match md.get("prompts") {
        Some(j) => serde_json::from_str(j).map_err(|e| {
            Error::model(format!(
                "metadata 'prompts' is not a JSON object of strings: {e}"
            ))
        }),
        None => Ok(Default::default()),
    }
}

/// Checks a batch request: at most [`MAX_BATCH`] inputs and an output of at
/// least `n x dim` floats. Returns `n x dim`.
fn check_sizes(n: usize, out_len: usize, dim: usize) -> Result<usize> {
    if n > MAX_BATCH {
        return Err(Error::new(
            ErrorKind::LimitExceeded,
            format!("batch of {n} inputs exceeds the limit of {MAX_BATCH}"),
        ));
    }
    let need = n * dim;
    if out_len < need {
        return Err(Error::new(
            ErrorKind::BufferTooSmall,
            format!("output buffer holds {out_len} floats, {n} x {dim} = {need} are needed"),
        ));
    }
    Ok(need)
}

/// [`check_sizes`] plus every text within [`MAX_TEXT_BYTES`]; shared by every engine.
pub(crate) fn check_batch<S: AsRef<str>>(texts: &[S], out_len: usize, dim: usize) -> Result<usize> {
    let need = check_sizes(texts.len(), out_len, dim)?;
    for (i, t) in texts.iter().enumerate() {
        let len = t.as_ref().len();
        if len > MAX_TEXT_BYTES {
            return Err(Error::new(
                ErrorKind::LimitExceeded,
                format!("text {i} has {len} bytes, more than the limit of {MAX_TEXT_BYTES}"),
            ));
        }
    }
    Ok(need)
}
