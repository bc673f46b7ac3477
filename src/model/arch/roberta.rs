//! RoBERTa (`model_type` `roberta`: all-distilroberta-v1, all-roberta-large-v1)
//! and XLM-RoBERTa (`xlm-roberta`: multilingual-e5-base/large, bge-m3, the
//! XLM-R rerankers): one encoder, two names.
//!
//! The BERT encoder (same module names under `roberta.`) with position ids
//! that start after the padding index ([`Positions::AfterPadding`],
//! `padding_idx` = `pad_token_id`, 1 in every released checkpoint, so the
//! first token is at position 2) and a token-type table of one row. What
//! differs between the two is only the tokenizer the file carries (byte-level
//! BPE for RoBERTa, SentencePiece Unigram for XLM-R), which the family does
//! not know.

use std::collections::BTreeMap;

use serde_json::Value;

use super::{Family, Positions, SpecialTokens};
use crate::error::Result;
use crate::tokenizer::spec::TokenizerKind;

const SPECIALS: SpecialTokens = SpecialTokens {
    pad: "<pad>",
    unk: "<unk>",
    cls: "<s>",
    sep: "</s>",
    mask: "<mask>",
    post_processors: &["RobertaProcessing", "TemplateProcessing"],
};

/// The RoBERTa family: BERT's tensors (the same modules) and layer.
const ROBERTA_BLOCKS: Family = Family {
    name: "roberta",
    hf_model_types: &["roberta"],
    hf_prefix: "roberta.",
    positions: Positions::AfterPadding,
    special_tokens: SPECIALS,
    hf_config,
    tokenizers: &[TokenizerKind::Bpe],
    ..super::bert::FAMILY_BLOCKS
};

/// The RoBERTa family.
pub static ROBERTA: Family = ROBERTA_BLOCKS;

/// The XLM-RoBERTa family: RoBERTa with a SentencePiece tokenizer.
pub static XLM_ROBERTA: Family = Family {
    name: "xlm-roberta",
    hf_model_types: &["xlm-roberta"],
    tokenizers: &[TokenizerKind::Unigram],
    ..ROBERTA_BLOCKS
};

fn hf_config(cfg: &Value, md: &mut BTreeMap<String, String>) -> Result<()> {
    // jinaai/jina-embeddings-v3 says `xlm-roberta` and runs remote code:
    // rotary positions and task LoRA adapters. Read as a plain XLM-R it
    // would be silently wrong; the adapters have no reference.
    if cfg.get("lora_adaptations").is_some_and(|v| !v.is_null()) {
        return Err(crate::error::Error::unsupported(
            "config.json: task LoRA adapters (lora_adaptations: jina-embeddings-v3's remote code) \
             are not supported: no reference runs them, and without them the output differs",
        ));
    }
    super::bert::check_absolute_encoder(cfg, "RoBERTa")?;
    // HF `RobertaEmbeddings.padding_idx` is the config's `pad_token_id`.
    let pad = cfg.get("pad_token_id").and_then(Value::as_u64).unwrap_or(1);
    md.insert("padding_idx".into(), pad.to_string());
    let type_vocab = cfg
        .get("type_vocab_size")
        .and_then(Value::as_u64)
        .unwrap_or(1);
    md.insert("type_vocab_size".into(), type_vocab.to_string());
    Ok(())
}
