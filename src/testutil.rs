//! Test fixtures, not part of the supported API: the one tiny BERT builder
//! shared by the unit tests, the integration tests (`tests/it`) and the fuzz
//! seeds (`fuzz/make_seeds.rs`).
//!
//! Always compiled (a few dozen lines) and hidden from the documentation, so
//! that every test target and the separate fuzz crate reach it without a
//! feature flag. Tensor names and shapes come from the model
//! ([`crate::model::encoder::required_tensors`], names from
//! [`crate::model::arch`]); callers choose the values.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::formats::{Backing, FormatKind, ModelFile, TensorEntry};
use crate::model::config::ModelConfig;
use crate::tokenizer::vocab::Vocab;

/// `len` pseudo-random values in `[-r, r)` (xorshift32 from a fixed seed:
/// the same values on every run, without an RNG crate).
pub fn pseudo_random(len: usize, r: f32) -> Vec<f32> {
    let mut s = 0x2545_f491_u32;
    (0..len)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 17;
            s ^= s << 5;
            (s >> 8) as f32 / (1u32 << 24) as f32 * 2.0 * r - r
        })
        .collect()
}

/// The shape of a tiny BERT encoder and its vocabulary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TinyBert {
    /// `hidden_size` (and `embedding_dim`).
    pub hidden: usize,
    /// `num_layers`.
    pub layers: usize,
    /// `intermediate_size`.
    pub intermediate: usize,
    /// `num_attention_heads` (must divide `hidden`).
    pub heads: usize,
    /// `max_position_emb` (also `max_seq_length`).
    pub max_position: usize,
    /// The vocabulary after the five BERT specials (`[PAD] [UNK] [CLS] [SEP]
    /// [MASK]`, ids 0 to 4).
    pub words: Vec<String>,
}

impl TinyBert {
    /// `hidden` wide, `layers` deep, `intermediate` feed-forward size,
    /// `max_position` positions; two heads and a 13-token vocabulary
    /// (`hello world the cat ##s a b über` after the specials).
    pub fn new(hidden: usize, layers: usize, intermediate: usize, max_position: usize) -> Self {
        TinyBert {
            hidden,
            layers,
            intermediate,
            heads: 2,
            max_position,
            words: ["hello", "world", "the", "cat", "##s", "a", "b", "über"]
                .iter()
                .map(|s| s.to_string())
                .collect(),
        }
    }

    /// The vocabulary: the five specials, then [`TinyBert::words`].
    pub fn vocab(&self) -> Vocab {
        let tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
            .iter()
            .map(|s| s.to_string())
            .chain(self.words.iter().cloned())
            .collect();
        Vocab::from_tokens_bert(tokens).expect("valid tiny vocabulary")
    }

    /// Complete EMBD metadata (mean pooling, normalized, uncased, exact GELU,
    /// `max_seq_length` = `max_position`).
    pub fn metadata(&self) -> BTreeMap<String, String> {
        [
            ("model_name", "tiny-bert".to_string()),
            ("model_version", "1.0.0".to_string()),
            ("embedding_dim", self.hidden.to_string()),
            ("vocab_size", (5 + self.words.len()).to_string()),
            ("num_layers", self.layers.to_string()),
            ("num_attention_heads", self.heads.to_string()),
            ("hidden_size", self.hidden.to_string()),
            ("intermediate_size", self.intermediate.to_string()),
            ("max_position_emb", self.max_position.to_string()),
            ("created_at", "2026-01-01T00:00:00Z".to_string()),
            ("architecture", "bert".to_string()),
            ("pooling", "mean".to_string()),
            ("normalize", "true".to_string()),
            ("max_seq_length", self.max_position.to_string()),
            ("do_lower_case", "true".to_string()),
            ("layer_norm_eps", "1e-12".to_string()),
            ("hidden_act", "gelu".to_string()),
            ("type_vocab_size", "2".to_string()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect()
    }

    /// Names and shapes of every tensor the encoder needs, in order
    /// ([`crate::model::encoder::required_tensors`]).
    pub fn shapes(&self) -> Vec<(String, Vec<usize>)> {
        let cfg = ModelConfig::from_metadata(&self.metadata()).expect("valid tiny config");
        crate::model::encoder::required_tensors(&cfg)
    }

    /// Every tensor the encoder needs (names, shapes and order of
    /// [`crate::model::encoder::required_tensors`]) as f32, with the values
    /// `values(name, shape)` returns (called once per tensor, in order).
    pub fn tensors(&self, mut values: impl FnMut(&str, &[usize]) -> Vec<f32>) -> Vec<TensorEntry> {
        self.shapes()
            .into_iter()
            .map(|(name, shape)| {
                let v = values(&name, &shape);
                TensorEntry::owned_f32(name, shape, &v)
            })
            .collect()
    }

    /// The model: [`TinyBert::metadata`], [`TinyBert::vocab`] and
    /// [`TinyBert::tensors`] in an in-memory EMBD [`ModelFile`].
    pub fn build(&self, values: impl FnMut(&str, &[usize]) -> Vec<f32>) -> ModelFile {
        model_file(self.metadata(), Some(self.vocab()), self.tensors(values))
    }
}

/// An in-memory EMBD [`ModelFile`] of these parts.
pub fn model_file(
    metadata: BTreeMap<String, String>,
    vocab: Option<Vocab>,
    tensors: Vec<TensorEntry>,
) -> ModelFile {
    ModelFile::new(
        FormatKind::Embd,
        Arc::new(Backing::from_bytes(&[])),
        metadata,
        vocab,
        tensors,
    )
    .expect("valid model")
}
