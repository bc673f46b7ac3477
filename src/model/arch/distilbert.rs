//! DistilBERT (`model_type` `distilbert`: multi-qa-distilbert-cos-v1,
//! msmarco-distilbert-*, distiluse-base-multilingual-cased, the OpenSearch
//! sparse document encoders), as transformers 5.24's `DistilBertModel`.
//!
//! BERT's post-norm layer under other names: word + position rows (no
//! token types), then `embeddings.LayerNorm`; per layer `q_lin`, `k_lin`,
//! `v_lin`, `out_lin`, the residual and `sa_layer_norm`; `ffn.lin1`, the
//! activation, `ffn.lin2`, the residual and `output_layer_norm` (eps
//! 1e-12, fixed by the class). Every product has a bias.
//!
//! `config.json` has DistilBERT's own keys (`dim`, `n_layers`, `n_heads`,
//! `hidden_dim`, `activation`), read as the core ones by `hf_alias`.

use std::collections::BTreeMap;

use serde_json::Value;

use super::tensors::{module, norm, Dense, Dim, EmbeddingTensors, LayerTensors};
use super::{Family, Positions};
use crate::error::{Error, Result};
use crate::tokenizer::spec::TokenizerKind;

/// The tensors of `TransformerBlock`: BERT's, under DistilBERT's names.
pub const LAYER: LayerTensors = LayerTensors {
    attn_norm: Some(norm("sa_layer_norm")),
    qkv: Dense {
        modules: &[
            module("attention.q_lin", &[Dim::Query]),
            module("attention.k_lin", &[Dim::KeyValue]),
            module("attention.v_lin", &[Dim::KeyValue]),
        ],
        ..super::bert::LAYER.qkv
    },
    attn_out: Dense {
        modules: &[module("attention.out_lin", &[Dim::Hidden])],
        ..super::bert::LAYER.attn_out
    },
    mlp_norm: norm("output_layer_norm"),
    up: Dense {
        modules: &[module("ffn.lin1", &[Dim::Inter])],
        ..super::bert::LAYER.up
    },
    down: Dense {
        modules: &[module("ffn.lin2", &[Dim::Hidden])],
        ..super::bert::LAYER.down
    },
    ..super::bert::LAYER
};

/// The DistilBERT family.
pub static FAMILY: Family = Family {
    name: "distilbert",
    hf_model_types: &["distilbert"],
    hf_prefix: "distilbert.",
    layer_prefix: crate::model::names::TRANSFORMER_LAYER_PREFIX,
    embeddings: EmbeddingTensors {
        token_type: None,
        ..super::bert::EMBEDDINGS
    },
    layer: |_| LAYER,
    positions: Positions::Sequential,
    int8_f32_products: &[],
    hf_alias,
    hf_config,
    tokenizers: &[TokenizerKind::WordPiece],
    // `TransformerBlock` is BERT's layer: attention, residual,
    // sa_layer_norm; FFN, residual, output_layer_norm.
    ..super::bert::FAMILY_BLOCKS
};

/// DistilBERT's keys read as the core ones.
fn hf_alias(cfg: &mut Value) -> Result<()> {
    match cfg.get("activation").and_then(Value::as_str) {
        None | Some("gelu") => {}
        Some(other) => {
            return Err(Error::unsupported(format!(
                "config.json: DistilBERT activation '{other}' is not supported (gelu)"
            )))
        }
    }
    for (from, to) in [
        ("dim", "hidden_size"),
        ("n_layers", "num_hidden_layers"),
        ("n_heads", "num_attention_heads"),
        ("hidden_dim", "intermediate_size"),
        ("activation", "hidden_act"),
    ] {
        super::alias_key(cfg, from, to);
    }
    Ok(())
}

fn hf_config(_cfg: &Value, md: &mut BTreeMap<String, String>) -> Result<()> {
    // The norms' eps is the class's 1e-12 (the importer's default); no
    // token type table.
    md.insert("type_vocab_size".into(), "0".into());
    Ok(())
}
