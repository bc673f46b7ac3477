//! The tensor-name conventions of our model files: the prefixes of
//! per-layer tensors, the prefixes of
//! HF task-model checkpoints, and BERT's names (the layout the legacy and
//! AMB containers store). The containers (`formats`) and the families
//! (`model::arch`) both read them here; this module imports nothing of the
//! crate, so the containers know nothing of the models.

/// BERT's module names (canonical: without the HF model prefix). Per-layer
/// names are relative to `{LAYER_PREFIX}{l}.`; each module's tensors are
/// `{name}.weight` and `{name}.bias`. The legacy and AMB containers store
/// this layout, and the BERT family's tensors are built from it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BertNames {
    /// Word embedding table `[vocab x hidden]`.
    pub word: &'static str,
    /// Absolute position table `[max_position x hidden]`.
    pub position: &'static str,
    /// Token type table `[type_vocab x hidden]`.
    pub token_type: &'static str,
    /// Embedding LayerNorm.
    pub emb_ln: &'static str,
    /// Query, key and value projections.
    pub qkv: [&'static str; 3],
    /// Attention output projection.
    pub attn_out: &'static str,
    /// The LayerNorm after the attention block's residual add.
    pub attn_ln: &'static str,
    /// Feed-forward up projection.
    pub ffn_up: &'static str,
    /// Feed-forward down projection.
    pub ffn_down: &'static str,
    /// The LayerNorm after the feed-forward block's residual add.
    pub ffn_ln: &'static str,
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

/// The module names of BERT (and of RoBERTa/XLM-R, which use the same
/// modules): also the layout of the legacy and AMB containers.
pub const BERT: BertNames = BertNames {
    word: "embeddings.word_embeddings",
    position: "embeddings.position_embeddings",
    token_type: "embeddings.token_type_embeddings",
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
