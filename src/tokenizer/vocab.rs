//! The WordPiece vocabulary: id <-> token, plus the five special ids.

use std::collections::HashMap;
use std::sync::OnceLock;

use crate::error::{Error, Result};

/// Ids of the special tokens, in the EMBD order (pad, unk, cls, sep, mask).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SpecialIds {
    /// `[PAD]`.
    pub pad: u32,
    /// `[UNK]`.
    pub unk: u32,
    /// `[CLS]`.
    pub cls: u32,
    /// `[SEP]`.
    pub sep: u32,
    /// `[MASK]`.
    pub mask: u32,
}

impl SpecialIds {
    /// The five ids in EMBD order.
    pub fn as_array(&self) -> [u32; 5] {
        [self.pad, self.unk, self.cls, self.sep, self.mask]
    }
}

/// A vocabulary: tokens indexed by id, and a hash map from token to id built on
/// the first [`Vocab::id`] call (the tokenizer has its own maps, so opening a
/// model does not pay for this one).
#[derive(Debug, Clone)]
pub struct Vocab {
    tokens: Vec<String>,
    ids: OnceLock<HashMap<String, u32>>,
    specials: SpecialIds,
}

impl Vocab {
    /// Builds a vocabulary. Fails if a special id is out of range or the vocab is
    /// larger than `u32::MAX` entries. When a token string repeats, the first id
    /// wins for token -> id lookups (as in HF `vocab.txt` loading, where the last
    /// wins; real BERT vocabularies have no duplicates).
    pub fn new(tokens: Vec<String>, specials: SpecialIds) -> Result<Vocab> {
        let n = u32::try_from(tokens.len()).map_err(|_| {
            Error::model(format!(
                "vocabulary of {} tokens is too large",
                tokens.len()
            ))
        })?;
        for (name, id) in ["pad", "unk", "cls", "sep", "mask"]
            .iter()
            .zip(specials.as_array())
        {
            if id >= n {
                return Err(Error::model(format!(
                    "special token id {name}={id} is not below the vocabulary size {n}"
                )));
            }
        }
        Ok(Vocab {
            tokens,
            ids: OnceLock::new(),
            specials,
        })
    }

    /// Builds a vocabulary from tokens, finding `[PAD] [UNK] [CLS] [SEP] [MASK]` by name.
    pub fn from_tokens_bert(tokens: Vec<String>) -> Result<Vocab> {
        let find = |s: &str| {
            tokens
                .iter()
                .position(|t| t == s)
                .map(|i| i as u32)
                .ok_or_else(|| Error::model(format!("vocabulary has no {s} token")))
        };
        let specials = SpecialIds {
            pad: find("[PAD]")?,
            unk: find("[UNK]")?,
            cls: find("[CLS]")?,
            sep: find("[SEP]")?,
            mask: find("[MASK]")?,
        };
        Vocab::new(tokens, specials)
    }

    /// Reads a BERT `vocab.txt` (one token a line, UTF-8; only the line ending
    /// `\n` and a `\r` before it are removed) and finds the special tokens by name
    /// as [`Vocab::from_tokens_bert`].
    ///
    /// # Errors
    /// [`crate::ErrorKind::Io`]/[`crate::ErrorKind::NotFound`] if the file cannot be
    /// read, [`crate::ErrorKind::Model`] if it is not UTF-8 or lacks a special token.
    pub fn from_vocab_txt(path: impl AsRef<std::path::Path>) -> Result<Vocab> {
        let path = path.as_ref();
        let bytes = std::fs::read(path).map_err(|e| Error::io(path.display(), e))?;
        let text = String::from_utf8(bytes).map_err(|e| {
            Error::model(format!(
                "{}: vocabulary is not UTF-8 (byte {})",
                path.display(),
                e.utf8_error().valid_up_to()
            ))
        })?;
        Vocab::from_vocab_text(&text).map_err(|e| e.context(path.display()))
    }

    /// As [`Vocab::from_vocab_txt`], from the file's text.
    ///
    /// # Errors
    /// [`crate::ErrorKind::Model`] if a special token is missing.
    pub fn from_vocab_text(text: &str) -> Result<Vocab> {
        let body = text.strip_suffix('\n').unwrap_or(text);
        let tokens = if body.is_empty() {
            Vec::new()
        } else {
            body.split('\n')
                .map(|l| l.strip_suffix('\r').unwrap_or(l).to_string())
                .collect()
        };
        Vocab::from_tokens_bert(tokens)
    }

    /// Number of tokens.
    pub fn len(&self) -> usize {
        self.tokens.len()
    }

    /// True if there are no tokens.
    pub fn is_empty(&self) -> bool {
        self.tokens.is_empty()
    }

    /// The id of `token`, if present.
    pub fn id(&self, token: &str) -> Option<u32> {
        self.ids
            .get_or_init(|| {
                let mut ids = HashMap::with_capacity(self.tokens.len());
                for (i, t) in self.tokens.iter().enumerate() {
                    ids.entry(t.clone()).or_insert(i as u32);
                }
                ids
            })
            .get(token)
            .copied()
    }

    /// The token for `id`, if in range.
    pub fn token(&self, id: u32) -> Option<&str> {
        self.tokens.get(id as usize).map(String::as_str)
    }

    /// All tokens, by id.
    pub fn tokens(&self) -> &[String] {
        &self.tokens
    }

    /// The special ids.
    pub fn specials(&self) -> SpecialIds {
        self.specials
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn toks(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn finds_specials_by_name() {
        let v = Vocab::from_tokens_bert(toks(&["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a"]))
            .unwrap();
        assert_eq!(v.specials().as_array(), [0, 1, 2, 3, 4]);
        assert_eq!(v.id("a"), Some(5));
        assert_eq!(v.token(5), Some("a"));
        assert_eq!(v.token(6), None);
    }

    #[test]
    fn vocab_text_lines() {
        let v = Vocab::from_vocab_text("[PAD]\n[UNK]\r\n[CLS]\n[SEP]\n[MASK]\n a \n##b\n").unwrap();
        assert_eq!(v.len(), 7);
        assert_eq!(v.id(" a "), Some(5));
        assert_eq!(v.id("##b"), Some(6));
        assert_eq!(v.specials().unk, 1);
        assert!(Vocab::from_vocab_text("").is_err());
    }

    #[test]
    fn special_out_of_range_is_error() {
        let s = SpecialIds {
            pad: 0,
            unk: 9,
            cls: 0,
            sep: 0,
            mask: 0,
        };
        assert!(Vocab::new(toks(&["a"]), s).is_err());
    }
}
