//! `embd`: convert, inspect, verify model files; tokenize and embed text.

mod bench;
mod io_util;
mod progress;
mod report;

use std::io::{BufWriter, Write};
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
use clap::{Parser, Subcommand, ValueEnum};
use embedder::convert::{convert_dtype, TargetDType};
use embedder::formats::amb::{Quant, ScaleType};
use embedder::formats::{Container, FormatKind, WriteSettings, CONTAINERS};
use embedder::import::hf::{self, HfOptions};
use embedder::options::ProgressFn;
use embedder::{
    CallOptions, Engine, Error, ErrorKind, ModelFile, Options, OutputPrecision, OutputRanges,
    Precision, ReadOptions, Reranker, TextInfo,
};
use embedder::{EncodeRequest, EncodeTask, Encoded, OutputKind};

use io_util::{read_pairs, read_texts, write_npy, write_npy_bytes};
use progress::Progress;

/// Where `scripts/fetch_model.sh` puts the default model, relative to the repository.
const DEFAULT_MODEL_REL: &str = "models/all-MiniLM-L6-v2.weights";

#[derive(Parser)]
#[command(
    name = "embd",
    version,
    about = "Sentence embeddings on the CPU: convert, inspect, verify models; embed text"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Clone, Copy, ValueEnum)]
enum OutFormat {
    Jsonl,
    Npy,
}

#[derive(Clone, Copy, ValueEnum)]
enum AmbQuant {
    /// Keep tensor types.
    None,
    /// INT4 blocks of 32 with f16 scales for the encoder's Linear weights.
    Int4,
    /// INT5 blocks of 32 with f16 scales for the encoder's Linear weights.
    Int5,
}

#[derive(Subcommand)]
enum Cmd {
    /// Convert a HuggingFace folder (or any model file) to EMBD `.weights`.
    Convert {
        /// HF / sentence-transformers folder, or a model file.
        src: PathBuf,
        /// Output file.
        #[arg(short, long)]
        output: PathBuf,
        /// Tensor precision.
        #[arg(long, default_value = "f32", value_parser = parse_dtype)]
        dtype: TargetDType,
        /// `model_name` to record (default: the folder's name).
        #[arg(long)]
        name: Option<String>,
        /// `model_version` to record (default 1.0.0).
        #[arg(long)]
        model_version: Option<String>,
        /// How a Unigram/BPE `tokenizer.json` is read: `transformers` (as
        /// transformers 5 and sentence-transformers load it: the reference) or
        /// `as-written` (as the `tokenizers` library and
        /// text-embeddings-inference run the file).
        #[arg(long, value_enum, default_value = "transformers")]
        tokenizer_layout: TokenizerLayoutArg,
        /// Write without data/file CRCs (CHECKSUM_ENABLED clear).
        #[arg(long)]
        no_checksums: bool,
        /// Output container.
        #[arg(long = "to", default_value = "embd", value_parser = container_parser())]
        to: &'static Container,
        /// Block quantization of the Linear weights when writing AMB.
        #[arg(long, value_enum, default_value = "none")]
        amb_quant: AmbQuant,
        /// Calibration corpus (one text per line): embed it with the converted
        /// model and store each dimension's minimum and maximum, the ranges
        /// of `encode --output-precision int8|uint8` (EMBD output only).
        #[arg(long, value_name = "FILE")]
        output_ranges_corpus: Option<String>,
        /// With `--dtype bf16|int8`: store the weights row by row (as other
        /// readers and older versions read them) instead of packed in the
        /// kernels' layout of this CPU, which opening maps in place.
        #[arg(long, conflicts_with = "packed")]
        unpacked: bool,
        /// With `--dtype f32` (EMBD output): store the layers' weights packed
        /// in the layout of this CPU's f32 kernels, which opening maps in
        /// place instead of packing a copy at every open (for big models;
        /// other readers and older versions read only row-by-row files).
        #[arg(long)]
        packed: bool,
    },
    /// Print a model file's header, metadata, vocabulary and tensor table.
    Inspect {
        /// Model file or HF folder.
        file: PathBuf,
        /// Machine-readable output.
        #[arg(long)]
        json: bool,
    },
    /// Check a model file completely: exit 0 if valid, else print the first problem.
    Verify {
        /// Model file.
        file: PathBuf,
    },
    /// Embed texts (one per line, or JSONL objects with a "text" field).
    ///
    /// JSONL output has one record per text: {"embedding": [...], "tokens": N,
    /// "truncated": false} (tokens count the CLS and SEP tokens, after truncation).
    Encode {
        #[command(flatten)]
        model: ModelArgs,
        #[command(flatten)]
        precision: PrecisionArg,
        #[command(flatten)]
        embed: EmbedArgs,
        #[command(flatten)]
        input: InputArgs,
        /// Output file (default standard output).
        #[arg(long)]
        output: Option<PathBuf>,
        /// Output format.
        #[arg(long, value_enum, default_value = "jsonl")]
        format: OutFormat,
        /// Texts per embedding call.
        #[arg(long, default_value_t = 64)]
        batch_size: usize,
        /// Element type of the vectors, as sentence-transformers'
        /// quantize_embeddings: float32, int8, uint8, binary, ubinary (JSONL
        /// integers; npy dtype float32, int8 or uint8; binary kinds pack 8
        /// components per byte). int8/uint8 use --output-ranges, else the
        /// ranges stored in the model (convert --output-ranges-corpus).
        #[arg(long, default_value = "float32", value_parser = parse_output_precision)]
        output_precision: OutputPrecision,
        /// JSON file [[min per dimension...], [max per dimension...]]: the ranges
        /// of int8/uint8 output (overrides the model's).
        #[arg(long, value_name = "FILE")]
        output_ranges: Option<PathBuf>,
        /// Print each text's token vectors, un-pooled (sentence-transformers'
        /// output_value="token_embeddings": the last hidden state of every
        /// token, `[CLS]`/`[SEP]` and the prompt's included, cut to --dimensions,
        /// not normalized) as JSONL {"token_embeddings": [[...], ...],
        /// "tokens": N, "truncated": false}.
        #[arg(long)]
        token_vectors: bool,
        /// Outputs to print, comma-separated: dense, sparse, multi-vector
        /// (default: dense, or the model's outputs when it has no dense
        /// one). JSONL fields `embedding`, `sparse` = {"indices": [...],
        /// "values": [...]} (ids ascending) and `multi_vector` = [[...], ...];
        /// one forward pass gives all of them.
        #[arg(long, value_name = "LIST")]
        emit: Option<String>,
        /// Encode as sentence-transformers' encode_query / encode_document:
        /// query or document (a Router's route, ColBERT's markers and query
        /// expansion, the model's prompt of that name).
        #[arg(long, value_name = "TASK")]
        task: Option<String>,
        /// Keep only the largest K weights of each sparse vector.
        #[arg(long, value_name = "K")]
        top_k: Option<usize>,
    },
    /// Print token ids ({"input_ids": [...]}) per input.
    Tokenize {
        #[command(flatten)]
        model: ModelArgs,
        #[command(flatten)]
        input: InputArgs,
        /// Do not truncate to the model's max_seq_length.
        #[arg(long)]
        no_truncate: bool,
    },
    /// Serve models over HTTP (TEI's and OpenAI's embedding APIs; see
    /// docs/SERVER.md). Runs the `embd-serve` binary installed next to `embd`
    /// with these arguments (`embd serve --help` lists them).
    #[command(disable_help_flag = true)]
    Serve {
        /// Arguments of `embd-serve`, e.g. `-m models/all-MiniLM-L6-v2.weights --port 8080`.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<std::ffi::OsString>,
    },
    /// Time one configuration over a corpus; print JSON (see bench/README.md).
    Bench {
        #[command(flatten)]
        model: ModelArgs,
        #[command(flatten)]
        precision: PrecisionArg,
        /// Corpus: one text per line.
        #[arg(long)]
        input: String,
        /// Texts per embedding call (1 = one text per call).
        #[arg(long, default_value_t = 32)]
        batch_size: usize,
        /// Timed passes over the corpus.
        #[arg(long, default_value_t = 1)]
        rounds: usize,
        /// Use only the first N texts (0 = all).
        #[arg(long, default_value_t = 0)]
        limit: usize,
        /// Texts embedded before timing.
        #[arg(long, default_value_t = 100)]
        warmup: usize,
        /// Text for the single-text latency (default: a corpus text of --latency-tokens tokens).
        #[arg(long)]
        latency_text: Option<String>,
        /// Tokens (`[CLS]`/`[SEP]` included) of the default latency text.
        #[arg(long, default_value_t = 20)]
        latency_tokens: usize,
        /// Timed single-text calls (0 = skip).
        #[arg(long, default_value_t = 200)]
        latency_runs: usize,
        /// Time only the tokenizer: one thread, every text encoded whole (no
        /// truncation, special tokens added), `rounds` passes; prints the
        /// tokenizer's open time and tokens/s (the tokenizer table of
        /// `bench/tokenizer_speed.py`).
        #[arg(long)]
        tokenize_only: bool,
        /// Outputs each call computes, comma-separated: dense, sparse,
        /// multi-vector (default: dense, or the model's outputs when it has
        /// no dense one).
        #[arg(long, value_name = "LIST")]
        emit: Option<String>,
    },
    /// Error of a reduced precision against f32, layer by layer and product by
    /// product (how the engine's int8 plan was chosen).
    PrecisionReport {
        /// Model file (default: $EMBD_MODEL, then models/all-MiniLM-L6-v2.weights).
        #[arg(short = 'm', long = "model")]
        model: Option<PathBuf>,
        /// Texts, one per line; or JSONL with "text" and "embedding" (reference
        /// vectors, e.g. sentence-transformers') on every line.
        #[arg(long)]
        input: String,
        /// The precision to examine.
        #[arg(long, default_value = "int8", value_name = "bf16|int8", value_parser = parse_precision)]
        precision: Precision,
        /// Calibration texts for int8 smoothing, one per line (default: the
        /// engine's built-in set).
        #[arg(long)]
        calibration: Option<String>,
        /// Print one JSON object.
        #[arg(long)]
        json: bool,
    },
    /// Score query-passage pairs with a cross-encoder (reranker), as
    /// sentence-transformers' CrossEncoder.
    ///
    /// With --query: rank the documents of --input (one per line, or
    /// {"text": ...} lines with --jsonl for documents holding line breaks) and
    /// print one JSON object per document, best first: {"index": i, "score": s}
    /// (ties by index). With --jsonl alone: read {"query": ..., "passage": ...}
    /// lines and print {"score": s, "logit": l} per line, in input order
    /// (arrays for a model with several labels).
    Rerank {
        #[command(flatten)]
        model: ModelArgs,
        #[command(flatten)]
        precision: PrecisionArg,
        /// The query to rank the documents for.
        #[arg(long, required_unless_present = "jsonl")]
        query: Option<String>,
        /// Documents, one per line (with --query; {"text": ...} lines with
        /// --query --jsonl); pairs as JSONL (with --jsonl alone); - for standard
        /// input.
        #[arg(long, default_value = "-")]
        input: String,
        /// Input lines are JSON: {"query", "passage"} objects to score each pair,
        /// or with --query {"text"} documents to rank.
        #[arg(long)]
        jsonl: bool,
        /// Print only the best K documents (1..=the number of documents).
        #[arg(long, value_name = "K", requires = "query")]
        top_k: Option<usize>,
        /// Rank by logit and print the logit as "score" (the identity activation).
        #[arg(long, requires = "query")]
        raw: bool,
        /// Tokens of a pair, special tokens included (CrossEncoder's max_length;
        /// default: the model's).
        #[arg(long, value_name = "N")]
        max_length: Option<usize>,
        /// The instruction pairs are scored under (an LLM reranker's
        /// CrossEncoder prompt, Qwen3-Reranker's `<Instruct>`; default: the
        /// model's). Refused by a cross-encoder without a prompt template.
        #[arg(long, value_name = "TEXT")]
        prompt: Option<String>,
        /// Pairs per call (--jsonl).
        #[arg(long, default_value_t = 256)]
        batch_size: usize,
    },
    /// Cosine similarity of two texts (a matrix for more than two).
    Similarity {
        #[command(flatten)]
        model: ModelArgs,
        #[command(flatten)]
        precision: PrecisionArg,
        #[command(flatten)]
        embed: EmbedArgs,
        /// Texts to compare.
        #[arg(required = true, num_args = 2..)]
        texts: Vec<String>,
        /// The output compared: dense (cosine), sparse (dot product) or
        /// multi-vector (ColBERT's MaxSim of the first text, encoded as a
        /// query, against each other text, encoded as a document). Default:
        /// dense, or the model's output when it has no dense one.
        #[arg(long, value_name = "OUTPUT")]
        emit: Option<String>,
    },
}

/// Where the texts come from (`encode`, `tokenize`).
#[derive(clap::Args)]
struct InputArgs {
    /// Input file, or - for standard input.
    #[arg(long, default_value = "-")]
    input: String,
    /// Input lines are JSON objects with a "text" field.
    #[arg(long)]
    jsonl: bool,
}

impl InputArgs {
    fn read(&self) -> Result<Vec<String>, Error> {
        read_texts(&self.input, self.jsonl)
    }
}

#[derive(clap::Args)]
struct ModelArgs {
    /// Model file (default: $EMBD_MODEL, then models/all-MiniLM-L6-v2.weights).
    #[arg(short = 'm', long = "model")]
    model: Option<PathBuf>,
    /// Worker threads (default: all cores).
    #[arg(long)]
    threads: Option<usize>,
}

/// `--precision` (`encode`, `bench`, `similarity`).
#[derive(clap::Args)]
struct PrecisionArg {
    /// Arithmetic of the dense layers: f32, bf16 or int8 (default: the file's
    /// own, int8 for files converted with --dtype int8, bf16 for --dtype bf16,
    /// else f32). A lower
    /// precision than the file's converts the weights at open.
    #[arg(long, value_name = "f32|bf16|int8", value_parser = parse_precision)]
    precision: Option<Precision>,
}

/// What the vectors look like (`encode`, `similarity`).
#[derive(clap::Args, Default)]
struct EmbedArgs {
    /// Matryoshka truncation: keep the first K components of each vector
    /// (normalized again when the model normalizes); 1..=the model's dimension.
    #[arg(long, value_name = "K")]
    dimensions: Option<usize>,
    /// Prompt prepended to every text, as sentence-transformers' `prompt`
    /// ("" turns the model's default prompt off).
    #[arg(long, value_name = "TEXT", conflicts_with = "prompt_name")]
    prompt: Option<String>,
    /// Name of a prompt stored in the model (from config_sentence_transformers.json).
    #[arg(long, value_name = "NAME")]
    prompt_name: Option<String>,
    /// Embed texts longer than max_seq_length as windows of max_seq_length
    /// tokens overlapping by N tokens, averaged weighted by their token counts
    /// (default: truncate, as sentence-transformers).
    #[arg(long, value_name = "N")]
    window_overlap: Option<usize>,
    /// Tokens per input, special tokens included (default: the model's
    /// max_seq_length; up to its position table, 8,192 for ModernBERT).
    #[arg(long, value_name = "N")]
    max_seq_length: Option<usize>,
    /// int8/uint8 output ranges (from `encode --output-ranges`).
    #[arg(skip)]
    ranges: Option<OutputRanges>,
    /// The progress callback (`encode`'s progress bar).
    #[arg(skip)]
    progress: Option<ProgressFn>,
}

impl EmbedArgs {
    fn apply(&self, mut opts: Options) -> Options {
        opts.dimensions = self.dimensions;
        opts.output_ranges = self.ranges.clone();
        opts.prompt = self.prompt.clone();
        opts.prompt_name = self.prompt_name.clone();
        opts.window_overlap = self.window_overlap;
        opts.progress = self.progress.clone();
        if self.max_seq_length.is_some() {
            opts.max_seq_length = self.max_seq_length;
        }
        opts
    }
}

fn parse_precision(s: &str) -> Result<Precision, String> {
    Precision::from_name(s).ok_or_else(|| {
        let names: Vec<&str> = Precision::ALL.iter().map(|p| p.name()).collect();
        format!("unknown precision '{s}' (expected {})", names.join(", "))
    })
}

fn parse_output_precision(s: &str) -> Result<OutputPrecision, String> {
    OutputPrecision::from_name(s).ok_or_else(|| {
        let names: Vec<&str> = OutputPrecision::ALL.iter().map(|p| p.name()).collect();
        format!(
            "unknown output precision '{s}' (expected {})",
            names.join(", ")
        )
    })
}

/// Reads `[[min...], [max...]]` from a JSON file.
fn read_ranges(path: &Path) -> Result<OutputRanges, Error> {
    let text = std::fs::read_to_string(path).map_err(|e| Error::io(path.display(), e))?;
    let bad = |why: &str| {
        Error::invalid_argument(format!(
            "{}: {why}; expected [[min per dimension...], [max per dimension...]]",
            path.display()
        ))
    };
    let v: serde_json::Value = serde_json::from_str(&text).map_err(|e| bad(&e.to_string()))?;
    let rows = v
        .as_array()
        .filter(|r| r.len() == 2)
        .ok_or_else(|| bad("not two rows"))?;
    let mut flat = Vec::new();
    for row in rows {
        let row = row.as_array().ok_or_else(|| bad("a row is not an array"))?;
        if row.len() != rows[0].as_array().map_or(0, Vec::len) {
            return Err(bad("the rows differ in length"));
        }
        for x in row {
            flat.push(x.as_f64().ok_or_else(|| bad("a value is not a number"))? as f32);
        }
    }
    OutputRanges::from_rows(&flat)
}

/// `--to`: the containers the library writes ([`CONTAINERS`]).
fn container_parser() -> impl TypedValueParser<Value = &'static Container> {
    let names = CONTAINERS
        .iter()
        .filter(|c| c.write.is_some())
        .map(|c| PossibleValue::new(c.name).help(c.help));
    PossibleValuesParser::new(names)
        .map(|name| Container::by_name(&name).expect("a name from CONTAINERS"))
}

fn parse_dtype(s: &str) -> Result<TargetDType, String> {
    TargetDType::parse(s).ok_or_else(|| format!("unknown dtype '{s}' (f32, f16, bf16, int8)"))
}

fn resolve_model(arg: &Option<PathBuf>) -> Result<PathBuf, Error> {
    if let Some(p) = arg {
        return Ok(p.clone());
    }
    if let Some(p) = std::env::var_os("EMBD_MODEL").filter(|p| !p.is_empty()) {
        return Ok(PathBuf::from(p));
    }
    let candidates = [
        PathBuf::from(DEFAULT_MODEL_REL),
        Path::new(env!("CARGO_MANIFEST_DIR")).join(DEFAULT_MODEL_REL),
    ];
    for c in &candidates {
        if c.is_file() {
            return Ok(c.clone());
        }
    }
    Err(Error::new(
        ErrorKind::NotFound,
        format!(
            "no model given and none found at {}: pass -m MODEL, set EMBD_MODEL, or run scripts/fetch_model.sh",
            candidates[1].display()
        ),
    ))
}

fn open_model(
    args: &ModelArgs,
    precision: Option<Precision>,
    embed: &EmbedArgs,
) -> Result<Engine, Error> {
    let path = resolve_model(&args.model)?;
    let mut opts = Options::new();
    if let Some(t) = args.threads {
        opts = opts.threads(t);
    }
    opts.precision = precision;
    Engine::open(&path, &embed.apply(opts))
}

/// `embd serve`: replaces this process with the `embd-serve` binary next to
/// `embd` (the server lives in its own crate, `server/`, so that the library
/// never links an HTTP stack), passing `args` on.
fn serve(args: &[std::ffi::OsString]) -> Result<ExitCode, Error> {
    use std::os::unix::process::CommandExt;
    let exe = std::env::current_exe()
        .map_err(|e| Error::new(ErrorKind::Io, format!("cannot find the embd binary: {e}")))?;
    let server = exe.with_file_name("embd-serve");
    if !server.is_file() {
        return Err(Error::new(
            ErrorKind::NotFound,
            format!(
                "embd serve needs the embd-serve binary at {}; build it with \
                 `cargo build --release -p embd-server` (it is built beside embd)",
                server.display()
            ),
        ));
    }
    let e = std::process::Command::new(&server).args(args).exec();
    Err(Error::new(
        ErrorKind::Io,
        format!("cannot run {}: {e}", server.display()),
    ))
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("embd: error: {e}");
            ExitCode::from(1)
        }
    }
}

/// `embd convert --tokenizer-layout`.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum TokenizerLayoutArg {
    /// As transformers 5 / sentence-transformers load the folder.
    Transformers,
    /// As the `tokenizers` library runs `tokenizer.json`.
    AsWritten,
}

impl From<TokenizerLayoutArg> for embedder::tokenizer::spec::Layout {
    fn from(a: TokenizerLayoutArg) -> Self {
        match a {
            TokenizerLayoutArg::Transformers => Self::AsTransformers,
            TokenizerLayoutArg::AsWritten => Self::AsWritten,
        }
    }
}

fn run(cli: Cli) -> Result<ExitCode, Error> {
    match cli.cmd {
        Cmd::Convert {
            src,
            output,
            dtype,
            name,
            model_version,
            tokenizer_layout,
            no_checksums,
            to,
            amb_quant,
            output_ranges_corpus,
            unpacked,
            packed,
        } => {
            let model = if hf::detect(&src).is_some() {
                hf::import_dir(
                    &src,
                    &HfOptions {
                        name,
                        version: model_version,
                        tokenizer_layout: tokenizer_layout.into(),
                    },
                )?
            } else {
                let mut m = ModelFile::open(&src, ReadOptions::default())?;
                if let Some(n) = name {
                    m.metadata.insert("model_name".into(), n);
                }
                if let Some(v) = model_version {
                    m.metadata.insert("model_version".into(), v);
                }
                m
            };
            let mut converted = convert_dtype(&model, dtype)?;
            if packed && (to.kind != FormatKind::Embd || dtype != TargetDType::F32) {
                return Err(Error::invalid_argument(
                    "--packed applies to --dtype f32 EMBD output (bf16 and int8 EMBD files are packed unless --unpacked)",
                ));
            }
            let pack = match dtype {
                TargetDType::F32 => packed,
                _ => !unpacked,
            };
            if to.kind == FormatKind::Embd && pack {
                converted = embedder::convert::pack_for_run(converted, dtype)?;
            }
            if let Some(corpus) = &output_ranges_corpus {
                if to.kind != FormatKind::Embd {
                    return Err(Error::invalid_argument(
                        "--output-ranges-corpus is stored only in EMBD files (--to embd)",
                    ));
                }
                let texts = read_texts(corpus, false)?;
                converted = embedder::convert::with_output_ranges(&converted, &texts, 0)?;
                eprintln!("output ranges: {} calibration texts", texts.len());
            }
            let mut bar = Progress::new("converting");
            let quant = match amb_quant {
                AmbQuant::None => Quant::None,
                AmbQuant::Int4 => Quant::Int4Block {
                    block: 32,
                    scale: ScaleType::F16,
                },
                AmbQuant::Int5 => Quant::Int5Block {
                    block: 32,
                    scale: ScaleType::F16,
                },
            };
            let mut settings = WriteSettings {
                checksums: !no_checksums,
                quant,
                progress: &mut |d, t| bar.update(d, t),
            };
            to.write_path(&converted, &output, &mut settings)?;
            bar.finish();
            eprintln!(
                "wrote {} ({} tensors, {dtype})",
                output.display(),
                converted.tensors.len()
            );
            Ok(ExitCode::SUCCESS)
        }
        Cmd::Inspect { file, json } => {
            let m = ModelFile::open(&file, ReadOptions::default())?;
            let out = std::io::stdout();
            let mut out = out.lock();
            if json {
                writeln!(out, "{}", inspect_json(&m)).map_err(stdout_err)?;
            } else {
                print_inspect(&m, &mut out).map_err(stdout_err)?;
            }
            Ok(ExitCode::SUCCESS)
        }
        Cmd::Verify { file } => match Engine::verify(&file) {
            Ok(summary) => {
                println!("ok: {}: {summary}", file.display());
                Ok(ExitCode::SUCCESS)
            }
            Err(e) => {
                println!("invalid: {e}");
                Ok(ExitCode::from(1))
            }
        },
        Cmd::Encode {
            model,
            precision,
            embed,
            input,
            output,
            format,
            batch_size,
            output_precision,
            output_ranges,
            token_vectors,
            emit,
            task,
            top_k,
        } => {
            let task = task
                .as_deref()
                .map(|t| {
                    EncodeTask::from_name(t).ok_or_else(|| {
                        Error::invalid_argument(format!("--task '{t}' is not query or document"))
                    })
                })
                .transpose()?;
            // The progress bar hears from the engine between chunks of work (a
            // batch's texts are counted from `offset`; `total` is set once the
            // texts are read, and 0 keeps the bar quiet).
            let bar = Arc::new(Mutex::new(Progress::new("embedding")));
            let offset = Arc::new(AtomicUsize::new(0));
            let total = Arc::new(AtomicUsize::new(0));
            let mut embed = embed;
            {
                let (bar, offset, total) = (bar.clone(), offset.clone(), total.clone());
                embed.progress = Some(ProgressFn::new(move |done, _| {
                    let at = (offset.load(Ordering::Relaxed) + done) as u64;
                    let n = total.load(Ordering::Relaxed) as u64;
                    bar.lock().unwrap_or_else(|e| e.into_inner()).update(at, n);
                    ControlFlow::Continue(())
                }));
            }
            if let (Some(p), false) = (&output_ranges, token_vectors) {
                embed.ranges = Some(read_ranges(p)?);
            }
            let mut emit = emit;
            // The model opened once, for every path below.
            let mut opened = None;
            if emit.is_none()
                && task.is_none()
                && top_k.is_none()
                && !token_vectors
                && output_precision == OutputPrecision::Float32
            {
                // A model without a dense output prints the outputs it has.
                let emb = open_model(&model, precision.precision, &embed)?;
                if let Some(e) = emb
                    .as_embedder()
                    .filter(|e| !e.outputs().contains(&OutputKind::Dense))
                {
                    let names: Vec<&str> = e.outputs().iter().map(|k| k.name()).collect();
                    emit = Some(names.join(","));
                }
                opened = Some(emb);
            }
            if emit.is_some() || task.is_some() || top_k.is_some() {
                return encode_outputs(
                    opened,
                    &model,
                    &precision,
                    &embed,
                    &input,
                    output.as_deref(),
                    format,
                    batch_size,
                    emit.as_deref(),
                    task,
                    top_k,
                    token_vectors || output_precision != OutputPrecision::Float32,
                );
            }
            if token_vectors {
                if output_precision != OutputPrecision::Float32 || output_ranges.is_some() {
                    return Err(Error::invalid_argument(
                        "--token-vectors gives float32 vectors; --output-precision and \
                         --output-ranges do not apply",
                    ));
                }
                if let OutFormat::Npy = format {
                    return Err(Error::invalid_argument(
                        "--token-vectors writes JSONL (texts have different token counts); \
                         --format npy does not apply",
                    ));
                }
                let texts = input.read()?;
                let emb = open_model(&model, precision.precision, &embed)?;
                let e = emb.as_embedder().ok_or_else(|| {
                    Error::unsupported(
                        "token vectors need an encoder model; this is a static word-embedding model",
                    )
                })?;
                let mut sink = open_sink(output.as_deref())?;
                let mut info = vec![TextInfo::default(); batch_size.max(1)];
                for chunk in texts.chunks(batch_size.max(1)) {
                    let info = &mut info[..chunk.len()];
                    let tv = e.embed_tokens_with(chunk, &CallOptions::default(), Some(info))?;
                    for (v, inf) in tv.iter().zip(info.iter()) {
                        write_token_vectors_json(&mut sink, v, inf.tokens, inf)
                            .map_err(stdout_err)?;
                    }
                }
                sink.flush().map_err(stdout_err)?;
                return Ok(ExitCode::SUCCESS);
            }
            let emb = match opened {
                Some(emb) => emb,
                None => open_model(&model, precision.precision, &embed)?,
            };
            let texts = input.read()?;
            total.store(texts.len(), Ordering::Relaxed);
            let dim = emb.dim();
            let batch = batch_size.max(1);
            let mut sink = open_sink(output.as_deref())?;
            let mut all = Vec::new();
            let mut buf = vec![0f32; batch * dim];
            let mut info = vec![TextInfo::default(); batch];
            if output_precision != OutputPrecision::Float32 {
                let row = output_precision.row_len(dim);
                let mut q = vec![0u8; batch * row];
                let mut all_q = Vec::new();
                for (i, chunk) in texts.chunks(batch).enumerate() {
                    let out = &mut q[..chunk.len() * row];
                    let info = &mut info[..chunk.len()];
                    offset.store(i * batch, Ordering::Relaxed);
                    emb.embed_quantized_into(chunk, output_precision, out, Some(&mut *info))?;
                    match format {
                        OutFormat::Jsonl => {
                            for (r, inf) in out.chunks(row).zip(info.iter()) {
                                write_quantized_json(
                                    &mut sink,
                                    r,
                                    output_precision.is_signed(),
                                    inf,
                                )
                                .map_err(stdout_err)?;
                            }
                        }
                        OutFormat::Npy => all_q.extend_from_slice(out),
                    }
                    bar.lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .update((i * batch + chunk.len()) as u64, texts.len() as u64);
                }
                if let OutFormat::Npy = format {
                    let descr = if output_precision.is_signed() {
                        "|i1"
                    } else {
                        "|u1"
                    };
                    write_npy_bytes(&mut sink, &all_q, descr, texts.len(), row)
                        .map_err(stdout_err)?;
                }
                sink.flush().map_err(stdout_err)?;
                bar.lock().unwrap_or_else(|e| e.into_inner()).finish();
                return Ok(ExitCode::SUCCESS);
            }
            for (i, chunk) in texts.chunks(batch).enumerate() {
                let out = &mut buf[..chunk.len() * dim];
                let info = &mut info[..chunk.len()];
                offset.store(i * batch, Ordering::Relaxed);
                emb.embed_into_ex(chunk, out, Some(&mut *info))?;
                match format {
                    OutFormat::Jsonl => {
                        for (row, inf) in out.chunks(dim).zip(info.iter()) {
                            write_embedding_json(&mut sink, row, inf).map_err(stdout_err)?;
                        }
                    }
                    OutFormat::Npy => all.extend_from_slice(out),
                }
                bar.lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .update((i * batch + chunk.len()) as u64, texts.len() as u64);
            }
            if let OutFormat::Npy = format {
                write_npy(&mut sink, &all, texts.len(), dim).map_err(stdout_err)?;
            }
            sink.flush().map_err(stdout_err)?;
            bar.lock().unwrap_or_else(|e| e.into_inner()).finish();
            Ok(ExitCode::SUCCESS)
        }
        Cmd::Tokenize {
            model,
            input,
            no_truncate,
        } => {
            let emb = open_model(&model, None, &EmbedArgs::default())?;
            let texts = input.read()?;
            let stdout = std::io::stdout();
            let mut out = BufWriter::new(stdout.lock());
            for t in &texts {
                let ids = if no_truncate {
                    emb.tokenize_full(t)
                } else {
                    emb.tokenize(t)
                };
                let v = serde_json::json!({ "input_ids": ids });
                writeln!(out, "{v}").map_err(stdout_err)?;
            }
            out.flush().map_err(stdout_err)?;
            Ok(ExitCode::SUCCESS)
        }
        Cmd::Serve { args } => serve(&args),
        Cmd::Bench {
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
        } => {
            if tokenize_only {
                bench::run_tokenizer(&resolve_model(&model.model)?, &input, rounds, limit)?;
                return Ok(ExitCode::SUCCESS);
            }
            bench::run(&bench::BenchArgs {
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
        Cmd::PrecisionReport {
            model,
            input,
            precision,
            calibration,
            json,
        } => {
            report::run(&report::ReportArgs {
                model: resolve_model(&model)?,
                input,
                precision,
                calibration,
                json,
            })?;
            Ok(ExitCode::SUCCESS)
        }
        Cmd::Rerank {
            model,
            precision,
            query,
            input,
            // clap requires --query or --jsonl (or both).
            jsonl,
            top_k,
            raw,
            max_length,
            prompt,
            batch_size,
        } => {
            let path = resolve_model(&model.model)?;
            let mut opts = Options::new();
            if let Some(t) = model.threads {
                opts = opts.threads(t);
            }
            opts.precision = precision.precision;
            opts.max_seq_length = max_length;
            let r = Reranker::open(&path, &opts)?;
            let mut out = BufWriter::new(std::io::stdout().lock());
            let num = |v: &[f32]| -> serde_json::Value {
                if v.len() == 1 {
                    serde_json::json!(v[0])
                } else {
                    serde_json::json!(v)
                }
            };
            if let Some(q) = query {
                let docs = read_texts(&input, jsonl)?;
                for x in r.rank_prompted(&q, &docs, top_k, raw, prompt.as_deref(), None)? {
                    let s = if raw { x.logit } else { x.score };
                    let v = serde_json::json!({ "index": x.index, "score": s });
                    writeln!(out, "{v}").map_err(stdout_err)?;
                }
            } else {
                let pairs = read_pairs(&input)?;
                let labels = r.num_labels();
                for chunk in pairs.chunks(batch_size.max(1)) {
                    let mut scores = vec![0.0f32; chunk.len() * labels];
                    let mut logits = vec![0.0f32; chunk.len() * labels];
                    r.predict_prompted(
                        chunk,
                        prompt.as_deref(),
                        Some(&mut scores),
                        Some(&mut logits),
                        None,
                    )?;
                    for (s, l) in scores.chunks(labels).zip(logits.chunks(labels)) {
                        let v = serde_json::json!({ "score": num(s), "logit": num(l) });
                        writeln!(out, "{v}").map_err(stdout_err)?;
                    }
                }
            }
            out.flush().map_err(stdout_err)?;
            Ok(ExitCode::SUCCESS)
        }
        Cmd::Similarity {
            model,
            precision,
            embed,
            texts,
            emit,
        } => {
            let emb = open_model(&model, precision.precision, &embed)?;
            let kind = match (&emit, emb.as_embedder()) {
                (Some(e), _) => match OutputKind::parse_list(e)?.as_slice() {
                    [k] => *k,
                    _ => {
                        return Err(Error::invalid_argument(
                            "--emit names one output for a similarity",
                        ))
                    }
                },
                (None, Some(e)) if !e.outputs().contains(&OutputKind::Dense) => e.outputs()[0],
                _ => OutputKind::Dense,
            };
            if kind != OutputKind::Dense {
                let e = emb.as_embedder().ok_or_else(|| {
                    Error::unsupported("sparse and multi-vector outputs need an encoder model")
                })?;
                return similarity_outputs(e, kind, &texts);
            }
            let v = emb.embed(&texts)?;
            let dim = emb.dim();
            let row = |i: usize| &v[i * dim..(i + 1) * dim];
            if texts.len() == 2 {
                println!("{:.6}", embedder::cosine_similarity(row(0), row(1)));
            } else {
                for (i, t) in texts.iter().enumerate() {
                    println!("[{i}] {t}");
                }
                print!("     ");
                for j in 0..texts.len() {
                    print!(" {:>7}", format!("[{j}]"));
                }
                println!();
                for i in 0..texts.len() {
                    print!("{:>5}", format!("[{i}]"));
                    for j in 0..texts.len() {
                        print!(" {:>7.4}", embedder::cosine_similarity(row(i), row(j)));
                    }
                    println!();
                }
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn stdout_err(e: std::io::Error) -> Error {
    Error::io("output", e)
}

fn write_quantized_json(
    w: &mut dyn Write,
    row: &[u8],
    signed: bool,
    info: &TextInfo,
) -> std::io::Result<()> {
    w.write_all(b"{\"embedding\": [")?;
    for (i, &b) in row.iter().enumerate() {
        if i > 0 {
            w.write_all(b", ")?;
        }
        if signed {
            write!(w, "{}", b as i8)?;
        } else {
            write!(w, "{b}")?;
        }
    }
    writeln!(
        w,
        "], \"tokens\": {}, \"truncated\": {}}}",
        info.tokens, info.truncated
    )
}

/// `path` (created), or standard output; buffered.
fn open_sink(path: Option<&Path>) -> Result<Box<dyn Write>, Error> {
    Ok(match path {
        Some(p) => Box::new(BufWriter::new(
            std::fs::File::create(p).map_err(|e| Error::io(p.display(), e))?,
        )),
        None => Box::new(BufWriter::new(std::io::stdout().lock())),
    })
}

/// Floats as a JSON array, each in the shortest form that reads back to the
/// same f32.
fn write_floats(w: &mut dyn Write, row: &[f32]) -> std::io::Result<()> {
    w.write_all(b"[")?;
    for (i, x) in row.iter().enumerate() {
        if i > 0 {
            w.write_all(b", ")?;
        }
        write!(w, "{x:?}")?;
    }
    w.write_all(b"]")
}

/// One text's token vectors (`tokens` rows) as a JSONL record.
/// `embd similarity` over sparse vectors (dot products, a matrix for more
/// than two texts) or multi-vectors (MaxSim of text 0 as a query against
/// each other text as a document).
fn similarity_outputs(
    e: &embedder::Embedder,
    kind: OutputKind,
    texts: &[String],
) -> Result<ExitCode, Error> {
    if kind == OutputKind::MultiVector {
        let q = e.encode(
            &texts[..1],
            &EncodeRequest::new(&[kind]).task(EncodeTask::Query),
        )?;
        let d = e.encode(
            &texts[1..],
            &EncodeRequest::new(&[kind]).task(EncodeTask::Document),
        )?;
        let (q, d) = (
            q.multi_vector.unwrap_or_default(),
            d.multi_vector.unwrap_or_default(),
        );
        for (j, doc) in d.iter().enumerate() {
            let score = q[0].max_sim(doc);
            if texts.len() == 2 {
                println!("{score:.6}");
            } else {
                println!("[{}] {score:.6} {}", j + 1, texts[j + 1]);
            }
        }
        return Ok(ExitCode::SUCCESS);
    }
    let v = e
        .encode(texts, &EncodeRequest::new(&[kind]))?
        .sparse
        .unwrap_or_default();
    if texts.len() == 2 {
        println!("{:.6}", v[0].dot(&v[1]));
        return Ok(ExitCode::SUCCESS);
    }
    for (i, t) in texts.iter().enumerate() {
        println!("[{i}] {t}");
    }
    for a in &v {
        let row: Vec<String> = v.iter().map(|b| format!("{:>9.4}", a.dot(b))).collect();
        println!("{}", row.join(" "));
    }
    Ok(ExitCode::SUCCESS)
}

/// `embd encode` with `--emit`, `--task` or `--top-k` (or a model without a
/// dense output): [`embedder::Embedder::encode`], JSONL; `opened` is the
/// model when the caller has opened it already.
#[allow(clippy::too_many_arguments)]
fn encode_outputs(
    opened: Option<Engine>,
    model: &ModelArgs,
    precision: &PrecisionArg,
    embed: &EmbedArgs,
    input: &InputArgs,
    output: Option<&Path>,
    format: OutFormat,
    batch_size: usize,
    emit: Option<&str>,
    task: Option<EncodeTask>,
    top_k: Option<usize>,
    other_flags: bool,
) -> Result<ExitCode, Error> {
    if other_flags {
        return Err(Error::invalid_argument(
            "--emit, --task and --top-k do not combine with --token-vectors or \
             --output-precision",
        ));
    }
    if let OutFormat::Npy = format {
        return Err(Error::invalid_argument(
            "--emit, --task and --top-k write JSONL; --format npy does not apply",
        ));
    }
    let outputs = emit
        .map(OutputKind::parse_list)
        .transpose()?
        .unwrap_or_default();
    let texts = input.read()?;
    let emb = match opened {
        Some(emb) => emb,
        None => open_model(model, precision.precision, embed)?,
    };
    let e = emb.as_embedder().ok_or_else(|| {
        Error::unsupported("sparse and multi-vector outputs need an encoder model")
    })?;
    let req = EncodeRequest {
        outputs,
        task,
        top_k,
        ..EncodeRequest::default()
    };
    let mut sink = open_sink(output)?;
    for chunk in texts.chunks(batch_size.max(1)) {
        let enc = e.encode(chunk, &req)?;
        for i in 0..chunk.len() {
            write_encoded_json(&mut sink, &enc, i).map_err(stdout_err)?;
        }
    }
    sink.flush().map_err(stdout_err)?;
    Ok(ExitCode::SUCCESS)
}

/// Text `i` of `enc` as one JSONL record.
fn write_encoded_json(w: &mut dyn Write, enc: &Encoded, i: usize) -> std::io::Result<()> {
    w.write_all(b"{")?;
    if let Some(d) = &enc.dense {
        w.write_all(b"\"embedding\": ")?;
        write_floats(w, &d[i * enc.dim..(i + 1) * enc.dim])?;
        w.write_all(b", ")?;
    }
    if let Some(s) = &enc.sparse {
        let v = &s[i];
        w.write_all(b"\"sparse\": {\"indices\": [")?;
        for (k, id) in v.indices.iter().enumerate() {
            if k > 0 {
                w.write_all(b", ")?;
            }
            write!(w, "{id}")?;
        }
        w.write_all(b"], \"values\": ")?;
        write_floats(w, &v.values)?;
        w.write_all(b"}, ")?;
    }
    if let Some(m) = &enc.multi_vector {
        let v = &m[i];
        w.write_all(b"\"multi_vector\": [")?;
        for r in 0..v.rows() {
            if r > 0 {
                w.write_all(b", ")?;
            }
            write_floats(w, v.row(r))?;
        }
        w.write_all(b"], ")?;
    }
    let info = enc.info[i];
    writeln!(
        w,
        "\"tokens\": {}, \"truncated\": {}}}",
        info.tokens, info.truncated
    )
}

fn write_token_vectors_json(
    w: &mut dyn Write,
    vectors: &[f32],
    tokens: usize,
    info: &TextInfo,
) -> std::io::Result<()> {
    w.write_all(b"{\"token_embeddings\": [")?;
    let dim = vectors.len() / tokens.max(1);
    for (i, row) in vectors.chunks_exact(dim.max(1)).enumerate() {
        if i > 0 {
            w.write_all(b", ")?;
        }
        write_floats(w, row)?;
    }
    writeln!(
        w,
        "], \"tokens\": {}, \"truncated\": {}}}",
        info.tokens, info.truncated
    )
}

fn write_embedding_json(w: &mut dyn Write, row: &[f32], info: &TextInfo) -> std::io::Result<()> {
    w.write_all(b"{\"embedding\": ")?;
    write_floats(w, row)?;
    writeln!(
        w,
        ", \"tokens\": {}, \"truncated\": {}}}",
        info.tokens, info.truncated
    )
}

fn print_inspect(m: &ModelFile, out: &mut dyn Write) -> std::io::Result<()> {
    if !m.details.iter().any(|(k, _)| k == "format") {
        writeln!(out, "format: {}", m.format.name())?;
    }
    for (k, v) in &m.details {
        writeln!(out, "{k}: {v}")?;
    }
    writeln!(out, "\nmetadata ({} keys):", m.metadata.len())?;
    for (k, v) in &m.metadata {
        writeln!(out, "  {k} = {v}")?;
    }
    match &m.vocab {
        Some(v) => {
            let s = v.specials();
            writeln!(
                out,
                "\nvocabulary: {} tokens; special ids: pad={} unk={} cls={} sep={} mask={}",
                v.len(),
                s.pad,
                s.unk,
                s.cls,
                s.sep,
                s.mask
            )?;
        }
        None => writeln!(out, "\nvocabulary: none")?,
    }
    let tok = embedder::model::tokenizer::describe(m);
    if !tok.is_empty() {
        writeln!(out, "\ntokenizer:")?;
        for (k, v) in tok {
            writeln!(out, "  {k}: {v}")?;
        }
    }
    writeln!(out, "\ntensors ({}):", m.tensors.len())?;
    writeln!(
        out,
        "  {:<52} {:<5} {:<14} {:>12} {:>12}",
        "name", "dtype", "shape", "offset", "bytes"
    )?;
    let mut total = 0usize;
    for t in &m.tensors {
        total += t.byte_len();
        writeln!(
            out,
            "  {:<52} {:<5} {:<14} {:>12} {:>12}",
            t.name,
            t.dtype.name(),
            format!("{:?}", t.shape),
            t.file_offset,
            t.byte_len()
        )?;
    }
    writeln!(out, "  total tensor bytes: {total}")
}

fn inspect_json(m: &ModelFile) -> serde_json::Value {
    use serde_json::{json, Map, Value};
    let details: Map<String, Value> = m
        .details
        .iter()
        .map(|(k, v)| (k.clone(), Value::String(v.clone())))
        .collect();
    let tensors: Vec<Value> = m
        .tensors
        .iter()
        .map(|t| {
            json!({"name": t.name, "dtype": t.dtype.name(), "shape": t.shape,
                   "offset": t.file_offset, "bytes": t.byte_len()})
        })
        .collect();
    let vocab = m.vocab.as_ref().map(|v| {
        let s = v.specials();
        json!({"size": v.len(), "special_ids": {"pad": s.pad, "unk": s.unk, "cls": s.cls, "sep": s.sep, "mask": s.mask}})
    });
    json!({
        "format": m.format.name(),
        "header": details,
        "metadata": m.metadata,
        "vocab": vocab,
        "tokenizer": embedder::model::tokenizer::describe(m)
            .into_iter()
            .map(|(k, v)| (k, Value::String(v)))
            .collect::<Map<String, Value>>(),
        "tensor_count": m.tensors.len(),
        "tensors": tensors,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(std::iter::once("embd").chain(args.iter().copied()))
    }

    fn precision_of(cli: &Cli) -> Option<Precision> {
        match &cli.cmd {
            Cmd::Encode { precision, .. }
            | Cmd::Bench { precision, .. }
            | Cmd::Similarity { precision, .. } => precision.precision,
            _ => panic!("not a command with --precision"),
        }
    }

    const COMMANDS: [&[&str]; 3] = [
        &["encode"],
        &["bench", "--input", "corpus.txt"],
        &["similarity", "a", "b"],
    ];

    #[test]
    fn precision_flag_on_encode_bench_similarity() {
        for cmd in COMMANDS {
            let cli = parse(cmd).unwrap();
            assert_eq!(
                precision_of(&cli),
                None,
                "{cmd:?}: default is the file's own"
            );
            for (name, want) in [
                ("f32", Precision::F32),
                ("bf16", Precision::Bf16),
                ("int8", Precision::Int8),
                ("INT8", Precision::Int8),
            ] {
                let mut args = cmd.to_vec();
                args.extend(["--precision", name]);
                let cli = parse(&args).unwrap_or_else(|e| panic!("{args:?}: {e}"));
                assert_eq!(precision_of(&cli), Some(want), "{args:?}");
            }
        }
    }

    #[test]
    fn bad_precision_is_a_clear_error() {
        for cmd in COMMANDS {
            let mut args = cmd.to_vec();
            args.extend(["--precision", "fp16"]);
            let e = parse(&args).err().expect("fp16 must be refused");
            assert_eq!(e.kind(), clap::error::ErrorKind::ValueValidation);
            let msg = e.to_string();
            assert!(
                msg.contains("--precision")
                    && msg.contains("'fp16'")
                    && msg.contains("f32, bf16, int8"),
                "{msg}"
            );
        }
        // Not on the commands that do not run the encoder's arithmetic.
        assert!(parse(&["tokenize", "--precision", "int8"]).is_err());
    }
}
