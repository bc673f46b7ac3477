//! BERT (`model_type` `bert`): all-MiniLM-L6-v2 and the other BERT encoders.

use std::collections::BTreeMap;

use serde_json::Value;

use super::{AttentionBias, Family, Positions, SpecialTokens};
use crate::error::{Error, Result};
use crate::kernels::Par;
use crate::model::blocks::norm::{Norm, NormKind};
use crate::model::blocks::{Layer, LayerRun, Stage, Traced};
use crate::model::names::TensorNames;
use crate::model::precision::Product;
use crate::tokenizer::spec::TokenizerKind;

/// The tensor names of BERT (and of RoBERTa/XLM-R, which use the same
/// modules).
pub const NAMES: TensorNames = crate::model::names::BERT;

/// The BERT layer (HF `BertLayer`), shared by BERT, MPNet, RoBERTa and
/// XLM-R: post-norm, every product with a bias.
///
/// ```text
/// h = LayerNorm(h + attention(h) · Wo + bo)     BertSelfOutput
/// h = LayerNorm(h + act(h · Wi + bi) · Wd + bd) BertIntermediate + BertOutput
/// ```
pub fn forward(l: &Layer, r: &mut LayerRun<'_, '_>) {
    let (total, h, par) = (r.total, r.h, r.par);
    r.trace(Stage::Input(Product::Qkv), Traced::Hidden);
    l.attention.project_qkv(r.hidden, r.lens, &mut r.s, par);
    l.attention.attend_all(r.lens, r.bias, &mut r.s, par);
    r.trace(Stage::Input(Product::AttnOut), Traced::Ctx);
    l.attention.output(r.s.ctx, total, r.hidden, par, r.s.lin);
    post_norm(
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
    post_norm(l.mlp_norm.as_ref(), l.mlp.down_bias(), r.hidden, h, par);
    r.trace(Stage::FeedForward, Traced::Hidden);
}

/// `x = norm(x + bias)`: the post-norm residual, bias added in the norm's pass.
pub(crate) fn post_norm(
    norm: Option<&Norm>,
    bias: Option<&[f32]>,
    x: &mut [f32],
    h: usize,
    par: Par,
) {
    match (norm, bias) {
        (Some(n), Some(b)) => n.apply_with_bias(x, b, h, par),
        (Some(n), None) => n.apply(x, h, par),
        (None, Some(b)) => {
            crate::model::blocks::for_rows(x, h, par, |row| crate::kernels::ops::add_assign(row, b))
        }
        (None, None) => {}
    }
}

/// The BERT family.
pub static FAMILY: Family = FAMILY_BLOCKS;

/// The BERT family as a constant: the block settings and `forward` that
/// MPNet, RoBERTa and XLM-R share (`..FAMILY_BLOCKS`).
pub(crate) const FAMILY_BLOCKS: Family = Family {
    name: "bert",
    hf_model_types: &["bert"],
    hf_prefix: "bert.",
    layer_prefix: crate::model::names::LAYER_PREFIX,
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
    hf_alias: super::no_alias,
    hf_config,
    tokenizers: &[TokenizerKind::WordPiece, TokenizerKind::Unigram],
    norm: NormKind::Layer,
    norm_bias: true,
    linear_bias: super::Biases::ALL,
    pre_norm: false,
    gated_mlp: false,
    glu_up_first: false,
    first_attn_norm: true,
    rope: false,
    embed_scale: false,
    forward,
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
