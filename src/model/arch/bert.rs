//! BERT (`model_type` `bert`): all-MiniLM-L6-v2 and the other BERT encoders.

use std::collections::BTreeMap;

use serde_json::Value;

use super::{AttentionBias, Family, Positions, SpecialTokens, TensorNames};
use crate::error::{Error, Result};

/// The tensor names of BERT (and of RoBERTa/XLM-R, which use the same
/// modules).
pub const NAMES: TensorNames = TensorNames {
    word: "embeddings.word_embeddings",
    position: "embeddings.position_embeddings",
    token_type: Some("embeddings.token_type_embeddings"),
    emb_ln: "embeddings.LayerNorm",
    qkv: [
        "attention.self.query",
        "attention.self.key",
        "attention.self.value",
    ],
    attn_out: "attention.output.dense",
    attn_ln: "attention.output.LayerNorm",
    ffn_up: "intermediate.dense",
    ffn_down: "output.dense",
    ffn_ln: "output.LayerNorm",
    relative_bias: None,
};

/// The BERT family.
pub static FAMILY: Family = Family {
    name: "bert",
    hf_model_types: &["bert"],
    hf_prefix: "bert.",
    names: NAMES,
    positions: Positions::Sequential,
    attention_bias: AttentionBias::None,
    special_tokens: SpecialTokens {
        pad: "[PAD]",
        unk: "[UNK]",
        cls: "[CLS]",
        sep: "[SEP]",
        mask: "[MASK]",
        post_processors: &["BertProcessing", "TemplateProcessing"],
    },
    int8_f32_products: &[],
    hf_config,
};

/// Refuses what the BERT-shaped encoders do not run: relative position
/// embeddings and decoders (`what`: the family's name for messages).
pub fn check_absolute_encoder(cfg: &Value, what: &str) -> Result<()> {
    if let Some(p) = cfg.get("position_embedding_type").and_then(Value::as_str) {
        if p != "absolute" {
            return Err(Error::unsupported(format!(
                "config.json: position_embedding_type '{p}' is not supported (absolute only)"
            )));
        }
    }
    if cfg.get("is_decoder").and_then(Value::as_bool) == Some(true) {
        return Err(Error::unsupported(format!(
            "decoder {what} models are not supported"
        )));
    }
    Ok(())
}

fn hf_config(cfg: &Value, md: &mut BTreeMap<String, String>) -> Result<()> {
    check_absolute_encoder(cfg, "BERT")?;
    let type_vocab = cfg
        .get("type_vocab_size")
        .and_then(Value::as_u64)
        .unwrap_or(2);
    md.insert("type_vocab_size".into(), type_vocab.to_string());
    Ok(())
}
