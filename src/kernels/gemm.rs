//! Row-major single-precision matrix products: the engine's own AVX2+FMA
//! kernels ([`super::sgemm`]) when the CPU has them, `matrixmultiply::sgemm`
//! otherwise.
//!
//! The main entry is [`linear`]: `C = A · Wᵀ (+ bias) (+ C)` with `W` in the
//! HuggingFace `Linear` layout `[out, in]`, read in place (panels are packed on
//! the fly, nothing is transposed or copied at load); [`linear_stacked`] runs
//! several such layers over the same input in one pass (Q, K and V).
//!
//! # Row and column invariance
//!
//! With the own kernels every `C[i][j]` is one sequential FMA chain over `k`
//! (see [`super::sgemm`]). With `matrixmultiply`, A is packed in panels of
//! rows and B in panels of columns and one micro-kernel runs per tile, with a
//! fixed blocking of the `k` dimension (partial tiles are computed in full into
//! a scratch tile and copied out). Either way the value of `C[i][j]` depends
//! only on row `i` of A, column `j` of B and `k`: not on `m`, `n`, the row's
//! position or the column's position. The engine relies on this for batch
//! invariance and thread-count invariance; the unit tests below check it bit
//! for bit. Parallel products split columns ([`Par`]); the crate's `threading`
//! feature of `matrixmultiply` is not used (its global pool ignores the
//! caller's thread count).

use rayon::prelude::*;

use super::ops;
use super::sgemm;
use super::Par;

/// Number of elements a `rows x cols` view with strides `(rs, cs)` spans.
fn span(rows: usize, cols: usize, rs: usize, cs: usize) -> usize {
    if rows == 0 || cols == 0 {
        0
    } else {
        (rows - 1) * rs + (cols - 1) * cs + 1
    }
}

/// The checked arguments of one `sgemm` call.
#[derive(Clone, Copy)]
struct Strided {
    m: usize,
    k: usize,
    n: usize,
    alpha: f32,
    rsa: usize,
    csa: usize,
    rsb: usize,
    csb: usize,
    beta: f32,
    rsc: usize,
}

impl Strided {
    /// Panics (an internal invariant, never reachable from input) if a slice is
    /// too short for its view or rows of C would overlap.
    fn check(&self, a: &[f32], b: &[f32], c: &[f32]) {
        assert!(
            a.len() >= span(self.m, self.k, self.rsa, self.csa),
            "gemm: A too short"
        );
        assert!(
            b.len() >= span(self.k, self.n, self.rsb, self.csb),
            "gemm: B too short"
        );
        assert!(
            c.len() >= span(self.m, self.n, self.rsc, 1),
            "gemm: C too short"
        );
        assert!(self.m <= 1 || self.rsc >= self.n, "gemm: C rows overlap");
    }
}

/// A raw pointer to C that may be handed to worker threads, each writing its
/// own column block.
#[derive(Clone, Copy)]
struct SendPtr(*mut f32);

impl SendPtr {
    /// The pointer (a method, so closures capture the whole `Send` wrapper).
    fn get(self) -> *mut f32 {
        self.0
    }
}

// SAFETY: `SendPtr` is only used inside `gemm_strided` to give rayon tasks
// pointers into one exclusively borrowed C matrix; the tasks write disjoint
// column blocks and the borrow outlives them (the parallel iterator joins before
// `gemm_strided` returns).
unsafe impl Send for SendPtr {}
// SAFETY: as above; the pointer itself is never dereferenced concurrently for
// the same element.
unsafe impl Sync for SendPtr {}

/// `C = alpha · A · B + beta · C` for general strides of A and B and row-major C
/// (row stride `rsc`, column stride 1), optionally split by column blocks.
fn gemm_strided(s: Strided, a: &[f32], b: &[f32], c: &mut [f32], par: Par) {
    s.check(a, b, c);
    if s.m == 0 || s.n == 0 {
        return;
    }
    let tasks = par.tasks();
    // Split columns only when each block keeps a reasonable width.
    let block = s.n.div_ceil(tasks).next_multiple_of(16);
    if tasks <= 1 || block >= s.n || s.m * s.n * s.k < 1 << 16 {
        // SAFETY: `check` proved every element addressed by the views lies inside
        // `a`, `b` and `c`; strides are below the slice lengths so they fit in
        // isize; C's rows do not overlap and C is exclusively borrowed, so it
        // aliases neither A nor B.
        unsafe {
            matrixmultiply::sgemm(
                s.m,
                s.k,
                s.n,
                s.alpha,
                a.as_ptr(),
                s.rsa as isize,
                s.csa as isize,
                b.as_ptr(),
                s.rsb as isize,
                s.csb as isize,
                s.beta,
                c.as_mut_ptr(),
                s.rsc as isize,
                1,
            );
        }
        return;
    }
    let cp = SendPtr(c.as_mut_ptr());
    let blocks = s.n.div_ceil(block);
    (0..blocks).into_par_iter().for_each(|bi| {
        let j0 = bi * block;
        let nb = block.min(s.n - j0);
        // SAFETY: `check` proved the whole m x n view of C and the k x n view of B
        // are in bounds, so the sub-views starting at column j0 with nb <= n - j0
        // columns are too (the offsets stay inside the slices). Tasks write
        // disjoint column ranges [j0, j0 + nb) of C, and `c` stays exclusively
        // borrowed until the parallel loop has joined.
        unsafe {
            matrixmultiply::sgemm(
                s.m,
                s.k,
                nb,
                s.alpha,
                a.as_ptr(),
                s.rsa as isize,
                s.csa as isize,
                b.as_ptr().add(j0 * s.csb),
                s.rsb as isize,
                s.csb as isize,
                s.beta,
                cp.get().add(j0),
                s.rsc as isize,
                1,
            );
        }
    });
}

/// The per-row-segment function of an epilogue: `f(j0, row)` applies it to
/// the values of one row at columns `j0..j0 + row.len()`.
pub fn epilogue_fn<'a>(epi: Epilogue<'a>) -> impl Fn(usize, &mut [f32]) + Sync + 'a {
    move |j0: usize, r: &mut [f32]| match epi {
        Epilogue::None => {}
        Epilogue::Bias(b) => ops::add_assign(r, &b[j0..]),
        Epilogue::BiasGelu(b) => ops::bias_gelu(r, &b[j0..]),
        Epilogue::BiasGeluTanh(b) => ops::bias_gelu_tanh(r, &b[j0..]),
    }
}

/// `C[m x n] = alpha · A[m x k] · W[n x k]ᵀ + beta · C` (row strides `lda`,
/// `ldw`, `ldc`).
#[allow(clippy::too_many_arguments)]
pub fn matmul_nt(
    m: usize,
    n: usize,
    k: usize,
    alpha: f32,
    a: &[f32],
    lda: usize,
    w: &[f32],
    ldw: usize,
    beta: f32,
    c: &mut [f32],
    ldc: usize,
    par: Par,
) {
    if own_product(
        m,
        n,
        k,
        alpha,
        a,
        lda,
        &sgemm::Transposed { w, ldw },
        beta,
        c,
        ldc,
        par,
    ) {
        return;
    }
    let s = Strided {
        m,
        k,
        n,
        alpha,
        rsa: lda,
        csa: 1,
        rsb: 1,
        csb: ldw,
        beta,
        rsc: ldc,
    };
    gemm_strided(s, a, w, c, par);
}

/// Runs `C = alpha · A · B (+ C)` on our own SGEMM when the CPU has a kernel and
/// the scaling is one it supports (`beta` 0, or `beta` 1 with `alpha` 1);
/// returns false when the caller must fall back to matrixmultiply.
#[allow(clippy::too_many_arguments)]
fn own_product<B: sgemm::BSource>(
    m: usize,
    n: usize,
    k: usize,
    alpha: f32,
    a: &[f32],
    lda: usize,
    b: &B,
    beta: f32,
    c: &mut [f32],
    ldc: usize,
    par: Par,
) -> bool {
    match sgemm::isa() {
        Some(isa) if beta == 0.0 || (beta == 1.0 && alpha == 1.0) => {
            let scale = move |_: usize, r: &mut [f32]| ops::scale(r, alpha);
            let none = |_: usize, _: &mut [f32]| {};
            let epi: sgemm::EpilogueFn = if alpha == 1.0 { &none } else { &scale };
            sgemm::product(isa, m, n, k, a, lda, b, c, ldc, beta == 1.0, epi, par);
            true
        }
        _ => false,
    }
}

/// `C[m x n] = alpha · A[m x k] · B[k x n] + beta · C` (row strides `lda`,
/// `ldb`, `ldc`).
#[allow(clippy::too_many_arguments)]
pub fn matmul_nn(
    m: usize,
    n: usize,
    k: usize,
    alpha: f32,
    a: &[f32],
    lda: usize,
    b: &[f32],
    ldb: usize,
    beta: f32,
    c: &mut [f32],
    ldc: usize,
    par: Par,
) {
    if own_product(
        m,
        n,
        k,
        alpha,
        a,
        lda,
        &sgemm::RowMajor { b, ldb },
        beta,
        c,
        ldc,
        par,
    ) {
        return;
    }
    let s = Strided {
        m,
        k,
        n,
        alpha,
        rsa: lda,
        csa: 1,
        rsb: ldb,
        csb: 1,
        beta,
        rsc: ldc,
    };
    gemm_strided(s, a, b, c, par);
}

/// What to apply to each output row after the product.
#[derive(Debug, Clone, Copy)]
pub enum Epilogue<'a> {
    /// Nothing.
    None,
    /// Add a bias of length n.
    Bias(&'a [f32]),
    /// Add a bias, then exact (erf) GELU.
    BiasGelu(&'a [f32]),
    /// Add a bias, then tanh-approximated GELU.
    BiasGeluTanh(&'a [f32]),
}

impl<'a> Epilogue<'a> {
    /// The same epilogue for the columns from `j0` on.
    pub fn offset(self, j0: usize) -> Epilogue<'a> {
        match self {
            Epilogue::None => Epilogue::None,
            Epilogue::Bias(b) => Epilogue::Bias(&b[j0..]),
            Epilogue::BiasGelu(b) => Epilogue::BiasGelu(&b[j0..]),
            Epilogue::BiasGeluTanh(b) => Epilogue::BiasGeluTanh(&b[j0..]),
        }
    }
}

/// A fully connected layer on `m` packed rows:
/// `out[m x n] = x[m x k] · w[n x k]ᵀ (+ out if accumulate)`, then the epilogue
/// on each row. `out` rows have stride `ldo >= n`.
#[allow(clippy::too_many_arguments)]
pub fn linear(
    x: &[f32],
    m: usize,
    k: usize,
    w: &[f32],
    n: usize,
    out: &mut [f32],
    ldo: usize,
    accumulate: bool,
    epi: Epilogue<'_>,
    par: Par,
) {
    if let Some(isa) = sgemm::isa() {
        let b = sgemm::Transposed { w, ldw: k };
        let epi = epilogue_fn(epi);
        sgemm::product(isa, m, n, k, x, k, &b, out, ldo, accumulate, &epi, par);
        return;
    }
    let beta = if accumulate { 1.0 } else { 0.0 };
    matmul_nt(m, n, k, 1.0, x, k, w, k, beta, out, ldo, par);
    let rows = &mut out[..span(m, n, ldo, 1)];
    let row_op = |r: &mut [f32]| {
        let r = &mut r[..n];
        match epi {
            Epilogue::None => {}
            Epilogue::Bias(b) => ops::add_assign(r, b),
            Epilogue::BiasGelu(b) => ops::bias_gelu(r, b),
            Epilogue::BiasGeluTanh(b) => ops::bias_gelu_tanh(r, b),
        }
    };
    if matches!(epi, Epilogue::None) || m == 0 {
        return;
    }
    match par {
        Par::Threads(t) if t > 1 && m > 1 => {
            let per = m.div_ceil(t);
            // Full chunks of `per` rows; the last row may be shorter than ldo.
            rows.par_chunks_mut(per * ldo).for_each(|ch| {
                ch.chunks_mut(ldo).for_each(row_op);
            });
        }
        _ => rows.chunks_mut(ldo).for_each(row_op),
    }
}

/// Several `Linear` layers over the same input, outputs side by side:
/// `out[.., c_s..c_s + n_s] (+)= x · ws[s]ᵀ` for each segment `s`, every
/// `ws[s]` being `[n_s x k]` (`n_s = ws[s].len() / k`, `c_s` the widths
/// before it), then `epi` over the whole stacked row (a bias of `Σ n_s`
/// values). One pass packs `x` once for all segments; the values are the
/// same as from separate [`linear`] calls.
#[allow(clippy::too_many_arguments)]
pub fn linear_stacked(
    x: &[f32],
    m: usize,
    k: usize,
    ws: &[&[f32]],
    out: &mut [f32],
    ldo: usize,
    accumulate: bool,
    epi: Epilogue<'_>,
    par: Par,
) {
    let widths = || ws.iter().map(|w| w.len() / k.max(1));
    let aligned = widths().all(|n| n.is_multiple_of(sgemm::SEGMENT_ALIGN));
    if let Some(isa) = sgemm::isa().filter(|_| aligned && k > 0) {
        let b = sgemm::Stacked { ws, k };
        let epi = epilogue_fn(epi);
        let n = widths().sum();
        sgemm::product(isa, m, n, k, x, k, &b, out, ldo, accumulate, &epi, par);
        return;
    }
    let mut c = 0;
    for (w, n) in ws.iter().zip(widths()) {
        let epi = epi.offset(c);
        linear(x, m, k, w, n, &mut out[c..], ldo, accumulate, epi, par);
        c += n;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::reference;

    const SIZES: [usize; 9] = [1, 2, 7, 8, 9, 17, 63, 64, 65];

    #[test]
    fn matmul_nt_matches_naive_on_awkward_shapes() {
        for &m in &SIZES {
            for &n in &[1usize, 7, 16, 33, 65] {
                for &k in &[1usize, 8, 9, 300] {
                    let a = reference::rand_vec(m * k, 1);
                    let w = reference::rand_vec(n * k, 2);
                    let mut c = vec![f32::NAN; m * n];
                    matmul_nt(m, n, k, 1.0, &a, k, &w, k, 0.0, &mut c, n, Par::Serial);
                    let want = reference::matmul_nt(m, n, k, &a, &w);
                    for (g, e) in c.iter().zip(&want) {
                        assert!(
                            (g - e).abs() <= 1e-5 * (k as f32).sqrt(),
                            "{m}x{n}x{k}: {g} vs {e}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn matmul_nn_and_strides() {
        let (m, n, k) = (9, 13, 70);
        let a = reference::rand_vec(m * 80, 3);
        let b = reference::rand_vec(k * 20, 4);
        let mut c = vec![0.5f32; m * 15];
        let c0 = c.clone();
        matmul_nn(m, n, k, 0.5, &a, 80, &b, 20, 1.0, &mut c, 15, Par::Serial);
        for i in 0..m {
            for j in 0..15 {
                let want = if j < n {
                    let s: f64 = (0..k)
                        .map(|p| f64::from(a[i * 80 + p]) * f64::from(b[p * 20 + j]))
                        .sum();
                    (0.5 * s + f64::from(c0[i * 15 + j])) as f32
                } else {
                    c0[i * 15 + j]
                };
                assert!((c[i * 15 + j] - want).abs() < 1e-5, "{i} {j}");
            }
        }
    }

    /// The invariance the engine's batch invariance rests on.
    #[test]
    fn rows_are_independent_of_m_and_position_and_column_split() {
        let (k, n) = (384, 1536);
        let big_m = 130;
        let a = reference::rand_vec(big_m * k, 5);
        let w = reference::rand_vec(n * k, 6);
        let bias = reference::rand_vec(n, 7);
        let mut full = vec![0.0f32; big_m * n];
        linear(
            &a,
            big_m,
            k,
            &w,
            n,
            &mut full,
            n,
            false,
            Epilogue::Bias(&bias),
            Par::Serial,
        );
        // Each row alone, and sub-batches starting at odd offsets.
        for (start, m) in [
            (0usize, 1usize),
            (5, 1),
            (3, 7),
            (17, 64),
            (66, 64),
            (129, 1),
            (1, 129),
        ] {
            let mut part = vec![0.0f32; m * n];
            linear(
                &a[start * k..],
                m,
                k,
                &w,
                n,
                &mut part,
                n,
                false,
                Epilogue::Bias(&bias),
                Par::Serial,
            );
            assert!(
                part.iter()
                    .zip(&full[start * n..])
                    .all(|(x, y)| x.to_bits() == y.to_bits()),
                "rows {start}..{} differ",
                start + m
            );
        }
        // Column-split parallel products give the same bits.
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(3)
            .build()
            .unwrap();
        for t in [2usize, 3, 5] {
            let mut par = vec![0.0f32; big_m * n];
            pool.install(|| {
                linear(
                    &a,
                    big_m,
                    k,
                    &w,
                    n,
                    &mut par,
                    n,
                    false,
                    Epilogue::Bias(&bias),
                    Par::Threads(t),
                )
            });
            assert!(
                par.iter()
                    .zip(&full)
                    .all(|(x, y)| x.to_bits() == y.to_bits()),
                "threads {t}"
            );
        }
    }

    #[test]
    fn accumulate_adds_into_out_with_stride() {
        let (m, n, k) = (5, 7, 9);
        let a = reference::rand_vec(m * k, 8);
        let w = reference::rand_vec(n * k, 9);
        let bias = reference::rand_vec(n, 10);
        let mut out = reference::rand_vec(m * 10, 11);
        let before = out.clone();
        linear(
            &a,
            m,
            k,
            &w,
            n,
            &mut out,
            10,
            true,
            Epilogue::Bias(&bias),
            Par::Serial,
        );
        let prod = reference::matmul_nt(m, n, k, &a, &w);
        for i in 0..m {
            for j in 0..10 {
                let want = if j < n {
                    before[i * 10 + j] + prod[i * n + j] + bias[j]
                } else {
                    before[i * 10 + j]
                };
                assert!((out[i * 10 + j] - want).abs() < 1e-5);
            }
        }
    }
}
