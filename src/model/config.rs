//! Model hyper-parameters read from a model file's metadata (EMBD keys).
//!
//! Every container maps its own header onto the same string keys, so this one
//! parser serves them all. One default depends on the model: a file named
//! `*all-MiniLM-L6-v2` without `max_seq_length` gets 256 (its
//! sentence-transformers setting); every other model gets its position table.
//! The tokenizer's options are built here too ([`ModelConfig::tokenizer`]):
//! the model knows the tokenizer, not the reverse.

use std::collections::BTreeMap;

use crate::error::{Error, Result};
use crate::limits;
use crate::model::arch::{self, Family, Positions, RelativePositions};
/// The pooling modes (defined with their names in [`crate::model::pooling`]).
pub use crate::model::pooling::Pooling;
use crate::tokenizer::vocab::Vocab;
use crate::tokenizer::{Tokenizer, TokenizerConfig};

/// The feed-forward activation (defined with its names in
/// [`crate::model::blocks::mlp`]).
pub use crate::model::blocks::mlp::Activation;

/// Everything the tokenizer and encoder need to know about a model.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelConfig {
    /// `model_name`.
    pub model_name: String,
    /// `model_version`.
    pub model_version: String,
    /// `architecture`: a family of [`crate::model::arch::FAMILIES`] (default
    /// `bert`).
    pub architecture: String,
    /// `vocab_size`.
    pub vocab_size: usize,
    /// `hidden_size`.
    pub hidden_size: usize,
    /// `embedding_dim` (output size; equals `hidden_size` for BERT pooling).
    pub embedding_dim: usize,
    /// `num_layers`.
    pub num_layers: usize,
    /// `num_attention_heads`.
    pub num_heads: usize,
    /// `intermediate_size`.
    pub intermediate_size: usize,
    /// `max_position_emb`.
    pub max_position: usize,
    /// `type_vocab_size`.
    pub type_vocab_size: usize,
    /// `max_seq_length`: tokens per input incl. `[CLS]`/`[SEP]`.
    pub max_seq_length: usize,
    /// `layer_norm_eps`.
    pub layer_norm_eps: f32,
    /// `hidden_act`.
    pub activation: Activation,
    /// `pooling`.
    pub pooling: Pooling,
    /// `normalize`.
    pub normalize: bool,
    /// `do_lower_case`.
    pub do_lower_case: bool,
    /// `strip_accents` (`None` follows `do_lower_case`).
    pub strip_accents: Option<bool>,
    /// `tokenize_chinese_chars`.
    pub tokenize_chinese_chars: bool,
    /// `padding_idx` ([`Positions::AfterPadding`] families; default 1).
    pub padding_idx: usize,
    /// `relative_attention_num_buckets` ([`RelativePositions::Buckets`]
    /// families; default 32).
    pub relative_buckets: usize,
    /// `relative_attention_max_distance` (default 128).
    pub relative_max_distance: usize,
    /// `position_buckets` ([`RelativePositions::Disentangled`] families: DeBERTa-v2's
    /// log buckets of relative positions; 0: none, positions as they are).
    pub position_buckets: usize,
    /// `max_relative_positions` (DeBERTa-v2; its `-1` is written as
    /// `max_position_emb`).
    pub max_relative_positions: usize,
    /// `pos_att_type` has `c2p` (content to position).
    pub c2p: bool,
    /// `pos_att_type` has `p2c` (position to content).
    pub p2c: bool,
    /// `special_ids_normalized`: ids of further special tokens (beyond the five
    /// of the vocabulary section) matched in the normalized text, space
    /// separated (MPNet's `<unk>`).
    pub special_ids_normalized: Vec<u32>,
    /// `num_key_value_heads` (default `num_attention_heads`).
    pub num_kv_heads: usize,
    /// `layer_types`: one letter a layer, `g` attends to every token, `l`
    /// within [`ModelConfig::sliding_window`] (empty: every layer global).
    pub layer_types: String,
    /// `sliding_window_each_side`: a local layer's query sees keys `|i - j|
    /// <= w`.
    pub sliding_window: usize,
    /// `rope_theta`: the rotary base of global layers (rotary families).
    pub rope_theta: f64,
    /// `local_rope_theta`: the rotary base of local layers (default
    /// `rope_theta`).
    pub local_rope_theta: f64,
    /// `rope_linear_factor`: every rotary frequency is divided by it
    /// (transformers' `rope_type` `linear`; default 1, none).
    pub rope_linear_factor: f64,
    /// `head_dim`: the width of one attention head, when the model says
    /// (Qwen3, Gemma3: not `hidden_size / num_attention_heads`).
    pub head_dim_explicit: Option<usize>,
    /// `attention` = `causal`: a token sees only itself and the tokens
    /// before it (decoders); else every token (`bidirectional`, the default).
    pub causal: bool,
    /// `query_pre_attn_scalar`: scores are scaled by its inverse square root
    /// instead of the head width's (Gemma3).
    pub query_pre_attn_scalar: Option<f64>,
    /// `dense_modules`: the sentence-transformers `Dense` modules after
    /// pooling, one activation name each (`identity`, `tanh`), their weights
    /// the tensors `dense.{i}.weight` (and `dense.{i}.bias`).
    pub dense_modules: Vec<DenseActivation>,
}

/// The activation of a sentence-transformers `Dense` module.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DenseActivation {
    /// `torch.nn.Identity`.
    Identity,
    /// `torch.nn.Tanh`.
    Tanh,
}

impl DenseActivation {
    /// The metadata spelling.
    pub fn name(self) -> &'static str {
        match self {
            DenseActivation::Identity => "identity",
            DenseActivation::Tanh => "tanh",
        }
    }

    /// Parses the metadata spelling, or a sentence-transformers class path
    /// (`torch.nn.modules.linear.Identity`).
    pub fn from_name(s: &str) -> Option<DenseActivation> {
        match s.rsplit('.').next().unwrap_or(s) {
            "identity" | "Identity" => Some(DenseActivation::Identity),
            "tanh" | "Tanh" => Some(DenseActivation::Tanh),
            _ => None,
        }
    }
}

pub(crate) fn parse_bool(key: &str, v: &str) -> Result<bool> {
    match v {
        "true" | "1" | "True" => Ok(true),
        "false" | "0" | "False" => Ok(false),
        _ => Err(Error::model(format!(
            "metadata '{key}' = '{v}' is not a boolean (true/false)"
        ))),
    }
}

impl ModelConfig {
    /// Reads the config from metadata, with the defaults of the format notes,
    /// and checks that sizes are positive and consistent.
    ///
    /// # Errors
    /// [`crate::ErrorKind::Model`] naming the first missing or invalid key.
    pub fn from_metadata(md: &BTreeMap<String, String>) -> Result<ModelConfig> {
        let get = |k: &str| md.get(k).map(|s| s.trim());
        let req_usize = |k: &str| -> Result<usize> {
            let v = get(k).ok_or_else(|| Error::model(format!("metadata key '{k}' is missing")))?;
            v.parse::<usize>().map_err(|_| {
                Error::model(format!(
                    "metadata '{k}' = '{v}' is not a non-negative integer"
                ))
            })
        };
        let opt_usize = |k: &str, d: usize| -> Result<usize> {
            match get(k) {
                None => Ok(d),
                Some(v) => v.parse::<usize>().map_err(|_| {
                    Error::model(format!(
                        "metadata '{k}' = '{v}' is not a non-negative integer"
                    ))
                }),
            }
        };
        let opt_bool = |k: &str, d: bool| -> Result<bool> {
            match get(k) {
                None => Ok(d),
                Some(v) => parse_bool(k, v),
            }
        };

        let model_name = get("model_name").unwrap_or("").to_string();
        let architecture = get("architecture").unwrap_or("bert").to_string();
        let hidden_size = req_usize("hidden_size")?;
        let max_position = req_usize("max_position_emb")?;
        let first_position = match arch::by_name(&architecture).map(|f| f.positions) {
            Some(Positions::AfterPadding) => opt_usize("padding_idx", 1)? + 1,
            _ => 0,
        };
        let default_max_seq = if model_name.ends_with("all-MiniLM-L6-v2") {
            256
        } else {
            max_position.saturating_sub(first_position)
        };
        let pooling = match get("pooling") {
            None => Pooling::Mean,
            Some(v) => Pooling::from_name(v).ok_or_else(|| {
                Error::model(format!(
                    "metadata 'pooling' = '{v}' is not {}",
                    Pooling::expected()
                ))
            })?,
        };
        let activation = match get("hidden_act") {
            None | Some("gelu") => Activation::Gelu,
            Some("gelu_tanh") | Some("gelu_new") | Some("gelu_pytorch_tanh") => {
                Activation::GeluTanh
            }
            Some("silu") => Activation::Silu,
            Some(v) => {
                return Err(Error::model(format!(
                    "metadata 'hidden_act' = '{v}' is not supported (gelu, gelu_tanh or silu)"
                )))
            }
        };
        let layer_norm_eps = match get("layer_norm_eps") {
            None => 1e-12,
            Some(v) => v
                .parse::<f32>()
                .ok()
                .filter(|x| x.is_finite() && *x >= 0.0)
                .ok_or_else(|| {
                    Error::model(format!(
                        "metadata 'layer_norm_eps' = '{v}' is not a finite number >= 0"
                    ))
                })?,
        };
        let strip_accents = match get("strip_accents") {
            None | Some("") | Some("null") | Some("none") => None,
            Some(v) => Some(parse_bool("strip_accents", v)?),
        };
        let special_ids_normalized = match get("special_ids_normalized") {
            None => Vec::new(),
            Some(v) => v
                .split_ascii_whitespace()
                .map(|x| x.parse::<u32>())
                .collect::<std::result::Result<Vec<u32>, _>>()
                .map_err(|_| {
                    Error::model(format!(
                        "metadata 'special_ids_normalized' = '{v}' is not a list of token ids"
                    ))
                })?,
        };
        let opt_f64 = |k: &str, d: f64| -> Result<f64> {
            match get(k) {
                None => Ok(d),
                Some(v) => v
                    .parse::<f64>()
                    .ok()
                    .filter(|x| x.is_finite() && *x > 0.0)
                    .ok_or_else(|| {
                        Error::model(format!("metadata '{k}' = '{v}' is not a positive number"))
                    }),
            }
        };
        let rope_theta = opt_f64("rope_theta", 10_000.0)?;
        let num_heads = req_usize("num_attention_heads")?;
        let causal = match get("attention") {
            None | Some("bidirectional") => false,
            Some("causal") => true,
            Some(v) => {
                return Err(Error::model(format!(
                    "metadata 'attention' = '{v}' is not 'bidirectional' or 'causal'"
                )))
            }
        };
        let dense_modules = match get("dense_modules") {
            None | Some("") => Vec::new(),
            Some(v) => v
                .split_ascii_whitespace()
                .map(|a| {
                    DenseActivation::from_name(a).ok_or_else(|| {
                        Error::model(format!(
                            "metadata 'dense_modules': activation '{a}' is not identity or tanh"
                        ))
                    })
                })
                .collect::<Result<_>>()?,
        };
        let cfg = ModelConfig {
            head_dim_explicit: match get("head_dim") {
                None => None,
                Some(_) => Some(req_usize("head_dim")?),
            },
            causal,
            query_pre_attn_scalar: match get("query_pre_attn_scalar") {
                None => None,
                Some(_) => Some(opt_f64("query_pre_attn_scalar", 1.0)?),
            },
            dense_modules,
            num_kv_heads: opt_usize("num_key_value_heads", num_heads)?,
            layer_types: get("layer_types").unwrap_or("").to_string(),
            sliding_window: opt_usize("sliding_window_each_side", 0)?,
            rope_theta,
            local_rope_theta: opt_f64("local_rope_theta", rope_theta)?,
            rope_linear_factor: opt_f64("rope_linear_factor", 1.0)?,
            model_name,
            model_version: get("model_version").unwrap_or("").to_string(),
            architecture,
            vocab_size: req_usize("vocab_size")?,
            hidden_size,
            embedding_dim: req_usize("embedding_dim")?,
            num_layers: req_usize("num_layers")?,
            num_heads,
            intermediate_size: req_usize("intermediate_size")?,
            max_position,
            type_vocab_size: opt_usize("type_vocab_size", 2)?,
            max_seq_length: opt_usize("max_seq_length", default_max_seq)?,
            layer_norm_eps,
            activation,
            pooling,
            normalize: opt_bool("normalize", true)?,
            do_lower_case: opt_bool("do_lower_case", true)?,
            strip_accents,
            tokenize_chinese_chars: opt_bool("tokenize_chinese_chars", true)?,
            padding_idx: opt_usize("padding_idx", 1)?,
            relative_buckets: opt_usize("relative_attention_num_buckets", 32)?,
            relative_max_distance: opt_usize("relative_attention_max_distance", 128)?,
            special_ids_normalized,
            position_buckets: opt_usize("position_buckets", 0)?,
            max_relative_positions: opt_usize("max_relative_positions", max_position)?,
            c2p: get("pos_att_type").is_some_and(|v| v.split(',').any(|t| t == "c2p")),
            p2c: get("pos_att_type").is_some_and(|v| v.split(',').any(|t| t == "p2c")),
        };
        cfg.validate()?;
        Ok(cfg)
    }

    /// DeBERTa-v2's `pos_ebd_size`: the relative positions `-span..span`
    /// the relative embedding rows cover (`position_buckets`, or
    /// `max_relative_positions` without buckets).
    pub fn relative_span(&self) -> usize {
        if self.position_buckets > 0 {
            self.position_buckets
        } else {
            self.max_relative_positions
        }
    }

    /// Checks sizes: positive, heads divide hidden, max_seq_length within positions.
    pub fn validate(&self) -> Result<()> {
        let family = self.family()?;
        if family.embeddings.token_type.is_some() && self.type_vocab_size == 0 {
            return Err(Error::model("metadata 'type_vocab_size' must be positive"));
        }
        if matches!(family.relative, RelativePositions::Buckets { .. })
            && (self.relative_buckets < 2 || self.relative_buckets > limits::MAX_RELATIVE_BUCKETS)
        {
            return Err(Error::model(format!(
                "metadata 'relative_attention_num_buckets' must be in 2..={}",
                limits::MAX_RELATIVE_BUCKETS
            )));
        }
        if matches!(family.relative, RelativePositions::Disentangled { .. }) {
            let span = self.relative_span();
            if span == 0 || span > limits::MAX_RELATIVE_BUCKETS.max(self.max_position) {
                return Err(Error::model(format!(
                    "metadata 'position_buckets' / 'max_relative_positions': relative span {span} is out of range"
                )));
            }
        }
        if family.positions == Positions::AfterPadding && self.padding_idx >= self.max_position {
            return Err(Error::model(format!(
                "metadata 'padding_idx' {} is not below max_position_emb {}",
                self.padding_idx, self.max_position
            )));
        }
        for (k, v) in [
            ("hidden_size", self.hidden_size),
            ("num_layers", self.num_layers),
            ("num_attention_heads", self.num_heads),
            ("intermediate_size", self.intermediate_size),
            ("max_position_emb", self.max_position),
            ("vocab_size", self.vocab_size),
        ] {
            if v == 0 {
                return Err(Error::model(format!("metadata '{k}' must be positive")));
            }
        }
        if !self.layer_types.is_empty()
            && (self.layer_types.len() != self.num_layers
                || !self.layer_types.chars().all(|c| c == 'g' || c == 'l'))
        {
            return Err(Error::model(format!(
                "metadata 'layer_types' = '{}' is not one of g (global) / l (local) per layer for {} layers",
                self.layer_types, self.num_layers
            )));
        }
        if self.num_kv_heads == 0 || !self.num_heads.is_multiple_of(self.num_kv_heads) {
            return Err(Error::model(format!(
                "num_key_value_heads {} does not divide num_attention_heads {}",
                self.num_kv_heads, self.num_heads
            )));
        }
        if family.rotary() && !self.head_dim().is_multiple_of(2) {
            return Err(Error::model(format!(
                "rotary positions need an even head width, not {}",
                self.head_dim()
            )));
        }
        if self.head_dim_explicit == Some(0) {
            return Err(Error::model("metadata 'head_dim' must be positive"));
        }
        if self.head_dim_explicit.is_none() && !self.hidden_size.is_multiple_of(self.num_heads) {
            return Err(Error::model(format!(
                "hidden_size {} is not divisible by num_attention_heads {}",
                self.hidden_size, self.num_heads
            )));
        }
        if self.embedding_dim != self.hidden_size && self.dense_modules.is_empty() {
            return Err(Error::model(format!(
                "embedding_dim {} differs from hidden_size {} without dense modules after pooling",
                self.embedding_dim, self.hidden_size
            )));
        }
        if self.head_dim() > limits::MAX_HIDDEN_SIZE
            || self.num_heads > limits::MAX_HIDDEN_SIZE
            || self.embedding_dim > limits::MAX_INTERMEDIATE_SIZE
        {
            return Err(Error::model(
                "model dimensions exceed the supported maximum",
            ));
        }
        if self.max_seq_length < 2 || self.max_seq_length > self.max_tokens() {
            return Err(Error::model(format!(
                "max_seq_length {} must be in 2..={} (max_position_emb {} less the first position {})",
                self.max_seq_length,
                self.max_tokens(),
                self.max_position,
                self.first_position()
            )));
        }
        // Bounds that keep every size computation far from overflow.
        if self.hidden_size > limits::MAX_HIDDEN_SIZE
            || self.intermediate_size > limits::MAX_INTERMEDIATE_SIZE
            || self.num_layers > limits::MAX_LAYERS
            || self.max_position > limits::MAX_POSITION
        {
            return Err(Error::model(
                "model dimensions exceed the supported maximum",
            ));
        }
        Ok(())
    }

    /// The encoder family of `architecture`.
    ///
    /// # Errors
    /// [`crate::ErrorKind::Unsupported`] naming an architecture that is not
    /// registered.
    pub fn family(&self) -> Result<&'static Family> {
        arch::by_name(&self.architecture).ok_or_else(|| {
            Error::unsupported(format!(
                "architecture '{}' is not supported (encoder families: {})",
                self.architecture,
                arch::names()
            ))
        })
    }

    /// Position id of the first token (0 for BERT, `padding_idx + 1` for
    /// MPNet).
    pub fn first_position(&self) -> usize {
        match self.family().map(|f| f.positions) {
            Ok(Positions::AfterPadding) => self.padding_idx + 1,
            _ => 0,
        }
    }

    /// Most tokens per input the position table allows.
    pub fn max_tokens(&self) -> usize {
        self.max_position.saturating_sub(self.first_position())
    }

    /// Whether accents are stripped (explicit setting, else follows lowercasing).
    pub fn strip_accents_effective(&self) -> bool {
        self.strip_accents.unwrap_or(self.do_lower_case)
    }

    /// Size of one attention head: `head_dim` when the model says, else
    /// `hidden_size / num_attention_heads`.
    pub fn head_dim(&self) -> usize {
        self.head_dim_explicit
            .unwrap_or(self.hidden_size / self.num_heads.max(1))
    }

    /// The attention scores' scale: `query_pre_attn_scalar^-1/2` when the
    /// model has one (computed in f64 as Python does, then rounded), else
    /// `1 / sqrt(head_dim)` in f32 (what the BERT families were checked
    /// with, bit for bit).
    pub fn attention_scale(&self) -> f32 {
        match self.query_pre_attn_scalar {
            Some(s) => (1.0 / s.sqrt()) as f32,
            None => 1.0 / (self.head_dim() as f32).sqrt(),
        }
    }

    /// Every layer's attention shape.
    pub fn heads(&self) -> crate::model::blocks::attention::Heads {
        crate::model::blocks::attention::Heads {
            q: self.num_heads,
            kv: self.num_kv_heads,
            d: self.head_dim(),
        }
    }

    /// Whether layer `l` attends within the sliding window only.
    pub fn is_local_layer(&self, l: usize) -> bool {
        self.layer_types.as_bytes().get(l) == Some(&b'l')
    }
}

// The model builds its tokenizer (the dependency points from the model to the
// tokenizer; the tokenizer knows no model configuration).
impl ModelConfig {
    /// The tokenizer options this model describes (lowercasing, accent
    /// stripping resolved against it, CJK spacing; the rest as
    /// [`TokenizerConfig::bert_uncased`]).
    pub fn tokenizer_config(&self) -> TokenizerConfig {
        TokenizerConfig {
            lowercase: self.do_lower_case,
            strip_accents: self.strip_accents_effective(),
            handle_chinese_chars: self.tokenize_chinese_chars,
            ..TokenizerConfig::bert_uncased()
        }
    }

    /// The tokenizer this model describes over `vocab`: its options
    /// ([`ModelConfig::tokenizer_config`]) and its normalized special tokens
    /// (metadata `special_ids_normalized`).
    pub fn tokenizer(&self, vocab: Vocab) -> Tokenizer {
        Tokenizer::new(vocab, self.tokenizer_config())
            .with_normalized_specials(&self.special_ids_normalized)
    }
}

impl TokenizerConfig {
    /// The options a model file describes: [`ModelConfig::tokenizer_config`].
    pub fn from_model_config(c: &ModelConfig) -> Self {
        c.tokenizer_config()
    }
}

impl Tokenizer {
    /// The tokenizer a model's configuration describes:
    /// [`ModelConfig::tokenizer`].
    pub fn for_model(vocab: Vocab, cfg: &ModelConfig) -> Tokenizer {
        cfg.tokenizer(vocab)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn minilm_md() -> BTreeMap<String, String> {
        [
            ("model_name", "all-MiniLM-L6-v2"),
            ("model_version", "1.0.0"),
            ("embedding_dim", "384"),
            ("vocab_size", "30522"),
            ("num_layers", "6"),
            ("num_attention_heads", "12"),
            ("hidden_size", "384"),
            ("intermediate_size", "1536"),
            ("max_position_emb", "512"),
            ("created_at", "2025-01-16T12:00:00Z"),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
    }

    #[test]
    fn defaults_follow_the_notes() {
        let c = ModelConfig::from_metadata(&minilm_md()).unwrap();
        assert_eq!(c.max_seq_length, 256);
        assert_eq!(c.pooling, Pooling::Mean);
        assert!(c.normalize);
        assert!(c.strip_accents_effective());
        assert_eq!(c.layer_norm_eps, 1e-12);
        assert_eq!(c.head_dim(), 32);
    }

    #[test]
    fn other_model_defaults_to_max_position() {
        let mut md = minilm_md();
        md.insert("model_name".into(), "other".into());
        assert_eq!(ModelConfig::from_metadata(&md).unwrap().max_seq_length, 512);
    }

    #[test]
    fn missing_key_is_named() {
        let mut md = minilm_md();
        md.remove("num_layers");
        let e = ModelConfig::from_metadata(&md).unwrap_err();
        assert!(e.to_string().contains("num_layers"));
    }

    #[test]
    fn heads_must_divide_hidden() {
        let mut md = minilm_md();
        md.insert("num_attention_heads".into(), "7".into());
        assert!(ModelConfig::from_metadata(&md).is_err());
    }

    #[test]
    fn bad_pooling_is_error() {
        let mut md = minilm_md();
        md.insert("pooling".into(), "sum".into());
        assert!(ModelConfig::from_metadata(&md).is_err());
    }

    #[test]
    fn config_from_model_config_resolves_strip_accents() {
        let c = TokenizerConfig::bert_uncased();
        assert!(c.lowercase && c.strip_accents && c.clean_text && c.handle_chinese_chars);
        assert_eq!(c.max_input_chars_per_word, 100);
        assert_eq!(c.continuation_prefix, "##");
        let mut md = crate::model::config::tests::minilm_md();
        let mc = ModelConfig::from_metadata(&md).unwrap();
        assert_eq!(TokenizerConfig::from_model_config(&mc), c);
        md.insert("do_lower_case".into(), "false".into());
        let mc = ModelConfig::from_metadata(&md).unwrap();
        let c2 = TokenizerConfig::from_model_config(&mc);
        assert!(!c2.lowercase && !c2.strip_accents);
        md.insert("strip_accents".into(), "true".into());
        let mc = ModelConfig::from_metadata(&md).unwrap();
        let c3 = TokenizerConfig::from_model_config(&mc);
        assert!(!c3.lowercase && c3.strip_accents);
    }
}
