//! # embedder
//!
//! Sentence embeddings, sparse and multi-vector outputs and reranking on the
//! CPU, behind a C ABI. Runs the transformer families of [`model::arch`]
//! (BERT, MPNet, RoBERTa, XLM-RoBERTa, ModernBERT, and the Qwen3 and Gemma3
//! (EmbeddingGemma) decoders) as embedders, as cross-encoders and as LLM
//! rerankers ([`Reranker`]), and static word embeddings ([`StaticEmbedder`]),
//! from memory-mapped EMBD `.weights` files, the other containers of
//! [`formats`] or HuggingFace folders. Tokenizes exactly like HuggingFace's
//! fast tokenizers ([`tokenizer`]: WordPiece, SentencePiece Unigram, byte-level
//! and SentencePiece BPE), and produces the vectors and scores
//! sentence-transformers produces.
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]
#![warn(clippy::undocumented_unsafe_blocks)]
// The MSRV is 1.89 for the AVX-512 intrinsics of `kernels::sgemm`; the code
// base keeps the `x % n == 0` style rather than `is_multiple_of` (1.87).

pub mod atomic_write;
pub mod capi;
pub mod compat;
pub mod convert;
pub mod embedder;
pub mod engine;
pub mod error;
pub mod formats;
pub mod hub;
pub mod import;
pub mod kernels;
pub mod limits;
pub mod model;
pub mod options;
pub mod quantize;
pub mod reranker;
pub(crate) mod runtime;
#[doc(hidden)]
pub mod testutil;
pub mod threads;
pub mod tokenizer;
pub mod vector;

pub use embedder::{CallPlan, Embedder, EncodeRequest, Encoded, ModelInfo, TextInfo};
pub use engine::{Engine, StaticEmbedder};
pub use error::{Error, ErrorKind, Result};
pub use formats::{DType, FormatKind, ModelFile, ReadOptions};
pub use limits::{MAX_BATCH, MAX_TEXT_BYTES};
pub use model::config::{Activation, ModelConfig};
pub use model::multi_vector::MultiVector;
pub use model::outputs::{EncodeTask, Output, OutputKind, Outputs};
pub use model::pooling::Pooling;
pub use model::precision::Precision;
pub use model::sparse::SparseVector;
pub use options::{CallOptions, Options, Truncation};
pub use quantize::{OutputPrecision, OutputRanges};
pub use reranker::{Ranked, Reranker};
pub use tokenizer::vocab::{SpecialIds, Vocab};
/// Cosine similarity of two embeddings (0 when either is zero): [`vector::cosine`].
pub use vector::cosine as cosine_similarity;
pub use vector::Matryoshka;
