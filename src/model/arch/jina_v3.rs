//! The jina-embeddings-v3 backbone (`model_type` `jina_embeddings_v3`,
//! transformers 5.24's `JinaEmbeddingsV3Model`, as
//! jinaai/jina-embeddings-v3-hf): XLM-R with rotary positions instead of a
//! position table.
//!
//! Word + token type rows, then `emb_ln`; per layer a fused `mixer.Wqkv`
//! (q | k | v, with bias), rotary positions on the whole head, `out_proj`,
//! the residual and `norm1`; `mlp.fc1`, GELU, `mlp.fc2`, the residual and
//! `norm2`. Every product has a bias.
//!
//! The hub's jinaai/jina-embeddings-v3 is remote code (`model_type`
//! `xlm-roberta` with task LoRA adapters): the XLM-R family refuses it by
//! name, as this one refuses adapters; the backbone alone is exact.

use std::collections::BTreeMap;

use serde_json::Value;

use super::tensors::{module, norm, Dense, Dim, EmbeddingTensors, Glu, LayerTensors};
use super::{Family, Positions, RelativePositions};
use crate::error::{Error, Result};
use crate::model::blocks::norm::NormKind;
use crate::tokenizer::spec::TokenizerKind;

/// The tensors of the backbone's layer: a fused `mixer.Wqkv` and
/// `out_proj`, `mlp.fc1` and `fc2`, every product with a bias; `norm1`,
/// `norm2`.
pub const LAYER: LayerTensors = LayerTensors {
    attn_norm: Some(norm("norm1")),
    qkv: Dense {
        modules: &[module(
            "mixer.Wqkv",
            &[Dim::Query, Dim::KeyValue, Dim::KeyValue],
        )],
        input: Dim::Hidden,
        bias: true,
    },
    q_norm: None,
    k_norm: None,
    attn_out: Dense {
        modules: &[module("mixer.out_proj", &[Dim::Hidden])],
        input: Dim::Query,
        bias: true,
    },
    post_attn_norm: None,
    mlp_norm: norm("norm2"),
    up: Dense {
        modules: &[module("mlp.fc1", &[Dim::Inter])],
        input: Dim::Hidden,
        bias: true,
    },
    glu: Glu::None,
    down: Dense {
        modules: &[module("mlp.fc2", &[Dim::Hidden])],
        input: Dim::Inter,
        bias: true,
    },
    post_mlp_norm: None,
};

/// The jina-embeddings-v3 backbone.
pub static FAMILY: Family = Family {
    name: "jina_embeddings_v3",
    hf_model_types: &["jina_embeddings_v3"],
    hf_prefix: "roberta.",
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
    special_tokens: super::roberta::XLM_ROBERTA.special_tokens,
    int8_f32_products: &[],
    hf_alias: super::no_alias,
    hf_config,
    tokenizers: &[TokenizerKind::Unigram],
    norm: NormKind::Layer,
    // XLM-R's post-norm layer; the rotary positions are the attention
    // block's.
    forward: super::bert::POST_NORM,
};

fn hf_config(cfg: &Value, md: &mut BTreeMap<String, String>) -> Result<()> {
    for key in ["lora_adaptations", "lora_rank", "task_instructions"] {
        if cfg.get(key).is_some_and(|v| !v.is_null()) {
            return Err(Error::unsupported(format!(
                "config.json: jina-embeddings-v3 task LoRA adapters ({key}) are not supported: \
                 no reference runs them, and without them the output differs"
            )));
        }
    }
    let (theta, _) = super::rope_thetas(cfg, "rope_theta", "rope_theta")?;
    md.insert(
        super::modernbert::KEY_ROPE_THETA.into(),
        format!("{}", theta.unwrap_or(10_000.0)),
    );
    let type_vocab = cfg
        .get("type_vocab_size")
        .and_then(Value::as_u64)
        .unwrap_or(1);
    md.insert("type_vocab_size".into(), type_vocab.to_string());
    Ok(())
}
