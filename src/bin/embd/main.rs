//! `embd`: convert, inspect, verify model files; tokenize and embed text.
//! One file per subcommand; this one holds the command line, the arguments
//! the subcommands share and the helpers they share.

mod bench;
mod convert;
mod encode;
mod inspect;
mod io_util;
mod progress;
mod pull;
mod report;
mod rerank;
mod serve;
mod similarity;
mod tokenize;
mod verify;

use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use embedder::options::ProgressFn;
use embedder::{Engine, Error, ErrorKind, Matryoshka, Options, OutputRanges, Precision};

use io_util::read_texts;

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

#[derive(Subcommand)]
enum Cmd {
    /// Convert a HuggingFace folder (or any model file) to EMBD `.weights`.
    Convert(convert::Args),
    /// Print a model file's header, metadata, vocabulary and tensor table.
    Inspect(inspect::Args),
    /// Check a model file completely: exit 0 if valid, else print the first problem.
    Verify(verify::Args),
    /// Embed texts (one per line, or JSONL objects with a "text" field).
    ///
    /// JSONL output has one record per text: {"embedding": [...], "tokens": N,
    /// "truncated": false} (tokens count the CLS and SEP tokens, after truncation).
    Encode(encode::Args),
    /// Print token ids ({"input_ids": [...]}) per input.
    Tokenize(tokenize::Args),
    /// Serve models over HTTP (TEI's and OpenAI's embedding APIs; see
    /// docs/SERVER.md). Runs the `embd-serve` binary installed next to `embd`
    /// with these arguments (`embd serve --help` lists them).
    #[command(disable_help_flag = true)]
    Serve(serve::Args),
    /// Download a model from the HuggingFace hub (`HF_ENDPOINT`, `HF_TOKEN`)
    /// into the HuggingFace cache, then convert it once: `embd pull
    /// org/name [--revision R]`; afterwards `-m org/name` opens it. Runs the
    /// `embd-pull` binary installed next to `embd` (`embd pull --help`).
    #[command(disable_help_flag = true)]
    Pull(pull::Args),
    /// Time one configuration over a corpus; print JSON (see bench/README.md).
    Bench(bench::Args),
    /// Error of a reduced precision against f32, layer by layer and product by
    /// product (how the engine's int8 plan was chosen).
    PrecisionReport(report::Args),
    /// Score query-passage pairs with a cross-encoder (reranker), as
    /// sentence-transformers' CrossEncoder.
    ///
    /// With --query: rank the documents of --input (one per line, or
    /// {"text": ...} lines with --jsonl for documents holding line breaks) and
    /// print one JSON object per document, best first: {"index": i, "score": s}
    /// (ties by index). With --jsonl alone: read {"query": ..., "passage": ...}
    /// lines and print {"score": s, "logit": l} per line, in input order
    /// (arrays for a model with several labels).
    Rerank(rerank::Args),
    /// Cosine similarity of two texts (a matrix for more than two).
    Similarity(similarity::Args),
}

/// Where the texts come from (`encode`, `tokenize`).
#[derive(clap::Args)]
pub struct InputArgs {
    /// Input file, or - for standard input.
    #[arg(long, default_value = "-")]
    pub input: String,
    /// Input lines are JSON objects with a "text" field.
    #[arg(long)]
    pub jsonl: bool,
}

impl InputArgs {
    pub fn read(&self) -> Result<Vec<String>, Error> {
        read_texts(&self.input, self.jsonl)
    }
}

#[derive(clap::Args)]
pub struct ModelArgs {
    /// Model file, or a hub id `org/name[@revision]` found in the
    /// HuggingFace cache (`embd pull` fetches one; converted once, then
    /// opened from $EMBD_CACHE_DIR) (default: $EMBD_MODEL, then
    /// models/all-MiniLM-L6-v2.weights).
    #[arg(short = 'm', long = "model")]
    pub model: Option<PathBuf>,
    /// Worker threads (default: all cores).
    #[arg(long)]
    pub threads: Option<usize>,
}

/// `--precision` (`encode`, `bench`, `similarity`).
#[derive(clap::Args)]
pub struct PrecisionArg {
    /// Arithmetic of the dense layers: f32, bf16 or int8 (default: the file's
    /// own, int8 for files converted with --dtype int8, bf16 for --dtype bf16,
    /// else f32). A lower
    /// precision than the file's converts the weights at open.
    #[arg(long, value_name = "f32|bf16|int8", value_parser = parse_precision)]
    pub precision: Option<Precision>,
}

/// What the vectors look like (`encode`, `similarity`).
#[derive(clap::Args, Default)]
pub struct EmbedArgs {
    /// Matryoshka truncation: keep the first K components of each vector
    /// (normalized again when the model normalizes); 1..=the model's dimension.
    #[arg(long, value_name = "K")]
    pub dimensions: Option<usize>,
    /// How a vector is cut to --dimensions: truncate (sentence-transformers'
    /// truncate_dim, the default) or layer-norm (nomic-embed-text-v1.5's
    /// recipe: layer norm without affine, cut, normalize; applied with or
    /// without --dimensions).
    #[arg(long, value_name = "truncate|layer-norm", value_parser = parse_matryoshka)]
    pub matryoshka: Option<Matryoshka>,
    /// Prompt prepended to every text, as sentence-transformers' `prompt`
    /// ("" turns the model's default prompt off).
    #[arg(long, value_name = "TEXT", conflicts_with = "prompt_name")]
    pub prompt: Option<String>,
    /// Name of a prompt stored in the model (from config_sentence_transformers.json).
    #[arg(long, value_name = "NAME")]
    pub prompt_name: Option<String>,
    /// Embed texts longer than max_seq_length as windows of max_seq_length
    /// tokens overlapping by N tokens, averaged weighted by their token counts
    /// (default: truncate, as sentence-transformers).
    #[arg(long, value_name = "N")]
    pub window_overlap: Option<usize>,
    /// Tokens per input, special tokens included (default: the model's
    /// max_seq_length; up to its position table, 8,192 for ModernBERT).
    #[arg(long, value_name = "N")]
    pub max_seq_length: Option<usize>,
    /// int8/uint8 output ranges (from `encode --output-ranges`).
    #[arg(skip)]
    pub ranges: Option<OutputRanges>,
    /// The progress callback (`encode`'s progress bar).
    #[arg(skip)]
    pub progress: Option<ProgressFn>,
}

impl EmbedArgs {
    pub fn apply(&self, mut opts: Options) -> Options {
        opts.dimensions = self.dimensions;
        opts.matryoshka = self.matryoshka.unwrap_or_default();
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

pub fn parse_matryoshka(s: &str) -> Result<Matryoshka, String> {
    Matryoshka::from_name(s).map_err(|e| e.to_string())
}

pub fn parse_precision(s: &str) -> Result<Precision, String> {
    Precision::from_name(s).ok_or_else(|| {
        let names: Vec<&str> = Precision::ALL.iter().map(|p| p.name()).collect();
        format!("unknown precision '{s}' (expected {})", names.join(", "))
    })
}

/// The model file of `-m` (a path or a hub id), else of `$EMBD_MODEL`, else
/// the default model.
pub fn resolve_model(arg: &Option<PathBuf>) -> Result<PathBuf, Error> {
    if let Some(p) = arg {
        return embedder::hub::resolve_model_path(p);
    }
    if let Some(p) = std::env::var_os("EMBD_MODEL").filter(|p| !p.is_empty()) {
        return embedder::hub::resolve_model_path(Path::new(&p));
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

pub fn open_model(
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

fn run(cli: Cli) -> Result<ExitCode, Error> {
    match cli.cmd {
        Cmd::Convert(a) => convert::run(a),
        Cmd::Inspect(a) => inspect::run(a),
        Cmd::Verify(a) => verify::run(a),
        Cmd::Encode(a) => encode::run(a),
        Cmd::Tokenize(a) => tokenize::run(a),
        Cmd::Serve(a) => serve::run(a),
        Cmd::Pull(a) => pull::run(a),
        Cmd::Bench(a) => bench::run(a),
        Cmd::PrecisionReport(a) => report::run(a),
        Cmd::Rerank(a) => rerank::run(a),
        Cmd::Similarity(a) => similarity::run(a),
    }
}

/// Replaces this process with the binary `name` next to `embd` (built by
/// the workspace member `package`), passing `args` on.
pub fn exec_sibling(
    name: &str,
    package: &str,
    args: &[std::ffi::OsString],
) -> Result<ExitCode, Error> {
    use std::os::unix::process::CommandExt;
    let exe = std::env::current_exe()
        .map_err(|e| Error::new(ErrorKind::Io, format!("cannot find the embd binary: {e}")))?;
    let sibling = exe.with_file_name(name);
    if !sibling.is_file() {
        return Err(Error::new(
            ErrorKind::NotFound,
            format!(
                "embd {} needs the {name} binary at {}; build it with \
                 `cargo build --release -p {package}` (it is built beside embd)",
                name.trim_start_matches("embd-"),
                sibling.display()
            ),
        ));
    }
    let e = std::process::Command::new(&sibling).args(args).exec();
    Err(Error::new(
        ErrorKind::Io,
        format!("cannot run {}: {e}", sibling.display()),
    ))
}

pub fn stdout_err(e: std::io::Error) -> Error {
    Error::io("output", e)
}

/// `path` (created), or standard output; buffered.
pub fn open_sink(path: Option<&Path>) -> Result<Box<dyn Write>, Error> {
    Ok(match path {
        Some(p) => Box::new(BufWriter::new(
            std::fs::File::create(p).map_err(|e| Error::io(p.display(), e))?,
        )),
        None => Box::new(BufWriter::new(std::io::stdout().lock())),
    })
}

/// Floats as a JSON array, each in the shortest form that reads back to the
/// same f32.
pub fn write_floats(w: &mut dyn Write, row: &[f32]) -> std::io::Result<()> {
    w.write_all(b"[")?;
    for (i, x) in row.iter().enumerate() {
        if i > 0 {
            w.write_all(b", ")?;
        }
        write!(w, "{x:?}")?;
    }
    w.write_all(b"]")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(std::iter::once("embd").chain(args.iter().copied()))
    }

    fn precision_of(cli: &Cli) -> Option<Precision> {
        match &cli.cmd {
            Cmd::Encode(a) => a.precision.precision,
            Cmd::Bench(a) => a.precision.precision,
            Cmd::Similarity(a) => a.precision.precision,
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
