//! The architecture registry: the encoder families the engine runs.
//!
//! Every family is built from the shared blocks of [`crate::model::blocks`]
//! (embeddings, norms, rotary positions, attention, feed-forward) and runs
//! on the one [`crate::model::encoder::Encoder`]. A family is one complete
//! [`Family`] record in its own module: its `config.json` layout and keys,
//! its tokenizer kinds and special tokens, its tensors with their shapes
//! ([`tensors`]: what the encoder loads, nothing read from flags), its
//! positions ([`Positions`], [`RelativePositions`]), the products kept in
//! f32 under int8, and its layer's [`Forward`], a dozen lines in HF's order
//! beside the tensors it reads. Adding a family is one module under `arch/`
//! defining a `Family` and one line in [`FAMILIES`].
//!
//! A model file names its family in the metadata key `architecture`; a
//! HuggingFace folder by `model_type` in `config.json`. Anything not listed
//! here is refused by name.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::error::Result;
use crate::model::blocks::norm::{NormKind, NormSpec};
use crate::model::blocks::{Layer, LayerRun};
use crate::model::precision::{LayerPrecision, Precision, Product};
use crate::tokenizer::spec::TokenizerKind;

pub mod bert;
pub mod deberta_v2;
pub mod distilbert;
pub mod eurobert;
pub mod gemma3;
pub mod gte;
pub mod jina_v3;
pub mod modernbert;
pub mod mpnet;
pub mod nomic_bert;
pub mod qwen3;
pub mod roberta;
pub mod tensors;

pub use tensors::{EmbeddingTensors, LayerTensors, NormTensor, RelativePositions};

/// Every encoder family the engine runs, by metadata `architecture`.
pub static FAMILIES: &[&Family] = &[
    &bert::FAMILY,
    &mpnet::FAMILY,
    &roberta::ROBERTA,
    &roberta::XLM_ROBERTA,
    &modernbert::FAMILY,
    &qwen3::FAMILY,
    &gemma3::FAMILY,
    &nomic_bert::FAMILY,
    &gte::FAMILY,
    &distilbert::FAMILY,
    &jina_v3::FAMILY,
    &eurobert::FAMILY,
    &deberta_v2::FAMILY,
];

/// The family whose metadata `architecture` is `name`.
pub fn by_name(name: &str) -> Option<&'static Family> {
    FAMILIES.iter().copied().find(|f| f.name == name)
}

/// The family of a HF `config.json` `model_type`.
pub fn by_hf_model_type(model_type: &str) -> Option<&'static Family> {
    FAMILIES
        .iter()
        .copied()
        .find(|f| f.hf_model_types.contains(&model_type))
}

/// The names of the registered families, for error messages (`bert, mpnet`).
pub fn names() -> String {
    FAMILIES
        .iter()
        .map(|f| f.name)
        .collect::<Vec<_>>()
        .join(", ")
}

/// How each token's absolute position id is assigned (defined in
/// [`crate::model::blocks::embeddings`]).
pub use crate::model::blocks::embeddings::Positions;

/// The special tokens a family's tokenizer wraps text in and the names it
/// looks them up by when the folder's tokenizer files do not say.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SpecialTokens {
    /// Padding.
    pub pad: &'static str,
    /// Unknown word.
    pub unk: &'static str,
    /// First token of every input (BERT `[CLS]`, RoBERTa-style `<s>`).
    pub cls: &'static str,
    /// Last token of every input (BERT `[SEP]`, RoBERTa-style `</s>`).
    pub sep: &'static str,
    /// Mask.
    pub mask: &'static str,
    /// The `tokenizer.json` post-processor types that frame a single text as
    /// `cls text sep` for this family.
    pub post_processors: &'static [&'static str],
}

impl SpecialTokens {
    /// No token names of the family's own: its tokenizer files declare the
    /// special tokens and the template frames texts (decoders have no
    /// `[CLS]`, `[SEP]` or `[MASK]`).
    pub const DECLARED: SpecialTokens = SpecialTokens {
        pad: "",
        unk: "",
        cls: "",
        sep: "",
        mask: "",
        post_processors: &[],
    };

    /// Whether the tokenizer files declare the special tokens
    /// ([`SpecialTokens::DECLARED`]).
    pub fn declared(&self) -> bool {
        self.cls.is_empty()
    }
}

/// Reads a family's own `config.json` keys into EMBD metadata.
pub type HfConfigHook = fn(cfg: &Value, md: &mut BTreeMap<String, String>) -> Result<()>;

/// A family's config-alias step: rewrites another layout of its
/// `config.json` (a hub remote-code file's own key names) into the core keys
/// the importer reads (`hidden_size`, `num_hidden_layers`,
/// `num_attention_heads`, `intermediate_size`, `max_position_embeddings`,
/// `layer_norm_eps`, `hidden_act`), refusing by name what the family does
/// not run. It runs before anything else reads the file.
pub type HfConfigAlias = fn(cfg: &mut Value) -> Result<()>;

/// The config-alias step of a family whose `config.json` has the core keys.
pub fn no_alias(_: &mut Value) -> Result<()> {
    Ok(())
}

/// Moves key `from` of a `config.json` object to `to` (when `to` is absent).
pub(crate) fn alias_key(cfg: &mut Value, from: &str, to: &str) {
    if let Some(o) = cfg.as_object_mut() {
        if let Some(v) = o.remove(from) {
            o.entry(to.to_string()).or_insert(v);
        }
    }
}

/// The forward pass of one layer of a family: its blocks in its order.
#[derive(Debug, Clone, Copy)]
pub struct Forward {
    /// One layer's forward.
    pub run: fn(layer: &Layer, run: &mut LayerRun<'_, '_>),
    /// Whether `run` reads a normalized copy of the residual stream
    /// ([`LayerRun::normed`]: the pre-norm orders), so that the workspace
    /// holds one.
    pub normed: bool,
}

/// One encoder family.
#[derive(Debug)]
pub struct Family {
    /// Metadata `architecture`.
    pub name: &'static str,
    /// HF `config.json` `model_type` values read as this family.
    pub hf_model_types: &'static [&'static str],
    /// Prefix of tensor names in HF checkpoints saved from a task model
    /// (`bert.`), stripped on conversion.
    pub hf_prefix: &'static str,
    /// Prefix of every per-layer tensor, followed by the layer index
    /// (`encoder.layer.` for BERT-shaped families, `layers.` for ModernBERT).
    pub layer_prefix: &'static str,
    /// The embedding tables and their norm.
    pub embeddings: EmbeddingTensors,
    /// The tensors of layer `l` (the same for every layer but where HF's
    /// constructor says otherwise: ModernBERT's layer 0 has no attention
    /// norm).
    pub layer: fn(l: usize) -> LayerTensors,
    /// The norm after the last layer, if any.
    pub final_norm: Option<NormTensor>,
    /// Position ids hook.
    pub positions: Positions,
    /// What the attention knows of positions (and the tensors it reads).
    pub relative: RelativePositions,
    /// Special tokens hook.
    pub special_tokens: SpecialTokens,
    /// Precision hook: the products that stay f32 when int8 is asked for
    /// (chosen by measurement on the family's reference with `embd
    /// precision-report`; see [`crate::model::precision::LayerPrecision::for_family`]).
    pub int8_f32_products: &'static [Product],
    /// The config-alias step (another `config.json` layout's keys read as
    /// the core ones).
    pub hf_alias: HfConfigAlias,
    /// The family's `config.json` keys.
    pub hf_config: HfConfigHook,
    /// The tokenizer kinds the family runs with (each checked against its
    /// reference); any other is refused by name.
    pub tokenizers: &'static [TokenizerKind],
    /// The kind of every norm.
    pub norm: NormKind,
    /// One layer's forward.
    pub forward: Forward,
}

impl Family {
    /// What norm `t` of this family is, with the model's epsilon.
    pub fn norm_spec(&self, t: &NormTensor, eps: f32) -> NormSpec {
        NormSpec {
            kind: self.norm,
            bias: t.bias,
            eps,
        }
    }

    /// Whether the attention rotates queries and keys.
    pub fn rotary(&self) -> bool {
        self.relative == RelativePositions::Rotary
    }

    /// Name of module `module` of layer `l` (`{layer_prefix}{l}.{module}`);
    /// its tensors are `.weight` and `.bias` after it.
    pub fn layer_module(&self, l: usize, module: &str) -> String {
        format!("{}{l}.{module}", self.layer_prefix)
    }

    /// Name of tensor `{module}.{kind}` of layer `l` (`kind` = `weight`/`bias`).
    pub fn layer_tensor(&self, l: usize, module: &str, kind: &str) -> String {
        format!("{}.{kind}", self.layer_module(l, module))
    }
}

// The plan of a family lives here, next to `Family::int8_f32_products`, so
// that `model::precision` imports nothing of the crate.
impl LayerPrecision {
    /// The products' precisions the engine uses for a requested precision on
    /// a model of `family`: [`LayerPrecision::for_precision`], with the
    /// family's [`Family::int8_f32_products`] kept in f32 when `p` is int8.
    pub fn for_family(p: Precision, family: &Family) -> LayerPrecision {
        let mut plan = LayerPrecision::for_precision(p);
        if p == Precision::Int8 {
            for &product in family.int8_f32_products {
                match product {
                    Product::Qkv => plan.qkv = Precision::F32,
                    Product::AttnOut => plan.attn_out = Precision::F32,
                    Product::FfnUp => plan.ffn_up = Precision::F32,
                    Product::FfnDown => plan.ffn_down = Precision::F32,
                }
            }
        }
        plan
    }
}

/// A number of `config.json`.
pub(crate) fn f64_key(cfg: &Value, key: &str) -> Option<f64> {
    cfg.get(key).and_then(Value::as_f64)
}

/// A `rope_parameters` entry's theta (transformers 5) or the `rope_scaling`
/// of transformers 4, refusing scaled rotary positions (`what` names the
/// key for messages).
pub(crate) fn rope_theta_of(p: &Value, what: &str) -> Result<Option<f64>> {
    for key in ["rope_type", "type"] {
        if let Some(t) = p.get(key).and_then(Value::as_str) {
            if t != "default" {
                return Err(crate::error::Error::unsupported(format!(
                    "config.json: {what} rope_type '{t}' is not supported (default only)"
                )));
            }
        }
    }
    Ok(p.get("rope_theta").and_then(Value::as_f64))
}

/// The layer kinds of `config.json`, one letter a layer (`g` full attention,
/// `l` sliding window): transformers 5's `layer_types`, else (transformers
/// 4) layer `l` is full when `(l + offset) % every == 0`, `every` read from
/// the first of `every_keys` present (else `default_every`).
pub(crate) fn layer_kinds(
    cfg: &Value,
    every_keys: &[&str],
    default_every: u64,
    offset: usize,
) -> Result<String> {
    use crate::error::Error;
    let layers = cfg
        .get("num_hidden_layers")
        .and_then(Value::as_u64)
        .ok_or_else(|| Error::model("config.json: num_hidden_layers is missing"))?
        as usize;
    let Some(list) = cfg.get("layer_types").and_then(Value::as_array) else {
        let every = every_keys
            .iter()
            .find_map(|k| cfg.get(*k).and_then(Value::as_u64))
            .unwrap_or(default_every)
            .max(1) as usize;
        return Ok((0..layers)
            .map(|l| {
                if (l + offset).is_multiple_of(every) {
                    'g'
                } else {
                    'l'
                }
            })
            .collect());
    };
    if list.len() != layers {
        return Err(Error::model(format!(
            "config.json: layer_types has {} entries for {layers} layers",
            list.len()
        )));
    }
    list.iter()
        .map(|v| match v.as_str() {
            Some("full_attention") => Ok('g'),
            Some("sliding_attention") => Ok('l'),
            other => Err(Error::unsupported(format!(
                "config.json: layer type {other:?} is not supported (full_attention, sliding_attention)"
            ))),
        })
        .collect()
}

/// The rotary bases of `config.json` (global, local): transformers 5's
/// `rope_parameters` (one entry, or one per layer type), else the keys
/// `global_key` and `local_key` of transformers 4; `rope_scaling` must be
/// absent or default.
pub(crate) fn rope_thetas(
    cfg: &Value,
    global_key: &str,
    local_key: &str,
) -> Result<(Option<f64>, Option<f64>)> {
    if let Some(rs) = cfg.get("rope_scaling").filter(|v| v.is_object()) {
        rope_theta_of(rs, "rope_scaling")?;
    }
    let (mut global, mut local) = (f64_key(cfg, global_key), f64_key(cfg, local_key));
    if let Some(rp) = cfg.get("rope_parameters").filter(|v| v.is_object()) {
        let full = rp.get("full_attention");
        let sliding = rp.get("sliding_attention");
        if let Some(p) = full {
            global = rope_theta_of(p, "rope_parameters.full_attention")?.or(global);
        }
        if let Some(p) = sliding {
            local = rope_theta_of(p, "rope_parameters.sliding_attention")?.or(local);
        }
        if full.is_none() && sliding.is_none() {
            global = rope_theta_of(rp, "rope_parameters")?.or(global);
        }
    }
    Ok((global, local))
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::model::names::{
        canonical_name, ENCODER_PREFIX, HF_PREFIXES, LAYER_PREFIX, LAYER_PREFIXES,
    };

    /// Every family's prefixes are among the name conventions the containers
    /// read (`model::names`), and every convention is some family's.
    #[test]
    fn family_prefixes_are_the_known_ones() {
        for f in FAMILIES {
            assert!(HF_PREFIXES.contains(&f.hf_prefix), "{}", f.name);
            assert!(LAYER_PREFIXES.contains(&f.layer_prefix), "{}", f.name);
        }
        for p in HF_PREFIXES {
            assert!(FAMILIES.iter().any(|f| f.hf_prefix == p), "{p}");
        }
        for p in LAYER_PREFIXES {
            assert!(FAMILIES.iter().any(|f| f.layer_prefix == p), "{p}");
        }
    }

    /// Every family's layer tensors have the shapes their blocks read: Q,
    /// K and V parts into the attention, the query width out of it, one
    /// intermediate part per half of the up product, the hidden width out of
    /// the down product.
    #[test]
    fn family_layers_have_the_blocks_shapes() {
        use tensors::{Dense, Dim, Glu};
        let parts = |d: &Dense| -> Vec<Dim> {
            d.modules
                .iter()
                .flat_map(|m| m.out.iter().copied())
                .collect()
        };
        for f in FAMILIES {
            for l in 0..3 {
                let t = (f.layer)(l);
                let name = format!("{} layer {l}", f.name);
                assert_eq!(
                    parts(&t.qkv),
                    [Dim::Query, Dim::KeyValue, Dim::KeyValue],
                    "{name}"
                );
                assert_eq!(t.qkv.input, Dim::Hidden, "{name}");
                assert_eq!(parts(&t.attn_out), [Dim::Hidden], "{name}");
                assert_eq!(t.attn_out.input, Dim::Query, "{name}");
                let halves = if t.glu == Glu::None { 1 } else { 2 };
                assert_eq!(parts(&t.up), vec![Dim::Inter; halves], "{name}");
                assert_eq!(t.up.input, Dim::Hidden, "{name}");
                assert_eq!(parts(&t.down), [Dim::Hidden], "{name}");
                assert_eq!(t.down.input, Dim::Inter, "{name}");
                assert_eq!(t.q_norm.is_some(), t.k_norm.is_some(), "{name}");
                for m in t.dense().iter().flat_map(|(_, d)| d.modules) {
                    assert!(!m.name.is_empty() && !m.name.ends_with(".weight"), "{name}");
                }
                // Only ModernBERT's layer 0 lacks an attention norm.
                assert_eq!(
                    t.attn_norm.is_none(),
                    f.name == "modernbert" && l == 0,
                    "{name}"
                );
            }
            // A rotary family's attention has no absolute positions.
            if f.rotary() {
                assert!(f.embeddings.position.is_none(), "{}", f.name);
            }
            // A post-norm layer ends in a norm: no family adds a final one.
            if !f.forward.normed {
                assert!(f.final_norm.is_none(), "{}", f.name);
            }
        }
    }

    #[test]
    fn canonical_names() {
        assert_eq!(
            canonical_name("bert.encoder.layer.0.output.LayerNorm.gamma").as_deref(),
            Some("encoder.layer.0.output.LayerNorm.weight")
        );
        assert_eq!(
            canonical_name("embeddings.LayerNorm.beta").as_deref(),
            Some("embeddings.LayerNorm.bias")
        );
        assert_eq!(canonical_name("embeddings.position_ids"), None);
        assert_eq!(canonical_name("cls.predictions.bias"), None);
        assert_eq!(
            canonical_name("pooler.dense.weight").as_deref(),
            Some("pooler.dense.weight")
        );
    }

    #[test]
    fn layers_are_under_the_encoder_prefix() {
        assert!(LAYER_PREFIX.starts_with(ENCODER_PREFIX));
    }

    #[test]
    fn registry_finds_families() {
        assert_eq!(by_name("bert").unwrap().name, "bert");
        assert_eq!(by_name("mpnet").unwrap().name, "mpnet");
        assert!(by_name("gpt2").is_none());
        assert_eq!(by_hf_model_type("mpnet").unwrap().name, "mpnet");
        assert_eq!(by_hf_model_type("roberta").unwrap().name, "roberta");
        assert_eq!(by_hf_model_type("xlm-roberta").unwrap().name, "xlm-roberta");
        assert!(by_hf_model_type("funnel").is_none());
        assert_eq!(by_hf_model_type("deberta-v2").unwrap().name, "deberta-v2");
        assert_eq!(by_hf_model_type("modernbert").unwrap().name, "modernbert");
        assert_eq!(
            names(),
            "bert, mpnet, roberta, xlm-roberta, modernbert, qwen3, gemma3, nomic_bert, gte, distilbert, jina_embeddings_v3, eurobert, deberta-v2"
        );
    }
}
