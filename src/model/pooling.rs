//! Sentence pooling of token vectors: mean, `[CLS]`, max; then optional L2
//! normalisation.

use crate::model::config::Pooling;

/// Pools the `[rows x width]` hidden states of one sequence (every token has
/// attention mask 1) into `out[..width]`, then L2-normalises if asked.
/// Mean sums in f64 (column blocks on the stack, no allocation).
pub fn pool(hidden: &[f32], width: usize, pooling: Pooling, normalize: bool, out: &mut [f32]) {
    let out = &mut out[..width];
    let rows = hidden.len().checked_div(width).unwrap_or(0);
    if rows == 0 {
        out.fill(0.0);
        return;
    }
    match pooling {
        Pooling::Cls => out.copy_from_slice(&hidden[..width]),
        Pooling::Max => {
            out.copy_from_slice(&hidden[..width]);
            for row in hidden.chunks_exact(width).skip(1) {
                for (o, &v) in out.iter_mut().zip(row) {
                    *o = o.max(v);
                }
            }
        }
        Pooling::Mean => {
            const BLOCK: usize = 64;
            let inv = 1.0 / rows as f64;
            let mut j0 = 0;
            while j0 < width {
                let nb = BLOCK.min(width - j0);
                let mut acc = [0.0f64; BLOCK];
                for row in hidden.chunks_exact(width) {
                    for (a, &v) in acc.iter_mut().zip(&row[j0..j0 + nb]) {
                        *a += f64::from(v);
                    }
                }
                for (o, a) in out[j0..j0 + nb].iter_mut().zip(&acc) {
                    *o = (a * inv) as f32;
                }
                j0 += nb;
            }
        }
    }
    if normalize {
        crate::vector::l2_normalize(out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::reference;

    #[test]
    fn pooling_matches_reference() {
        for width in [1usize, 3, 64, 65, 130] {
            for rows in [1usize, 2, 7] {
                let h: Vec<f32> = (0..rows * width)
                    .map(|i| ((i * 7919 % 23) as f32 - 11.0) * 0.13)
                    .collect();
                for p in [Pooling::Mean, Pooling::Cls, Pooling::Max] {
                    for norm in [false, true] {
                        let mut out = vec![9.0f32; width + 1];
                        pool(&h, width, p, norm, &mut out);
                        let want = reference::pool(&h, width, p, norm);
                        for (a, b) in out.iter().zip(&want) {
                            assert!((a - b).abs() < 1e-6, "{p} {norm} {width} {rows}");
                        }
                        assert_eq!(out[width], 9.0);
                    }
                }
            }
        }
    }
}
