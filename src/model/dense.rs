//! The dense output: one vector per text, as sentence-transformers makes it
//! after the `Transformer` module, `Pooling` -> `Dense` (if any) ->
//! `Normalize` (if any) -> the Matryoshka cut ([`DenseHead`]); and the
//! un-pooled token vectors (`output_value="token_embeddings"`), the hidden
//! states cut and normalized as a call asks. The head also merges a long
//! text's windows ([`DenseHead::merge`]).
//!
//! The `Dense` modules ([`SentenceDense`]; EmbeddingGemma: 768 -> 3072 ->
//! 768, no bias, identity; LaBSE-style heads with `tanh`): `y = act(x · Wᵀ +
//! b)` on each pooled vector, before the normalization. Stored as the tensors
//! `dense.{i}.weight` (`[out x in]`, the torch layout) and, if the module has
//! one, `dense.{i}.bias`, with the activations in the metadata key
//! `dense_modules` ([`ModelConfig`]). One vector per text: the products
//! accumulate in f64 (`vector::dot_f64`) and round once.

use std::sync::Arc;

use crate::error::{Error, Result};
use crate::formats::ModelFile;
use crate::model::config::{DenseActivation, ModelConfig};
use crate::model::param::{load_param, stores_int8, Param};
use crate::model::pooling::{Pooling, SentencePooling};
use crate::vector::{dot_f64, Matryoshka};

/// The dense head's share of a call's options.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DenseOpts {
    /// Tokens at the start of each sequence left out of pooling (the prompt's
    /// when the model's pooling leaves it out).
    pub pool_from: usize,
    /// L2-normalize the pooled (and cut) vectors.
    pub normalize: bool,
    /// Output dimension (below the full width: the Matryoshka cut).
    pub dim: usize,
    /// Un-pooled: one vector per token (the last hidden states, cut to
    /// `dim`, normalized when `normalize`) instead of one per sequence.
    pub tokens: bool,
    /// How a sentence vector is cut to `dim` (token vectors are always
    /// truncated).
    pub matryoshka: Matryoshka,
}

impl DenseOpts {
    /// Vectors of `seqs` under these options: one per sequence, or one per
    /// token.
    pub fn rows(&self, seqs: &[&[u32]]) -> usize {
        if self.tokens {
            seqs.iter().map(|s| s.len()).sum()
        } else {
            seqs.len()
        }
    }
}

/// The dense output of a model: its pooling, its `Dense` modules (if any)
/// and the widths they give.
pub struct DenseHead {
    pooling: Pooling,
    hidden: usize,
    modules: Option<SentenceDense>,
}

impl DenseHead {
    /// The head `cfg` describes (`pooling`, `dense_modules`) over the
    /// encoder's `hidden_size`.
    ///
    /// # Errors
    /// As [`SentenceDense::load`].
    pub fn load(file: &Arc<ModelFile>, cfg: &ModelConfig) -> Result<DenseHead> {
        Ok(DenseHead {
            pooling: cfg.pooling,
            hidden: cfg.hidden_size,
            modules: SentenceDense::load(file, cfg, stores_int8(file)?)?,
        })
    }

    /// The width of a sentence vector: the hidden size, or the last `Dense`
    /// module's output.
    pub fn out_dim(&self) -> usize {
        self.modules
            .as_ref()
            .map_or(self.hidden, SentenceDense::out_dim)
    }

    /// The width of a token vector (the hidden size).
    pub fn hidden(&self) -> usize {
        self.hidden
    }

    /// The outputs of one chunk (`seqs` and their last hidden states, the
    /// encoder's layout) under `opts`: `opts.rows(seqs) x opts.dim` floats.
    pub fn vectors(&self, seqs: &[&[u32]], hidden: &[f32], opts: DenseOpts) -> Vec<f32> {
        let (h, od, dim, norm) = (self.hidden, self.out_dim(), opts.dim, opts.normalize);
        if opts.tokens {
            if dim == h && !norm {
                return hidden.to_vec();
            }
            let mut out = vec![0.0f32; hidden.len() / h * dim];
            cut_rows(hidden, h, &mut out, dim, norm);
            return out;
        }
        let pooling = SentencePooling {
            skip: opts.pool_from,
            ..SentencePooling::new(self.pooling, norm)
        };
        let mut out = vec![0.0f32; seqs.len() * dim];
        let (mut full, mut pooled) = (vec![0.0f32; od], Vec::new());
        let mut o = 0;
        for (s, dst) in seqs.iter().zip(out.chunks_exact_mut(dim.max(1))) {
            let rows = &hidden[o * h..(o + s.len()) * h];
            o += s.len();
            if opts.matryoshka == Matryoshka::LayerNorm {
                // The full vector, its layer norm, the cut, normalized.
                self.sentence(rows, pooling, &mut pooled, &mut full);
                crate::vector::plain_layer_norm(&mut full);
                cut_rows(&full, od, dst, dim, true);
            } else if dim == od {
                self.sentence(rows, pooling, &mut pooled, dst);
            } else {
                // The full vector (normalized as the model says), then its
                // first `dim` components, normalized again.
                self.sentence(rows, pooling, &mut pooled, &mut full);
                cut_rows(&full, od, dst, dim, norm);
            }
        }
        out
    }

    /// One sequence's full sentence vector (`out_dim` floats into `dst`)
    /// from its tokens' last hidden states: pooling, the `Dense` modules if
    /// any, the normalization `pooling` says. `pooled`: scratch.
    fn sentence(
        &self,
        rows: &[f32],
        pooling: SentencePooling,
        pooled: &mut Vec<f32>,
        dst: &mut [f32],
    ) {
        let h = self.hidden;
        match &self.modules {
            None => pooling.apply(rows, h, dst),
            Some(dense) => {
                let raw = SentencePooling {
                    normalize: false,
                    ..pooling
                };
                pooled.resize(h, 0.0);
                raw.apply(rows, h, pooled);
                dense.apply(pooled, dst);
                if pooling.normalize {
                    crate::vector::l2_normalize(dst);
                }
            }
        }
    }

    /// Each text's vector from its windows' (`vecs`, row w for window
    /// `windows[w]` of text `owner[w]`, owners in increasing order) into the
    /// `dim`-wide rows of `out`: the mean weighted by the windows' token
    /// counts (in f64), L2-normalized when `normalize`. A text with one
    /// window keeps that window's vector exactly.
    pub fn merge(
        vecs: &[f32],
        dim: usize,
        windows: &[&[u32]],
        owner: &[usize],
        normalize: bool,
        out: &mut [f32],
    ) {
        let mut w = 0;
        for (k, dst) in out.chunks_exact_mut(dim).enumerate() {
            let first = w;
            while w < owner.len() && owner[w] == k {
                w += 1;
            }
            if w - first == 1 {
                dst.copy_from_slice(&vecs[first * dim..(first + 1) * dim]);
                continue;
            }
            let mut acc = vec![0.0f64; dim];
            let mut total = 0.0f64;
            for (v, ids) in vecs[first * dim..w * dim]
                .chunks_exact(dim)
                .zip(&windows[first..w])
            {
                let weight = ids.len() as f64;
                total += weight;
                for (a, &x) in acc.iter_mut().zip(v) {
                    *a += weight * f64::from(x);
                }
            }
            for (d, a) in dst.iter_mut().zip(&acc) {
                *d = (a / total) as f32;
            }
            if normalize {
                crate::vector::l2_normalize(dst);
            }
        }
    }
}

/// Copies the first `k` components of each `full_dim`-wide row of `full` into
/// the `k`-wide rows of `out`, L2-normalizing each cut row when `normalize`
/// (the Matryoshka cut).
pub fn cut_rows(full: &[f32], full_dim: usize, out: &mut [f32], k: usize, normalize: bool) {
    for (src, dst) in full.chunks_exact(full_dim).zip(out.chunks_exact_mut(k)) {
        dst.copy_from_slice(&src[..k]);
        if normalize {
            crate::vector::l2_normalize(dst);
        }
    }
}

/// Name of module `i`'s weight tensor.
pub fn weight_name(i: usize) -> String {
    format!("dense.{i}.weight")
}

/// Name of module `i`'s bias tensor.
pub fn bias_name(i: usize) -> String {
    format!("dense.{i}.bias")
}

/// One `Dense` module.
struct Module {
    weight: Param,
    bias: Option<Param>,
    act: DenseActivation,
    n_in: usize,
    n_out: usize,
}

/// The `Dense` modules of a model, in order.
pub struct SentenceDense {
    modules: Vec<Module>,
}

impl SentenceDense {
    /// The modules `cfg.dense_modules` names, from `hidden_size` to
    /// `embedding_dim` (`None` when the model has none).
    ///
    /// # Errors
    /// A missing or misshapen tensor, or widths that do not chain from
    /// `hidden_size` to `embedding_dim`, named.
    pub fn load(
        file: &Arc<ModelFile>,
        cfg: &ModelConfig,
        int8: bool,
    ) -> Result<Option<SentenceDense>> {
        if cfg.dense_modules.is_empty() {
            return Ok(None);
        }
        let mut modules = Vec::with_capacity(cfg.dense_modules.len());
        let mut n_in = cfg.hidden_size;
        for (i, &act) in cfg.dense_modules.iter().enumerate() {
            let name = weight_name(i);
            let t = file
                .tensor(&name)
                .ok_or_else(|| Error::model(format!("tensor '{name}' is missing")))?;
            let n_out = match t.shape[..] {
                [o, k] if k == n_in => o,
                _ => {
                    return Err(Error::model(format!(
                        "tensor '{name}' has shape {:?}, expected [out, {n_in}]",
                        t.shape
                    )))
                }
            };
            let weight = load_param(file, &name, &[n_out, n_in], int8)?;
            let bias = match file.tensor(&bias_name(i)) {
                Some(_) => Some(load_param(file, &bias_name(i), &[n_out], int8)?),
                None => None,
            };
            modules.push(Module {
                weight,
                bias,
                act,
                n_in,
                n_out,
            });
            n_in = n_out;
        }
        if n_in != cfg.embedding_dim {
            return Err(Error::model(format!(
                "the dense modules end at {n_in} values, but embedding_dim is {}",
                cfg.embedding_dim
            )));
        }
        Ok(Some(SentenceDense { modules }))
    }

    /// The output width.
    pub fn out_dim(&self) -> usize {
        self.modules.last().map_or(0, |m| m.n_out)
    }

    /// The widest vector along the chain.
    pub fn max_width(&self) -> usize {
        self.modules
            .iter()
            .map(|m| m.n_in.max(m.n_out))
            .max()
            .unwrap_or(0)
    }

    /// The parameters held.
    pub fn params(&self) -> impl Iterator<Item = &Param> {
        self.modules
            .iter()
            .flat_map(|m| std::iter::once(&m.weight).chain(m.bias.as_ref()))
    }

    /// Runs the modules on one pooled vector `x` (`hidden_size` values) into
    /// `out` (`out_dim` values).
    pub fn apply(&self, x: &[f32], out: &mut [f32]) {
        let mut cur = x.to_vec();
        for m in &self.modules {
            let w = m.weight.as_slice();
            let b = m.bias.as_ref().map(Param::as_slice);
            let next: Vec<f32> = (0..m.n_out)
                .map(|j| {
                    let row = &w[j * m.n_in..(j + 1) * m.n_in];
                    let mut acc = dot_f64(row, &cur);
                    if let Some(b) = b {
                        acc += f64::from(b[j]);
                    }
                    let y = acc as f32;
                    match m.act {
                        DenseActivation::Identity => y,
                        DenseActivation::Tanh => y.tanh(),
                    }
                })
                .collect();
            cur = next;
        }
        out[..cur.len()].copy_from_slice(&cur);
    }
}
