//! `embd encode`: texts to vectors, in batches of `--batch-size`, through one
//! loop over a writer per output kind ([`Writer`]): dense vectors, quantized
//! vectors, token vectors, or the outputs `--emit` names (dense, sparse,
//! multi-vector; also `--task` and `--top-k`).

use std::io::Write;
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use clap::ValueEnum;
use embedder::options::ProgressFn;
use embedder::{
    CallOptions, Embedder, EncodeRequest, EncodeTask, Encoded, Engine, Error, Output, OutputKind,
    OutputPrecision, OutputRanges, TextInfo,
};

use crate::io_util::{write_npy, write_npy_bytes};
use crate::progress::Progress;
use crate::{
    open_model, open_sink, stdout_err, write_floats, EmbedArgs, InputArgs, ModelArgs, PrecisionArg,
};

#[derive(Clone, Copy, ValueEnum)]
pub enum OutFormat {
    Jsonl,
    Npy,
}

#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    pub model: ModelArgs,
    #[command(flatten)]
    pub precision: PrecisionArg,
    #[command(flatten)]
    pub embed: EmbedArgs,
    #[command(flatten)]
    pub input: InputArgs,
    /// Output file (default standard output).
    #[arg(long)]
    pub output: Option<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value = "jsonl")]
    pub format: OutFormat,
    /// Texts per embedding call.
    #[arg(long, default_value_t = 64)]
    pub batch_size: usize,
    /// Element type of the vectors, as sentence-transformers'
    /// quantize_embeddings: float32, int8, uint8, binary, ubinary (JSONL
    /// integers; npy dtype float32, int8 or uint8; binary kinds pack 8
    /// components per byte). int8/uint8 use --output-ranges, else the
    /// ranges stored in the model (convert --output-ranges-corpus).
    #[arg(long, default_value = "float32", value_parser = parse_output_precision)]
    pub output_precision: OutputPrecision,
    /// JSON file [[min per dimension...], [max per dimension...]]: the ranges
    /// of int8/uint8 output (overrides the model's).
    #[arg(long, value_name = "FILE")]
    pub output_ranges: Option<PathBuf>,
    /// Print each text's token vectors, un-pooled (sentence-transformers'
    /// output_value="token_embeddings": the last hidden state of every
    /// token, `[CLS]`/`[SEP]` and the prompt's included, cut to --dimensions,
    /// not normalized) as JSONL {"token_embeddings": [[...], ...],
    /// "tokens": N, "truncated": false}.
    #[arg(long)]
    pub token_vectors: bool,
    /// Outputs to print, comma-separated: dense, sparse, multi-vector
    /// (default: dense, or the model's outputs when it has no dense
    /// one). JSONL fields `embedding`, `sparse` = {"indices": [...],
    /// "values": [...]} (ids ascending) and `multi_vector` = [[...], ...];
    /// one forward pass gives all of them.
    #[arg(long, value_name = "LIST")]
    pub emit: Option<String>,
    /// Encode as sentence-transformers' encode_query / encode_document:
    /// query or document (a Router's route, ColBERT's markers and query
    /// expansion, the model's prompt of that name).
    #[arg(long, value_name = "TASK")]
    pub task: Option<String>,
    /// Keep only the largest K weights of each sparse vector.
    #[arg(long, value_name = "K")]
    pub top_k: Option<usize>,
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

/// What `embd encode` prints, from its flags.
enum Kind {
    /// `--emit`, `--task`, `--top-k` (or a model without a dense output):
    /// [`Embedder::encode`].
    Outputs(EncodeRequest),
    /// `--token-vectors`.
    TokenVectors,
    /// `--output-precision` other than float32.
    Quantized(OutputPrecision),
    /// The dense vectors.
    Dense,
}

/// One output kind of `embd encode`: how a batch of texts becomes its
/// records.
trait Writer {
    /// Computes `chunk` and writes its records (JSONL), or keeps them (npy).
    fn batch(&mut self, chunk: &[String], w: &mut dyn Write) -> Result<(), Error>;

    /// After the last batch: writes what was kept (the npy array of `n`
    /// rows).
    fn finish(&mut self, _w: &mut dyn Write, _n: usize) -> Result<(), Error> {
        Ok(())
    }
}

/// Runs `embd encode`.
pub fn run(args: Args) -> Result<ExitCode, Error> {
    let Args {
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
    } = args;
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
    let open = || open_model(&model, precision.precision, &embed);
    let mut emit = emit;
    // The model opened once, for every kind below.
    let mut opened = None;
    if emit.is_none()
        && task.is_none()
        && top_k.is_none()
        && !token_vectors
        && output_precision == OutputPrecision::Float32
    {
        // A model without a dense output prints the outputs it has.
        let emb = open()?;
        if let Some(e) = emb
            .as_embedder()
            .filter(|e| !e.outputs().contains(&OutputKind::Dense))
        {
            let names: Vec<&str> = e.outputs().iter().map(|k| k.name()).collect();
            emit = Some(names.join(","));
        }
        opened = Some(emb);
    }
    let kind = if emit.is_some() || task.is_some() || top_k.is_some() {
        if token_vectors || output_precision != OutputPrecision::Float32 {
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
            .as_deref()
            .map(OutputKind::parse_list)
            .transpose()?
            .unwrap_or_default();
        Kind::Outputs(EncodeRequest {
            outputs,
            task,
            top_k,
            ..EncodeRequest::default()
        })
    } else if token_vectors {
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
        Kind::TokenVectors
    } else if output_precision != OutputPrecision::Float32 {
        Kind::Quantized(output_precision)
    } else {
        Kind::Dense
    };
    // The texts and the model, in the order each kind has always read them
    // (which error a call with two problems gives).
    let (texts, emb) = match kind {
        Kind::Outputs(_) | Kind::TokenVectors => {
            let texts = input.read()?;
            (texts, opened.map_or_else(open, Ok)?)
        }
        Kind::Quantized(_) | Kind::Dense => {
            let emb = opened.map_or_else(open, Ok)?;
            let texts = input.read()?;
            // The bar shows the progress of these two.
            total.store(texts.len(), Ordering::Relaxed);
            (texts, emb)
        }
    };
    let batch = batch_size.max(1);
    let mut out: Box<dyn Writer + '_> = match kind {
        Kind::Outputs(req) => Box::new(Outputs {
            e: encoder(
                &emb,
                "sparse and multi-vector outputs need an encoder model",
            )?,
            req,
        }),
        Kind::TokenVectors => Box::new(TokenVectors {
            e: encoder(
                &emb,
                "token vectors need an encoder model; this is a static word-embedding model",
            )?,
            info: vec![TextInfo::default(); batch],
        }),
        Kind::Quantized(precision) => Box::new(Quantized {
            emb: &emb,
            precision,
            format,
            row: precision.row_len(emb.dim()),
            buf: vec![0u8; batch * precision.row_len(emb.dim())],
            info: vec![TextInfo::default(); batch],
            all: Vec::new(),
        }),
        Kind::Dense => Box::new(Dense {
            emb: &emb,
            format,
            dim: emb.dim(),
            buf: vec![0f32; batch * emb.dim()],
            info: vec![TextInfo::default(); batch],
            all: Vec::new(),
        }),
    };
    let mut sink = open_sink(output.as_deref())?;
    let shown = total.load(Ordering::Relaxed) as u64;
    for (i, chunk) in texts.chunks(batch).enumerate() {
        offset.store(i * batch, Ordering::Relaxed);
        out.batch(chunk, &mut *sink)?;
        bar.lock()
            .unwrap_or_else(|e| e.into_inner())
            .update((i * batch + chunk.len()) as u64, shown);
    }
    out.finish(&mut *sink, texts.len())?;
    sink.flush().map_err(stdout_err)?;
    bar.lock().unwrap_or_else(|e| e.into_inner()).finish();
    Ok(ExitCode::SUCCESS)
}

/// The engine's encoder model, else the error `why`.
fn encoder<'a>(emb: &'a Engine, why: &str) -> Result<&'a Embedder, Error> {
    emb.as_embedder().ok_or_else(|| Error::unsupported(why))
}

/// Dense vectors: `{"embedding": [...], "tokens": N, "truncated": false}`
/// per text, or one `n x dim` float32 npy array.
struct Dense<'a> {
    emb: &'a Engine,
    format: OutFormat,
    dim: usize,
    buf: Vec<f32>,
    info: Vec<TextInfo>,
    all: Vec<f32>,
}

impl Writer for Dense<'_> {
    fn batch(&mut self, chunk: &[String], w: &mut dyn Write) -> Result<(), Error> {
        let out = &mut self.buf[..chunk.len() * self.dim];
        let info = &mut self.info[..chunk.len()];
        self.emb.embed_into_ex(chunk, out, Some(&mut *info))?;
        match self.format {
            OutFormat::Jsonl => {
                for (row, inf) in out.chunks(self.dim).zip(info.iter()) {
                    write_embedding_json(w, row, inf).map_err(stdout_err)?;
                }
            }
            OutFormat::Npy => self.all.extend_from_slice(out),
        }
        Ok(())
    }

    fn finish(&mut self, w: &mut dyn Write, n: usize) -> Result<(), Error> {
        match self.format {
            OutFormat::Npy => write_npy(w, &self.all, n, self.dim).map_err(stdout_err),
            OutFormat::Jsonl => Ok(()),
        }
    }
}

/// Quantized vectors (`--output-precision`): JSONL integers per text, or
/// one int8 / uint8 npy array.
struct Quantized<'a> {
    emb: &'a Engine,
    precision: OutputPrecision,
    format: OutFormat,
    row: usize,
    buf: Vec<u8>,
    info: Vec<TextInfo>,
    all: Vec<u8>,
}

impl Writer for Quantized<'_> {
    fn batch(&mut self, chunk: &[String], w: &mut dyn Write) -> Result<(), Error> {
        let out = &mut self.buf[..chunk.len() * self.row];
        let info = &mut self.info[..chunk.len()];
        self.emb
            .embed_quantized_into(chunk, self.precision, out, Some(&mut *info))?;
        match self.format {
            OutFormat::Jsonl => {
                for (r, inf) in out.chunks(self.row).zip(info.iter()) {
                    write_quantized_json(w, r, self.precision.is_signed(), inf)
                        .map_err(stdout_err)?;
                }
            }
            OutFormat::Npy => self.all.extend_from_slice(out),
        }
        Ok(())
    }

    fn finish(&mut self, w: &mut dyn Write, n: usize) -> Result<(), Error> {
        if let OutFormat::Npy = self.format {
            let descr = if self.precision.is_signed() {
                "|i1"
            } else {
                "|u1"
            };
            write_npy_bytes(w, &self.all, descr, n, self.row).map_err(stdout_err)?;
        }
        Ok(())
    }
}

/// Token vectors: `{"token_embeddings": [[...], ...], "tokens": N,
/// "truncated": false}` per text.
struct TokenVectors<'a> {
    e: &'a Embedder,
    info: Vec<TextInfo>,
}

impl Writer for TokenVectors<'_> {
    fn batch(&mut self, chunk: &[String], w: &mut dyn Write) -> Result<(), Error> {
        let info = &mut self.info[..chunk.len()];
        let tv = self
            .e
            .embed_tokens_with(chunk, &CallOptions::default(), Some(info))?;
        for (v, inf) in tv.iter().zip(info.iter()) {
            write_token_vectors_json(w, v, inf.tokens, inf).map_err(stdout_err)?;
        }
        Ok(())
    }
}

/// The outputs `--emit` names: one record per text with a field per output.
struct Outputs<'a> {
    e: &'a Embedder,
    req: EncodeRequest,
}

impl Writer for Outputs<'_> {
    fn batch(&mut self, chunk: &[String], w: &mut dyn Write) -> Result<(), Error> {
        let enc = self.e.encode(chunk, &self.req)?;
        for i in 0..chunk.len() {
            write_encoded_json(w, &enc, i).map_err(stdout_err)?;
        }
        Ok(())
    }
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

/// Text `i` of `enc` as one JSONL record: a field per output, in the
/// order of [`OutputKind::ALL`].
fn write_encoded_json(w: &mut dyn Write, enc: &Encoded, i: usize) -> std::io::Result<()> {
    w.write_all(b"{")?;
    for o in enc.outputs.iter() {
        match o {
            Output::Dense { dim, vectors } => {
                w.write_all(b"\"embedding\": ")?;
                write_floats(w, &vectors[i * dim..(i + 1) * dim])?;
            }
            Output::Sparse(s) => {
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
                w.write_all(b"}")?;
            }
            Output::MultiVector(m) => {
                let v = &m[i];
                w.write_all(b"\"multi_vector\": [")?;
                for r in 0..v.rows() {
                    if r > 0 {
                        w.write_all(b", ")?;
                    }
                    write_floats(w, v.row(r))?;
                }
                w.write_all(b"]")?;
            }
        }
        w.write_all(b", ")?;
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
