//! The engine's own single-precision GEMM for x86-64 with AVX2 + FMA:
//! `C (+)= A · B` with A row-major and B described by a [`BSource`] (the
//! weights of a `Linear` layer in their native `[out, in]` layout, or a plain
//! row-major matrix), packed on the fly into small panels, a 6 x 16 register
//! tile, and an epilogue applied per tile while it is still in cache.
//!
//! # Arithmetic, and why it gives batch invariance
//!
//! Every element of C is computed by one sequential chain of fused
//! multiply-adds over `k` in increasing order, starting from 0 (or from the
//! old value of C when accumulating): `c = fma(a[i][p], b[p][j], c)` for
//! `p = 0, 1, ..., k-1`. Blocking of `k` only stores the running value to C
//! and reloads it, which is exact. So `C[i][j]` depends on row `i` of A,
//! column `j` of B and nothing else: not on `m`, `n`, the tile shape, the
//! position of the row or column inside a tile, padding, or how the columns
//! are split between threads. [`fma_chain`] is that definition written in
//! scalar code; the tests check the kernels against it bit for bit.
//!
//! # Memory
//!
//! Each thread that runs a product keeps one packing buffer (thread-local,
//! allocated on first use and reused): an A block of at most [`MC`] x [`KC`]
//! floats and one B panel of [`KC`] x [`NR`] floats, about 380 KiB.

use std::cell::RefCell;

/// Rows of the register tile.
pub const MR: usize = 6;
/// Columns of the register tile.
pub const NR: usize = 16;
/// Depth of one packed block (all of K = 384; a quarter of K = 1536).
pub const KC: usize = 384;
/// Rows of A packed at once (a multiple of [`MR`]).
pub const MC: usize = 240;

/// Whether the optimised kernels can run on this CPU (AVX2 and FMA).
pub fn available() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        use std::sync::atomic::{AtomicU8, Ordering};
        static STATE: AtomicU8 = AtomicU8::new(0);
        match STATE.load(Ordering::Relaxed) {
            1 => true,
            2 => false,
            _ => {
                let ok = std::is_x86_feature_detected!("avx2")
                    && std::is_x86_feature_detected!("fma")
                    && std::env::var_os("EMBD_NO_SIMD").is_none();
                STATE.store(if ok { 1 } else { 2 }, Ordering::Relaxed);
                ok
            }
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
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

    /// Writes rows `p0..p0 + kc` and columns `j0..j0 + nr` (`nr <= NR`) of B
    /// into `dst` as `kc` rows of [`NR`] floats, zero in columns `nr..NR`.
    ///
    /// # Safety
    /// The view must have been checked with [`BSource::check`] for some
    /// `k >= p0 + kc` and `n >= j0 + nr`; `dst` holds at least `kc * NR` floats.
    unsafe fn pack(&self, p0: usize, kc: usize, j0: usize, nr: usize, dst: *mut f32);
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

fn span(rows: usize, cols: usize, ld: usize) -> usize {
    if rows == 0 || cols == 0 {
        0
    } else {
        (rows - 1) * ld + cols
    }
}

impl BSource for Transposed<'_> {
    fn check(&self, k: usize, n: usize) {
        assert!(n <= 1 || self.ldw >= k, "sgemm: W rows overlap");
        assert!(self.w.len() >= span(n, k, self.ldw), "sgemm: W too short");
    }

    unsafe fn pack(&self, p0: usize, kc: usize, j0: usize, nr: usize, dst: *mut f32) {
        let src = self.w.as_ptr();
        // SAFETY: forwarded contract: rows j0..j0+nr of W exist with columns
        // p0..p0+kc, and dst holds kc * NR floats.
        unsafe { pack_transposed(src, self.ldw, p0, kc, j0, nr, dst) }
    }
}

impl BSource for RowMajor<'_> {
    fn check(&self, k: usize, n: usize) {
        assert!(k <= 1 || self.ldb >= n, "sgemm: B rows overlap");
        assert!(self.b.len() >= span(k, n, self.ldb), "sgemm: B too short");
    }

    unsafe fn pack(&self, p0: usize, kc: usize, j0: usize, nr: usize, dst: *mut f32) {
        let src = self.b.as_ptr();
        for p in 0..kc {
            // SAFETY: B[p0 + p][j0..j0 + nr] lies inside the checked view and
            // row p of dst has NR floats (contract of `pack`).
            unsafe {
                let s = src.add((p0 + p) * self.ldb + j0);
                let d = dst.add(p * NR);
                std::ptr::copy_nonoverlapping(s, d, nr);
                std::ptr::write_bytes(d.add(nr), 0, NR - nr);
            }
        }
    }
}

/// Several `Linear` weights side by side along n (e.g. Q, K and V): segment
/// `s` covers columns `[s·seg_n, (s+1)·seg_n)` of B, each `W` being
/// `[seg_n x k]` with row stride `k`. `seg_n` must be a multiple of [`NR`] so
/// that no panel straddles two segments.
pub struct Stacked<'a> {
    /// The weights, in column order.
    pub ws: &'a [&'a [f32]],
    /// Output features per segment.
    pub seg_n: usize,
    /// Input features (row length of every segment).
    pub k: usize,
}

impl BSource for Stacked<'_> {
    fn check(&self, k: usize, n: usize) {
        assert!(
            self.seg_n % NR == 0,
            "sgemm: segment width not a multiple of NR"
        );
        assert!(n <= self.seg_n * self.ws.len(), "sgemm: too many columns");
        assert!(k == self.k, "sgemm: segment depth mismatch");
        for w in self.ws {
            assert!(w.len() >= self.seg_n * self.k, "sgemm: segment too short");
        }
    }

    unsafe fn pack(&self, p0: usize, kc: usize, j0: usize, nr: usize, dst: *mut f32) {
        let s = j0 / self.seg_n;
        // SAFETY: `check` proved every segment holds seg_n rows of k
        // floats and p0 + kc <= k; j0 - s·seg_n + nr <= seg_n because panels
        // never straddle segments.
        unsafe {
            pack_transposed(
                self.ws[s].as_ptr(),
                self.k,
                p0,
                kc,
                j0 - s * self.seg_n,
                nr,
                dst,
            )
        }
    }
}

/// Packs `W[j0..j0+nr][p0..p0+kc]` transposed into `dst` (`kc` rows of NR).
///
/// # Safety
/// Those elements of `w` (row stride `ldw`) exist; `dst` holds `kc * NR` floats.
unsafe fn pack_transposed(
    w: *const f32,
    ldw: usize,
    p0: usize,
    kc: usize,
    j0: usize,
    nr: usize,
    dst: *mut f32,
) {
    let mut p = 0;
    #[cfg(target_arch = "x86_64")]
    if nr == NR && available() {
        // SAFETY: AVX2 is available; the caller's contract covers the reads and
        // writes of the full 16 x (kc rounded down to 8) block.
        unsafe { pack_transposed_avx2(w, ldw, p0, kc & !7, j0, dst) };
        p = kc & !7;
    }
    for pp in p..kc {
        for jj in 0..NR {
            // SAFETY: row j0 + jj < j0 + nr, column p0 + pp < p0 + kc are inside
            // W; dst row pp has NR floats.
            unsafe {
                *dst.add(pp * NR + jj) = if jj < nr {
                    *w.add((j0 + jj) * ldw + p0 + pp)
                } else {
                    0.0
                };
            }
        }
    }
}

/// The 16-row case of [`pack_transposed`] for `kc` a multiple of 8, by 8 x 8
/// register transposes.
///
/// # Safety
/// AVX2 is available; rows `j0..j0+16`, columns `p0..p0+kc` of W exist; dst
/// holds `kc * 16` floats.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn pack_transposed_avx2(
    w: *const f32,
    ldw: usize,
    p0: usize,
    kc: usize,
    j0: usize,
    dst: *mut f32,
) {
    use std::arch::x86_64::*;
    for half in 0..2 {
        // SAFETY: see the function contract; every load reads 8 floats of a row
        // j0 + half*8 + r (r < 8) at columns p0 + p .. p0 + p + 8 <= p0 + kc, and
        // every store writes 8 floats of dst row p + q < kc at column half*8.
        unsafe {
            let base = w.add((j0 + half * 8) * ldw + p0);
            let mut p = 0;
            while p < kc {
                let r = |i: usize| _mm256_loadu_ps(base.add(i * ldw + p));
                let (r0, r1, r2, r3) = (r(0), r(1), r(2), r(3));
                let (r4, r5, r6, r7) = (r(4), r(5), r(6), r(7));
                let t0 = _mm256_unpacklo_ps(r0, r1);
                let t1 = _mm256_unpackhi_ps(r0, r1);
                let t2 = _mm256_unpacklo_ps(r2, r3);
                let t3 = _mm256_unpackhi_ps(r2, r3);
                let t4 = _mm256_unpacklo_ps(r4, r5);
                let t5 = _mm256_unpackhi_ps(r4, r5);
                let t6 = _mm256_unpacklo_ps(r6, r7);
                let t7 = _mm256_unpackhi_ps(r6, r7);
                let s0 = _mm256_shuffle_ps::<0x44>(t0, t2);
                let s1 = _mm256_shuffle_ps::<0xEE>(t0, t2);
                let s2 = _mm256_shuffle_ps::<0x44>(t1, t3);
                let s3 = _mm256_shuffle_ps::<0xEE>(t1, t3);
                let s4 = _mm256_shuffle_ps::<0x44>(t4, t6);
                let s5 = _mm256_shuffle_ps::<0xEE>(t4, t6);
                let s6 = _mm256_shuffle_ps::<0x44>(t5, t7);
                let s7 = _mm256_shuffle_ps::<0xEE>(t5, t7);
                let d = dst.add(p * NR + half * 8);
                _mm256_storeu_ps(d, _mm256_permute2f128_ps::<0x20>(s0, s4));
                _mm256_storeu_ps(d.add(NR), _mm256_permute2f128_ps::<0x20>(s1, s5));
                _mm256_storeu_ps(d.add(2 * NR), _mm256_permute2f128_ps::<0x20>(s2, s6));
                _mm256_storeu_ps(d.add(3 * NR), _mm256_permute2f128_ps::<0x20>(s3, s7));
                _mm256_storeu_ps(d.add(4 * NR), _mm256_permute2f128_ps::<0x31>(s0, s4));
                _mm256_storeu_ps(d.add(5 * NR), _mm256_permute2f128_ps::<0x31>(s1, s5));
                _mm256_storeu_ps(d.add(6 * NR), _mm256_permute2f128_ps::<0x31>(s2, s6));
                _mm256_storeu_ps(d.add(7 * NR), _mm256_permute2f128_ps::<0x31>(s3, s7));
                p += 8;
            }
        }
    }
}

/// Packs rows `i0..i0+mc` (zero beyond `m`), columns `p0..p0+kc` of A into
/// `dst` as consecutive tiles of `kc` rows of [`MR`] floats.
///
/// # Safety
/// Rows `i0..min(i0+mc, m)` of A (row stride `lda`) have columns `p0..p0+kc`;
/// dst holds `mc.next_multiple_of(MR) * kc` floats.
#[allow(clippy::too_many_arguments)]
unsafe fn pack_a(
    a: *const f32,
    lda: usize,
    m: usize,
    i0: usize,
    mc: usize,
    p0: usize,
    kc: usize,
    dst: *mut f32,
) {
    let tiles = mc.div_ceil(MR);
    for t in 0..tiles {
        let d = unsafe_add(dst, t * MR * kc);
        for r in 0..MR {
            let i = i0 + t * MR + r;
            if i < m && t * MR + r < mc {
                // SAFETY: row i < m exists with columns p0..p0+kc; dst tile t
                // has kc rows of MR floats.
                unsafe {
                    let s = a.add(i * lda + p0);
                    for p in 0..kc {
                        *d.add(p * MR + r) = *s.add(p);
                    }
                }
            } else {
                for p in 0..kc {
                    // SAFETY: inside dst tile t (contract).
                    unsafe { *d.add(p * MR + r) = 0.0 };
                }
            }
        }
    }
}

#[inline(always)]
fn unsafe_add(p: *mut f32, n: usize) -> *mut f32 {
    p.wrapping_add(n)
}

/// The 6 x 16 register tile: `C[0..6][0..16] = (load ? C : 0) + Apanel · Bpanel`
/// over `kc` steps, one FMA chain per element.
///
/// # Safety
/// AVX2 and FMA are available; `a` holds `kc * MR` floats, `b` `kc * NR`, and
/// C has 6 rows of 16 writable floats at row stride `ldc`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn kernel_6x16(
    kc: usize,
    a: *const f32,
    b: *const f32,
    c: *mut f32,
    ldc: usize,
    load: bool,
) {
    use std::arch::x86_64::*;
    // SAFETY: all accesses stay inside the panels and the C tile (contract).
    unsafe {
        let z = _mm256_setzero_ps();
        let (mut c00, mut c01, mut c10, mut c11, mut c20, mut c21) = (z, z, z, z, z, z);
        let (mut c30, mut c31, mut c40, mut c41, mut c50, mut c51) = (z, z, z, z, z, z);
        if load {
            let l = |i: usize, h: usize| _mm256_loadu_ps(c.add(i * ldc + h * 8));
            (c00, c01, c10, c11, c20, c21) = (l(0, 0), l(0, 1), l(1, 0), l(1, 1), l(2, 0), l(2, 1));
            (c30, c31, c40, c41, c50, c51) = (l(3, 0), l(3, 1), l(4, 0), l(4, 1), l(5, 0), l(5, 1));
        }
        let mut a = a;
        let mut b = b;
        for _ in 0..kc {
            let b0 = _mm256_loadu_ps(b);
            let b1 = _mm256_loadu_ps(b.add(8));
            let a0 = _mm256_broadcast_ss(&*a);
            c00 = _mm256_fmadd_ps(a0, b0, c00);
            c01 = _mm256_fmadd_ps(a0, b1, c01);
            let a1 = _mm256_broadcast_ss(&*a.add(1));
            c10 = _mm256_fmadd_ps(a1, b0, c10);
            c11 = _mm256_fmadd_ps(a1, b1, c11);
            let a2 = _mm256_broadcast_ss(&*a.add(2));
            c20 = _mm256_fmadd_ps(a2, b0, c20);
            c21 = _mm256_fmadd_ps(a2, b1, c21);
            let a3 = _mm256_broadcast_ss(&*a.add(3));
            c30 = _mm256_fmadd_ps(a3, b0, c30);
            c31 = _mm256_fmadd_ps(a3, b1, c31);
            let a4 = _mm256_broadcast_ss(&*a.add(4));
            c40 = _mm256_fmadd_ps(a4, b0, c40);
            c41 = _mm256_fmadd_ps(a4, b1, c41);
            let a5 = _mm256_broadcast_ss(&*a.add(5));
            c50 = _mm256_fmadd_ps(a5, b0, c50);
            c51 = _mm256_fmadd_ps(a5, b1, c51);
            a = a.add(MR);
            b = b.add(NR);
        }
        let s = |i: usize, h: usize, v: __m256| _mm256_storeu_ps(c.add(i * ldc + h * 8), v);
        s(0, 0, c00);
        s(0, 1, c01);
        s(1, 0, c10);
        s(1, 1, c11);
        s(2, 0, c20);
        s(2, 1, c21);
        s(3, 0, c30);
        s(3, 1, c31);
        s(4, 0, c40);
        s(4, 1, c41);
        s(5, 0, c50);
        s(5, 1, c51);
    }
}

/// Floats of the per-thread packing buffer (plus slack for 64-byte alignment).
const PACK_FLOATS: usize = MC * KC + KC * NR + 16;

thread_local! {
    static PACK: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
}

/// A raw pointer to C that may cross threads (each task writes its own
/// column range).
#[derive(Clone, Copy)]
pub(crate) struct CPtr(pub(crate) *mut f32);

// SAFETY: used only by `super::gemm` to hand disjoint column ranges of one
// exclusively borrowed C to rayon tasks that join before the borrow ends.
unsafe impl Send for CPtr {}
// SAFETY: as above.
unsafe impl Sync for CPtr {}

/// `C[0..m][j_lo..j_hi] (+)= A · B[.., j_lo..j_hi]`, then `epi(j0, row)` on each
/// finished row segment of at most NR columns starting at column `j0`.
///
/// # Safety
/// AVX2/FMA available ([`available`]); A (row stride `lda`) has `m` rows of
/// `k` floats; `b` was checked with `check(k, n)` and `j_hi <= n`;
/// C has `m` rows of `ldc` floats, columns `j_lo..j_hi` writable and not
/// accessed by anyone else during the call.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn gemm_cols<B: BSource + ?Sized>(
    m: usize,
    k: usize,
    a: *const f32,
    lda: usize,
    b: &B,
    c: CPtr,
    ldc: usize,
    j_lo: usize,
    j_hi: usize,
    accumulate: bool,
    epi: &(dyn Fn(usize, &mut [f32]) + Sync),
) {
    #[cfg(target_arch = "x86_64")]
    PACK.with(|buf| {
        let mut buf = buf.borrow_mut();
        if buf.len() < PACK_FLOATS {
            buf.resize(PACK_FLOATS, 0.0);
        }
        let base = buf.as_mut_ptr();
        let align = base.align_offset(64).min(16);
        let pa = base.wrapping_add(align);
        let pb = pa.wrapping_add(MC * KC);
        let c = c.0;
        let mut tmp = [0.0f32; MR * NR];
        let k_blocks = k.div_ceil(KC).max(1);
        for kb in 0..k_blocks {
            let p0 = kb * KC;
            let kc = KC.min(k - p0.min(k));
            let load = accumulate || kb > 0;
            let last = kb + 1 == k_blocks;
            let mut i0 = 0;
            while i0 < m {
                let mc = MC.min(m - i0);
                // SAFETY: rows i0..i0+mc < m of A exist with k columns; the A
                // area of the buffer holds MC*KC >= mc.next_multiple_of(MR)*kc.
                unsafe { pack_a(a, lda, m, i0, mc, p0, kc, pa) };
                let mut j0 = j_lo;
                while j0 < j_hi {
                    let nr = NR.min(j_hi - j0);
                    // SAFETY: columns j0..j0+nr <= n and rows p0..p0+kc <= k of
                    // B are inside the checked view; the B area holds KC*NR.
                    unsafe { b.pack(p0, kc, j0, nr, pb) };
                    let mut i = 0;
                    while i < mc {
                        let mr = MR.min(mc - i);
                        let ap = pa.wrapping_add(i * kc);
                        let cp = c.wrapping_add((i0 + i) * ldc + j0);
                        if mr == MR && nr == NR {
                            // SAFETY: the A tile and B panel hold kc*MR and
                            // kc*NR floats; C rows i0+i..i0+i+6 < m have columns
                            // j0..j0+16 <= j_hi inside this task's range.
                            unsafe { kernel_6x16(kc, ap, pb, cp, ldc, load) };
                        } else {
                            if load {
                                for r in 0..mr {
                                    for jj in 0..nr {
                                        // SAFETY: row i0+i+r < m, column j0+jj < j_hi.
                                        tmp[r * NR + jj] = unsafe { *cp.add(r * ldc + jj) };
                                    }
                                }
                            }
                            // SAFETY: as above, writing into the local tile.
                            unsafe { kernel_6x16(kc, ap, pb, tmp.as_mut_ptr(), NR, load) };
                            for r in 0..mr {
                                for jj in 0..nr {
                                    // SAFETY: row i0+i+r < m, column j0+jj < j_hi.
                                    unsafe { *cp.add(r * ldc + jj) = tmp[r * NR + jj] };
                                }
                            }
                        }
                        i += MR;
                    }
                    if last {
                        for r in 0..mc {
                            // SAFETY: row i0+r < m, columns j0..j0+nr of this
                            // task's range; no other reference to them exists.
                            let row = unsafe {
                                std::slice::from_raw_parts_mut(
                                    c.wrapping_add((i0 + r) * ldc + j0),
                                    nr,
                                )
                            };
                            epi(j0, row);
                        }
                    }
                    j0 += NR;
                }
                i0 += MC;
            }
        }
    });
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (m, k, a, lda, b, c, ldc, j_lo, j_hi, accumulate, epi);
        unreachable!("sgemm::gemm_cols without x86-64");
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
        if !available() {
            eprintln!("no AVX2/FMA: skipped");
            return;
        }
        for &m in &SIZES {
            for &n in &[1usize, 7, 15, 16, 17, 33, 65] {
                for &k in &[0usize, 1, 7, 8, 9, 17, 384, 385, 800] {
                    let a = rand_vec(m * (k + 3), 1);
                    let lda = k + 3;
                    let w = rand_vec(n * k, 2);
                    let init = rand_vec(m * (n + 2), 3);
                    for acc in [false, true] {
                        let mut c = init.clone();
                        gemm::linear(
                            &a[..],
                            m,
                            k,
                            &w,
                            n,
                            &mut c,
                            n + 2,
                            acc,
                            gemm::Epilogue::None,
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
                    gemm::matmul_nn(m, n, k, 1.0, &a, lda, &bm, ldb, 0.0, &mut c, n, Par::Serial);
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
        gemm::matmul_nt(m, n, k, 1.0, &a, k, &w, k, 0.0, &mut c, n, Par::Serial);
        let want = reference::matmul_nt(m, n, k, &a, &w);
        for (g, e) in c.iter().zip(&want) {
            assert!((g - e).abs() <= 1e-5 * (k as f32).sqrt(), "{g} vs {e}");
        }
    }

    #[test]
    fn stacked_equals_separate_layers_and_splits_are_invariant() {
        if !available() {
            return;
        }
        let (k, n) = (384, 384);
        let ws: Vec<Vec<f32>> = (0..3).map(|s| rand_vec(n * k, 10 + s)).collect();
        let bs: Vec<Vec<f32>> = (0..3).map(|s| rand_vec(n, 20 + s)).collect();
        let wr: Vec<&[f32]> = ws.iter().map(Vec::as_slice).collect();
        let br: Vec<&[f32]> = bs.iter().map(Vec::as_slice).collect();
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(2)
            .build()
            .unwrap();
        for m in [1usize, 6, 19, 250, 481] {
            let x = rand_vec(m * k, 30);
            let mut sep = vec![0.0f32; m * 3 * n];
            for s in 0..3 {
                gemm::linear(
                    &x,
                    m,
                    k,
                    wr[s],
                    n,
                    &mut sep[s * n..],
                    3 * n,
                    false,
                    gemm::Epilogue::Bias(br[s]),
                    Par::Serial,
                );
            }
            for par in [Par::Serial, Par::Threads(2), Par::Threads(3)] {
                let mut st = vec![0.0f32; m * 3 * n];
                pool.install(|| gemm::linear_stacked(&x, m, k, &wr, &br, n, &mut st, 3 * n, par));
                assert!(
                    st.iter().zip(&sep).all(|(a, b)| a.to_bits() == b.to_bits()),
                    "m {m} {par:?}"
                );
            }
        }
    }
}

/// GEMM speed on the model's shapes, own kernels vs `matrixmultiply`:
/// `cargo test --release --lib sgemm::speed -- --ignored --nocapture`
#[cfg(test)]
mod speed {
    use crate::kernels::{gemm, Par};

    fn cpu() -> f64 {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: `ts` is a valid, writable timespec.
        unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
        ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
    }

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
