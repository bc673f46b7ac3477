//! BERT (`model_type` `bert`): all-MiniLM-L6-v2 and the other BERT encoders.

use std::collections::BTreeMap;

use serde_json::Value;

use super::tensors::{module, norm, Dense, Dim, EmbeddingTensors, Glu, LayerTensors};
use super::{Family, Forward, Positions, RelativePositions, SpecialTokens};
use crate::error::{Error, Result};
use crate::kernels::Par;
use crate::model::blocks::norm::{Norm, NormKind};
use crate::model::blocks::{Layer, LayerRun, Stage, Traced};
use crate::model::names::BERT;
use crate::model::precision::Product;
use crate::tokenizer::spec::TokenizerKind;

/// BERT's embeddings (`BertEmbeddings`): word, position and token type
/// tables, summed, then `LayerNorm`.
pub const EMBEDDINGS: EmbeddingTensors = EmbeddingTensors {
    word: BERT.word,
    position: Some(BERT.position),
    token_type: Some(BERT.token_type),
    norm: Some(norm(BERT.emb_ln)),
    scale: false,
};

/// The tensors of `BertLayer` (and of RoBERTa's and XLM-R's, which use the
/// same modules): every product with a bias, LayerNorms with biases.
pub const LAYER: LayerTensors = LayerTensors {
    attn_norm: Some(norm(BERT.attn_ln)),
    qkv: Dense {
        modules: &[
            module(BERT.qkv[0], &[Dim::Query]),
            module(BERT.qkv[1], &[Dim::KeyValue]),
            module(BERT.qkv[2], &[Dim::KeyValue]),
        ],
        input: Dim::Hidden,
        bias: true,
    },
    q_norm: None,
    k_norm: None,
    attn_out: Dense {
        modules: &[module(BERT.attn_out, &[Dim::Hidden])],
        input: Dim::Query,
        bias: true,
    },
    post_attn_norm: None,
    mlp_norm: norm(BERT.ffn_ln),
    up: Dense {
        modules: &[module(BERT.ffn_up, &[Dim::Inter])],
        input: Dim::Hidden,
        bias: true,
    },
    glu: Glu::None,
    down: Dense {
        modules: &[module(BERT.ffn_down, &[Dim::Hidden])],
        input: Dim::Inter,
        bias: true,
    },
    post_mlp_norm: None,
};

/// BERT's post-norm layer order ([`forward`]).
pub const POST_NORM: Forward = Forward {
    run: forward,
    normed: false,
};

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
    embeddings: EMBEDDINGS,
    layer: |_| LAYER,
    final_norm: None,
    positions: Positions::Sequential,
    relative: RelativePositions::None,
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
    forward: POST_NORM,
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
