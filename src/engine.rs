//! [`Engine`]: whatever embedding model a file holds, behind one interface.
//!
//! An encoder file (any registered architecture) opens as an [`Embedder`]; a
//! static word-embedding file (finalfusion `.fifu`, or any container whose
//! metadata says `architecture` = `static`) opens as a [`StaticEmbedder`].
//! Both implement [`Embed`], the calls every embedding model answers, and
//! `Engine` is one of them behind that trait: it dereferences to `dyn
//! Embed`, whose generic calls (`embed`, `embed_into_ex`, ...) are written
//! once below. The C API's `embd_open` and the CLI use this type, so every
//! supported file works through the same calls.

use std::path::Path;

use crate::embedder::{check_batch, check_dimensions, check_info, Embedder, ModelInfo, TextInfo};
use crate::error::{Error, ErrorKind, Result};
use crate::formats::finalfusion::Embeddings;
use crate::formats::{ChecksumStatus, FormatKind, ModelFile, ReadOptions};
use crate::model::dense::cut_rows;
use crate::model::pooling::Pooling;
use crate::model::static_vocab::{Behaviour, StaticVocab};
use crate::options::CallOptions;
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

    /// Number of whitespace-separated words.
    fn count_words(text: &str) -> usize {
        text.split_whitespace().count()
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

/// The calls every embedding model answers ([`Embedder`],
/// [`StaticEmbedder`]), over texts given as `&str`; [`Engine`] is one of them
/// behind this trait.
pub trait Embed: Send + Sync + std::fmt::Debug {
    /// Output dimension.
    fn dim(&self) -> usize;
    /// Maximum tokens per input (0 = unbounded, static models).
    fn max_seq_length(&self) -> usize;
    /// Facts about the model.
    fn info(&self) -> ModelInfo;
    /// Token ids as the model sees them (encoders: with their special tokens,
    /// truncated; static: word indices).
    fn tokenize(&self, text: &str) -> Vec<u32>;
    /// Token ids without truncation.
    fn tokenize_full(&self, text: &str) -> Vec<u32>;
    /// `tokenize(text).len()`.
    fn count_tokens(&self, text: &str) -> usize;
    /// Floats per vector of a call with `opts`.
    ///
    /// # Errors
    /// Options the model cannot apply.
    fn call_dim(&self, opts: &CallOptions) -> Result<usize>;
    /// Embeds `texts` under `opts` into `out` (row-major, `n x call_dim`),
    /// filling `info` when given.
    ///
    /// # Errors
    /// As [`Embedder::embed_with`].
    fn embed_texts(
        &self,
        texts: &[&str],
        opts: &CallOptions,
        out: &mut [f32],
        info: Option<&mut [TextInfo]>,
    ) -> Result<()>;
    /// The ranges `int8` / `uint8` output uses.
    fn output_ranges(&self) -> Option<&OutputRanges>;
    /// Embeds and quantizes (see [`Embedder::embed_quantized_into`]); by
    /// default the vectors of [`Embed::embed_texts`] with default call
    /// options (the static engines).
    ///
    /// # Errors
    /// As [`Embedder::embed_quantized_into`].
    fn embed_quantized_texts(
        &self,
        texts: &[&str],
        precision: OutputPrecision,
        out: &mut [u8],
        info: Option<&mut [TextInfo]>,
    ) -> Result<()> {
        let call = CallOptions::default();
        crate::embedder::embed_quantized(
            texts,
            self.dim(),
            precision,
            self.output_ranges(),
            out,
            info,
            |t, o, i, _| (self.embed_texts(t, &call, o, i), t.len()),
        )
    }
    /// The model as an [`Embedder`], if it is one (its outputs beyond dense
    /// vectors, token vectors, per-call plans).
    fn as_embedder(&self) -> Option<&Embedder> {
        None
    }
    /// The model as an [`Embedder`], if it is one, by value (else the model
    /// back).
    ///
    /// # Errors
    /// The model itself when it is not an [`Embedder`].
    fn into_embedder(self: Box<Self>) -> std::result::Result<Box<Embedder>, Box<dyn Embed>>;
}

impl Embed for Embedder {
    fn dim(&self) -> usize {
        Embedder::dim(self)
    }
    fn max_seq_length(&self) -> usize {
        Embedder::max_seq_length(self)
    }
    fn info(&self) -> ModelInfo {
        Embedder::info(self)
    }
    fn tokenize(&self, text: &str) -> Vec<u32> {
        Embedder::tokenize(self, text)
    }
    fn tokenize_full(&self, text: &str) -> Vec<u32> {
        Embedder::tokenize_full(self, text)
    }
    fn count_tokens(&self, text: &str) -> usize {
        Embedder::count_tokens(self, text)
    }
    fn call_dim(&self, opts: &CallOptions) -> Result<usize> {
        Ok(self.plan(opts)?.dim())
    }
    fn embed_texts(
        &self,
        texts: &[&str],
        opts: &CallOptions,
        out: &mut [f32],
        info: Option<&mut [TextInfo]>,
    ) -> Result<()> {
        self.embed_with(texts, opts, out, info)
    }
    fn output_ranges(&self) -> Option<&OutputRanges> {
        Embedder::output_ranges(self)
    }
    fn embed_quantized_texts(
        &self,
        texts: &[&str],
        precision: OutputPrecision,
        out: &mut [u8],
        info: Option<&mut [TextInfo]>,
    ) -> Result<()> {
        self.embed_quantized_into(texts, precision, out, info)
    }
    fn as_embedder(&self) -> Option<&Embedder> {
        Some(self)
    }
    fn into_embedder(self: Box<Self>) -> std::result::Result<Box<Embedder>, Box<dyn Embed>> {
        Ok(self)
    }
}

impl Embed for StaticEmbedder {
    fn dim(&self) -> usize {
        self.dim
    }
    fn max_seq_length(&self) -> usize {
        0
    }
    /// Facts about the model (layers and heads are 0; `max_seq_length` 0 =
    /// unbounded).
    fn info(&self) -> ModelInfo {
        ModelInfo {
            name: self.name.clone(),
            format: self.format,
            dim: self.dim,
            num_layers: 0,
            num_heads: 0,
            hidden_size: self.emb.dims(),
            vocab_size: self.emb.words().len(),
            max_seq_length: 0,
            pooling: Pooling::Mean,
            normalize: self.normalize,
            // A table lookup: no dense layers, the stored f32 vectors.
            precision: crate::model::precision::Precision::F32,
        }
    }
    /// Vocabulary index of each whitespace-separated word, `u32::MAX` for
    /// words outside the vocabulary (their vector, if any, comes from
    /// subwords).
    fn tokenize(&self, text: &str) -> Vec<u32> {
        text.split_whitespace()
            .map(|w| {
                self.emb
                    .word_index(w)
                    .and_then(|i| u32::try_from(i).ok())
                    .unwrap_or(u32::MAX)
            })
            .collect()
    }
    fn tokenize_full(&self, text: &str) -> Vec<u32> {
        self.tokenize(text)
    }
    /// Number of whitespace-separated words.
    fn count_tokens(&self, text: &str) -> usize {
        StaticEmbedder::count_words(text)
    }
    fn call_dim(&self, opts: &CallOptions) -> Result<usize> {
        check_static_call(opts)?;
        Ok(self.dim)
    }
    /// Each text's word count in `info` (never truncated).
    fn embed_texts(
        &self,
        texts: &[&str],
        opts: &CallOptions,
        out: &mut [f32],
        info: Option<&mut [TextInfo]>,
    ) -> Result<()> {
        check_static_call(opts)?;
        let (dim, full) = (self.dim, self.emb.dims());
        check_batch(texts, out.len(), dim)?;
        check_info(texts.len(), info.as_deref())?;
        if let Some(info) = info {
            for (t, i) in texts.iter().zip(info.iter_mut()) {
                *i = TextInfo {
                    tokens: StaticEmbedder::count_words(t),
                    truncated: false,
                };
            }
        }
        for (t, row) in texts.iter().zip(out.chunks_mut(dim)) {
            match self.emb.embed_text(t, self.normalize) {
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
    fn output_ranges(&self) -> Option<&OutputRanges> {
        self.output_ranges.as_ref()
    }
    fn into_embedder(self: Box<Self>) -> std::result::Result<Box<Embedder>, Box<dyn Embed>> {
        Err(self)
    }
}

/// A static vocabulary embedder (model2vec / potion, sentence-transformers'
/// `StaticEmbedding`): the text's token ids looked up in one table and
/// averaged ([`crate::model::static_vocab`]), as the library the file
/// follows does. No transformer runs.
pub struct VocabEmbedder {
    model: StaticVocab,
    tokenizer: crate::tokenizer::Tokenizer,
    name: String,
    format: FormatKind,
    /// Output dimension (the [`Options::dimensions`] cut, or all).
    dim: usize,
    /// Ranges of `int8` / `uint8` output.
    output_ranges: Option<OutputRanges>,
}

impl std::fmt::Debug for VocabEmbedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VocabEmbedder")
            .field("name", &self.name)
            .field("behaviour", &self.model.behaviour())
            .field("dim", &self.dim)
            .finish_non_exhaustive()
    }
}

impl VocabEmbedder {
    /// Builds the embedder over a model file whose metadata says
    /// `model2vec`.
    ///
    /// # Errors
    /// [`ErrorKind::Model`] for a missing table or key; options that do not
    /// apply (a token limit, windows, prompts, another normalization than
    /// the library's), named.
    pub fn from_model_file(file: ModelFile, opts: &Options) -> Result<VocabEmbedder> {
        for (set, what) in [
            (opts.max_seq_length.is_some(), "max_seq_length"),
            (opts.window_overlap.is_some(), "long-text windows"),
            (
                opts.prompt.as_deref().is_some_and(|p| !p.is_empty()) || opts.prompt_name.is_some(),
                "prompts",
            ),
            (
                opts.matryoshka != crate::vector::Matryoshka::Truncate,
                "the layer-norm Matryoshka recipe",
            ),
        ] {
            if set {
                return Err(Error::invalid_argument(format!(
                    "{what} do not apply to static vocabulary models"
                )));
            }
        }
        let format = file.format;
        let name = file
            .metadata
            .get("model_name")
            .cloned()
            .unwrap_or_else(|| "static-vocabulary".to_string());
        let vocab = file
            .vocab
            .clone()
            .ok_or_else(|| Error::model("static vocabulary model without a vocabulary"))?;
        let file = std::sync::Arc::new(file);
        let tokenizer = crate::model::static_vocab::tokenizer(&file, vocab.clone())?;
        let mut model = StaticVocab::load(&file, &vocab)?;
        if let Some(n) = opts.normalize {
            model.set_normalize(n);
        }
        let full = model.dim();
        let dim = check_dimensions(opts.dimensions, full)?;
        let output_ranges =
            crate::quantize::resolve_ranges(&file, opts.output_ranges.as_ref(), full, dim)?;
        Ok(VocabEmbedder {
            model,
            tokenizer,
            name,
            format,
            dim,
            output_ranges,
        })
    }

    /// The library whose vectors the model gives.
    pub fn behaviour(&self) -> Behaviour {
        self.model.behaviour()
    }
}

impl Embed for VocabEmbedder {
    fn dim(&self) -> usize {
        self.dim
    }
    /// model2vec's `max_length`; 0 (unbounded) for sentence-transformers.
    fn max_seq_length(&self) -> usize {
        self.model.max_length().unwrap_or(0)
    }
    fn info(&self) -> ModelInfo {
        ModelInfo {
            name: self.name.clone(),
            format: self.format,
            dim: self.dim,
            num_layers: 0,
            num_heads: 0,
            hidden_size: self.model.dim(),
            vocab_size: self.model.vocab_size(),
            max_seq_length: self.max_seq_length(),
            pooling: Pooling::Mean,
            normalize: self.model.normalize(),
            precision: crate::model::precision::Precision::F32,
        }
    }
    /// The ids averaged (no special tokens; model2vec: cut, `[UNK]`
    /// dropped).
    fn tokenize(&self, text: &str) -> Vec<u32> {
        let mut ids = Vec::new();
        self.model.ids(&self.tokenizer, text, &mut ids);
        ids
    }
    fn tokenize_full(&self, text: &str) -> Vec<u32> {
        let mut ids = Vec::new();
        self.tokenizer.encode_raw(text, &mut ids);
        ids
    }
    fn count_tokens(&self, text: &str) -> usize {
        self.tokenize(text).len()
    }
    fn call_dim(&self, opts: &CallOptions) -> Result<usize> {
        check_static_call(opts)?;
        Ok(self.dim)
    }
    /// Each text's averaged id count in `info`; truncated when model2vec cut
    /// ids.
    fn embed_texts(
        &self,
        texts: &[&str],
        opts: &CallOptions,
        out: &mut [f32],
        mut info: Option<&mut [TextInfo]>,
    ) -> Result<()> {
        check_static_call(opts)?;
        let (dim, full) = (self.dim, self.model.dim());
        check_batch(texts, out.len(), dim)?;
        check_info(texts.len(), info.as_deref())?;
        let (mut ids, mut v) = (Vec::new(), vec![0.0f32; full]);
        for (i, (t, row)) in texts.iter().zip(out.chunks_mut(dim)).enumerate() {
            let all = self.model.ids(&self.tokenizer, t, &mut ids);
            if let Some(info) = info.as_deref_mut() {
                info[i] = TextInfo {
                    tokens: ids.len(),
                    truncated: self.model.max_length().is_some_and(|m| all > m),
                };
            }
            if dim == full {
                self.model.embed(&ids, row)?;
            } else {
                self.model.embed(&ids, &mut v)?;
                cut_rows(&v, full, row, dim, self.model.normalize());
            }
        }
        Ok(())
    }
    fn output_ranges(&self) -> Option<&OutputRanges> {
        self.output_ranges.as_ref()
    }
    fn into_embedder(self: Box<Self>) -> std::result::Result<Box<Embedder>, Box<dyn Embed>> {
        Err(self)
    }
}

/// Static word-embedding models take only the default call options.
fn check_static_call(opts: &CallOptions) -> Result<()> {
    if *opts == CallOptions::default() {
        Ok(())
    } else {
        Err(Error::unsupported(
            "per-call options are not supported by static word-embedding models",
        ))
    }
}

/// Any embedding model this library runs: an [`Embedder`] or a
/// [`StaticEmbedder`], answering the calls of [`Embed`].
#[derive(Debug)]
pub struct Engine {
    model: Box<dyn Embed>,
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
        let file = crate::runtime::open_model_file(path, opts)?;
        Engine::from_model_file(file, opts).map_err(|e| e.context(path.display()))
    }

    /// Checks a model file completely, as `embd verify` does: the container
    /// (every checksum it stores) and the model its `architecture` asks for
    /// (static word embeddings, GPT-2 tensor shapes, a cross-encoder built as
    /// [`crate::reranker::Reranker::from_model_file`] builds it, or a BERT-family encoder
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
                let r = crate::reranker::Reranker::from_model_file(m, &Options::new())?;
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
            crate::model::static_vocab::ARCHITECTURE => {
                let e = VocabEmbedder::from_model_file(m, &Options::new())?;
                let info = e.info();
                format!(
                    "static vocabulary model '{}' ({} ids, dim {}, {} behaviour)",
                    info.name,
                    info.vocab_size,
                    info.dim,
                    e.behaviour().name()
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
            return Err(crate::model::head::not_an_embedder());
        }
        let model: Box<dyn Embed> =
            match file.metadata.get("architecture").map(String::as_str) {
                Some("static") => Box::new(StaticEmbedder::from_model_file(file, opts)?),
                Some(crate::model::static_vocab::ARCHITECTURE) => {
                    Box::new(VocabEmbedder::from_model_file(file, opts)?)
                }
                Some("gpt2") => return Err(Error::unsupported(
                    "GPT-2 models can be converted and inspected but not run as sentence embedders",
                )),
                _ => Box::new(Embedder::from_model_file(file, opts)?),
            };
        Ok(Engine { model })
    }

    /// The model, answering every call of [`Embed`] (as the engine itself
    /// does, through `Deref`).
    pub fn model(&self) -> &dyn Embed {
        &*self.model
    }

    /// The encoder embedder by value, if the model is one; else the engine
    /// back.
    ///
    /// # Errors
    /// The engine itself when it holds another kind of model.
    pub fn into_embedder(self) -> std::result::Result<Embedder, Engine> {
        self.model
            .into_embedder()
            .map(|e| *e)
            .map_err(|model| Engine { model })
    }
}

/// [`Engine`] answers every call of [`Embed`] (`engine.dim()`,
/// `engine.tokenize(..)`, `engine.as_embedder()`, ...) and the generic calls
/// of `dyn Embed` below.
impl std::ops::Deref for Engine {
    type Target = dyn Embed;

    fn deref(&self) -> &(dyn Embed + 'static) {
        &*self.model
    }
}

/// The calls over any texts (`&[S]`, `S: AsRef<str>`) of every embedding
/// model, written once over [`Embed`]'s object-safe calls.
impl dyn Embed {
    /// Embeds a batch into `out` (row-major `n x dim`).
    ///
    /// # Errors
    /// As [`Embedder::embed_into`].
    pub fn embed_into<S: AsRef<str> + Sync>(&self, texts: &[S], out: &mut [f32]) -> Result<()> {
        self.embed_into_ex(texts, out, None)
    }

    /// Embeds a batch into `out`, filling `info` (when given, one entry per
    /// text) with each text's token count and truncation flag.
    ///
    /// # Errors
    /// As [`Embedder::embed_into_ex`].
    pub fn embed_into_ex<S: AsRef<str> + Sync>(
        &self,
        texts: &[S],
        out: &mut [f32],
        info: Option<&mut [TextInfo]>,
    ) -> Result<()> {
        self.embed_with(texts, &CallOptions::default(), out, info)
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
        opts: &CallOptions,
        out: &mut [f32],
        info: Option<&mut [TextInfo]>,
    ) -> Result<()> {
        self.embed_texts(&strs(texts), opts, out, info)
    }

    /// Embeds a batch into a new row-major vector, with each text's [`TextInfo`].
    ///
    /// # Errors
    /// As [`Embedder::embed_into_ex`].
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
    ///
    /// # Errors
    /// As [`Embedder::embed_into`].
    pub fn embed<S: AsRef<str> + Sync>(&self, texts: &[S]) -> Result<Vec<f32>> {
        let mut out = vec![0.0; texts.len() * self.dim()];
        self.embed_into(texts, &mut out)?;
        Ok(out)
    }

    /// Embeds a batch and quantizes it (see [`Embedder::embed_quantized_into`]).
    ///
    /// # Errors
    /// As [`Embedder::embed_quantized_into`].
    pub fn embed_quantized_into<S: AsRef<str> + Sync>(
        &self,
        texts: &[S],
        precision: OutputPrecision,
        out: &mut [u8],
        info: Option<&mut [TextInfo]>,
    ) -> Result<()> {
        self.embed_quantized_texts(&strs(texts), precision, out, info)
    }
}

/// The texts as `&str`s (the object-safe form of [`Embed`]'s calls).
fn strs<S: AsRef<str>>(texts: &[S]) -> Vec<&str> {
    texts.iter().map(AsRef::as_ref).collect()
}
