//! [`Engine`]: whatever model a file holds, behind one interface.
//!
//! A BERT encoder file (`architecture` = `bert`, the default) opens as an
//! [`Embedder`]; a static word-embedding file (finalfusion `.fifu`, or any
//! container whose metadata says `architecture` = `static`) opens as a
//! [`StaticEmbedder`]. The C API's `embd_open` and the CLI use this type, so every
//! supported file works through the same calls.

use std::path::Path;

use crate::embedder::{
    check_batch, check_dimensions, check_info, cut_rows, Embedder, ModelInfo, TextInfo,
};
use crate::error::{Error, ErrorKind, Result};
use crate::formats::finalfusion::Embeddings;
use crate::formats::{ChecksumStatus, FormatKind, ModelFile, ReadOptions};
use crate::model::pooling::Pooling;
use crate::options::Options;
use crate::quantize::{OutputPrecision, OutputRanges};

/// A static sentence embedder over word vectors (finalfusion).
///
/// A text's vector is the mean of the vectors of its whitespace-separated words
/// (known words: their stored row; unknown words: the normalized sum of their
/// subword n-gram rows, as the finalfusion library returns; words with neither
/// are skipped), L2-normalized unless `Options::normalize(false)`. A text with no
/// word that has a vector gets the zero vector.
#[derive(Debug)]
pub struct StaticEmbedder {
    emb: Embeddings,
    name: String,
    format: FormatKind,
    normalize: bool,
    /// Output dimension (the [`Options::dimensions`] cut, or all).
    dim: usize,
    /// Ranges of `int8` / `uint8` output.
    output_ranges: Option<OutputRanges>,
}

impl StaticEmbedder {
    /// Builds the embedder over a model file whose metadata says `static`.
    ///
    /// # Errors
    /// [`ErrorKind::Model`] when the file holds no word embeddings.
    pub fn from_model_file(file: ModelFile, opts: &Options) -> Result<StaticEmbedder> {
        let format = file.format;
        let name = file
            .metadata
            .get("model_name")
            .cloned()
            .unwrap_or_else(|| "static-word-embeddings".to_string());
        if opts.max_seq_length.is_some() {
            return Err(Error::invalid_argument(
                "max_seq_length does not apply to static word-embedding models",
            ));
        }
        if opts.window_overlap.is_some() {
            return Err(Error::invalid_argument(
                "long-text windows do not apply to static word-embedding models (no token limit)",
            ));
        }
        if opts.prompt.as_deref().is_some_and(|p| !p.is_empty()) || opts.prompt_name.is_some() {
            return Err(Error::invalid_argument(
                "prompts are not supported for static word-embedding models",
            ));
        }
        // The file's stored ranges (for full vectors), read before the file
        // is consumed.
        let stored = match file
            .metadata
            .get("embedding_dim")
            .and_then(|d| d.parse::<usize>().ok())
        {
            Some(full) => crate::quantize::resolve_ranges(&file, None, full, full)?,
            None => None,
        };
        let emb = Embeddings::from_model_file(file)?;
        let dim = check_dimensions(opts.dimensions, emb.dims())?;
        let output_ranges = match &opts.output_ranges {
            Some(r) if r.min.len() != dim || r.max.len() != dim => {
                return Err(Error::invalid_argument(format!(
                    "output ranges cover {} and {} dimensions; the output has {dim}",
                    r.min.len(),
                    r.max.len()
                )))
            }
            Some(r) => Some(r.clone()),
            None if dim == emb.dims() => stored.filter(|r| r.dim() == dim),
            None => None,
        };
        Ok(StaticEmbedder {
            emb,
            name,
            format,
            normalize: opts.normalize.unwrap_or(true),
            dim,
            output_ranges,
        })
    }

    /// The word embeddings.
    pub fn embeddings(&self) -> &Embeddings {
        &self.emb
    }

    /// Output dimension (after [`Options::dimensions`]).
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// Vocabulary index of each whitespace-separated word, `u32::MAX` for words
    /// outside the vocabulary (their vector, if any, comes from subwords).
    pub fn tokenize(&self, text: &str) -> Vec<u32> {
        text.split_whitespace()
            .map(|w| {
                self.emb
                    .word_index(w)
                    .and_then(|i| u32::try_from(i).ok())
                    .unwrap_or(u32::MAX)
            })
            .collect()
    }

    /// Number of whitespace-separated words.
    pub fn count_tokens(&self, text: &str) -> usize {
        text.split_whitespace().count()
    }

    /// Embeds a batch into `out` (row-major `n x dim`).
    ///
    /// # Errors
    /// As [`Embedder::embed_into`] for buffer size and limits.
    pub fn embed_into<S: AsRef<str> + Sync>(&self, texts: &[S], out: &mut [f32]) -> Result<()> {
        self.embed_into_ex(texts, out, None)
    }

    /// As [`StaticEmbedder::embed_into`], filling `info` (when given) with
    /// each text's word count (never truncated).
    pub fn embed_into_ex<S: AsRef<str> + Sync>(
        &self,
        texts: &[S],
        out: &mut [f32],
        info: Option<&mut [TextInfo]>,
    ) -> Result<()> {
        let dim = self.dim();
        let full = self.emb.dims();
        check_batch(texts, out.len(), dim)?;
        check_info(texts.len(), info.as_deref())?;
        if let Some(info) = info {
            for (t, i) in texts.iter().zip(info.iter_mut()) {
                *i = TextInfo {
                    tokens: self.count_tokens(t.as_ref()),
                    truncated: false,
                };
            }
        }
        for (t, row) in texts.iter().zip(out.chunks_mut(dim)) {
            match self.emb.embed_text(t.as_ref(), self.normalize) {
                Some(v) if v.len() == full && dim == full => row.copy_from_slice(&v),
                Some(v) if v.len() == full => cut_rows(&v, full, row, dim, self.normalize),
                Some(_) => {
                    return Err(Error::new(
                        ErrorKind::Internal,
                        "static embedding has the wrong dimension",
                    ))
                }
                None => row.fill(0.0),
            }
        }
        Ok(())
    }

    /// Facts about the model (layers and heads are 0; `max_seq_length` 0 = unbounded).
    pub fn info(&self) -> ModelInfo {
        ModelInfo {
            name: self.name.clone(),
            format: self.format,
            dim: self.dim(),
            num_layers: 0,
            num_heads: 0,
            hidden_size: self.emb.dims(),
            vocab_size: self.emb.words().len(),
            max_seq_length: 0,
            pooling: Pooling::Mean,
            normalize: self.normalize,
            // A table lookup: no dense layers, the stored f32 vectors.
            precision: crate::Precision::F32,
        }
    }
}

/// What [`Engine::verify`] found in a valid file; displayed as `embd verify`
/// prints it (`embd, 102 tensors, model '...' (bert, 6 layers, dim 384),
/// checksums verified`).
#[derive(Debug, Clone)]
pub struct Verification {
    /// The container.
    pub format: FormatKind,
    /// Number of tensors.
    pub tensors: usize,
    /// The model, described (architecture, layers, dimension).
    pub model: String,
    /// The checksum status.
    pub checksums: ChecksumStatus,
}

impl std::fmt::Display for Verification {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}, {} tensors, {}, checksums {}",
            self.format.name(),
            self.tensors,
            self.model,
            self.checksums.describe()
        )
    }
}

/// Any model this library runs.
#[derive(Debug)]
pub enum Engine {
    /// A BERT-family encoder.
    Bert(Box<Embedder>),
    /// Static word embeddings.
    Static(Box<StaticEmbedder>),
}

impl Engine {
    /// Opens any supported model file, dispatching on its `architecture`.
    ///
    /// # Errors
    /// As [`Embedder::open`]; [`ErrorKind::Unsupported`] for architectures that
    /// only convert (GPT-2); [`ErrorKind::Model`] naming `Reranker` for a
    /// cross-encoder.
    pub fn open(path: impl AsRef<Path>, opts: &Options) -> Result<Engine> {
        let path = path.as_ref();
        let file = crate::embedder::open_model_file(path, opts)?;
        Engine::from_model_file(file, opts).map_err(|e| e.context(path.display()))
    }

    /// Checks a model file completely, as `embd verify` does: the container
    /// (every checksum it stores) and the model its `architecture` asks for
    /// (static word embeddings, GPT-2 tensor shapes, a cross-encoder built as
    /// [`crate::Reranker::from_model_file`] builds it, or a BERT-family encoder
    /// built as [`Embedder::from_model_file`] builds it).
    ///
    /// # Errors
    /// The first problem found: I/O, format, checksum, model or unsupported.
    pub fn verify(path: impl AsRef<Path>) -> Result<Verification> {
        let m = ModelFile::open(path, ReadOptions::default())?;
        let (format, tensors, checksums) = (m.format, m.tensors.len(), m.report.checksums);
        let arch = m
            .metadata
            .get("architecture")
            .cloned()
            .unwrap_or_else(|| "bert".into());
        let classifier =
            crate::model::head::Task::of(&m.metadata)? == crate::model::head::Task::Classification;
        let model = match arch.as_str() {
            _ if classifier => {
                let r = crate::Reranker::from_model_file(m, &Options::new())?;
                let info = r.info();
                format!(
                    "cross-encoder '{}' ({}, {} layers, {} label{}, {})",
                    info.name,
                    arch,
                    info.num_layers,
                    r.num_labels(),
                    if r.num_labels() == 1 { "" } else { "s" },
                    r.activation().name()
                )
            }
            "static" => {
                let e = Embeddings::from_model_file(m)?;
                format!(
                    "static word embeddings ({} rows, dim {})",
                    e.rows(),
                    e.dims()
                )
            }
            "gpt2" => {
                let cfg = crate::formats::lwt::Gpt2Config::from_metadata(&m.metadata)?;
                cfg.check_tensors(&m)?;
                format!("gpt2 ({} layers, n_embd {})", cfg.n_layer, cfg.n_embd)
            }
            _ => {
                let e = Embedder::from_model_file(m, &Options::new())?;
                let info = e.info();
                format!(
                    "model '{}' ({}, {} layers, dim {})",
                    info.name,
                    e.config().architecture,
                    info.num_layers,
                    info.dim
                )
            }
        };
        Ok(Verification {
            format,
            tensors,
            model,
            checksums,
        })
    }

    /// Builds the engine a parsed model file asks for.
    pub fn from_model_file(file: ModelFile, opts: &Options) -> Result<Engine> {
        if crate::model::head::Task::of(&file.metadata)? == crate::model::head::Task::Classification
        {
            return Err(crate::reranker::not_an_embedder());
        }
        match file.metadata.get("architecture").map(String::as_str) {
            Some("static") => Ok(Engine::Static(Box::new(StaticEmbedder::from_model_file(
                file, opts,
            )?))),
            Some("gpt2") => Err(Error::unsupported(
                "GPT-2 models can be converted and inspected but not run as sentence embedders",
            )),
            _ => Ok(Engine::Bert(Box::new(Embedder::from_model_file(
                file, opts,
            )?))),
        }
    }

    /// Output dimension.
    pub fn dim(&self) -> usize {
        match self {
            Engine::Bert(e) => e.dim(),
            Engine::Static(s) => s.dim(),
        }
    }

    /// Maximum tokens per input (0 = unbounded, static models).
    pub fn max_seq_length(&self) -> usize {
        match self {
            Engine::Bert(e) => e.max_seq_length(),
            Engine::Static(_) => 0,
        }
    }

    /// Facts about the model.
    pub fn info(&self) -> ModelInfo {
        match self {
            Engine::Bert(e) => e.info(),
            Engine::Static(s) => s.info(),
        }
    }

    /// Token ids (BERT: with `[CLS]`/`[SEP]`, truncated; static: word indices).
    pub fn tokenize(&self, text: &str) -> Vec<u32> {
        match self {
            Engine::Bert(e) => e.tokenize(text),
            Engine::Static(s) => s.tokenize(text),
        }
    }

    /// Token ids without truncation.
    pub fn tokenize_full(&self, text: &str) -> Vec<u32> {
        match self {
            Engine::Bert(e) => e.tokenize_full(text),
            Engine::Static(s) => s.tokenize(text),
        }
    }

    /// `tokenize(text).len()`.
    pub fn count_tokens(&self, text: &str) -> usize {
        match self {
            Engine::Bert(e) => e.count_tokens(text),
            Engine::Static(s) => s.count_tokens(text),
        }
    }

    /// Embeds a batch into `out` (row-major `n x dim`).
    pub fn embed_into<S: AsRef<str> + Sync>(&self, texts: &[S], out: &mut [f32]) -> Result<()> {
        self.embed_into_ex(texts, out, None)
    }

    /// Embeds a batch into `out`, filling `info` (when given, one entry per
    /// text) with each text's token count and truncation flag.
    pub fn embed_into_ex<S: AsRef<str> + Sync>(
        &self,
        texts: &[S],
        out: &mut [f32],
        info: Option<&mut [TextInfo]>,
    ) -> Result<()> {
        match self {
            Engine::Bert(e) => e.embed_into_ex(texts, out, info),
            Engine::Static(s) => s.embed_into_ex(texts, out, info),
        }
    }

    /// Floats per vector of a call with `opts` ([`Embedder::plan`]).
    ///
    /// # Errors
    /// As [`Embedder::plan`]; [`crate::ErrorKind::Unsupported`] for non-default
    /// options on a static word-embedding model.
    pub fn call_dim(&self, opts: &crate::CallOptions) -> Result<usize> {
        match self {
            Engine::Bert(e) => Ok(e.plan(opts)?.dim()),
            Engine::Static(s) if *opts == crate::CallOptions::default() => Ok(s.dim()),
            Engine::Static(_) => Err(static_call_options()),
        }
    }

    /// [`Embedder::embed_with`]: per-call options (static word-embedding
    /// models take only the defaults).
    ///
    /// # Errors
    /// As [`Embedder::embed_with`]; [`crate::ErrorKind::Unsupported`] for
    /// non-default options on a static model.
    pub fn embed_with<S: AsRef<str> + Sync>(
        &self,
        texts: &[S],
        opts: &crate::CallOptions,
        out: &mut [f32],
        info: Option<&mut [TextInfo]>,
    ) -> Result<()> {
        match self {
            Engine::Bert(e) => e.embed_with(texts, opts, out, info),
            Engine::Static(s) if *opts == crate::CallOptions::default() => {
                s.embed_into_ex(texts, out, info)
            }
            Engine::Static(_) => Err(static_call_options()),
        }
    }

    /// Embeds a batch into a new row-major vector, with each text's [`TextInfo`].
    pub fn embed_with_info<S: AsRef<str> + Sync>(
        &self,
        texts: &[S],
    ) -> Result<(Vec<f32>, Vec<TextInfo>)> {
        let mut out = vec![0.0; texts.len() * self.dim()];
        let mut info = vec![TextInfo::default(); texts.len()];
        self.embed_into_ex(texts, &mut out, Some(&mut info))?;
        Ok((out, info))
    }

    /// Embeds a batch into a new row-major vector.
    pub fn embed<S: AsRef<str> + Sync>(&self, texts: &[S]) -> Result<Vec<f32>> {
        let mut out = vec![0.0; texts.len() * self.dim()];
        self.embed_into(texts, &mut out)?;
        Ok(out)
    }

    /// The ranges `int8` / `uint8` output uses (see
    /// [`Embedder::output_ranges`]).
    pub fn output_ranges(&self) -> Option<&OutputRanges> {
        match self {
            Engine::Bert(e) => e.output_ranges(),
            Engine::Static(s) => s.output_ranges.as_ref(),
        }
    }

    /// Embeds a batch and quantizes it (see [`Embedder::embed_quantized_into`]).
    pub fn embed_quantized_into<S: AsRef<str> + Sync>(
        &self,
        texts: &[S],
        precision: OutputPrecision,
        out: &mut [u8],
        info: Option<&mut [TextInfo]>,
    ) -> Result<()> {
        match self {
            Engine::Bert(e) => e.embed_quantized_into(texts, precision, out, info),
            Engine::Static(s) => crate::embedder::embed_quantized(
                texts,
                s.dim(),
                precision,
                s.output_ranges.as_ref(),
                out,
                info,
                |t, o, i, _| (s.embed_into_ex(t, o, i), t.len()),
            ),
        }
    }

    /// The BERT embedder, if this is one.
    pub fn as_bert(&self) -> Option<&Embedder> {
        match self {
            Engine::Bert(e) => Some(e),
            Engine::Static(_) => None,
        }
    }
}

fn static_call_options() -> Error {
    Error::unsupported("per-call options are not supported by static word-embedding models")
}
