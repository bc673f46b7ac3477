//! The f32 GEMM's portable tile: the definition itself
//! ([`sgemm::fma_chain`](crate::kernels::sgemm::fma_chain)), one element at a
//! time, so that every CPU gives the bits of the vector tiles.

use crate::kernels::arch::types::SKernel;

/// The portable variant: 4 x 16 tiles over 384-deep blocks (the panel
/// layout of the AVX2 and NEON tiles, so packed files are shared), the
/// portable row operations.
pub(crate) static SKERNEL: SKernel = SKernel {
    mr: 4,
    nr: 16,
    kc: 384,
    tiles: &[tile::<1>, tile::<2>, tile::<3>, tile::<4>],
    ops: &super::ops::OPS,
};

/// The `R x 16` tile: `C[0..R][0..16] = (load ? C : 0) + A · Bpanel` over
/// `kc` steps, one fused multiply-add chain per element in increasing `p`
/// (`f32::mul_add`: one instruction where the CPU has FMA, the correctly
/// rounded library call elsewhere).
///
/// # Safety
/// A has R rows of `kc` floats at stride `lda`, `b` holds `kc * 16` floats,
/// and C has R rows of 16 writable floats at row stride `ldc`.
#[allow(clippy::too_many_arguments)]
unsafe fn tile<const R: usize>(
    kc: usize,
    a: *const f32,
    lda: usize,
    b: *const f32,
    c: *mut f32,
    ldc: usize,
    load: bool,
    _next: *const f32,
) {
    let mut acc = [[0f32; 16]; R];
    if load {
        for (i, row) in acc.iter_mut().enumerate() {
            // SAFETY: row i < R of C has 16 floats (contract).
            *row = unsafe { std::ptr::read_unaligned(c.add(i * ldc).cast::<[f32; 16]>()) };
        }
    }
    for p in 0..kc {
        // SAFETY: row p < kc of the panel has 16 floats (contract).
        let bp = unsafe { std::ptr::read_unaligned(b.add(p * 16).cast::<[f32; 16]>()) };
        for (i, row) in acc.iter_mut().enumerate() {
            // SAFETY: column p < kc of row i < R of A (contract).
            let ai = unsafe { *a.add(i * lda + p) };
            for (v, &bj) in row.iter_mut().zip(&bp) {
                *v = ai.mul_add(bj, *v);
            }
        }
    }
    for (i, row) in acc.iter().enumerate() {
        // SAFETY: row i < R of C has 16 writable floats (contract).
        unsafe { std::ptr::write_unaligned(c.add(i * ldc).cast::<[f32; 16]>(), *row) };
    }
}
