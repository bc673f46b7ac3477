//! Multi-vector outputs: one vector per token, for late interaction
//! (MaxSim).
//!
//! - ColBERT (answerai-colbert-small-v1; PyLate and Stanford-NLP layouts):
//!   a `Dense` projection without bias on every token's last hidden state,
//!   each vector L2-normalized; queries framed as `[CLS] [Q] text [SEP]`
//!   and padded with `[MASK]` to `query_length` (the expansion tokens give
//!   vectors but, unless `attend_to_expansion_tokens`, are not attention
//!   keys); documents as `[CLS] [D] text [SEP]` cut at `document_length`,
//!   the vectors of skip-list tokens (punctuation) dropped.
//! - BGE-M3 (FlagEmbedding's `colbert_linear`, with bias): the tokens after
//!   the first, each normalized.
//!
//! Tensors: `multi_vector.weight` `[dim x h]` (and `multi_vector.bias`).
//! Metadata: [`MV_SKIP_FIRST`], [`MV_NORMALIZE`] and the `colbert_*` keys of
//! [`ColbertFrame`].

use std::sync::Arc;

use crate::error::{Error, Result};
use crate::formats::ModelFile;
use crate::kernels::gemm::Epilogue;
use crate::kernels::Par;
use crate::model::config::parse_bool;
use crate::model::encoder::HeadScratch;
use crate::model::linear::Linear;
use crate::model::param::{load_param, stores_int8, Param};
use crate::model::precision::Precision;

/// Metadata: the first token gives no vector (BGE-M3).
pub const MV_SKIP_FIRST: &str = "multi_vector_skip_first";
/// Metadata: every vector is L2-normalized (default true).
pub const MV_NORMALIZE: &str = "multi_vector_normalize";
/// Metadata: ColBERT's query marker id.
pub const COLBERT_QUERY_PREFIX: &str = "colbert_query_prefix_id";
/// Metadata: ColBERT's document marker id.
pub const COLBERT_DOCUMENT_PREFIX: &str = "colbert_document_prefix_id";
/// Metadata: a query's tokens after expansion.
pub const COLBERT_QUERY_LENGTH: &str = "colbert_query_length";
/// Metadata: a document's most tokens.
pub const COLBERT_DOCUMENT_LENGTH: &str = "colbert_document_length";
/// Metadata: the expansion tokens are attention keys.
pub const COLBERT_ATTEND_EXPANSION: &str = "colbert_attend_to_expansion";
/// Metadata: ids whose document vectors are dropped (space-separated).
pub const COLBERT_SKIPLIST: &str = "colbert_skiplist_ids";
/// Metadata: the expansion token's id (`[MASK]`).
pub const COLBERT_MASK: &str = "colbert_mask_id";

/// The vectors of one text: `rows x dim`, row after row.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MultiVector {
    /// Floats per vector.
    pub dim: usize,
    /// `rows x dim` values.
    pub data: Vec<f32>,
}

impl MultiVector {
    /// Vectors.
    pub fn rows(&self) -> usize {
        self.data.len().checked_div(self.dim).unwrap_or(0)
    }

    /// Vector `i`.
    pub fn row(&self, i: usize) -> &[f32] {
        &self.data[i * self.dim..(i + 1) * self.dim]
    }

    /// ColBERT's late interaction: for each of `self`'s vectors (the query)
    /// the largest dot product with one of `doc`'s, summed (0 when either
    /// has no vector; the widths must agree).
    pub fn max_sim(&self, doc: &MultiVector) -> f32 {
        if self.dim != doc.dim || doc.rows() == 0 {
            return 0.0;
        }
        (0..self.rows())
            .map(|i| {
                (0..doc.rows())
                    .map(|j| crate::vector::dot(self.row(i), doc.row(j)))
                    .fold(f32::NEG_INFINITY, f32::max)
            })
            .sum()
    }
}

/// ColBERT's query and document framing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ColbertFrame {
    /// The id after `[CLS]` in a query.
    pub query_prefix: u32,
    /// The id after `[CLS]` in a document.
    pub document_prefix: u32,
    /// Tokens of every query (expanded with `mask`).
    pub query_length: usize,
    /// Most tokens of a document.
    pub document_length: usize,
    /// The expansion tokens are attention keys.
    pub attend_to_expansion: bool,
    /// Ids whose document vectors are dropped.
    pub skiplist: Vec<u32>,
    /// The expansion token.
    pub mask: u32,
}

fn md<'a>(file: &'a ModelFile, key: &str) -> Option<&'a str> {
    file.metadata.get(key).map(|s| s.trim())
}

fn md_usize(file: &ModelFile, key: &str) -> Result<usize> {
    let v = md(file, key).ok_or_else(|| Error::model(format!("metadata '{key}' is missing")))?;
    v.parse()
        .map_err(|_| Error::model(format!("metadata '{key}' = '{v}' is not a count")))
}

impl ColbertFrame {
    fn load(file: &ModelFile, vocab: usize) -> Result<Option<ColbertFrame>> {
        if md(file, COLBERT_QUERY_PREFIX).is_none() {
            return Ok(None);
        }
        let id = |key: &str| -> Result<u32> {
            let v = md_usize(file, key)?;
            if v >= vocab {
                return Err(Error::model(format!(
                    "metadata '{key}' = {v} is outside the vocabulary of {vocab}"
                )));
            }
            Ok(v as u32)
        };
        let skiplist = md(file, COLBERT_SKIPLIST)
            .unwrap_or("")
            .split_whitespace()
            .map(|t| match t.parse::<u32>() {
                Ok(i) if (i as usize) < vocab => Ok(i),
                _ => Err(Error::model(format!(
                    "metadata '{COLBERT_SKIPLIST}': '{t}' is not an id of the vocabulary"
                ))),
            })
            .collect::<Result<Vec<u32>>>()?;
        let f = ColbertFrame {
            query_prefix: id(COLBERT_QUERY_PREFIX)?,
            document_prefix: id(COLBERT_DOCUMENT_PREFIX)?,
            query_length: md_usize(file, COLBERT_QUERY_LENGTH)?,
            document_length: md_usize(file, COLBERT_DOCUMENT_LENGTH)?,
            attend_to_expansion: match md(file, COLBERT_ATTEND_EXPANSION) {
                None => false,
                Some(v) => parse_bool(COLBERT_ATTEND_EXPANSION, v)?,
            },
            skiplist,
            mask: id(COLBERT_MASK)?,
        };
        if f.query_length < 4 || f.document_length < 4 {
            return Err(Error::model(format!(
                "ColBERT lengths must be at least 4 tokens (query {}, document {})",
                f.query_length, f.document_length
            )));
        }
        Ok(Some(f))
    }
}

/// The multi-vector head of a model.
pub struct MultiVectorHead {
    /// The projection (f32: a small share of the work).
    w: Linear,
    b: Option<Param>,
    dim: usize,
    normalize: bool,
    skip_first: bool,
    /// ColBERT's framing, if the model is a ColBERT.
    pub colbert: Option<ColbertFrame>,
}

impl MultiVectorHead {
    /// The head of a file with `multi_vector.weight`, if it has one.
    ///
    /// # Errors
    /// A misshapen tensor or bad metadata, named.
    pub fn load(file: &Arc<ModelFile>, h: usize, vocab: usize) -> Result<Option<MultiVectorHead>> {
        let Some(t) = file
            .tensors
            .iter()
            .find(|t| t.name == "multi_vector.weight")
        else {
            return Ok(None);
        };
        let int8 = stores_int8(file)?;
        let dim = t.shape.first().copied().unwrap_or(0);
        if dim == 0 {
            return Err(Error::model("tensor 'multi_vector.weight' has no rows"));
        }
        let has_bias = file.tensors.iter().any(|t| t.name == "multi_vector.bias");
        let flag = |key: &str, default: bool| -> Result<bool> {
            md(file, key).map_or(Ok(default), |v| parse_bool(key, v))
        };
        Ok(Some(MultiVectorHead {
            w: Linear::from_f32(
                load_param(file, "multi_vector.weight", &[dim, h], int8)?
                    .as_slice()
                    .to_vec(),
                dim,
                h,
                Precision::F32,
            ),
            b: if has_bias {
                Some(load_param(file, "multi_vector.bias", &[dim], int8)?)
            } else {
                None
            },
            dim,
            normalize: flag(MV_NORMALIZE, true)?,
            skip_first: flag(MV_SKIP_FIRST, false)?,
            colbert: ColbertFrame::load(file, vocab)?,
        }))
    }

    /// Floats per vector.
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// Whether the first token of each sequence gives no vector (BGE-M3).
    pub fn skips_first(&self) -> bool {
        self.skip_first
    }

    /// The vectors of each sequence from its tokens' hidden states
    /// (`[total x h]`, packed); `keep(s, i)` says whether token `i` of
    /// sequence `s` gives a vector (after the head's own rule).
    pub fn vectors(
        &self,
        hidden: &[f32],
        seqs: &[&[u32]],
        keep: impl Fn(usize, usize) -> bool,
        mut scratch: HeadScratch<'_>,
        par: Par,
    ) -> Vec<MultiVector> {
        let dim = self.dim;
        let total: usize = seqs.iter().map(|s| s.len()).sum();
        let (proj, lin) = scratch.floats(total * dim);
        let epi = self
            .b
            .as_ref()
            .map_or(Epilogue::None, |b| Epilogue::Bias(b.as_slice()));
        if total > 0 {
            self.w
                .forward(hidden, total, proj, dim, false, epi, par, lin);
        }
        let mut o = 0;
        seqs.iter()
            .enumerate()
            .map(|(s, ids)| {
                let rows = &proj[o * dim..(o + ids.len()) * dim];
                o += ids.len();
                let first = usize::from(self.skip_first);
                let mut data = Vec::with_capacity(ids.len().saturating_sub(first) * dim);
                for (i, r) in rows.chunks_exact(dim).enumerate().skip(first) {
                    if keep(s, i) {
                        let at = data.len();
                        data.extend_from_slice(r);
                        if self.normalize {
                            crate::vector::l2_normalize(&mut data[at..]);
                        }
                    }
                }
                MultiVector { dim, data }
            })
            .collect()
    }

    /// A long text's vectors from its windows' (`windows[j]` the ids of
    /// window j, `parts[j]` its vectors; `pre` and `post` special tokens
    /// around each window's text, consecutive windows sharing `overlap` text
    /// tokens): the vectors in text order, each text token's once (from the
    /// first window that has it), the leading special tokens' from the first
    /// window and the trailing ones' from the last.
    pub fn merge(
        &self,
        windows: &[&[u32]],
        parts: &[&MultiVector],
        pre: usize,
        post: usize,
        overlap: usize,
    ) -> MultiVector {
        let skip = usize::from(self.skip_first);
        let n = parts.len();
        let mut mv = MultiVector {
            dim: self.dim,
            data: Vec::new(),
        };
        for (j, (ids, m)) in windows.iter().zip(parts).enumerate() {
            // Window j's token positions that give the text's vectors: not
            // the leading specials and the overlap after the first window,
            // not the trailing specials before the last.
            let from = if j == 0 { 0 } else { pre + overlap };
            let to = if j + 1 == n {
                ids.len()
            } else {
                ids.len() - post
            };
            for pos in from.max(skip)..to {
                mv.data.extend_from_slice(m.row(pos - skip));
            }
        }
        mv
    }
}
