//! Output precision of the vectors: float32, int8, uint8, binary and ubinary,
//! with the semantics of sentence-transformers' `quantize_embeddings`
//! (`sentence_transformers/util/quantization.py`, version 6.2).
//!
//! - `int8` / `uint8`: per dimension `j`, a range `[min_j, max_j]` is cut into
//!   255 steps of `step_j = (max_j - min_j) / 255` (a zero step counts as 1);
//!   a value `x` becomes `q = clamp(floor((x - min_j) / step_j), 0, 255)`, all in
//!   f32 arithmetic; `uint8` stores `q`, `int8` stores `q - 128`.
//! - `binary` / `ubinary`: the bits `x > 0`, packed 8 per byte with the first
//!   component in the most significant bit and the last byte zero-padded
//!   (`np.packbits`); `ubinary` stores the bytes, `binary` the bytes minus 128
//!   as int8.
//!
//! The ranges never come from the batch being encoded (a vector must not
//! depend on its neighbours): they are given by the caller
//! ([`crate::Options::output_ranges`]) or stored in the model file at convert
//! time from a calibration corpus (tensor [`RANGES_TENSOR`]).

use crate::error::{Error, Result};
use crate::formats::ModelFile;

/// Name of the tensor holding a model's output ranges: f32, shape `[2, dim]`,
/// row 0 the per-dimension minimum and row 1 the maximum of the model's output
/// vectors over a calibration corpus (`embd convert --output-ranges-corpus`).
pub const RANGES_TENSOR: &str = "output_quantization.ranges";

/// Element type and packing of the output vectors.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OutputPrecision {
    /// f32 components (the default).
    Float32,
    /// One signed byte per component: the uint8 bucket minus 128.
    Int8,
    /// One unsigned byte per component: the bucket in `0..=255` of its range.
    Uint8,
    /// The sign bits packed 8 per byte, stored as the `ubinary` byte minus 128.
    Binary,
    /// The sign bits (`x > 0`) packed 8 per byte, first component in bit 7.
    Ubinary,
}

impl OutputPrecision {
    /// Every output precision.
    pub const ALL: [OutputPrecision; 5] = [
        OutputPrecision::Float32,
        OutputPrecision::Int8,
        OutputPrecision::Uint8,
        OutputPrecision::Binary,
        OutputPrecision::Ubinary,
    ];

    /// The name sentence-transformers uses: `float32`, `int8`, `uint8`,
    /// `binary`, `ubinary`.
    pub fn name(self) -> &'static str {
        match self {
            OutputPrecision::Float32 => "float32",
            OutputPrecision::Int8 => "int8",
            OutputPrecision::Uint8 => "uint8",
            OutputPrecision::Binary => "binary",
            OutputPrecision::Ubinary => "ubinary",
        }
    }

    /// Parses a name of [`OutputPrecision::name`] (ASCII case-insensitive).
    pub fn from_name(s: &str) -> Option<OutputPrecision> {
        OutputPrecision::ALL
            .into_iter()
            .find(|p| p.name().eq_ignore_ascii_case(s.trim()))
    }

    /// Elements per output row for vectors of `dim` components: `dim`, or
    /// `ceil(dim / 8)` bytes for the packed binary precisions.
    pub fn row_len(self, dim: usize) -> usize {
        match self {
            OutputPrecision::Binary | OutputPrecision::Ubinary => dim.div_ceil(8),
            _ => dim,
        }
    }

    /// True for the precisions whose elements are signed (`int8`, `binary`).
    pub fn is_signed(self) -> bool {
        matches!(self, OutputPrecision::Int8 | OutputPrecision::Binary)
    }

    /// True for `int8` and `uint8`, which need [`OutputRanges`].
    pub fn needs_ranges(self) -> bool {
        matches!(self, OutputPrecision::Int8 | OutputPrecision::Uint8)
    }
}

impl std::fmt::Display for OutputPrecision {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Per-dimension ranges for `int8` / `uint8` output: sentence-transformers'
/// `ranges` array of shape `(2, dim)`.
#[derive(Debug, Clone)]
pub struct OutputRanges {
    /// Lower end of each dimension's range (`ranges[0]`).
    pub min: Vec<f32>,
    /// Upper end of each dimension's range (`ranges[1]`).
    pub max: Vec<f32>,
}

impl PartialEq for OutputRanges {
    /// Bit-for-bit equality (so that `Eq` holds).
    fn eq(&self, other: &Self) -> bool {
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        bits(&self.min) == bits(&other.min) && bits(&self.max) == bits(&other.max)
    }
}

impl Eq for OutputRanges {}

impl OutputRanges {
    /// Ranges from sentence-transformers' row-major `(2, dim)` layout: `dim`
    /// minima, then `dim` maxima.
    ///
    /// # Errors
    /// [`crate::error::ErrorKind::InvalidArgument`] for an odd or zero length, or a
    /// non-finite value.
    pub fn from_rows(v: &[f32]) -> Result<OutputRanges> {
        if v.is_empty() || !v.len().is_multiple_of(2) {
            return Err(Error::invalid_argument(format!(
                "output ranges hold {} values; expected 2 x dim (dim minima, then dim maxima)",
                v.len()
            )));
        }
        if let Some(i) = v.iter().position(|x| !x.is_finite()) {
            return Err(Error::invalid_argument(format!(
                "output range value {i} is {}, not a finite number",
                v[i]
            )));
        }
        let (min, max) = v.split_at(v.len() / 2);
        Ok(OutputRanges {
            min: min.to_vec(),
            max: max.to_vec(),
        })
    }

    /// The per-dimension minimum and maximum of row-major vectors of `dim`
    /// components (sentence-transformers' `calibration_embeddings`). `None`
    /// without vectors.
    pub fn from_vectors(vecs: &[f32], dim: usize) -> Option<OutputRanges> {
        let mut rows = vecs.chunks_exact(dim);
        let first = rows.next()?;
        let (mut min, mut max) = (first.to_vec(), first.to_vec());
        for row in rows {
            for ((lo, hi), &x) in min.iter_mut().zip(max.iter_mut()).zip(row) {
                // As np.min / np.max (a NaN would win there; vectors have none).
                *lo = lo.min(x);
                *hi = hi.max(x);
            }
        }
        Some(OutputRanges { min, max })
    }

    /// Number of dimensions.
    pub fn dim(&self) -> usize {
        self.min.len()
    }

    /// `dim` minima then `dim` maxima (the `(2, dim)` layout).
    pub fn to_rows(&self) -> Vec<f32> {
        self.min.iter().chain(&self.max).copied().collect()
    }
}

/// The ranges an engine uses: the caller's (checked against `dim`), else the
/// model file's [`RANGES_TENSOR`] when the vectors are not cut (the stored
/// ranges describe full vectors), else none.
pub(crate) fn resolve_ranges(
    file: &ModelFile,
    given: Option<&OutputRanges>,
    full_dim: usize,
    dim: usize,
) -> Result<Option<OutputRanges>> {
    if let Some(r) = given {
        if r.min.len() != dim || r.max.len() != dim {
            return Err(Error::invalid_argument(format!(
                "output ranges cover {} and {} dimensions; the output has {dim}",
                r.min.len(),
                r.max.len()
            )));
        }
        return Ok(Some(r.clone()));
    }
    let Some(t) = file.tensor(RANGES_TENSOR) else {
        return Ok(None);
    };
    if t.shape != [2, full_dim] {
        return Err(Error::model(format!(
            "tensor '{RANGES_TENSOR}' has shape {:?}; expected [2, {full_dim}]",
            t.shape
        )));
    }
    if dim != full_dim {
        return Ok(None);
    }
    Ok(Some(
        OutputRanges::from_rows(&file.tensor_to_f32(t))
            .map_err(|e| Error::model(format!("tensor '{RANGES_TENSOR}': {e}")))?,
    ))
}

/// Quantizes row-major `vecs` of `dim` components into `out` (at least
/// `n x precision.row_len(dim)` bytes; `int8` and `binary` elements are stored
/// as their two's-complement bytes).
///
/// # Errors
/// [`crate::error::ErrorKind::InvalidArgument`] for `float32` (nothing to quantize),
/// for `int8`/`uint8` without ranges or with ranges of another dimension;
/// [`crate::error::ErrorKind::BufferTooSmall`] for a short `out`.
pub fn quantize_embeddings(
    vecs: &[f32],
    dim: usize,
    precision: OutputPrecision,
    ranges: Option<&OutputRanges>,
    out: &mut [u8],
) -> Result<()> {
    let n = vecs.len().checked_div(dim).unwrap_or(0);
    let row = precision.row_len(dim);
    if out.len() < n * row {
        return Err(Error::new(
            crate::error::ErrorKind::BufferTooSmall,
            format!(
                "output holds {} bytes, {n} x {row} = {} are needed",
                out.len(),
                n * row
            ),
        ));
    }
    match precision {
        OutputPrecision::Float32 => Err(Error::invalid_argument(
            "float32 output is not quantized; embed into f32 instead",
        )),
        OutputPrecision::Int8 | OutputPrecision::Uint8 => {
            let r = ranges.ok_or_else(|| missing_ranges(precision))?;
            if r.dim() != dim || r.max.len() != dim {
                return Err(Error::invalid_argument(format!(
                    "output ranges cover {} dimensions; the vectors have {dim}",
                    r.dim()
                )));
            }
            let steps: Vec<f32> = r
                .min
                .iter()
                .zip(&r.max)
                .map(|(&lo, &hi)| {
                    let s = (hi - lo) / 255.0;
                    if s == 0.0 {
                        1.0
                    } else {
                        s
                    }
                })
                .collect();
            let shift = if precision == OutputPrecision::Int8 {
                128.0
            } else {
                0.0
            };
            for (src, dst) in vecs.chunks_exact(dim).zip(out.chunks_exact_mut(row)) {
                for (((d, &x), &lo), &step) in dst.iter_mut().zip(src).zip(&r.min).zip(&steps) {
                    let q = ((x - lo) / step).floor().clamp(0.0, 255.0);
                    // q is an integer in 0..=255 (NaN, impossible here, gives 0).
                    *d = if shift == 0.0 {
                        q as u8
                    } else {
                        (q - shift) as i8 as u8
                    };
                }
            }
            Ok(())
        }
        OutputPrecision::Binary | OutputPrecision::Ubinary => {
            let bias = if precision == OutputPrecision::Binary {
                128
            } else {
                0
            };
            for (src, dst) in vecs.chunks_exact(dim).zip(out.chunks_exact_mut(row)) {
                for (byte, bits) in dst.iter_mut().zip(src.chunks(8)) {
                    let mut b = 0u8;
                    for (k, &x) in bits.iter().enumerate() {
                        b |= u8::from(x > 0.0) << (7 - k);
                    }
                    *byte = b.wrapping_sub(bias);
                }
            }
            Ok(())
        }
    }
}

fn missing_ranges(p: OutputPrecision) -> Error {
    Error::invalid_argument(format!(
        "{p} output needs per-dimension ranges: give them (output_ranges) or convert the \
         model with a calibration corpus (embd convert --output-ranges-corpus); the model \
         file stores none (or the vectors are cut to fewer dimensions than the stored ranges)"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packbits_order_and_padding() {
        // 10 components: bits 1,0,1,1,0,0,0,1 | 1,0 -> 0b1011_0001, 0b1000_0000.
        let v = [0.5f32, -1.0, 2.0, 1e-9, 0.0, -0.0, -3.0, 7.0, 0.1, -0.1];
        let mut out = [0u8; 2];
        quantize_embeddings(&v, 10, OutputPrecision::Ubinary, None, &mut out).unwrap();
        assert_eq!(out, [0xB1, 0x80]);
        quantize_embeddings(&v, 10, OutputPrecision::Binary, None, &mut out).unwrap();
        assert_eq!(out.map(|b| b as i8), [0x31, 0]);
        assert_eq!(OutputPrecision::Binary.row_len(10), 2);
        assert_eq!(OutputPrecision::Ubinary.row_len(384), 48);
    }

    #[test]
    fn buckets_floor_clamp_and_zero_width() {
        // Range [-1, 1]: step 2/255. Dimension 1 has a zero-width range.
        let r = OutputRanges::from_rows(&[-1.0, 0.5, 1.0, 0.5]).unwrap();
        let v = [-1.0f32, 0.5, 1.0, 0.7, 0.0, -9.0, 5.0, 0.4];
        let mut u = [0u8; 8];
        quantize_embeddings(&v, 2, OutputPrecision::Uint8, Some(&r), &mut u).unwrap();
        // -1 -> 0; 0.5 - 0.5 = 0 -> 0; 0.7 - 0.5 = 0.2 -> floor(0.2) = 0;
        // 0 -> floor(127.49..) = 127; -9 -> clamp 0; 5 -> clamp 255; 0.4 - 0.5 < 0 -> 0.
        // The maximum itself lands in bucket 254, not 255: in f32, 2 / 255 rounds
        // up to 0.0078431377, and 2 / 0.0078431377 rounds to 254.99998.
        assert_eq!(u, [0, 0, 254, 0, 127, 0, 255, 0]);
        let mut i = [0u8; 8];
        quantize_embeddings(&v, 2, OutputPrecision::Int8, Some(&r), &mut i).unwrap();
        assert_eq!(
            i.map(|b| b as i8),
            [-128, -128, 126, -128, -1, -128, 127, -128]
        );
    }

    #[test]
    fn errors_name_the_problem() {
        let mut out = [0u8; 4];
        let e =
            quantize_embeddings(&[0.0; 4], 4, OutputPrecision::Int8, None, &mut out).unwrap_err();
        assert!(e.to_string().contains("ranges"), "{e}");
        let r = OutputRanges::from_rows(&[0.0, 1.0]).unwrap();
        let e = quantize_embeddings(&[0.0; 4], 4, OutputPrecision::Uint8, Some(&r), &mut out)
            .unwrap_err();
        assert!(e.to_string().contains("1 dimensions"), "{e}");
        let e = quantize_embeddings(&[0.0; 8], 4, OutputPrecision::Uint8, Some(&r), &mut out)
            .unwrap_err();
        assert_eq!(e.kind(), crate::error::ErrorKind::BufferTooSmall);
        assert!(OutputRanges::from_rows(&[1.0, 2.0, 3.0]).is_err());
        assert!(OutputRanges::from_rows(&[f32::NAN, 2.0]).is_err());
        assert_eq!(
            OutputPrecision::from_name(" UBinary"),
            Some(OutputPrecision::Ubinary)
        );
    }
}
