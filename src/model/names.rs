//! The tensor-name conventions of our model files: what a family's
//! [`TensorNames`] hold, the prefixes of per-layer tensors, the prefixes of
//! HF task-model checkpoints, and BERT's names (the layout the legacy and
//! AMB containers store). The containers (`formats`) and the families
//! (`model::arch`) both read them here; this module imports nothing of the
//! crate, so the containers know nothing of the models.

/// Tensor names of a family (canonical: without the HF model prefix).
/// Per-layer names are relative to `{layer_prefix}{l}.` and name a module:
/// the tensors are `{name}.weight` and, where the family has biases,
/// `{name}.bias`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TensorNames {
    /// Word embedding table `[vocab x hidden]`.
    pub word: &'static str,
    /// Absolute position table `[max_position x hidden]`, if the family has
    /// one.
    pub position: Option<&'static str>,
    /// Token type table `[type_vocab x hidden]` (row 0 is added to every
    /// token), if the family has one.
    pub token_type: Option<&'static str>,
    /// Embedding norm module, if any.
    pub emb_ln: Option<&'static str>,
    /// Query, key and value projections: three modules stacked, or one
    /// fused (`[3h x h]`).
    pub qkv: &'static [&'static str],
    /// Attention output projection.
    pub attn_out: &'static str,
    /// The norm of the attention block (after it in a post-norm family,
    /// before it in a pre-norm one).
    pub attn_ln: &'static str,
    /// Feed-forward up projection (gated: `gate | up`, one fused module or
    /// two stacked).
    pub ffn_up: &'static [&'static str],
    /// Feed-forward down projection.
    pub ffn_down: &'static str,
    /// The norm of the feed-forward block.
    pub ffn_ln: &'static str,
    /// The norm after the last layer, if any.
    pub final_norm: Option<&'static str>,
    /// The per-head query norm, if any (Qwen3, Gemma3: `self_attn.q_norm`).
    pub q_norm: Option<&'static str>,
    /// The per-head key norm, if any.
    pub k_norm: Option<&'static str>,
    /// The norm of the attention block's output before its residual add,
    /// if any (Gemma3's `post_attention_layernorm`).
    pub post_attn_ln: Option<&'static str>,
    /// The norm of the feed-forward block's output before its residual
    /// add, if any (Gemma3's `post_feedforward_layernorm`).
    pub post_ffn_ln: Option<&'static str>,
    /// Relative attention bias table `[buckets x heads]`
    /// (`AttentionBias::RelativeBuckets`).
    pub relative_bias: Option<&'static str>,
}

/// Prefix of every tensor of the encoder stack of the BERT-shaped families
/// (the layers, and MPNet's relative attention bias): what an embedding
/// reads right after the embedding lookup.
pub const ENCODER_PREFIX: &str = "encoder.";

/// Prefix of every per-layer tensor name of the BERT-shaped families,
/// followed by the layer index (`encoder.layer.{l}.{module}.{kind}`).
pub const LAYER_PREFIX: &str = "encoder.layer.";

/// Prefix of every per-layer tensor name of ModernBERT and the decoder
/// families (`layers.{l}.{module}.{kind}`).
pub const LAYERS_PREFIX: &str = "layers.";

/// Prefix of every per-layer tensor name of NomicBERT's hub checkpoints
/// (`encoder.layers.{l}.{module}.{kind}`).
pub const ENCODER_LAYERS_PREFIX: &str = "encoder.layers.";

/// Prefix of every per-layer tensor name of DistilBERT
/// (`transformer.layer.{l}.{module}.{kind}`).
pub const TRANSFORMER_LAYER_PREFIX: &str = "transformer.layer.";

/// The per-layer prefixes of every family (each
/// [`crate::model::arch::Family::layer_prefix`] is one of these: checked by
/// a test of `model::arch`).
pub const LAYER_PREFIXES: [&str; 4] = [
    LAYER_PREFIX,
    LAYERS_PREFIX,
    ENCODER_LAYERS_PREFIX,
    TRANSFORMER_LAYER_PREFIX,
];

/// The prefixes of tensor names in HF checkpoints saved from a task model,
/// stripped on conversion (each [`crate::model::arch::Family::hf_prefix`] is
/// one of these: checked by a test of `model::arch`).
pub const HF_PREFIXES: [&str; 7] = [
    "bert.",
    "mpnet.",
    "roberta.",
    "model.",
    "new.",
    "distilbert.",
    "deberta.",
];

/// The tensor names of BERT (and of RoBERTa/XLM-R, which use the same
/// modules): also the layout of the legacy and AMB containers.
pub const BERT: TensorNames = TensorNames {
    word: "embeddings.word_embeddings",
    position: Some("embeddings.position_embeddings"),
    token_type: Some("embeddings.token_type_embeddings"),
    emb_ln: Some("embeddings.LayerNorm"),
    qkv: &[
        "attention.self.query",
        "attention.self.key",
        "attention.self.value",
    ],
    attn_out: "attention.output.dense",
    attn_ln: "attention.output.LayerNorm",
    ffn_up: &["intermediate.dense"],
    ffn_down: "output.dense",
    ffn_ln: "output.LayerNorm",
    final_norm: None,
    relative_bias: None,
    q_norm: None,
    k_norm: None,
    post_attn_ln: None,
    post_ffn_ln: None,
};

/// The layer index of a per-layer tensor name of any family, and the rest
/// of the name.
pub fn split_layer_name(name: &str) -> Option<(u32, &str)> {
    LAYER_PREFIXES.iter().find_map(|p| {
        let rest = name.strip_prefix(p)?;
        let (num, tail) = rest.split_once('.')?;
        Some((num.parse().ok()?, tail))
    })
}

/// HF checkpoints name encoder tensors in several ways; this returns the
/// canonical (prefix-free, `weight`/`bias`) name, or `None` for tensors the
/// encoder never uses and that are dropped (heads, buffers). The prefixes
/// stripped are [`HF_PREFIXES`].
pub fn canonical_name(name: &str) -> Option<String> {
    let n = HF_PREFIXES
        .iter()
        .find_map(|p| name.strip_prefix(p))
        .unwrap_or(name);
    if n.starts_with("cls.") || n.starts_with("lm_head.") || n.ends_with("position_ids") {
        return None;
    }
    let n = if let Some(base) = n.strip_suffix("LayerNorm.gamma") {
        format!("{base}LayerNorm.weight")
    } else if let Some(base) = n.strip_suffix("LayerNorm.beta") {
        format!("{base}LayerNorm.bias")
    } else {
        n.to_string()
    };
    Some(n)
}

/// Whether a tensor is the weight matrix of an encoder layer's linear
/// projection (2-D, under one of [`LAYER_PREFIXES`], `.weight`, not a LayerNorm): the
/// tensors the converters quantize.
pub fn is_layer_linear_weight(name: &str, shape: &[usize]) -> bool {
    shape.len() == 2
        && split_layer_name(name).is_some()
        && name.ends_with(".weight")
        && !name.contains("LayerNorm")
}
