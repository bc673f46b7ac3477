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
use crate::kernels::Par;
use crate::model::config::ModelConfig;
use crate::model::dense::{DenseHead, DenseOpts};
use crate::model::encoder::HeadScratch;
use crate::model::multi_vector::{MultiVector, MultiVectorHead};
use crate::model::precision::Precision;
use crate::model::sparse::{self, SparseHead, SparseVector, StaticQuery};

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

/// One output kind's values for a run of texts, in text order.
#[derive(Debug, Clone, PartialEq)]
pub enum Output {
    /// One pooled vector per text: `texts x dim` floats.
    Dense {
        /// Floats per vector.
        dim: usize,
        /// The vectors, row after row.
        vectors: Vec<f32>,
    },
    /// One sparse vector per text.
    Sparse(Vec<SparseVector>),
    /// The vectors of each text.
    MultiVector(Vec<MultiVector>),
}

impl Output {
    /// The kind of these values.
    pub fn kind(&self) -> OutputKind {
        match self {
            Output::Dense { .. } => OutputKind::Dense,
            Output::Sparse(_) => OutputKind::Sparse,
            Output::MultiVector(_) => OutputKind::MultiVector,
        }
    }

    /// No values of `kind` (dense: `dim` floats wide).
    pub fn empty(kind: OutputKind, dim: usize) -> Output {
        match kind {
            OutputKind::Dense => Output::Dense {
                dim,
                vectors: Vec::new(),
            },
            OutputKind::Sparse => Output::Sparse(Vec::new()),
            OutputKind::MultiVector => Output::MultiVector(Vec::new()),
        }
    }

    /// The texts these values are of.
    pub fn texts(&self) -> usize {
        match self {
            Output::Dense { dim, vectors } => vectors.len().checked_div(*dim).unwrap_or(0),
            Output::Sparse(v) => v.len(),
            Output::MultiVector(v) => v.len(),
        }
    }

    /// Appends `other`'s texts (values of the same kind; others are
    /// dropped).
    pub fn append(&mut self, other: Output) {
        match (self, other) {
            (Output::Dense { vectors, .. }, Output::Dense { vectors: more, .. }) => {
                vectors.extend(more)
            }
            (Output::Sparse(v), Output::Sparse(more)) => v.extend(more),
            (Output::MultiVector(v), Output::MultiVector(more)) => v.extend(more),
            _ => debug_assert!(false, "appending values of another kind"),
        }
    }

    /// Removes the first `n` texts' values and returns them.
    pub fn split_front(&mut self, n: usize) -> Output {
        match self {
            Output::Dense { dim, vectors } => Output::Dense {
                dim: *dim,
                vectors: vectors.drain(..(n * *dim).min(vectors.len())).collect(),
            },
            Output::Sparse(v) => Output::Sparse(v.drain(..n.min(v.len())).collect()),
            Output::MultiVector(v) => Output::MultiVector(v.drain(..n.min(v.len())).collect()),
        }
    }
}

/// Values keyed by kind: at most one [`Output`] per kind, in the order of
/// [`OutputKind::ALL`], each of the same texts.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Outputs(Vec<Output>);

impl Outputs {
    /// No values of `kinds` (dense: `dim` wide).
    pub fn empty(kinds: &[OutputKind], dim: usize) -> Outputs {
        let mut o = Outputs::default();
        for &k in kinds {
            o.insert(Output::empty(k, dim));
        }
        o
    }

    /// The values of kind `k`.
    pub fn get(&self, k: OutputKind) -> Option<&Output> {
        self.0.iter().find(|o| o.kind() == k)
    }

    /// Removes the values of kind `k` and returns them.
    pub fn take(&mut self, k: OutputKind) -> Option<Output> {
        let at = self.0.iter().position(|o| o.kind() == k)?;
        Some(self.0.remove(at))
    }

    /// Puts `o` in, in its kind's place (replacing values of that kind).
    pub fn insert(&mut self, o: Output) {
        self.take(o.kind());
        let at = self.0.partition_point(|x| x.kind() < o.kind());
        self.0.insert(at, o);
    }

    /// Each kind's values, in the order of [`OutputKind::ALL`].
    pub fn iter(&self) -> impl Iterator<Item = &Output> {
        self.0.iter()
    }

    /// The kinds held, in order.
    pub fn kinds(&self) -> Vec<OutputKind> {
        self.0.iter().map(Output::kind).collect()
    }

    /// Appends `other`'s texts, kind by kind (a kind only one side has is
    /// taken as it is).
    pub fn append(&mut self, other: Outputs) {
        for o in other.0 {
            match self.0.iter_mut().find(|x| x.kind() == o.kind()) {
                Some(x) => x.append(o),
                None => self.insert(o),
            }
        }
    }

    /// Removes the first `n` texts' values of every kind and returns them.
    pub fn split_front(&mut self, n: usize) -> Outputs {
        Outputs(self.0.iter_mut().map(|o| o.split_front(n)).collect())
    }
}

/// A call's share for the heads: each head reads its own part.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeadCall {
    /// The dense head's options.
    pub dense: DenseOpts,
    /// The sparse head keeps only this many weights.
    pub top_k: Option<usize>,
    /// The texts are ColBERT documents: the multi-vector head leaves out
    /// the vectors of its skip-list's ids.
    pub colbert_document: bool,
}

/// How a long text's windows frame it: `pre` and `post` special tokens
/// around each window's text, consecutive windows sharing `overlap` text
/// tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WindowFrame {
    /// Special tokens before each window's text.
    pub pre: usize,
    /// Special tokens after it.
    pub post: usize,
    /// Text tokens shared by consecutive windows.
    pub overlap: usize,
}

/// The head of one output kind: the kind's values of a chunk of sequences
/// from their last hidden states, and a long text's values from its
/// windows'.
pub trait Head: Send + Sync {
    /// The kind this head gives.
    fn kind(&self) -> OutputKind;

    /// The values of `seqs` (their ids) from their tokens' hidden states
    /// (`[total x hidden]`, packed), under `call`.
    fn apply(
        &self,
        seqs: &[&[u32]],
        hidden: &[f32],
        scratch: HeadScratch<'_>,
        par: Par,
        call: &HeadCall,
    ) -> Output;

    /// One text's values from those of its windows (`windows[j]` the ids of
    /// window j, `parts` their values in window order, computed under
    /// `call` without its top-k), under `call`.
    fn merge(
        &self,
        windows: &[&[u32]],
        parts: Output,
        frame: WindowFrame,
        call: &HeadCall,
    ) -> Output;
}

impl Head for DenseHead {
    fn kind(&self) -> OutputKind {
        OutputKind::Dense
    }

    fn apply(
        &self,
        seqs: &[&[u32]],
        hidden: &[f32],
        _: HeadScratch<'_>,
        _: Par,
        call: &HeadCall,
    ) -> Output {
        Output::Dense {
            dim: call.dense.dim,
            vectors: self.vectors(seqs, hidden, call.dense),
        }
    }

    fn merge(&self, windows: &[&[u32]], parts: Output, _: WindowFrame, call: &HeadCall) -> Output {
        let Output::Dense { dim, vectors } = parts else {
            return parts;
        };
        let mut out = vec![0.0; dim];
        DenseHead::merge(
            &vectors,
            dim,
            windows,
            &vec![0; windows.len()],
            call.dense.normalize,
            &mut out,
        );
        Output::Dense { dim, vectors: out }
    }
}

impl Head for SparseHead {
    fn kind(&self) -> OutputKind {
        OutputKind::Sparse
    }

    fn apply(
        &self,
        seqs: &[&[u32]],
        hidden: &[f32],
        scratch: HeadScratch<'_>,
        par: Par,
        call: &HeadCall,
    ) -> Output {
        let mut vs = self.vectors(hidden, seqs, scratch, par);
        if let Some(k) = call.top_k {
            vs.iter_mut().for_each(|v| v.keep_top(k));
        }
        Output::Sparse(vs)
    }

    fn merge(&self, _: &[&[u32]], parts: Output, _: WindowFrame, call: &HeadCall) -> Output {
        let Output::Sparse(parts) = parts else {
            return parts;
        };
        let mut v = SparseHead::merge(self, parts);
        if let Some(k) = call.top_k {
            v.keep_top(k);
        }
        Output::Sparse(vec![v])
    }
}

impl Head for MultiVectorHead {
    fn kind(&self) -> OutputKind {
        OutputKind::MultiVector
    }

    fn apply(
        &self,
        seqs: &[&[u32]],
        hidden: &[f32],
        scratch: HeadScratch<'_>,
        par: Par,
        call: &HeadCall,
    ) -> Output {
        let skip = match (call.colbert_document, &self.colbert) {
            (true, Some(f)) => Some(&f.skiplist),
            _ => None,
        };
        let keep = |s: usize, i: usize| skip.is_none_or(|l| !l.contains(&seqs[s][i]));
        Output::MultiVector(self.vectors(hidden, seqs, keep, scratch, par))
    }

    fn merge(&self, windows: &[&[u32]], parts: Output, f: WindowFrame, _: &HeadCall) -> Output {
        let Output::MultiVector(parts) = parts else {
            return parts;
        };
        let parts: Vec<&MultiVector> = parts.iter().collect();
        Output::MultiVector(vec![MultiVectorHead::merge(
            self, windows, &parts, f.pre, f.post, f.overlap,
        )])
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

    /// The heads of the model's outputs, in the order of
    /// [`OutputKind::ALL`]: the one table every output goes through.
    pub fn table(&self) -> impl Iterator<Item = &dyn Head> {
        [
            Some(&self.dense as &dyn Head),
            self.sparse.as_ref().map(|h| h as &dyn Head),
            self.multi_vector.as_ref().map(|h| h as &dyn Head),
        ]
        .into_iter()
        .flatten()
        .filter(|h| self.has(h.kind()))
    }

    /// The head of output `k`.
    pub fn head(&self, k: OutputKind) -> Option<&dyn Head> {
        self.table().find(|h| h.kind() == k)
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
