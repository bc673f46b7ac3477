//! Model conversion: re-typing tensors (f32, f16, bf16, int8 per row) ahead of
//! writing a container.
//!
//! Converting to f32 keeps every FLOAT32 tensor as it is (same bytes, no copy),
//! so a `.weights` file converted from `model.safetensors` holds bit-identical
//! tensors.

use std::fmt;

use crate::error::{Error, Result};
use crate::formats::{DType, ModelFile, TensorEntry};

/// The version of what a conversion writes for a given folder: raise it
/// when the importers or the writer change the bytes of a converted model,
/// so that the converted hub models cached by [`crate::hub`] convert again.
pub const CONVERTER_VERSION: u32 = 1;

/// Target precision of a conversion.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TargetDType {
    /// Keep FLOAT32 (bit-identical).
    F32,
    /// IEEE half for every matrix (embedding tables and Linear weights);
    /// vectors (biases, LayerNorm) stay FLOAT32.
    F16,
    /// bfloat16 for every matrix; vectors stay FLOAT32.
    BF16,
    /// Symmetric int8 per output row for the encoder's Linear weights, with a
    /// FLOAT32 `X.weight_scale` tensor per weight (`quantization` =
    /// `int8_per_row`); embeddings, biases and LayerNorm stay FLOAT32.
    Int8,
}

impl TargetDType {
    /// Parses `f32`, `f16`, `bf16` or `int8`.
    pub fn parse(s: &str) -> Option<TargetDType> {
        match s {
            "f32" | "fp32" | "float32" => Some(TargetDType::F32),
            "f16" | "fp16" | "float16" => Some(TargetDType::F16),
            "bf16" | "bfloat16" => Some(TargetDType::BF16),
            "int8" | "i8" => Some(TargetDType::Int8),
            _ => None,
        }
    }
}

impl fmt::Display for TargetDType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            TargetDType::F32 => "f32",
            TargetDType::F16 => "f16",
            TargetDType::BF16 => "bf16",
            TargetDType::Int8 => "int8",
        })
    }
}

/// `src` with other metadata and tensors (its container kind, backing,
/// vocabulary, details and read report kept).
fn rebuilt(
    src: &ModelFile,
    md: std::collections::BTreeMap<String, String>,
    tensors: Vec<TensorEntry>,
) -> Result<ModelFile> {
    let mut out = ModelFile::new(
        src.format,
        src.backing().clone(),
        md,
        src.vocab.clone(),
        tensors,
    )?;
    out.details = src.details.clone();
    out.report = src.report.clone();
    Ok(out)
}

fn is_encoder_linear_weight(t: &TensorEntry) -> bool {
    crate::model::names::is_layer_linear_weight(&t.name, &t.shape)
}

/// Quantizes a row-major `[rows, cols]` matrix to int8 with one scale per row:
/// `scale = max|row| / 127`, `q = round(x / scale)` clamped to [-127, 127]
/// (the kernels' [`crate::kernels::qgemm::quantize_weights`]).
pub fn quantize_int8_per_row(values: &[f32], rows: usize, cols: usize) -> (Vec<i8>, Vec<f32>) {
    crate::kernels::qgemm::quantize_weights(values, rows, cols)
}

/// Returns a model whose tensors have the target precision. Metadata and
/// vocabulary are kept; tensors that are already in the target form are shared
/// with the source without copying.
///
/// # Errors
/// [`crate::ErrorKind::Model`] when a tensor to convert is not FLOAT32 (only
/// FLOAT32 sources are re-typed; converting between reduced precisions would
/// compound rounding).
pub fn convert_dtype(src: &ModelFile, target: TargetDType) -> Result<ModelFile> {
    if crate::model::packed::is_packed(src) {
        return Err(Error::invalid_argument(format!(
            "the source stores its weights packed for running (metadata '{}'); convert from the f32 model",
            crate::model::packed::LAYOUT_KEY
        )));
    }
    let mut md = src.metadata.clone();
    let mut tensors = Vec::with_capacity(src.tensors.len());
    let smoothed = match target {
        TargetDType::Int8 => smoothed_int8(src)?,
        _ => None,
    };
    for t in &src.tensors {
        if let Some(entries) = smoothed.as_ref().and_then(|m| m.get(&t.name)) {
            tensors.extend(entries.iter().cloned());
            continue;
        }
        let wants = match target {
            TargetDType::F32 => false,
            TargetDType::F16 | TargetDType::BF16 => t.shape.len() == 2,
            // The word-embedding table too (a quarter of its f32 size, rows
            // dequantized as they are looked up).
            TargetDType::Int8 => {
                is_encoder_linear_weight(t)
                    || t.name.strip_suffix(".weight") == Some(crate::model::names::BERT.word)
            }
        };
        let float_src = matches!(t.dtype, DType::F32 | DType::F16 | DType::BF16);
        if !wants || !float_src {
            tensors.push(t.clone());
            continue;
        }
        let values = src.tensor_to_f32(t);
        match target {
            // `wants` is false for F32, so F32 never gets here; keep as is.
            TargetDType::F32 => tensors.push(t.clone()),
            TargetDType::F16 | TargetDType::BF16 => {
                let (dtype, half): (DType, fn(f32) -> [u8; 2]) = if target == TargetDType::F16 {
                    (DType::F16, |v| half::f16::from_f32(v).to_le_bytes())
                } else {
                    (DType::BF16, |v| half::bf16::from_f32(v).to_le_bytes())
                };
                let bytes: Vec<u8> = values.iter().flat_map(|&v| half(v)).collect();
                tensors.push(TensorEntry::owned_bytes(
                    &t.name,
                    dtype,
                    t.shape.clone(),
                    &bytes,
                ));
            }
            TargetDType::Int8 => {
                let (rows, cols) = (t.shape[0], t.shape[1]);
                if rows * cols != values.len() {
                    return Err(Error::model(format!(
                        "tensor '{}' has inconsistent size",
                        t.name
                    )));
                }
                let (q, scales) = quantize_int8_per_row(&values, rows, cols);
                let qb: Vec<u8> = q.iter().map(|&x| x as u8).collect();
                tensors.push(TensorEntry::owned_bytes(
                    &t.name,
                    DType::I8,
                    t.shape.clone(),
                    &qb,
                ));
                tensors.push(TensorEntry::owned_f32(
                    format!("{}_scale", t.name),
                    vec![rows],
                    &scales,
                ));
            }
        }
    }
    if target == TargetDType::Int8 {
        md.insert("quantization".to_string(), "int8_per_row".to_string());
    }
    rebuilt(src, md, tensors)
}

/// `src` (a model converted to f32, bf16 or int8 by [`convert_dtype`]) with
/// its encoder layers' weights stored packed in the layout of this CPU's
/// kernels of that precision ([`crate::model::packed`]), so that opening it
/// maps them in place; the file then runs in that precision by default. f16,
/// files without an encoder, and f32 where the engine's own f32 kernels do
/// not run (no AVX2) are returned unchanged; f32 layers whose kernels read
/// them unpacked (segments of widths not aligned for the panels) stay row by
/// row.
///
/// # Errors
/// The model's load errors (a missing or misshapen tensor, named).
pub fn pack_for_run(src: ModelFile, target: TargetDType) -> Result<ModelFile> {
    use crate::model::config::ModelConfig;
    use crate::model::encoder::Encoder;
    use crate::model::precision::{LayerPrecision, Precision};
    let precision = match target {
        TargetDType::F32 => Precision::F32,
        TargetDType::BF16 => Precision::Bf16,
        TargetDType::Int8 => Precision::Int8,
        TargetDType::F16 => return Ok(src),
    };
    let Ok(cfg) = ModelConfig::from_metadata(&src.metadata) else {
        return Ok(src);
    };
    let src = std::sync::Arc::new(src);
    let plan = LayerPrecision::for_family(precision, cfg.family()?);
    let encoder = Encoder::load(&src, &cfg, plan, None)?;
    // f32 layers are packed on first use (or in the background): now.
    encoder.prepack(false);
    let mut layout = None;
    let mut replaced = std::collections::HashSet::new();
    let mut packed = Vec::new();
    // Only the target precision's layers: a file has one layout (the bf16
    // plan keeps some products in f32, which stay row by row).
    for lin in encoder.linears().filter(|l| l.precision() == precision) {
        let Some((tensors, names)) = lin.packed_tensors() else {
            continue;
        };
        let this = lin.packed_layout();
        if layout.is_some() && layout != this {
            return Err(Error::new(
                crate::error::ErrorKind::Internal,
                format!("layers packed in two layouts: {layout:?} and {this:?}"),
            ));
        }
        layout = this;
        replaced.extend(names);
        packed.extend(tensors);
    }
    drop(encoder);
    let src = std::sync::Arc::try_unwrap(src).map_err(|_| {
        Error::new(
            crate::error::ErrorKind::Internal,
            "pack_for_run: the model is still in use",
        )
    })?;
    let Some(layout) = layout else {
        return Ok(src);
    };
    let mut md = src.metadata.clone();
    md.insert(crate::model::packed::LAYOUT_KEY.to_string(), layout);
    let mut tensors: Vec<TensorEntry> = Vec::with_capacity(src.tensors.len());
    let mut packed = Some(packed);
    for t in &src.tensors {
        if replaced.contains(&t.name) {
            // The packed layers go where the first of their tensors was.
            tensors.extend(packed.take().into_iter().flatten());
        } else {
            tensors.push(t.clone());
        }
    }
    rebuilt(&src, md, tensors)
}

/// For a BERT encoder whose dense weights are all floats: its int8 weights
/// smoothed with the activation statistics of the built-in calibration texts
/// (see [`crate::model::calibrate`]), by weight name (the int8 tensor, its
/// `_scale` and `_smooth`). `None` for other models (plain per-row
/// quantization applies).
fn smoothed_int8(
    src: &ModelFile,
) -> Result<Option<std::collections::HashMap<String, Vec<TensorEntry>>>> {
    use crate::model::config::ModelConfig;
    use crate::model::encoder::Encoder;
    use crate::model::precision::{LayerPrecision, Precision};
    let (Ok(cfg), Some(vocab)) = (ModelConfig::from_metadata(&src.metadata), &src.vocab) else {
        return Ok(None);
    };
    if src
        .tensors
        .iter()
        .any(|t| is_encoder_linear_weight(t) && t.dtype == DType::I8)
    {
        return Ok(None);
    }
    let view = std::sync::Arc::new(ModelFile::new(
        src.format,
        src.backing().clone(),
        src.metadata.clone(),
        None,
        src.tensors.clone(),
    )?);
    let f32_model = Encoder::load(&view, &cfg, LayerPrecision::uniform(Precision::F32), None)?;
    let tok = crate::model::tokenizer::tokenizer_of(src, &cfg, vocab.clone())?;
    let texts = crate::model::calibrate::builtin_texts();
    let calib =
        crate::model::calibrate::calibrate_texts(&f32_model, &tok, cfg.max_seq_length, &texts)?;
    let mut by_name: std::collections::HashMap<String, Vec<TensorEntry>> = Default::default();
    for t in int8_tensors(&view, &cfg, Some(&calib))? {
        let base = t
            .name
            .strip_suffix("_scale")
            .or_else(|| t.name.strip_suffix("_smooth"))
            .unwrap_or(&t.name)
            .to_string();
        by_name.entry(base).or_default().push(t);
    }
    Ok(Some(by_name))
}

/// `src` plus the output ranges of its model over a calibration corpus: every
/// text of `texts` is embedded by the model `src` holds (as it runs by
/// default: its own precision, normalization and all dimensions), and the
/// per-dimension minimum and maximum are stored as the f32 tensor
/// [`crate::quantize::RANGES_TENSOR`] of shape `[2, dim]` (replacing one
/// already there), with metadata `output_ranges_texts` = the number of texts.
/// `int8` / `uint8` output then uses them, as sentence-transformers'
/// `quantize_embeddings(..., calibration_embeddings=...)` would.
///
/// # Errors
/// [`crate::ErrorKind::InvalidArgument`] without texts; the model's open and
/// embedding errors.
pub fn with_output_ranges(src: &ModelFile, texts: &[String], threads: usize) -> Result<ModelFile> {
    use crate::quantize::{OutputRanges, RANGES_TENSOR};
    if texts.is_empty() {
        return Err(Error::invalid_argument(
            "the output-ranges calibration corpus has no texts",
        ));
    }
    let tensors: Vec<TensorEntry> = src
        .tensors
        .iter()
        .filter(|t| t.name != RANGES_TENSOR)
        .cloned()
        .collect();
    let view = ModelFile::new(
        src.format,
        src.backing().clone(),
        src.metadata.clone(),
        src.vocab.clone(),
        tensors.clone(),
    )?;
    let opts = crate::options::Options::new()
        .threads(threads)
        .prepack_weights(false);
    let engine = crate::engine::Engine::from_model_file(view, &opts)?;
    let dim = engine.dim();
    let mut vecs = vec![0.0f32; texts.len() * dim];
    for (chunk, out) in texts.chunks(256).zip(vecs.chunks_mut(256 * dim)) {
        engine.embed_into(chunk, out)?;
    }
    let ranges = OutputRanges::from_vectors(&vecs, dim)
        .ok_or_else(|| Error::invalid_argument("no calibration vectors"))?;
    let mut tensors = tensors;
    tensors.push(TensorEntry::owned_f32(
        RANGES_TENSOR,
        vec![2, dim],
        &ranges.to_rows(),
    ));
    let mut md = src.metadata.clone();
    md.insert("output_ranges_texts".to_string(), texts.len().to_string());
    rebuilt(src, md, tensors)
}

/// The `int8_per_row` tensors of every dense weight of the model in `file`,
/// smoothed with `calib`: for each weight `W` (`[rows x cols]`) the int8 `W`,
/// `W_scale` (`[rows]`) and, with a calibration, `W_smooth` (`[cols]`).
/// What `embd convert --dtype int8` writes.
///
/// # Errors
/// A missing or misshapen tensor.
fn int8_tensors(
    file: &std::sync::Arc<ModelFile>,
    cfg: &crate::model::config::ModelConfig,
    calib: Option<&crate::model::precision::Calibration>,
) -> Result<Vec<TensorEntry>> {
    let mut out = Vec::new();
    for l in 0..cfg.num_layers {
        for d in crate::model::encoder::dense_layers(cfg, l) {
            let amax = calib
                .and_then(|c| c.layers.get(l))
                .map(|a| a[d.product as usize].as_slice())
                .filter(|a| a.len() == d.k);
            let w =
                crate::model::linear::int8_weights(file, &d.weights, &d.widths, d.k, false, amax)?;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn int8_round_trip_error_is_bounded() {
        let rows = 3;
        let cols = 5;
        let v: Vec<f32> = (0..rows * cols).map(|i| (i as f32 - 7.0) * 0.37).collect();
        let (q, s) = quantize_int8_per_row(&v, rows, cols);
        for r in 0..rows {
            for c in 0..cols {
                let back = f32::from(q[r * cols + c]) * s[r];
                assert!((back - v[r * cols + c]).abs() <= s[r] * 0.5 + 1e-6);
            }
        }
    }

    #[test]
    fn zero_row_gets_unit_scale() {
        let (q, s) = quantize_int8_per_row(&[0.0; 4], 2, 2);
        assert_eq!(q, vec![0; 4]);
        assert_eq!(s, vec![1.0, 1.0]);
    }

    #[test]
    fn parse_names() {
        assert_eq!(TargetDType::parse("bf16"), Some(TargetDType::BF16));
        assert_eq!(TargetDType::parse("q4"), None);
    }
}
