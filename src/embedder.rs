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
use crate::formats::{FormatKind, ModelFile};
use crate::model::config::{ModelConfig, Pooling};
use crate::options::Options;

/// Most texts accepted by one embedding call; larger requests are refused with
/// [`ErrorKind::LimitExceeded`] (split them into several calls).
pub const MAX_BATCH: usize = 1 << 20;

/// Longest text accepted, in bytes (64 MiB); longer texts are refused with
/// [`ErrorKind::LimitExceeded`]. Texts are truncated to `max_seq_length` tokens
/// after tokenization, so this bound only limits tokenization work.
pub const MAX_TEXT_BYTES: usize = 1 << 26;

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
}

/// An open model: immutable, `Send + Sync`, shareable across threads.
pub struct Embedder {
    _todo: (),
}

impl Embedder {
    /// Opens a model file (any supported container), validates it and prepares
    /// the engine.
    ///
    /// # Errors
    /// I/O, format, checksum, unsupported or model errors, naming the problem.
    pub fn open(path: impl AsRef<Path>, opts: &Options) -> Result<Embedder> {
        let _ = (path.as_ref(), opts);
        Err(Error::new(ErrorKind::Internal, "engine not built yet"))
    }

    /// Builds the engine over an already parsed model file.
    pub fn from_model_file(file: ModelFile, opts: &Options) -> Result<Embedder> {
        let _ = (file, opts);
        Err(Error::new(ErrorKind::Internal, "engine not built yet"))
    }

    /// Output dimension.
    pub fn dim(&self) -> usize {
        0
    }

    /// Effective maximum sequence length (tokens incl. [CLS]/[SEP]).
    pub fn max_seq_length(&self) -> usize {
        0
    }

    /// The model's configuration (as read from the file).
    pub fn config(&self) -> &ModelConfig {
        unimplemented!()
    }

    /// Facts about the model.
    pub fn info(&self) -> ModelInfo {
        unimplemented!()
    }

    /// Token ids as the model sees them: `[CLS]`, text ids truncated to
    /// `max_seq_length - 2`, `[SEP]`.
    pub fn tokenize(&self, text: &str) -> Vec<u32> {
        let _ = text;
        Vec::new()
    }

    /// Token ids without truncation (still with `[CLS]`/`[SEP]`).
    pub fn tokenize_full(&self, text: &str) -> Vec<u32> {
        let _ = text;
        Vec::new()
    }

    /// `tokenize(text).len()`, without building the vector when possible.
    pub fn count_tokens(&self, text: &str) -> usize {
        self.tokenize(text).len()
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
        let _ = (texts, out);
        Err(Error::new(ErrorKind::Internal, "engine not built yet"))
    }

    /// Embeds one text.
    pub fn embed_one(&self, text: &str) -> Result<Vec<f32>> {
        self.embed(&[text])
    }

    /// Embeds already tokenized inputs (each with `[CLS]`/`[SEP]`, at most
    /// `max_seq_length` ids, every id below the vocabulary size).
    pub fn embed_ids(&self, ids: &[&[u32]], out: &mut [f32]) -> Result<()> {
        let _ = (ids, out);
        Err(Error::new(ErrorKind::Internal, "engine not built yet"))
    }
}

/// Cosine similarity of two vectors of equal length (0 when either is zero).
pub fn cosine_similarity(a: &[f32], b: &[f32]) -> f32 {
    let n = a.len().min(b.len());
    let (mut dot, mut na, mut nb) = (0.0f64, 0.0f64, 0.0f64);
    for i in 0..n {
        let (x, y) = (f64::from(a[i]), f64::from(b[i]));
        dot += x * y;
        na += x * x;
        nb += y * y;
    }
    if na == 0.0 || nb == 0.0 {
        return 0.0;
    }
    (dot / (na.sqrt() * nb.sqrt())) as f32
}
