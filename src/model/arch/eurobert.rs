//! EuroBERT (`model_type` `eurobert`: EuroBERT-210m/610m/2.1B, the base of
//! jina-embeddings-v5-text-nano), as transformers 5.24's `EuroBertModel`: a
//! bidirectional Llama.
//!
//! Word embeddings (`embed_tokens`) without positions or norm, then
//! pre-norm layers: `input_layernorm` (RMSNorm), `q_proj`, `k_proj`,
//! `v_proj` without bias (query heads and fewer key/value heads), rotary
//! positions (`rope_theta`), attention over every token, `o_proj` added to
//! the residual; `post_attention_layernorm`, SwiGLU
//! (`down_proj(silu(gate_proj) · up_proj)`) added to the residual; a final
//! `norm`.
//!
//! `config.json` in either layout: the hub's transformers 4 keys
//! (`rope_theta`, `rope_scaling` null) or transformers 5's
//! `rope_parameters`.

use std::collections::BTreeMap;

use serde_json::Value;

use super::tensors::LayerTensors;
use super::{Family, Positions, RelativePositions, SpecialTokens};
use crate::error::{Error, Result};
use crate::model::blocks::norm::NormKind;
use crate::tokenizer::spec::TokenizerKind;

/// The tensors of `EuroBertDecoderLayer`: Qwen3's without the head norms.
pub const LAYER: LayerTensors = LayerTensors {
    q_norm: None,
    k_norm: None,
    ..super::qwen3::LAYER
};

/// The EuroBERT family.
pub static FAMILY: Family = Family {
    name: "eurobert",
    hf_model_types: &["eurobert"],
    hf_prefix: "model.",
    layer_prefix: crate::model::names::LAYERS_PREFIX,
    embeddings: super::qwen3::EMBEDDINGS,
    layer: |_| LAYER,
    final_norm: super::qwen3::FINAL_NORM,
    positions: Positions::Sequential,
    relative: RelativePositions::Rotary,
    special_tokens: SpecialTokens::DECLARED,
    int8_f32_products: &[],
    hf_alias: super::no_alias,
    hf_config,
    tokenizers: &[TokenizerKind::Bpe],
    norm: NormKind::Rms,
    // `EuroBertDecoderLayer` is Llama's pre-norm order, ModernBERT's:
    // h += o_proj(attention(input_layernorm(h))); h += mlp(post_attention_layernorm(h)).
    forward: super::modernbert::PRE_NORM,
};

fn hf_config(cfg: &Value, md: &mut BTreeMap<String, String>) -> Result<()> {
    for key in ["attention_bias", "mlp_bias", "is_decoder"] {
        if cfg.get(key).and_then(Value::as_bool) == Some(true) {
            return Err(Error::unsupported(format!(
                "config.json: EuroBERT with {key} true is not supported (no released EuroBERT has it)"
            )));
        }
    }
    let act = cfg
        .get("hidden_act")
        .and_then(Value::as_str)
        .unwrap_or("silu");
    if act != "silu" {
        return Err(Error::unsupported(format!(
            "config.json: EuroBERT hidden_act '{act}' is not supported (silu)"
        )));
    }
    super::qwen3::decoder_keys(cfg, md)?;
    let (theta, _) = super::rope_thetas(cfg, "rope_theta", "rope_theta")?;
    md.insert(
        super::modernbert::KEY_ROPE_THETA.into(),
        format!("{}", theta.unwrap_or(250_000.0)),
    );
    md.insert("hidden_act".into(), "silu".into());
    Ok(())
}
