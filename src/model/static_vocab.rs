//! The static vocabulary runtime: model2vec / potion models and
//! sentence-transformers' `StaticEmbedding`. One vector per token id; a
//! text's vector is the mean of its ids' rows, normalized as the model
//! says. No transformer runs.
//!
//! The same folder gives other vectors in the two libraries, so a model
//! file records which one it follows ([`Behaviour`], metadata
//! [`KEY_BEHAVIOUR`]; `embd inspect` shows it):
//!
//! - sentence-transformers (`StaticEmbedding`, the default on a folder
//!   with a `modules.json`): the ids of the text without special tokens,
//!   cut only where `tokenizer.json` itself truncates (model2vec writes its
//!   `max_length` there), `[UNK]` kept; the mean of their rows, then
//!   `Normalize` when the module list has one.
//! - model2vec (`StaticModel.encode`, the default on a folder without
//!   one): the text cut to `max_length · median token length` characters,
//!   its ids without special tokens cut to `max_length`, `[UNK]` ids
//!   dropped; the mean of the rows, normalized when `config.json` says
//!   `normalize`.
//!
//! A text with no ids gets the zero vector. A vocabulary-quantized folder
//! (`mapping`, `weights`) is stored as one row per id, `embeddings[mapping[id]]
//! · weights[id]` rounded to f32 once (what sentence-transformers folds it
//! into and model2vec computes per lookup: the same bits).

use std::sync::Arc;

use crate::error::{Error, Result};
use crate::formats::ModelFile;
use crate::model::param::Table;
use crate::tokenizer::vocab::Vocab;
use crate::tokenizer::{Tokenizer, TokenizerConfig};

/// Metadata `architecture` of a static vocabulary model.
pub const ARCHITECTURE: &str = "model2vec";
/// Metadata key: the library whose behaviour the file follows
/// ([`Behaviour::name`]).
pub const KEY_BEHAVIOUR: &str = "static.behaviour";
/// Metadata key: model2vec's `max_length` (tokens; absent: none).
pub const KEY_MAX_LENGTH: &str = "static.max_length";
/// Metadata key: the truncation of `tokenizer.json` (tokens; absent: none),
/// what sentence-transformers' `StaticEmbedding` cuts at.
pub const KEY_TOKENIZER_MAX_LENGTH: &str = "static.tokenizer_max_length";
/// Tensor: one row per token id, `[vocab x dim]`.
pub const TABLE: &str = "static.embeddings";

/// Which library's vectors a static vocabulary model gives.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum Behaviour {
    /// sentence-transformers' `StaticEmbedding` (+ `Normalize`).
    #[default]
    SentenceTransformers,
    /// model2vec's `StaticModel.encode`.
    Model2Vec,
}

impl Behaviour {
    /// Every behaviour.
    pub const ALL: [Behaviour; 2] = [Behaviour::SentenceTransformers, Behaviour::Model2Vec];

    /// The stored and command-line name.
    pub fn name(self) -> &'static str {
        match self {
            Behaviour::SentenceTransformers => "sentence-transformers",
            Behaviour::Model2Vec => "model2vec",
        }
    }

    /// The behaviour called `name`.
    ///
    /// # Errors
    /// [`crate::ErrorKind::InvalidArgument`] naming the behaviours.
    pub fn from_name(name: &str) -> Result<Behaviour> {
        Behaviour::ALL
            .into_iter()
            .find(|b| b.name() == name.trim())
            .ok_or_else(|| {
                Error::invalid_argument(format!(
                    "static behaviour '{name}' is not one of sentence-transformers, model2vec"
                ))
            })
    }
}

/// An opened static vocabulary model.
pub struct StaticVocab {
    table: Table,
    dim: usize,
    vocab: usize,
    behaviour: Behaviour,
    /// model2vec's token limit.
    max_length: Option<usize>,
    /// The tokenizer's own truncation (sentence-transformers).
    tokenizer_max_length: Option<usize>,
    /// model2vec's character limit (`max_length · median token length`).
    max_chars: Option<usize>,
    unk: u32,
    normalize: bool,
}

impl StaticVocab {
    /// The model of `file` (metadata [`KEY_BEHAVIOUR`], `embedding_dim`,
    /// `normalize`, [`KEY_MAX_LENGTH`]; tensor [`TABLE`]) with its
    /// tokenizer's vocabulary `vocab`.
    ///
    /// # Errors
    /// A missing or invalid key or tensor, named.
    pub fn load(file: &Arc<ModelFile>, vocab: &Vocab) -> Result<StaticVocab> {
        let md = &file.metadata;
        let behaviour = match md.get(KEY_BEHAVIOUR) {
            Some(b) => Behaviour::from_name(b).map_err(|e| Error::model(e.message()))?,
            None => Behaviour::default(),
        };
        let usize_key = |k: &str| -> Result<Option<usize>> {
            md.get(k)
                .map(|v| {
                    v.trim().parse::<usize>().map_err(|_| {
                        Error::model(format!(
                            "metadata '{k}' = '{v}' is not a non-negative integer"
                        ))
                    })
                })
                .transpose()
        };
        let dim = usize_key("embedding_dim")?
            .filter(|&d| d > 0 && d <= crate::limits::MAX_INTERMEDIATE_SIZE)
            .ok_or_else(|| Error::model("metadata 'embedding_dim' is missing or out of range"))?;
        let normalize = match md.get("normalize") {
            None => true,
            Some(v) => crate::model::config::parse_bool("normalize", v.trim())?,
        };
        let max_length = usize_key(KEY_MAX_LENGTH)?;
        let tokenizer_max_length = usize_key(KEY_TOKENIZER_MAX_LENGTH)?;
        let n = vocab.len();
        let table = Table::load(file, TABLE, [n, dim], false)?;
        // model2vec: `int(np.median([len(token) for token in tokens]))`.
        let max_chars = max_length.map(|m| {
            let mut lens: Vec<usize> = vocab.tokens().iter().map(|t| t.chars().count()).collect();
            lens.sort_unstable();
            let median = match lens.len() {
                0 => 0,
                l if l % 2 == 1 => lens[l / 2],
                l => (lens[l / 2 - 1] + lens[l / 2]) / 2,
            };
            m.saturating_mul(median)
        });
        Ok(StaticVocab {
            table,
            dim,
            vocab: n,
            behaviour,
            max_length,
            tokenizer_max_length,
            max_chars,
            unk: vocab.specials().unk,
            normalize,
        })
    }

    /// The behaviour followed.
    pub fn behaviour(&self) -> Behaviour {
        self.behaviour
    }

    /// Vector width.
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// Ids in the vocabulary.
    pub fn vocab_size(&self) -> usize {
        self.vocab
    }

    /// Whether vectors are L2-normalized.
    pub fn normalize(&self) -> bool {
        self.normalize
    }

    /// Overrides the file's normalization.
    pub fn set_normalize(&mut self, on: bool) {
        self.normalize = on;
    }

    /// The token limit of the behaviour followed (`None`: unbounded).
    pub fn max_length(&self) -> Option<usize> {
        match self.behaviour {
            Behaviour::SentenceTransformers => self.tokenizer_max_length,
            Behaviour::Model2Vec => self.max_length,
        }
    }

    /// The ids of `text` that are averaged, into `out` (cleared first), and
    /// the number of ids the text has before model2vec's cut.
    pub fn ids(&self, tok: &Tokenizer, text: &str, out: &mut Vec<u32>) -> usize {
        out.clear();
        match self.behaviour {
            Behaviour::SentenceTransformers => {
                tok.encode_raw(text, out);
                let all = out.len();
                if let Some(m) = self.tokenizer_max_length {
                    out.truncate(m);
                }
                all
            }
            Behaviour::Model2Vec => {
                let cut = match self.max_chars {
                    Some(m) => text.char_indices().nth(m).map_or(text, |(i, _)| &text[..i]),
                    None => text,
                };
                tok.encode_raw(cut, out);
                let all = out.len();
                if let Some(m) = self.max_length {
                    out.truncate(m);
                }
                let unk = self.unk;
                out.retain(|&id| id != unk);
                all
            }
        }
    }

    /// The vector of `ids` into `dst` (`dim` floats): the mean of their
    /// rows (summed in f64, rounded once), normalized when the model
    /// normalizes; zeros without ids.
    ///
    /// # Errors
    /// An id outside the table (internal: the tokenizer gives none).
    pub fn embed(&self, ids: &[u32], dst: &mut [f32]) -> Result<()> {
        dst.fill(0.0);
        if ids.is_empty() {
            return Ok(());
        }
        let mut acc = vec![0.0f64; self.dim];
        let mut row = vec![0.0f32; self.dim];
        for &id in ids {
            if !self.table.row_into(id as usize, &mut row) {
                return Err(Error::new(
                    crate::error::ErrorKind::Internal,
                    format!("static model: token id {id} outside the table"),
                ));
            }
            for (a, &x) in acc.iter_mut().zip(&row) {
                *a += f64::from(x);
            }
        }
        let n = ids.len() as f64;
        for (d, a) in dst.iter_mut().zip(&acc) {
            *d = (a / n) as f32;
        }
        if self.normalize {
            crate::vector::l2_normalize(dst);
        }
        Ok(())
    }
}

/// The tokenizer a static vocabulary file carries over `vocab`: its stored
/// pipeline, or the BERT WordPiece of its metadata (`do_lower_case`,
/// `strip_accents`, `tokenize_chinese_chars`).
///
/// # Errors
/// A corrupt tokenizer description, named.
pub fn tokenizer(file: &ModelFile, vocab: Vocab) -> Result<Tokenizer> {
    if let Some(spec) = crate::model::tokenizer::spec_of(file, &vocab)? {
        return Tokenizer::from_spec(&spec, vocab);
    }
    let md = &file.metadata;
    let flag = |k: &str, d: bool| -> Result<bool> {
        match md.get(k) {
            None => Ok(d),
            Some(v) => crate::model::config::parse_bool(k, v.trim()),
        }
    };
    let lowercase = flag("do_lower_case", true)?;
    let strip_accents = match md.get("strip_accents").map(|s| s.trim()) {
        None | Some("") | Some("null") | Some("none") => lowercase,
        Some(v) => crate::model::config::parse_bool("strip_accents", v)?,
    };
    Ok(Tokenizer::new(
        vocab,
        TokenizerConfig {
            lowercase,
            strip_accents,
            handle_chinese_chars: flag("tokenize_chinese_chars", true)?,
            ..TokenizerConfig::bert_uncased()
        },
    ))
}
