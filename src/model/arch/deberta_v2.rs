//! DeBERTa-v2 / v3 (`model_type` `deberta-v2`: mxbai-rerank-base-v1 and the
//! other deberta-v3 cross-encoders), as transformers 5.24's
//! `DebertaV2Model`.
//!
//! BERT's post-norm layer under DeBERTa's names (`attention.self.query_proj`,
//! `key_proj`, `value_proj`, `attention.output.dense` + `LayerNorm`,
//! `intermediate.dense`, `output.dense` + `LayerNorm`), every product with a
//! bias, LayerNorm eps from `config.json` (1e-7), word embeddings then
//! `embeddings.LayerNorm` (no absolute positions: `position_biased_input`
//! false; no token type table: `type_vocab_size` 0), and the disentangled
//! attention of [`crate::model::blocks::disentangled`] in place of plain
//! attention: `encoder.rel_embeddings` normalized by `encoder.LayerNorm`,
//! c2p and p2c through each layer's query and key products
//! (`share_att_key`), log buckets (`position_buckets`,
//! `max_relative_positions`; -1 is `max_position_embeddings`).
//!
//! Refused by name at conversion: `relative_attention` false,
//! `position_biased_input` true, `share_att_key` false, a `pos_att_type`
//! other than `c2p` / `p2c` (either or both), `norm_rel_ebd` other than
//! `layer_norm` or none, a convolution layer (`conv_kernel_size`), an
//! `embedding_size` other than `hidden_size`, a `pooler_hidden_size` other
//! than `hidden_size`, a pooler activation other than GELU or tanh.
//!
//! The tokenizer is the `DebertaV2Tokenizer` class rebuilt as transformers 5
//! does (see [`crate::tokenizer::spec`]), not the `tokenizer.json` as
//! written.

use std::collections::BTreeMap;

use serde_json::Value;

use super::tensors::{module, norm, Dense, Dim, EmbeddingTensors, LayerTensors};
use super::{Family, Forward, Positions, RelativePositions, SpecialTokens};
use crate::error::{Error, Result};
use crate::model::blocks::{LayerRun, Stage, Traced};
use crate::model::precision::Product;
use crate::tokenizer::spec::TokenizerKind;

/// The relative embedding table (`[2·span x hidden]`), a tensor name.
pub const REL_EMBEDDINGS: &str = "encoder.rel_embeddings.weight";
/// The norm of the relative embedding rows (`norm_rel_ebd` `layer_norm`), a module.
pub const REL_NORM: &str = "encoder.LayerNorm";

/// The tensors of `DebertaV2Layer`: BERT's, with the projections named
/// `query_proj`, `key_proj`, `value_proj`.
pub const LAYER: LayerTensors = LayerTensors {
    qkv: Dense {
        modules: &[
            module("attention.self.query_proj", &[Dim::Query]),
            module("attention.self.key_proj", &[Dim::KeyValue]),
            module("attention.self.value_proj", &[Dim::KeyValue]),
        ],
        ..super::bert::LAYER.qkv
    },
    ..super::bert::LAYER
};

/// BERT's post-norm order with the disentangled attention ([`forward`]).
pub const FORWARD: Forward = Forward {
    run: forward,
    normed: false,
};

/// The DeBERTa-v2 family.
pub static FAMILY: Family = Family {
    name: "deberta-v2",
    hf_model_types: &["deberta-v2"],
    hf_prefix: "deberta.",
    layer_prefix: crate::model::names::LAYER_PREFIX,
    embeddings: EmbeddingTensors {
        position: None,
        token_type: None,
        ..super::bert::EMBEDDINGS
    },
    layer: |_| LAYER,
    positions: Positions::Sequential,
    relative: RelativePositions::Disentangled {
        rows: REL_EMBEDDINGS,
        norm: norm(REL_NORM),
    },
    special_tokens: SpecialTokens {
        pad: "[PAD]",
        unk: "[UNK]",
        cls: "[CLS]",
        sep: "[SEP]",
        mask: "[MASK]",
        post_processors: &["TemplateProcessing"],
    },
    int8_f32_products: &[],
    hf_alias: super::no_alias,
    hf_config,
    tokenizers: &[TokenizerKind::Unigram],
    forward: FORWARD,
    ..super::bert::FAMILY_BLOCKS
};

/// BERT's post-norm layer with the disentangled attention.
pub fn forward(l: &crate::model::blocks::Layer, r: &mut LayerRun<'_, '_>) {
    let (total, h, par) = (r.total, r.h, r.par);
    r.trace(Stage::Input(Product::Qkv), Traced::Hidden);
    l.attention.project_qkv(r.hidden, r.lens, &mut r.s, par);
    let d = r
        .disentangled
        .expect("a deberta-v2 encoder has its relative embeddings");
    d.attend_all(&l.attention, r.lens, &mut r.s, par);
    r.trace(Stage::Input(Product::AttnOut), Traced::Ctx);
    l.attention.output(r.s.ctx, total, r.hidden, par, r.s.lin);
    super::bert::post_norm(
        l.attn_norm.as_ref(),
        l.attention.out_bias(),
        r.hidden,
        h,
        par,
    );
    r.trace(Stage::Attention, Traced::Hidden);
    r.trace(Stage::Input(Product::FfnUp), Traced::Hidden);
    l.mlp.up(r.hidden, total, r.wide, r.inter, par, r.s.lin);
    r.trace(Stage::Input(Product::FfnDown), Traced::Inter);
    l.mlp.down(r.inter, total, r.hidden, par, r.s.lin);
    super::bert::post_norm(l.mlp_norm.as_ref(), l.mlp.down_bias(), r.hidden, h, par);
    r.trace(Stage::FeedForward, Traced::Hidden);
}

fn unsupported(what: String) -> Error {
    Error::unsupported(format!("config.json: DeBERTa-v2 {what}"))
}

fn hf_config(cfg: &Value, md: &mut BTreeMap<String, String>) -> Result<()> {
    let get = |k: &str| cfg.get(k).filter(|v| !v.is_null());
    let flag = |k: &str, default: bool| get(k).and_then(Value::as_bool).unwrap_or(default);
    if !flag("relative_attention", false) {
        return Err(unsupported(
            "relative_attention false is not supported (disentangled relative attention only)"
                .into(),
        ));
    }
    if flag("position_biased_input", true) {
        return Err(unsupported(
            "position_biased_input true (absolute position embeddings) is not supported".into(),
        ));
    }
    if !flag("share_att_key", false) {
        return Err(unsupported(
            "share_att_key false (separate pos_key_proj / pos_query_proj) is not supported".into(),
        ));
    }
    let types: Vec<String> = match get("pos_att_type") {
        None => Vec::new(),
        Some(Value::String(s)) => s
            .to_lowercase()
            .split('|')
            .map(|t| t.trim().to_string())
            .filter(|t| !t.is_empty())
            .collect(),
        Some(Value::Array(a)) => a
            .iter()
            .map(|v| v.as_str().unwrap_or("?").to_string())
            .collect(),
        Some(v) => return Err(unsupported(format!("pos_att_type {v} is not a list"))),
    };
    for t in &types {
        if t != "c2p" && t != "p2c" {
            return Err(unsupported(format!(
                "pos_att_type '{t}' is not supported (c2p, p2c)"
            )));
        }
    }
    if types.is_empty() {
        return Err(unsupported(
            "pos_att_type is empty (no relative attention term) is not supported".into(),
        ));
    }
    match get("norm_rel_ebd")
        .and_then(Value::as_str)
        .map(str::to_lowercase)
    {
        Some(n) if n.split('|').map(str::trim).all(|t| t == "layer_norm") => {}
        other => {
            return Err(unsupported(format!(
                "norm_rel_ebd {other:?} is not supported (layer_norm)"
            )))
        }
    }
    if get("conv_kernel_size").and_then(Value::as_u64).unwrap_or(0) > 0 {
        return Err(unsupported(
            "conv_kernel_size (the convolution layer) is not supported".into(),
        ));
    }
    let hidden = get("hidden_size").and_then(Value::as_u64);
    for key in ["embedding_size", "pooler_hidden_size"] {
        if let Some(v) = get(key).and_then(Value::as_u64) {
            if Some(v) != hidden {
                return Err(unsupported(format!(
                    "{key} {v} other than hidden_size is not supported"
                )));
            }
        }
    }
    if let Some(t) = get("type_vocab_size").and_then(Value::as_u64) {
        if t > 0 {
            return Err(unsupported(format!(
                "type_vocab_size {t} (token type embeddings) is not supported"
            )));
        }
    }
    match get("pooler_hidden_act")
        .and_then(Value::as_str)
        .unwrap_or("gelu")
    {
        "gelu" => {
            md.insert(crate::model::head::POOLER_ACTIVATION.into(), "gelu".into());
        }
        "tanh" => {}
        other => {
            return Err(unsupported(format!(
                "pooler_hidden_act '{other}' is not supported (gelu, tanh)"
            )))
        }
    }
    let max_pos = get("max_position_embeddings")
        .and_then(Value::as_i64)
        .unwrap_or(512);
    let max_rel = get("max_relative_positions")
        .and_then(Value::as_i64)
        .unwrap_or(-1);
    let max_rel = if max_rel < 1 { max_pos } else { max_rel };
    let buckets = get("position_buckets")
        .and_then(Value::as_i64)
        .unwrap_or(-1)
        .max(0);
    md.insert("type_vocab_size".into(), "0".into());
    md.insert("position_buckets".into(), buckets.to_string());
    md.insert("max_relative_positions".into(), max_rel.to_string());
    md.insert("pos_att_type".into(), types.join(","));
    Ok(())
}
