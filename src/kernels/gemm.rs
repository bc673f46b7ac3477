//! Row-major single-precision matrix products for the model's callers, on
//! the engine's own kernels ([`super::sgemm`]) of every row of the ISA
//! table, the portable one included.
//!
//! The main entry is [`linear`]: `C = A · Wᵀ (+ bias) (+ C)` with `W` in the
//! HuggingFace `Linear` layout `[out, in]`, read in place (panels are packed on
//! the fly, nothing is transposed or copied at load); [`linear_stacked`] runs
//! several such layers over the same input in one pass (Q, K and V).
//!
//! # Row and column invariance
//!
//! Every `C[i][j]` is one sequential FMA chain over `k` (see
//! [`super::sgemm`]), so its value depends only on row `i` of A, column `j`
//! of B and `k`: not on `m`, `n`, the row's or the column's position, the
//! CPU or the kernel row. The engine relies on this for batch invariance,
//! thread-count invariance and the same bits on every CPU; the unit tests
//! below check it bit for bit. Parallel products split columns ([`Par`]).

use super::ops;
use super::sgemm;
use super::Par;

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

/// `C[m x n] = alpha · A[m x k] · W[n x k]ᵀ (+ C when accumulating)` (row
/// strides `lda`, `ldw`, `ldc`). With `alpha != 1` and accumulation, the
/// scaled product is formed apart and then added.
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
    accumulate: bool,
    c: &mut [f32],
    ldc: usize,
    par: Par,
) {
    let isa = sgemm::isa();
    let b = sgemm::Transposed { w, ldw };
    let scale = move |_: usize, r: &mut [f32]| ops::scale(r, alpha);
    let none = |_: usize, _: &mut [f32]| {};
    let epi: sgemm::EpilogueFn = if alpha == 1.0 { &none } else { &scale };
    if !accumulate || alpha == 1.0 {
        sgemm::product(isa, m, n, k, a, lda, &b, c, ldc, accumulate, epi, par);
        return;
    }
    let mut t = vec![0f32; m * n];
    sgemm::product(isa, m, n, k, a, lda, &b, &mut t, n, false, epi, par);
    for (row, add) in c.chunks_mut(ldc).zip(t.chunks_exact(n.max(1))).take(m) {
        ops::add_assign(&mut row[..n], add);
    }
}

/// `C[m x n] = A[m x k] · B[k x n]` with `B` row-major (row strides `lda`,
/// `ldb`, `ldc`): the product of attention probabilities and value rows read
/// in place. Each `C[i][j]` is the same FMA chain over `k` as in
/// [`matmul_nt`], so it depends only on row `i` of A, column `j` of B and
/// `k`.
#[allow(clippy::too_many_arguments)]
pub fn matmul_nn(
    m: usize,
    n: usize,
    k: usize,
    a: &[f32],
    lda: usize,
    b: &[f32],
    ldb: usize,
    c: &mut [f32],
    ldc: usize,
    par: Par,
) {
    let b = sgemm::RowMajor { b, ldb };
    let none = |_: usize, _: &mut [f32]| {};
    sgemm::product(sgemm::isa(), m, n, k, a, lda, &b, c, ldc, false, &none, par);
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
    let b = sgemm::Transposed { w, ldw: k };
    let epi = epilogue_fn(epi);
    sgemm::product(
        sgemm::isa(),
        m,
        n,
        k,
        x,
        k,
        &b,
        out,
        ldo,
        accumulate,
        &epi,
        par,
    );
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
    if aligned && k > 0 {
        let b = sgemm::Stacked { ws, k };
        let epi = epilogue_fn(epi);
        let n = widths().sum();
        sgemm::product(
            sgemm::isa(),
            m,
            n,
            k,
            x,
            k,
            &b,
            out,
            ldo,
            accumulate,
            &epi,
            par,
        );
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
                    matmul_nt(m, n, k, 1.0, &a, k, &w, k, false, &mut c, n, Par::Serial);
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
    fn matmul_nn_matches_naive_and_matmul_nt_bit_for_bit() {
        for &m in &SIZES {
            for &n in &[1usize, 12, 16, 33, 64] {
                for &k in &[1usize, 9, 40, 300] {
                    let (lda, ldb, ldc) = (k + 3, n + 5, n + 1);
                    let a = reference::rand_vec(m * lda, 3);
                    let b = reference::rand_vec(k * ldb, 4);
                    let mut c = vec![f32::NAN; m * ldc];
                    matmul_nn(m, n, k, &a, lda, &b, ldb, &mut c, ldc, Par::Serial);
                    // B transposed: the same chains through matmul_nt.
                    let mut bt = vec![0.0f32; n * k];
                    for p in 0..k {
                        for j in 0..n {
                            bt[j * k + p] = b[p * ldb + j];
                        }
                    }
                    let mut t = vec![0.0f32; m * n];
                    matmul_nt(m, n, k, 1.0, &a, lda, &bt, k, false, &mut t, n, Par::Serial);
                    for i in 0..m {
                        for j in 0..n {
                            let g = c[i * ldc + j];
                            assert_eq!(g.to_bits(), t[i * n + j].to_bits(), "{m}x{n}x{k}");
                            let want: f64 = (0..k)
                                .map(|p| f64::from(a[i * lda + p]) * f64::from(b[p * ldb + j]))
                                .sum();
                            assert!(
                                (f64::from(g) - want).abs() <= 1e-5 * (k as f64).sqrt(),
                                "{m}x{n}x{k}: {g} vs {want}"
                            );
                        }
                    }
                }
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
