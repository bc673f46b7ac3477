//! `embd bench`: time one configuration of the engine over a corpus and print
//! the results as one JSON object (read by `bench/bench.py`, which interleaves
//! these runs with ONNX Runtime's).
//!
//! Any model `embd encode` or `embd rerank` runs: the transformer families as
//! an [`Embedder`](embedder::Embedder), static models (model2vec,
//! finalfusion) on the static runtime, both opened as `encode` opens them
//! ([`Engine::open`]), and cross-encoders as a [`Reranker`], timed on
//! query-passage pairs (`--query` with one passage per line, or
//! `{"query", "passage"}` JSONL lines) as `embd rerank` scores them. The
//! static runtime runs each call on the calling thread: `threads` is 1 there,
//! and there is no background packing to finish.
//!
//! Measured, in this order, in one process:
//! 1. open time: the open + the first call on the latency item (with CRC
//!    verification, the default, and without it; a `--precision` below the
//!    file's own includes the conversion of the weights at open);
//! 2. throughput: after a short warm-up, `rounds` timed passes over the
//!    corpus through `embed_into` (or `encode` with `--emit`; a
//!    cross-encoder's `predict_into`) in calls of `batch_size` items
//!    (tokenization included);
//! 3. single-item latency: the call on the latency item, `latency_runs`
//!    times.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use embedder::{
    EncodeRequest, Engine, Error, ModelFile, Options, OutputKind, Precision, ReadOptions, Reranker,
};

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
    /// Corpus: one text per line (a cross-encoder's passages with `query`,
    /// else `{"query", "passage"}` JSONL lines).
    pub input: String,
    /// A cross-encoder's query, paired with every corpus line.
    pub query: Option<String>,
    /// Items per call (1 = one text or pair per call).
    pub batch_size: usize,
    /// Timed passes over the corpus.
    pub rounds: usize,
    /// Use only the first `limit` items of the corpus (0 = all).
    pub limit: usize,
    /// Items run (same configuration) before the timed rounds.
    pub warmup: usize,
    /// Text whose single-text latency is measured (default: the first corpus
    /// item of `latency_tokens` tokens, else the one closest to it; a
    /// cross-encoder's passage, paired with the query).
    pub latency_text: Option<String>,
    /// Token count (special tokens included) of the default latency item.
    pub latency_tokens: usize,
    /// Single-item calls timed for the latency (0 = skip).
    pub latency_runs: usize,
    /// The outputs each call computes (`None`: the dense vector, or every
    /// output of a model without one).
    pub emit: Option<Vec<OutputKind>>,
}

impl BenchArgs {
    /// The options of every timed open: threads and precision.
    fn options(&self) -> Options {
        let mut opts = Options::new().threads(self.threads);
        opts.precision = self.precision;
        opts
    }
}

/// What one kind of model is timed on: its items, how a call runs and what
/// the report says of the opened model.
trait Workload: Sized {
    /// A text, or a query-passage pair.
    type Item: Clone + Sync;
    /// Opens the model with `opts`, ready for calls of up to `batch` items.
    fn open(args: &BenchArgs, opts: &Options, batch: usize) -> Result<Self, Error>;
    /// One call over `items`.
    fn call(&mut self, items: &[Self::Item]) -> Result<(), Error>;
    /// The tokens of `item`, as the API counts them.
    fn tokens(&self, item: &Self::Item) -> usize;
    /// Finishes packing the weights (the steady state the timed passes
    /// measure).
    fn prepack(&self);
    /// Worker threads of a call.
    fn threads(&self) -> usize;
    /// The arithmetic of the dense layers.
    fn precision(&self) -> Precision;
    /// The item's part in the report's `latency` object.
    fn describe(item: &Self::Item) -> serde_json::Value;
}

/// An embedding model (an encoder or a static model) on texts.
struct Embed {
    engine: Engine,
    emit: Option<Vec<OutputKind>>,
    buf: Vec<f32>,
}

impl Workload for Embed {
    type Item = String;

    fn open(args: &BenchArgs, opts: &Options, batch: usize) -> Result<Self, Error> {
        let engine = Engine::open(&args.model, opts)?;
        let emit = args.emit.clone();
        if engine.as_embedder().is_none()
            && emit.as_ref().is_some_and(|k| k != &[OutputKind::Dense])
        {
            return Err(Error::invalid_argument(
                "--emit: sparse and multi-vector outputs need an encoder model; this is a static word-embedding model",
            ));
        }
        let buf = vec![0f32; batch * engine.dim()];
        Ok(Embed { engine, emit, buf })
    }

    /// The dense vectors into the buffer, or the outputs `--emit` names.
    fn call(&mut self, texts: &[String]) -> Result<(), Error> {
        let buf = &mut self.buf[..texts.len() * self.engine.dim()];
        let Some(e) = self.engine.as_embedder() else {
            return self.engine.embed_into(texts, buf);
        };
        match self.emit.as_deref() {
            None if e.outputs().contains(&OutputKind::Dense) => e.embed_into(texts, buf),
            emit => e
                .encode(texts, &EncodeRequest::new(emit.unwrap_or_default()))
                .map(drop),
        }
    }

    fn tokens(&self, text: &String) -> usize {
        self.engine.count_tokens(text)
    }

    fn prepack(&self) {
        // A static model has nothing to pack.
        if let Some(e) = self.engine.as_embedder() {
            e.prepack();
        }
    }

    fn threads(&self) -> usize {
        self.engine.as_embedder().map_or(1, |e| e.threads())
    }

    fn precision(&self) -> Precision {
        self.engine
            .as_embedder()
            .map_or(self.engine.info().precision, |e| e.precision())
    }

    fn describe(text: &String) -> serde_json::Value {
        json!({ "text": text })
    }
}

/// A cross-encoder on query-passage pairs.
struct Rerank {
    reranker: Reranker,
    scores: Vec<f32>,
}

impl Workload for Rerank {
    type Item = (String, String);

    fn open(args: &BenchArgs, opts: &Options, batch: usize) -> Result<Self, Error> {
        if args.emit.is_some() {
            return Err(Error::invalid_argument(
                "--emit: a cross-encoder scores pairs and has no embedding outputs",
            ));
        }
        let reranker = Reranker::open(&args.model, opts)?;
        let scores = vec![0f32; batch * reranker.num_labels()];
        Ok(Rerank { reranker, scores })
    }

    /// The pairs' scores into the buffer, as `embd rerank` computes them.
    fn call(&mut self, pairs: &[(String, String)]) -> Result<(), Error> {
        let n = pairs.len() * self.reranker.num_labels();
        self.reranker
            .predict_into(pairs, Some(&mut self.scores[..n]), None, None)
    }

    fn tokens(&self, (q, p): &(String, String)) -> usize {
        self.reranker.tokenize_pair(q, p).ids.len()
    }

    fn prepack(&self) {
        self.reranker.prepack();
    }

    fn threads(&self) -> usize {
        self.reranker.threads()
    }

    fn precision(&self) -> Precision {
        self.reranker.precision()
    }

    fn describe((q, p): &(String, String)) -> serde_json::Value {
        json!({ "query": q, "passage": p })
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

/// Opens the model and runs `item` once; returns (open, first call) times.
fn open_and_first<W: Workload>(
    args: &BenchArgs,
    item: &W::Item,
    verify: bool,
) -> Result<(f64, f64), Error> {
    let opts = args.options().verify_checksums(verify);
    let t0 = Instant::now();
    let mut w = W::open(args, &opts, 1)?;
    let t1 = Instant::now();
    w.call(std::slice::from_ref(item))?;
    let t2 = Instant::now();
    Ok((ms(t1 - t0), ms(t2 - t1)))
}

/// One pass over `items` in calls of `batch` items.
fn pass<W: Workload>(w: &mut W, items: &[W::Item], batch: usize) -> Result<(), Error> {
    for chunk in items.chunks(batch) {
        w.call(chunk)?;
    }
    Ok(())
}

/// Whether the file is a cross-encoder (its metadata `task`), read without
/// its checksums (the timed opens verify them).
fn is_cross_encoder(path: &Path) -> Result<bool, Error> {
    let file = ModelFile::open(
        path,
        ReadOptions {
            verify_checksums: false,
        },
    )?;
    Ok(matches!(
        file.metadata.get("task").map(|s| s.trim()),
        Some("classification")
    ))
}

/// Runs the benchmark and prints one JSON object on standard output.
pub fn run_bench(args: &BenchArgs) -> Result<(), Error> {
    if is_cross_encoder(&args.model).map_err(|e| e.context(args.model.display()))? {
        let pairs = match &args.query {
            Some(q) => crate::io_util::read_texts(&args.input, false)?
                .into_iter()
                .map(|p| (q.clone(), p))
                .collect(),
            None if args.input.ends_with(".jsonl") => crate::io_util::read_pairs(&args.input)?,
            None => {
                return Err(Error::invalid_argument(format!(
                    "{}: this is a cross-encoder: it is timed on query-passage pairs; give \
                     --query TEXT (each line of --input a passage) or a .jsonl input of \
                     {{\"query\", \"passage\"}} lines",
                    args.model.display()
                )))
            }
        };
        // --latency-text is a passage, paired with the query (of --query,
        // else of the first pair).
        let latency = args.latency_text.as_ref().and_then(|t| {
            let q = args
                .query
                .clone()
                .or_else(|| pairs.first().map(|p| p.0.clone()))?;
            Some((q, t.clone()))
        });
        measure::<Rerank>(args, pairs, latency, "pairs")
    } else {
        if args.query.is_some() {
            return Err(Error::invalid_argument(format!(
                "--query: {} is an embedding model; --query pairs passages for a cross-encoder",
                args.model.display()
            )));
        }
        let texts = crate::io_util::read_texts(&args.input, false)?;
        measure::<Embed>(args, texts, args.latency_text.clone(), "texts")
    }
}

/// Times workload `W` over `items` (the report names them `noun`) and prints
/// the report.
fn measure<W: Workload>(
    args: &BenchArgs,
    mut items: Vec<W::Item>,
    latency_item: Option<W::Item>,
    noun: &str,
) -> Result<(), Error> {
    if args.limit > 0 {
        items.truncate(args.limit);
    }
    if items.is_empty() {
        return Err(Error::invalid_argument(format!(
            "{}: no {noun} to run",
            args.input
        )));
    }
    let batch = args.batch_size.max(1);

    // The latency item is needed before the timed open, so pick it with a
    // separate open that does not count.
    let latency_item = match latency_item {
        Some(t) => t,
        None => {
            let probe = W::open(args, &Options::new().threads(1), 1)?;
            items
                .iter()
                .min_by_key(|t| probe.tokens(t).abs_diff(args.latency_tokens))
                .cloned()
                .unwrap_or_else(|| items[0].clone())
        }
    };

    // 1. Open + first call, in this fresh process (file in the page cache
    // after the probe above or earlier runs).
    let (open_ms, first_ms) = open_and_first::<W>(args, &latency_item, true)?;
    let (open_nv_ms, first_nv_ms) = open_and_first::<W>(args, &latency_item, false)?;

    // 2. Throughput.
    let mut w = W::open(args, &args.options(), batch.min(items.len()))?;
    if w.threads() == 1 && args.threads > 1 {
        eprintln!(
            "embd bench: the static runtime runs each call on one thread; --threads {} does not apply",
            args.threads
        );
    }
    let tokens: usize = items.iter().map(|t| w.tokens(t)).sum();
    let warm = args.warmup.min(items.len());
    pass(&mut w, &items[..warm], batch)?;
    // The timed passes measure the steady state: every layer's weights packed.
    // After a short warm-up the background packer may still be at work on a
    // large model (all-mpnet-base-v2: 340 MB of weights, vs 42 MB for
    // all-MiniLM-L6-v2), taking a core from the timed pass while the products
    // pack their panels on the fly; finish it here (the results are the same
    // bits either way).
    w.prepack();
    let mut secs = Vec::with_capacity(args.rounds);
    for _ in 0..args.rounds.max(1) {
        let t0 = Instant::now();
        pass(&mut w, &items, batch)?;
        secs.push(t0.elapsed().as_secs_f64());
    }
    let best = secs.iter().copied().fold(f64::INFINITY, f64::min);

    // 3. Single-item latency.
    let mut lat = Vec::with_capacity(args.latency_runs);
    let one = std::slice::from_ref(&latency_item);
    if args.latency_runs > 0 {
        for _ in 0..10 {
            w.call(one)?;
        }
        for _ in 0..args.latency_runs {
            let t0 = Instant::now();
            w.call(one)?;
            lat.push(ms(t0.elapsed()));
        }
    }
    lat.sort_by(f64::total_cmp);

    let mut latency = W::describe(&latency_item);
    latency["tokens"] = json!(w.tokens(&latency_item));
    latency["runs"] = json!(lat.len());
    latency["median_ms"] = json!(quantile(&lat, 0.5));
    latency["p90_ms"] = json!(quantile(&lat, 0.9));
    latency["min_ms"] = json!(quantile(&lat, 0.0));
    let mut result = json!({
        "engine": "embedder",
        "threads": w.threads(),
        "precision": w.precision().name(),
        "batch_size": batch,
        "texts": items.len(),
        "tokens": tokens,
        "rounds_s": secs,
        "best_s": best,
        "texts_per_s": items.len() as f64 / best,
        "tokens_per_s": tokens as f64 / best,
        "open_ms": open_ms,
        "first_embed_ms": first_ms,
        "open_first_ms": open_ms + first_ms,
        "open_noverify_ms": open_nv_ms,
        "first_embed_noverify_ms": first_nv_ms,
        "open_first_noverify_ms": open_nv_ms + first_nv_ms,
        "latency": latency,
    });
    if noun == "pairs" {
        // The same numbers under the names a reranker's report reads.
        result["pairs"] = json!(items.len());
        result["pairs_per_s"] = json!(items.len() as f64 / best);
    }
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
    /// Corpus: one text per line (a cross-encoder: one passage per line with
    /// --query, else a .jsonl file of {"query": ..., "passage": ...} lines).
    #[arg(long)]
    pub input: String,
    /// A cross-encoder's query, paired with every line of --input.
    #[arg(long, value_name = "TEXT")]
    pub query: Option<String>,
    /// Texts (or pairs) per call (1 = one per call).
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
        query,
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
        query,
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
