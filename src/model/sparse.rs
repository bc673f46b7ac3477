//! Sparse outputs: a weight per vocabulary id, most of them zero.
//!
//! - [`SpladeHead`]: sentence-transformers' `SparseEncoder` with an MLM
//!   transformer and `SpladePooling` (SPLADE): the masked-LM head of HF's
//!   `BertForMaskedLM` / `RobertaForMaskedLM` (`transform` dense +
//!   activation + LayerNorm, then the decoder tied to the word embeddings
//!   plus its bias) on every token, `log1p(act(logit))`, max or sum over the
//!   tokens. The vocabulary projection is the largest product of the model:
//!   it runs in the model's precision, over blocks of [`VOCAB_BLOCK`] ids and
//!   [`ROW_BLOCK`] tokens, so that no more than `ROW_BLOCK x VOCAB_BLOCK`
//!   logits per thread exist at a time, pooled while in cache.
//! - [`LexicalHead`]: BGE-M3's lexical weights (FlagEmbedding's
//!   `sparse_linear`): `relu(w · h + b)` per token, the largest per token id,
//!   special tokens dropped.
//! - [`StaticQuery`]: an inference-free SPLADE's query route
//!   (`SparseStaticEmbedding`): a fixed weight per id present in the query.
//!
//! Tensors: `mlm.transform.weight` `[h x h]`, `mlm.transform.bias`,
//! `mlm.norm.weight`/`.bias`, `mlm.decoder.bias` `[vocab]` (and
//! `mlm.decoder.weight` `[vocab x h]` when not tied to the word
//! embeddings); `lexical.weight` `[1 x h]`, `lexical.bias` `[1]`;
//! `sparse_query.weight` `[vocab]`. Metadata: [`SPARSE_HEAD`],
//! [`SPLADE_POOLING`], [`SPLADE_ACTIVATION`], [`MLM_ACT`], [`SPARSE_TOP_K`],
//! [`SPARSE_QUERY`].

use std::collections::BTreeMap;
use std::sync::Arc;

use rayon::prelude::*;

use crate::error::{Error, Result};
use crate::formats::ModelFile;
use crate::kernels::gemm::Epilogue;
use crate::kernels::Par;
use crate::model::blocks::norm::{Norm, NormKind};
use crate::model::config::{Activation, ModelConfig};
use crate::model::encoder::HeadScratch;
use crate::model::linear::{Linear, LinearScratch};
use crate::model::param::{load_param, stores_int8, Param, Table};
use crate::model::precision::Precision;

/// Metadata: the sparse head, `splade` or `lexical`.
pub const SPARSE_HEAD: &str = "sparse_head";
/// Metadata: `SpladePooling`'s `pooling_strategy`, `max` or `sum`.
pub const SPLADE_POOLING: &str = "splade_pooling";
/// Metadata: `SpladePooling`'s `activation_function`, `relu` or
/// `log1p_relu` (the value is `log1p` of it).
pub const SPLADE_ACTIVATION: &str = "splade_activation";
/// Metadata: the MLM head's activation (`gelu`, `gelu_tanh`).
pub const MLM_ACT: &str = "mlm_hidden_act";
/// Metadata: keep only the largest this many weights (sentence-transformers'
/// `max_active_dims`).
pub const SPARSE_TOP_K: &str = "sparse_top_k";
/// Metadata: `static` when queries take the `sparse_query.weight` route.
pub const SPARSE_QUERY: &str = "sparse_query";

/// Vocabulary ids per block of the vocabulary projection.
pub const VOCAB_BLOCK: usize = 1024;
/// Rows (tokens) per product of a vocabulary block: the
/// `ROW_BLOCK x VOCAB_BLOCK` logits of one product are pooled while in cache.
pub const ROW_BLOCK: usize = 192;

/// A sparse vector: ids ascending, each once, no zero weight.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SparseVector {
    /// Vocabulary ids, ascending.
    pub indices: Vec<u32>,
    /// The weight of each id.
    pub values: Vec<f32>,
}

impl SparseVector {
    /// Non-zero weights.
    pub fn len(&self) -> usize {
        self.indices.len()
    }

    /// No non-zero weight.
    pub fn is_empty(&self) -> bool {
        self.indices.is_empty()
    }

    /// `Σ a_i · b_i` over the ids both have (accumulated in f64, rounded
    /// once).
    pub fn dot(&self, other: &SparseVector) -> f32 {
        let (mut i, mut j, mut acc) = (0, 0, 0f64);
        while i < self.indices.len() && j < other.indices.len() {
            match self.indices[i].cmp(&other.indices[j]) {
                std::cmp::Ordering::Less => i += 1,
                std::cmp::Ordering::Greater => j += 1,
                std::cmp::Ordering::Equal => {
                    acc += f64::from(self.values[i]) * f64::from(other.values[j]);
                    i += 1;
                    j += 1;
                }
            }
        }
        acc as f32
    }

    /// Keeps the `k` largest weights (ties: the lower id), ids ascending.
    pub fn keep_top(&mut self, k: usize) {
        if self.len() <= k {
            return;
        }
        let mut order: Vec<usize> = (0..self.len()).collect();
        order.sort_by(|&a, &b| {
            self.values[b]
                .total_cmp(&self.values[a])
                .then(self.indices[a].cmp(&self.indices[b]))
        });
        order.truncate(k);
        order.sort_unstable();
        self.indices = order.iter().map(|&i| self.indices[i]).collect();
        self.values = order.iter().map(|&i| self.values[i]).collect();
    }

    /// From `(id, weight)` pairs in any order; zeros dropped, the largest
    /// weight kept for a repeated id.
    pub fn from_max_pairs(pairs: impl IntoIterator<Item = (u32, f32)>) -> SparseVector {
        let mut m: BTreeMap<u32, f32> = BTreeMap::new();
        for (id, w) in pairs {
            if w > 0.0 {
                let e = m.entry(id).or_insert(w);
                if w > *e {
                    *e = w;
                }
            }
        }
        SparseVector {
            indices: m.keys().copied().collect(),
            values: m.values().copied().collect(),
        }
    }
}

/// How `SpladePooling` reduces the tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpladePooling {
    /// The largest value over the tokens.
    Max,
    /// The sum over the tokens.
    Sum,
}

/// `SpladePooling`'s activation before `log1p`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpladeActivation {
    /// `log1p(relu(x))`.
    Relu,
    /// `log1p(log1p(relu(x)))`.
    Log1pRelu,
}

impl SpladeActivation {
    fn apply(self, x: f32) -> f32 {
        // relu first: no logarithm for the (many) non-positive logits, whose
        // weight is 0 either way.
        if x.is_nan() || x <= 0.0 {
            return 0.0;
        }
        let r = x.ln_1p();
        match self {
            SpladeActivation::Relu => r,
            SpladeActivation::Log1pRelu => r.ln_1p(),
        }
    }
}

fn md<'a>(file: &'a ModelFile, key: &str) -> Option<&'a str> {
    file.metadata.get(key).map(|s| s.trim())
}

/// SPLADE: the MLM head and `SpladePooling`.
pub struct SpladeHead {
    transform: Linear,
    transform_b: Param,
    act: Activation,
    norm: Norm,
    /// The decoder in blocks of [`VOCAB_BLOCK`] ids.
    decoder: Vec<Linear>,
    decoder_b: Param,
    pooling: SpladePooling,
    activation: SpladeActivation,
    h: usize,
}

impl SpladeHead {
    fn load(file: &Arc<ModelFile>, cfg: &ModelConfig, precision: Precision) -> Result<SpladeHead> {
        let int8 = stores_int8(file)?;
        let (h, v) = (cfg.hidden_size, cfg.vocab_size);
        let pooling = match md(file, SPLADE_POOLING).unwrap_or("max") {
            "max" => SpladePooling::Max,
            "sum" => SpladePooling::Sum,
            o => {
                return Err(Error::model(format!(
                    "metadata '{SPLADE_POOLING}' = '{o}' is not 'max' or 'sum'"
                )))
            }
        };
        let activation = match md(file, SPLADE_ACTIVATION).unwrap_or("relu") {
            "relu" => SpladeActivation::Relu,
            "log1p_relu" => SpladeActivation::Log1pRelu,
            o => {
                return Err(Error::model(format!(
                    "metadata '{SPLADE_ACTIVATION}' = '{o}' is not 'relu' or 'log1p_relu'"
                )))
            }
        };
        let act = match md(file, MLM_ACT).unwrap_or("gelu") {
            "gelu" => Activation::Gelu,
            "gelu_tanh" => Activation::GeluTanh,
            o => {
                return Err(Error::model(format!(
                    "metadata '{MLM_ACT}' = '{o}' is not 'gelu' or 'gelu_tanh'"
                )))
            }
        };
        let tw = load_param(file, "mlm.transform.weight", &[h, h], int8)?;
        let transform = Linear::from_f32(tw.as_slice().to_vec(), h, h, precision);
        // The decoder: its own weight, or the word embeddings it is tied to.
        let own = file.tensors.iter().any(|t| t.name == "mlm.decoder.weight");
        let table_name = if own {
            "mlm.decoder.weight".to_string()
        } else {
            format!("{}.weight", cfg.family()?.embeddings.word)
        };
        let table = Table::load(file, &table_name, [v, h], int8)?;
        let mut decoder = Vec::with_capacity(v.div_ceil(VOCAB_BLOCK));
        for start in (0..v).step_by(VOCAB_BLOCK) {
            let n = VOCAB_BLOCK.min(v - start);
            let mut w = vec![0f32; n * h];
            for (r, row) in w.chunks_exact_mut(h).enumerate() {
                if !table.row_into(start + r, row) {
                    return Err(Error::model(format!(
                        "tensor '{table_name}': row {} is missing",
                        start + r
                    )));
                }
            }
            decoder.push(Linear::from_f32(w, n, h, precision));
        }
        Ok(SpladeHead {
            transform,
            transform_b: load_param(file, "mlm.transform.bias", &[h], int8)?,
            act,
            norm: Norm::load(
                file,
                "mlm.norm",
                NormKind::Layer,
                h,
                true,
                cfg.layer_norm_eps,
                int8,
            )?,
            decoder,
            decoder_b: load_param(file, "mlm.decoder.bias", &[v], int8)?,
            pooling,
            activation,
            h,
        })
    }

    /// The sparse vector of each sequence (`lens`, packed) from the last
    /// hidden states of its tokens.
    ///
    /// The vocabulary projection runs block by block ([`VOCAB_BLOCK`] ids),
    /// the blocks split between `par`'s tasks (each block's products serial,
    /// in one task), and within a block [`ROW_BLOCK`] rows at a time, whose
    /// logits are pooled into their sequences' accumulators while they are
    /// still in the core's cache. Each logit is the same product whatever
    /// the split (see [`Linear::forward`]), and each sequence pools its rows
    /// in order, so neither the split nor the thread count changes a bit.
    fn apply(
        &self,
        hidden: &[f32],
        lens: &[usize],
        mut scratch: HeadScratch<'_>,
        par: Par,
    ) -> Vec<SparseVector> {
        let h = self.h;
        let total: usize = lens.iter().sum();
        if total == 0 {
            return vec![SparseVector::default(); lens.len()];
        }
        let blocks = self.decoder.len();
        let tasks = par.tasks().clamp(1, blocks.max(1));
        let per_task = (ROW_BLOCK + lens.len()) * VOCAB_BLOCK;
        let (buf, lin) = scratch.floats(total * h + tasks * per_task);
        let (t, rest) = buf.split_at_mut(total * h);
        let b = self.transform_b.as_slice();
        let epi = match self.act {
            Activation::GeluTanh => Epilogue::BiasGeluTanh(b),
            _ => Epilogue::BiasGelu(b),
        };
        self.transform
            .forward(hidden, total, t, h, false, epi, par, lin);
        self.norm.apply(t, h, par);
        let t = &*t;
        let per = blocks.div_ceil(tasks);
        let run = |task: usize, work: &mut [f32], lin: &mut LinearScratch| {
            let mut out = vec![SparseVector::default(); lens.len()];
            for block in task * per..((task + 1) * per).min(blocks) {
                self.pool_block(block, t, lens, work, lin, &mut out);
            }
            out
        };
        let parts: Vec<Vec<SparseVector>> = if tasks == 1 {
            vec![run(0, rest, lin)]
        } else {
            let mut more: Vec<LinearScratch> =
                (1..tasks).map(|_| LinearScratch::default()).collect();
            let lins: Vec<&mut LinearScratch> =
                std::iter::once(lin).chain(more.iter_mut()).collect();
            rest.par_chunks_mut(per_task)
                .zip(lins)
                .enumerate()
                .map(|(task, (work, lin))| run(task, work, lin))
                .collect()
        };
        // The tasks' blocks ascend: each sequence's ids stay sorted.
        let mut out = vec![SparseVector::default(); lens.len()];
        for part in parts {
            for (sv, p) in out.iter_mut().zip(part) {
                sv.indices.extend(p.indices);
                sv.values.extend(p.values);
            }
        }
        out
    }

    /// Block `block` of the vocabulary: its logits for every row of `t`,
    /// pooled per sequence, the nonzero weights appended to `out`. `work`:
    /// `(ROW_BLOCK + lens.len()) x VOCAB_BLOCK` floats.
    fn pool_block(
        &self,
        block: usize,
        t: &[f32],
        lens: &[usize],
        work: &mut [f32],
        lin: &mut LinearScratch,
        out: &mut [SparseVector],
    ) {
        let (h, dec) = (self.h, &self.decoder[block]);
        let (n, start) = (dec.n(), block * VOCAB_BLOCK);
        let total = t.len() / h;
        let bias = &self.decoder_b.as_slice()[start..start + n];
        let (logits, pooled) = work.split_at_mut(ROW_BLOCK * VOCAB_BLOCK);
        let pooled = &mut pooled[..lens.len() * n];
        // Max pooling adds the bias after the max: rounding is monotone, so
        // max_t(x_t + b) and max_t(x_t) + b are the same float, and the
        // addition runs once per id instead of once per token and id. The
        // activation log1p(act(.)) is monotone too: the max of the activated
        // values is the activated max. Sum pooling adds the activated values.
        let (epi, init) = match self.pooling {
            SpladePooling::Max => (Epilogue::None, f32::NEG_INFINITY),
            SpladePooling::Sum => (Epilogue::Bias(bias), 0.0),
        };
        pooled.fill(init);
        let (mut seq, mut seq_end) = (0, lens[0]);
        for r0 in (0..total).step_by(ROW_BLOCK) {
            let rows = ROW_BLOCK.min(total - r0);
            let logits = &mut logits[..rows * n];
            let x = &t[r0 * h..(r0 + rows) * h];
            dec.forward(x, rows, logits, n, false, epi, Par::Serial, lin);
            for (i, row) in logits.chunks_exact(n).enumerate() {
                while r0 + i >= seq_end {
                    seq += 1;
                    seq_end += lens[seq];
                }
                let acc = &mut pooled[seq * n..(seq + 1) * n];
                match self.pooling {
                    SpladePooling::Max => {
                        for (a, &x) in acc.iter_mut().zip(row) {
                            // One `maxps` per lane (a NaN logit is never
                            // taken, as `f32::max` would not take it either).
                            *a = if x > *a { x } else { *a };
                        }
                    }
                    SpladePooling::Sum => {
                        for (a, &x) in acc.iter_mut().zip(row) {
                            *a += self.activation.apply(x);
                        }
                    }
                }
            }
        }
        for (acc, sv) in pooled.chunks_exact(n).zip(out.iter_mut()) {
            for (c, (&a, &b)) in acc.iter().zip(bias).enumerate() {
                let v = match self.pooling {
                    SpladePooling::Max => self.activation.apply(a + b),
                    SpladePooling::Sum => a,
                };
                if v > 0.0 {
                    sv.indices.push((start + c) as u32);
                    sv.values.push(v);
                }
            }
        }
    }
}

/// BGE-M3's lexical weights.
pub struct LexicalHead {
    w: Param,
    b: f32,
    /// Ids never weighted (FlagEmbedding's `unused_tokens`: CLS, EOS, PAD,
    /// UNK).
    skip: Vec<u32>,
}

impl LexicalHead {
    fn load(file: &Arc<ModelFile>, cfg: &ModelConfig, skip: Vec<u32>) -> Result<LexicalHead> {
        let int8 = stores_int8(file)?;
        let h = cfg.hidden_size;
        Ok(LexicalHead {
            w: load_param(file, "lexical.weight", &[1, h], int8)?,
            b: load_param(file, "lexical.bias", &[1], int8)?.as_slice()[0],
            skip,
        })
    }

    fn apply(&self, hidden: &[f32], seqs: &[&[u32]]) -> Vec<SparseVector> {
        let w = self.w.as_slice();
        let h = w.len();
        let mut o = 0;
        seqs.iter()
            .map(|ids| {
                let rows = &hidden[o * h..(o + ids.len()) * h];
                o += ids.len();
                SparseVector::from_max_pairs(
                    ids.iter()
                        .zip(rows.chunks_exact(h))
                        .filter(|(id, _)| !self.skip.contains(id))
                        .map(|(&id, r)| {
                            let mut acc = 0f32;
                            for (x, y) in r.iter().zip(w) {
                                acc = x.mul_add(*y, acc);
                            }
                            (id, (acc + self.b).max(0.0))
                        }),
                )
            })
            .collect()
    }
}

/// An inference-free model's query weights: one per vocabulary id.
pub struct StaticQuery {
    weights: Param,
}

impl StaticQuery {
    /// The weight of every distinct id of `ids` (zero weights dropped).
    pub fn apply(&self, ids: &[u32]) -> SparseVector {
        let w = self.weights.as_slice();
        SparseVector::from_max_pairs(
            ids.iter()
                .filter_map(|&id| w.get(id as usize).map(|&x| (id, x))),
        )
    }
}

/// The sparse head of a model.
pub enum SparseHead {
    /// SPLADE.
    Splade(Box<SpladeHead>),
    /// BGE-M3's lexical weights.
    Lexical(LexicalHead),
}

impl SparseHead {
    /// The head the metadata names, if any; `skip`: the special ids a
    /// lexical head never weights.
    ///
    /// # Errors
    /// An unknown head or a missing or misshapen tensor, named.
    pub fn load(
        file: &Arc<ModelFile>,
        cfg: &ModelConfig,
        precision: Precision,
        skip: Vec<u32>,
    ) -> Result<Option<SparseHead>> {
        Ok(match md(file, SPARSE_HEAD) {
            None => None,
            Some("splade") => Some(SparseHead::Splade(Box::new(SpladeHead::load(
                file, cfg, precision,
            )?))),
            Some("lexical") => Some(SparseHead::Lexical(LexicalHead::load(file, cfg, skip)?)),
            Some(o) => {
                return Err(Error::unsupported(format!(
                    "metadata '{SPARSE_HEAD}' = '{o}' is not 'splade' or 'lexical'"
                )))
            }
        })
    }

    /// The sparse vector of each sequence from its tokens' hidden states
    /// (`[total x hidden]`, packed).
    pub fn vectors(
        &self,
        hidden: &[f32],
        seqs: &[&[u32]],
        scratch: HeadScratch<'_>,
        par: Par,
    ) -> Vec<SparseVector> {
        match self {
            SparseHead::Splade(s) => {
                let lens: Vec<usize> = seqs.iter().map(|s| s.len()).collect();
                s.apply(hidden, &lens, scratch, par)
            }
            SparseHead::Lexical(l) => l.apply(hidden, seqs),
        }
    }

    /// One text's sparse vector from those of its long-text windows, as the
    /// head pools tokens: the largest weight per id (SPLADE max pooling,
    /// BGE-M3's lexical weights: the vector of all the windows' tokens), or
    /// the sum per id (SPLADE sum pooling; tokens in two windows' overlap
    /// count twice). One window: its vector unchanged.
    pub fn merge(&self, mut parts: Vec<SparseVector>) -> SparseVector {
        if parts.len() == 1 {
            return parts.pop().unwrap_or_default();
        }
        let pairs = parts
            .iter()
            .flat_map(|v| v.indices.iter().copied().zip(v.values.iter().copied()));
        match self {
            SparseHead::Splade(s) if s.pooling == SpladePooling::Sum => {
                let mut m: BTreeMap<u32, f32> = BTreeMap::new();
                for (id, w) in pairs {
                    *m.entry(id).or_insert(0.0) += w;
                }
                SparseVector {
                    indices: m.keys().copied().collect(),
                    values: m.values().copied().collect(),
                }
            }
            _ => SparseVector::from_max_pairs(pairs),
        }
    }
}

/// The static query route, if the metadata says queries take it.
///
/// # Errors
/// A missing or misshapen `sparse_query.weight`, or an unknown route.
pub fn load_static_query(file: &Arc<ModelFile>, cfg: &ModelConfig) -> Result<Option<StaticQuery>> {
    match md(file, SPARSE_QUERY) {
        None => Ok(None),
        Some("static") => Ok(Some(StaticQuery {
            weights: load_param(
                file,
                "sparse_query.weight",
                &[cfg.vocab_size],
                stores_int8(file)?,
            )?,
        })),
        Some(o) => Err(Error::unsupported(format!(
            "metadata '{SPARSE_QUERY}' = '{o}' is not 'static'"
        ))),
    }
}

/// The top-k the metadata asks for, if any.
///
/// # Errors
/// A value that is not a positive integer.
pub fn top_k_of(file: &ModelFile) -> Result<Option<usize>> {
    match md(file, SPARSE_TOP_K) {
        None => Ok(None),
        Some(v) => match v.parse::<usize>() {
            Ok(k) if k > 0 => Ok(Some(k)),
            _ => Err(Error::model(format!(
                "metadata '{SPARSE_TOP_K}' = '{v}' is not a positive integer"
            ))),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn top_k_keeps_the_largest_and_the_order_of_ids() {
        let mut v = SparseVector {
            indices: vec![1, 4, 7, 9],
            values: vec![0.5, 2.0, 0.5, 1.0],
        };
        v.keep_top(3);
        assert_eq!(v.indices, vec![1, 4, 9]);
        assert_eq!(v.values, vec![0.5, 2.0, 1.0]);
    }

    #[test]
    fn max_pairs_drop_zeros_and_keep_the_largest() {
        let v = SparseVector::from_max_pairs([(5, 0.0), (3, 1.0), (5, 2.0), (3, 0.5), (9, -1.0)]);
        assert_eq!(v.indices, vec![3, 5]);
        assert_eq!(v.values, vec![1.0, 2.0]);
        assert_eq!(v.dot(&v), 5.0);
    }
}
