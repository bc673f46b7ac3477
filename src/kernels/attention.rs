//! One attention head over one sequence: `softmax(scale · Q Kᵀ) · V`.
//!
//! Sentence-embedding inputs are short (a few dozen tokens) and a head is
//! narrow (32 or 64 values), so the two products are tiny: a 25-token head
//! of all-MiniLM-L6-v2 is 40 kFLOP per product. Run as general GEMMs they
//! spend most of their time on packing, edge tiles and per-call set-up (about
//! 1.5 µs per product measured, 27 GFLOP/s). This kernel does the whole head
//! in one pass over small buffers: `Kᵀ` transposed once into a scratch
//! buffer padded to 16 keys, the scores row by row (lanes over keys), the
//! softmax, and the context rows (lanes over the head's values, `V` read in
//! place).
//!
//! Every output is one sequential FMA chain, `acc = a·b + acc` over the
//! reduction index in order from `acc = 0`: the scores over the head's
//! values, the context over the keys. The vector variants
//! (`arch/x86_64/ops.rs`, lanes = independent chains) therefore give the same
//! bits as the scalar `attend_scalar` with the same softmax, which the tests
//! check. Rows never interact, so a vector depends on nothing but its own
//! sequence.

/// Where one head's inputs are: `len` rows of the fused projection output
/// with row stride `ld`, the head's queries at column `q`, keys at `k` and
/// values at `v` (each `d` wide).
#[derive(Debug, Clone, Copy)]
pub struct HeadInput<'a> {
    /// `len` rows of stride `ld` (the last row may be shorter).
    pub qkv: &'a [f32],
    /// Row stride of `qkv`.
    pub ld: usize,
    /// Tokens of the sequence.
    pub len: usize,
    /// Width of the head.
    pub d: usize,
    /// Columns of the head's queries, keys and values.
    pub q: usize,
    /// See `q`.
    pub k: usize,
    /// See `q`.
    pub v: usize,
    /// An additive bias of the scores by relative position (MPNet's
    /// relative position bias): the head's values for every relative
    /// position and the index of relative position 0, so that
    /// `B[i][j] = bias[centre + j - i]`; added after the scaling, as
    /// `scores = scale · q·k + B`.
    pub bias: Option<(&'a [f32], usize)>,
    /// Which keys each query sees (every key: [`Band::FULL`]).
    pub band: Band,
}

/// The keys a query sees: key `j` is visible from query `i` when `i - left
/// <= j <= i + right` and `j < keys` (HF's masks: full, causal, and the
/// symmetric sliding window of ModernBERT and bidirectional Gemma; `keys`:
/// the keys an attention mask leaves, when the tokens after them are queries
/// only, as ColBERT's query expansion). Invisible keys get probability
/// exactly 0.
///
/// # The arithmetic of a masked row
///
/// A masked row is defined as the full row of `len` scores with the
/// invisible ones set to `-inf`, through the same softmax and the same
/// context chains. Since `exp(-inf)` is exactly 0 and adding 0 changes
/// nothing, only the visible keys count, and in the softmax's lanes only
/// their positions do. So the kernels compute each row over its *span*
/// (`HeadInput::span`): the visible keys widened to whole 16-key vectors
/// from key 0 (and, where the span reaches the last key, to at least 16
/// keys), where every visible key falls into the same softmax lane as in the
/// full row. The cost is O(`len` · window) instead of O(`len`²), and the bits
/// are those of the full masked row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Band {
    /// Keys visible before the query.
    pub left: usize,
    /// Keys visible after the query.
    pub right: usize,
    /// Only the first `keys` tokens are keys (`usize::MAX`: every token).
    pub keys: usize,
}

impl Band {
    /// Every key (an encoder's bidirectional attention).
    pub const FULL: Band = Band {
        left: usize::MAX,
        right: usize::MAX,
        keys: usize::MAX,
    };
    /// The query and the keys before it (a decoder's causal attention).
    pub const CAUSAL: Band = Band {
        left: usize::MAX,
        right: 0,
        keys: usize::MAX,
    };

    /// The keys within `w` positions on either side (`|i - j| <= w`).
    pub const fn window(w: usize) -> Band {
        Band {
            left: w,
            right: w,
            keys: usize::MAX,
        }
    }

    /// This band with only the first `keys` tokens as keys.
    pub const fn with_keys(self, keys: usize) -> Band {
        Band { keys, ..self }
    }

    /// The visible keys `lo..hi` of query `i` in a sequence of `len`.
    #[inline]
    pub fn visible(self, i: usize, len: usize) -> (usize, usize) {
        let lo = i.saturating_sub(self.left);
        let hi = i
            .saturating_add(self.right)
            .saturating_add(1)
            .min(len)
            .min(self.keys);
        (lo.min(hi), hi)
    }
}

impl HeadInput<'_> {
    /// `len` rounded up to whole 16-lane vectors: the row stride of the
    /// scores and of `Kᵀ` in the scratch buffer.
    fn padded(&self) -> usize {
        self.len.next_multiple_of(16)
    }

    /// The keys `a..b` the kernels compute query `i`'s row over (see
    /// [`Band`]): the visible keys widened to 16-key vectors counted from key
    /// 0, and to at least 16 keys where the span ends at the last key, so
    /// that every visible key takes its softmax lane of the full row. Both
    /// ends are non-decreasing in `i`.
    #[inline]
    pub(crate) fn span(&self, i: usize) -> (usize, usize) {
        let (lo, hi) = self.band.visible(i, self.len);
        if lo == 0 && hi == self.len {
            return (0, self.len);
        }
        let b = hi.next_multiple_of(16).min(self.len);
        let mut a = lo / 16 * 16;
        if b == self.len && self.len - a < 16 {
            a = self.len.saturating_sub(16) / 16 * 16;
        }
        (a, b)
    }

    /// Sets the scores of query `i` outside its visible keys, within its
    /// span `a..b`, to `-inf` (`row` holds the span's scores).
    #[inline]
    pub(crate) fn mask(&self, i: usize, a: usize, row: &mut [f32]) {
        let (lo, hi) = self.band.visible(i, self.len);
        let b = a + row.len();
        row[..lo.max(a).min(b) - a].fill(f32::NEG_INFINITY);
        row[hi.max(a).min(b) - a..].fill(f32::NEG_INFINITY);
    }

    /// Checks that every row read exists.
    fn check(&self) {
        let last = self.q.max(self.k).max(self.v) + self.d;
        assert!(
            self.len == 0 || (self.len - 1) * self.ld + last <= self.qkv.len(),
            "attention: qkv too short"
        );
        if let Some((b, centre)) = self.bias {
            assert!(
                self.len == 0 || (centre + 1 >= self.len && centre + self.len <= b.len()),
                "attention: relative bias too short"
            );
        }
    }

    /// Adds the bias of query row `i` to its scores over keys `a..` (`row`
    /// = the span's scores), with the given element-wise add, and masks the
    /// keys it does not see.
    #[inline]
    pub(crate) fn add_bias(
        &self,
        i: usize,
        a: usize,
        row: &mut [f32],
        add: impl Fn(&mut [f32], &[f32]),
    ) {
        if let Some((b, centre)) = self.bias {
            add(row, &b[centre + a - i..centre + a - i + row.len()]);
        }
        if self.band != Band::FULL {
            self.mask(i, a, row);
        }
    }
}

/// Most query rows a kernel variant scores at once (the scratch holds this
/// many rows of scores).
pub(crate) const MAX_BLOCK_ROWS: usize = 16;

/// Floats of scratch space [`attend`] needs for a head of `len` tokens and
/// width `d`: `Kᵀ` and one block of score rows, O(`len` · (`d` + 16)).
pub fn scratch_len(len: usize, d: usize) -> usize {
    (MAX_BLOCK_ROWS + d) * len.next_multiple_of(16)
}

/// `dst[i*ldd .. i*ldd + d] = softmax(scale · q_i Kᵀ) · V` for every token
/// `i` of the head, with the fastest variant this CPU runs (see the module
/// documentation; all give the same bits).
///
/// # Panics
/// When `scratch` holds fewer than [`scratch_len`] floats, or `qkv` or `dst`
/// is too short for the rows.
pub fn attend(x: HeadInput<'_>, scale: f32, scratch: &mut [f32], dst: &mut [f32], ldd: usize) {
    x.check();
    assert!(
        scratch.len() >= scratch_len(x.len, x.d),
        "attention: scratch too small"
    );
    assert!(
        x.len == 0 || (x.len - 1) * ldd + x.d <= dst.len(),
        "attention: dst too short"
    );
    match super::ops::row_ops().attend {
        // SAFETY: the row operations are those of the ISA `isa::fp32()`
        // chose, which the CPU has; the sizes were checked above and the
        // head's width is a multiple of 16.
        Some(vector) if x.d.is_multiple_of(16) => unsafe { vector(x, scale, scratch, dst, ldd) },
        _ => attend_scalar(x, scale, scratch, dst, ldd, &super::ops::softmax),
    }
}

/// `Kᵀ` of the head into `kt` (`d` rows of stride `padded`, zero beyond
/// `len`), shared by every variant.
pub(crate) fn transpose_keys(x: &HeadInput<'_>, kt: &mut [f32]) {
    let lp = x.padded();
    let kt = &mut kt[..x.d * lp];
    kt.fill(0.0);
    for j in 0..x.len {
        let row = &x.qkv[j * x.ld + x.k..j * x.ld + x.k + x.d];
        for (c, &v) in row.iter().enumerate() {
            kt[c * lp + j] = v;
        }
    }
}

/// The scalar definition (and the portable variant): the same FMA chains as
/// the vector code, one output at a time, with the given row softmax.
pub(crate) fn attend_scalar(
    x: HeadInput<'_>,
    scale: f32,
    scratch: &mut [f32],
    dst: &mut [f32],
    ldd: usize,
    softmax: &dyn Fn(&mut [f32]),
) {
    let (len, d, lp) = (x.len, x.d, x.padded());
    let (kt, sc) = scratch.split_at_mut(d * lp);
    transpose_keys(&x, kt);
    for i in 0..len {
        let (a, b) = x.span(i);
        let q = &x.qkv[i * x.ld + x.q..i * x.ld + x.q + d];
        let row = &mut sc[a..b];
        for (j, s) in (a..b).zip(row.iter_mut()) {
            let mut acc = 0.0f32;
            for (c, &qc) in q.iter().enumerate() {
                acc = qc.mul_add(kt[c * lp + j], acc);
            }
            *s = acc * scale;
        }
        x.add_bias(i, a, row, crate::kernels::ops::add_assign);
        softmax(row);
        for e in 0..d {
            let mut acc = 0.0f32;
            for (j, &pj) in (a..b).zip(row.iter()) {
                acc = pj.mul_add(x.qkv[j * x.ld + x.v + e], acc);
            }
            dst[i * ldd + e] = acc;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::reference;

    /// The f64 definition of one head, for the accuracy check.
    fn oracle(x: &HeadInput<'_>, scale: f32) -> Vec<f64> {
        let (len, d) = (x.len, x.d);
        let at = |r: usize, c: usize| f64::from(x.qkv[r * x.ld + c]);
        let mut out = vec![0.0; len * d];
        for i in 0..len {
            let (lo, hi) = x.band.visible(i, len);
            let s: Vec<f64> = (0..len)
                .map(|j| {
                    if j < lo || j >= hi {
                        return f64::NEG_INFINITY;
                    }
                    let dot = (0..d).map(|c| at(i, x.q + c) * at(j, x.k + c)).sum::<f64>();
                    let b = x
                        .bias
                        .map_or(0.0, |(b, centre)| f64::from(b[centre + j - i]));
                    dot * f64::from(scale) + b
                })
                .collect();
            let m = s.iter().cloned().fold(f64::MIN, f64::max);
            let e: Vec<f64> = s.iter().map(|v| (v - m).exp()).collect();
            let z: f64 = e.iter().sum();
            for c in 0..d {
                out[i * d + c] = (0..len).map(|j| e[j] / z * at(j, x.v + c)).sum();
            }
        }
        out
    }

    #[test]
    fn every_variant_matches_the_scalar_chains_bit_for_bit() {
        for (len, d, heads) in [
            (1, 16, 1),
            (5, 32, 3),
            (16, 32, 2),
            (17, 32, 12),
            (25, 32, 12),
            (40, 64, 2),
            (130, 64, 3),
            (7, 24, 2),
        ] {
            let h = d * heads;
            let ld = 3 * h + 3; // an odd stride
            let qkv = reference::rand_vec(len * ld, (len * 131 + d) as u64);
            let table = reference::rand_vec(2 * 200 - 1, 7);
            let bands = [
                (0, None, Band::FULL),
                (heads - 1, None, Band::FULL),
                (0, Some((&table[..], 199)), Band::FULL),
                (0, None, Band::CAUSAL),
                (heads - 1, None, Band::window(8)),
                (0, None, Band::window(20)),
                (0, Some((&table[..], 199)), Band::window(3)),
                (0, None, Band::FULL.with_keys(len.div_ceil(2))),
                (
                    heads - 1,
                    Some((&table[..], 199)),
                    Band::FULL.with_keys(len.div_ceil(3)),
                ),
            ];
            for (head, bias, band) in bands {
                let x = HeadInput {
                    bias,
                    band,
                    qkv: &qkv,
                    ld,
                    len,
                    d,
                    q: head * d,
                    k: h + head * d,
                    v: 2 * h + head * d,
                };
                let ldd = d + 5;
                let mut scratch = vec![f32::NAN; scratch_len(len, d)];
                let mut got = vec![0.0f32; len * ldd];
                attend(x, 0.17677669, &mut scratch, &mut got, ldd);
                // Accuracy against f64.
                let want = oracle(&x, 0.17677669);
                for i in 0..len {
                    for c in 0..d {
                        let (g, w) = (f64::from(got[i * ldd + c]), want[i * d + c]);
                        assert!(
                            (g - w).abs() <= 2e-6 * (1.0 + w.abs()),
                            "len {len} d {d} {band:?} ({i},{c}): {g} vs {w}"
                        );
                    }
                }
                // Every row's vector form gives the bits of the scalar chains
                // with the portable softmax.
                if d.is_multiple_of(16) {
                    let mut want = vec![0.0f32; len * ldd];
                    let mut s2 = vec![0.0f32; scratch_len(len, d)];
                    let portable = crate::kernels::sgemm::Isa::by_name("none").unwrap();
                    let portable_ops = portable.kernel().ops;
                    // SAFETY: the portable row needs no CPU feature.
                    let sm: &dyn Fn(&mut [f32]) = &|r| unsafe { (portable_ops.softmax)(r) };
                    attend_scalar(x, 0.17677669, &mut s2, &mut want, ldd, sm);
                    for isa in crate::kernels::sgemm::Isa::all().filter(|i| i.supported()) {
                        let Some(vector) = isa.kernel().ops.attend else {
                            continue;
                        };
                        let mut v = vec![0.0f32; len * ldd];
                        // SAFETY: the CPU has the row's features; sizes as
                        // `attend` checks them.
                        unsafe { vector(x, 0.17677669, &mut scratch, &mut v, ldd) };
                        assert_eq!(bits(&v), bits(&want), "{isa:?} len {len} d {d} {band:?}");
                    }
                }
            }
        }
    }

    /// A banded row computed over its span gives the bits of the full row
    /// with the invisible scores set to `-inf` (the definition of [`Band`]).
    #[test]
    fn a_band_gives_the_bits_of_the_full_masked_row() {
        for len in [1, 9, 15, 16, 17, 31, 33, 47, 64, 100, 130] {
            let d = 16;
            let ld = 3 * d;
            let qkv = reference::rand_vec(len * ld, len as u64 + 3);
            for band in [
                Band::CAUSAL,
                Band::window(0),
                Band::window(8),
                Band::window(40),
                Band::FULL.with_keys(len.div_ceil(2)),
                Band::FULL.with_keys(len.div_ceil(5)),
            ] {
                let x = HeadInput {
                    qkv: &qkv,
                    ld,
                    len,
                    d,
                    q: 0,
                    k: d,
                    v: 2 * d,
                    bias: None,
                    band,
                };
                let mut scratch = vec![0.0f32; scratch_len(len, d)];
                let mut got = vec![0.0f32; len * d];
                attend(x, 0.25, &mut scratch, &mut got, d);
                // The full row, masked by hand, with the same softmax.
                let sm = crate::kernels::ops::softmax;
                for i in 0..len {
                    let (lo, hi) = band.visible(i, len);
                    let mut row: Vec<f32> = (0..len)
                        .map(|j| {
                            let mut acc = 0.0f32;
                            for c in 0..d {
                                acc = qkv[i * ld + c].mul_add(qkv[j * ld + d + c], acc);
                            }
                            if j < lo || j >= hi {
                                f32::NEG_INFINITY
                            } else {
                                acc * 0.25
                            }
                        })
                        .collect();
                    sm(&mut row);
                    for e in 0..d {
                        let mut acc = 0.0f32;
                        for (j, &p) in row.iter().enumerate() {
                            acc = p.mul_add(qkv[j * ld + 2 * d + e], acc);
                        }
                        assert_eq!(
                            acc.to_bits(),
                            got[i * d + e].to_bits(),
                            "len {len} {band:?} row {i} value {e}"
                        );
                    }
                }
            }
        }
    }

    fn bits(v: &[f32]) -> Vec<u32> {
        v.iter().map(|x| x.to_bits()).collect()
    }
}
