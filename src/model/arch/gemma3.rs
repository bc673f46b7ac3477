//! Gemma3 text encoders (`model_type` `gemma3_text`: EmbeddingGemma,
//! harrier-oss-v1's Gemma3 models), as transformers 5.24's
//! `Gemma3TextModel` with `use_bidirectional_attention`.
//!
//! Word embeddings (`embed_tokens`) times `sqrt(hidden_size)`, then layers
//! with a norm on both sides of each block, every norm Gemma's `(1 + w)`
//! RMSNorm: `input_layernorm`, `q_proj` / `k_proj` / `v_proj` without bias
//! (query heads and fewer key/value heads of an explicit `head_dim`),
//! `q_norm` / `k_norm` over each head, rotary positions (`rope_theta` on
//! full layers, `rope_local_base_freq` on sliding ones), attention scaled by
//! `query_pre_attn_scalar^-1/2` over every token (full layers) or over
//! `|i - j| <= sliding_window / 2` (sliding layers: what transformers makes of
//! `sliding_window` for bidirectional attention), `o_proj`,
//! `post_attention_layernorm`, the residual add; `pre_feedforward_layernorm`,
//! GeGLU with the tanh GELU (`down_proj(gelu_tanh(gate_proj) · up_proj)`),
//! `post_feedforward_layernorm`, the residual add; a final `norm`.
//!
//! `config.json` in either layout: transformers 4's `rope_theta` /
//! `rope_local_base_freq` / `sliding_window_pattern` or transformers 5's
//! `rope_parameters` per layer type and `layer_types`.

use std::collections::BTreeMap;

use serde_json::Value;

use super::tensors::{norm_no_bias, EmbeddingTensors, LayerTensors};
use super::{Family, Forward, Positions, RelativePositions, SpecialTokens};
use crate::error::{Error, Result};
use crate::model::blocks::norm::NormKind;
use crate::model::blocks::{add_rows, Layer, LayerRun, Stage, Traced};
use crate::model::precision::Product;
use crate::tokenizer::spec::TokenizerKind;

/// The tensors of `Gemma3DecoderLayer`: Qwen3's with a norm on both sides
/// of each block.
pub const LAYER: LayerTensors = LayerTensors {
    post_attn_norm: Some(norm_no_bias("post_attention_layernorm")),
    mlp_norm: norm_no_bias("pre_feedforward_layernorm"),
    post_mlp_norm: Some(norm_no_bias("post_feedforward_layernorm")),
    ..super::qwen3::LAYER
};

/// Gemma3's layer order ([`forward`]): a norm before and after each block.
pub const SANDWICH: Forward = Forward {
    run: forward,
    normed: true,
};

/// The Gemma3 family.
pub static FAMILY: Family = Family {
    name: "gemma3",
    hf_model_types: &["gemma3_text"],
    hf_prefix: "model.",
    layer_prefix: crate::model::names::LAYERS_PREFIX,
    embeddings: EmbeddingTensors {
        scale: true,
        ..super::qwen3::EMBEDDINGS
    },
    layer: |_| LAYER,
    final_norm: super::qwen3::FINAL_NORM,
    positions: Positions::Sequential,
    relative: RelativePositions::Rotary,
    special_tokens: SpecialTokens::DECLARED,
    int8_f32_products: &[],
    hf_alias: super::no_alias,
    hf_config,
    tokenizers: &[TokenizerKind::Bpe],
    norm: NormKind::RmsUnitOffset,
    forward: SANDWICH,
};

/// The Gemma3 layer (HF `Gemma3DecoderLayer`): a norm before and after each
/// block.
///
/// ```text
/// h = h + post_attention_layernorm(o_proj(attention(input_layernorm(h))))
/// h = h + post_feedforward_layernorm(mlp(pre_feedforward_layernorm(h)))
/// ```
pub fn forward(l: &Layer, r: &mut LayerRun<'_, '_>) {
    let (total, h, par) = (r.total, r.h, r.par);
    if let Some(n) = &l.attn_norm {
        n.apply_to(r.hidden, r.normed, h, par);
    }
    r.trace(Stage::Input(Product::Qkv), Traced::Normed);
    l.attention.project_qkv(r.normed, r.lens, &mut r.s, par);
    l.attention.attend_all(r.lens, None, &mut r.s, par);
    r.trace(Stage::Input(Product::AttnOut), Traced::Ctx);
    l.attention
        .output_to(r.s.ctx, total, r.normed, par, r.s.lin);
    if let Some(n) = &l.post_attn_norm {
        n.apply(r.normed, h, par);
    }
    add_rows(r.hidden, r.normed, h, par);
    r.trace(Stage::Attention, Traced::Hidden);

    if let Some(n) = &l.mlp_norm {
        n.apply_to(r.hidden, r.normed, h, par);
    }
    r.trace(Stage::Input(Product::FfnUp), Traced::Normed);
    l.mlp.up(r.normed, total, r.wide, r.inter, par, r.s.lin);
    r.trace(Stage::Input(Product::FfnDown), Traced::Inter);
    l.mlp.down_to(r.inter, total, r.normed, par, r.s.lin);
    if let Some(n) = &l.post_mlp_norm {
        n.apply(r.normed, h, par);
    }
    add_rows(r.hidden, r.normed, h, par);
    r.trace(Stage::FeedForward, Traced::Hidden);
}

fn hf_config(cfg: &Value, md: &mut BTreeMap<String, String>) -> Result<()> {
    if cfg
        .get("use_bidirectional_attention")
        .and_then(Value::as_bool)
        != Some(true)
    {
        return Err(Error::unsupported(
            "config.json: a Gemma3 text model without use_bidirectional_attention is a causal language model, not an embedder; EmbeddingGemma-style encoders (use_bidirectional_attention true) run",
        ));
    }
    for key in [
        "attention_bias",
        "attn_logit_softcapping",
        "final_logit_softcapping",
    ] {
        match cfg.get(key) {
            None | Some(Value::Null) | Some(Value::Bool(false)) => {}
            Some(v) => {
                return Err(Error::unsupported(format!(
                    "config.json: Gemma3 with {key} {v} is not supported"
                )))
            }
        }
    }
    let act = cfg
        .get("hidden_activation")
        .or_else(|| cfg.get("hidden_act"))
        .and_then(Value::as_str)
        .unwrap_or("gelu_pytorch_tanh");
    if act != "gelu_pytorch_tanh" && act != "gelu_new" {
        return Err(Error::unsupported(format!(
            "config.json: Gemma3 hidden_activation '{act}' is not supported (gelu_pytorch_tanh)"
        )));
    }
    super::qwen3::decoder_keys(cfg, md)?;
    // Layer kinds: `layer_types`, else every `sliding_window_pattern`-th
    // layer full (transformers 4).
    let every = ["sliding_window_pattern", "_sliding_window_pattern"];
    let kinds = super::layer_kinds(cfg, &every, 6, 1)?;
    if kinds.contains('l') {
        let w = cfg
            .get("sliding_window")
            .and_then(Value::as_u64)
            .ok_or_else(|| Error::model("config.json: sliding layers without a sliding_window"))?;
        // Bidirectional sliding layers see |i - j| < w // 2 + 1.
        md.insert(super::modernbert::KEY_WINDOW.into(), (w / 2).to_string());
    }
    md.insert(super::modernbert::KEY_LAYER_TYPES.into(), kinds);
    let (global, local) = super::rope_thetas(cfg, "rope_theta", "rope_local_base_freq")?;
    md.insert(
        super::modernbert::KEY_ROPE_THETA.into(),
        format!("{}", global.unwrap_or(1_000_000.0)),
    );
    md.insert(
        super::modernbert::KEY_LOCAL_ROPE_THETA.into(),
        format!("{}", local.unwrap_or(10_000.0)),
    );
    let head_dim = cfg.get("head_dim").and_then(Value::as_u64).unwrap_or(256);
    let scalar = super::f64_key(cfg, "query_pre_attn_scalar").unwrap_or(head_dim as f64);
    md.insert("query_pre_attn_scalar".into(), format!("{scalar}"));
    md.insert("hidden_act".into(), "gelu_tanh".into());
    Ok(())
}
