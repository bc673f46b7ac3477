//! Calibration: the activation statistics int8 smoothing needs, measured by
//! running the f32 model over calibration texts.

use crate::error::Result;
use crate::kernels::Par;
use crate::model::bert::{BertModel, Calibration, Stage, Workspace};
use crate::model::config::Pooling;

/// Runs `model` (its f32 products give the reference statistics) over the
/// token-id sequences `seqs`, one at a time, and records the largest magnitude
/// of every input channel of every product of every layer.
///
/// # Errors
/// Those of [`BertModel::forward`] (ids out of range).
pub fn calibrate(model: &BertModel, seqs: &[Vec<u32>]) -> Result<Calibration> {
    let mut calib = Calibration::default();
    let mut ws = Workspace::default();
    let mut out = vec![0.0f32; model.hidden_size()];
    for s in seqs {
        let mut record = |layer: usize, stage: Stage, x: &[f32]| {
            let Stage::Input(p) = stage else {
                return;
            };
            if calib.layers.len() <= layer {
                calib.layers.resize_with(layer + 1, Default::default);
            }
            let k = x.len() / s.len().max(1);
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
        let t: &mut dyn FnMut(usize, Stage, &[f32]) = &mut record;
        model.forward_traced(&[s.as_slice()], &mut ws, Par::Serial, Pooling::Mean, false, &mut out, Some(t))?;
    }
    Ok(calib)
}
