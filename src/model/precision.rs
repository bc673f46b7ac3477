//! The encoder's arithmetic: the [`Precision`] of its dense layers, the
//! [`Product`]s of a layer, the plan that gives each product its precision
//! ([`LayerPrecision`]), int8 calibration statistics and the int8 tensors the
//! converter writes.

use std::sync::Arc;

use crate::error::Result;
use crate::formats::ModelFile;
use crate::model::arch::Family;
use crate::model::config::ModelConfig;
use crate::model::linear;

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

/// One dense product of an encoder layer: its weight tensors (side by side
/// along the output dimension), `[widths[s] x k]` each.
pub struct DenseLayer {
    /// Which product.
    pub product: Product,
    /// HF tensor names of the weights.
    pub weights: Vec<String>,
    /// Output features of each weight tensor.
    pub widths: Vec<usize>,
    /// Input features.
    pub k: usize,
}

/// The dense products of layer `l`, in the order of the forward pass.
///
/// # Panics
/// If `cfg.architecture` is not a registered family (a validated config's
/// always is).
pub fn dense_layers(cfg: &ModelConfig, l: usize) -> [DenseLayer; 4] {
    let f = cfg.family().expect("a registered architecture");
    let n = &f.names;
    let (h, i) = (cfg.hidden_size, cfg.intermediate_size);
    let heads = cfg.heads();
    // Gated: `gate | up`.
    let up: &[usize] = if f.gated_mlp { &[i, i] } else { &[i] };
    // One fused tensor holds every part; stacked tensors one part each.
    let d = |product, names: &[&str], parts: &[usize], k| DenseLayer {
        product,
        weights: names
            .iter()
            .map(|s| f.layer_tensor(l, s, "weight"))
            .collect(),
        widths: if names.len() == 1 {
            vec![parts.iter().sum()]
        } else {
            parts.to_vec()
        },
        k,
    };
    let (q, kv) = (heads.q * heads.d, heads.kv * heads.d);
    [
        d(Product::Qkv, n.qkv, &[q, kv, kv], h),
        d(Product::AttnOut, &[n.attn_out], &[h], heads.ctx_width()),
        d(Product::FfnUp, n.ffn_up, up, h),
        d(Product::FfnDown, &[n.ffn_down], &[h], i),
    ]
}

/// The `int8_per_row` tensors of every dense weight of the model in `file`,
/// smoothed with `calib`: for each weight `W` (`[rows x cols]`) the int8 `W`,
/// `W_scale` (`[rows]`) and, with a calibration, `W_smooth` (`[cols]`).
/// What `embd convert --dtype int8` writes.
///
/// # Errors
/// A missing or misshapen tensor.
pub fn int8_tensors(
    file: &Arc<ModelFile>,
    cfg: &ModelConfig,
    calib: Option<&Calibration>,
) -> Result<Vec<crate::formats::TensorEntry>> {
    use crate::formats::{DType, TensorEntry};
    let mut out = Vec::new();
    for l in 0..cfg.num_layers {
        for d in dense_layers(cfg, l) {
            let amax = calib
                .and_then(|c| c.layers.get(l))
                .map(|a| a[d.product as usize].as_slice())
                .filter(|a| a.len() == d.k);
            let w = linear::int8_weights(file, &d.weights, &d.widths, d.k, false, amax)?;
            let mut row0 = 0;
            for (name, &width) in d.weights.iter().zip(&d.widths) {
                let rows = row0..row0 + width;
                row0 += width;
                let q: Vec<u8> = w.q[rows.start * d.k..rows.end * d.k]
                    .iter()
                    .map(|&v| v as u8)
                    .collect();
                out.push(TensorEntry::owned_bytes(
                    name,
                    DType::I8,
                    vec![width, d.k],
                    &q,
                ));
                out.push(TensorEntry::owned_f32(
                    format!("{name}_scale"),
                    vec![width],
                    &w.scales[rows],
                ));
                if let Some(f) = &w.smooth {
                    out.push(TensorEntry::owned_f32(
                        format!("{name}_smooth"),
                        vec![d.k],
                        f,
                    ));
                }
            }
        }
    }
    Ok(out)
}
