//! The engine's own single-precision GEMM for x86-64: `C (+)= A · B` with A
//! row-major and B described by a [`BSource`] (the weights of a `Linear` layer
//! in their native `[out, in]` layout, several of them side by side, or a plain
//! row-major matrix). Panels of B are packed on the fly (nothing is repacked
//! at load), A is read in place, and a register-tile kernel runs per tile:
//! 6 x 16 with AVX2 + FMA, 12 x 32 with AVX-512F when the CPU has it. An
//! epilogue (bias, GELU, scaling) runs on each finished tile while it is in
//! cache.
//!
//! # Arithmetic, and why it gives batch invariance
//!
//! Every element of C is computed by one sequential chain of fused
//! multiply-adds over `k` in increasing order, starting from 0 (or from the
//! old value of C when accumulating): `c = fma(a[i][p], b[p][j], c)` for
//! `p = 0, 1, ..., k-1`. Blocking of `k` only stores the running value to C
//! and reloads it, which is exact. So `C[i][j]` depends on row `i` of A,
//! column `j` of B and nothing else: not on `m`, `n`, the tile shape or ISA,
//! the position of the row or column inside a tile, padding, or how the
//! columns are split between threads. [`fma_chain`] is that definition in
//! scalar code; the tests check both kernels against it bit for bit.
//!
//! # Memory
//!
//! Each thread that runs a product keeps one packing buffer (thread-local,
//! allocated on first use and reused): one B panel of at most 384 x 32 floats,
//! 48 KiB, used only when B is not pre-packed ([`PackedB`]). A is read in
//! place; a last tile of fewer rows runs a kernel of that many rows.

use std::sync::Arc;

pub(crate) use super::arch::types::SKernel;
#[cfg(target_arch = "x86_64")]
use super::arch::x86_64;
use super::driver::{self, span, Blocking, CTile, EpilogueAt};
use super::packbuf::PackBuf;
use super::Par;

/// Rows of A swept per B panel (a multiple of every kernel's tile height; the
/// rows' current k block stays in L2).
pub const MC: usize = driver::MC;
/// Widths of [`Stacked`] segments must be multiples of this (every kernel's
/// tile width divides it), so that no panel straddles two segments.
pub const SEGMENT_ALIGN: usize = 32;
/// The widest panel and deepest block of any f32 kernel: the size of the
/// packing buffer.
const MAX_NR: usize = 32;
const MAX_KC: usize = 384;

/// A row of f32 kernels (see [`isa`](super::isa)).
pub use super::isa::F32Isa as Isa;

impl Isa {
    /// Tile height.
    pub fn mr(self) -> usize {
        self.kernel().mr
    }

    /// Tile width.
    pub fn nr(self) -> usize {
        self.kernel().nr
    }

    /// Depth of one packed block (the B panel, `kc x nr`, stays in L1).
    pub fn kc(self) -> usize {
        self.kernel().kc
    }
}

/// The f32 kernels of this process: the best row of the table this CPU runs
/// and `EMBD_SIMD` allows (chosen once, by [`isa::fp32`](super::isa::fp32);
/// the portable row when nothing better qualifies).
#[inline]
pub fn isa() -> Isa {
    super::isa::fp32()
}

/// The definition of one element of the product (see the module docs): a
/// sequential FMA chain. `a` yields `A[i][p]`, `b` yields `B[p][j]`.
pub fn fma_chain(init: f32, k: usize, a: impl Fn(usize) -> f32, b: impl Fn(usize) -> f32) -> f32 {
    (0..k).fold(init, |c, p| a(p).mul_add(b(p), c))
}

/// The B operand of `C = A · B` (`B` is `k x n`), able to pack panels of itself.
pub trait BSource: Sync {
    /// Panics unless a `k x n` view of the source is in bounds (called once
    /// per product, before any unchecked access).
    fn check(&self, k: usize, n: usize);

    /// Writes rows `p0..p0 + kc` and columns `j0..j0 + nr` (`nr <= w`) of B
    /// into `dst` as `kc` rows of `w` floats, zero in columns `nr..w`.
    ///
    /// # Safety
    /// The view must have been checked with [`BSource::check`] for some
    /// `k >= p0 + kc` and `n >= j0 + nr`; `dst` holds at least `kc * w`
    /// floats; `w` is 16 or 32.
    unsafe fn pack(&self, p0: usize, kc: usize, j0: usize, nr: usize, w: usize, dst: *mut f32);

    /// The panel of rows `p0..p0 + isa.kc()` (clipped to k) and columns
    /// `j0..j0 + isa.nr()` already packed in the layout [`BSource::pack`]
    /// writes (`w = isa.nr()`, zero columns beyond n), if the source holds
    /// one; `None` makes the product pack it. `p0` is a multiple of
    /// `isa.kc()` and `j0` of `isa.nr()`.
    fn packed_panel(&self, isa: Isa, p0: usize, j0: usize) -> Option<*const f32> {
        let _ = (isa, p0, j0);
        None
    }
}

/// B packed once, ahead of the products, in exactly the panel order and layout
/// the kernels of one [`Isa`] read: for each block of `kc` rows, the panels of
/// `nr` columns one after the other, each `kc x nr` floats row by row, the
/// last panel zero-padded. Products then read panels in place instead of
/// packing them per call; the values of C are the same bit for bit (only the
/// layout of B changes, not the arithmetic).
///
/// For the weights of a `Linear` layer this is a copy of the same size as the
/// weights, made once (see `model::encoder`). Several matrices packed together
/// ([`PackedB::pack_all`]) share one [`PackBuf`].
pub struct PackedB {
    isa: Isa,
    k: usize,
    n: usize,
    /// Columns rounded up to whole panels.
    n_pad: usize,
    buf: Arc<PackBuf>,
    /// Index of this matrix's first float in `buf` (64-byte aligned).
    start: usize,
}

impl std::fmt::Debug for PackedB {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PackedB")
            .field("isa", &self.isa)
            .field("k", &self.k)
            .field("n", &self.n)
            .finish()
    }
}

impl PackedB {
    /// Packs the `k x n` matrix `src` for the kernels of `isa`.
    ///
    /// # Panics
    /// If `src` is too short for a `k x n` view or the CPU lacks `isa`.
    pub fn new<B: BSource>(isa: Isa, k: usize, n: usize, src: &B) -> PackedB {
        let mut all = Self::pack_all(isa, &[(k, n, src as &dyn BSource)]);
        all.pop().expect("one matrix packed")
    }

    /// Packs several `(k, n, source)` matrices into one shared buffer, in order.
    ///
    /// # Panics
    /// As [`PackedB::new`], for any of them.
    pub fn pack_all(isa: Isa, items: &[(usize, usize, &dyn BSource)]) -> Vec<PackedB> {
        assert!(isa.supported(), "sgemm: {isa:?} kernels need CPU support");
        let nr = isa.nr();
        let mut starts = Vec::with_capacity(items.len());
        let mut total = 0usize;
        for &(k, n, src) in items {
            src.check(k, n);
            starts.push(total);
            // k · n_pad is a multiple of 16 floats: every start stays aligned.
            total += k * n.next_multiple_of(nr);
        }
        let mut buf = PackBuf::zeroed(total);
        let dst = buf.as_mut_slice();
        for (&(k, n, src), &start) in items.iter().zip(&starts) {
            Self::fill(
                isa,
                k,
                n,
                src,
                &mut dst[start..start + k * n.next_multiple_of(nr)],
            );
        }
        let buf = Arc::new(buf);
        items
            .iter()
            .zip(starts)
            .map(|(&(k, n, _), start)| PackedB {
                isa,
                k,
                n,
                n_pad: n.next_multiple_of(nr),
                buf: Arc::clone(&buf),
                start,
            })
            .collect()
    }

    /// Writes the packed layout of `src` (checked as `k x n`) into `dst`
    /// (`k · n_pad` floats).
    fn fill(isa: Isa, k: usize, n: usize, src: &dyn BSource, dst: &mut [f32]) {
        let (nr, kcb) = (isa.nr(), isa.kc());
        let n_pad = n.next_multiple_of(nr);
        assert_eq!(dst.len(), k * n_pad, "sgemm: packed area size");
        let base = dst.as_mut_ptr();
        let mut p0 = 0;
        while p0 < k {
            let kc = kcb.min(k - p0);
            let mut j0 = 0;
            while j0 < n {
                let w = nr.min(n - j0);
                // SAFETY: `src` was checked as k x n, covering rows p0..p0+kc
                // and columns j0..j0+w; the destination panel starts at
                // p0·n_pad + j0·kc and holds kc·nr floats, ending at or before
                // (p0 + kc)·n_pad <= k·n_pad = dst.len().
                unsafe { src.pack(p0, kc, j0, w, nr, base.add(p0 * n_pad + j0 * kc)) };
                j0 += nr;
            }
            p0 += kc;
        }
    }

    /// The kernel family this was packed for.
    pub fn isa(&self) -> Isa {
        self.isa
    }

    /// The name of the layout [`PackedB::floats`] has for `isa`'s kernels:
    /// two ISAs with the same name read the same floats. Stored with packed
    /// f32 weights (`model::packed`) so that a file is read in place only by
    /// kernels of that layout.
    pub fn layout(isa: Isa) -> String {
        super::panel_layout("f32", isa.nr(), isa.kc())
    }

    /// Floats in `layout` for the `k x n` matrix (the weight `[n x k]` of a
    /// layer); `None` for a layout name this build does not know.
    pub fn stored_len(layout: &str, n: usize, k: usize) -> Option<usize> {
        let (nr, _) = parse_layout(layout)?;
        k.checked_mul(n.next_multiple_of(nr))
    }

    /// Floats packed earlier ([`PackedB::floats`] of a matrix packed for an
    /// ISA of the same [`PackedB::layout`]), read in place from `buf`.
    ///
    /// # Errors
    /// A message when the size does not fit `k x n` or the CPU lacks `isa`.
    pub fn from_stored(isa: Isa, k: usize, n: usize, buf: PackBuf) -> Result<PackedB, String> {
        if !isa.supported() {
            return Err(format!("the CPU lacks the {isa:?} f32 kernels"));
        }
        let n_pad = n.next_multiple_of(isa.nr());
        if Some(buf.as_slice().len()) != k.checked_mul(n_pad) {
            return Err(format!(
                "{} packed floats, expected {} for [{n}, {k}]",
                buf.as_slice().len(),
                k.saturating_mul(n_pad)
            ));
        }
        Ok(PackedB {
            isa,
            k,
            n,
            n_pad,
            buf: Arc::new(buf),
            start: 0,
        })
    }

    /// The weight `[n x k]` (the HF layout, `Bᵀ`) of `floats` packed in
    /// `layout` (any ISA's), for packing again for other kernels; `None` for
    /// an unknown layout or a wrong length.
    pub fn unpack(layout: &str, floats: &[f32], n: usize, k: usize) -> Option<Vec<f32>> {
        let (nr, kc) = parse_layout(layout)?;
        let mut w = vec![0f32; n * k];
        super::for_each_in_panels(floats, k, n, nr, kc, |j, p, v| w[j * k + p] = v)?;
        Some(w)
    }

    /// This matrix's packed floats (`k · n_pad`, zero-padded panels).
    pub fn floats(&self) -> &[f32] {
        &self.buf.as_slice()[self.start..self.start + self.k * self.n_pad]
    }

    /// Whether the packed floats are read in place from a file.
    pub fn is_shared(&self) -> bool {
        self.buf.is_shared()
    }

    /// Bytes of this matrix's packed copy.
    pub fn bytes(&self) -> usize {
        self.k * self.n_pad * 4
    }

    /// `B[p][j]`.
    fn at(&self, p: usize, j: usize) -> f32 {
        let (nr, kcb) = (self.isa.nr(), self.isa.kc());
        let p0 = p / kcb * kcb;
        let kc = kcb.min(self.k - p0);
        let j0 = j / nr * nr;
        self.buf.as_slice()[self.start + p0 * self.n_pad + j0 * kc + (p - p0) * nr + (j - j0)]
    }
}

/// `(nr, kc)` of a [`PackedB::layout`] name.
fn parse_layout(layout: &str) -> Option<(usize, usize)> {
    super::parse_panel_layout(layout, "f32")
}

impl BSource for PackedB {
    fn check(&self, k: usize, n: usize) {
        assert!(
            k == self.k && n <= self.n,
            "sgemm: packed B is {}x{}, asked for {k}x{n}",
            self.k,
            self.n
        );
    }

    unsafe fn pack(&self, p0: usize, kc: usize, j0: usize, nr: usize, w: usize, dst: *mut f32) {
        for p in 0..kc {
            for jj in 0..w {
                let v = if jj < nr {
                    self.at(p0 + p, j0 + jj)
                } else {
                    0.0
                };
                // SAFETY: dst holds kc·w floats (contract of `pack`).
                unsafe { *dst.add(p * w + jj) = v };
            }
        }
    }

    fn packed_panel(&self, isa: Isa, p0: usize, j0: usize) -> Option<*const f32> {
        if isa != self.isa || p0 >= self.k || j0 >= self.n {
            return None;
        }
        let kc = isa.kc().min(self.k - p0);
        // The panel lies inside `buf[start..start + k·n_pad]` (see `new`).
        Some(self.buf.as_slice()[self.start + p0 * self.n_pad + j0 * kc..].as_ptr())
    }
}

/// `B = Wᵀ` for `W` in the `Linear` layout `[n x k]`, row stride `ldw`.
pub struct Transposed<'a> {
    /// The weights.
    pub w: &'a [f32],
    /// Row stride of `w` (>= k).
    pub ldw: usize,
}

/// `B` row-major `[k x n]` with row stride `ldb`.
pub struct RowMajor<'a> {
    /// The matrix.
    pub b: &'a [f32],
    /// Row stride (>= n).
    pub ldb: usize,
}

impl BSource for Transposed<'_> {
    fn check(&self, k: usize, n: usize) {
        assert!(n <= 1 || self.ldw >= k, "sgemm: W rows overlap");
        assert!(self.w.len() >= span(n, k, self.ldw), "sgemm: W too short");
    }

    unsafe fn pack(&self, p0: usize, kc: usize, j0: usize, nr: usize, w: usize, dst: *mut f32) {
        // SAFETY: forwarded contract: rows j0..j0+nr of W exist with columns
        // p0..p0+kc, and dst holds kc * w floats.
        unsafe { pack_transposed(self.w.as_ptr(), self.ldw, p0, kc, j0, nr, w, dst) }
    }
}

impl BSource for RowMajor<'_> {
    fn check(&self, k: usize, n: usize) {
        assert!(k <= 1 || self.ldb >= n, "sgemm: B rows overlap");
        assert!(self.b.len() >= span(k, n, self.ldb), "sgemm: B too short");
    }

    unsafe fn pack(&self, p0: usize, kc: usize, j0: usize, nr: usize, w: usize, dst: *mut f32) {
        let src = self.b.as_ptr();
        for p in 0..kc {
            // SAFETY: B[p0 + p][j0..j0 + nr] lies inside the checked view and
            // row p of dst has w >= nr floats (contract of `pack`).
            unsafe {
                let s = src.add((p0 + p) * self.ldb + j0);
                let d = dst.add(p * w);
                std::ptr::copy_nonoverlapping(s, d, nr);
                std::ptr::write_bytes(d.add(nr), 0, w - nr);
            }
        }
    }
}

/// Several `Linear` weights side by side along n (e.g. Q, K and V, of
/// different widths under grouped-query attention): segment `s` is `W_s`,
/// `[n_s x k]` with row stride `k` (`n_s = ws[s].len() / k`), covering the
/// columns after the segments before it. Every `n_s` must be a multiple of
/// [`SEGMENT_ALIGN`].
pub struct Stacked<'a> {
    /// The weights, in column order.
    pub ws: &'a [&'a [f32]],
    /// Input features (row length of every segment).
    pub k: usize,
}

impl Stacked<'_> {
    /// The segment holding column `j`, and its first column.
    fn segment_of(&self, j: usize) -> (usize, usize) {
        let mut start = 0;
        for (s, w) in self.ws.iter().enumerate() {
            let n = w.len() / self.k.max(1);
            if j < start + n {
                return (s, start);
            }
            start += n;
        }
        (self.ws.len(), start)
    }
}

impl BSource for Stacked<'_> {
    fn check(&self, k: usize, n: usize) {
        assert!(k == self.k && k > 0, "sgemm: segment depth mismatch");
        let mut total = 0;
        for w in self.ws {
            assert!(
                w.len().is_multiple_of(k) && (w.len() / k).is_multiple_of(SEGMENT_ALIGN),
                "sgemm: segment width not a multiple of {SEGMENT_ALIGN}"
            );
            total += w.len() / k;
        }
        assert!(n <= total, "sgemm: too many columns");
    }

    unsafe fn pack(&self, p0: usize, kc: usize, j0: usize, nr: usize, w: usize, dst: *mut f32) {
        let (s, start) = self.segment_of(j0);
        // SAFETY: `check` proved every segment holds whole rows of k floats,
        // p0 + kc <= k and j0 < n <= the columns of all segments, so segment
        // s exists; j0 - start + nr <= its width because panels (w divides
        // SEGMENT_ALIGN, which divides every width) never straddle segments.
        unsafe { pack_transposed(self.ws[s].as_ptr(), self.k, p0, kc, j0 - start, nr, w, dst) }
    }
}

/// Packs `W[j0..j0+nr][p0..p0+kc]` transposed into `dst` (`kc` rows of `w`).
///
/// # Safety
/// Those elements of `w` (row stride `ldw`) exist; `dst` holds `kc * w`
/// floats; `w` is a multiple of 8.
#[allow(clippy::too_many_arguments)]
unsafe fn pack_transposed(
    src: *const f32,
    ldw: usize,
    p0: usize,
    kc: usize,
    j0: usize,
    nr: usize,
    w: usize,
    dst: *mut f32,
) {
    // The first rows by 8 x 8 register transposes where the CPU has them.
    #[cfg(target_arch = "x86_64")]
    let p = if nr == w
        && super::isa::Features::AVX2
            .and(super::isa::Features::FMA)
            .available()
    {
        for g in 0..w / 8 {
            // SAFETY: AVX2 and FMA are available (checked); rows j0+8g..j0+8g+8 <= j0+nr
            // exist with columns p0..p0+kc; the writes stay in dst's kc rows.
            unsafe {
                x86_64::avx2::sgemm::pack_transposed_8(
                    src.add((j0 + 8 * g) * ldw + p0),
                    ldw,
                    kc & !7,
                    dst.add(8 * g),
                    w,
                )
            };
        }
        kc & !7
    } else {
        0
    };
    #[cfg(not(target_arch = "x86_64"))]
    let p = 0;
    for pp in p..kc {
        for jj in 0..w {
            // SAFETY: row j0 + jj < j0 + nr, column p0 + pp < p0 + kc are inside
            // W; dst row pp has w floats.
            unsafe {
                *dst.add(pp * w + jj) = if jj < nr {
                    *src.add((j0 + jj) * ldw + p0 + pp)
                } else {
                    0.0
                };
            }
        }
    }
}

/// The per-row-segment epilogue: `epi(j0, row)` gets the finished values of
/// one row at columns `j0..j0 + row.len()`.
pub type EpilogueFn<'a> = &'a (dyn Fn(usize, &mut [f32]) + Sync);

/// `C[m x n] (+)= A[m x k] · B`, then `epi` on every finished row segment;
/// `Par::Threads(t)` splits the columns into `t` ranges (same values).
///
/// # Panics
/// If A, B or C is too short for its view, or rows of C overlap.
#[allow(clippy::too_many_arguments)]
pub fn product<B: BSource>(
    isa: Isa,
    m: usize,
    n: usize,
    k: usize,
    a: &[f32],
    lda: usize,
    b: &B,
    c: &mut [f32],
    ldc: usize,
    accumulate: bool,
    epi: EpilogueFn<'_>,
    par: Par,
) {
    assert!(isa.supported(), "sgemm: {isa:?} kernels need CPU support");
    assert!(a.len() >= span(m, k, lda), "sgemm: A too short");
    assert!(m <= 1 || lda >= k, "sgemm: A rows overlap");
    b.check(k, n);
    assert!(c.len() >= span(m, n, ldc), "sgemm: C too short");
    assert!(m <= 1 || ldc >= n, "sgemm: C rows overlap");
    let ops = F32Operands {
        isa,
        kernel: isa.kernel(),
        k,
        a,
        lda,
        b,
    };
    let tasks = driver::column_tasks(n, isa.nr(), par, m * n * k);
    // SAFETY: the ISA is supported; A, B and C were bounds-checked above.
    unsafe { driver::product(&ops, m, n, c, ldc, accumulate, epi, tasks) }
}

/// The f32 product's operands for the [`driver`]: A read in place, B's
/// panels packed ahead ([`PackedB`]) or packed now into the driver's
/// per-thread buffer.
struct F32Operands<'a, B: ?Sized> {
    isa: Isa,
    kernel: &'static SKernel,
    k: usize,
    a: &'a [f32],
    lda: usize,
    b: &'a B,
}

impl<B: BSource + ?Sized> driver::Operands for F32Operands<'_, B> {
    /// The panel and where the next one lies (for prefetching).
    type Panel = (*const f32, *const f32);

    const PACK_FLOATS: usize = MAX_KC * MAX_NR;

    fn prepare(&self) {
        self.isa.prepare();
    }

    #[inline(always)]
    fn blocking(&self) -> Blocking {
        let kernel = self.kernel;
        Blocking {
            mr: kernel.mr,
            nr: kernel.nr,
            kc: kernel.kc,
            depth: self.k,
            mc: MC,
            epilogue: EpilogueAt::Panel,
        }
    }

    #[inline(always)]
    unsafe fn panel(
        &self,
        p0: usize,
        kc: usize,
        j0: usize,
        w: usize,
        pack: *mut f32,
    ) -> Self::Panel {
        let nr = self.kernel.nr;
        match self.b.packed_panel(self.isa, p0, j0) {
            // Packed panels follow each other in memory.
            Some(panel) => (panel, panel.wrapping_add(kc * nr)),
            None => {
                // SAFETY: columns j0..j0+w <= n and rows p0..p0+kc <= k of B
                // are inside the checked view; the buffer holds
                // MAX_KC*MAX_NR floats.
                unsafe { self.b.pack(p0, kc, j0, w, nr, pack) };
                (pack.cast_const(), pack.cast_const())
            }
        }
    }

    #[inline(always)]
    unsafe fn tile(
        &self,
        &(bp, next): &Self::Panel,
        p0: usize,
        kc: usize,
        row0: usize,
        h: usize,
        c: CTile<'_>,
    ) {
        let kernel = self.kernel.tiles[h - 1];
        // The tile of h <= mr rows reads A in place.
        let ap = self.a.as_ptr().wrapping_add(row0 * self.lda + p0);
        let lda = self.lda;
        // SAFETY: A rows row0..row0+h < m have columns p0..p0+kc; the B
        // panel holds kc*nr floats; `full_width` hands the kernel h rows of
        // nr writable floats (C's, or a tile buffer's); the CPU has the ISA.
        unsafe {
            c.full_width(|cp, ldc, load| kernel(kc, ap, lda, bp, cp, ldc, load, next));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::{gemm, reference, Par};

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

    const SIZES: [usize; 13] = [1, 2, 5, 6, 7, 8, 9, 15, 16, 17, 63, 64, 65];

    /// Every element equals its FMA chain bit for bit (and is close to the f64
    /// oracle), for `Linear` weights and row-major B, with and without
    /// accumulation, on awkward shapes and k across the KC blocking.
    #[test]
    fn products_equal_the_fma_chain_bitwise() {
        for isa in Isa::all() {
            if isa.supported() {
                check_isa(isa);
            } else {
                eprintln!("{isa:?} unsupported here: skipped");
            }
        }
    }

    fn check_isa(isa: Isa) {
        let none = |_: usize, _: &mut [f32]| {};
        for &m in &SIZES {
            for &n in &[1usize, 7, 15, 16, 17, 33, 65] {
                for &k in &[0usize, 1, 7, 8, 9, 17, 384, 385, 800] {
                    let a = rand_vec(m * (k + 3), 1);
                    let lda = k + 3;
                    let w = rand_vec(n * k, 2);
                    let init = rand_vec(m * (n + 2), 3);
                    for acc in [false, true] {
                        let mut c = init.clone();
                        let b = Transposed { w: &w, ldw: k };
                        product(
                            isa,
                            m,
                            n,
                            k,
                            &a,
                            k,
                            &b,
                            &mut c,
                            n + 2,
                            acc,
                            &none,
                            Par::Serial,
                        );
                        for i in 0..m {
                            for j in 0..n + 2 {
                                let got = c[i * (n + 2) + j];
                                let want = if j >= n {
                                    init[i * (n + 2) + j]
                                } else {
                                    let c0 = if acc { init[i * (n + 2) + j] } else { 0.0 };
                                    fma_chain(c0, k, |p| a[i * k + p], |p| w[j * k + p])
                                };
                                assert_eq!(
                                    got.to_bits(),
                                    want.to_bits(),
                                    "{m}x{n}x{k} acc {acc} ({i},{j})"
                                );
                            }
                        }
                    }
                    // Row-major B through matmul_nn with strides.
                    let ldb = n + 1;
                    let bm = rand_vec(k * ldb, 4);
                    let mut c = vec![f32::NAN; m * n];
                    let b = RowMajor { b: &bm, ldb };
                    product(
                        isa,
                        m,
                        n,
                        k,
                        &a,
                        lda,
                        &b,
                        &mut c,
                        n,
                        false,
                        &none,
                        Par::Serial,
                    );
                    for i in 0..m {
                        for j in 0..n {
                            let want = fma_chain(0.0, k, |p| a[i * lda + p], |p| bm[p * ldb + j]);
                            assert_eq!(c[i * n + j].to_bits(), want.to_bits(), "nn {m}x{n}x{k}");
                        }
                    }
                }
            }
        }
        // And against the f64 oracle.
        let (m, n, k) = (37, 50, 1536);
        let a = rand_vec(m * k, 5);
        let w = rand_vec(n * k, 6);
        let mut c = vec![0.0; m * n];
        let b = Transposed { w: &w, ldw: k };
        product(
            isa,
            m,
            n,
            k,
            &a,
            k,
            &b,
            &mut c,
            n,
            false,
            &none,
            Par::Serial,
        );
        let want = reference::matmul_nt(m, n, k, &a, &w);
        for (g, e) in c.iter().zip(&want) {
            assert!((g - e).abs() <= 1e-5 * (k as f32).sqrt(), "{g} vs {e}");
        }
    }

    #[test]
    fn stacked_equals_separate_layers_and_splits_are_invariant() {
        let k = 384;
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(2)
            .build()
            .unwrap();
        // Equal widths (BERT's Q, K, V), grouped-query widths (Q twice K and
        // V), and widths off the segment alignment (the fallback path).
        for widths in [[384usize, 384, 384], [256, 128, 128], [40, 20, 20]] {
            let total: usize = widths.iter().sum();
            let ws: Vec<Vec<f32>> = (0..3)
                .map(|s| rand_vec(widths[s] * k, 10 + s as u64))
                .collect();
            let bs: Vec<Vec<f32>> = (0..3).map(|s| rand_vec(widths[s], 20 + s as u64)).collect();
            let wr: Vec<&[f32]> = ws.iter().map(Vec::as_slice).collect();
            for m in [1usize, 6, 19, 250, 481] {
                let x = rand_vec(m * k, 30);
                let mut sep = vec![0.0f32; m * total];
                let mut c = 0;
                for s in 0..3 {
                    gemm::linear(
                        &x,
                        m,
                        k,
                        wr[s],
                        widths[s],
                        &mut sep[c..],
                        total,
                        false,
                        gemm::Epilogue::Bias(&bs[s]),
                        Par::Serial,
                    );
                    c += widths[s];
                }
                for par in [Par::Serial, Par::Threads(2), Par::Threads(3)] {
                    let mut st = vec![0.0f32; m * total];
                    let bias: Vec<f32> = bs.concat();
                    let epi = gemm::Epilogue::Bias(&bias);
                    pool.install(|| {
                        gemm::linear_stacked(&x, m, k, &wr, &mut st, total, false, epi, par)
                    });
                    assert!(
                        st.iter().zip(&sep).all(|(a, b)| a.to_bits() == b.to_bits()),
                        "widths {widths:?} m {m} {par:?}"
                    );
                }
            }
        }
    }

    /// Products over pre-packed B equal products that pack on the fly, bit for
    /// bit: every ISA, awkward m / n / k (partial panels, k across blocks),
    /// accumulation, column splits; the packed copy also reads back exactly
    /// through the fallback `pack`.
    #[test]
    fn packed_b_gives_the_same_bits() {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(2)
            .build()
            .unwrap();
        let none = |_: usize, _: &mut [f32]| {};
        for isa in Isa::all() {
            if !isa.supported() {
                eprintln!("{isa:?} unsupported here: skipped");
                continue;
            }
            for &(n, k) in &[
                (1usize, 1usize),
                (7, 9),
                (33, 17),
                (65, 385),
                (96, 800),
                (384, 1536),
            ] {
                let w = rand_vec(n * k, 40);
                let raw = Transposed { w: &w, ldw: k };
                let packed = PackedB::new(isa, k, n, &raw);
                let mut panel = vec![0.0f32; 7 * 5];
                let mut want = vec![0.0f32; 7 * 5];
                let (p0, j0) = (k / 3, n / 2);
                let (kc, nr) = (3.min(k - p0), 3.min(n - j0));
                // SAFETY: rows p0..p0+kc <= k, columns j0..j0+nr <= n, 5 >= nr
                // and the buffers hold kc * 5 floats.
                unsafe {
                    packed.pack(p0, kc, j0, nr, 5, panel.as_mut_ptr());
                    raw.pack(p0, kc, j0, nr, 5, want.as_mut_ptr());
                }
                assert_eq!(panel, want, "{isa:?} fallback pack {n}x{k}");
                // The stored layout: unpacks to the weight, and read back
                // from a buffer of its floats it is the same packed matrix.
                let layout = PackedB::layout(isa);
                assert_eq!(
                    PackedB::stored_len(&layout, n, k),
                    Some(packed.floats().len())
                );
                let back = PackedB::unpack(&layout, packed.floats(), n, k).unwrap();
                assert!(back.iter().zip(&w).all(|(a, b)| a.to_bits() == b.to_bits()));
                let mut buf = PackBuf::zeroed(packed.floats().len());
                buf.as_mut_slice().copy_from_slice(packed.floats());
                let stored = PackedB::from_stored(isa, k, n, buf).unwrap();
                assert_eq!(stored.floats(), packed.floats());
                assert!(PackedB::from_stored(isa, k + 1, n, PackBuf::zeroed(3)).is_err());
                assert!(PackedB::unpack(&layout, &packed.floats()[1..], n, k).is_none());
                assert!(PackedB::unpack("bf16-nr16-kc384", packed.floats(), n, k).is_none());
                for &m in &[1usize, 5, 12, 13, 250] {
                    let a = rand_vec(m * k, 41);
                    let init = rand_vec(m * n, 42);
                    for acc in [false, true] {
                        let mut c0 = init.clone();
                        product(
                            isa,
                            m,
                            n,
                            k,
                            &a,
                            k,
                            &raw,
                            &mut c0,
                            n,
                            acc,
                            &none,
                            Par::Serial,
                        );
                        for par in [Par::Serial, Par::Threads(2), Par::Threads(3)] {
                            let mut c1 = init.clone();
                            pool.install(|| {
                                product(isa, m, n, k, &a, k, &packed, &mut c1, n, acc, &none, par)
                            });
                            assert!(
                                c0.iter().zip(&c1).all(|(x, y)| x.to_bits() == y.to_bits()),
                                "{isa:?} {m}x{n}x{k} acc {acc} {par:?}"
                            );
                        }
                    }
                }
            }
        }
    }
}

/// GEMM speed on the model's shapes, own kernels vs `matrixmultiply`:
/// `cargo test --release --lib sgemm::speed -- --ignored --nocapture`
#[cfg(test)]
mod speed {
    use crate::kernels::{gemm, Par};

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
        for (n, k) in [(384usize, 384usize), (1152, 384), (1536, 384), (384, 1536)] {
            for m in [20usize, 64, 256, 512] {
                let a = vec![0.5f32; m * k];
                let w = vec![0.25f32; n * k];
                let mut c = vec![0.0f32; m * n];
                let fl = 2.0 * (m * n * k) as f64;
                let own = best(
                    || {
                        gemm::linear(
                            &a,
                            m,
                            k,
                            &w,
                            n,
                            &mut c,
                            n,
                            false,
                            gemm::Epilogue::None,
                            Par::Serial,
                        )
                    },
                    fl,
                );
                let mm = best(
                    || {
                        // SAFETY: a, w, c are m x k, n x k, m x n.
                        unsafe {
                            matrixmultiply::sgemm(
                                m,
                                k,
                                n,
                                1.0,
                                a.as_ptr(),
                                k as isize,
                                1,
                                w.as_ptr(),
                                1,
                                k as isize,
                                0.0,
                                c.as_mut_ptr(),
                                n as isize,
                                1,
                            )
                        }
                    },
                    fl,
                );
                eprintln!("m {m:>4} n {n:>4} k {k:>4}: own {own:6.1} GFLOP/s, matrixmultiply {mm:6.1} GFLOP/s");
            }
        }
    }
}
