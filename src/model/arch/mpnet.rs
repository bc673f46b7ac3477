//! MPNet (`model_type` `mpnet`): all-mpnet-base-v2.
//!
//! The BERT encoder with three differences: position ids start after the
//! padding index ([`Positions::AfterPadding`], `padding_idx` 1, so the first
//! token is at position 2), a relative position bias shared by all layers
//! ([`RelativePositions::Buckets`], 32 buckets, max distance 128) and no
//! token-type embeddings. Under int8 its feed-forward down projection stays
//! f32 (measured: all-int8 misses the int8 accuracy bars, worst cosine 0.995 and mean 0.999). Its tokenizer is BERT's (normalizer, pre-tokenizer,
//! WordPiece) framed RoBERTa-style: `<s> text </s>`.

use std::collections::BTreeMap;

use serde_json::Value;

use super::tensors::{module, norm, Dense, Dim, EmbeddingTensors, LayerTensors};
use super::{Family, Positions, RelativePositions, SpecialTokens};
use crate::error::{Error, Result};
use crate::model::precision::Product;
use crate::tokenizer::spec::TokenizerKind;

/// The tensors of `MPNetLayer`: BERT's layer with the attention's modules
/// under `attention.attn` and its LayerNorm under `attention`.
pub const LAYER: LayerTensors = LayerTensors {
    attn_norm: Some(norm("attention.LayerNorm")),
    qkv: Dense {
        modules: &[
            module("attention.attn.q", &[Dim::Query]),
            module("attention.attn.k", &[Dim::KeyValue]),
            module("attention.attn.v", &[Dim::KeyValue]),
        ],
        ..super::bert::LAYER.qkv
    },
    attn_out: Dense {
        modules: &[module("attention.attn.o", &[Dim::Hidden])],
        ..super::bert::LAYER.attn_out
    },
    ..super::bert::LAYER
};

/// The MPNet family.
pub static FAMILY: Family = Family {
    name: "mpnet",
    hf_model_types: &["mpnet"],
    hf_prefix: "mpnet.",
    layer_prefix: crate::model::names::LAYER_PREFIX,
    embeddings: EmbeddingTensors {
        token_type: None,
        ..super::bert::EMBEDDINGS
    },
    layer: |_| LAYER,
    positions: Positions::AfterPadding,
    relative: RelativePositions::Buckets {
        table: "encoder.relative_attention_bias.weight",
    },
    special_tokens: SpecialTokens {
        pad: "<pad>",
        unk: "[UNK]",
        cls: "<s>",
        sep: "</s>",
        mask: "<mask>",
        post_processors: &["RobertaProcessing", "TemplateProcessing"],
    },
    // Measured on mpnet_reference.jsonl (327 lines): every product int8 gives
    // worst cosine 0.99326, mean 0.99872 (below the int8 bars, 0.995 / 0.999);
    // ffn_down in f32 (int8 for 67% of the FLOPs) gives 0.99678 / 0.99938.
    int8_f32_products: &[Product::FfnDown],
    hf_config,
    tokenizers: &[TokenizerKind::WordPiece],
    ..super::bert::FAMILY_BLOCKS
};

/// HF `MPNetEmbeddings` fixes its padding index at 1 (not `pad_token_id`).
pub const PADDING_IDX: usize = 1;

/// HF `MPNetEncoder.compute_position_bias`'s fixed bucket count.
pub const NUM_BUCKETS: usize = 32;

/// HF `MPNetEncoder.relative_position_bucket`'s fixed `max_distance`.
pub const MAX_DISTANCE: usize = 128;

fn hf_config(cfg: &Value, md: &mut BTreeMap<String, String>) -> Result<()> {
    // HF sizes the bias table by the config but always buckets into 32
    // (`compute_position_bias` is called with its default): other sizes
    // would need a table larger than the buckets used; refuse them.
    match cfg.get("relative_attention_num_buckets") {
        None => {}
        Some(v) if v.as_u64() == Some(NUM_BUCKETS as u64) => {}
        Some(v) => {
            return Err(Error::unsupported(format!(
                "config.json: relative_attention_num_buckets {v} is not supported (MPNet buckets into {NUM_BUCKETS})"
            )))
        }
    }
    md.insert("type_vocab_size".into(), "0".into());
    md.insert("padding_idx".into(), PADDING_IDX.to_string());
    md.insert(
        "relative_attention_num_buckets".into(),
        NUM_BUCKETS.to_string(),
    );
    md.insert(
        "relative_attention_max_distance".into(),
        MAX_DISTANCE.to_string(),
    );
    Ok(())
}
