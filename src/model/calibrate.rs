//! Calibration: the activation statistics int8 smoothing needs, measured by
//! running the f32 model over calibration texts.
//!
//! The built-in set ([`builtin_texts`], 48 short sentences of varied kinds:
//! questions, reviews, code, numbers, other languages) is what `embd convert
//! --dtype int8` and int8 at open use unless given other texts, so an int8
//! file and an f32 file opened in int8 compute the same vectors. It is not
//! drawn from any evaluation data.

use rayon::prelude::*;

use crate::error::Result;
use crate::kernels::Par;
use crate::model::encoder::{Encoder, Seqs, Stage, Trace, Workspace};
use crate::model::precision::Calibration;
use crate::tokenizer::Tokenizer;

/// The built-in calibration texts, one per line.
pub fn builtin_texts() -> Vec<&'static str> {
    include_str!("calibration.txt")
        .lines()
        .filter(|l| !l.trim().is_empty())
        .collect()
}

/// Tokenizes `texts` (truncated to `max_len`) and [`calibrate`]s `model`.
///
/// # Errors
/// As [`calibrate`].
pub fn calibrate_texts<S: AsRef<str> + Sync>(
    model: &Encoder,
    tok: &Tokenizer,
    max_len: usize,
    texts: &[S],
) -> Result<Calibration> {
    let ids: Vec<Vec<u32>> = texts
        .iter()
        .map(|t| tok.encode(t.as_ref(), Some(max_len)))
        .collect();
    calibrate(model, &ids)
}

/// Runs `model` (its f32 products give the reference statistics) over the
/// token-id sequences `seqs` (in parallel on the current rayon
/// pool; each worker runs its share as one batch), and records the largest
/// magnitude of every input channel of every product of every layer. The maxima do not depend on the order or the
/// thread count.
///
/// # Errors
/// Those of [`Encoder::forward`] (ids out of range).
pub fn calibrate(model: &Encoder, seqs: &[Vec<u32>]) -> Result<Calibration> {
    seqs.par_chunks(seqs.len().div_ceil(rayon::current_num_threads()).max(1))
        .map(|part| calibrate_serial(model, part))
        .try_reduce(Calibration::default, |a, b| Ok(merge(a, b)))
}

/// One forward pass over all of `seqs` (the products then run on all their
/// tokens at once), recording the maxima.
fn calibrate_serial(model: &Encoder, seqs: &[Vec<u32>]) -> Result<Calibration> {
    let mut calib = Calibration::default();
    if seqs.is_empty() {
        return Ok(calib);
    }
    let mut ws = Workspace::default();
    let tokens: usize = seqs.iter().map(Vec::len).sum();
    let mut record = |layer: usize, stage: Stage, x: &[f32]| {
        let Stage::Input(p) = stage else {
            return;
        };
        if calib.layers.len() <= layer {
            calib.layers.resize_with(layer + 1, Default::default);
        }
        let k = x.len() / tokens.max(1);
        let amax = &mut calib.layers[layer][p as usize];
        if amax.len() != k {
            *amax = vec![0.0; k];
        }
        for row in x.chunks_exact(k.max(1)) {
            for (m, v) in amax.iter_mut().zip(row) {
                *m = m.max(v.abs());
            }
        }
    };
    let t: Trace<'_> = &mut record;
    let refs: Vec<&[u32]> = seqs.iter().map(Vec::as_slice).collect();
    model.forward(
        Seqs::untyped(&refs),
        &mut ws,
        Par::Serial,
        Some(t),
        |_, _| (),
    )?;
    Ok(calib)
}

/// Element-wise maximum of two calibrations.
fn merge(mut a: Calibration, b: Calibration) -> Calibration {
    if a.layers.len() < b.layers.len() {
        a.layers.resize_with(b.layers.len(), Default::default);
    }
    for (la, lb) in a.layers.iter_mut().zip(b.layers) {
        for (pa, pb) in la.iter_mut().zip(lb) {
            if pa.len() < pb.len() {
                pa.resize(pb.len(), 0.0);
            }
            for (x, y) in pa.iter_mut().zip(pb) {
                *x = x.max(y);
            }
        }
    }
    a
}
