//! `embd bench`: time one configuration of the engine over a corpus and print
//! the results as one JSON object (read by `bench/bench.py`, which interleaves
//! these runs with ONNX Runtime's).
//!
//! Any model `embd encode` runs: the transformer families as an
//! [`Embedder`](embedder::Embedder), static models (model2vec, finalfusion) on the static
//! runtime, both opened as `encode` opens them ([`Engine::open`]). The static
//! runtime runs each call on the calling thread: `threads` is 1 there, and
//! there is no background packing to finish.
//!
//! Measured, in this order, in one process:
//! 1. open time: `Engine::open` + the first embedding of the latency text
//!    (with CRC verification, the default, and without it; a `--precision`
//!    below the file's own includes the conversion of the weights at open);
//! 2. throughput: after a short warm-up, `rounds` timed passes over the corpus
//!    through `embed_into` (or `encode` with `--emit`) in calls of
//!    `batch_size` texts (tokenization included);
//! 3. single-text latency: `embed_into` of the latency text, `latency_runs` times.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use embedder::{EncodeRequest, Engine, Error, Options, OutputKind, Precision};

use crate::{resolve_model, ModelArgs, PrecisionArg};
use serde_json::json;

/// What to run; filled from the command line.
pub struct BenchArgs {
    /// Model file.
    pub model: PathBuf,
    /// Worker threads (0 = all cores).
    pub threads: usize,
    /// Arithmetic of the dense layers (`None` = the file's own).
    pub precision: Option<Precision>,
    /// Corpus: one text per line.
    pub input: String,
    /// Texts per embedding call (1 = one text per call).
    pub batch_size: usize,
    /// Timed passes over the corpus.
    pub rounds: usize,
    /// Use only the first `limit` texts of the corpus (0 = all).
    pub limit: usize,
    /// Texts embedded (same configuration) before the timed rounds.
    pub warmup: usize,
    /// Text whose single-text latency is measured (default: the first corpus text
    /// of `latency_tokens` tokens, else the one closest to it).
    pub latency_text: Option<String>,
    /// Token count (with `[CLS]`/`[SEP]`) of the default latency text.
    pub latency_tokens: usize,
    /// Single-text calls timed for the latency (0 = skip).
    pub latency_runs: usize,
    /// The outputs each call computes (`None`: the dense vector, or every
    /// output of a model without one).
    pub emit: Option<Vec<OutputKind>>,
}

/// One call over `texts`: the dense vectors into `buf`, or the outputs
/// `emit` names (a transformer model's; a static model has dense vectors
/// only).
fn call(
    emb: &Engine,
    texts: &[impl AsRef<str> + Sync],
    buf: &mut [f32],
    emit: Option<&[OutputKind]>,
) -> Result<(), Error> {
    let Some(e) = emb.as_embedder() else {
        if emit.is_some_and(|k| k != [OutputKind::Dense]) {
            return Err(Error::invalid_argument(
                "--emit: sparse and multi-vector outputs need an encoder model; this is a static word-embedding model",
            ));
        }
        return emb.embed_into(texts, &mut buf[..texts.len() * emb.dim()]);
    };
    match emit {
        None if e.outputs().contains(&OutputKind::Dense) => {
            e.embed_into(texts, &mut buf[..texts.len() * e.dim()])
        }
        _ => e
            .encode(texts, &EncodeRequest::new(emit.unwrap_or_default()))
            .map(drop),
    }
}

impl BenchArgs {
    /// The options of every timed open: threads and precision.
    fn options(&self) -> Options {
        let mut opts = Options::new().threads(self.threads);
        opts.precision = self.precision;
        opts
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// Value at quantile `q` (0..=1) of sorted samples (nearest rank).
fn quantile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = (q * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// Opens the model and embeds `text` once; returns (open, first embedding) times.
fn open_and_first(args: &BenchArgs, text: &str, verify: bool) -> Result<(f64, f64), Error> {
    let opts = args.options().verify_checksums(verify);
    let t0 = Instant::now();
    let emb = Engine::open(&args.model, &opts)?;
    let t1 = Instant::now();
    let mut out = vec![0f32; emb.dim()];
    call(&emb, &[text], &mut out, args.emit.as_deref())?;
    let t2 = Instant::now();
    Ok((ms(t1 - t0), ms(t2 - t1)))
}

/// One pass over `texts` in calls of `batch` texts.
fn pass(
    emb: &Engine,
    texts: &[String],
    batch: usize,
    buf: &mut [f32],
    emit: Option<&[OutputKind]>,
) -> Result<(), Error> {
    for chunk in texts.chunks(batch) {
        call(emb, chunk, buf, emit)?;
    }
    Ok(())
}

/// Runs the benchmark and prints one JSON object on standard output.
pub fn run_bench(args: &BenchArgs) -> Result<(), Error> {
    let mut texts = crate::io_util::read_texts(&args.input, false)?;
    if args.limit > 0 {
        texts.truncate(args.limit);
    }
    if texts.is_empty() {
        return Err(Error::invalid_argument(format!(
            "{}: no texts to embed",
            args.input
        )));
    }
    let batch = args.batch_size.max(1);

    // The latency text is needed before the timed open, so pick it with a
    // separate tokenizer-only open that does not count.
    let latency_text = match &args.latency_text {
        Some(t) => t.clone(),
        None => {
            let probe = Engine::open(&args.model, &Options::new().threads(1))?;
            texts
                .iter()
                .min_by_key(|t| probe.count_tokens(t).abs_diff(args.latency_tokens))
                .cloned()
                .unwrap_or_default()
        }
    };

    // 1. Open + first embedding, in this fresh process (file in the page cache
    // after the probe above or earlier runs).
    let (open_ms, first_ms) = open_and_first(args, &latency_text, true)?;
    let (open_nv_ms, first_nv_ms) = open_and_first(args, &latency_text, false)?;

    // 2. Throughput.
    let emb = Engine::open(&args.model, &args.options())?;
    let encoder = emb.as_embedder();
    if encoder.is_none() && args.threads > 1 {
        eprintln!(
            "embd bench: the static runtime runs each call on one thread; --threads {} does not apply",
            args.threads
        );
    }
    let dim = emb.dim();
    let tokens: usize = texts.iter().map(|t| emb.count_tokens(t)).sum();
    let mut buf = vec![0f32; batch.min(texts.len()) * dim];
    let warm = args.warmup.min(texts.len());
    pass(&emb, &texts[..warm], batch, &mut buf, args.emit.as_deref())?;
    // The timed passes measure the steady state: every layer's weights packed.
    // After a short warm-up the background packer may still be at work on a
    // large model (all-mpnet-base-v2: 340 MB of weights, vs 42 MB for
    // all-MiniLM-L6-v2), taking a core from the timed pass while the products
    // pack their panels on the fly; finish it here (the results are the same
    // bits either way). A static model has nothing to pack.
    if let Some(e) = encoder {
        e.prepack();
    }
    let mut secs = Vec::with_capacity(args.rounds);
    for _ in 0..args.rounds.max(1) {
        let t0 = Instant::now();
        pass(&emb, &texts, batch, &mut buf, args.emit.as_deref())?;
        secs.push(t0.elapsed().as_secs_f64());
    }
    let best = secs.iter().copied().fold(f64::INFINITY, f64::min);

    // 3. Single-text latency.
    let mut lat = Vec::with_capacity(args.latency_runs);
    let mut one = vec![0f32; dim];
    if args.latency_runs > 0 {
        for _ in 0..10 {
            call(
                &emb,
                &[latency_text.as_str()],
                &mut one,
                args.emit.as_deref(),
            )?;
        }
        for _ in 0..args.latency_runs {
            let t0 = Instant::now();
            call(
                &emb,
                &[latency_text.as_str()],
                &mut one,
                args.emit.as_deref(),
            )?;
            lat.push(ms(t0.elapsed()));
        }
    }
    lat.sort_by(f64::total_cmp);

    let result = json!({
        "engine": "embedder",
        "threads": encoder.map_or(1, |e| e.threads()),
        "precision": encoder.map_or(emb.info().precision, |e| e.precision()).name(),
        "batch_size": batch,
        "texts": texts.len(),
        "tokens": tokens,
        "rounds_s": secs,
        "best_s": best,
        "texts_per_s": texts.len() as f64 / best,
        "tokens_per_s": tokens as f64 / best,
        "open_ms": open_ms,
        "first_embed_ms": first_ms,
        "open_first_ms": open_ms + first_ms,
        "open_noverify_ms": open_nv_ms,
        "first_embed_noverify_ms": first_nv_ms,
        "open_first_noverify_ms": open_nv_ms + first_nv_ms,
        "latency": {
            "text": latency_text,
            "tokens": emb.count_tokens(&latency_text),
            "runs": lat.len(),
            "median_ms": quantile(&lat, 0.5),
            "p90_ms": quantile(&lat, 0.9),
            "min_ms": quantile(&lat, 0.0),
        },
    });
    println!("{result}");
    Ok(())
}

/// `embd bench --tokenize-only`: opens the model file's tokenizer alone
/// (timed) and encodes every text of `input` (one per line, or JSONL
/// `{"text": ...}` lines for a `.jsonl` file) whole on this thread, `rounds`
/// times; prints one JSON object (best pass).
pub fn run_tokenizer(
    model: &std::path::Path,
    input: &str,
    rounds: usize,
    limit: usize,
) -> Result<(), Error> {
    let mut texts = crate::io_util::read_texts(input, input.ends_with(".jsonl"))?;
    if limit > 0 {
        texts.truncate(limit);
    }
    let t0 = Instant::now();
    let tok = embedder::model::tokenizer::open(model)?;
    let open_ms = ms(t0.elapsed());
    let mut ids = Vec::new();
    let mut tokens = 0usize;
    let mut secs = Vec::new();
    for _ in 0..rounds.max(1) {
        tokens = 0;
        let t0 = Instant::now();
        for t in &texts {
            tok.encode_into(t, None, &mut ids);
            tokens += ids.len();
        }
        secs.push(t0.elapsed().as_secs_f64());
    }
    let best = secs.iter().copied().fold(f64::INFINITY, f64::min);
    let result = json!({
        "engine": "embedder",
        "tokenizer": embedder::model::tokenizer::kind_name(tok.kind()),
        "texts": texts.len(),
        "tokens": tokens,
        "rounds_s": secs,
        "best_s": best,
        "tokens_per_s": tokens as f64 / best,
        "open_ms": open_ms,
    });
    println!("{result}");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::quantile;

    #[test]
    fn nearest_rank_quantiles() {
        let v: Vec<f64> = (1..=10).map(f64::from).collect();
        assert_eq!(quantile(&v, 0.5), 5.0);
        assert_eq!(quantile(&v, 0.9), 9.0);
        assert_eq!(quantile(&v, 0.0), 1.0);
        assert_eq!(quantile(&v, 1.0), 10.0);
        assert!(quantile(&[], 0.5).is_nan());
    }
}

#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    pub model: ModelArgs,
    #[command(flatten)]
    pub precision: PrecisionArg,
    /// Corpus: one text per line.
    #[arg(long)]
    pub input: String,
    /// Texts per embedding call (1 = one text per call).
    #[arg(long, default_value_t = 32)]
    pub batch_size: usize,
    /// Timed passes over the corpus.
    #[arg(long, default_value_t = 1)]
    pub rounds: usize,
    /// Use only the first N texts (0 = all).
    #[arg(long, default_value_t = 0)]
    pub limit: usize,
    /// Texts embedded before timing.
    #[arg(long, default_value_t = 100)]
    pub warmup: usize,
    /// Text for the single-text latency (default: a corpus text of --latency-tokens tokens).
    #[arg(long)]
    pub latency_text: Option<String>,
    /// Tokens (`[CLS]`/`[SEP]` included) of the default latency text.
    #[arg(long, default_value_t = 20)]
    pub latency_tokens: usize,
    /// Timed single-text calls (0 = skip).
    #[arg(long, default_value_t = 200)]
    pub latency_runs: usize,
    /// Time only the tokenizer: one thread, every text encoded whole (no
    /// truncation, special tokens added), `rounds` passes; prints the
    /// tokenizer's open time and tokens/s (the tokenizer table of
    /// `bench/tokenizer_speed.py`).
    #[arg(long)]
    pub tokenize_only: bool,
    /// Outputs each call computes, comma-separated: dense, sparse,
    /// multi-vector (default: dense, or the model's outputs when it has
    /// no dense one).
    #[arg(long, value_name = "LIST")]
    pub emit: Option<String>,
}

/// Runs `embd bench`.
pub fn run(args: Args) -> Result<ExitCode, Error> {
    let Args {
        model,
        precision,
        input,
        batch_size,
        rounds,
        limit,
        warmup,
        latency_text,
        latency_tokens,
        latency_runs,
        tokenize_only,
        emit,
    } = args;
    if tokenize_only {
        run_tokenizer(&resolve_model(&model.model)?, &input, rounds, limit)?;
        return Ok(ExitCode::SUCCESS);
    }
    run_bench(&BenchArgs {
        model: resolve_model(&model.model)?,
        threads: model.threads.unwrap_or(0),
        precision: precision.precision,
        input,
        batch_size,
        rounds,
        limit,
        warmup,
        latency_text,
        latency_tokens,
        latency_runs,
        emit: emit.as_deref().map(OutputKind::parse_list).transpose()?,
    })?;
    Ok(ExitCode::SUCCESS)
}
