//! The precision report: how much error each reduced-precision product adds,
//! layer by layer and product by product, measured against the f32 engine
//! (and optionally against reference vectors). `embd precision-report` prints
//! it; it is how [`LayerPrecision::for_precision`] (and a family's
//! [`crate::model::arch::Family::int8_f32_products`]) was chosen.

use std::sync::Arc;

use crate::error::{Error, Result};
use crate::formats::{ModelFile, ReadOptions};
use crate::kernels::Par;
use crate::model::calibrate;
use crate::model::config::ModelConfig;
use crate::model::dense::{DenseHead, DenseOpts};
use crate::model::encoder::{Encoder, Seqs, Stage, Trace, Workspace};
use crate::model::precision::LayerPrecision;
use crate::model::precision::Precision;

/// Error of one configuration against f32 (and the reference when given).
#[derive(Debug, Clone, PartialEq)]
pub struct Agreement {
    /// Worst cosine of a text's embedding to its f32 embedding.
    pub worst_vs_f32: f64,
    /// Mean of those cosines.
    pub mean_vs_f32: f64,
    /// Worst and mean cosine to the reference vectors, when given.
    pub vs_reference: Option<(f64, f64)>,
}

/// The error of the hidden states after one sub-layer.
#[derive(Debug, Clone, PartialEq)]
pub struct LayerError {
    /// Layer index.
    pub layer: usize,
    /// Which sub-layer's output.
    pub stage: Stage,
    /// `‖h - h_f32‖ / ‖h_f32‖` over all tokens of all texts.
    pub relative_l2: f64,
    /// Worst cosine of a token's hidden state to its f32 state.
    pub worst_token_cosine: f64,
}

/// The report for one precision.
#[derive(Debug, Clone, PartialEq)]
pub struct PrecisionReport {
    /// The precision examined.
    pub precision: Precision,
    /// The engine's plan for it (what [`LayerPrecision::for_family`] picks).
    pub plan: LayerPrecision,
    /// Hidden-state error after each sub-layer with that plan.
    pub layers: Vec<LayerError>,
    /// Final embeddings with the engine's plan.
    pub engine: Agreement,
    /// Final embeddings with only one kind of product in `precision`, the
    /// rest f32: `(product name, agreement)`.
    pub per_product: Vec<(&'static str, Agreement)>,
    /// Final embeddings with every product in `precision`.
    pub uniform: Agreement,
}

/// Runs the report for `precision` over `texts` with the model at `path`
/// (one text per forward pass, one thread). `reference`, when given, holds
/// one vector per text. int8 products are smoothed with the statistics of
/// `calibration_texts` (default: the engine's built-in set).
///
/// # Errors
/// Opening or loading the model; a reference of the wrong length.
pub fn precision_report(
    path: &std::path::Path,
    texts: &[String],
    reference: Option<&[Vec<f32>]>,
    precision: Precision,
    calibration_texts: Option<&[String]>,
) -> Result<PrecisionReport> {
    let mut file = ModelFile::open(
        path,
        ReadOptions {
            verify_checksums: false,
        },
    )?;
    let cfg = ModelConfig::from_metadata(&file.metadata)?;
    let vocab = file
        .vocab
        .take()
        .ok_or_else(|| Error::model("model file has no vocabulary"))?;
    if reference.is_some_and(|r| r.len() != texts.len()) {
        return Err(Error::invalid_argument(
            "the reference must have one vector per text",
        ));
    }
    let tok = crate::model::tokenizer::tokenizer_of(&file, &cfg, vocab)?;
    let ids: Vec<Vec<u32>> = texts
        .iter()
        .map(|t| tok.encode(t, Some(cfg.max_seq_length)))
        .collect();
    let file = Arc::new(file);
    let head = DenseHead::load(&file, &cfg)?;
    let dim = head.out_dim();
    let opts = DenseOpts {
        pool_from: 0,
        normalize: cfg.normalize,
        dim,
        tokens: false,
        matryoshka: crate::vector::Matryoshka::Truncate,
    };
    // The engine's calibration (the built-in texts) unless others are given.
    let calib = {
        let f32_model = Encoder::load(&file, &cfg, LayerPrecision::uniform(Precision::F32), None)?;
        let max = cfg.max_seq_length;
        match calibration_texts {
            Some(t) => calibrate::calibrate_texts(&f32_model, &tok, max, t)?,
            None => calibrate::calibrate_texts(&f32_model, &tok, max, &calibrate::builtin_texts())?,
        }
    };
    let calib = Some(&calib);
    // Runs every text through `plan`; returns the embeddings and the hidden
    // states after every sub-layer (one Vec per text, per sub-layer).
    let run = |plan: LayerPrecision, keep_hidden: bool| -> Result<(Vec<f32>, Vec<Vec<f32>>)> {
        let model = Encoder::load(&file, &cfg, plan, calib)?;
        let mut ws = Workspace::default();
        let mut out = vec![0.0f32; ids.len() * dim];
        let mut hidden: Vec<Vec<f32>> = Vec::new();
        for (s, o) in ids.iter().zip(out.chunks_exact_mut(dim)) {
            let mut k = 0;
            let mut trace = |_: usize, stage: Stage, h: &[f32]| {
                if keep_hidden && matches!(stage, Stage::Attention | Stage::FeedForward) {
                    if hidden.len() <= k {
                        hidden.push(Vec::new());
                    }
                    hidden[k].extend_from_slice(h);
                    k += 1;
                }
            };
            let t: Trace<'_> = &mut trace;
            let ids = [s.as_slice()];
            model.forward(
                Seqs::untyped(&ids),
                &mut ws,
                Par::Serial,
                Some(t),
                |h, _| o.copy_from_slice(&head.vectors(&ids, h, opts)),
            )?;
        }
        Ok((out, hidden))
    };
    let (base, base_hidden) = run(LayerPrecision::uniform(Precision::F32), true)?;
    let agree = |got: &[f32]| Agreement {
        worst_vs_f32: cosines(got, base.chunks_exact(dim), dim).0,
        mean_vs_f32: cosines(got, base.chunks_exact(dim), dim).1,
        vs_reference: reference.map(|r| cosines(got, r.iter().map(Vec::as_slice), dim)),
    };
    let plan = LayerPrecision::for_family(precision, cfg.family()?);
    let (engine, hidden) = run(plan, true)?;
    let mut layers = Vec::new();
    for (i, (h, b)) in hidden.iter().zip(&base_hidden).enumerate() {
        let (mut num, mut den) = (0f64, 0f64);
        for (x, y) in h.iter().zip(b) {
            num += f64::from(x - y).powi(2);
            den += f64::from(*y).powi(2);
        }
        layers.push(LayerError {
            layer: i / 2,
            stage: if i % 2 == 0 {
                Stage::Attention
            } else {
                Stage::FeedForward
            },
            relative_l2: (num / den.max(f64::MIN_POSITIVE)).sqrt(),
            worst_token_cosine: cosines(h, b.chunks_exact(dim), dim).0,
        });
    }
    let f32_plan = LayerPrecision::uniform(Precision::F32);
    let products: [(&'static str, LayerPrecision); 4] = [
        (
            "qkv",
            LayerPrecision {
                qkv: precision,
                ..f32_plan
            },
        ),
        (
            "attn_out",
            LayerPrecision {
                attn_out: precision,
                ..f32_plan
            },
        ),
        (
            "ffn_up",
            LayerPrecision {
                ffn_up: precision,
                ..f32_plan
            },
        ),
        (
            "ffn_down",
            LayerPrecision {
                ffn_down: precision,
                ..f32_plan
            },
        ),
    ];
    let mut per_product = Vec::new();
    for (name, p) in products {
        per_product.push((name, agree(&run(p, false)?.0)));
    }
    let uniform = agree(&run(LayerPrecision::uniform(precision), false)?.0);
    Ok(PrecisionReport {
        precision,
        plan,
        layers,
        engine: agree(&engine),
        per_product,
        uniform,
    })
}

/// Worst and mean cosine of the rows of `got` against `want`'s rows.
fn cosines<'a>(got: &[f32], want: impl Iterator<Item = &'a [f32]>, dim: usize) -> (f64, f64) {
    let (mut worst, mut sum, mut n) = (1.0f64, 0.0f64, 0usize);
    for (g, w) in got.chunks_exact(dim).zip(want) {
        let (mut dot, mut na, mut nb) = (0f64, 0f64, 0f64);
        for (a, b) in g.iter().zip(w) {
            dot += f64::from(*a) * f64::from(*b);
            na += f64::from(*a) * f64::from(*a);
            nb += f64::from(*b) * f64::from(*b);
        }
        let c = if na == 0.0 || nb == 0.0 {
            f64::from(u8::from(na == nb))
        } else {
            dot / (na.sqrt() * nb.sqrt())
        };
        worst = worst.min(c);
        sum += c;
        n += 1;
    }
    (worst, sum / n.max(1) as f64)
}
