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

use super::{AttentionBias, Family, Positions};
use crate::error::{Error, Result};
use crate::model::names::TensorNames;
use crate::tokenizer::spec::TokenizerKind;

/// The DistilBERT family.
pub static FAMILY: Family = Family {
    name: "distilbert",
    hf_model_types: &["distilbert"],
    hf_prefix: "distilbert.",
    layer_prefix: crate::model::names::TRANSFORMER_LAYER_PREFIX,
    names: TensorNames {
        word: "embeddings.word_embeddings",
        position: Some("embeddings.position_embeddings"),
        token_type: None,
        emb_ln: Some("embeddings.LayerNorm"),
        qkv: &["attention.q_lin", "attention.k_lin", "attention.v_lin"],
        attn_out: "attention.out_lin",
        attn_ln: "sa_layer_norm",
        ffn_up: &["ffn.lin1"],
        ffn_down: "ffn.lin2",
        ffn_ln: "output_layer_norm",
        final_norm: None,
        relative_bias: None,
        q_norm: None,
        k_norm: None,
        post_attn_ln: None,
        post_ffn_ln: None,
    },
    positions: Positions::Sequential,
    attention_bias: AttentionBias::None,
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
