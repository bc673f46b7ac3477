//! The encoder's arithmetic: the [`Precision`] of its dense layers, the
//! [`Product`]s of a layer, the plan that gives each product its precision
//! ([`LayerPrecision`]) and int8 calibration statistics. The plan of a family
//! ([`LayerPrecision::for_family`]) is in [`crate::model::arch`], next to the
//! list it reads; the layer's dense products ([`crate::model::encoder::dense_layers`])
//! in the encoder. This module imports nothing of the crate: every other
//! module may use it.

/// Arithmetic of the encoder's dense (`Linear`) layers. Attention, LayerNorm,
/// GELU and pooling always run in f32.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Precision {
    /// f32 weights and activations, f32 accumulation: the reference numbers.
    F32,
    /// Weights and activations rounded to bfloat16 (round to nearest even),
    /// f32 accumulation.
    Bf16,
    /// Weights symmetric int8 per output channel, activations quantized per
    /// token row (asymmetric, 255 levels), exact int32 accumulation, f32
    /// epilogues.
    Int8,
}

impl Precision {
    /// Every precision, in order of decreasing accuracy.
    pub const ALL: [Precision; 3] = [Precision::F32, Precision::Bf16, Precision::Int8];

    /// The lowercase name used by the CLI and the C API's messages: `f32`,
    /// `bf16` or `int8`.
    pub fn name(self) -> &'static str {
        match self {
            Precision::F32 => "f32",
            Precision::Bf16 => "bf16",
            Precision::Int8 => "int8",
        }
    }

    /// Parses a name of [`Precision::name`] (ASCII case-insensitive).
    pub fn from_name(s: &str) -> Option<Precision> {
        Precision::ALL
            .into_iter()
            .find(|p| p.name().eq_ignore_ascii_case(s.trim()))
    }
}

impl std::fmt::Display for Precision {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The dense products of an encoder layer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Product {
    /// Q, K and V projections.
    Qkv,
    /// Attention output projection.
    AttnOut,
    /// Feed-forward up projection.
    FfnUp,
    /// Feed-forward down projection.
    FfnDown,
}

impl Product {
    /// Every product, in the order of the forward pass.
    pub const ALL: [Product; 4] = [
        Product::Qkv,
        Product::AttnOut,
        Product::FfnUp,
        Product::FfnDown,
    ];

    /// Short name (`qkv`, `attn_out`, `ffn_up`, `ffn_down`).
    pub fn name(self) -> &'static str {
        match self {
            Product::Qkv => "qkv",
            Product::AttnOut => "attn_out",
            Product::FfnUp => "ffn_up",
            Product::FfnDown => "ffn_down",
        }
    }
}

/// Activation statistics of calibration data: the largest magnitude of each
/// input channel of each product, per layer (see [`crate::model::calibrate`]).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Calibration {
    /// `layers[l][p]`: product `Product::ALL[p]` of layer `l`, one value per
    /// input channel.
    pub layers: Vec<[Vec<f32>; 4]>,
}

/// The precision of each kind of product of an encoder layer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LayerPrecision {
    /// Q, K and V projections.
    pub qkv: Precision,
    /// Attention output projection.
    pub attn_out: Precision,
    /// Feed-forward up projection (followed by GELU).
    pub ffn_up: Precision,
    /// Feed-forward down projection.
    pub ffn_down: Precision,
}

impl LayerPrecision {
    /// Every product in `p`.
    pub const fn uniform(p: Precision) -> LayerPrecision {
        LayerPrecision {
            qkv: p,
            attn_out: p,
            ffn_up: p,
            ffn_down: p,
        }
    }

    /// The products' precisions the engine uses for a requested precision
    /// (chosen by measurement: see `embd precision-report`) for a BERT model;
    /// see [`LayerPrecision::for_family`].
    pub const fn for_precision(p: Precision) -> LayerPrecision {
        LayerPrecision::uniform(p)
    }
}

impl LayerPrecision {
    /// The precision of product `p`.
    pub const fn of(self, p: Product) -> Precision {
        match p {
            Product::Qkv => self.qkv,
            Product::AttnOut => self.attn_out,
            Product::FfnUp => self.ffn_up,
            Product::FfnDown => self.ffn_down,
        }
    }

    /// Whether any product is int8.
    pub fn any_int8(self) -> bool {
        Product::ALL.iter().any(|&p| self.of(p) == Precision::Int8)
    }
}
