//! The engine's int8 GEMM: `C (+)= dequant(Aq · Bq)` with activations
//! quantized per row and weights per output channel, exact int32
//! accumulation and an f32 epilogue.
//!
//! # The numbers
//!
//! - **Weights** ([`PackedI8`]): symmetric int8 per output channel (row of the
//!   `Linear` weight `[n x k]`): `w ≈ sw[j] · qw[j][p]`, `qw` in `[-127, 127]`,
//!   `sw[j] = max|W[j]| / 127` ([`quantize_weights`], the same as
//!   `embd convert --dtype int8` stores).
//! - **Activations** ([`QuantRows`]): asymmetric per row (token), 255 levels:
//!   `x ≈ sa[i] · (qa[i][p] - za[i])`, `qa` in `[-127, 127]`, the range
//!   `[min(x, 0), max(x, 0)]` of the row mapped onto it ([`quantize_row`]).
//!   A row depends on nothing but its own values, so quantization keeps
//!   batch invariance.
//! - **Product**: `T[i][j] = Σ_p qa[i][p] · qw[j][p] - za[i] · Σ_p qw[j][p]`,
//!   exact in int32 (|T| <= 254 · 127 · k < 2³¹ for k < 66,000), then
//!   `C[i][j] = (T as f32) · (sa[i] · sw[j])` (+ the old `C[i][j]` when
//!   accumulating), each operation rounded once, in that order.
//!   [`dot_oracle`] is that definition in scalar code.
//!
//! Every ISA computes the same integer `T` (integer sums are exact, whatever
//! their order) and then the same three f32 operations, so every ISA gives the
//! same bits; the tests check each against the oracle.
//!
//! # Kernels
//!
//! | [`Isa`] | instruction | tile | A bytes |
//! |---|---|---|---|
//! | `Avx512Vnni` | `vpdpbusd zmm` (u8 · s8, 4 per lane) | 12 x 32 | `qa + 128` (u8) |
//! | `AvxVnni` | `vpdpbusd ymm` (VEX) | 6 x 16 | `qa + 128` (u8) |
//! | `Avx2` | `vpsignb` + `vpmaddubsw` + `vpmaddwd` | 4 x 16 | `qa` (s8) |
//! | `Scalar` | plain integer code | 1 x 1 | `qa` (s8) |
//!
//! The VNNI forms multiply unsigned by signed bytes, so A is stored offset by
//! 128 and the sum is corrected by `128 · Σ qw` (folded into the zero point).
//! `vpmaddubsw` would saturate its i16 pair sums for u8 · s8 (255 · 127 · 2 >
//! 32767), so the AVX2 form multiplies `|qw|` (u8, <= 127) by `qa · sign(qw)`
//! (s8, |·| <= 127): pair sums stay below 32,258 and nothing saturates.
//!
//! Why AVX2 keeps the exact 8-bit x 8-bit scheme (measured with
//! `embd precision-report` on `minilm_reference.jsonl`): the forms that let
//! `vpmaddubsw` run without the sign step lose a bit on one side, and both
//! fail the int8 bars (worst >= 0.995, mean >= 0.999) by a wide margin:
//! 7-bit weights (`|qw| <= 64`, u8 activations) worst 0.991 / mean 0.9981,
//! 129-level activations (u8 in `[0, 128]`, 8-bit weights) worst 0.9906 /
//! mean 0.9978, against 0.9964 / 0.9992 for the scheme above. They would not
//! be faster where the vector multiplies are the bound either: the sign step
//! is one simple op beside the two multiplies (`vpmaddubsw`, `vpmaddwd`) that
//! every 32 products need in all three forms. So every ISA quantizes the same
//! way and gives the same bits.
//!
//! Row quantization is vectorized for every ISA with an int8 tile
//! (`x86_64::avx512::qgemm::quantize_row` for `Avx512Vnni`,
//! `x86_64::avx2::qgemm::quantize_row` for `AvxVnni` and `Avx2`,
//! `aarch64::neon::qgemm::quantize_row` for the `i8mm` and `dotprod` rows), bit for
//! bit the scalar `quantize_row_scalar` (whose `round_ties_even` is a libm
//! call per element on the baseline target; the vector forms round in
//! `vcvtps2dq` / `fcvtns`).
//!
//! B is packed once per matrix for one ISA: panels of `nr` columns; inside a
//! panel, for each group of 4 consecutive k, the 4 bytes of every column
//! (the layout `vpdpbusd` reads). k is padded to a multiple of 4 with zero
//! weights, columns to whole panels with zero columns.

use rayon::prelude::*;

pub(crate) use super::arch::types::{QKernel, Tile};
use super::driver::{self, Blocking, CTile, EpilogueAt};
use super::packbuf::PackBuf;
use super::sgemm::EpilogueFn;
use super::Par;

/// A row of int8 kernels (see [`isa`](super::isa)).
pub use super::isa::Int8Isa as Isa;

impl Isa {
    /// Tile height (rows of A per kernel call).
    pub fn mr(self) -> usize {
        self.kernel().mr
    }

    /// Tile and panel width (columns).
    pub fn nr(self) -> usize {
        self.kernel().nr
    }

    /// What A's bytes hold: `qa + offset` (128 for the u8 · s8 VNNI forms).
    pub fn a_offset(self) -> i32 {
        self.kernel().a_offset
    }
}

/// The int8 kernels of this process: the best row of the table this CPU
/// runs and `EMBD_SIMD` allows (chosen once, by
/// [`isa::int8`](super::isa::int8)).
#[inline]
pub fn isa() -> Isa {
    super::isa::int8()
}

/// Quantizes a `Linear` weight `[rows x cols]` (row-major) to int8 with one
/// scale per row: `scale = max|row| / 127` (1 for an all-zero row),
/// `q = round(x / scale)` (half away from zero) clamped to `[-127, 127]`.
/// This is the scheme of `int8_per_row` model files.
pub fn quantize_weights(values: &[f32], rows: usize, cols: usize) -> (Vec<i8>, Vec<f32>) {
    let mut q = vec![0i8; rows * cols];
    let mut scales = vec![0f32; rows];
    if cols == 0 {
        return (q, vec![1.0; rows]);
    }
    for ((row, dst), s) in values
        .chunks_exact(cols)
        .zip(q.chunks_exact_mut(cols))
        .zip(&mut scales)
    {
        let max = row.iter().fold(0f32, |m, v| m.max(v.abs()));
        let scale = if max > 0.0 { max / 127.0 } else { 1.0 };
        *s = scale;
        for (d, &v) in dst.iter_mut().zip(row) {
            *d = (v / scale).round().clamp(-127.0, 127.0) as i8;
        }
    }
    (q, scales)
}

/// The quantization of one activation row: `(scale, zero_point)` and the
/// quantized values `q = clamp(round_half_even(x · (1 / scale)) + zero_point,
/// -127, 127)`, so that `x ≈ scale · (q - zero_point)`. The range
/// `[min(x, 0), max(x, 0)]` spans 254 steps; an all-zero row gets scale 1.
pub fn quantize_row(x: &[f32], q: &mut [i8]) -> (f32, i32) {
    let (lo, hi) = x
        .iter()
        .fold((0f32, 0f32), |(lo, hi), &v| (lo.min(v), hi.max(v)));
    let (scale, inv, zp) = row_params(lo, hi);
    for (d, &v) in q.iter_mut().zip(x) {
        *d = quantize_value(v, inv, zp) as i8;
    }
    (scale, zp)
}

/// Scale, its reciprocal and zero point for a row whose range (0 included)
/// is `[lo, hi]`.
#[inline]
pub(crate) fn row_params(lo: f32, hi: f32) -> (f32, f32, i32) {
    let scale = (hi - lo) / 254.0;
    // A zero (or non-finite) range: every value maps to the zero point.
    let scale = if scale > 0.0 && scale.is_finite() {
        scale
    } else {
        1.0
    };
    let inv = 1.0 / scale;
    let zp = (-127.0 - (lo * inv).round_ties_even()).clamp(-127.0, 127.0) as i32;
    (scale, inv, zp)
}

/// `clamp(round_half_even(v · inv) + zp, -127, 127)` (NaN maps to the zero
/// point).
#[inline]
fn quantize_value(v: f32, inv: f32, zp: i32) -> i32 {
    let r = (v * inv).round_ties_even();
    // `as i32` saturates (NaN -> 0); the sum cannot overflow.
    ((r.clamp(-1e9, 1e9) as i32) + zp).clamp(-127, 127)
}

/// Activation rows quantized for one [`Isa`]'s kernels (see the module docs):
/// `m` rows of `kp` bytes (k padded to a multiple of 4), a scale per row and
/// the zero point with the kernel's byte offset folded in. Reused across calls
/// (its buffers only grow).
#[derive(Default)]
pub struct QuantRows {
    data: Vec<u8>,
    scale: Vec<f32>,
    /// `za[i] + isa.a_offset()`: what the correction multiplies `Σ qw` by.
    zc: Vec<i32>,
    m: usize,
    k: usize,
    kp: usize,
    isa: Option<Isa>,
}

impl QuantRows {
    /// Bytes held.
    pub fn bytes(&self) -> usize {
        self.data.len() + 4 * (self.scale.len() + self.zc.len())
    }

    /// Rows.
    pub fn rows(&self) -> usize {
        self.m
    }

    /// Quantizes `m` rows of `k` floats of `x` (row stride `ldx`) for `isa`,
    /// each value first multiplied by its column's factor in `mul` when given
    /// (smoothing); replaces the contents; `par` splits the rows (same bytes).
    ///
    /// # Panics
    /// If `x` is too short for the view or `mul` shorter than `k`.
    #[allow(clippy::too_many_arguments)]
    pub fn quantize(
        &mut self,
        isa: Isa,
        x: &[f32],
        m: usize,
        k: usize,
        ldx: usize,
        mul: Option<&[f32]>,
        par: Par,
    ) {
        assert!(
            m == 0 || (ldx >= k && x.len() >= (m - 1) * ldx + k),
            "qgemm: x too short"
        );
        assert!(
            mul.is_none_or(|f| f.len() >= k),
            "qgemm: too few column factors"
        );
        let kp = k.next_multiple_of(4);
        self.m = m;
        self.k = k;
        self.kp = kp;
        self.isa = Some(isa);
        if self.data.len() < m * kp {
            self.data.resize(m * kp, 0);
        }
        if self.scale.len() < m {
            self.scale.resize(m, 0.0);
            self.zc.resize(m, 0);
        }
        let off = isa.a_offset();
        let one = |(i, ((dst, s), zc)): (usize, ((&mut [u8], &mut f32), &mut i32))| {
            let (scale, zp) = quantize_row_into(isa, &x[i * ldx..i * ldx + k], mul, dst, off);
            *s = scale;
            *zc = zp + off;
        };
        let rows = self.data[..m * kp]
            .chunks_exact_mut(kp.max(1))
            .zip(&mut self.scale[..m])
            .zip(&mut self.zc[..m]);
        match par {
            Par::Threads(t) if t > 1 && m * k >= 1 << 15 => {
                rows.enumerate().par_bridge().for_each(one);
            }
            _ => rows.enumerate().for_each(one),
        }
    }
}

/// Quantizes one row into `dst` (`kp` bytes: `q + off` as bytes, the padding
/// holds the zero point), with the ISA's vector code where there is one.
fn quantize_row_into(
    isa: Isa,
    x: &[f32],
    mul: Option<&[f32]>,
    dst: &mut [u8],
    off: i32,
) -> (f32, i32) {
    match isa.kernel().quantize_row {
        // SAFETY: an ISA is only used when the CPU has its features (the
        // callers' `supported` checks and `isa::int8`); `mul` has at least
        // x.len() factors and `dst` kp bytes (checked by the caller).
        Some(f) => unsafe { f(x, mul, dst, off) },
        None => quantize_row_scalar(x, mul, dst, off),
    }
}

/// The portable form of [`quantize_row_into`] (also the oracle of the vector
/// forms).
pub(crate) fn quantize_row_scalar(
    x: &[f32],
    mul: Option<&[f32]>,
    dst: &mut [u8],
    off: i32,
) -> (f32, i32) {
    let val = |c: usize| match mul {
        Some(f) => x[c] * f[c],
        None => x[c],
    };
    let (lo, hi) = (0..x.len())
        .map(val)
        .fold((0f32, 0f32), |(lo, hi), v| (lo.min(v), hi.max(v)));
    let (scale, inv, zp) = row_params(lo, hi);
    let (body, pad) = dst.split_at_mut(x.len());
    for (c, d) in body.iter_mut().enumerate() {
        *d = (quantize_value(val(c), inv, zp) + off) as u8;
    }
    pad.fill((zp + off) as u8);
    (scale, zp)
}

/// A `Linear` weight quantized and packed for one [`Isa`]: `B = Wᵀ`
/// (`k x n`), with the per-column scales and sums `Σ_p qw[j][p]`.
pub struct PackedI8 {
    isa: Isa,
    k: usize,
    kp: usize,
    n: usize,
    n_pad: usize,
    data: PackBuf,
    scale: Vec<f32>,
    wsum: Vec<i32>,
}

impl std::fmt::Debug for PackedI8 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PackedI8")
            .field("isa", &self.isa)
            .field("k", &self.k)
            .field("n", &self.n)
            .finish()
    }
}

impl PackedI8 {
    /// Quantizes `w` (`[n x k]`, the `Linear` layout) with
    /// [`quantize_weights`] and packs it.
    pub fn from_f32(isa: Isa, w: &[f32], n: usize, k: usize) -> PackedI8 {
        assert!(w.len() >= n * k, "qgemm: W too short");
        let (q, s) = quantize_weights(&w[..n * k], n, k);
        Self::from_quantized(isa, &q, &s, n, k)
    }

    /// Packs already quantized weights `q` (`[n x k]`) with one scale per row.
    ///
    /// # Panics
    /// If `q` or `scales` is too short.
    pub fn from_quantized(isa: Isa, q: &[i8], scales: &[f32], n: usize, k: usize) -> PackedI8 {
        assert!(q.len() >= n * k, "qgemm: W too short");
        assert!(scales.len() >= n, "qgemm: too few scales");
        let (nr, kp) = (isa.nr(), k.next_multiple_of(4));
        let n_pad = n.next_multiple_of(nr);
        // PackBuf holds floats; 4 bytes each.
        let mut data = PackBuf::zeroed((kp * n_pad).div_ceil(4));
        let bytes = packbuf_bytes_mut(&mut data);
        let mut wsum = vec![0i32; n];
        for (j, row) in q[..n * k].chunks_exact(k.max(1)).enumerate().take(n) {
            let (panel, jj) = (j / nr, j % nr);
            let base = panel * kp * nr;
            for (p, &v) in row.iter().enumerate() {
                bytes[base + (p / 4) * nr * 4 + jj * 4 + p % 4] = v as u8;
            }
            wsum[j] = row.iter().map(|&v| i32::from(v)).sum();
        }
        PackedI8 {
            isa,
            k,
            kp,
            n,
            n_pad,
            data,
            scale: scales[..n].to_vec(),
            wsum,
        }
    }

    /// The name of the byte layout [`PackedI8::packed_bytes`] has for
    /// `isa`'s kernels: two ISAs with the same name read the same bytes
    /// (see [`PackedBf16::layout`](super::bgemm::PackedBf16::layout)).
    pub fn layout(isa: Isa) -> String {
        format!("int8-nr{}-k4", isa.nr())
    }

    /// Packed bytes in this layout for an `n x k` weight; `None` for a
    /// layout name this build does not know.
    pub fn stored_len(layout: &str, n: usize, k: usize) -> Option<usize> {
        let nr = parse_layout(layout)?;
        Some(k.next_multiple_of(4) * n.next_multiple_of(nr))
    }

    /// Packed weights stored earlier ([`PackedI8::packed_bytes`],
    /// [`PackedI8::scales`] and [`PackedI8::weight_sums`] of a weight packed
    /// for an ISA of the same [`PackedI8::layout`]), read in place from `data`.
    ///
    /// # Errors
    /// A message when the sizes do not fit `n x k` for `isa` or the CPU lacks
    /// `isa`.
    pub fn from_stored(
        isa: Isa,
        n: usize,
        k: usize,
        data: PackBuf,
        scale: Vec<f32>,
        wsum: Vec<i32>,
    ) -> Result<PackedI8, String> {
        if !isa.supported() {
            return Err(format!("the CPU lacks the {isa:?} int8 kernels"));
        }
        let (kp, n_pad) = (k.next_multiple_of(4), n.next_multiple_of(isa.nr()));
        if data.as_slice().len() * 4 != kp * n_pad || scale.len() != n || wsum.len() != n {
            return Err(format!(
                "{} packed bytes, {} scales and {} sums, expected {}, {n} and {n} for [{n}, {k}]",
                data.as_slice().len() * 4,
                scale.len(),
                wsum.len(),
                kp * n_pad
            ));
        }
        Ok(PackedI8 {
            isa,
            k,
            kp,
            n,
            n_pad,
            data,
            scale,
            wsum,
        })
    }

    /// The `[n x k]` int8 weight of `bytes` packed in `layout` (any ISA's),
    /// for packing again for other kernels; `None` for an unknown layout or
    /// a wrong length.
    pub fn unpack(layout: &str, bytes: &[u8], n: usize, k: usize) -> Option<Vec<i8>> {
        let nr = parse_layout(layout)?;
        let kp = k.next_multiple_of(4);
        if bytes.len() != kp * n.next_multiple_of(nr) {
            return None;
        }
        let mut q = vec![0i8; n * k];
        for (j, row) in q.chunks_exact_mut(k.max(1)).enumerate().take(n) {
            let base = (j / nr) * kp * nr;
            for (p, v) in row.iter_mut().enumerate() {
                *v = bytes[base + (p / 4) * nr * 4 + (j % nr) * 4 + p % 4] as i8;
            }
        }
        Some(q)
    }

    /// The packed weights as bytes (what [`PackedI8::from_stored`] takes
    /// back).
    pub fn packed_bytes(&self) -> &[u8] {
        packbuf_bytes(&self.data)
    }

    /// One scale per output channel.
    pub fn scales(&self) -> &[f32] {
        &self.scale
    }

    /// Per output channel, the sum of its int8 weights.
    pub fn weight_sums(&self) -> &[i32] {
        &self.wsum
    }

    /// Whether the packed bytes are read in place from a file.
    pub fn is_shared(&self) -> bool {
        self.data.is_shared()
    }

    /// The kernel family this was packed for.
    pub fn isa(&self) -> Isa {
        self.isa
    }

    /// Output features.
    pub fn n(&self) -> usize {
        self.n
    }

    /// Input features.
    pub fn k(&self) -> usize {
        self.k
    }

    /// Bytes held (packed weights, scales, sums).
    pub fn bytes(&self) -> usize {
        self.kp * self.n_pad + 8 * self.n
    }

    /// The quantized weight `qw[j][p]` (for tests and reports).
    pub fn q_at(&self, j: usize, p: usize) -> i8 {
        let nr = self.isa.nr();
        let bytes = packbuf_bytes(&self.data);
        bytes[(j / nr) * self.kp * nr + (p / 4) * nr * 4 + (j % nr) * 4 + p % 4] as i8
    }

    /// The scale of output channel `j`.
    pub fn scale(&self, j: usize) -> f32 {
        self.scale[j]
    }

    fn panel(&self, j0: usize) -> *const u8 {
        let nr = self.isa.nr();
        packbuf_bytes(&self.data)[(j0 / nr) * self.kp * nr..].as_ptr()
    }
}

/// `nr` of a [`PackedI8::layout`] name.
fn parse_layout(layout: &str) -> Option<usize> {
    let nr: usize = layout
        .strip_prefix("int8-nr")?
        .strip_suffix("-k4")?
        .parse()
        .ok()?;
    (nr > 0 && nr <= 64).then_some(nr)
}

fn packbuf_bytes(b: &PackBuf) -> &[u8] {
    let f = b.as_slice();
    // SAFETY: reinterpreting initialised f32 storage as its bytes (u8 has no
    // alignment or validity requirements); the length is the same memory.
    unsafe { std::slice::from_raw_parts(f.as_ptr().cast::<u8>(), f.len() * 4) }
}

fn packbuf_bytes_mut(b: &mut PackBuf) -> &mut [u8] {
    let f = b.as_mut_slice();
    // SAFETY: as in `packbuf_bytes`, exclusively borrowed; any byte pattern is
    // a valid f32.
    unsafe { std::slice::from_raw_parts_mut(f.as_mut_ptr().cast::<u8>(), f.len() * 4) }
}

/// The definition of one output element (see the module docs): `qa` the
/// row's quantized activations, `za`/`sa` its zero point and scale, `qw`/`sw`
/// the column's weights and scale, `init` the old value when accumulating.
pub fn dot_oracle(init: Option<f32>, qa: &[i8], za: i32, sa: f32, qw: &[i8], sw: f32) -> f32 {
    let dot: i32 = qa
        .iter()
        .zip(qw)
        .map(|(&a, &w)| i32::from(a) * i32::from(w))
        .sum();
    let wsum: i32 = qw.iter().map(|&w| i32::from(w)).sum();
    let t = dot - za * wsum;
    let v = (t as f32) * (sa * sw);
    match init {
        Some(c) => c + v,
        None => v,
    }
}

/// `C[m x n] (+)= dequant(A · B)` (see the module docs), then `epi` on every
/// finished row segment; `Par::Threads(t)` splits the columns (same values).
///
/// # Panics
/// If A was quantized for another ISA or depth than B, if C is too short or
/// its rows overlap, or if the ISA is not supported by this CPU.
pub fn product(
    a: &QuantRows,
    b: &PackedI8,
    c: &mut [f32],
    ldc: usize,
    accumulate: bool,
    epi: EpilogueFn<'_>,
    par: Par,
) {
    product_cols(a, b, b.n, c, ldc, accumulate, epi, par);
}

/// [`product`] over the first `n` columns of B only (`n <= b.n()`): the
/// same values as the full product's first `n` columns.
///
/// # Panics
/// As [`product`]'s, and if `n` exceeds B's columns.
#[allow(clippy::too_many_arguments)]
pub fn product_cols(
    a: &QuantRows,
    b: &PackedI8,
    n: usize,
    c: &mut [f32],
    ldc: usize,
    accumulate: bool,
    epi: EpilogueFn<'_>,
    par: Par,
) {
    assert!(n <= b.n, "qgemm: {n} columns of {}", b.n);
    let (m, isa) = (a.m, b.isa);
    assert!(isa.supported(), "qgemm: {isa:?} kernels need CPU support");
    assert_eq!(a.isa, Some(isa), "qgemm: A quantized for another ISA");
    assert_eq!(a.k, b.k, "qgemm: depth mismatch");
    assert!(
        m == 0 || (ldc >= n && c.len() >= (m - 1) * ldc + n),
        "qgemm: C too short"
    );
    let ops = Int8Operands {
        kernel: isa.kernel(),
        a,
        b,
    };
    let tasks = driver::column_tasks(n, isa.nr(), par, m * n * b.k);
    // SAFETY: the ISA is supported; A and B have matching depth and were
    // built by this module; C was bounds-checked above.
    unsafe { driver::product(&ops, m, n, c, ldc, accumulate, epi, tasks) }
}

/// The int8 product's operands for the [`driver`]: the quantized rows of A,
/// B packed with its column scales and sums. Never blocked in k (the tiles
/// dequantize) nor in rows.
struct Int8Operands<'a> {
    kernel: &'static QKernel,
    a: &'a QuantRows,
    b: &'a PackedI8,
}

/// One int8 panel: its bytes, where the next one lies (for prefetching),
/// and its column scales and sums, zero beyond `n`.
struct Int8Panel {
    b: *const u8,
    next: *const u8,
    sw: [f32; 32],
    wsum: [i32; 32],
}

impl driver::Operands for Int8Operands<'_> {
    type Panel = Int8Panel;

    fn prepare(&self) {
        self.b.isa.prepare();
    }

    #[inline(always)]
    fn blocking(&self) -> Blocking {
        Blocking {
            mr: self.kernel.mr,
            nr: self.kernel.nr,
            kc: usize::MAX,
            depth: self.b.kp / 4,
            mc: usize::MAX,
            epilogue: EpilogueAt::Rows,
        }
    }

    #[inline(always)]
    unsafe fn panel(&self, _: usize, _: usize, j0: usize, w: usize, _: *mut f32) -> Int8Panel {
        let (b, nr) = (self.b, self.kernel.nr);
        let mut panel = Int8Panel {
            b: b.panel(j0),
            next: if j0 + nr < b.n_pad {
                b.panel(j0 + nr)
            } else {
                b.panel(j0)
            },
            sw: [0.0; 32],
            wsum: [0; 32],
        };
        panel.sw[..w].copy_from_slice(&b.scale[j0..j0 + w]);
        panel.wsum[..w].copy_from_slice(&b.wsum[j0..j0 + w]);
        panel
    }

    #[inline(always)]
    unsafe fn tile(
        &self,
        panel: &Int8Panel,
        _: usize,
        kq: usize,
        row0: usize,
        h: usize,
        c: CTile<'_>,
    ) {
        let (a, tile) = (self.a, self.kernel.tiles[h - 1]);
        let run = |c: *mut f32, ldc: usize, load: bool| {
            let t = Tile {
                kq,
                a: a.data[row0 * a.kp..].as_ptr(),
                lda: a.kp,
                b: panel.b,
                next: panel.next,
                sa: a.scale[row0..].as_ptr(),
                zc: a.zc[row0..].as_ptr(),
                sw: panel.sw.as_ptr(),
                wsum: panel.wsum.as_ptr(),
                c,
                ldc,
                load,
            };
            // SAFETY: h <= mr rows of A with kp bytes each; the panel holds
            // kq·4·nr bytes; the C tile has h rows of nr writable floats; the
            // CPU has the ISA.
            unsafe { tile(&t) };
        };
        // SAFETY: `full_width` hands `run` h rows of nr writable floats (C's,
        // or a tile buffer's).
        unsafe { c.full_width(run) };
    }
}

/// `(acc - zc · wsum) as f32 · (sa · sw)`: the epilogue every kernel computes.
#[inline(always)]
pub(crate) fn dequant(acc: i32, zc: i32, wsum: i32, sa: f32, sw: f32) -> f32 {
    ((acc - zc * wsum) as f32) * (sa * sw)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rand_vec(n: usize, seed: u64) -> Vec<f32> {
        let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        (0..n)
            .map(|_| {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                ((s >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
            })
            .collect()
    }

    fn supported() -> Vec<Isa> {
        Isa::all().filter(|i| i.supported()).collect()
    }

    /// The oracle's value of every element, from the unpacked quantized
    /// operands (quantized with the scalar functions).
    fn oracle(
        x: &[f32],
        m: usize,
        k: usize,
        w: &[f32],
        n: usize,
        init: Option<&[f32]>,
        ldc: usize,
    ) -> Vec<f32> {
        let (qw, sw) = quantize_weights(w, n, k);
        let mut out = vec![0.0; m * ldc];
        for i in 0..m {
            let mut qa = vec![0i8; k];
            let (sa, za) = quantize_row(&x[i * k..(i + 1) * k], &mut qa);
            for j in 0..n {
                let c0 = init.map(|c| c[i * ldc + j]);
                out[i * ldc + j] = dot_oracle(c0, &qa, za, sa, &qw[j * k..(j + 1) * k], sw[j]);
            }
        }
        out
    }

    #[test]
    fn every_isa_matches_the_oracle_bit_for_bit() {
        let isas = supported();
        assert!(isas.contains(&Isa::by_name("none").unwrap()));
        for &m in &[1usize, 2, 3, 5, 7, 12, 13, 17, 64, 65] {
            for &n in &[1usize, 7, 16, 31, 32, 33, 65, 96] {
                for &k in &[1usize, 2, 3, 7, 8, 64, 384] {
                    let x = rand_vec(m * k, (m * 131 + n * 7 + k) as u64);
                    let w: Vec<f32> = rand_vec(n * k, (m + n * 3 + k * 5) as u64)
                        .iter()
                        .map(|v| v * 0.1)
                        .collect();
                    let ldc = n + 3;
                    let init = rand_vec(m * ldc, 99);
                    for acc in [false, true] {
                        let want = oracle(&x, m, k, &w, n, acc.then_some(&init[..]), ldc);
                        for &isa in &isas {
                            let b = PackedI8::from_f32(isa, &w, n, k);
                            let mut a = QuantRows::default();
                            a.quantize(isa, &x, m, k, k, None, Par::Serial);
                            let mut c = init.clone();
                            product(&a, &b, &mut c, ldc, acc, &|_, _| {}, Par::Serial);
                            for i in 0..m {
                                for j in 0..ldc {
                                    let (g, e) = (
                                        c[i * ldc + j],
                                        if j < n {
                                            want[i * ldc + j]
                                        } else {
                                            init[i * ldc + j]
                                        },
                                    );
                                    assert_eq!(
                                        g.to_bits(),
                                        e.to_bits(),
                                        "{isa:?} m{m} n{n} k{k} acc{acc} ({i},{j}): {g} vs {e}"
                                    );
                                }
                            }
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn vector_quantization_matches_scalar() {
        for isa in supported() {
            // Every mix of the vector loops (32, 16, 8, 4 lanes) and tails.
            for &k in &[
                1usize, 2, 3, 4, 5, 8, 12, 16, 17, 31, 33, 45, 63, 64, 100, 384, 1536,
            ] {
                for seed in 0..28u64 {
                    let mut x = rand_vec(k, seed + 1000 * k as u64);
                    // Skewed and degenerate rows too, non-finite values,
                    // and values half way between two steps.
                    match seed % 7 {
                        1 => x.iter_mut().for_each(|v| *v = v.abs() * 3.0),
                        2 => x.iter_mut().for_each(|v| *v = -v.abs() * 1e-3),
                        3 => x.iter_mut().for_each(|v| *v = 0.0),
                        4 => x[0] = 1e6,
                        5 => {
                            x[k / 2] = f32::NAN;
                            x[k - 1] = if k > 1 { f32::INFINITY } else { f32::NAN };
                        }
                        6 => {
                            // Range [-127, 127]: scale 1, so each x.5 is a tie.
                            x.iter_mut().enumerate().for_each(|(i, v)| {
                                *v = (i % 254) as f32 - 126.5;
                            });
                            x[0] = -127.0;
                            x[k - 1] = 127.0;
                        }
                        _ => {}
                    }
                    let kp = k.next_multiple_of(4);
                    let mut want = vec![0u8; kp];
                    let off = isa.a_offset();
                    let f = rand_vec(k, seed + 7);
                    let mul = (seed % 2 == 1).then_some(&f[..]);
                    let (s1, z1) = quantize_row_scalar(&x, mul, &mut want, off);
                    let mut got = vec![0u8; kp];
                    let (s2, z2) = quantize_row_into(isa, &x, mul, &mut got, off);
                    assert_eq!(
                        (s1.to_bits(), z1),
                        (s2.to_bits(), z2),
                        "{isa:?} k{k} seed{seed}"
                    );
                    assert_eq!(want, got, "{isa:?} k{k} seed{seed}");
                }
            }
        }
    }

    #[test]
    fn quantization_error_is_bounded() {
        let x = rand_vec(384, 5);
        let mut q = vec![0i8; 384];
        let (s, z) = quantize_row(&x, &mut q);
        for (v, &qv) in x.iter().zip(&q) {
            let back = s * (i32::from(qv) - z) as f32;
            assert!((back - v).abs() <= 0.5 * s * 1.0001, "{v} {back}");
        }
        // A row of zeros, and NaN, map to the zero point.
        let (s, z) = quantize_row(&[0.0, 0.0], &mut q[..2]);
        assert_eq!((s, i32::from(q[0]) - z), (1.0, 0));
    }

    #[test]
    fn rows_are_independent_and_thread_split_is_exact() {
        let (k, n, big_m) = (384, 1152, 70);
        let x = rand_vec(big_m * k, 5);
        let w: Vec<f32> = rand_vec(n * k, 6).iter().map(|v| v * 0.05).collect();
        let bias = rand_vec(n, 7);
        let epi = |j0: usize, r: &mut [f32]| {
            for (v, b) in r.iter_mut().zip(&bias[j0..]) {
                *v += b;
            }
        };
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(3)
            .build()
            .unwrap();
        for isa in supported() {
            let b = PackedI8::from_f32(isa, &w, n, k);
            let run = |start: usize, m: usize, par: Par| {
                let mut a = QuantRows::default();
                a.quantize(isa, &x[start * k..], m, k, k, None, par);
                let mut c = vec![0.0f32; m * n];
                pool.install(|| product(&a, &b, &mut c, n, false, &epi, par));
                c
            };
            let full = run(0, big_m, Par::Serial);
            for (start, m) in [(0usize, 1usize), (5, 1), (3, 7), (17, 40), (69, 1)] {
                let part = run(start, m, Par::Serial);
                assert!(
                    part.iter()
                        .zip(&full[start * n..])
                        .all(|(a, b)| a.to_bits() == b.to_bits()),
                    "{isa:?} rows {start}+{m}"
                );
            }
            for t in [2usize, 3] {
                let par = run(0, big_m, Par::Threads(t));
                assert!(
                    par.iter()
                        .zip(&full)
                        .all(|(a, b)| a.to_bits() == b.to_bits()),
                    "{isa:?} threads {t}"
                );
            }
        }
    }

    #[test]
    fn weights_match_the_converter_scheme() {
        let w = rand_vec(8 * 20, 3);
        let (q, s) = quantize_weights(&w, 8, 20);
        let b = PackedI8::from_quantized(isa(), &q, &s, 8, 20);
        for j in 0..8 {
            assert_eq!(b.scale(j), s[j]);
            for p in 0..20 {
                assert_eq!(b.q_at(j, p), q[j * 20 + p]);
            }
        }
    }

    /// `cargo test --release --lib qgemm::speed -- --ignored --nocapture`
    #[test]
    #[ignore]
    fn speed() {
        use crate::kernels::thread_cpu_seconds;
        let m = 256;
        for (k, n) in [(384usize, 1152usize), (384, 384), (384, 1536), (1536, 384)] {
            let x = rand_vec(m * k, 1);
            let w: Vec<f32> = rand_vec(n * k, 2).iter().map(|v| v * 0.05).collect();
            let mut c = vec![0.0f32; m * n];
            for isa in supported() {
                let b = PackedI8::from_f32(isa, &w, n, k);
                let mut a = QuantRows::default();
                let reps = if isa.name() == "none" { 2 } else { 50 };
                let t0 = thread_cpu_seconds();
                for _ in 0..reps {
                    a.quantize(isa, &x, m, k, k, None, Par::Serial);
                    product(&a, &b, &mut c, n, false, &|_, _| {}, Par::Serial);
                }
                let dt = (thread_cpu_seconds() - t0) / reps as f64;
                println!(
                    "{isa:?} m{m} k{k} n{n}: {:.1} GOP/s",
                    2.0 * (m * n * k) as f64 / dt / 1e9
                );
            }
        }
    }
}
