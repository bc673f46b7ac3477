//! `Linear` layers: one weight matrix (or several side by side, such as Q, K
//! and V) in the representation of one [`Precision`], with its packing and its
//! kernel choice. The model calls [`Linear::forward`] and never sees GEMM
//! internals.
//!
//! | precision | weights | product |
//! |---|---|---|
//! | f32 | the file's f32 tensors in place; packed into the SGEMM panel layout by the background packer ([`pack_f32_layer`]), or read packed from the file | [`sgemm`] |
//! | int8 | [`PackedI8`]: int8 per output channel + scales + column sums, built at open (from the file's int8 tensors, or quantized from f32) | [`qgemm`] on activations quantized per row |
//! | bf16 | [`PackedBf16`]: rounded pairs in the bf16 kernels' panels, built at open | [`bgemm`] |
//!
//! A file converted with `embd convert --dtype bf16|int8` (or `--dtype f32
//! --packed`) stores the layers packed ([`crate::model::packed`]); they are
//! then read in place from the mapped file where the kernels in use read that
//! layout.

use std::sync::{Arc, OnceLock};

use crate::error::{Error, Result};
use crate::formats::ModelFile;
use crate::formats::TensorEntry;
use crate::kernels::bgemm::{self, PackedBf16};
use crate::kernels::gemm::{self, Epilogue};
use crate::kernels::qgemm::{self, PackedI8, QuantRows};
use crate::kernels::sgemm::{self, PackedB};
use crate::kernels::Par;
use crate::model::packed;
use crate::model::param::{int8_smooth, load_int8, load_param, Param};
use crate::model::precision::Precision;

/// Per-call scratch memory of the reduced-precision products (the quantized
/// activations); kept in the model's workspace and reused.
#[derive(Default)]
pub struct LinearScratch {
    quant: QuantRows,
}

impl LinearScratch {
    /// Bytes held.
    pub fn bytes(&self) -> usize {
        self.quant.bytes()
    }
}

enum Repr {
    /// f32 segments as read from the file, and their packed copy once made
    /// (no segments when the file stores the layer packed).
    F32 {
        segs: Vec<Param>,
        packed: OnceLock<PackedB>,
    },
    /// int8 weights packed for the int8 kernels, and the per-input-channel
    /// factors applied to activations before quantization (smoothing).
    Int8(PackedI8, Option<Vec<f32>>),
    /// bf16 weights packed for the bf16 kernels.
    Bf16(PackedBf16),
}

/// A dense layer `y = x · Wᵀ` with `W` = the segments' `[n_s x k]` weights
/// stacked along the output dimension (`n = Σ n_s`; Q, K and V differ in
/// width under grouped-query attention). Biases and activations are the
/// caller's epilogue.
pub struct Linear {
    n: usize,
    k: usize,
    /// Output features of each segment.
    widths: Vec<usize>,
    /// The segments' weight tensors (empty for weights computed at load).
    names: Vec<String>,
    repr: Repr,
}

impl Linear {
    /// Loads the weights named `names` (`[widths[s] x k]` each, the HF
    /// `Linear` layout) in the representation of `precision`. `int8_file` says the
    /// file's metadata allows `int8_per_row` tensors. Weights converted from
    /// mapped f32 release their file pages from resident memory.
    ///
    /// `act_absmax` (int8 only): the largest magnitude of each input channel
    /// over calibration data. With it the layer is smoothed (SmoothQuant,
    /// strength [`SMOOTH_ALPHA`]): activations are multiplied per channel by
    /// `a_c = max|W_c|^(1-α) / act_absmax_c^α` before quantization and the
    /// weights' columns by `1 / a_c`, which moves the activations' outlier
    /// channels into the weights, where per-channel scales absorb them.
    ///
    /// # Errors
    /// A missing or misshapen tensor, named.
    pub fn load(
        file: &Arc<ModelFile>,
        names: &[String],
        widths: &[usize],
        k: usize,
        precision: Precision,
        int8_file: bool,
        act_absmax: Option<&[f32]>,
    ) -> Result<Linear> {
        let n = widths.iter().sum();
        let linear = |repr| Linear {
            n,
            k,
            widths: widths.to_vec(),
            names: names.to_vec(),
            repr,
        };
        // Weights stored in the layout of the kernels in use: read in place.
        if let Some(stored) = packed::find(file, names, widths, k)? {
            let in_place = match precision {
                Precision::F32 => {
                    packed::f32_in_place(file, &stored, sgemm::isa(), n, k)?.map(|p| Repr::F32 {
                        segs: Vec::new(),
                        packed: OnceLock::from(p),
                    })
                }
                Precision::Bf16 => {
                    packed::bf16_in_place(file, &stored, bgemm::isa(), n, k)?.map(Repr::Bf16)
                }
                Precision::Int8 if act_absmax.is_none() || has_smoothing(file, names) => {
                    packed::int8_in_place(file, &stored, qgemm::isa(), n, k)?
                        .map(|p| Ok::<_, Error>(Repr::Int8(p, smooth_of(file, names, k)?)))
                        .transpose()?
                }
                Precision::Int8 => None,
            };
            if let Some(repr) = in_place {
                return Ok(linear(repr));
            }
        }
        let repr = match precision {
            Precision::Int8 => {
                let w = int8_weights(file, names, widths, k, int8_file, act_absmax)?;
                let packed = PackedI8::from_quantized(qgemm::isa(), &w.q, &w.scales, n, k);
                Repr::Int8(packed, w.smooth)
            }
            Precision::Bf16 => {
                let w = stacked_f32(file, names, widths, k, int8_file)?;
                Repr::Bf16(PackedBf16::from_linear(bgemm::isa(), &w, n, k))
            }
            Precision::F32 if packed::find(file, names, widths, k)?.is_some() => {
                let w = stacked_f32(file, names, widths, k, int8_file)?;
                let mut rows = w.chunks_exact(k.max(1));
                Repr::F32 {
                    segs: widths
                        .iter()
                        .map(|&wd| {
                            Param::Owned(rows.by_ref().take(wd).flatten().copied().collect())
                        })
                        .collect(),
                    packed: OnceLock::new(),
                }
            }
            Precision::F32 => Repr::F32 {
                segs: names
                    .iter()
                    .zip(widths)
                    .map(|(name, &w)| load_param(file, name, &[w, k], int8_file))
                    .collect::<Result<_>>()?,
                packed: OnceLock::new(),
            },
        };
        Ok(linear(repr))
    }

    /// The tensors that store this layer packed for the kernels it was
    /// loaded for ([`crate::model::packed`]), with the names of the tensors
    /// they replace; `None` for an f32 layer not packed (yet) or one computed
    /// at load.
    pub(crate) fn packed_tensors(&self) -> Option<(Vec<TensorEntry>, Vec<String>)> {
        if self.names.is_empty() {
            return None;
        }
        let (tensors, replaced) = match &self.repr {
            Repr::F32 { packed, .. } => (
                packed::f32_tensors(&self.names, &self.widths, packed.get()?),
                self.names.clone(),
            ),
            Repr::Bf16(p) => (
                packed::bf16_tensors(&self.names, &self.widths, p),
                self.names.clone(),
            ),
            Repr::Int8(p, _) => (
                packed::int8_tensors(&self.names, &self.widths, p),
                self.names
                    .iter()
                    .flat_map(|n| [n.clone(), format!("{n}_scale")])
                    .collect(),
            ),
        };
        Some((tensors, replaced))
    }

    /// The layout name of a packed layer ([`PackedBf16::layout`],
    /// [`PackedI8::layout`], [`PackedB::layout`]); `None` for an f32 layer
    /// not packed.
    pub(crate) fn packed_layout(&self) -> Option<String> {
        match &self.repr {
            Repr::F32 { packed, .. } => packed.get().map(|p| PackedB::layout(p.isa())),
            Repr::Bf16(p) => Some(PackedBf16::layout(p.isa())),
            Repr::Int8(p, _) => Some(PackedI8::layout(p.isa())),
        }
    }

    /// A layer over weights computed at load (`w` = `[n x k]`, the HF
    /// layout), in the representation of `precision`; f32 weights are packed
    /// for the f32 kernels at once.
    pub fn from_f32(w: Vec<f32>, n: usize, k: usize, precision: Precision) -> Linear {
        let repr = match precision {
            Precision::Int8 => {
                let (q, scales) = qgemm::quantize_weights(&w, n, k);
                Repr::Int8(
                    PackedI8::from_quantized(qgemm::isa(), &q, &scales, n, k),
                    None,
                )
            }
            Precision::Bf16 => Repr::Bf16(PackedBf16::from_linear(bgemm::isa(), &w, n, k)),
            Precision::F32 => Repr::F32 {
                segs: vec![Param::Owned(w)],
                packed: OnceLock::new(),
            },
        };
        let mut l = Linear {
            n,
            k,
            widths: vec![n],
            names: Vec::new(),
            repr,
        };
        pack_f32_layer(&[&l]);
        if let Repr::F32 { segs, packed } = &mut l.repr {
            if packed.get().is_some() {
                // Products read the packed copy only: drop the original.
                segs.clear();
            }
        }
        l
    }

    /// Output features.
    pub fn n(&self) -> usize {
        self.n
    }

    /// Input features.
    pub fn k(&self) -> usize {
        self.k
    }

    /// The arithmetic of this layer.
    pub fn precision(&self) -> Precision {
        match self.repr {
            Repr::F32 { .. } => Precision::F32,
            Repr::Int8(..) => Precision::Int8,
            Repr::Bf16(_) => Precision::Bf16,
        }
    }

    /// Whether the weights are in the form products read directly (packed f32
    /// panels, or a reduced-precision layer, packed at load).
    pub fn is_packed(&self) -> bool {
        match &self.repr {
            Repr::F32 { packed, .. } => packed.get().is_some(),
            Repr::Int8(..) | Repr::Bf16(_) => true,
        }
    }

    /// Parameter tensors read in place from the file, and converted ones
    /// (a reduced-precision layer counts as converted).
    pub fn param_counts(&self) -> (usize, usize) {
        match &self.repr {
            Repr::F32 { packed, .. } if packed.get().is_some_and(PackedB::is_shared) => (1, 0),
            Repr::F32 { segs, .. } => {
                let mapped = segs.iter().filter(|p| p.is_mapped()).count();
                (mapped, segs.len() - mapped)
            }
            Repr::Int8(p, _) if p.is_shared() => (1, 0),
            Repr::Bf16(p) if p.is_shared() => (1, 0),
            Repr::Int8(..) | Repr::Bf16(_) => (0, self.widths.len()),
        }
    }

    /// Bytes of weights this layer holds outside the file (packed copies,
    /// converted values).
    pub fn owned_bytes(&self) -> usize {
        match &self.repr {
            Repr::F32 { segs, packed } => {
                packed
                    .get()
                    .filter(|p| !p.is_shared())
                    .map_or(0, PackedB::bytes)
                    + segs
                        .iter()
                        .filter(|p| !p.is_mapped())
                        .map(|p| 4 * p.as_slice().len())
                        .sum::<usize>()
            }
            Repr::Int8(p, f) if p.is_shared() => 8 * p.n() + f.as_ref().map_or(0, |f| 4 * f.len()),
            Repr::Int8(p, f) => p.bytes() + f.as_ref().map_or(0, |f| 4 * f.len()),
            Repr::Bf16(p) if p.is_shared() => 2 * p.panel_exps().len(),
            Repr::Bf16(p) => p.bytes(),
        }
    }

    /// `out[m x n] = x[m x k] · Wᵀ (+ out when accumulate)`, then `epi` on each
    /// row (`out` rows have stride `ldo >= n`). Each output row depends only
    /// on its input row (batch invariance), and `par` never changes a bit.
    #[allow(clippy::too_many_arguments)]
    pub fn forward(
        &self,
        x: &[f32],
        m: usize,
        out: &mut [f32],
        ldo: usize,
        accumulate: bool,
        epi: Epilogue<'_>,
        par: Par,
        scratch: &mut LinearScratch,
    ) {
        self.forward_cols(x, m, self.n, out, ldo, accumulate, epi, par, scratch);
    }

    /// [`Linear::forward`] of the first `cols` outputs only (`cols <= n`,
    /// `ldo >= cols`; `epi` over those columns): the same values as the
    /// first `cols` columns of the whole product, at the cost of those
    /// columns (Q and K of a stacked Q | K | V without V).
    ///
    /// # Panics
    /// When `cols` exceeds the outputs.
    #[allow(clippy::too_many_arguments)]
    pub fn forward_cols(
        &self,
        x: &[f32],
        m: usize,
        cols: usize,
        out: &mut [f32],
        ldo: usize,
        accumulate: bool,
        epi: Epilogue<'_>,
        par: Par,
        scratch: &mut LinearScratch,
    ) {
        let (n, k) = (cols, self.k);
        assert!(n <= self.n, "linear: {n} outputs of {}", self.n);
        match &self.repr {
            Repr::Int8(w, smooth) => {
                scratch
                    .quant
                    .quantize(w.isa(), x, m, k, k, smooth.as_deref(), par);
                let epi = gemm::epilogue_fn(epi);
                qgemm::product_cols(&scratch.quant, w, n, out, ldo, accumulate, &epi, par);
            }
            Repr::Bf16(w) => {
                let epi = gemm::epilogue_fn(epi);
                bgemm::product_cols(m, n, x, k, w, out, ldo, accumulate, &epi, par);
            }
            Repr::F32 { segs, packed } => {
                if let Some(p) = packed.get() {
                    let epi = gemm::epilogue_fn(epi);
                    sgemm::product(p.isa(), m, n, k, x, k, p, out, ldo, accumulate, &epi, par);
                    return;
                }
                // The segments' rows that hold the first `n` outputs.
                let mut left = n;
                let ws: Vec<&[f32]> = segs
                    .iter()
                    .map(|s| {
                        let w = s.as_slice();
                        let rows = (w.len() / k.max(1)).min(left);
                        left -= rows;
                        &w[..rows * k]
                    })
                    .filter(|w| !w.is_empty())
                    .collect();
                if let [w] = ws[..] {
                    gemm::linear(x, m, k, w, n, out, ldo, accumulate, epi, par);
                } else {
                    gemm::linear_stacked(x, m, k, &ws, out, ldo, accumulate, epi, par);
                }
            }
        }
    }
}

/// The int8 form of a (stacked) `Linear` weight `[n x k]`:
/// `W ≈ (q[j][c] · scales[j]) · smooth[c]`.
pub struct Int8Weights {
    /// `[n x k]` values in `[-127, 127]`.
    pub q: Vec<i8>,
    /// One scale per output channel.
    pub scales: Vec<f32>,
    /// Per-input-channel factors the activations are multiplied by before
    /// quantization (SmoothQuant), when smoothed.
    pub smooth: Option<Vec<f32>>,
}

/// The int8 weights of the segments `names` (`[widths[s] x k]` each): as stored
/// in an `int8_per_row` file when every segment is stored so (and either the
/// file smoothed them or no `act_absmax` is given); otherwise quantized here
/// from the float values (int8 ones dequantized first), smoothed with
/// `act_absmax` when given (see [`Linear::load`]). Mapped f32 pages read
/// here are released from resident memory.
///
/// # Errors
/// A missing or misshapen tensor; stored segments smoothed differently (they
/// share one input, so they must share its factors).
pub fn int8_weights(
    file: &Arc<ModelFile>,
    names: &[String],
    widths: &[usize],
    k: usize,
    int8_file: bool,
    act_absmax: Option<&[f32]>,
) -> Result<Int8Weights> {
    let n = widths.iter().sum();
    let packed = packed::find(file, names, widths, k)?;
    if let Some(stored) = &packed {
        let smooth = smooth_of(file, names, k)?;
        if smooth.is_some() || act_absmax.is_none() {
            if let Some((q, scales)) = packed::unpack_int8(file, stored, n, k)? {
                packed::release_values(file, stored);
                return Ok(Int8Weights { q, scales, smooth });
            }
        }
    }
    let stored: Vec<_> = if packed.is_some() {
        // Packed bf16 (or int8 to smooth here): quantized from the values.
        vec![None]
    } else {
        names
            .iter()
            .zip(widths)
            .map(|(name, &w)| load_int8(file, name, [w, k], int8_file))
            .collect::<Result<_>>()?
    };
    let smoothed = stored.iter().flatten().any(|s| s.smooth.is_some());
    if stored.iter().all(Option::is_some) && (smoothed || act_absmax.is_none()) {
        let mut w = Int8Weights {
            q: Vec::with_capacity(n * k),
            scales: Vec::with_capacity(n),
            smooth: None,
        };
        for (i, s) in stored.into_iter().flatten().enumerate() {
            if i > 0 && s.smooth != w.smooth {
                return Err(Error::model(format!(
                    "tensors '{}' and '{}' share an input but have different smoothing factors",
                    names[0], names[i]
                )));
            }
            w.q.extend_from_slice(&s.q);
            w.scales.extend_from_slice(&s.scales);
            w.smooth = s.smooth;
        }
        return Ok(w);
    }
    let mut w = stacked_f32(file, names, widths, k, int8_file)?;
    let smooth = act_absmax.map(|amax| {
        let a = smoothing_factors(&w, n, k, amax);
        for row in w.chunks_exact_mut(k.max(1)) {
            for (v, f) in row.iter_mut().zip(&a) {
                *v /= f;
            }
        }
        a
    });
    let (q, scales) = qgemm::quantize_weights(&w, n, k);
    Ok(Int8Weights { q, scales, smooth })
}

/// The weights `names` (`[widths[s] x k]` each) as one owned `[n x k]` f32
/// matrix, stacked along the output dimension (int8 tensors dequantized);
/// mapped file pages read here are released from resident memory.
fn stacked_f32(
    file: &Arc<ModelFile>,
    names: &[String],
    widths: &[usize],
    k: usize,
    int8_file: bool,
) -> Result<Vec<f32>> {
    let n: usize = widths.iter().sum();
    if let Some(stored) = packed::find(file, names, widths, k)? {
        let smooth = smooth_of(file, names, k)?;
        let w = packed::unpack_f32(file, &stored, n, k, smooth.as_deref())?;
        packed::release_values(file, &stored);
        return Ok(w);
    }
    let mut w = Vec::with_capacity(n * k);
    for (name, &n) in names.iter().zip(widths) {
        let p = load_param(file, name, &[n, k], int8_file)?;
        w.extend_from_slice(p.as_slice());
        p.release_pages();
    }
    Ok(w)
}

/// The smoothing factors stored for the int8 layer with segments `names`
/// (they share one input, hence one set: the first segment's).
fn smooth_of(file: &ModelFile, names: &[String], k: usize) -> Result<Option<Vec<f32>>> {
    match names.first() {
        Some(first) => int8_smooth(file, first, k),
        None => Ok(None),
    }
}

/// Whether the file stores smoothing factors for the layer.
fn has_smoothing(file: &ModelFile, names: &[String]) -> bool {
    names
        .first()
        .is_some_and(|n| file.tensor(&format!("{n}_smooth")).is_some())
}

/// SmoothQuant's migration strength α (0 = none, 1 = all of the activations'
/// range moved into the weights).
pub const SMOOTH_ALPHA: f32 = 0.5;

/// The activation factors `a_c = max_j|W[j][c]|^(1-α) / act_absmax_c^α` of a
/// `[n x k]` weight (1 where either maximum is 0).
fn smoothing_factors(w: &[f32], n: usize, k: usize, act_absmax: &[f32]) -> Vec<f32> {
    let mut wmax = vec![0f32; k];
    for row in w.chunks_exact(k.max(1)).take(n) {
        for (m, v) in wmax.iter_mut().zip(row) {
            *m = m.max(v.abs());
        }
    }
    wmax.iter()
        .zip(act_absmax)
        .map(|(&wm, &am)| {
            if wm > 0.0 && am > 0.0 && am.is_finite() {
                wm.powf(1.0 - SMOOTH_ALPHA) / am.powf(SMOOTH_ALPHA)
            } else {
                1.0
            }
        })
        .collect()
}

/// Packs the f32 layers among `linears` (the matrices of one encoder layer)
/// into one shared buffer in the SGEMM panel layout, then releases the mapped
/// pages of their originals from resident memory. A no-op for layers packed
/// already, and for layers of other precisions (packed at load).
pub fn pack_f32_layer(linears: &[&Linear]) {
    let isa = sgemm::isa();
    let todo: Vec<&Linear> = linears
        .iter()
        .copied()
        .filter(|l| {
            matches!(&l.repr, Repr::F32 { packed, .. } if packed.get().is_none())
                && (l.widths.len() == 1
                    || l.widths
                        .iter()
                        .all(|w| w.is_multiple_of(sgemm::SEGMENT_ALIGN)))
        })
        .collect();
    if todo.is_empty() {
        return;
    }
    let views: Vec<Vec<&[f32]>> = todo
        .iter()
        .map(|l| match &l.repr {
            Repr::F32 { segs, .. } => segs.iter().map(Param::as_slice).collect(),
            Repr::Int8(..) | Repr::Bf16(_) => Vec::new(),
        })
        .collect();
    let sources: Vec<Box<dyn sgemm::BSource + '_>> = todo
        .iter()
        .zip(&views)
        .map(|(l, ws)| -> Box<dyn sgemm::BSource + '_> {
            if let [w] = ws[..] {
                Box::new(sgemm::Transposed { w, ldw: l.k })
            } else {
                Box::new(sgemm::Stacked { ws, k: l.k })
            }
        })
        .collect();
    let items: Vec<(usize, usize, &dyn sgemm::BSource)> = todo
        .iter()
        .zip(&sources)
        .map(|(l, s)| (l.k, l.n, &**s as &dyn sgemm::BSource))
        .collect();
    for (l, p) in todo.iter().zip(PackedB::pack_all(isa, &items)) {
        if let Repr::F32 { segs, packed } = &l.repr {
            let _ = packed.set(p);
            // From now on products read the packed copy only.
            segs.iter().for_each(Param::release_pages);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::reference::rand_vec;

    /// The first `cols` outputs alone are the first `cols` columns of the
    /// whole product, bit for bit, in every representation: f32 packed, f32
    /// stacked segments read in place, bf16, int8; serially and split.
    #[test]
    fn forward_cols_gives_the_first_columns_of_forward() {
        let (m, k, seg) = (7, 40, 48);
        let n = 3 * seg;
        let w = rand_vec(n * k, 1);
        let x = rand_vec(m * k, 2);
        let bias = rand_vec(n, 3);
        let stacked = Linear {
            n,
            k,
            widths: vec![seg; 3],
            names: Vec::new(),
            repr: Repr::F32 {
                segs: w
                    .chunks(seg * k)
                    .map(|c| Param::Owned(c.to_vec()))
                    .collect(),
                packed: OnceLock::new(),
            },
        };
        let layers = [
            stacked,
            Linear::from_f32(w.clone(), n, k, Precision::F32),
            Linear::from_f32(w.clone(), n, k, Precision::Bf16),
            Linear::from_f32(w.clone(), n, k, Precision::Int8),
        ];
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(2)
            .build()
            .unwrap();
        let mut scratch = LinearScratch::default();
        for (li, l) in layers.iter().enumerate() {
            let mut full = vec![0.0f32; m * n];
            let epi = Epilogue::Bias(&bias);
            l.forward(&x, m, &mut full, n, false, epi, Par::Serial, &mut scratch);
            for cols in [1, 5, seg, seg + 2, 2 * seg, n] {
                for par in [Par::Serial, Par::Threads(2)] {
                    let ldo = cols + 3;
                    let mut part = vec![f32::NAN; m * ldo];
                    pool.install(|| {
                        l.forward_cols(&x, m, cols, &mut part, ldo, false, epi, par, &mut scratch)
                    });
                    for i in 0..m {
                        let (a, b) = (&part[i * ldo..i * ldo + cols], &full[i * n..i * n + cols]);
                        assert!(
                            a.iter().zip(b).all(|(a, b)| a.to_bits() == b.to_bits()),
                            "layer {li} cols {cols} {par:?} row {i}"
                        );
                        assert!(part[i * ldo + cols..(i + 1) * ldo]
                            .iter()
                            .all(|v| v.is_nan()));
                    }
                }
            }
        }
    }
}
