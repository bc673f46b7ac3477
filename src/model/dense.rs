//! The sentence-transformers `Dense` modules after pooling (EmbeddingGemma:
//! 768 -> 3072 -> 768, no bias, identity; LaBSE-style heads with `tanh`):
//! `y = act(x · Wᵀ + b)` on each pooled vector, before the normalization.
//!
//! Stored as the tensors `dense.{i}.weight` (`[out x in]`, the torch
//! layout) and, if the module has one, `dense.{i}.bias`, with the
//! activations in the metadata key `dense_modules` ([`ModelConfig`]). One
//! vector per text: the products accumulate in f64 (`vector::dot_f64`) and round
//! once.

use std::sync::Arc;

use crate::error::{Error, Result};
use crate::formats::ModelFile;
use crate::model::config::{DenseActivation, ModelConfig};
use crate::model::param::{load_param, Param};
use crate::vector::dot_f64;

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
