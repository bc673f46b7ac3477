//! The output stage: what a model turns its last hidden states into. The
//! encoder gives hidden states; a head per output kind gives the outputs,
//! each head in its own module with its window merge: the pooled dense
//! vector and the token vectors ([`crate::model::dense`]: pooling, the
//! `Dense` modules, normalization, the Matryoshka cut), the sparse vector
//! ([`crate::model::sparse`]), the vectors per token
//! ([`crate::model::multi_vector`]); a cross-encoder's classifier and an LLM
//! reranker's logit score are [`crate::model::head`]. A model declares the
//! outputs it has (metadata [`OUTPUTS`]; none: dense only) and asking for
//! another is refused by name.

use std::sync::Arc;

use crate::error::{Error, Result};
use crate::formats::ModelFile;
use crate::model::config::ModelConfig;
use crate::model::dense::DenseHead;
use crate::model::multi_vector::MultiVectorHead;
use crate::model::precision::Precision;
use crate::model::sparse::{self, SparseHead, StaticQuery};

/// Metadata: the outputs a model has, space-separated names of
/// [`OutputKind`] (absent: `dense`).
pub const OUTPUTS: &str = "outputs";

/// One kind of output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum OutputKind {
    /// One pooled vector per text.
    Dense,
    /// A weight per vocabulary id (SPLADE, BGE-M3's lexical weights).
    Sparse,
    /// One vector per token (ColBERT, BGE-M3's ColBERT vectors).
    MultiVector,
}

impl OutputKind {
    /// Every kind, in order.
    pub const ALL: [OutputKind; 3] = [
        OutputKind::Dense,
        OutputKind::Sparse,
        OutputKind::MultiVector,
    ];

    /// The name used by the metadata, the CLI and the bindings.
    pub fn name(self) -> &'static str {
        match self {
            OutputKind::Dense => "dense",
            OutputKind::Sparse => "sparse",
            OutputKind::MultiVector => "multi-vector",
        }
    }

    /// The kind of `name` (`multi_vector` and `colbert` are also taken for
    /// `multi-vector`, `lexical` for `sparse`).
    pub fn from_name(name: &str) -> Option<OutputKind> {
        match name.trim() {
            "dense" => Some(OutputKind::Dense),
            "sparse" | "lexical" => Some(OutputKind::Sparse),
            "multi-vector" | "multi_vector" | "colbert" => Some(OutputKind::MultiVector),
            _ => None,
        }
    }

    /// Kinds from a comma- or space-separated list, each once, in order.
    ///
    /// # Errors
    /// An unknown name or an empty list, named.
    pub fn parse_list(s: &str) -> Result<Vec<OutputKind>> {
        let mut out: Vec<OutputKind> = Vec::new();
        for part in s.split([',', ' ']).filter(|p| !p.trim().is_empty()) {
            let k = OutputKind::from_name(part).ok_or_else(|| {
                Error::invalid_argument(format!(
                    "output '{}' is not one of dense, sparse, multi-vector",
                    part.trim()
                ))
            })?;
            if !out.contains(&k) {
                out.push(k);
            }
        }
        if out.is_empty() {
            return Err(Error::invalid_argument(
                "no output named (dense, sparse, multi-vector)",
            ));
        }
        out.sort();
        Ok(out)
    }
}

/// What a text is encoded as: sentence-transformers' `encode_query` /
/// `encode_document` (a Router's route, ColBERT's markers and query
/// expansion, the prompt of that name when the model stores one).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EncodeTask {
    /// A search query.
    Query,
    /// A document (passage).
    Document,
}

impl EncodeTask {
    /// `query` or `document`.
    pub fn name(self) -> &'static str {
        match self {
            EncodeTask::Query => "query",
            EncodeTask::Document => "document",
        }
    }

    /// The task named `s`.
    pub fn from_name(s: &str) -> Option<EncodeTask> {
        match s.trim() {
            "query" => Some(EncodeTask::Query),
            "document" | "passage" => Some(EncodeTask::Document),
            _ => None,
        }
    }
}

/// The heads of a model, one per output kind.
pub struct OutputHeads {
    /// The declared outputs, in order.
    pub kinds: Vec<OutputKind>,
    /// The dense head (pooling, `Dense` modules, normalization, cut), which
    /// also gives token vectors.
    pub dense: DenseHead,
    /// The sparse head.
    pub sparse: Option<SparseHead>,
    /// An inference-free model's query route.
    pub static_query: Option<StaticQuery>,
    /// Keep only this many sparse weights.
    pub top_k: Option<usize>,
    /// The multi-vector head.
    pub multi_vector: Option<MultiVectorHead>,
}

impl OutputHeads {
    /// The outputs `file` declares, with their heads. `special`: the ids a
    /// lexical head never weights.
    ///
    /// # Errors
    /// An unknown output, a declared output without its head (or a head
    /// without its declaration), a missing or misshapen tensor.
    pub fn load(
        file: &Arc<ModelFile>,
        cfg: &ModelConfig,
        precision: Precision,
        special: Vec<u32>,
    ) -> Result<OutputHeads> {
        let kinds = match file.metadata.get(OUTPUTS) {
            None => vec![OutputKind::Dense],
            Some(s) => OutputKind::parse_list(s)
                .map_err(|e| Error::model(format!("metadata '{OUTPUTS}': {}", e.message())))?,
        };
        let heads = OutputHeads {
            dense: DenseHead::load(file, cfg)?,
            sparse: if kinds.contains(&OutputKind::Sparse) {
                SparseHead::load(file, cfg, precision, special)?
            } else {
                None
            },
            static_query: sparse::load_static_query(file, cfg)?,
            top_k: sparse::top_k_of(file)?,
            multi_vector: if kinds.contains(&OutputKind::MultiVector) {
                MultiVectorHead::load(file, cfg.hidden_size, cfg.vocab_size)?
            } else {
                None
            },
            kinds,
        };
        if heads.has(OutputKind::Sparse) && heads.sparse.is_none() {
            return Err(Error::model(format!(
                "metadata '{OUTPUTS}' lists sparse but the file has no sparse head \
                 (metadata '{}')",
                sparse::SPARSE_HEAD
            )));
        }
        if heads.has(OutputKind::MultiVector) && heads.multi_vector.is_none() {
            return Err(Error::model(format!(
                "metadata '{OUTPUTS}' lists multi-vector but the file has no tensor \
                 'multi_vector.weight'"
            )));
        }
        Ok(heads)
    }

    /// The model has output `k`.
    pub fn has(&self, k: OutputKind) -> bool {
        self.kinds.contains(&k)
    }

    /// `Ok` when the model has every output of `asked`, else an error that
    /// names what it has.
    ///
    /// # Errors
    /// [`crate::ErrorKind::Unsupported`].
    pub fn check(&self, asked: &[OutputKind]) -> Result<()> {
        match asked.iter().find(|k| !self.has(**k)) {
            None => Ok(()),
            Some(k) => Err(Error::unsupported(format!(
                "this model has no {} output; its outputs: {}",
                k.name(),
                self.kinds
                    .iter()
                    .map(|k| k.name())
                    .collect::<Vec<_>>()
                    .join(", ")
            ))),
        }
    }
}
