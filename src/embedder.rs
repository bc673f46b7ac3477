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
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use rayon::prelude::*;

use crate::error::{Error, ErrorKind, Result};
use crate::formats::{Backing, ChecksumStatus, FormatKind, ModelFile, ReadHint, ReadOptions};
use crate::kernels::Par;
use crate::limits::MAX_THREADS;
use crate::model::calibrate;
use crate::model::config::ModelConfig;
use crate::model::encoder::{Encoder, Workspace};
use crate::model::head::{Task, CLASSIFIER_POOLING};
use crate::model::outputs::{OutputHeads, OutputKind};
use crate::model::pooling::{Pooling, SentencePooling};
use crate::model::precision::LayerPrecision;
use crate::options::{Options, Precision, ProgressFn};
use crate::quantize::{quantize_embeddings, OutputPrecision, OutputRanges};
use crate::threads::JoinOnDrop;
use crate::tokenizer::Tokenizer;

pub use crate::limits::{MAX_BATCH, MAX_TEXT_BYTES};

mod call;
mod outputs;
pub use call::CallPlan;
pub use outputs::{EncodeRequest, Encoded};

/// Facts about an open model.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelInfo {
    /// `model_name` metadata.
    pub name: String,
    /// Container the model was read from.
    pub format: FormatKind,
    /// Output dimension.
    pub dim: usize,
    /// Encoder layers.
    pub num_layers: usize,
    /// Attention heads.
    pub num_heads: usize,
    /// Hidden size.
    pub hidden_size: usize,
    /// Vocabulary size.
    pub vocab_size: usize,
    /// Effective maximum sequence length (after the option override).
    pub max_seq_length: usize,
    /// Pooling.
    pub pooling: Pooling,
    /// Effective L2 normalization (after the option override).
    pub normalize: bool,
    /// Arithmetic of the dense layers in use (after the option override).
    pub precision: Precision,
}

/// What one text became in an embedding call ([`Embedder::embed_into_ex`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct TextInfo {
    /// Tokens the model saw, `[CLS]` and `[SEP]` included, after truncation
    /// (static word-embedding models: whitespace-separated words).
    pub tokens: usize,
    /// The text had more tokens than `max_seq_length`, and the rest was cut.
    pub truncated: bool,
}

/// Tokens processed together by one worker in one forward pass. A batch is
/// cut into chunks of whole sequences of at most this many tokens (a single
/// sequence longer than this forms its own chunk). 256 rows keep a layer's
/// activations in L2 and run the GEMMs as fast as larger chunks (2048 measured
/// the same speed with 8x the memory).
pub const CHUNK_TOKENS: usize = 256;

/// The most chunks per worker in one wave of a call with a progress callback
/// ([`Embedder::run_waves`]): the wave's closing barrier then costs a quarter
/// of what one chunk per worker costs, and a cancel waits for at most four
/// chunks.
const WAVE_CHUNKS: usize = 4;

/// The fewest waves a call with a progress callback is cut into when it has
/// enough chunks (so that progress is still reported as it goes).
const MIN_WAVES: usize = 4;

/// Texts tokenized ahead of the forward pass in [`Embedder::embed_into`]; ids of
/// at most this many texts are held at once.
const TEXT_GROUP: usize = 1024;

/// A first call with at least this many tokens starts packing the weights in
/// the background before it runs (a smaller one, after).
const PREPACK_FIRST_TOKENS: usize = 8 * CHUNK_TOKENS;

/// An open model: immutable, `Send + Sync`, shareable across threads.
///
/// # Memory per call
///
/// Each worker thread processes chunks of at most [`CHUNK_TOKENS`] tokens
/// (or one sequence, if longer) and owns one workspace of
/// `tokens x (5 x hidden + intermediate)` floats plus `heads x len²` attention
/// scores (one head's when the worker runs serially). For all-MiniLM-L6-v2 that
/// is about 3.5 MiB per worker (a single 512-token text: 7 MiB plus 12 MiB of
/// per-head scores when its heads are split across threads); each thread that
/// runs GEMMs also keeps a 48 KiB packing buffer. Workspaces are kept between
/// calls and reused, so memory is bounded by `threads x workspace`,
/// independent of the batch size.
/// [`Embedder::embed_into`] additionally holds the token ids of at most 1024
/// texts at a time.
///
/// # Memory per model
///
/// The file is memory-mapped; with [`Options::prepack_weights`] (the default)
/// a background thread started by the first call copies the encoder's weight
/// matrices into the kernels' panel layout (42 MB for all-MiniLM-L6-v2) and
/// then releases the mapped pages of the originals and of the word-embedding
/// table from resident memory (rows come back as texts use them).
pub struct Embedder {
    cfg: ModelConfig,
    format: FormatKind,
    model: Encoder,
    max_seq_length: usize,
    normalize: bool,
    precision: Precision,
    /// Output dimension: the model's, or the [`Options::dimensions`] cut.
    dim: usize,
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
    /// [`Options::progress`].
    progress: Option<ProgressFn>,
    threads: usize,
    pool: Option<rayon::ThreadPool>,
    workspaces: Mutex<Vec<Workspace>>,
    tokenizer: Tokenizer,
    /// The outputs beyond the dense vector and their heads.
    heads: OutputHeads,
    /// The background packing of the weights is still to be started.
    prepack_pending: AtomicBool,
    /// The thread mapping the encoder's pages in after open, if any; held only
    /// so that dropping the model joins it.
    _prefault: JoinOnDrop,
}

impl std::fmt::Debug for Embedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Embedder")
            .field("model", &self.cfg.model_name)
            .field("threads", &self.threads)
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
        Self::from_model_file(open_model_file(path.as_ref(), opts)?, opts)
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
            return Err(crate::reranker::not_an_embedder());
        }
        Self::build(file, opts, false)
    }

    /// The encoder of a cross-encoder file for [`crate::Reranker`]: first-token
    /// (`[CLS]`) pooling, no normalization, whatever the metadata says.
    pub(crate) fn for_classifier(file: ModelFile, opts: &Options) -> Result<Embedder> {
        Self::build(file, opts, true)
    }

    fn build(mut file: ModelFile, opts: &Options, classifier: bool) -> Result<Embedder> {
        let mut cfg = ModelConfig::from_metadata(&file.metadata)?;
        if classifier {
            // The head reads the first token's state, or (ModernBERT's
            // `classifier_pooling` "mean") the mean of all tokens' states.
            cfg.pooling = match file.metadata.get(CLASSIFIER_POOLING).map(|s| s.trim()) {
                None | Some("cls") => Pooling::Cls,
                Some("mean") => Pooling::Mean,
                Some("last") => Pooling::LastToken,
                Some(v) => {
                    return Err(Error::model(format!(
                        "metadata '{CLASSIFIER_POOLING}' = '{v}' is not 'cls', 'mean' or 'last'"
                    )))
                }
            };
            cfg.normalize = false;
        }
        let max_seq_length = match opts.max_seq_length {
            None => cfg.max_seq_length,
            Some(n) if (2..=cfg.max_tokens()).contains(&n) => n,
            Some(n) => {
                return Err(Error::invalid_argument(format!(
                    "max_seq_length {n} must be in 2..={} (the position table)",
                    cfg.max_tokens()
                )))
            }
        };
        // The encoder is built for inputs of up to this many tokens (rotary
        // tables); int8 calibration cuts its texts at the file's length (or
        // this one, if shorter, for a rotary model).
        let calib_len = if cfg.family()?.rope {
            cfg.max_seq_length.min(max_seq_length)
        } else {
            cfg.max_seq_length
        };
        cfg.max_seq_length = max_seq_length;
        let normalize = opts.normalize.unwrap_or(cfg.normalize);
        let threads = match opts.threads {
            None | Some(0) => std::thread::available_parallelism().map_or(1, |n| n.get()),
            Some(n) if n <= MAX_THREADS => n,
            Some(n) => {
                return Err(Error::invalid_argument(format!(
                    "threads {n} exceeds the maximum of {MAX_THREADS}"
                )))
            }
        };
        let vocab = file
            .vocab
            .take()
            .ok_or_else(|| Error::model("model file has no vocabulary"))?;
        if vocab.len() != cfg.vocab_size {
            return Err(Error::model(format!(
                "vocabulary has {} tokens but metadata 'vocab_size' is {}",
                vocab.len(),
                cfg.vocab_size
            )));
        }
        let format = file.format;
        let file = Arc::new(file);
        let precision = opts.precision.unwrap_or(if file_is_int8(&file) {
            Precision::Int8
        } else {
            Precision::F32
        });
        let pool = if threads > 1 {
            Some(
                rayon::ThreadPoolBuilder::new()
                    .num_threads(threads)
                    .thread_name(|i| format!("embedder-{i}"))
                    .build()
                    .map_err(|e| {
                        Error::new(ErrorKind::Io, format!("cannot start worker threads: {e}"))
                    })?,
            )
        } else {
            None
        };
        let tokenizer = crate::model::tokenizer::tokenizer_of(&file, &cfg, vocab)?;
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
        let plan = LayerPrecision::for_family(precision, cfg.family()?);
        // int8 without smoothing factors stored in the file: measure the
        // activations on the built-in calibration texts with the f32 model
        // (what `embd convert --dtype int8` stores, so both give the same
        // vectors).
        let calib = if plan.any_int8() && !has_stored_smoothing(&file) {
            let f32_model =
                Encoder::load(&file, &cfg, LayerPrecision::uniform(Precision::F32), None)?;
            let texts = calibrate::builtin_texts();
            let run = || calibrate::calibrate_texts(&f32_model, &tokenizer, calib_len, &texts);
            Some(match &pool {
                Some(p) => p.install(run),
                None => run(),
            }?)
        } else {
            None
        };
        let load = || Encoder::load(&file, &cfg, plan, calib.as_ref());
        let model = match &pool {
            Some(p) => p.install(load),
            None => load(),
        }?;
        let dim = check_dimensions(opts.dimensions, model.output_dim())?;
        let output_ranges = crate::quantize::resolve_ranges(
            &file,
            opts.output_ranges.as_ref(),
            model.output_dim(),
            dim,
        )?;
        let sp = tokenizer.vocab().specials();
        let heads =
            OutputHeads::load(&file, &cfg, precision, vec![sp.cls, sp.sep, sp.pad, sp.unk])?;
        let prefault = JoinOnDrop::default();
        prefault_encoder(&file, &prefault);
        Ok(Embedder {
            cfg,
            format,
            model,
            max_seq_length,
            normalize,
            precision,
            dim,
            output_ranges,
            prompt,
            prompts: parse_prompts(&file.metadata)?,
            include_prompt,
            pool_from,
            window_overlap: opts.window_overlap,
            progress: opts.progress.clone(),
            threads,
            pool,
            workspaces: Mutex::new(Vec::new()),
            tokenizer,
            heads,
            prepack_pending: AtomicBool::new(opts.prepack_weights),
            _prefault: prefault,
        })
    }

    /// Output dimension: the model's hidden size, or `K` of
    /// [`Options::dimensions`].
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// Effective maximum sequence length (tokens incl. `[CLS]`/`[SEP]`).
    pub fn max_seq_length(&self) -> usize {
        self.max_seq_length
    }

    /// The model's configuration (as read from the file).
    pub fn config(&self) -> &ModelConfig {
        &self.cfg
    }

    /// Facts about the model.
    pub fn info(&self) -> ModelInfo {
        ModelInfo {
            name: self.cfg.model_name.clone(),
            format: self.format,
            dim: self.dim(),
            num_layers: self.cfg.num_layers,
            num_heads: self.cfg.num_heads,
            hidden_size: self.cfg.hidden_size,
            vocab_size: self.cfg.vocab_size,
            max_seq_length: self.max_seq_length,
            pooling: self.cfg.pooling,
            normalize: self.normalize,
            precision: self.precision,
        }
    }

    /// Packs the layers' weight matrices for the kernels now, on the calling
    /// thread, if that is not done yet (see [`Options::prepack_weights`], which
    /// does it in the background from the first call on). Results do not change.
    pub fn prepack(&self) {
        self.model.prepack(false);
    }

    /// Layers whose weights are packed so far, and the bytes those copies hold.
    pub fn packed_layers(&self) -> (usize, usize) {
        self.model.packed_layers()
    }

    /// Arithmetic of the dense layers in use.
    pub fn precision(&self) -> Precision {
        self.precision
    }

    /// Worker threads used by one call.
    pub fn threads(&self) -> usize {
        self.threads
    }

    /// The model's tokenizer (no prompt applied; see [`Embedder::tokenize`]).
    pub fn tokenizer(&self) -> &Tokenizer {
        &self.tokenizer
    }

    /// Token ids as the model sees them: `[CLS]`, text ids truncated to
    /// `max_seq_length - 2`, `[SEP]`.
    /// With a prompt ([`Options::prompt`]), of the prompt followed by the text.
    pub fn tokenize(&self, text: &str) -> Vec<u32> {
        self.tokenizer
            .encode(&self.prompted(text), Some(self.max_seq_length))
    }

    /// Token ids without truncation (still with `[CLS]`/`[SEP]` and the prompt).
    pub fn tokenize_full(&self, text: &str) -> Vec<u32> {
        self.tokenizer.encode(&self.prompted(text), None)
    }

    /// `tokenize(text).len()`, without building the vector when possible.
    pub fn count_tokens(&self, text: &str) -> usize {
        self.tokenizer
            .count_tokens(&self.prompted(text), Some(self.max_seq_length))
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
        let mut track = Track::new(self.progress.as_ref(), texts.len());
        self.embed_into_tracked(texts, out, info, &mut track)
    }

    /// [`Embedder::embed_into_ex`] reporting to `track` (whose `base` is the
    /// index of `texts[0]` in the whole call).
    pub(crate) fn embed_into_tracked<S: AsRef<str> + Sync>(
        &self,
        texts: &[S],
        out: &mut [f32],
        mut info: Option<&mut [TextInfo]>,
        track: &mut Track<'_>,
    ) -> Result<()> {
        let need = check_batch(texts, out.len(), self.dim())?;
        check_info(texts.len(), info.as_deref())?;
        if let Some(overlap) = self.window_overlap {
            return self.embed_windows(texts, overlap, &mut out[..need], info, track);
        }
        let call_base = track.base;
        let dim = self.dim();
        let mut ids: Vec<Vec<u32>> = Vec::new();
        let mut flagged: Vec<(Vec<u32>, bool)> = Vec::new();
        for (g, (group, dst)) in texts
            .chunks(TEXT_GROUP)
            .zip(out[..need].chunks_mut(TEXT_GROUP * dim.max(1)))
            .enumerate()
        {
            ids.clear();
            if let Some(info) = info.as_deref_mut() {
                // Token counts asked for: tokenize one id further, to tell a
                // text of exactly max_seq_length tokens from a longer one.
                let tokenize = |t: &S| {
                    let mut v = Vec::new();
                    let cut = self.tokenizer.encode_into_checked(
                        &self.prompted(t.as_ref()),
                        self.max_seq_length,
                        &mut v,
                    );
                    (v, cut)
                };
                flagged.clear();
                match &self.pool {
                    Some(pool) if group.len() > 1 => pool.install(|| {
                        group
                            .par_iter()
                            .map(tokenize)
                            .collect_into_vec(&mut flagged)
                    }),
                    _ => flagged.extend(group.iter().map(tokenize)),
                }
                let base = g * TEXT_GROUP;
                for (k, (v, cut)) in flagged.drain(..).enumerate() {
                    info[base + k] = TextInfo {
                        tokens: v.len(),
                        truncated: cut,
                    };
                    ids.push(v);
                }
            } else {
                let tokenize = |t: &S| self.tokenize(t.as_ref());
                match &self.pool {
                    Some(pool) if group.len() > 1 => {
                        pool.install(|| group.par_iter().map(tokenize).collect_into_vec(&mut ids))
                    }
                    _ => ids.extend(group.iter().map(tokenize)),
                }
            }
            let refs: Vec<&[u32]> = ids.iter().map(Vec::as_slice).collect();
            track.base = call_base + g * TEXT_GROUP;
            self.run(Seqs::untyped(&refs), self.pass(), dst, track)?;
        }
        Ok(())
    }

    /// [`Options::window_overlap`]: each text's windows (one for a text that
    /// fits), embedded together, then averaged per text weighted by their
    /// token counts and normalized when the model normalizes.
    fn embed_windows<S: AsRef<str> + Sync>(
        &self,
        texts: &[S],
        overlap: usize,
        out: &mut [f32],
        mut info: Option<&mut [TextInfo]>,
        track: &mut Track<'_>,
    ) -> Result<()> {
        let dim = self.dim();
        let (pre, post) = self.tokenizer.single_frame();
        let call_base = track.base;
        // With a progress callback, smaller groups: it is called after each.
        let group_len = if track.cb.is_some() { 16 } else { TEXT_GROUP };
        let body = self.max_seq_length - pre.len() - post.len();
        let stride = body - overlap;
        let mut full: Vec<Vec<u32>> = Vec::new();
        for (g, (group, dst)) in texts
            .chunks(group_len)
            .zip(out.chunks_mut(group_len * dim.max(1)))
            .enumerate()
        {
            full.clear();
            let tokenize = |t: &S| self.tokenize_full(t.as_ref());
            match &self.pool {
                Some(pool) if group.len() > 1 => {
                    pool.install(|| group.par_iter().map(tokenize).collect_into_vec(&mut full))
                }
                _ => full.extend(group.iter().map(tokenize)),
            }
            // Windows of every text in order; `owner[w]` is window w's text.
            let mut windows: Vec<Vec<u32>> = Vec::new();
            let mut owner: Vec<usize> = Vec::new();
            for (k, ids) in full.iter().enumerate() {
                let raw = &ids[pre.len()..ids.len() - post.len()];
                let mut start = 0;
                loop {
                    let end = (start + body).min(raw.len());
                    let mut w = Vec::with_capacity(end - start + pre.len() + post.len());
                    w.extend_from_slice(&pre);
                    w.extend_from_slice(&raw[start..end]);
                    w.extend_from_slice(&post);
                    windows.push(w);
                    owner.push(k);
                    if end == raw.len() {
                        break;
                    }
                    start += stride;
                }
                if let Some(i) = info.as_deref_mut() {
                    i[g * group_len + k] = TextInfo {
                        tokens: ids.len(),
                        truncated: false,
                    };
                }
            }
            let refs: Vec<&[u32]> = windows.iter().map(Vec::as_slice).collect();
            let mut vecs = vec![0.0f32; refs.len() * dim];
            let seqs = Seqs::untyped(&refs);
            self.run(seqs, self.pass(), &mut vecs, &mut Track::new(None, 0))?;
            combine_windows(&vecs, dim, &refs, &owner, self.normalize, dst);
            track.report(call_base + g * group_len + group.len())?;
        }
        Ok(())
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
        let mut track = Track::new(self.progress.as_ref(), texts.len());
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
        let mut track = Track::new(self.progress.as_ref(), ids.len());
        let pass = Pass {
            pool_from: 0,
            ..self.pass()
        };
        self.run(Seqs::untyped(ids), pass, &mut out[..need], &mut track)
    }

    /// Checks token id inputs: each within the frame's length (the special
    /// tokens around a text, at least 1) and `max_seq_length`, every id below
    /// the vocabulary size.
    pub(crate) fn check_id_inputs(&self, ids: &[&[u32]]) -> Result<()> {
        let vocab = self.cfg.vocab_size;
        let (pre, post) = self.tokenizer.single_frame();
        let min = (pre.len() + post.len()).max(1);
        for (i, s) in ids.iter().enumerate() {
            if s.len() < min || s.len() > self.max_seq_length {
                return Err(Error::invalid_argument(format!(
                    "input {i} has {} token ids; expected {min}..={} (the special tokens around a text included)",
                    s.len(),
                    self.max_seq_length
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

    /// [`Options::progress`].
    pub(crate) fn progress(&self) -> Option<&ProgressFn> {
        self.progress.as_ref()
    }

    /// `f(i)` for every `i` of `range`, in order, on the workers when there are
    /// several (tokenizing a group of inputs).
    pub(crate) fn map_parallel<T: Send>(
        &self,
        range: std::ops::Range<usize>,
        f: impl Fn(usize) -> T + Sync + Send,
    ) -> Vec<T> {
        match &self.pool {
            Some(pool) if range.len() > 1 => {
                pool.install(|| range.into_par_iter().map(f).collect())
            }
            _ => range.map(f).collect(),
        }
    }

    /// Runs token sequences (each with its token types when given) through
    /// the batching of every call: pooled, normalized as the model says, into
    /// `out` (`n x dim`), reporting to `track`.
    pub(crate) fn run_seqs(
        &self,
        seqs: Seqs<'_>,
        out: &mut [f32],
        track: &mut Track<'_>,
    ) -> Result<()> {
        let pass = Pass {
            pool_from: 0,
            ..self.pass()
        };
        self.run(seqs, pass, out, track)
    }

    fn take_workspace(&self) -> Workspace {
        self.workspaces
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .pop()
            .unwrap_or_default()
    }

    fn put_workspace(&self, ws: Workspace) {
        self.workspaces
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(ws);
    }

    /// The pass every call runs unless its [`crate::CallOptions`] say otherwise.
    fn pass(&self) -> Pass {
        Pass {
            pool_from: self.pool_from,
            normalize: self.normalize,
            dim: self.dim,
            tokens: false,
        }
    }

    fn forward_chunk(&self, seqs: Seqs<'_>, pass: Pass, par: Par, out: &mut [f32]) -> Result<()> {
        let mut ws = self.take_workspace();
        let hidden = self.model.hidden_size();
        let pooled_dim = self.model.output_dim();
        let norm = pass.normalize;
        if pass.tokens {
            let r = if pass.dim == hidden && !norm {
                self.model
                    .forward_tokens(seqs.ids, seqs.types, &mut ws, par, out)
            } else {
                let mut full = vec![0.0f32; pass.rows(seqs.ids) * hidden];
                self.model
                    .forward_tokens(seqs.ids, seqs.types, &mut ws, par, &mut full)
                    .map(|()| cut_rows(&full, hidden, out, pass.dim, norm))
            };
            self.put_workspace(ws);
            return r;
        }
        let pooling = SentencePooling {
            skip: pass.pool_from,
            ..SentencePooling::new(self.cfg.pooling, norm)
        };
        let mut forward = |o: &mut [f32]| match seqs.types {
            None => self.model.forward(seqs.ids, &mut ws, par, pooling, o),
            Some(t) => self
                .model
                .forward_typed(seqs.ids, t, &mut ws, par, pooling, o),
        };
        let r = if pass.dim == pooled_dim {
            forward(out)
        } else {
            // Matryoshka: the full vectors (normalized as the model says), then
            // their first `dim` components, normalized again.
            let mut full = vec![0.0f32; seqs.len() * pooled_dim];
            forward(&mut full).map(|()| cut_rows(&full, pooled_dim, out, pass.dim, norm))
        };
        self.put_workspace(ws);
        r
    }

    /// Runs validated inputs: cuts them into chunks of whole sequences and
    /// spreads the chunks over the workers; when there are fewer chunks than
    /// workers (one long text), each chunk's kernels are split instead. Either
    /// way every vector is bit-identical to the one the text gets alone.
    fn run(
        &self,
        seqs: Seqs<'_>,
        pass: Pass,
        out: &mut [f32],
        track: &mut Track<'_>,
    ) -> Result<()> {
        if !pass.tokens {
            self.heads.check(&[OutputKind::Dense])?;
        }
        let total: usize = seqs.ids.iter().map(|s| s.len()).sum();
        self.with_packing(total, || self.run_chunks(seqs, total, pass, out, track))
    }

    /// Runs `f`, a call over `total` tokens, starting the background packing
    /// of the weights with the first call, so that it never slows down
    /// opening: before a large call (which then profits from it), after a
    /// small one (which would only compete with it for memory bandwidth).
    fn with_packing<R>(&self, total: usize, f: impl FnOnce() -> R) -> R {
        let start_packing = self.prepack_pending.load(Ordering::Relaxed)
            && self.prepack_pending.swap(false, Ordering::Relaxed);
        if start_packing && total >= PREPACK_FIRST_TOKENS {
            self.model.prepack(true);
        }
        let r = f();
        if start_packing && total < PREPACK_FIRST_TOKENS {
            self.model.prepack(true);
        }
        r
    }

    fn run_chunks(
        &self,
        seqs: Seqs<'_>,
        total: usize,
        pass: Pass,
        out: &mut [f32],
        track: &mut Track<'_>,
    ) -> Result<()> {
        let dim = pass.dim;
        let mut chunks: Vec<(Seqs<'_>, &mut [f32])> = Vec::new();
        let mut rest_out = out;
        let mut start = 0;
        for end in chunk_ends(seqs.ids, total, self.threads) {
            let rows = pass.rows(&seqs.ids[start..end]);
            let (dst, tail) = std::mem::take(&mut rest_out).split_at_mut(rows * dim);
            rest_out = tail;
            chunks.push((seqs.slice(start..end), dst));
            start = end;
        }
        if track.cb.is_some() {
            return self.run_waves(chunks, pass, track);
        }
        match &self.pool {
            None => chunks
                .into_iter()
                .try_for_each(|(s, o)| self.forward_chunk(s, pass, Par::Serial, o)),
            Some(pool) if chunks.len() >= self.threads => pool.install(|| {
                chunks
                    .into_par_iter()
                    .try_for_each(|(s, o)| self.forward_chunk(s, pass, Par::Serial, o))
            }),
            Some(pool) => pool.install(|| {
                chunks.into_iter().try_for_each(|(s, o)| {
                    // Even a short text's products are split: each core then
                    // streams half of the weights, the bound for short inputs.
                    let par = Par::Threads(self.threads);
                    self.forward_chunk(s, pass, par, o)
                })
            }),
        }
    }
}

impl Embedder {
    /// [`Embedder::run_chunks`] with a progress callback: the chunks run in
    /// waves of one to [`WAVE_CHUNKS`] per worker (each chunk about
    /// [`CHUNK_TOKENS`] tokens, a few ms), and after each wave the callback
    /// hears, on the calling thread, how many rows are complete (a cancel
    /// stops before the next wave). The vectors are the same as without.
    fn run_waves(
        &self,
        chunks: Vec<(Seqs<'_>, &mut [f32])>,
        pass: Pass,
        track: &mut Track<'_>,
    ) -> Result<()> {
        let split = chunks.len() < self.threads;
        // A wave ends in a barrier: its threads wait for its slowest chunk
        // (chunks differ by up to half a sequence of tokens). Large calls take
        // up to WAVE_CHUNKS chunks per thread into a wave, shared out by work
        // stealing, which leaves a fraction of that wait; a call still reports
        // at least MIN_WAVES times when it has the chunks for it.
        let per_thread = (chunks.len() / (self.threads * MIN_WAVES)).clamp(1, WAVE_CHUNKS);
        let wave_len = if split { 1 } else { self.threads * per_thread };
        let mut done = 0;
        let mut it = chunks.into_iter().peekable();
        while it.peek().is_some() {
            let wave: Vec<(Seqs<'_>, &mut [f32])> = it.by_ref().take(wave_len).collect();
            let seqs: usize = wave.iter().map(|(s, _)| s.len()).sum();
            match &self.pool {
                None => wave
                    .into_iter()
                    .try_for_each(|(s, o)| self.forward_chunk(s, pass, Par::Serial, o))?,
                Some(pool) if split => pool.install(|| {
                    wave.into_iter().try_for_each(|(s, o)| {
                        self.forward_chunk(s, pass, Par::Threads(self.threads), o)
                    })
                })?,
                Some(pool) => pool.install(|| {
                    wave.into_par_iter()
                        .try_for_each(|(s, o)| self.forward_chunk(s, pass, Par::Serial, o))
                })?,
            }
            done += seqs;
            track.report(track.base + done)?;
        }
        Ok(())
    }
}

/// How one forward pass pools and shapes its vectors: the open-time settings
/// ([`Embedder::pass`]) or a call's ([`CallPlan`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Pass {
    /// Tokens at the start of each sequence left out of pooling.
    pool_from: usize,
    /// L2-normalize the pooled (and cut) vectors.
    normalize: bool,
    /// Output dimension (below the hidden size: Matryoshka cut).
    dim: usize,
    /// Un-pooled: one vector per token (the last hidden states, cut to `dim`,
    /// normalized when `normalize`) instead of one per sequence.
    tokens: bool,
}

impl Pass {
    /// Output vectors of `seqs` under this pass: one per sequence, or one
    /// per token.
    fn rows(&self, seqs: &[&[u32]]) -> usize {
        if self.tokens {
            seqs.iter().map(|s| s.len()).sum()
        } else {
            seqs.len()
        }
    }
}

/// The sequences of a forward pass: ids, and per-token token types when the
/// model reads them (cross-encoder pairs; `None`: type 0 everywhere).
#[derive(Clone, Copy)]
pub(crate) struct Seqs<'a> {
    ids: &'a [&'a [u32]],
    types: Option<&'a [&'a [u32]]>,
}

impl<'a> Seqs<'a> {
    /// Sequences of token type 0.
    pub(crate) fn untyped(ids: &'a [&'a [u32]]) -> Self {
        Seqs { ids, types: None }
    }

    /// Sequences with a token type per token (`types[i]` as long as `ids[i]`).
    pub(crate) fn typed(ids: &'a [&'a [u32]], types: &'a [&'a [u32]]) -> Self {
        Seqs {
            ids,
            types: Some(types),
        }
    }

    fn len(&self) -> usize {
        self.ids.len()
    }

    fn slice(&self, r: std::ops::Range<usize>) -> Self {
        Seqs {
            ids: &self.ids[r.clone()],
            types: self.types.map(|t| &t[r]),
        }
    }
}

/// Progress reporting of one embedding call to [`Options::progress`].
pub(crate) struct Track<'a> {
    /// The callback; `None`: nothing to report.
    pub(crate) cb: Option<&'a ProgressFn>,
    /// Index in the call of the first text of the sequences being run.
    pub(crate) base: usize,
    /// Texts in the call.
    total: usize,
    /// Rows of the call complete at the last report.
    pub(crate) done: usize,
}

impl<'a> Track<'a> {
    pub(crate) fn new(cb: Option<&'a ProgressFn>, total: usize) -> Self {
        Track {
            cb,
            base: 0,
            total,
            done: 0,
        }
    }

    /// Rows `0..done` are complete: tells the callback; its `Break` becomes
    /// [`ErrorKind::Cancelled`].
    pub(crate) fn report(&mut self, done: usize) -> Result<()> {
        self.done = done;
        match self.cb {
            Some(cb) if cb.call(done, self.total).is_break() => Err(Error::new(
                ErrorKind::Cancelled,
                format!(
                    "cancelled by the progress callback after {done} of {} texts",
                    self.total
                ),
            )),
            _ => Ok(()),
        }
    }
}

/// Where the chunks of a batch end (exclusive sequence indices, increasing,
/// the last `seqs.len()`). The batch is cut into a multiple of `threads`
/// chunks of about [`CHUNK_TOKENS`] tokens, each cut at the sequence boundary
/// nearest to its share of the tokens, so that the workers get equal work
/// (greedy chunks of at most 256 tokens left a 790-token batch as
/// 256+256+256+22: 77% of two workers).
fn chunk_ends(seqs: &[&[u32]], total: usize, threads: usize) -> Vec<usize> {
    if seqs.is_empty() {
        return Vec::new();
    }
    let threads = threads.max(1);
    let n = threads * total.div_ceil(threads * CHUNK_TOKENS).max(1);
    let mut ends = Vec::with_capacity(n);
    let (mut done, mut i) = (0usize, 0usize);
    for k in 1..n {
        let goal = total * k / n;
        // Take sequences while that brings the count nearer to the goal.
        while i < seqs.len() && done + seqs[i].len() <= goal + seqs[i].len() / 2 {
            done += seqs[i].len();
            i += 1;
        }
        if ends.last().is_none_or(|&e| e < i) && i > 0 {
            ends.push(i);
        }
    }
    if ends.last() != Some(&seqs.len()) {
        ends.push(seqs.len());
    }
    ends
}

/// The encoder's tensors (`encoder.` names): what the first embedding reads
/// right after opening (the word-embedding table is read a few rows at a time).
fn is_encoder_tensor(name: &str) -> bool {
    name.starts_with(crate::model::arch::ENCODER_PREFIX)
}

/// Opens and parses the model file at `path` the way every runtime opens one
/// ([`Embedder`], [`Engine`](crate::Engine), [`Reranker`](crate::Reranker)):
/// checksums as `opts` asks, the encoder's tensors read first ([`READ_HINT`]).
pub(crate) fn open_model_file(path: &Path, opts: &Options) -> Result<ModelFile> {
    ModelFile::open_hinted(
        path,
        ReadOptions {
            verify_checksums: opts.verify_checksums,
        },
        &READ_HINT,
    )
}

/// What an encoder reads first: the readers that check data CRCs check the
/// encoder's tensors last, so that a first embedding right after opening finds
/// them in cache.
pub(crate) const READ_HINT: ReadHint = ReadHint {
    read_first: Some(is_encoder_tensor),
};

/// Maps the encoder weights of a memory-mapped file in on a short-lived
/// background thread (in `slot`), so that the first embedding does not stop
/// on a page fault per 64 KiB of weights (about 4 ms for all-MiniLM-L6-v2 with
/// the file in the page cache). Skipped after a CRC check at open, which
/// mapped every page already. The word-embedding table is left alone: a text
/// touches only its tokens' rows.
fn prefault_encoder(file: &Arc<ModelFile>, slot: &JoinOnDrop) {
    // After a CRC check at open every page is mapped already; walking them
    // again would only take CPU time from the first call.
    let verified = file.report.checksums == ChecksumStatus::Verified;
    if verified || !matches!(**file.backing(), Backing::Mmap(_)) {
        return;
    }
    let f = Arc::clone(file);
    // Best effort: without the thread, the first call takes the faults itself.
    slot.spawn_if_idle("embedder-prefault", move || {
        for t in f.tensors.iter().filter(|t| is_encoder_tensor(&t.name)) {
            if let Some(r) = f.tensor_file_range(t) {
                f.populate_pages(r);
            }
        }
    });
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

/// Copies the first `k` components of each `full_dim`-wide row of `full` into
/// the `k`-wide rows of `out`, L2-normalizing each cut row when `normalize`.
pub(crate) fn cut_rows(full: &[f32], full_dim: usize, out: &mut [f32], k: usize, normalize: bool) {
    for (src, dst) in full.chunks_exact(full_dim).zip(out.chunks_exact_mut(k)) {
        dst.copy_from_slice(&src[..k]);
        if normalize {
            crate::vector::l2_normalize(dst);
        }
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

/// Checks that `info`, when given, has room for `n` texts.
pub(crate) fn check_info(n: usize, info: Option<&[TextInfo]>) -> Result<()> {
    match info {
        Some(i) if i.len() < n => Err(Error::new(
            ErrorKind::BufferTooSmall,
            format!("info holds {} entries, {n} texts need one each", i.len()),
        )),
        _ => Ok(()),
    }
}

/// True when the file stores smoothing factors for its int8 weights.
fn has_stored_smoothing(file: &ModelFile) -> bool {
    file.tensors
        .iter()
        .any(|t| t.name.ends_with(".weight_smooth"))
}

/// True for files converted with `--dtype int8` (metadata `quantization`).
fn file_is_int8(file: &ModelFile) -> bool {
    file.metadata
        .get("quantization")
        .is_some_and(|q| q.trim() == "int8_per_row")
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

#[cfg(test)]
mod tests {
    use super::*;

    fn lens(ends: &[usize], seqs: &[&[u32]]) -> Vec<usize> {
        let mut start = 0;
        ends.iter()
            .map(|&e| {
                let t = seqs[start..e].iter().map(|s| s.len()).sum();
                start = e;
                t
            })
            .collect()
    }

    #[test]
    fn chunks_are_balanced_over_the_workers() {
        // 32 texts of 10..40 tokens (790 in all), as a corpus batch.
        let ids: Vec<Vec<u32>> = (0..32).map(|i| vec![0; 10 + (i * 7) % 31]).collect();
        let seqs: Vec<&[u32]> = ids.iter().map(Vec::as_slice).collect();
        let total: usize = seqs.iter().map(|s| s.len()).sum();
        for threads in [1, 2, 3, 8] {
            let ends = chunk_ends(&seqs, total, threads);
            assert_eq!(ends.last(), Some(&seqs.len()));
            assert!(ends.windows(2).all(|w| w[0] < w[1]), "{ends:?}");
            let l = lens(&ends, &seqs);
            assert_eq!(l.iter().sum::<usize>(), total);
            if threads <= 3 {
                // A multiple of the workers, each within a text (at most 40 tokens)
                // of its share.
                assert_eq!(l.len() % threads, 0, "{threads}: {l:?}");
                let share = total / l.len();
                assert!(
                    l.iter().all(|&c| c.abs_diff(share) <= 40),
                    "{threads}: {l:?}"
                );
            }
            assert!(
                l.iter().all(|&c| c <= CHUNK_TOKENS + 40),
                "{threads}: {l:?}"
            );
        }
        // One long text is one chunk; no texts, no chunks.
        let long = vec![0u32; 1000];
        assert_eq!(chunk_ends(&[long.as_slice()], 1000, 2), vec![1]);
        assert!(chunk_ends(&[], 0, 2).is_empty());
    }
}
