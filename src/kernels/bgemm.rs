//! The engine's bf16 GEMM: `C (+)= bf16(A) · bf16(B)` with fp32 accumulation,
//! for the reduced-precision (`Precision::Bf16`) products of the model.
//!
//! B is the weight matrix of a `Linear` layer, rounded to bf16 and packed once
//! ([`PackedBf16`]); A is an fp32 activation matrix, rounded to bf16 once per
//! product into a scratch buffer of the calling thread before the columns are
//! split between tasks. Both roundings are [`round_bf16_operand`]: round to
//! nearest even, except that magnitudes below [`OPERAND_MIN`] (`2^-40`) become
//! a zero of their sign (see "Operand rounding" below). Register-tile kernels
//! then run per tile, as in [`super::sgemm`]:
//!
//! | [`Isa`] | tile | arithmetic |
//! |---|---|---|
//! | `Avx512Bf16` | 12 x 32 | `vdpbf16ps` (AVX512_BF16) |
//! | `Avx512` | 12 x 32 | AVX-512F/BW FMA emulation of `vdpbf16ps` |
//! | `Avx2` | 5 x 16 | AVX2 + FMA emulation |
//! | `Scalar` | 4 x 16 | portable emulation ([`dot_oracle`] itself) |
//!
//! # Arithmetic: what `vdpbf16ps` computes
//!
//! Every variant gives the bits of `vdpbf16ps` as measured on an Intel Xeon
//! with AVX512_BF16 (see `tests::vdpbf16ps_is_the_oracle`; 38 million random
//! lanes across magnitudes plus directed cases): for each fp32 lane with
//! accumulator `s` and bf16 pairs `(a0, a1)`, `(b0, b1)` (index 0 in the low
//! half of the 32-bit lane),
//!
//! ```text
//! t   = ftz(fma(a1, b1, daz(s)))     // the high (odd-index) pair first
//! dst = ftz(fma(a0, b0, t))
//! ```
//!
//! with each fused multiply-add rounded once, to nearest even (the products of
//! two bf16 are exact, so this is also "exact product, rounded sum"). Denormal
//! inputs count as zero (`daz`, the accumulator and the bf16 operands), and a
//! result is flushed to a zero of its sign (`ftz`) when it is *tiny after
//! rounding*: when rounding the exact value to 24 bits with an unbounded
//! exponent gives a magnitude below `2^-126` (x86's tininess rule). So
//! `-(2^-126 - 2^-152)` gives `-2^-126`, but `-(2^-126 - 0.75·2^-150)`, which
//! `fma` rounds to `-2^-126` on the denormal grid, gives `-0.0`. MXCSR plays no
//! part. NaN results are NaN; their payload is not specified here (the
//! hardware prefers `a`, then `b`, then the accumulator, the fallbacks leave it
//! to the compiler), every other result is bit-exact.
//!
//! The packed layout puts element `2q` of a pair in the *high* half of the
//! 32-bit word and `2q + 1` in the low half, so that the hardware consumes k in
//! increasing order. The definition of one element of C is then
//! [`dot_oracle`] of the operand-rounded ([`round_bf16_operand`]) row of A and
//! column of B: one sequential chain of such steps over `p = 0, 1, ..., k-1`
//! (plus one `+0 · +0` step when `k` is odd: the zero padding of the last
//! pair), starting from 0 or, when accumulating, from the old value of C.
//! Blocking of k only stores the running value to C and reloads it, which is
//! exact. So `C[i][j]` depends only on row `i` of A and column `j` of B: not
//! on `m`, `n`, the ISA, the tile shape, a row's position in the batch or how
//! columns are split between threads. The tests check every variant against
//! the oracle bit for bit.
//!
//! # Operand rounding
//!
//! Both operands are rounded by [`round_bf16_operand`]: [`round_bf16`] (round
//! to nearest even), except that an input of magnitude below
//! [`OPERAND_MIN`] `= 2^-40` becomes a zero of its sign (decided on the fp32
//! input, so that every nonzero rounded operand is at least `2^-40`: RNE is
//! monotone and `2^-40` is a bf16). This flush is part of the arithmetic, on
//! every ISA and in the tests' oracle. Values this small contribute nothing a
//! bf16 sum can represent next to the row's other terms:
//!
//! - a flushed activation changes the exact sum by less than `2^-40·|w|`.
//!   The bf16 rounding of A already changes the term of *every* activation
//!   of `2^-32` or more by up to that much (half an ulp: `2^-40` at `2^-32`,
//!   up to `2^-8` of the value); for the model's rows (LayerNorm outputs,
//!   attention contexts, GELU outputs, whose largest entries are of order
//!   `2^-4 .. 2^4`) that rounding error is `2^-12·|w|` or more, `2^28` times
//!   the flushed contribution;
//! - the fp32 accumulator holds 24 bits: once the running sum has reached
//!   `2^-15·|w|` (one activation of `2^-13` against a weight of `|w|/4`),
//!   half its ulp exceeds `2^-40·|w|`, so such a term is below its
//!   resolution anyway. Likewise for a weight below `2^-40` (trained weights
//!   are of order `2^-12 .. 2^0`) against any activation.
//!
//! What it buys: with both operands zero or at least `2^-40` (biased
//! exponent 87), every product of two nonzero operands has biased exponents
//! summing to at least `174 >= 152`, the bound under which the FMA
//! emulations are exact (next section). So the fast kernels hold for any
//! data: far GELU tails (`2^-100`, `2^-120`, denormals) and tiny weights are
//! zeros, not a reason to fall back. (Plain [`round_bf16`] would leave such
//! values, and a single one in a row sends its whole tile to the scalar
//! oracle: the model's FFN down-projection then ran at a tenth of its speed.)
//!
//! # The fallbacks and flush-to-zero
//!
//! The fallbacks compute the same chain with ordinary `fma`, which rounds tiny
//! results on the denormal grid instead of flushing them. They are exact
//! without any per-step check whenever no partial sum can be tiny (below
//! `2^-126` and nonzero), which these bounds guarantee, with `ea`, `eb` the
//! smallest biased exponents of the nonzero operands of a tile's rows of A
//! and columns of B:
//!
//! - `ea + eb >= 142` and every nonzero C value (when accumulating) at least
//!   `2^-103`: every partial sum is a multiple of the smallest ulp among its
//!   terms (a product of bf16 `a·b` has ulp at least `2^(ea + eb - 268)`, a C
//!   value `c >= 2^-103` at least `2^-126`), so if that ulp is at least
//!   `2^-126` every nonzero partial sum is at least `2^-126` and nothing is
//!   ever flushed;
//! - `ea + eb >= 152` and C values normal (possibly below `2^-103`): until the
//!   first nonzero product the running value is `c` itself (`fma(±0, b, c)` is
//!   `c`, normal or zero: nothing to flush); that product has magnitude at
//!   least `2^(ea + eb - 254) >= 2^-102`, so the rounded sum is at least
//!   `2^-102 - |c| > 2^-103` (when `|c| < 2^-103`) and a multiple of `2^-126`,
//!   as is every later product: the first case again from there on.
//!
//! Operand rounding makes `ea + eb >= 174` always, so only C decides:
//! the rows of C are scanned when accumulating, and a row holding a denormal
//! (which `vdpbf16ps` reads as zero and `fma` does not) sends its tiles to
//! the scalar oracle, as does (defensively) any tile whose recorded bound
//! fails. `Avx512Bf16` needs no such check.
//!
//! # Speed
//!
//! `vdpbf16ps` does 64 flops per instruction. On AMD Zen 4 it issues like an
//! fp32 FMA, twice the fp32 flops (225 vs 112 GFLOP/s per core, measured on a Zen 4). On
//! the Intel Xeon this was written on (Sapphire Rapids class) it occupies
//! both FMA ports for about two cycles: 87 GFLOP/s against 170 for fp32 FMA,
//! and the `Avx512` emulation (about 0.9x the fp32 `sgemm`) is faster. [`isa`]
//! therefore times both once and picks the faster; the bits are the same
//! either way.
//!
//! # Memory
//!
//! A packed matrix takes `k/2 · n` 32-bit words (half the fp32 weights) in a
//! [`PackBuf`]. Each thread that calls [`product`] keeps its rounded copy of A
//! (`m · k` bf16, or `m · k` floats for the fallbacks) for reuse when it is at
//! most [`SCRATCH_KEEP_BYTES`]; larger ones are freed after the call.

use std::cell::Cell;

use rayon::prelude::*;

use super::arch::generic;
pub(crate) use super::arch::types::{BKernel, RoundA};
use super::driver::{self, span, Blocking, CTile, EpilogueAt};
use super::packbuf::PackBuf;
use super::sgemm::EpilogueFn;
use super::Par;

/// Scratch buffers up to this size stay allocated in their thread.
pub const SCRATCH_KEEP_BYTES: usize = 4 << 20;

/// A row of bf16 kernels (see [`isa`](super::isa)). All give the same bits;
/// they differ in speed.
pub use super::isa::Bf16Isa as Isa;

impl Isa {
    /// Tile height.
    pub fn mr(self) -> usize {
        self.kernel().mr
    }

    /// Tile width (columns per packed panel).
    pub fn nr(self) -> usize {
        self.kernel().nr
    }

    /// Pairs of k per packed block (the `kc x nr` panel of 32-bit words stays
    /// in L1).
    pub fn kc(self) -> usize {
        self.kernel().kc
    }

    /// Whether the rounded A is kept as bf16 pairs (32-bit words, as
    /// `vdpbf16ps` reads it) rather than as floats.
    fn a_pairs(self) -> bool {
        matches!(self.kernel().round_a, RoundA::Pairs(_))
    }
}

/// The bf16 kernels of this process (chosen once, by `isa::bf16`): the best
/// row of the table this CPU runs and `EMBD_SIMD` allows; when that row
/// races (`BKernel::race`: `vdpbf16ps`), a few hundred microseconds of it
/// and of the next row decide between them (see the module docs: the
/// answer differs between AMD and Intel). The choice never changes results.
#[inline]
pub fn isa() -> Isa {
    super::isa::bf16(select_isa)
}

/// [`isa`]'s choice, made once: the best row, or the next one when that
/// wins their race.
#[cold]
fn select_isa() -> Isa {
    let best = Isa::best();
    match best.next_best() {
        Some(next) if best.kernel().race && !is_faster(best, next) => next,
        _ => best,
    }
}

/// Times the full-height tile of each of `a` and `b` over one block of its
/// depth (about 0.3 ms in all) and says whether `a` does more work per
/// second.
fn is_faster(a: Isa, b: Isa) -> bool {
    let time = |isa: Isa| {
        let (mr, nr, kp) = (isa.mr(), isa.nr(), isa.kc());
        let a = vec![0x3F80_3F80u32; mr * 2 * kp];
        let b = vec![0x3F80_3F80u32; kp * nr];
        let mut c = vec![0.0f32; mr * nr];
        let t = std::time::Instant::now();
        for _ in 0..8 {
            // SAFETY: both rows are supported (`next_best` and `best` check);
            // A holds mr rows of 2·kp words (enough for either layout), B
            // one kp x nr panel, C one mr x nr tile.
            unsafe {
                run_kernel(
                    isa,
                    mr,
                    kp,
                    a.as_ptr(),
                    2 * kp,
                    b.as_ptr(),
                    c.as_mut_ptr(),
                    nr,
                    true,
                    b.as_ptr(),
                )
            };
        }
        std::hint::black_box(&c);
        t.elapsed().as_secs_f64() / (mr * nr * kp) as f64
    };
    // Interleaved, best of several: clock ramps and noise hit both alike.
    let (mut ta, mut tb) = (f64::INFINITY, f64::INFINITY);
    for _ in 0..5 {
        ta = ta.min(time(a));
        tb = tb.min(time(b));
    }
    ta < tb
}

/// `x` rounded to bf16, to nearest even (the rounding of `vcvtneps2bf16`,
/// checked against it on all 2^32 inputs). NaN stays NaN (made quiet,
/// keeping the sign and the high payload bits); infinities stay infinite and
/// values beyond the largest bf16 become infinite. Subnormal inputs become a
/// zero of their sign, as `vcvtneps2bf16` does: `vdpbf16ps` would read a
/// subnormal bf16 as zero anyway (it treats denormal inputs as zero), so no
/// bf16 handed to the kernels is ever subnormal. (A normal f32 never rounds
/// to a subnormal bf16: both formats share the exponent range.)
///
/// This is the plain conversion; the operands of [`product`] are rounded by
/// [`round_bf16_operand`], which also flushes magnitudes below
/// [`OPERAND_MIN`].
#[inline]
pub fn round_bf16(x: f32) -> u16 {
    (round_bits::<0x0080_0000>(x.to_bits()) >> 16) as u16
}

/// The smallest nonzero magnitude of a rounded operand, `2^-40`: smaller
/// inputs become a zero of their sign in [`round_bf16_operand`].
pub const OPERAND_MIN: f32 = f32::from_bits(OPERAND_FLUSH_BITS);

/// The biased exponent of [`OPERAND_MIN`].
const OPERAND_MIN_EXP: i16 = 87;

/// The f32 bits of [`OPERAND_MIN`]: operands whose magnitude bits are below
/// this are flushed.
pub(crate) const OPERAND_FLUSH_BITS: u32 = (OPERAND_MIN_EXP as u32) << 23;

/// `x` rounded to bf16 as an operand of a product (A, once per product, and
/// B, at packing): a zero of the sign of `x` when `|x| <` [`OPERAND_MIN`]
/// (`2^-40`, decided on the fp32 input), else [`round_bf16`] (round to
/// nearest even; NaN, infinities and overflow as there). So every nonzero
/// finite result has magnitude at least `2^-40`.
///
/// Values this small contribute nothing a bf16 sum can represent next to the
/// row's other terms: a flushed activation moves the exact dot product by
/// less than `2^-40·|w|`, no more than bf16 rounding already moves the term
/// of every activation of `2^-32` or more (half an ulp), `2^-28` of what it
/// moves an activation of `2^-4` (a small entry of a LayerNorm or GELU
/// output row), and below half an ulp of the fp32 running sum as soon as
/// that sum reaches `2^-15·|w|`; the same holds with the roles of weights
/// and activations exchanged. In exchange, every product of nonzero
/// operands is at least `2^-80` with ulp at least `2^-94`, so the FMA
/// emulations never meet the flush-to-zero range and need no fallback
/// (see the module docs).
#[inline]
pub fn round_bf16_operand(x: f32) -> u16 {
    (round_bits::<OPERAND_FLUSH_BITS>(x.to_bits()) >> 16) as u16
}

/// Rounding on f32 bits, giving the f32 bits of the rounded value (the bf16
/// in the high half, zeros below): magnitudes whose bits are below `FLUSH`
/// (at least `0x0080_0000`, the subnormals) become a zero of their sign, the
/// rest round as [`round_bf16`]. Branch-free, so that loops over it
/// vectorise.
#[inline(always)]
fn round_bits<const FLUSH: u32>(b: u32) -> u32 {
    let abs = b & 0x7FFF_FFFF;
    let rounded = b.wrapping_add(0x7FFF + ((b >> 16) & 1)) & 0xFFFF_0000;
    if abs > 0x7F80_0000 {
        // NaN: made quiet, high payload bits kept.
        (b | 0x0040_0000) & 0xFFFF_0000
    } else if abs < FLUSH {
        // Zero, subnormal or below the flush bound: a zero of the same sign.
        b & 0x8000_0000
    } else {
        rounded
    }
}

/// The f32 with the same value as bf16 `b` (exact; no flushing).
#[inline]
pub fn bf16_to_f32(b: u16) -> f32 {
    f32::from_bits((b as u32) << 16)
}

/// Denormals-are-zero: a subnormal `x` becomes a zero of its sign.
#[inline(always)]
fn daz(x: f32) -> f32 {
    if x.to_bits() & 0x7F80_0000 == 0 {
        f32::from_bits(x.to_bits() & 0x8000_0000)
    } else {
        x
    }
}

/// `2^-126 - 2^-151`: exact values of smaller magnitude are tiny after
/// rounding to 24 bits with an unbounded exponent (the tie rounds up to
/// `2^-126`).
const TINY_BOUND: f64 = f64::from_bits(896 << 52 | 0xFF_FFFF << 28);

/// One step of the chain: `ftz(fma(a, b, daz(c)))` with `a`, `b` bf16 values
/// already read with DAZ (see the module docs).
#[inline(always)]
pub(crate) fn step(c: f32, a: f32, b: f32) -> f32 {
    let c = daz(c);
    let p = a * b;
    // The product of two bf16 is exact unless it overflows or underflows;
    // then (rarely) the fused operation gives the exactly rounded sum.
    let r = if p.is_normal() || a == 0.0 || b == 0.0 {
        c + p
    } else {
        a.mul_add(b, c)
    };
    let m = r.abs();
    if m < f32::MIN_POSITIVE {
        return f32::from_bits(r.to_bits() & 0x8000_0000);
    }
    if m == f32::MIN_POSITIVE {
        // Rounded up to 2^-126 on the denormal grid: flush iff the exact sum
        // is below TINY_BOUND. c + a·b is exact as s + e (TwoSum in f64; the
        // f64 product of two bf16 is exact).
        let (x, y) = (c as f64, a as f64 * b as f64);
        let s = x + y;
        let bb = s - x;
        let e = (x - (s - bb)) + (y - bb);
        let tiny =
            s.abs() < TINY_BOUND || (s.abs() == TINY_BOUND && e != 0.0 && (e < 0.0) != (s < 0.0));
        if tiny {
            return f32::from_bits(r.to_bits() & 0x8000_0000);
        }
    }
    r
}

/// The scalar oracle, the definition of one element of a product:
/// `init` (the old C value when accumulating, else 0) followed by one step
/// `c = ftz(fma(a[p], b[p], daz(c)))` per `p` in increasing order (and a
/// trailing `+0·+0` step when the length is odd), bf16 operands read with
/// denormals as zero (see the module docs for `ftz`). The row of A and the
/// column of B are given as bf16 bits: [`product`] computes this on their
/// [`round_bf16_operand`] roundings (any bf16 is accepted here; the hardware
/// test feeds it raw ones). Empty slices return `init` unchanged.
///
/// # Panics
/// If the slices differ in length.
pub fn dot_oracle(init: f32, a_row_bf16: &[u16], b_col_bf16: &[u16]) -> f32 {
    assert_eq!(a_row_bf16.len(), b_col_bf16.len(), "bgemm: oracle lengths");
    let mut c = init;
    for (&a, &b) in a_row_bf16.iter().zip(b_col_bf16) {
        c = step(c, daz(bf16_to_f32(a)), daz(bf16_to_f32(b)));
    }
    if a_row_bf16.len() % 2 == 1 {
        c = step(c, 0.0, 0.0);
    }
    c
}

/// The biased exponent of a finite nonzero bf16, or 255 (no constraint) for
/// zero, infinity and NaN.
#[inline(always)]
fn exp_key(h: u16) -> i16 {
    let e = ((h >> 7) & 0xFF) as i16;
    if e == 0 || e == 255 {
        255
    } else {
        e
    }
}

/// One row of A rounded to bf16 values ([`round_bf16_operand`]) as f32 bits
/// into `dst`; returns the smallest [`exp_key`] of the row (zeros, flushed
/// or not, do not count).
#[inline(always)]
pub(crate) fn round_row(src: &[f32], dst: &mut [u32]) -> i16 {
    let mut emin = 255u32;
    for (d, &x) in dst.iter_mut().zip(src) {
        let r = round_bits::<OPERAND_FLUSH_BITS>(x.to_bits());
        let e = (r >> 23) & 0xFF;
        emin = emin.min(if e == 0 || e == 255 { 255 } else { e });
        *d = r;
    }
    emin as i16
}

/// Bound on the biased exponents of a tile's operands (smallest of A's row
/// plus smallest of B's panel) that keeps every partial sum away from the
/// flush-to-zero range when C starts at zero or at values of at least
/// `2^-103` (see the module docs): `ea + eb - 268 >= -126`.
const EXP_SUM_SAFE: i16 = 142;

/// The same bound when C holds normal values below `2^-103`: every nonzero
/// product is at least `2^(ea + eb - 254) >= 2^-102`.
const EXP_SUM_SAFE_TINY_C: i16 = 152;

/// The magnitude bits of `2^-103`: smaller nonzero C values need
/// [`EXP_SUM_SAFE_TINY_C`].
const C_TINY_BITS: u32 = 24 << 23;

// Operand rounding alone guarantees both bounds, so that the fallbacks are
// never needed for lack of them.
const _: () = assert!(2 * OPERAND_MIN_EXP >= EXP_SUM_SAFE_TINY_C);
const _: () = assert!(EXP_SUM_SAFE_TINY_C >= EXP_SUM_SAFE);

/// The `k x n` matrix `B = Wᵀ` rounded to bf16 ([`round_bf16_operand`]) and
/// packed for the kernels of one [`Isa`]: for each block of `isa.kc()` pairs
/// of k, the
/// panels of `isa.nr()` columns one after the other, each `kc` rows of `nr`
/// 32-bit words; the word of pair `q` and column `j` holds `B[2q][j]` in its
/// high half and `B[2q + 1][j]` in its low half (the pair-interleaved layout
/// `vdpbf16ps` reads, ordered so that it consumes `2q` first). Columns beyond
/// `n` and the element beyond an odd `k` are zero. 64-byte aligned.
pub struct PackedBf16 {
    isa: Isa,
    k: usize,
    n: usize,
    /// Columns rounded up to whole panels.
    n_pad: usize,
    buf: PackBuf,
    /// Per column panel: the smallest biased exponent of its nonzero finite
    /// values (255 if none), for the fallbacks' flush-to-zero bound.
    panel_exp: Vec<i16>,
}

impl std::fmt::Debug for PackedBf16 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PackedBf16")
            .field("isa", &self.isa)
            .field("k", &self.k)
            .field("n", &self.n)
            .finish()
    }
}

impl PackedBf16 {
    /// Rounds and packs `W`, given in the `Linear` layout `[n x k]` (row `j`
    /// holds the `k` inputs of output `j`), as `B = Wᵀ` for the kernels of
    /// `isa`.
    ///
    /// # Panics
    /// If `w` is shorter than `n · k` or the CPU lacks `isa`.
    pub fn from_linear(isa: Isa, w: &[f32], n: usize, k: usize) -> PackedBf16 {
        assert!(isa.supported(), "bgemm: {isa:?} kernels need CPU support");
        assert!(w.len() >= n * k, "bgemm: W too short");
        let (nr, kcb) = (isa.nr(), isa.kc());
        let kp = k.div_ceil(2);
        let n_pad = n.next_multiple_of(nr);
        // kp · n_pad is a multiple of 16 words (n_pad of 16): the size of a
        // whole number of 64-byte lines.
        let mut buf = PackBuf::zeroed(kp * n_pad);
        let mut panel_exp = vec![255i16; n_pad / nr];
        let dst = words_mut(&mut buf);
        let mut q0 = 0;
        while q0 < kp {
            let kc = kcb.min(kp - q0);
            for (pi, j0) in (0..n).step_by(nr).enumerate() {
                let panel = &mut dst[q0 * n_pad + j0 * kc..][..kc * nr];
                let mut emin = panel_exp[pi];
                for jj in 0..nr.min(n - j0) {
                    let row = &w[(j0 + jj) * k..(j0 + jj + 1) * k];
                    for q in 0..kc {
                        let p = 2 * (q0 + q);
                        let hi = round_bf16_operand(row[p]);
                        let lo = if p + 1 < k {
                            round_bf16_operand(row[p + 1])
                        } else {
                            0
                        };
                        emin = emin.min(exp_key(hi)).min(exp_key(lo));
                        panel[q * nr + jj] = (hi as u32) << 16 | lo as u32;
                    }
                }
                panel_exp[pi] = emin;
            }
            q0 += kc;
        }
        PackedBf16 {
            isa,
            k,
            n,
            n_pad,
            buf,
            panel_exp,
        }
    }

    /// The name of the byte layout [`PackedBf16::words`] has for `isa`'s
    /// kernels: two ISAs with the same name read the same words. Stored
    /// with packed weights so that a file is mapped in place only where its
    /// layout is the one the kernels in use read.
    pub fn layout(isa: Isa) -> String {
        super::panel_layout("bf16", isa.nr(), isa.kc())
    }

    /// Words and panel exponents in this layout for an `n x k` weight, as
    /// (words, panels); `None` for a layout name this build does not know.
    pub fn stored_lens(layout: &str, n: usize, k: usize) -> Option<(usize, usize)> {
        let (nr, _) = parse_layout(layout)?;
        let n_pad = n.next_multiple_of(nr);
        Some((k.div_ceil(2) * n_pad, n_pad / nr))
    }

    /// Packed weights stored earlier ([`PackedBf16::words`] and
    /// [`PackedBf16::panel_exps`] of a weight packed for an ISA of the same
    /// [`PackedBf16::layout`]), read in place from `buf`.
    ///
    /// # Errors
    /// A message when the sizes do not fit `n x k` for `isa` or the CPU lacks
    /// `isa`.
    pub fn from_stored(
        isa: Isa,
        n: usize,
        k: usize,
        buf: PackBuf,
        panel_exp: Vec<i16>,
    ) -> Result<PackedBf16, String> {
        if !isa.supported() {
            return Err(format!("the CPU lacks the {isa:?} bf16 kernels"));
        }
        let (words, panels) = Self::stored_lens(&Self::layout(isa), n, k)
            .ok_or_else(|| "unknown layout".to_string())?;
        if buf.as_slice().len() != words || panel_exp.len() != panels {
            return Err(format!(
                "{} packed words and {} panel exponents, expected {words} and {panels} for [{n}, {k}]",
                buf.as_slice().len(),
                panel_exp.len()
            ));
        }
        Ok(PackedBf16 {
            isa,
            k,
            n,
            n_pad: n.next_multiple_of(isa.nr()),
            buf,
            panel_exp,
        })
    }

    /// The `[n x k]` weight (each value bf16, as f32) of `words` packed in
    /// `layout` (any ISA's), for packing again for other kernels; `None` for
    /// an unknown layout or a wrong length.
    pub fn unpack(layout: &str, words: &[u32], n: usize, k: usize) -> Option<Vec<f32>> {
        let (nr, kc) = parse_layout(layout)?;
        let mut w = vec![0f32; n * k];
        super::for_each_in_panels(words, k.div_ceil(2), n, nr, kc, |j, q, word| {
            let (row, p) = (&mut w[j * k..(j + 1) * k], 2 * q);
            row[p] = f32::from_bits(word & 0xffff_0000);
            if p + 1 < k {
                row[p + 1] = f32::from_bits(word << 16);
            }
        })?;
        Some(w)
    }

    /// Per column panel, the smallest biased exponent of its values (what
    /// [`PackedBf16::from_stored`] takes back).
    pub fn panel_exps(&self) -> &[i16] {
        &self.panel_exp
    }

    /// Whether the packed words are read in place from a file.
    pub fn is_shared(&self) -> bool {
        self.buf.is_shared()
    }

    /// The kernel family this was packed for ([`product`] runs it).
    pub fn isa(&self) -> Isa {
        self.isa
    }

    /// Rows of B (inputs of the layer).
    pub fn k(&self) -> usize {
        self.k
    }

    /// Columns of B (outputs of the layer).
    pub fn n(&self) -> usize {
        self.n
    }

    /// Bytes of the packed copy.
    pub fn bytes(&self) -> usize {
        self.k.div_ceil(2) * self.n_pad * 4
    }

    /// The packed words (what [`PackedBf16::from_stored`] takes back).
    pub fn words(&self) -> &[u32] {
        let f = self.buf.as_slice();
        // SAFETY: u32 and f32 have the same size and alignment and every bit
        // pattern is valid for both; the slice borrows `self.buf`.
        unsafe { std::slice::from_raw_parts(f.as_ptr().cast::<u32>(), f.len()) }
    }

    /// `round_bf16_operand(B[p][j])`, read back from the packed layout.
    #[cfg(test)]
    fn at(&self, p: usize, j: usize) -> u16 {
        let (nr, kcb) = (self.isa.nr(), self.isa.kc());
        let (q, kp) = (p / 2, self.k.div_ceil(2));
        let q0 = q / kcb * kcb;
        let kc = kcb.min(kp - q0);
        let j0 = j / nr * nr;
        let w = self.words()[q0 * self.n_pad + j0 * kc + (q - q0) * nr + (j - j0)];
        if p.is_multiple_of(2) {
            (w >> 16) as u16
        } else {
            w as u16
        }
    }
}

/// `(nr, kc)` of a [`PackedBf16::layout`] name.
fn parse_layout(layout: &str) -> Option<(usize, usize)> {
    super::parse_panel_layout(layout, "bf16")
}

/// The words of a packing buffer, writable.
fn words_mut(buf: &mut PackBuf) -> &mut [u32] {
    let f = buf.as_mut_slice();
    // SAFETY: as in `PackedBf16::words`; the mutable borrow of `buf` makes
    // this the only view of the memory.
    unsafe { std::slice::from_raw_parts_mut(f.as_mut_ptr().cast::<u32>(), f.len()) }
}

thread_local! {
    /// The rounded A of the current product (words) and the per-row exponent
    /// bounds, kept between calls (taken out while in use, so that a product
    /// run by a work-stealing thread inside another gets its own).
    static SCRATCH: Cell<(Vec<u32>, Vec<i16>)> = const { Cell::new((Vec::new(), Vec::new())) };
}

#[cfg(test)]
thread_local! {
    /// Tiles of the calling thread that an FMA emulation handed to the scalar
    /// oracle (tests only: the fast path's coverage, timing-free).
    static FALLBACK_TILES: Cell<usize> = const { Cell::new(0) };
}

/// `C[m x n] (+)= round_bf16_operand(A)[m x k] · B`, then `epi(j0, row)` on
/// every finished row segment; `n = b.n()`, `k = b.k()`, A and C row-major with
/// row strides `lda` and `ldc`. Every element equals [`dot_oracle`] of its
/// row of A and column of B, both rounded by [`round_bf16_operand`] (from its
/// old value when `accumulate`, else from 0) bit for bit, whatever `m`, the ISA or `par`; `Par::Threads(t)`
/// splits the columns into about `t` ranges.
///
/// # Panics
/// If A or C is too short for its view, rows of C overlap, or the CPU lacks
/// `b.isa()`.
#[allow(clippy::too_many_arguments)]
pub fn product(
    m: usize,
    a: &[f32],
    lda: usize,
    b: &PackedBf16,
    c: &mut [f32],
    ldc: usize,
    accumulate: bool,
    epi: EpilogueFn<'_>,
    par: Par,
) {
    product_cols(m, b.n, a, lda, b, c, ldc, accumulate, epi, par);
}

/// [`product`] over the first `n` columns of B only (`n <= b.n()`): the
/// same values as the full product's first `n` columns.
///
/// # Panics
/// As [`product`]'s, and if `n` exceeds B's columns.
#[allow(clippy::too_many_arguments)]
pub fn product_cols(
    m: usize,
    n: usize,
    a: &[f32],
    lda: usize,
    b: &PackedBf16,
    c: &mut [f32],
    ldc: usize,
    accumulate: bool,
    epi: EpilogueFn<'_>,
    par: Par,
) {
    assert!(n <= b.n, "bgemm: {n} columns of {}", b.n);
    let (isa, k) = (b.isa, b.k);
    assert!(isa.supported(), "bgemm: {isa:?} kernels need CPU support");
    assert!(a.len() >= span(m, k, lda), "bgemm: A too short");
    assert!(m <= 1 || lda >= k, "bgemm: A rows overlap");
    assert!(c.len() >= span(m, n, ldc), "bgemm: C too short");
    assert!(m <= 1 || ldc >= n, "bgemm: C rows overlap");
    if m == 0 || n == 0 {
        return;
    }
    let kp = k.div_ceil(2);
    // Row stride of the rounded A in words: pairs, or floats.
    let lda_w = if isa.a_pairs() { kp } else { 2 * kp };
    let nr = isa.nr();
    let tasks = driver::column_tasks(n, nr, par, m * n * k);
    let split = tasks > 1;
    let (mut aw, mut rexp) = SCRATCH.take();
    // Every word and bound in use is written below: no need to clear.
    if aw.len() < m * lda_w {
        aw.resize(m * lda_w, 0);
    }
    if rexp.len() < m {
        rexp.resize(m, 255);
    }
    let (awm, rexpm) = (&mut aw[..m * lda_w], &mut rexp[..m]);
    if split && m >= 2 * tasks {
        let rows = m.div_ceil(tasks);
        awm.par_chunks_mut(rows * lda_w)
            .zip(rexpm.par_chunks_mut(rows))
            .enumerate()
            .for_each(|(t, (out, e))| prepare_a(isa, k, &a[t * rows * lda..], lda, out, lda_w, e));
    } else {
        prepare_a(isa, k, a, lda, awm, lda_w, rexpm);
    }
    if accumulate && !isa.a_pairs() {
        // A row of C holding a denormal (read as zero by vdpbf16ps, not by
        // fma) takes the exact path; one holding normal values below 2^-103
        // needs the stronger bound EXP_SUM_SAFE_TINY_C (always met: see
        // the module docs).
        for (i, e) in rexpm.iter_mut().enumerate() {
            let row = &c[i * ldc..i * ldc + n];
            // The smallest nonzero magnitude, minus 1 (zeros wrap to the
            // top; branch-free, so that it vectorises).
            let smallest = row
                .iter()
                .map(|v| (v.to_bits() & 0x7FFF_FFFF).wrapping_sub(1))
                .min()
                .unwrap_or(u32::MAX);
            if smallest < 0x0080_0000 - 1 {
                *e = i16::MIN / 2;
            } else if smallest < C_TINY_BITS - 1 {
                *e -= EXP_SUM_SAFE_TINY_C - EXP_SUM_SAFE;
            }
        }
    }
    let ops = Bf16Operands {
        kernel: isa.kernel(),
        a: awm,
        lda: lda_w,
        a_step: if isa.a_pairs() { 1 } else { 2 },
        rexp: rexpm,
        b,
    };
    // SAFETY: the ISA is supported; the rounded A holds m rows of lda_w
    // words and their bounds; C was bounds-checked above.
    unsafe { driver::product(&ops, m, n, c, ldc, accumulate, epi, tasks) };
    if aw.capacity() * 4 <= SCRATCH_KEEP_BYTES {
        SCRATCH.set((aw, rexp));
    }
}

/// Rounds the first `rexp.len()` rows of the `k` columns of A (row stride
/// `lda`) into `out` (row stride `lda_w` words) as the variant's descriptor
/// says ([`RoundA`]): bf16 pairs, element `2q` in the high half of word `q`
/// (`vdpbf16ps`), or the rounded values as floats, with the smallest biased
/// exponent of each row in `rexp`.
/// The element after an odd `k` is zero.
fn prepare_a(
    isa: Isa,
    k: usize,
    a: &[f32],
    lda: usize,
    out: &mut [u32],
    lda_w: usize,
    rexp: &mut [i16],
) {
    let round = &isa.kernel().round_a;
    for i in 0..rexp.len() {
        let src = &a[i * lda..i * lda + k];
        let dst = &mut out[i * lda_w..(i + 1) * lda_w];
        match *round {
            // SAFETY: the ISA is supported (checked by `product`), so the
            // CPU has the rounding's features; dst holds k.div_ceil(2) words.
            RoundA::Pairs(pairs) => unsafe { pairs(src, dst) },
            RoundA::Floats(floats) => {
                // SAFETY: as above; dst holds 2 · k.div_ceil(2) words.
                rexp[i] = unsafe { floats(src, dst) };
                if k % 2 == 1 {
                    dst[k] = 0;
                }
            }
        }
    }
}

/// Runs the `h`-row kernel of `isa` on a full-width tile.
///
/// # Safety
/// As [`Kernel`]'s functions, for `isa` (supported) and `1 <= h <= isa.mr()`;
/// `isa` is not [`Isa::Scalar`].
#[allow(clippy::too_many_arguments)]
unsafe fn run_kernel(
    isa: Isa,
    h: usize,
    kp: usize,
    a: *const u32,
    lda: usize,
    b: *const u32,
    c: *mut f32,
    ldc: usize,
    load: bool,
    next: *const u32,
) {
    // SAFETY: forwarded contract.
    unsafe { isa.kernel().tiles[h - 1](kp, a, lda, b, c, ldc, load, next) }
}

/// The bf16 product's operands for the [`driver`]: the rounded A
/// ([`prepare_a`]) with its row bounds, B packed.
struct Bf16Operands<'a> {
    kernel: &'static BKernel,
    /// The rounded A: `m` rows of `lda` words.
    a: &'a [u32],
    lda: usize,
    /// Words of A per pair: 1 (bf16 pairs) or 2 (floats).
    a_step: usize,
    rexp: &'a [i16],
    b: &'a PackedBf16,
}

/// One bf16 panel: its words, where the next one lies (for prefetching),
/// and the smallest biased exponent of its values.
struct Bf16Panel {
    b: *const u32,
    next: *const u32,
    exp: i16,
}

impl driver::Operands for Bf16Operands<'_> {
    type Panel = Bf16Panel;

    fn prepare(&self) {
        self.b.isa.prepare();
    }

    #[inline(always)]
    fn blocking(&self) -> Blocking {
        let kernel = self.kernel;
        Blocking {
            mr: kernel.mr,
            nr: kernel.nr,
            kc: kernel.kc,
            depth: self.b.k.div_ceil(2),
            mc: driver::MC,
            epilogue: EpilogueAt::Panel,
        }
    }

    #[inline(always)]
    unsafe fn panel(&self, q0: usize, kc: usize, j0: usize, _: usize, _: *mut f32) -> Bf16Panel {
        let nr = self.kernel.nr;
        // Packed panels follow each other in memory; the panel lies inside
        // the packed words (see `PackedBf16::from_linear`).
        let b = self
            .b
            .words()
            .as_ptr()
            .wrapping_add(q0 * self.b.n_pad + j0 * kc);
        Bf16Panel {
            b,
            next: b.wrapping_add(kc * nr),
            exp: self.b.panel_exp[j0 / nr],
        }
    }

    #[inline(always)]
    unsafe fn tile(
        &self,
        panel: &Bf16Panel,
        q0: usize,
        kc: usize,
        row0: usize,
        h: usize,
        c: CTile<'_>,
    ) {
        let kernel = self.kernel;
        let (lda, bp, next) = (self.lda, panel.b, panel.next);
        let ap = self.a.as_ptr().wrapping_add(row0 * lda + q0 * self.a_step);
        let fast = !kernel.tiles.is_empty()
            && (matches!(kernel.round_a, RoundA::Pairs(_))
                || self.rexp[row0..row0 + h]
                    .iter()
                    .min()
                    .copied()
                    .unwrap_or(255)
                    + panel.exp
                    >= EXP_SUM_SAFE);
        if !fast {
            #[cfg(test)]
            if !kernel.tiles.is_empty() {
                FALLBACK_TILES.set(FALLBACK_TILES.get() + 1);
            }
            let (cp, ldc, w, load) = c.in_place();
            // SAFETY: rows row0..row0+h < m of A have the floats of pairs
            // q0..q0+kc; the panel holds kc·nr words; C rows row0..row0+h
            // have columns j0..j0+w in this task's range.
            unsafe { generic::bgemm::tile_exact(kc, ap, lda, bp, kernel.nr, cp, ldc, h, w, load) };
        } else {
            let tile = kernel.tiles[h - 1];
            // SAFETY: as above; `full_width` hands the kernel h rows of nr
            // writable floats (C's, or a tile buffer's); the ISA is supported
            // and not scalar (fast is false for it).
            unsafe { c.full_width(|cp, ldc, load| tile(kc, ap, lda, bp, cp, ldc, load, next)) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[cfg(target_arch = "x86_64")]
    use crate::kernels::arch::x86_64;

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

    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }

        /// A bf16 with a random sign and mantissa and a biased exponent in
        /// `e0..e0 + span`.
        #[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
        fn bf16(&mut self, e0: u16, span: u16) -> u16 {
            let x = self.next();
            ((x >> 63) as u16) << 15 | (e0 + (x >> 32) as u16 % span) << 7 | (x >> 8) as u16 & 0x7F
        }

        /// An f32 with a random sign and mantissa and a biased exponent in
        /// `e0..e0 + span`.
        fn f32(&mut self, e0: u32, span: u32) -> f32 {
            let x = self.next();
            f32::from_bits((x as u32 & 0x807F_FFFF) | (e0 + (x >> 40) as u32 % span) << 23)
        }
    }

    fn same(x: f32, y: f32) -> bool {
        x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan())
    }

    /// `vdpbf16ps` on 16 lanes.
    ///
    /// # Safety
    /// AVX512_BF16 and AVX-512F are available.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f,avx512bf16")]
    unsafe fn hw_dpbf16(src: &[f32; 16], a: &[u32; 16], b: &[u32; 16]) -> [f32; 16] {
        use std::arch::x86_64::*;
        let mut out = [0.0f32; 16];
        // SAFETY: 16-element arrays; the transmutes reinterpret integer
        // vectors as bf16 vectors.
        unsafe {
            let va: __m512bh = std::mem::transmute(_mm512_loadu_si512(a.as_ptr().cast()));
            let vb: __m512bh = std::mem::transmute(_mm512_loadu_si512(b.as_ptr().cast()));
            let r = _mm512_dpbf16_ps(_mm512_loadu_ps(src.as_ptr()), va, vb);
            _mm512_storeu_ps(out.as_mut_ptr(), r);
        }
        out
    }

    /// The oracle of one lane: the high halves (elements 2q) first.
    #[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
    fn oracle_lane(s: f32, a: u32, b: u32) -> f32 {
        dot_oracle(
            s,
            &[(a >> 16) as u16, a as u16],
            &[(b >> 16) as u16, b as u16],
        )
    }

    /// The hardware instruction equals the oracle on random lanes across
    /// magnitudes (normal values, products and accumulators near the
    /// denormal boundary, denormal operands and accumulators, infinities and
    /// NaN), near-cancellations, and directed cases of the flush rule.
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn vdpbf16ps_is_the_oracle() {
        if !Isa::by_name("avx512bf16").is_some_and(Isa::supported) {
            eprintln!("no AVX512_BF16 here: skipped");
            return;
        }
        let mut r = Rng(0x1234_5678_9ABC_DEF1);
        let mut lanes = 0usize;
        let mut check = |src: [f32; 16], a: [u32; 16], b: [u32; 16]| {
            // SAFETY: AVX512_BF16 checked above.
            let h = unsafe { hw_dpbf16(&src, &a, &b) };
            for l in 0..16 {
                let want = oracle_lane(src[l], a[l], b[l]);
                assert!(
                    same(h[l], want),
                    "src {:08x} a {:08x} b {:08x}: hw {:08x} oracle {:08x}",
                    src[l].to_bits(),
                    a[l],
                    b[l],
                    h[l].to_bits(),
                    want.to_bits()
                );
            }
            lanes += 16;
        };
        // (bf16 exponent base, span, accumulator exponent base, span)
        let modes: [(u16, u16, u32, u32); 9] = [
            (124, 7, 124, 7),   // around 1
            (117, 20, 117, 20), // wider
            (0, 256, 0, 256),   // anything: denormals, infinities, NaN
            (1, 4, 0, 4),       // near the denormal boundary
            (0, 3, 124, 7),     // denormal operands
            (60, 8, 0, 4),      // products around 2^-126, tiny accumulators
            (60, 8, 1, 3),
            (60, 8, 124, 7),
            (124, 7, 0, 2), // denormal accumulators
        ];
        for (mi, &(e0, es, s0, ss)) in modes.iter().enumerate() {
            for it in 0..20_000 {
                let mut src = [0.0f32; 16];
                let (mut a, mut b) = ([0u32; 16], [0u32; 16]);
                for l in 0..16 {
                    src[l] = r.f32(s0, ss);
                    a[l] = (r.bf16(e0, es) as u32) << 16 | r.bf16(e0, es) as u32;
                    b[l] = (r.bf16(e0, es) as u32) << 16 | r.bf16(e0, es) as u32;
                    if it % 3 == 0 {
                        // Make the first product nearly cancel the accumulator.
                        let p = bf16_to_f32((a[l] >> 16) as u16) * bf16_to_f32((b[l] >> 16) as u16);
                        if p.is_finite() {
                            let d = (r.next() % 5) as f32 - 2.0;
                            src[l] = -p * (1.0 + d * f32::EPSILON);
                        }
                    }
                }
                check(src, a, b);
            }
            let _ = mi;
        }
        // The flush band: accumulators just above 2^-126 and products that
        // bring the exact sum to just below it, with sub-ulp bits.
        for it in 0..100_000u64 {
            let sign = if it % 2 == 0 { 1.0f32 } else { -1.0 };
            let mut src = [0.0f32; 16];
            let (mut a, mut b) = ([0u32; 16], [0u32; 16]);
            for l in 0..16 {
                src[l] = sign * f32::from_bits(0x0080_0000 + (r.next() % 4) as u32);
                let ea = 60 + (r.next() % 10) as i32;
                let x = 2f32.powi(-ea) * (1.0 + (r.next() % 128) as f32 / 128.0);
                let y = 2f32.powi(ea - 150 + (r.next() % 3) as i32)
                    * (1.0 + (r.next() % 128) as f32 / 128.0)
                    * if r.next().is_multiple_of(2) {
                        1.0
                    } else {
                        -1.0
                    };
                let (x, y) = (round_bf16(x) as u32, round_bf16(y) as u32);
                // Alternate the pair slot that carries the product.
                if l % 2 == 0 {
                    (a[l], b[l]) = (x << 16, y << 16);
                } else {
                    (a[l], b[l]) = (x, y);
                }
            }
            check(src, a, b);
        }
        // Directed: (accumulator, a, b) in the high slot.
        let p2 = |e: i32| 2f32.powi(e);
        let min = f32::MIN_POSITIVE;
        // A flushed -0 becomes +0 in the second step (+0 · +0 in the low slot).
        let cases: &[(f32, f32, f32, u32)] = &[
            // -(2^-126 - 2^-152) is not tiny after rounding: -2^-126.
            (-min, p2(-76), p2(-76), 0x8080_0000),
            // -(2^-126 - 2^-151): the tie rounds to -2^-126.
            (-min, p2(-75), p2(-76), 0x8080_0000),
            // -(2^-126 - 0.75·2^-150): fma gives -2^-126, the hardware -0.
            (-min, p2(-75), 1.5 * p2(-76), 0x0000_0000),
            (-min, p2(-75), p2(-75), 0x0000_0000),
            // 2^-125 - 1.5·2^-126 = 2^-127: flushed.
            (2.0 * min, -1.5 * min, 1.0, 0x0000_0000),
            // Exact zeros: +0 in round to nearest.
            (1.0, 1.0, -1.0, 0x0000_0000),
            // Denormal accumulator and operand read as zero.
            (f32::from_bits(1), 1.0, 0.0, 0x0000_0000),
            (1.0, f32::from_bits(0x0001_0000), p2(100), 0x3F80_0000),
            // Overflow.
            (f32::MAX, p2(103), 1.0, 0x7F80_0000),
            (f32::MAX, -p2(103), 1.0, 0x7F7F_FFFE),
        ];
        for &(s, x, y, want) in cases {
            let (x, y) = (x.to_bits() >> 16, y.to_bits() >> 16);
            let mut src = [0.0f32; 16];
            src[0] = s;
            let (mut a, mut b) = ([0u32; 16], [0u32; 16]);
            (a[0], b[0]) = (x << 16, y << 16);
            // SAFETY: AVX512_BF16 checked above.
            let h = unsafe { hw_dpbf16(&src, &a, &b) };
            assert_eq!(h[0].to_bits(), want, "directed {s:e} {x:04x} {y:04x}");
            check(src, a, b);
        }
        eprintln!("{lanes} lanes equal to the oracle");
    }

    #[test]
    fn round_bf16_edges() {
        assert_eq!(round_bf16(1.0), 0x3F80);
        assert_eq!(round_bf16(-2.5), 0xC020);
        // Ties to even, and above the tie.
        assert_eq!(round_bf16(f32::from_bits(0x3F80_8000)), 0x3F80);
        assert_eq!(round_bf16(f32::from_bits(0x3F81_8000)), 0x3F82);
        assert_eq!(round_bf16(f32::from_bits(0x3F80_8001)), 0x3F81);
        // Overflow to infinity, infinities, NaN made quiet.
        assert_eq!(round_bf16(f32::MAX), 0x7F80);
        assert_eq!(round_bf16(-f32::MAX), 0xFF80);
        assert_eq!(round_bf16(f32::INFINITY), 0x7F80);
        assert_eq!(round_bf16(f32::from_bits(0x7F80_0001)), 0x7FC0);
        assert_eq!(round_bf16(f32::from_bits(0xFFC1_2345)), 0xFFC1);
        // Subnormals flush to a signed zero; the smallest normal stays.
        assert_eq!(round_bf16(f32::from_bits(0x007F_FFFF)), 0x0000);
        assert_eq!(round_bf16(f32::from_bits(0x8000_0001)), 0x8000);
        assert_eq!(round_bf16(f32::MIN_POSITIVE), 0x0080);
        assert_eq!(bf16_to_f32(0x3F80), 1.0);
    }

    /// Bit patterns for the conversion tests: a spread of all 2^32 (step 251)
    /// and edge cases (zeros, subnormals, the smallest normal, the flush
    /// bound and its neighbours, the largest finite, infinities, NaN), each
    /// with both signs and with the rounding bit flipped; odd length.
    fn conversion_inputs() -> Vec<f32> {
        let mut xs: Vec<f32> = (0..1u64 << 32)
            .step_by(251)
            .map(|b| f32::from_bits(b as u32))
            .collect();
        for b in [
            0u32,
            1,
            0x007F_FFFF,
            0x0080_0000,
            OPERAND_FLUSH_BITS - 1,
            OPERAND_FLUSH_BITS - 0x8000,
            OPERAND_FLUSH_BITS,
            OPERAND_FLUSH_BITS + 1,
            0x7F7F_FFFF,
            0x7F80_0000,
            0x7F80_0001,
        ] {
            for s in [0, 0x8000_0000] {
                xs.push(f32::from_bits(b | s));
                xs.push(f32::from_bits((b | s) ^ 0x8000));
            }
        }
        if xs.len().is_multiple_of(2) {
            xs.push(3.0);
        }
        xs
    }

    /// Plain `vcvtneps2bf16` on 16 lanes.
    ///
    /// # Safety
    /// AVX512_BF16 and AVX-512F are available.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f,avx512bf16")]
    unsafe fn hw_cvtneps(x: &[f32; 16]) -> [u16; 16] {
        use std::arch::x86_64::*;
        // SAFETY: a 16-element array; the transmute reinterprets a bf16
        // vector as 16 u16 (no invalid bit patterns).
        unsafe {
            std::mem::transmute::<__m256bh, [u16; 16]>(_mm512_cvtneps_pbh(_mm512_loadu_ps(
                x.as_ptr(),
            )))
        }
    }

    /// `round_bf16` equals `vcvtneps2bf16` and the conversion of A on
    /// AVX512_BF16 (flush, then `vcvtneps2bf16`) equals `round_bf16_operand`,
    /// on a spread of all 2^32 bit patterns (all of them were checked once,
    /// outside the test suite, for `round_bf16`) and on edge cases.
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn round_bf16_is_vcvtneps2bf16() {
        if !Isa::by_name("avx512bf16").is_some_and(Isa::supported) {
            eprintln!("no AVX512_BF16 here: skipped");
            return;
        }
        let xs = conversion_inputs();
        for chunk in xs.chunks(16) {
            let mut x = [0.0f32; 16];
            x[..chunk.len()].copy_from_slice(chunk);
            // SAFETY: AVX512_BF16 checked above.
            let h = unsafe { hw_cvtneps(&x) };
            for (l, &v) in chunk.iter().enumerate() {
                assert_eq!(h[l], round_bf16(v), "{:08x}", v.to_bits());
            }
        }
        // Odd lengths exercise the masked tail.
        assert_eq!(xs.len() % 2, 1);
        let mut w = vec![0u32; xs.len().div_ceil(2)];
        // SAFETY: AVX512_BF16 (with AVX512VL) checked above; w holds
        // xs.len().div_ceil(2) words.
        unsafe { x86_64::avx512bf16::round_pairs(&xs, &mut w) };
        for (p, &x) in xs.iter().enumerate() {
            let got = if p % 2 == 0 {
                w[p / 2] >> 16
            } else {
                w[p / 2] & 0xFFFF
            };
            assert_eq!(got as u16, round_bf16_operand(x), "{:08x}", x.to_bits());
        }
        assert_eq!(w.last().unwrap() & 0xFFFF, 0, "padding");
    }

    /// The operand rounding: flushes below 2^-40 on the fp32 input (even
    /// where round to nearest would reach 2^-40), keeps the sign, and is
    /// `round_bf16` elsewhere; the vector flush of the AVX512_BF16 path
    /// followed by `round_bf16` equals it (runs wherever AVX-512F does).
    #[test]
    fn operand_rounding_flushes_below_the_bound() {
        assert_eq!(OPERAND_MIN, 2f32.powi(-40));
        assert_eq!(round_bf16_operand(OPERAND_MIN), 0x2B80);
        assert_eq!(round_bf16_operand(-OPERAND_MIN), 0xAB80);
        // Just below: round_bf16 gives 2^-40, the operand rounding zero.
        let below = f32::from_bits(OPERAND_FLUSH_BITS - 1);
        assert_eq!(round_bf16(below), 0x2B80);
        assert_eq!(round_bf16_operand(below), 0x0000);
        assert_eq!(round_bf16_operand(-below), 0x8000);
        for e in [-41, -60, -100, -120, -126] {
            let x = 2f32.powi(e);
            assert_ne!(round_bf16(x), 0);
            assert_eq!(round_bf16_operand(x), 0x0000, "2^{e}");
            assert_eq!(round_bf16_operand(-x), 0x8000, "-2^{e}");
        }
        assert_eq!(round_bf16_operand(f32::from_bits(1)), 0x0000);
        assert_eq!(round_bf16_operand(f32::INFINITY), 0x7F80);
        assert_eq!(round_bf16_operand(f32::from_bits(0xFFC1_2345)), 0xFFC1);
        let xs = conversion_inputs();
        for &x in &xs {
            if x.is_nan() || x.abs() >= OPERAND_MIN {
                assert_eq!(round_bf16_operand(x), round_bf16(x), "{:08x}", x.to_bits());
            }
        }
        #[cfg(target_arch = "x86_64")]
        if Isa::by_name("avx512").is_some_and(Isa::supported) {
            /// # Safety
            /// AVX-512F is available.
            #[target_feature(enable = "avx512f")]
            unsafe fn flush16(x: &[f32; 16]) -> [f32; 16] {
                use std::arch::x86_64::*;
                let mut out = [0.0f32; 16];
                // SAFETY: 16-element arrays; AVX-512F (contract).
                unsafe {
                    let y = x86_64::avx512::bgemm::flush_small(_mm512_loadu_ps(x.as_ptr()));
                    _mm512_storeu_ps(out.as_mut_ptr(), y);
                }
                out
            }
            for chunk in xs.chunks(16) {
                let mut x = [0.0f32; 16];
                x[..chunk.len()].copy_from_slice(chunk);
                // SAFETY: AVX-512F checked above.
                let y = unsafe { flush16(&x) };
                for (l, &v) in chunk.iter().enumerate() {
                    assert_eq!(
                        round_bf16(y[l]),
                        round_bf16_operand(v),
                        "{:08x}",
                        v.to_bits()
                    );
                }
            }
        }
    }

    /// The supported families (the product runs the one B was packed for).
    fn isas() -> Vec<Isa> {
        Isa::all().filter(|i| i.supported()).collect()
    }

    /// A row of A or a column of B (row of W) rounded as the product's
    /// operands are.
    fn rounded(x: &[f32]) -> Vec<u16> {
        x.iter().map(|&v| round_bf16_operand(v)).collect()
    }

    /// Every element equals the oracle bit for bit, for every ISA, awkward
    /// shapes (partial tiles, partial panels, odd k, k across blocks), with and
    /// without accumulation, through an epilogue that adds a bias; columns
    /// beyond n are untouched.
    #[test]
    fn products_equal_the_oracle_bitwise() {
        let isas = isas();
        eprintln!("ISAs: {isas:?}");
        let ms: Vec<usize> = (1..=13).chain([17, 64, 65]).collect();
        for &n in &[1usize, 7, 16, 31, 32, 33, 65, 96] {
            for &k in &[1usize, 2, 3, 7, 8, 64, 384, 1536] {
                let mut w = rand_vec(n * k, 2);
                // Exact zeros and a tie of rounding.
                w[0] = 0.0;
                if n * k > 2 {
                    w[1] = f32::from_bits(0x3F80_8000);
                }
                let packed: Vec<PackedBf16> = isas
                    .iter()
                    .map(|&isa| PackedBf16::from_linear(isa, &w, n, k))
                    .collect();
                let bias = rand_vec(n, 5);
                let epi = |j0: usize, row: &mut [f32]| {
                    for (v, b) in row.iter_mut().zip(&bias[j0..]) {
                        *v += b;
                    }
                };
                let bcols: Vec<Vec<u16>> = (0..n).map(|j| rounded(&w[j * k..][..k])).collect();
                let m_max = *ms.iter().max().unwrap();
                let lda = k + 3;
                let ldc = n + 2;
                let a = rand_vec(m_max * lda, 1);
                let init = rand_vec(m_max * ldc, 3);
                for &m in &ms {
                    for acc in [false, true] {
                        let want: Vec<f32> = (0..m * ldc)
                            .map(|x| {
                                let (i, j) = (x / ldc, x % ldc);
                                if j >= n {
                                    return init[x];
                                }
                                let c0 = if acc { init[x] } else { 0.0 };
                                let ar = rounded(&a[i * lda..][..k]);
                                dot_oracle(c0, &ar, &bcols[j]) + bias[j]
                            })
                            .collect();
                        for pb in &packed {
                            let mut c = init[..m * ldc].to_vec();
                            product(m, &a, lda, pb, &mut c, ldc, acc, &epi, Par::Serial);
                            for (x, (g, e)) in c.iter().zip(&want).enumerate() {
                                assert_eq!(
                                    g.to_bits(),
                                    e.to_bits(),
                                    "{:?} {m}x{n}x{k} acc {acc} ({}, {})",
                                    pb.isa(),
                                    x / ldc,
                                    x % ldc
                                );
                            }
                        }
                    }
                }
            }
        }
    }

    /// Tiny operands (far GELU tails, tiny weights: flushed by the operand
    /// rounding), operands near the flush bound with tiny, denormal or
    /// ordinary C when accumulating, and directed sums give the oracle's bits
    /// on every ISA.
    #[test]
    fn tiny_values_flush_like_the_hardware() {
        let mut r = Rng(77);
        let (m, n, k) = (29usize, 40usize, 70usize);
        for round in 0..9 {
            let a: Vec<f32> = (0..m * k)
                .map(|x| match (round, x % 7) {
                    (0, _) => r.f32(60, 10),
                    (1, 0) => r.f32(20, 10),
                    (2, _) => r.f32(1, 4),
                    (6..=8, _) => r.f32(84, 8),
                    _ => r.f32(120, 10),
                })
                .collect();
            let w: Vec<f32> = (0..n * k)
                .map(|x| match (round, x % 5) {
                    (0, _) => r.f32(60, 10),
                    (1, _) => r.f32(100, 10),
                    (2, _) => r.f32(120, 10),
                    (3, 0) => r.f32(1, 30),
                    (6..=8, _) => r.f32(84, 8),
                    _ => r.f32(120, 10),
                })
                .collect();
            let init: Vec<f32> = (0..m * n)
                .map(|x| match (round, x % 3) {
                    (0, _) | (2, _) => 0.0,
                    (4, 0) | (7, 0) => f32::from_bits(r.next() as u32 & 0x807F_FFFF),
                    (4, _) | (5, _) | (6, _) => r.f32(1, 30),
                    (7, _) => r.f32(20, 10),
                    _ => r.f32(120, 10),
                })
                .collect();
            check_all(m, n, k, &a, &w, &init, &format!("round {round}"));
        }
        // Directed. Operands below 2^-40 are zeros: C = -2^-126 stays, where
        // plain rounding would have given products that flush it to -0
        // (0.75·2^-150 gained), or leave it (2^-152, the tie 2^-151).
        let (m, n, k) = (3usize, 3usize, 2usize);
        let (t75, t76) = (2f32.powi(-75), 2f32.powi(-76));
        let a = vec![0.0, t75, 0.0, t76, t75, 0.0];
        let w = vec![1.5 * t76, 1.5 * t76, t76, t76, 0.0, 0.0];
        let init = vec![-f32::MIN_POSITIVE; m * n];
        let (got, _) = check_all(m, n, k, &a, &w, &init, "directed flushed operands");
        assert!(got.iter().all(|v| v.to_bits() == 0x8080_0000));
        // A tiny normal C absorbed by a product of operands at the bound
        // (2^-80 + 2^-110 rounds to 2^-80), which the next one cancels: +0,
        // on the fast path. A denormal C is read as zero: the product then
        // gives exactly 2^-80 - 2^-80 = +0 as well, through the fallback.
        let t40 = OPERAND_MIN;
        let a = vec![t40, t40];
        let w = vec![t40, -t40];
        for (c0, fallback) in [(2f32.powi(-110), false), (f32::from_bits(5), true)] {
            let (got, fb) = check_all(1, 1, 2, &a, &w, &[c0], "directed tiny C");
            assert_eq!(got[0].to_bits(), 0, "{c0:e}");
            assert_eq!(fb > 0, fallback, "{c0:e}");
        }
    }

    /// A product of the model's FFN down-projection shape whose A holds exact
    /// GELU outputs, with far tails (2^-100, 2^-120, denormals) in every row
    /// next to ordinary values, and whose weights include tiny ones: every
    /// ISA equals the oracle and no tile leaves the fast path, with or
    /// without accumulation (including onto C values below 2^-103); a
    /// denormal in C does send its row's tiles to the oracle.
    #[test]
    fn gelu_tails_stay_on_the_fast_path() {
        /// erfc(x) for x >= 0 with relative error around 1e-7 (Numerical
        /// Recipes' Chebyshev fit), enough to produce GELU-like tails.
        fn erfc(x: f64) -> f64 {
            let t = 1.0 / (1.0 + 0.5 * x);
            let p = -x * x - 1.265_512_23
                + t * (1.000_023_68
                    + t * (0.374_091_96
                        + t * (0.096_784_18
                            + t * (-0.186_288_06
                                + t * (0.278_868_07
                                    + t * (-1.135_203_98
                                        + t * (1.488_515_87
                                            + t * (-0.822_152_23 + t * 0.170_872_77))))))));
            t * p.exp()
        }
        fn gelu(x: f64) -> f32 {
            // x·Φ(x), Φ(x) = erfc(-x/√2)/2 (for x < 0; 1 - that above).
            let z = x.abs() / std::f64::consts::SQRT_2;
            let phi = if x < 0.0 {
                0.5 * erfc(z)
            } else {
                1.0 - 0.5 * erfc(z)
            };
            (x * phi) as f32
        }
        let (m, n, k) = (26usize, 96usize, 1536usize);
        let mut r = Rng(4242);
        let mut a: Vec<f32> = (0..m * k)
            .map(|_| {
                // Pre-activations mostly in -4..3, a fifth far out (-14..-9).
                let u = (r.next() >> 11) as f64 / (1u64 << 53) as f64;
                let x = if r.next().is_multiple_of(5) {
                    -14.0 + 5.0 * u
                } else {
                    -4.0 + 7.0 * u
                };
                gelu(x)
            })
            .collect();
        for i in 0..m {
            let row = &mut a[i * k..(i + 1) * k];
            for (p, v) in [
                2f32.powi(-100),
                -2f32.powi(-120),
                2f32.powi(-126),
                f32::from_bits(3),
                -2f32.powi(-41),
                OPERAND_MIN,
            ]
            .into_iter()
            .enumerate()
            {
                row[(i * 37 + p * 211) % k] = v;
            }
        }
        let tails = a
            .iter()
            .filter(|v| **v != 0.0 && v.abs() < OPERAND_MIN)
            .count();
        let plain_min = a.iter().map(|&v| exp_key(round_bf16(v))).min().unwrap();
        assert!(tails > m * k / 10, "{tails} tails");
        assert!(plain_min < 30, "plain rounding keeps 2^-100-ish values");
        let mut w: Vec<f32> = rand_vec(n * k, 31).iter().map(|v| v * 0.08).collect();
        for (x, v) in w.iter_mut().enumerate().step_by(97) {
            *v = match x % 4 {
                0 => 1e-13,
                1 => -2f32.powi(-60),
                2 => f32::from_bits(0x8000_0007),
                _ => 2f32.powi(-41),
            };
        }
        let zeros = vec![0.0f32; m * n];
        let ordinary = rand_vec(m * n, 32);
        let tiny: Vec<f32> = (0..m * n).map(|x| r.f32(1 + (x % 23) as u32, 3)).collect();
        for (init, what) in [
            (&zeros, "zero C"),
            (&ordinary, "ordinary C"),
            (&tiny, "C below 2^-103"),
        ] {
            let (_, fb) = check_all(m, n, k, &a, &w, init, what);
            assert_eq!(fb, 0, "{what}: fallback tiles");
        }
        let mut one_denormal = ordinary.clone();
        one_denormal[5 * n + 17] = f32::from_bits(0x0000_1234);
        let (_, fb) = check_all(m, n, k, &a, &w, &one_denormal, "a denormal C");
        let emulated = isas()
            .iter()
            .filter(|&&i| !i.a_pairs() && !i.kernel().tiles.is_empty())
            .count();
        assert!(fb >= emulated, "{fb} fallback tiles");
    }

    /// Accumulating products of every ISA equal the oracle; returns C and the
    /// number of tiles the FMA emulations handed to the scalar oracle.
    fn check_all(
        m: usize,
        n: usize,
        k: usize,
        a: &[f32],
        w: &[f32],
        init: &[f32],
        what: &str,
    ) -> (Vec<f32>, usize) {
        let none = |_: usize, _: &mut [f32]| {};
        let mut want = init.to_vec();
        for i in 0..m {
            let ar = rounded(&a[i * k..][..k]);
            for j in 0..n {
                want[i * n + j] = dot_oracle(init[i * n + j], &ar, &rounded(&w[j * k..][..k]));
            }
        }
        let fallbacks0 = FALLBACK_TILES.get();
        for isa in isas() {
            let pb = PackedBf16::from_linear(isa, w, n, k);
            let mut c = init.to_vec();
            product(m, a, k, &pb, &mut c, n, true, &none, Par::Serial);
            for (x, (g, e)) in c.iter().zip(&want).enumerate() {
                assert!(
                    same(*g, *e),
                    "{what} {isa:?} ({}, {}): {g:e} vs {e:e}",
                    x / n,
                    x % n
                );
            }
        }
        (want, FALLBACK_TILES.get() - fallbacks0)
    }

    /// A row computed alone equals the same row inside a batch at any offset,
    /// and column splits across threads give the same bits as one thread.
    #[test]
    fn rows_and_splits_are_invariant() {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(2)
            .build()
            .unwrap();
        let none = |_: usize, _: &mut [f32]| {};
        for isa in isas() {
            for &(n, k) in &[(96usize, 384usize), (65, 7), (384, 1536)] {
                let w = rand_vec(n * k, 11);
                let pb = PackedBf16::from_linear(isa, &w, n, k);
                let m = 251;
                let a = rand_vec(m * k, 12);
                let init = rand_vec(m * n, 13);
                for acc in [false, true] {
                    let mut batch = init.clone();
                    product(m, &a, k, &pb, &mut batch, n, acc, &none, Par::Serial);
                    for i in [0usize, 1, 11, 12, 13, 239, 240, 250] {
                        let mut one = init[i * n..(i + 1) * n].to_vec();
                        product(1, &a[i * k..], k, &pb, &mut one, n, acc, &none, Par::Serial);
                        assert!(
                            one.iter()
                                .zip(&batch[i * n..])
                                .all(|(x, y)| x.to_bits() == y.to_bits()),
                            "{isa:?} row {i} {n}x{k} acc {acc}"
                        );
                    }
                    for par in [Par::Threads(2), Par::Threads(3)] {
                        let mut c = init.clone();
                        pool.install(|| product(m, &a, k, &pb, &mut c, n, acc, &none, par));
                        assert!(
                            c.iter()
                                .zip(&batch)
                                .all(|(x, y)| x.to_bits() == y.to_bits()),
                            "{isa:?} {par:?} {n}x{k} acc {acc}"
                        );
                    }
                }
            }
        }
    }

    /// The packed layout holds round_bf16_operand(W[j][p]) and reports its
    /// size.
    #[test]
    fn packed_layout_reads_back() {
        for isa in isas() {
            for &(n, k) in &[(1usize, 1usize), (33, 385), (70, 800)] {
                let w = rand_vec(n * k, 21);
                let pb = PackedBf16::from_linear(isa, &w, n, k);
                assert_eq!((pb.n(), pb.k(), pb.isa()), (n, k, isa));
                assert_eq!(pb.bytes(), k.div_ceil(2) * n.next_multiple_of(isa.nr()) * 4);
                assert_eq!(pb.words().as_ptr() as usize % 64, 0);
                for p in 0..k {
                    for j in 0..n {
                        assert_eq!(
                            pb.at(p, j),
                            round_bf16_operand(w[j * k + p]),
                            "{isa:?} {p} {j}"
                        );
                    }
                }
            }
        }
        // k = 0 and an empty product.
        let pb = PackedBf16::from_linear(Isa::by_name("none").unwrap(), &[], 5, 0);
        let mut c = vec![1.0f32; 10];
        product(2, &[], 0, &pb, &mut c, 5, true, &|_, _| {}, Par::Serial);
        assert!(c.iter().all(|&v| v == 1.0));
        product(2, &[], 0, &pb, &mut c, 5, false, &|_, _| {}, Par::Serial);
        assert!(c.iter().all(|&v| v == 0.0));
    }

    #[test]
    fn isa_is_supported() {
        assert!(isa().supported());
        assert_eq!(isa(), isa());
    }
}

/// Speed on the model's shapes, bf16 (every supported ISA) vs the f32
/// `sgemm` over pre-packed weights, one thread:
/// `cargo test --release --lib bgemm::speed -- --ignored --nocapture`
#[cfg(test)]
mod speed {
    use super::*;
    use crate::kernels::sgemm;
    use crate::kernels::thread_cpu_seconds as cpu;

    fn best(mut f: impl FnMut(), flops: f64) -> f64 {
        let mut b = f64::INFINITY;
        for _ in 0..7 {
            let t = cpu();
            let mut reps = 0;
            while cpu() - t < 0.05 {
                f();
                reps += 1;
            }
            b = b.min((cpu() - t) / reps as f64);
        }
        flops / b / 1e9
    }

    #[test]
    #[ignore]
    fn speed() {
        let none = |_: usize, _: &mut [f32]| {};
        let t = std::time::Instant::now();
        let best_isa = isa();
        eprintln!(
            "bgemm::isa() = {best_isa:?} (detected in {:?})",
            t.elapsed()
        );
        for (k, n) in [(384usize, 1152usize), (384, 384), (384, 1536), (1536, 384)] {
            let m = 256;
            let a: Vec<f32> = (0..m * k).map(|i| (i % 7) as f32 * 0.25 - 0.5).collect();
            let w: Vec<f32> = (0..n * k).map(|i| (i % 5) as f32 * 0.125 - 0.25).collect();
            let mut c = vec![0.0f32; m * n];
            let fl = 2.0 * (m * n * k) as f64;
            let mut line = format!("m {m} k {k:>4} n {n:>4}:");
            {
                let sisa = sgemm::isa();
                let pf = sgemm::PackedB::new(sisa, k, n, &sgemm::Transposed { w: &w, ldw: k });
                let g = best(
                    || {
                        sgemm::product(
                            sisa,
                            m,
                            n,
                            k,
                            &a,
                            k,
                            &pf,
                            &mut c,
                            n,
                            false,
                            &none,
                            Par::Serial,
                        )
                    },
                    fl,
                );
                line += &format!(" f32 {g:6.1}");
            }
            for isa in Isa::all() {
                if !isa.supported() || isa.kernel().tiles.is_empty() {
                    continue;
                }
                let t = cpu();
                let pb = PackedBf16::from_linear(isa, &w, n, k);
                let pack_ms = (cpu() - t) * 1e3;
                let g = best(
                    || product(m, &a, k, &pb, &mut c, n, false, &none, Par::Serial),
                    fl,
                );
                line += &format!(" | {isa:?} {g:6.1} (pack {pack_ms:.1} ms)");
            }
            eprintln!("{line} GFLOP/s");
        }
    }
}
