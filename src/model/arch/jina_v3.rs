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

use super::{AttentionBias, Biases, Family, Positions};
use crate::error::{Error, Result};
use crate::model::blocks::norm::NormKind;
use crate::model::names::TensorNames;
use crate::tokenizer::spec::TokenizerKind;

/// The jina-embeddings-v3 backbone.
pub static FAMILY: Family = Family {
    name: "jina_embeddings_v3",
    hf_model_types: &["jina_embeddings_v3"],
    hf_prefix: "roberta.",
    layer_prefix: crate::model::names::ENCODER_LAYERS_PREFIX,
    names: TensorNames {
        word: "embeddings.word_embeddings",
        position: None,
        token_type: Some("embeddings.token_type_embeddings"),
        emb_ln: Some("emb_ln"),
        qkv: &["mixer.Wqkv"],
        attn_out: "mixer.out_proj",
        attn_ln: "norm1",
        ffn_up: &["mlp.fc1"],
        ffn_down: "mlp.fc2",
        ffn_ln: "norm2",
        final_norm: None,
        relative_bias: None,
        q_norm: None,
        k_norm: None,
        post_attn_ln: None,
        post_ffn_ln: None,
    },
    positions: Positions::Sequential,
    attention_bias: AttentionBias::None,
    special_tokens: super::roberta::XLM_ROBERTA.special_tokens,
    int8_f32_products: &[],
    hf_alias: super::no_alias,
    hf_config,
    tokenizers: &[TokenizerKind::Unigram],
    norm: NormKind::Layer,
    norm_bias: true,
    linear_bias: Biases::ALL,
    pre_norm: false,
    gated_mlp: false,
    glu_up_first: false,
    first_attn_norm: true,
    rope: true,
    embed_scale: false,
    // XLM-R's post-norm layer; the rotary positions are the attention
    // block's.
    forward: super::bert::forward,
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
