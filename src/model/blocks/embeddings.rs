//! The embeddings block (HF `BertEmbeddings` / `RobertaEmbeddings` /
//! `MPNetEmbeddings` / `ModernBertEmbeddings`): word + token type + position
//! rows (each table the family has), then the norm (if the family has one).

use std::sync::Arc;

use crate::error::{Error, ErrorKind, Result};
use crate::formats::ModelFile;
use crate::kernels::Par;
use crate::model::param::{load_param, Param, Table};

use super::norm::{Norm, NormSpec};

/// How each token's absolute position id (its row of the position table) is
/// assigned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Positions {
    /// `0, 1, 2, ...` (BERT).
    Sequential,
    /// RoBERTa / MPNet (`create_position_ids_from_input_ids`): a token whose id
    /// equals the padding index `p` (metadata `padding_idx`) gets position `p`;
    /// every other token gets `p` + the number of non-padding tokens up to and
    /// including it (so `p + 1, p + 2, ...` for a text without padding ids).
    AfterPadding,
}

/// The embedding tables of a model: their modules (`.weight` after each)
/// and sizes, the position ids hook and the norm.
#[derive(Debug, Clone, Copy)]
pub struct EmbeddingsSpec<'a> {
    /// The word table `[vocab x hidden]`.
    pub word: &'a str,
    /// The absolute position table `[max_position x hidden]`, if any.
    pub position: Option<&'a str>,
    /// The token type table `[type_vocab x hidden]`, if any.
    pub token_type: Option<&'a str>,
    /// The norm after the sum, if any.
    pub norm: Option<(&'a str, NormSpec)>,
    /// The width.
    pub hidden: usize,
    /// Rows of the word table.
    pub vocab: usize,
    /// Rows of the token type table.
    pub type_vocab: usize,
    /// Rows of the position table.
    pub max_position: usize,
    /// The position ids hook.
    pub positions: Positions,
    /// `padding_idx` for [`Positions::AfterPadding`].
    pub padding_idx: usize,
    /// Whether word rows are multiplied by `sqrt(hidden)` (Gemma's
    /// `Gemma3TextScaledWordEmbedding`).
    pub scale: bool,
}

/// The embedding tables of a model.
pub struct Embeddings {
    hidden: usize,
    vocab: usize,
    /// The position ids hook.
    positions: Positions,
    /// `padding_idx` for [`Positions::AfterPadding`].
    padding_idx: usize,
    pub(crate) word: Table,
    /// The absolute position table, if the family has one.
    position: Option<Param>,
    /// The token type table (`[type_vocab x hidden]`), if the family has one.
    token_type: Option<Param>,
    /// Rows in `token_type`.
    type_vocab: usize,
    norm: Option<Norm>,
    /// The factor word rows are multiplied by (Gemma: `sqrt(hidden)`,
    /// rounded to f32 as torch stores it), if any.
    scale: Option<f32>,
}

impl Embeddings {
    /// Loads and checks the embedding tensors `spec` names.
    pub fn load(
        file: &Arc<ModelFile>,
        spec: &EmbeddingsSpec<'_>,
        int8: bool,
    ) -> Result<Embeddings> {
        let (h, v) = (spec.hidden, spec.vocab);
        let p = |name: &str, shape: &[usize]| load_param(file, name, shape, int8);
        let token_type = match spec.token_type {
            Some(t) => Some(p(&format!("{t}.weight"), &[spec.type_vocab, h])?),
            None => None,
        };
        let position = match spec.position {
            Some(t) => Some(p(&format!("{t}.weight"), &[spec.max_position, h])?),
            None => None,
        };
        let norm = match spec.norm {
            Some((m, n)) => Some(Norm::with_spec(file, m, n, h, int8)?),
            None => None,
        };
        Ok(Embeddings {
            hidden: h,
            vocab: v,
            positions: spec.positions,
            padding_idx: spec.padding_idx,
            word: Table::load(file, &format!("{}.weight", spec.word), [v, h], int8)?,
            position,
            type_vocab: if token_type.is_some() {
                spec.type_vocab
            } else {
                0
            },
            token_type,
            norm,
            scale: spec.scale.then(|| (h as f64).sqrt() as f32),
        })
    }

    /// Calls `f` on every parameter held (for counting mapped and owned ones).
    pub fn for_each_param(&self, f: &mut impl FnMut(&Param)) {
        self.position
            .iter()
            .chain(self.token_type.iter())
            .chain(self.norm.iter().flat_map(Norm::params))
            .for_each(f);
    }

    /// Position id of a sequence's first token.
    pub fn first_position(&self) -> usize {
        match self.positions {
            Positions::Sequential => 0,
            Positions::AfterPadding => self.padding_idx + 1,
        }
    }

    /// Writes the embeddings of the packed sequences `seqs` into `hidden`
    /// (`[total_tokens x hidden]`): word row + token type row (`types[s][i]`,
    /// or row 0 without `types`) + position row, then LayerNorm.
    pub fn forward(
        &self,
        seqs: &[&[u32]],
        types: Option<&[&[u32]]>,
        hidden: &mut [f32],
        par: Par,
    ) -> Result<()> {
        let h = self.hidden;
        let pos = self.position.as_ref().map(Param::as_slice);
        let typ = self.token_type.as_ref().map(Param::as_slice);
        let internal = |m: String| Error::new(ErrorKind::Internal, m);
        let mut rows = hidden.chunks_exact_mut(h);
        for (si, s) in seqs.iter().enumerate() {
            let seq_types = types.map(|t| t.get(si).copied().unwrap_or(&[]));
            if seq_types.is_some_and(|t| t.len() != s.len()) {
                return Err(internal(format!(
                    "forward: sequence {si} has {} token types for {} tokens",
                    seq_types.map_or(0, <[u32]>::len),
                    s.len()
                )));
            }
            let mut non_pad = 0usize;
            for (i, &id) in s.iter().enumerate() {
                let id = id as usize;
                // The position ids hook.
                let at = match self.positions {
                    Positions::Sequential => i,
                    Positions::AfterPadding if id == self.padding_idx => self.padding_idx,
                    Positions::AfterPadding => {
                        non_pad += 1;
                        self.padding_idx + non_pad
                    }
                };
                let Some(row) = rows.next() else {
                    return Err(internal(format!("forward: position {at} out of range")));
                };
                let p = match pos {
                    Some(pos) => match pos.get(at * h..(at + 1) * h) {
                        Some(p) => Some(p),
                        None => {
                            return Err(internal(format!("forward: position {at} out of range")))
                        }
                    },
                    None => None,
                };
                if id >= self.vocab || !self.word.row_into(id, row) {
                    return Err(internal(format!("forward: token id {id} out of range")));
                }
                if let Some(f) = self.scale {
                    row.iter_mut().for_each(|v| *v *= f);
                }
                match typ {
                    Some(typ) => {
                        let t = seq_types.map_or(0, |t| t[i] as usize);
                        let Some(trow) =
                            typ.get(t * h..(t + 1) * h).filter(|_| t < self.type_vocab)
                        else {
                            return Err(internal(format!(
                                "forward: token type {t} out of range (the model has {})",
                                self.type_vocab
                            )));
                        };
                        match p {
                            Some(p) => {
                                for j in 0..h {
                                    row[j] = (row[j] + trow[j]) + p[j];
                                }
                            }
                            None => {
                                for j in 0..h {
                                    row[j] += trow[j];
                                }
                            }
                        }
                    }
                    None => {
                        // A model without a token type table has no use
                        // for the tokenizer's type ids (ModernBERT's pair
                        // template marks the second text, its model reads
                        // only the ids).
                        if let Some(p) = p {
                            for j in 0..h {
                                row[j] += p[j];
                            }
                        }
                    }
                }
            }
        }
        if let Some(n) = &self.norm {
            n.apply(hidden, h, par);
        }
        Ok(())
    }
}
