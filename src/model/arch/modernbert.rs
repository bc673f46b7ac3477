//! ModernBERT (`model_type` `modernbert`: gte-modernbert-base,
//! modernbert-embed-base, granite-embedding-r2, Ettin, mmBERT; their
//! rerankers), as transformers 5.24's `ModernBertModel`.
//!
//! Embeddings without a position table (`tok_embeddings`, then a
//! LayerNorm), then pre-norm layers: `attn_norm` (none in layer 0), a fused
//! `Wqkv` without bias, rotary positions (`global_rope_theta` on global
//! layers, `local_rope_theta` on sliding-window ones), attention over all
//! tokens on every `global_attn_every_n_layers`-th layer (from layer 0) and
//! over `|i - j| <= local_attention / 2` on the others, `Wo` added to the
//! residual; `mlp_norm`, GeGLU `Wi` (`input | gate`, `2 x intermediate`)
//! and `Wo`; a `final_norm` after the last layer. Every LayerNorm is
//! without bias.
//!
//! `config.json` in either layout: the hub's transformers 4 keys
//! (`global_attn_every_n_layers`, `local_attention`, `global_rope_theta`,
//! `local_rope_theta`) or transformers 5's (`layer_types`,
//! `sliding_window`, `rope_parameters` per layer type).

use std::collections::BTreeMap;

use serde_json::Value;

use super::tensors::{module, norm_no_bias, Dense, Dim, EmbeddingTensors, Glu, LayerTensors};
use super::{Family, Forward, Positions, RelativePositions, SpecialTokens};
use crate::error::{Error, Result};
use crate::model::blocks::norm::NormKind;
use crate::model::blocks::{Layer, LayerRun, Stage, Traced};
use crate::model::precision::Product;
use crate::tokenizer::spec::TokenizerKind;

/// The tensors of `ModernBertEncoderLayer`: a fused `Wqkv`, `Wo`, GeGLU's
/// `Wi` (`input | gate`, the first half through the activation) and `Wo`,
/// no product with a bias, LayerNorms without biases.
pub const LAYER: LayerTensors = LayerTensors {
    attn_norm: Some(norm_no_bias("attn_norm")),
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
        modules: &[module("attn.Wo", &[Dim::Hidden])],
        input: Dim::Query,
        bias: false,
    },
    post_attn_norm: None,
    mlp_norm: norm_no_bias("mlp_norm"),
    up: Dense {
        modules: &[module("mlp.Wi", &[Dim::Inter, Dim::Inter])],
        input: Dim::Hidden,
        bias: false,
    },
    glu: Glu::GateUp,
    down: Dense {
        modules: &[module("mlp.Wo", &[Dim::Hidden])],
        input: Dim::Inter,
        bias: false,
    },
    post_mlp_norm: None,
};

/// Layer `l`'s tensors: layer 0's attention norm is an identity
/// (`nn.Identity() if layer_id == 0`).
fn layer(l: usize) -> LayerTensors {
    match l {
        0 => LayerTensors {
            attn_norm: None,
            ..LAYER
        },
        _ => LAYER,
    }
}

/// The pre-norm layer order ([`forward`]) that ModernBERT, Qwen3 and
/// EuroBERT share.
pub const PRE_NORM: Forward = Forward {
    run: forward,
    normed: true,
};

/// The ModernBERT family.
pub static FAMILY: Family = Family {
    name: "modernbert",
    hf_model_types: &["modernbert"],
    hf_prefix: "model.",
    layer_prefix: crate::model::names::LAYERS_PREFIX,
    embeddings: EmbeddingTensors {
        word: "embeddings.tok_embeddings",
        position: None,
        token_type: None,
        norm: Some(norm_no_bias("embeddings.norm")),
        scale: false,
    },
    layer,
    final_norm: Some(norm_no_bias("final_norm")),
    positions: Positions::Sequential,
    relative: RelativePositions::Rotary,
    // BERT's token names; the template is the only framing it declares.
    special_tokens: SpecialTokens {
        post_processors: &["TemplateProcessing"],
        ..super::bert::FAMILY_BLOCKS.special_tokens
    },
    int8_f32_products: &[],
    hf_alias: super::no_alias,
    hf_config,
    tokenizers: &[TokenizerKind::Bpe],
    norm: NormKind::Layer,
    forward: PRE_NORM,
};

/// The ModernBERT layer (HF `ModernBertEncoderLayer`): pre-norm.
///
/// ```text
/// h = h + Wo(attention(attn_norm(h)))     attn_norm: identity in layer 0
/// h = h + Wo(GeGLU(Wi(mlp_norm(h))))
/// ```
pub fn forward(l: &Layer, r: &mut LayerRun<'_, '_>) {
    let (total, h, par) = (r.total, r.h, r.par);
    match &l.attn_norm {
        Some(n) => n.apply_to(r.hidden, r.normed, h, par),
        None => r.normed.copy_from_slice(r.hidden),
    }
    r.trace(Stage::Input(Product::Qkv), Traced::Normed);
    l.attention.project_qkv(r.normed, r.lens, &mut r.s, par);
    l.attention.attend_all(r.lens, None, &mut r.s, par);
    r.trace(Stage::Input(Product::AttnOut), Traced::Ctx);
    l.attention.output(r.s.ctx, total, r.hidden, par, r.s.lin);
    r.trace(Stage::Attention, Traced::Hidden);

    if let Some(n) = &l.mlp_norm {
        n.apply_to(r.hidden, r.normed, h, par);
    }
    r.trace(Stage::Input(Product::FfnUp), Traced::Normed);
    l.mlp.up(r.normed, total, r.wide, r.inter, par, r.s.lin);
    r.trace(Stage::Input(Product::FfnDown), Traced::Inter);
    l.mlp.down(r.inter, total, r.hidden, par, r.s.lin);
    r.trace(Stage::FeedForward, Traced::Hidden);
}

/// Metadata key: the sliding window of local layers, each side (`|i - j|
/// <= window`).
pub const KEY_WINDOW: &str = "sliding_window_each_side";
/// Metadata key: the layer kinds, one letter a layer (`g` global, `l`
/// local).
pub const KEY_LAYER_TYPES: &str = "layer_types";
/// Metadata key: the rotary base of global layers.
pub const KEY_ROPE_THETA: &str = "rope_theta";
/// Metadata key: the rotary base of local layers.
pub const KEY_LOCAL_ROPE_THETA: &str = "local_rope_theta";

fn hf_config(cfg: &Value, md: &mut BTreeMap<String, String>) -> Result<()> {
    for key in ["attention_bias", "mlp_bias", "norm_bias"] {
        if cfg.get(key).and_then(Value::as_bool) == Some(true) {
            return Err(Error::unsupported(format!(
                "config.json: ModernBERT with {key} true is not supported (every released checkpoint has none)"
            )));
        }
    }
    // Layer kinds: transformers 5's `layer_types`, else every n-th global
    // from layer 0.
    let kinds = super::layer_kinds(cfg, &["global_attn_every_n_layers"], 3, 0)?;
    // `local_attention` is the whole window; transformers 5's
    // `sliding_window` property is its half.
    let each_side = match cfg.get("local_attention").and_then(Value::as_u64) {
        Some(w) => w / 2,
        None => cfg
            .get("sliding_window")
            .and_then(Value::as_u64)
            .unwrap_or(64),
    };
    // Thetas: transformers 5's `rope_parameters` per layer type, else the
    // hub's keys.
    let (global, local) = super::rope_thetas(cfg, "global_rope_theta", "local_rope_theta")?;
    let act = cfg
        .get("hidden_activation")
        .and_then(Value::as_str)
        .unwrap_or("gelu");
    let act = match act {
        "gelu" => "gelu",
        "gelu_new" | "gelu_pytorch_tanh" => "gelu_tanh",
        other => {
            return Err(Error::unsupported(format!(
            "config.json: hidden_activation '{other}' is not supported (gelu, gelu_pytorch_tanh)"
        )))
        }
    };
    md.insert("hidden_act".into(), act.into());
    let eps = super::f64_key(cfg, "norm_eps").unwrap_or(1e-5);
    md.insert("layer_norm_eps".into(), format!("{eps:e}"));
    md.insert("type_vocab_size".into(), "0".into());
    md.insert(KEY_LAYER_TYPES.into(), kinds);
    md.insert(KEY_WINDOW.into(), each_side.to_string());
    md.insert(
        KEY_ROPE_THETA.into(),
        format!("{}", global.unwrap_or(160_000.0)),
    );
    md.insert(
        KEY_LOCAL_ROPE_THETA.into(),
        format!("{}", local.unwrap_or(10_000.0)),
    );
    Ok(())
}
