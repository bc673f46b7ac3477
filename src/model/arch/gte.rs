//! GTE "new" (hub `model_type` `new`: gte-multilingual-base,
//! gte-base/large-en-v1.5, snowflake-arctic-embed-m-v2.0; native
//! `model_type` `gte`), as transformers 5.24's `GteModel`.
//!
//! BERT's post-norm layer with rotary positions instead of a position
//! table: word + token type rows, then `embeddings.LayerNorm`; per layer a
//! fused `qkv_proj` (q | k | v, with bias), rotary positions on the whole
//! head, `o_proj` (bias), the residual and `attn_ln`; then a GLU,
//! `down_proj(up · gelu(gate))` where `up | gate` come from one
//! `up_gate_proj` without bias, `down_proj` with one, the residual and
//! `mlp_ln`.
//!
//! Rotary frequencies: the hub's `rope_scaling` `{"type": "ntk", "factor":
//! f}` is applied at every length (the remote code builds its cache for `f`
//! times the positions at construction), which is `(θ·f)^(-2i/d) /
//! f^(2/d)`: transformers' `linear` scaling by `f^(2/d)` on base `θ·f`, the
//! native layout's way of writing it.

use std::collections::BTreeMap;

use serde_json::Value;

use super::tensors::{module, norm, Dense, Dim, EmbeddingTensors, Glu, LayerTensors};
use super::{Family, Positions, RelativePositions};
use crate::error::{Error, Result};
use crate::model::blocks::norm::NormKind;
use crate::tokenizer::spec::TokenizerKind;

/// The tensors of `NewLayer`: a fused `qkv_proj` and `o_proj` with biases,
/// `up_gate_proj` (`up | gate`) without one, `down_proj` with one.
pub const LAYER: LayerTensors = LayerTensors {
    attn_norm: Some(norm("attn_ln")),
    qkv: Dense {
        modules: &[module(
            "attention.qkv_proj",
            &[Dim::Query, Dim::KeyValue, Dim::KeyValue],
        )],
        input: Dim::Hidden,
        bias: true,
    },
    q_norm: None,
    k_norm: None,
    attn_out: Dense {
        modules: &[module("attention.o_proj", &[Dim::Hidden])],
        input: Dim::Query,
        bias: true,
    },
    post_attn_norm: None,
    mlp_norm: norm("mlp_ln"),
    up: Dense {
        modules: &[module("mlp.up_gate_proj", &[Dim::Inter, Dim::Inter])],
        input: Dim::Hidden,
        bias: false,
    },
    glu: Glu::UpGate,
    down: Dense {
        modules: &[module("mlp.down_proj", &[Dim::Hidden])],
        input: Dim::Inter,
        bias: true,
    },
    post_mlp_norm: None,
};

/// The GTE family.
pub static FAMILY: Family = Family {
    name: "gte",
    hf_model_types: &["new", "gte"],
    hf_prefix: "new.",
    layer_prefix: crate::model::names::LAYER_PREFIX,
    embeddings: EmbeddingTensors {
        position: None,
        ..super::bert::EMBEDDINGS
    },
    layer: |_| LAYER,
    final_norm: None,
    positions: Positions::Sequential,
    relative: RelativePositions::Rotary,
    special_tokens: super::roberta::XLM_ROBERTA.special_tokens,
    int8_f32_products: &[],
    hf_alias: super::no_alias,
    hf_config,
    tokenizers: &[TokenizerKind::Unigram],
    norm: NormKind::Layer,
    // `NewLayer` is BERT's post-norm order (attention, residual, attn_ln;
    // MLP, residual, mlp_ln); the rotary positions are the attention
    // block's.
    forward: super::bert::POST_NORM,
};

fn unsupported(what: String) -> Error {
    Error::unsupported(format!("config.json: {what}"))
}

/// Metadata key of the linear rotary scaling.
const KEY_ROPE_LINEAR: &str = "rope_linear_factor";

fn hf_config(cfg: &Value, md: &mut BTreeMap<String, String>) -> Result<()> {
    let flag = |k: &str| cfg.get(k).and_then(Value::as_bool);
    if flag("logn_attention_scale") == Some(true) || flag("logn_attention_clip1") == Some(true) {
        return Err(unsupported(
            "GTE with logn_attention_scale true (length-scaled attention) is not supported".into(),
        ));
    }
    if flag("pack_qkv") == Some(false) {
        return Err(unsupported(
            "GTE with pack_qkv false (separate Q, K, V) is not supported (the released checkpoints pack them)".into(),
        ));
    }
    if let Some(t) = cfg.get("layer_norm_type").and_then(Value::as_str) {
        if t != "layer_norm" {
            return Err(unsupported(format!(
                "GTE layer_norm_type '{t}' is not supported (layer_norm)"
            )));
        }
    }
    if let Some(p) = cfg.get("position_embedding_type").and_then(Value::as_str) {
        if p != "rope" {
            return Err(unsupported(format!(
                "GTE position_embedding_type '{p}' is not supported (rope)"
            )));
        }
    }
    if cfg.get("type_vocab_size").and_then(Value::as_u64) == Some(0) {
        return Err(unsupported(
            "GTE with type_vocab_size 0 (no token type table: gte-base-en-v1.5) is not supported yet".into(),
        ));
    }
    let h = cfg.get("hidden_size").and_then(Value::as_u64).unwrap_or(0);
    let n = cfg
        .get("num_attention_heads")
        .and_then(Value::as_u64)
        .unwrap_or(1)
        .max(1);
    let d = cfg.get("head_dim").and_then(Value::as_u64).unwrap_or(h / n);
    if d * n != h {
        return Err(unsupported(format!(
            "GTE head_dim {d} is not hidden_size / num_attention_heads"
        )));
    }
    // The rotary settings: transformers 5's `rope_parameters`, else the
    // hub's `rope_theta` and `rope_scaling`.
    let params = cfg
        .get("rope_parameters")
        .filter(|v| v.is_object())
        .or_else(|| cfg.get("rope_scaling").filter(|v| v.is_object()));
    let mut theta = params
        .and_then(|p| p.get("rope_theta"))
        .and_then(Value::as_f64)
        .or_else(|| super::f64_key(cfg, "rope_theta"))
        .unwrap_or(10_000.0);
    let mut linear = 1.0f64;
    if let Some(p) = params {
        let ty = p
            .get("rope_type")
            .or_else(|| p.get("type"))
            .and_then(Value::as_str)
            .unwrap_or("default");
        let factor = || -> Result<f64> {
            p.get("factor")
                .and_then(Value::as_f64)
                .filter(|f| f.is_finite() && *f >= 1.0)
                .ok_or_else(|| {
                    unsupported(format!("GTE rotary scaling '{ty}' without a factor >= 1"))
                })
        };
        match ty {
            "default" => {}
            "linear" => linear = factor()?,
            "ntk" => {
                let f = factor()?;
                theta *= f;
                linear = f.powf(2.0 / d as f64);
            }
            other => {
                return Err(unsupported(format!(
                    "GTE rotary scaling '{other}' is not supported (ntk, linear, default)"
                )))
            }
        }
    }
    md.insert(super::modernbert::KEY_ROPE_THETA.into(), format!("{theta}"));
    if linear != 1.0 {
        md.insert(KEY_ROPE_LINEAR.into(), format!("{linear}"));
    }
    let type_vocab = cfg
        .get("type_vocab_size")
        .and_then(Value::as_u64)
        .unwrap_or(1);
    md.insert("type_vocab_size".into(), type_vocab.to_string());
    Ok(())
}
