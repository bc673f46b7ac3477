//! Qwen3 (`model_type` `qwen3`: Qwen3-Embedding, Qwen3-Reranker,
//! harrier-oss-v1's Qwen3 models), as transformers 5.24's `Qwen3Model`.
//!
//! Word embeddings (`embed_tokens`) without positions or norm, then
//! pre-norm decoder layers: `input_layernorm` (RMSNorm), `q_proj`, `k_proj`,
//! `v_proj` without bias (query heads and fewer key/value heads of an
//! explicit `head_dim`), `q_norm` / `k_norm` (RMSNorm over each head), rotary
//! positions (`rope_theta`), causal attention, `o_proj` added to the
//! residual; `post_attention_layernorm`, SwiGLU (`down_proj(silu(gate_proj)
//! · up_proj)`) added to the residual; a final `norm`.
//!
//! `config.json` in either layout: transformers 4's `rope_theta` /
//! `rope_scaling` or transformers 5's `rope_parameters`.

use std::collections::BTreeMap;

use serde_json::Value;

use super::tensors::{module, norm_no_bias, Dense, Dim, EmbeddingTensors, Glu, LayerTensors};
use super::{Family, Positions, RelativePositions, SpecialTokens};
use crate::error::{Error, Result};
use crate::model::blocks::norm::NormKind;
use crate::tokenizer::spec::TokenizerKind;

/// Qwen3's embeddings: the word table alone (`embed_tokens`).
pub(crate) const EMBEDDINGS: EmbeddingTensors = EmbeddingTensors {
    word: "embed_tokens",
    position: None,
    token_type: None,
    norm: None,
    scale: false,
};

/// The tensors of `Qwen3DecoderLayer` (and, without the head norms or with
/// Gemma3's extra norms, of EuroBERT's and Gemma3's): no product with a
/// bias, RMSNorms.
pub(crate) const LAYER: LayerTensors = LayerTensors {
    attn_norm: Some(norm_no_bias("input_layernorm")),
    qkv: Dense {
        modules: &[
            module("self_attn.q_proj", &[Dim::Query]),
            module("self_attn.k_proj", &[Dim::KeyValue]),
            module("self_attn.v_proj", &[Dim::KeyValue]),
        ],
        input: Dim::Hidden,
        bias: false,
    },
    q_norm: Some("self_attn.q_norm"),
    k_norm: Some("self_attn.k_norm"),
    attn_out: Dense {
        modules: &[module("self_attn.o_proj", &[Dim::Hidden])],
        input: Dim::Query,
        bias: false,
    },
    post_attn_norm: None,
    mlp_norm: norm_no_bias("post_attention_layernorm"),
    up: Dense {
        modules: &[
            module("mlp.gate_proj", &[Dim::Inter]),
            module("mlp.up_proj", &[Dim::Inter]),
        ],
        input: Dim::Hidden,
        bias: false,
    },
    glu: Glu::GateUp,
    down: Dense {
        modules: &[module("mlp.down_proj", &[Dim::Hidden])],
        input: Dim::Inter,
        bias: false,
    },
    post_mlp_norm: None,
};

/// The final `norm`.
pub(crate) const FINAL_NORM: Option<super::NormTensor> = Some(norm_no_bias("norm"));

/// The Qwen3 family.
pub static FAMILY: Family = Family {
    name: "qwen3",
    hf_model_types: &["qwen3"],
    hf_prefix: "model.",
    layer_prefix: crate::model::names::LAYERS_PREFIX,
    embeddings: EMBEDDINGS,
    layer: |_| LAYER,
    final_norm: FINAL_NORM,
    positions: Positions::Sequential,
    relative: RelativePositions::Rotary,
    special_tokens: SpecialTokens::DECLARED,
    int8_f32_products: &[],
    hf_alias: super::no_alias,
    hf_config,
    tokenizers: &[TokenizerKind::Bpe],
    norm: NormKind::Rms,
    // `Qwen3DecoderLayer` runs its blocks in ModernBERT's pre-norm order:
    // h += o_proj(attention(input_layernorm(h))); h += mlp(post_attention_layernorm(h)).
    forward: super::modernbert::PRE_NORM,
};

/// Writes the metadata keys every decoder-shaped family shares: the RMSNorm
/// eps, the head width, the key/value heads, no token types.
pub(crate) fn decoder_keys(cfg: &Value, md: &mut BTreeMap<String, String>) -> Result<()> {
    let eps = super::f64_key(cfg, "rms_norm_eps").unwrap_or(1e-6);
    md.insert("layer_norm_eps".into(), format!("{eps:e}"));
    md.insert("type_vocab_size".into(), "0".into());
    if let Some(d) = cfg.get("head_dim").and_then(Value::as_u64) {
        md.insert("head_dim".into(), d.to_string());
    }
    if let Some(kv) = cfg.get("num_key_value_heads").and_then(Value::as_u64) {
        md.insert("num_key_value_heads".into(), kv.to_string());
    }
    Ok(())
}

fn hf_config(cfg: &Value, md: &mut BTreeMap<String, String>) -> Result<()> {
    for key in ["attention_bias", "use_sliding_window"] {
        if cfg.get(key).and_then(Value::as_bool) == Some(true) {
            return Err(Error::unsupported(format!(
                "config.json: Qwen3 with {key} true is not supported (no released Qwen3 embedder or reranker has it)"
            )));
        }
    }
    let act = cfg
        .get("hidden_act")
        .and_then(Value::as_str)
        .unwrap_or("silu");
    if act != "silu" {
        return Err(Error::unsupported(format!(
            "config.json: Qwen3 hidden_act '{act}' is not supported (silu)"
        )));
    }
    decoder_keys(cfg, md)?;
    let (theta, _) = super::rope_thetas(cfg, "rope_theta", "rope_theta")?;
    md.insert(
        super::modernbert::KEY_ROPE_THETA.into(),
        format!("{}", theta.unwrap_or(1_000_000.0)),
    );
    md.insert("hidden_act".into(), "silu".into());
    md.insert("attention".into(), "causal".into());
    Ok(())
}
