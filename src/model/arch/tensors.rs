//! A family's tensors as data, written in its module beside its forward (as
//! candle's `NomicBertBlock::new` stands beside its `forward`): every module
//! its embeddings and layers read, with the module's shape in the model's
//! dimensions, which products have biases, which norms have them, and how a
//! gated feed-forward's up product splits. The encoder loads exactly this
//! list ([`crate::model::encoder::required_tensors`] spells it out, in the
//! order writers and test generators use), checking every shape.
//!
//! Dense weights are `[out x in]` (`torch.nn.Linear`'s layout); a module's
//! `out` lists the parts it holds side by side (`Wqkv`: query, key, value).

use crate::model::precision::Product;

/// A dimension of a tensor, as `config.json` sets it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dim {
    /// `hidden_size`.
    Hidden,
    /// `intermediate_size`.
    Inter,
    /// The query heads: `num_attention_heads · head_dim`.
    Query,
    /// The key (or value) heads: `num_key_value_heads · head_dim`.
    KeyValue,
}

/// The sizes of a model's [`Dim`]s.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Dims {
    /// `hidden_size`.
    pub hidden: usize,
    /// `intermediate_size`.
    pub inter: usize,
    /// The query heads' width.
    pub query: usize,
    /// The key/value heads' width.
    pub key_value: usize,
}

impl Dims {
    /// The size of `d`.
    pub fn of(&self, d: Dim) -> usize {
        match d {
            Dim::Hidden => self.hidden,
            Dim::Inter => self.inter,
            Dim::Query => self.query,
            Dim::KeyValue => self.key_value,
        }
    }

    /// The size of parts `ds` side by side.
    pub fn sum(&self, ds: &[Dim]) -> usize {
        ds.iter().map(|&d| self.of(d)).sum()
    }
}

/// One weight module of a dense product: `{name}.weight`, `[Σ out x in]`,
/// and `{name}.bias`, `[Σ out]`, when the product has biases.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Module {
    /// The module's name under its layer (`attention.self.query`).
    pub name: &'static str,
    /// The parts of its output, side by side.
    pub out: &'static [Dim],
}

/// A module of `name` whose output is `out`.
pub const fn module(name: &'static str, out: &'static [Dim]) -> Module {
    Module { name, out }
}

/// A dense product: one fused module or one module per part, side by side
/// along the output, all reading `input`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Dense {
    /// The weight modules.
    pub modules: &'static [Module],
    /// The input width.
    pub input: Dim,
    /// Whether every module has a bias.
    pub bias: bool,
}

impl Dense {
    /// The output widths of the modules.
    pub fn widths(&self, dims: &Dims) -> Vec<usize> {
        self.modules.iter().map(|m| dims.sum(m.out)).collect()
    }
}

/// A norm: `{name}.weight`, `[hidden]`, and `{name}.bias` with `bias` (its
/// kind is the family's [`crate::model::arch::Family::norm`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NormTensor {
    /// The module's name.
    pub name: &'static str,
    /// Whether it has a bias.
    pub bias: bool,
}

/// A LayerNorm-style norm with a bias.
pub const fn norm(name: &'static str) -> NormTensor {
    NormTensor { name, bias: true }
}

/// A norm without a bias (RMSNorm, ModernBERT's LayerNorm).
pub const fn norm_no_bias(name: &'static str) -> NormTensor {
    NormTensor { name, bias: false }
}

/// How a feed-forward's up product is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Glu {
    /// Not gated: `down(act(up(x)))`, up `[inter x in]`.
    None,
    /// Gated, the up product's output `gate | up`, `[2·inter x in]`:
    /// `down(act(gate(x)) · up(x))` (GeGLU, SwiGLU).
    GateUp,
    /// Gated, the output `up | gate` (GTE's `up_gate_proj`).
    UpGate,
}

impl Glu {
    /// Whether the feed-forward is gated.
    pub fn gated(self) -> bool {
        self != Glu::None
    }
}

/// The tensors of one layer. Which norm sits where (before a block, after
/// its residual add, on its output) is the family's forward's business; the
/// slots name the blocks they belong to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LayerTensors {
    /// The attention block's norm, if the layer has one.
    pub attn_norm: Option<NormTensor>,
    /// Query, key and value (`Query`, `KeyValue`, `KeyValue` parts).
    pub qkv: Dense,
    /// The per-head query norm, `{name}.weight` `[head_dim]` (Qwen3, Gemma3).
    pub q_norm: Option<&'static str>,
    /// The per-head key norm, `[head_dim]`.
    pub k_norm: Option<&'static str>,
    /// The attention output projection (`Hidden` from `Query`).
    pub attn_out: Dense,
    /// The norm of the attention block's output before its residual add
    /// (Gemma3's `post_attention_layernorm`), if any.
    pub post_attn_norm: Option<NormTensor>,
    /// The feed-forward block's norm.
    pub mlp_norm: NormTensor,
    /// The feed-forward up product (`Inter` parts; two when gated).
    pub up: Dense,
    /// How the up product is read.
    pub glu: Glu,
    /// The feed-forward down product (`Hidden` from `Inter`).
    pub down: Dense,
    /// The norm of the feed-forward block's output before its residual add
    /// (Gemma3's `post_feedforward_layernorm`), if any.
    pub post_mlp_norm: Option<NormTensor>,
}

impl LayerTensors {
    /// The dense products, in the order of the forward pass.
    pub fn dense(&self) -> [(Product, &Dense); 4] {
        [
            (Product::Qkv, &self.qkv),
            (Product::AttnOut, &self.attn_out),
            (Product::FfnUp, &self.up),
            (Product::FfnDown, &self.down),
        ]
    }
}

/// The embedding tables, each `{name}.weight` `[rows x hidden]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EmbeddingTensors {
    /// The word table, `[vocab_size x hidden]`.
    pub word: &'static str,
    /// The absolute position table, `[max_position_embeddings x hidden]`,
    /// if the family has one.
    pub position: Option<&'static str>,
    /// The token type table, `[type_vocab_size x hidden]` (row 0 is added
    /// to every untyped token), if the family has one.
    pub token_type: Option<&'static str>,
    /// The norm of their sum, if any.
    pub norm: Option<NormTensor>,
    /// Whether the word vectors are multiplied by `sqrt(hidden_size)`
    /// (Gemma's `Gemma3TextScaledWordEmbedding`).
    pub scale: bool,
}

/// How a family's attention knows where tokens are, beyond the absolute
/// position table of [`EmbeddingTensors::position`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RelativePositions {
    /// Not at all (BERT).
    None,
    /// Rotary positions on the queries and keys of every layer (metadata
    /// `rope_theta`, and `local_rope_theta` on sliding-window layers).
    Rotary,
    /// T5 / MPNet relative position buckets: bucket of the key position `j`
    /// relative to the query position `i` (bidirectional, metadata
    /// `relative_attention_num_buckets`, `relative_attention_max_distance`),
    /// one learned value per bucket and head added to the scores, shared by
    /// all layers: `table`, `[buckets x heads]`. See
    /// [`crate::model::blocks::attention::relative_bucket`].
    Buckets {
        /// The bias table.
        table: &'static str,
    },
    /// DeBERTa-v2's disentangled attention: the scores of query `i` and key
    /// `j` add `q_i · pk_r` (c2p) and `k_j · pq_r` (p2c), where `pk`, `pq`
    /// are the layer's key and query projections of the relative embedding
    /// `rows` (`[2·span x hidden]`, normalized by `norm`) and `r` is the
    /// (log-bucketed) relative position `i - j` shifted by the span; every
    /// term is divided by `sqrt(d · (1 + terms))`. See
    /// [`crate::model::blocks::disentangled`].
    Disentangled {
        /// The relative embedding table.
        rows: &'static str,
        /// Its norm.
        norm: NormTensor,
    },
}
