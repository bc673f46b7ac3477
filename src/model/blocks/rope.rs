//! Rotary position embeddings in HF's rotate-half layout
//! (`apply_rotary_pos_emb`): within each head of width `d`, value `c < d/2`
//! and value `c + d/2` are rotated together by the angle `p · θ^(-2c/d)` of
//! the token's position `p`.
//!
//! The angles are computed as transformers computes them in float32:
//! `inv_freq = 1 / θ^(2c/d)` rounded to f32, then `p · inv_freq` rounded to
//! f32 (the angle's own rounding matters at long positions), and its cosine
//! and sine (here in f64, rounded once). The rotation is `q·cos +
//! rotate_half(q)·sin` with each product rounded, as torch's element-wise
//! operations do.

/// The cosine and sine tables of one `θ` for positions `0..positions`.
pub struct Rope {
    half: usize,
    /// `[positions x d/2]`.
    cos: Vec<f32>,
    sin: Vec<f32>,
}

impl Rope {
    /// The tables of base `theta` for heads of width `d` (even) and
    /// positions `0..positions`.
    pub fn new(theta: f64, d: usize, positions: usize) -> Rope {
        Rope::scaled(theta, 1.0, d, positions)
    }

    /// The tables of base `theta` with every frequency divided by `factor`
    /// (transformers' `rope_type` `linear`: `inv_freq / factor` in float32;
    /// `factor` 1 is [`Rope::new`]).
    pub fn scaled(theta: f64, factor: f64, d: usize, positions: usize) -> Rope {
        let half = d / 2;
        let inv: Vec<f32> = (0..half)
            .map(|c| {
                let e = (2 * c) as f32 / d as f32;
                let f = (1.0 / theta.powf(f64::from(e))) as f32;
                if factor == 1.0 {
                    f
                } else {
                    f / factor as f32
                }
            })
            .collect();
        let mut cos = Vec::with_capacity(positions * half);
        let mut sin = Vec::with_capacity(positions * half);
        for p in 0..positions {
            for &f in &inv {
                let a = f64::from(p as f32 * f);
                cos.push(a.cos() as f32);
                sin.push(a.sin() as f32);
            }
        }
        Rope { half, cos, sin }
    }

    /// Positions the tables cover.
    pub fn positions(&self) -> usize {
        self.cos.len() / self.half.max(1)
    }

    /// Rotates `heads` heads of width `2·half` starting at column `col` of
    /// a row at position `pos`.
    #[inline]
    pub fn rotate(&self, row: &mut [f32], col: usize, heads: usize, pos: usize) {
        let h2 = self.half;
        let (c, s) = (
            &self.cos[pos * h2..(pos + 1) * h2],
            &self.sin[pos * h2..(pos + 1) * h2],
        );
        for hd in 0..heads {
            let x = &mut row[col + hd * 2 * h2..col + (hd + 1) * 2 * h2];
            let (x1, x2) = x.split_at_mut(h2);
            for i in 0..h2 {
                let (a, b) = (x1[i], x2[i]);
                x1[i] = a * c[i] + (-b) * s[i];
                x2[i] = b * c[i] + a * s[i];
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rotation_preserves_norm_and_is_identity_at_zero() {
        let r = Rope::new(10_000.0, 8, 100);
        let mut row: Vec<f32> = (0..16).map(|i| i as f32 * 0.5 - 3.0).collect();
        let orig = row.clone();
        r.rotate(&mut row, 0, 2, 0);
        assert_eq!(row, orig);
        r.rotate(&mut row, 0, 2, 57);
        let n0: f32 = orig.iter().map(|v| v * v).sum();
        let n1: f32 = row.iter().map(|v| v * v).sum();
        assert!((n0 - n1).abs() < 1e-3);
        // Pair (0, 4) of the first head rotates by 57 rad.
        let (a, b) = (orig[0], orig[4]);
        assert!((row[0] - (a * 57f32.cos() - b * 57f32.sin())).abs() < 1e-4);
    }
}
