//! The runtime every model face runs on ([`crate::Embedder`],
//! [`crate::Reranker`], the sparse and multi-vector outputs of
//! [`crate::Embedder::encode`]): the opened encoder and its tokenizer, the
//! worker pool, the per-worker workspaces, the cutting of a batch into
//! chunks, progress reports and cancellation, and the background packing
//! of the weights.
//!
//! A face hands [`Runtime::run_groups`] its inputs (how to frame input `i`)
//! and the output stage to apply to each chunk's last hidden states (the
//! heads of [`crate::model::outputs`]: the dense head, token vectors, the
//! sparse and multi-vector heads, the classifier); the runtime frames them
//! in groups on the workers, runs each group's forward pass
//! ([`Runtime::run`]) and hands each chunk's result back in order. Every
//! result is bit-identical whatever the batch and thread count, because each
//! row's arithmetic is independent of the others'. The faces never touch the
//! encoder.

mod open;
mod progress;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use rayon::prelude::*;

use crate::error::{Error, ErrorKind, Result};
use crate::formats::{FormatKind, ModelFile};
use crate::kernels::Par;
use crate::limits::MAX_THREADS;
use crate::model::calibrate;
use crate::model::config::ModelConfig;
use crate::model::encoder::{Encoder, HeadScratch, Seqs, Workspace};
use crate::model::pooling::Pooling;
use crate::model::precision::LayerPrecision;
use crate::model::precision::Precision;
use crate::options::{Options, ProgressFn};
use crate::threads::JoinOnDrop;
use crate::tokenizer::Tokenizer;

pub(crate) use open::open_model_file;
pub(crate) use progress::Track;

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

/// What one text became in an embedding call ([`crate::Embedder::embed_into_ex`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct TextInfo {
    /// Tokens the model saw, `[CLS]` and `[SEP]` included, after truncation
    /// (static word-embedding models: whitespace-separated words).
    pub tokens: usize,
    /// The text had more tokens than `max_seq_length`, and the rest was cut.
    pub truncated: bool,
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

/// Inputs framed (tokenized) ahead of the forward pass by
/// [`Runtime::run_groups`]: the ids of at most this many are held at once.
pub(crate) const GROUP: usize = 1024;

/// One input as the encoder reads it ([`Runtime::run_groups`]).
pub(crate) struct Framed {
    /// Its ids, special tokens included.
    pub(crate) ids: Vec<u32>,
    /// Its token types (a cross-encoder's pair), as long as `ids`.
    pub(crate) types: Option<Vec<u32>>,
    /// How many of its first tokens are attention keys (ColBERT's query
    /// expansion: fewer than `ids.len()`).
    pub(crate) keys: usize,
    /// What the input became (tokens, truncation).
    pub(crate) info: TextInfo,
}

impl Framed {
    /// Ids of token type 0, every token a key.
    pub(crate) fn ids(ids: Vec<u32>, info: TextInfo) -> Framed {
        Framed {
            keys: ids.len(),
            ids,
            types: None,
            info,
        }
    }
}

/// Tokens processed together by one worker in one forward pass. A batch is
/// cut into chunks of whole sequences of at most this many tokens (a single
/// sequence longer than this forms its own chunk). 256 rows keep a layer's
/// activations in L2 and run the GEMMs as fast as larger chunks (2048 measured
/// the same speed with 8x the memory).
pub const CHUNK_TOKENS: usize = 256;

/// The most chunks per worker in one wave of a call with a progress callback
/// ([`Runtime::run`]): the wave's closing barrier then costs a quarter of
/// what one chunk per worker costs, and a cancel waits for at most four
/// chunks.
const WAVE_CHUNKS: usize = 4;

/// The fewest waves a call with a progress callback is cut into when it has
/// enough chunks (so that progress is still reported as it goes).
const MIN_WAVES: usize = 4;

/// A first call with at least this many tokens starts packing the weights in
/// the background before it runs (a smaller one, after).
const PREPACK_FIRST_TOKENS: usize = 8 * CHUNK_TOKENS;

/// An opened encoder with its tokenizer, workers and workspaces.
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
///
/// # Memory per model
///
/// The file is memory-mapped; with [`Options::prepack_weights`] (the default)
/// a background thread started by the first call copies the encoder's weight
/// matrices into the kernels' panel layout (42 MB for all-MiniLM-L6-v2) and
/// then releases the mapped pages of the originals and of the word-embedding
/// table from resident memory (rows come back as texts use them).
pub(crate) struct Runtime {
    /// The file's configuration, `max_seq_length` as opened.
    cfg: ModelConfig,
    format: FormatKind,
    encoder: Encoder,
    tokenizer: Tokenizer,
    precision: Precision,
    progress: Option<ProgressFn>,
    threads: usize,
    pool: Option<rayon::ThreadPool>,
    workspaces: Mutex<Vec<Workspace>>,
    /// The background packing of the weights is still to be started.
    prepack_pending: AtomicBool,
    /// The thread mapping the encoder's pages in after open, if any; held only
    /// so that dropping the runtime joins it.
    _prefault: JoinOnDrop,
}

impl Runtime {
    /// Opens the encoder of `file` as `opts` say (`threads`,
    /// `max_seq_length`, `precision`, `progress`, `prepack_weights`); returns
    /// it with the file, from which a face reads its heads.
    ///
    /// # Errors
    /// Bad metadata or a missing, mistyped or misshapen tensor (named);
    /// [`ErrorKind::InvalidArgument`] for options out of range.
    pub(crate) fn open(mut file: ModelFile, opts: &Options) -> Result<(Runtime, Arc<ModelFile>)> {
        let mut cfg = ModelConfig::from_metadata(&file.metadata)?;
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
        let calib_len = if cfg.family()?.rotary() {
            cfg.max_seq_length.min(max_seq_length)
        } else {
            cfg.max_seq_length
        };
        cfg.max_seq_length = max_seq_length;
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
        let file_precision = open::file_precision(&file);
        let precision = opts.precision.unwrap_or(file_precision);
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
        let plan = LayerPrecision::for_family(precision, cfg.family()?);
        // int8 without smoothing factors stored in the file: measure the
        // activations on the built-in calibration texts with the f32 model
        // (what `embd convert --dtype int8` stores, so both give the same
        // vectors).
        let calib = if plan.any_int8() && !open::has_stored_smoothing(&file) {
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
        let encoder = match &pool {
            Some(p) => p.install(load),
            None => load(),
        }?;
        let prefault = JoinOnDrop::default();
        // Weights converted at open (a precision other than the file's) were
        // read and their mapped pages released already; mapping them in
        // again would only add their size to the resident memory.
        if precision == file_precision {
            open::prefault_encoder(&file, &prefault);
        }
        let rt = Runtime {
            cfg,
            format,
            encoder,
            tokenizer,
            precision,
            progress: opts.progress.clone(),
            threads,
            pool,
            workspaces: Mutex::new(Vec::new()),
            prepack_pending: AtomicBool::new(opts.prepack_weights),
            _prefault: prefault,
        };
        Ok((rt, file))
    }

    /// The model's configuration (`max_seq_length` as opened).
    pub(crate) fn config(&self) -> &ModelConfig {
        &self.cfg
    }

    /// The model's tokenizer.
    pub(crate) fn tokenizer(&self) -> &Tokenizer {
        &self.tokenizer
    }

    /// Tokens per input at most, the specials included.
    pub(crate) fn max_seq_length(&self) -> usize {
        self.cfg.max_seq_length
    }

    /// Arithmetic of the dense layers.
    pub(crate) fn precision(&self) -> Precision {
        self.precision
    }

    /// Worker threads of one call.
    pub(crate) fn threads(&self) -> usize {
        self.threads
    }

    /// [`Options::progress`].
    pub(crate) fn progress(&self) -> Option<&ProgressFn> {
        self.progress.as_ref()
    }

    /// Facts about the model as a face presents it.
    pub(crate) fn info(&self, dim: usize, pooling: Pooling, normalize: bool) -> ModelInfo {
        ModelInfo {
            name: self.cfg.model_name.clone(),
            format: self.format,
            dim,
            num_layers: self.cfg.num_layers,
            num_heads: self.cfg.num_heads,
            hidden_size: self.cfg.hidden_size,
            vocab_size: self.cfg.vocab_size,
            max_seq_length: self.cfg.max_seq_length,
            pooling,
            normalize,
            precision: self.precision,
        }
    }

    /// Packs the layers' weights now, on the calling thread, if not done yet.
    pub(crate) fn prepack(&self) {
        self.encoder.prepack(false);
    }

    /// Layers packed so far, and the bytes those copies hold.
    pub(crate) fn packed_layers(&self) -> (usize, usize) {
        self.encoder.packed_layers()
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

    /// One forward pass over validated `seqs`: cuts them into chunks of whole
    /// sequences and spreads the chunks over the workers (when there are
    /// fewer chunks than workers, one long text, each chunk's kernels are
    /// split instead); `stage` turns each chunk's last hidden states into its
    /// result (on the worker), and `sink(first, result)` takes the results in
    /// order on the calling thread (`first`: the chunk's first sequence in
    /// `seqs`). With a progress callback in `track`, the chunks run in waves
    /// of one to [`WAVE_CHUNKS`] per worker (each chunk about [`CHUNK_TOKENS`]
    /// tokens, a few ms); after each wave its results are sunk and the
    /// callback hears how many sequences are complete (a cancel stops before
    /// the next wave). Results are the same either way.
    ///
    /// # Errors
    /// [`ErrorKind::Cancelled`] from the callback; internal errors of the
    /// encoder.
    pub(crate) fn run<R: Send>(
        &self,
        seqs: Seqs<'_>,
        track: &mut Track<'_>,
        stage: impl Fn(Seqs<'_>, &[f32], HeadScratch<'_>, Par) -> R + Sync,
        mut sink: impl FnMut(usize, R),
    ) -> Result<()> {
        let total = seqs.tokens();
        self.with_packing(total, || {
            let mut chunks = Vec::new();
            let mut start = 0;
            for end in chunk_ends(seqs.ids, total, self.threads) {
                chunks.push(start..end);
                start = end;
            }
            let split = chunks.len() < self.threads;
            let wave_len = if track.cb.is_none() {
                chunks.len().max(1)
            } else if split {
                1
            } else {
                // A wave ends in a barrier: its threads wait for its slowest
                // chunk (chunks differ by up to half a sequence of tokens).
                // Large calls take up to WAVE_CHUNKS chunks per thread into a
                // wave, shared out by work stealing, which leaves a fraction of
                // that wait; a call still reports at least MIN_WAVES times
                // when it has the chunks for it.
                let per_thread = (chunks.len() / (self.threads * MIN_WAVES)).clamp(1, WAVE_CHUNKS);
                self.threads * per_thread
            };
            let forward = |r: std::ops::Range<usize>, par: Par| -> Result<(usize, R)> {
                let mut ws = self.take_workspace();
                let chunk = seqs.slice(r.clone());
                let out = self
                    .encoder
                    .forward(chunk, &mut ws, par, None, |h, s| stage(chunk, h, s, par));
                self.put_workspace(ws);
                Ok((r.start, out?))
            };
            for wave in chunks.chunks(wave_len) {
                let results: Vec<(usize, R)> = match &self.pool {
                    None => wave
                        .iter()
                        .map(|r| forward(r.clone(), Par::Serial))
                        .collect::<Result<_>>()?,
                    // Even a short text's products are split: each core then
                    // streams half of the weights, the bound for short inputs.
                    Some(pool) if split => pool.install(|| {
                        wave.iter()
                            .map(|r| forward(r.clone(), Par::Threads(self.threads)))
                            .collect::<Result<_>>()
                    })?,
                    Some(pool) => pool.install(|| {
                        wave.par_iter()
                            .map(|r| forward(r.clone(), Par::Serial))
                            .collect::<Result<_>>()
                    })?,
                };
                let done = wave.last().map_or(0, |r| r.end);
                for (first, r) in results {
                    sink(first, r);
                }
                if track.cb.is_some() {
                    track.report(track.base + done)?;
                }
            }
            Ok(())
        })
    }

    /// The one loop over the inputs of a call, for every face: `n` inputs
    /// in groups of [`GROUP`], each group framed on the workers (`frame(i)`:
    /// input `i` of the call; the first input refused, in order, ends the
    /// call), shown to `framed(first, frames)` (each input's info; a face may
    /// still refuse the group), then run through the encoder as one
    /// [`Runtime::run`] with `stage`, whose results `sink(i, result)` takes
    /// in order (`i`: the call index of the chunk's first input). `track`'s
    /// `base` is the index of input 0 in the whole call.
    ///
    /// # Errors
    /// Those of `frame` and `framed`; those of [`Runtime::run`].
    pub(crate) fn run_groups<R: Send>(
        &self,
        n: usize,
        track: &mut Track<'_>,
        frame: impl Fn(usize) -> Result<Framed> + Sync + Send,
        mut framed: impl FnMut(usize, &[Framed]) -> Result<()>,
        stage: impl Fn(Seqs<'_>, &[f32], HeadScratch<'_>, Par) -> R + Sync,
        mut sink: impl FnMut(usize, R),
    ) -> Result<()> {
        let call_base = track.base;
        for start in (0..n).step_by(GROUP) {
            let end = (start + GROUP).min(n);
            let frames: Vec<Framed> = self
                .map_parallel(start..end, &frame)
                .into_iter()
                .collect::<Result<_>>()?;
            framed(start, &frames)?;
            let ids: Vec<&[u32]> = frames.iter().map(|f| f.ids.as_slice()).collect();
            let types: Option<Vec<&[u32]>> = frames
                .iter()
                .map(|f| f.types.as_deref())
                .collect::<Option<_>>()
                .filter(|_| !frames.is_empty());
            let keys: Vec<usize> = frames.iter().map(|f| f.keys).collect();
            let keyed = frames.iter().any(|f| f.keys < f.ids.len());
            let seqs = match &types {
                Some(t) => Seqs::typed(&ids, t),
                None => Seqs::untyped(&ids),
            }
            .with_keys(keyed.then_some(&keys[..]));
            track.base = call_base + start;
            self.run(seqs, track, &stage, |first, r| sink(start + first, r))?;
            if track.done < call_base + end {
                track.report(call_base + end)?;
            }
        }
        Ok(())
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

    /// Runs `f`, a call over `total` tokens, starting the background packing
    /// of the weights with the first call, so that it never slows down
    /// opening: before a large call (which then profits from it), after a
    /// small one (which would only compete with it for memory bandwidth).
    fn with_packing<R>(&self, total: usize, f: impl FnOnce() -> R) -> R {
        let start_packing = self.prepack_pending.load(Ordering::Relaxed)
            && self.prepack_pending.swap(false, Ordering::Relaxed);
        if start_packing && total >= PREPACK_FIRST_TOKENS {
            self.encoder.prepack(true);
        }
        let r = f();
        if start_packing && total < PREPACK_FIRST_TOKENS {
            self.encoder.prepack(true);
        }
        r
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
