//! NomicBERT (`model_type` `nomic_bert`: nomic-embed-text-v1 and v1.5), as
//! transformers 5.24's `NomicBertModel`.
//!
//! BERT's post-norm layer with rotary positions instead of a position
//! table: word + token type rows, then `emb_ln`; per layer a fused `Wqkv`
//! (q | k | v, no bias), rotary positions on the whole head (rotate-half,
//! base `rotary_emb_base`), `out_proj`, the residual and `norm1`; then
//! SwiGLU, `fc2(fc11(x) · silu(fc12(x)))`, the residual and `norm2`. No
//! product has a bias.
//!
//! `config.json` in either layout: the hub's remote-code keys (`n_embd`,
//! `n_layer`, `n_head`, `n_inner`, `n_positions`, `layer_norm_epsilon`,
//! `rotary_emb_base`, `activation_function`, ...), read as the core keys by
//! `hf_alias`, or transformers 5's native ones (`hidden_size`, ...,
//! `hidden_act` `silu`, `rope_parameters`). What the remote code can build
//! and the native class cannot (pre-norm, biases, partial or interleaved
//! rotary, scaled rotary, mixture-of-experts layers: nomic-embed-text-v2-moe)
//! is refused by name.

use std::collections::BTreeMap;

use serde_json::Value;

use super::tensors::{module, norm, Dense, Dim, EmbeddingTensors, Glu, LayerTensors};
use super::{Family, Positions, RelativePositions};
use crate::error::{Error, Result};
use crate::model::blocks::norm::NormKind;
use crate::tokenizer::spec::TokenizerKind;

/// The tensors of `NomicBertLayer`: a fused `Wqkv`, `out_proj`, SwiGLU's
/// `fc12` (gate) and `fc11` (up), `fc2`, no product with a bias; `norm1` and
/// `norm2` are LayerNorms with biases.
pub const LAYER: LayerTensors = LayerTensors {
    attn_norm: Some(norm("norm1")),
    qkv: Dense {
        modules: &[module(
            "attn.Wqkv",
            &[Dim::Query, Dim::KeyValue, Dim::KeyValue],
        )],
        input: Dim::Hidden,
        bias: false,
    },
    q_norm: None,
    k_norm: None,
    attn_out: Dense {
        modules: &[module("attn.out_proj", &[Dim::Hidden])],
        input: Dim::Query,
        bias: false,
    },
    post_attn_norm: None,
    mlp_norm: norm("norm2"),
    up: Dense {
        modules: &[
            module("mlp.fc12", &[Dim::Inter]),
            module("mlp.fc11", &[Dim::Inter]),
        ],
        input: Dim::Hidden,
        bias: false,
    },
    glu: Glu::GateUp,
    down: Dense {
        modules: &[module("mlp.fc2", &[Dim::Hidden])],
        input: Dim::Inter,
        bias: false,
    },
    post_mlp_norm: None,
};

/// The NomicBERT family.
pub static FAMILY: Family = Family {
    name: "nomic_bert",
    hf_model_types: &["nomic_bert"],
    hf_prefix: "bert.",
    layer_prefix: crate::model::names::ENCODER_LAYERS_PREFIX,
    embeddings: EmbeddingTensors {
        position: None,
        norm: Some(norm("emb_ln")),
        ..super::bert::EMBEDDINGS
    },
    layer: |_| LAYER,
    final_norm: None,
    positions: Positions::Sequential,
    relative: RelativePositions::Rotary,
    special_tokens: super::bert::FAMILY_BLOCKS.special_tokens,
    int8_f32_products: &[],
    hf_alias,
    hf_config,
    tokenizers: &[TokenizerKind::WordPiece],
    norm: NormKind::Layer,
    // `NomicBertLayer` is BERT's post-norm order (attention, residual,
    // norm1; MLP, residual, norm2); the rotary positions are the
    // attention block's.
    forward: super::bert::POST_NORM,
};

fn unsupported(what: String) -> Error {
    Error::unsupported(format!("config.json: {what}"))
}

/// The hub's remote-code layout (nomic-ai/nomic-bert-2048's
/// `NomicBertConfig`) read as the core keys; the native layout passes
/// through.
fn hf_alias(cfg: &mut Value) -> Result<()> {
    // Mixture-of-experts layers (nomic-embed-text-v2-moe), either layout.
    for key in ["moe_every_n_layers", "num_experts", "moe_top_k"] {
        if cfg.get(key).and_then(Value::as_u64).is_some_and(|n| n > 0) {
            return Err(unsupported(format!(
                "NomicBERT with mixture-of-experts layers ({key}: nomic-embed-text-v2-moe) \
                 is not supported: transformers' NomicBertModel has none, so there is no reference"
            )));
        }
    }
    if cfg.get("n_embd").is_none() {
        return Ok(());
    }
    let flag = |k: &str| cfg.get(k).and_then(Value::as_bool) == Some(true);
    for (key, what) in [
        ("prenorm", "pre-norm layers"),
        ("qkv_proj_bias", "Q/K/V biases"),
        ("mlp_fc1_bias", "MLP up biases"),
        ("mlp_fc2_bias", "MLP down biases"),
        ("rotary_emb_interleaved", "interleaved rotary positions"),
        ("use_rms_norm", "RMSNorm"),
        ("parallel_block", "parallel attention and MLP blocks"),
        ("causal", "causal attention"),
    ] {
        if flag(key) {
            return Err(unsupported(format!(
                "NomicBERT with {key} true ({what}) is not supported (nomic-embed-text-v1 and v1.5 have none)"
            )));
        }
    }
    if let Some(f) = cfg.get("rotary_emb_fraction").and_then(Value::as_f64) {
        if f != 1.0 {
            return Err(unsupported(format!(
                "NomicBERT rotary_emb_fraction {f} is not supported (rotary on the whole head, 1.0, only)"
            )));
        }
    }
    for key in ["rotary_scaling_factor", "rotary_emb_scale_base"] {
        if cfg.get(key).is_some_and(|v| !v.is_null()) {
            return Err(unsupported(format!(
                "NomicBERT {key} {} is not supported (unscaled rotary positions only)",
                cfg[key]
            )));
        }
    }
    match cfg.get("activation_function").and_then(Value::as_str) {
        None | Some("swiglu") => {}
        Some(other) => {
            return Err(unsupported(format!(
                "NomicBERT activation_function '{other}' is not supported (swiglu only)"
            )))
        }
    }
    // The gated MLP's width: `n_inner` rounded up to a multiple of 256
    // (flash-attn's `GatedMlp`, which the remote code builds).
    let inner = cfg
        .get("n_inner")
        .and_then(Value::as_u64)
        .ok_or_else(|| unsupported("NomicBERT n_inner is missing (the MLP width)".to_string()))?;
    let o = cfg
        .as_object_mut()
        .ok_or_else(|| Error::model("config.json is not an object"))?;
    o.insert(
        "intermediate_size".into(),
        inner.div_ceil(256).saturating_mul(256).into(),
    );
    o.insert("hidden_act".into(), "silu".into());
    o.remove("n_inner");
    o.remove("activation_function");
    for (from, to) in [
        ("n_embd", "hidden_size"),
        ("n_layer", "num_hidden_layers"),
        ("n_head", "num_attention_heads"),
        ("n_positions", "max_position_embeddings"),
        ("layer_norm_epsilon", "layer_norm_eps"),
        ("rotary_emb_base", "rope_theta"),
    ] {
        super::alias_key(cfg, from, to);
    }
    Ok(())
}

fn hf_config(cfg: &Value, md: &mut BTreeMap<String, String>) -> Result<()> {
    match cfg.get("hidden_act").and_then(Value::as_str) {
        None | Some("silu") | Some("swish") => {}
        Some(other) => {
            return Err(unsupported(format!(
                "NomicBERT hidden_act '{other}' is not supported (silu: SwiGLU)"
            )))
        }
    }
    if let (Some(hd), Some(h), Some(n)) = (
        cfg.get("head_dim").and_then(Value::as_u64),
        cfg.get("hidden_size").and_then(Value::as_u64),
        cfg.get("num_attention_heads").and_then(Value::as_u64),
    ) {
        if n == 0 || hd * n != h {
            return Err(unsupported(format!(
                "NomicBERT head_dim {hd} is not hidden_size / num_attention_heads"
            )));
        }
    }
    let (theta, _) = super::rope_thetas(cfg, "rope_theta", "rope_theta")?;
    md.insert("hidden_act".into(), "silu".into());
    md.insert(
        super::modernbert::KEY_ROPE_THETA.into(),
        format!("{}", theta.unwrap_or(10_000.0)),
    );
    let type_vocab = cfg
        .get("type_vocab_size")
        .and_then(Value::as_u64)
        .unwrap_or(2);
    md.insert("type_vocab_size".into(), type_vocab.to_string());
    Ok(())
}
