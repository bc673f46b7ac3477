//! The bf16 GEMM's portable tile: the oracle's steps, exact for any data.

use crate::kernels::arch::types::{BKernel, RoundA};
use crate::kernels::bgemm::round_row;

/// The portable variant: no vector tiles (every tile is [`tile_exact`]),
/// 4 x 16 tiles over 256-pair blocks, A rounded to floats.
pub(crate) static BKERNEL: BKernel = BKernel {
    mr: 4,
    nr: 16,
    kc: 256,
    tiles: &[],
    round_a: RoundA::Floats(round_row),
    race: false,
};

/// The exact scalar tile: `C[0..h][0..w] = (load ? C : 0)` followed by the
/// oracle's steps over `kp` pairs, A as rounded floats (row stride `lda`
/// words), the B panel `kp` rows of `nr` words.
///
/// # Safety
/// A has h rows of `2 * kp` floats (as words) at stride `lda`, `b` holds
/// `kp * nr` words, `w <= nr`, and C has h rows of w writable floats at
/// stride `ldc`.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn tile_exact(
    kp: usize,
    a: *const u32,
    lda: usize,
    b: *const u32,
    nr: usize,
    c: *mut f32,
    ldc: usize,
    h: usize,
    w: usize,
    load: bool,
) {
    for r in 0..h {
        for jj in 0..w {
            // SAFETY: row r < h, column jj < w of C (contract).
            let cij = unsafe { c.add(r * ldc + jj) };
            // SAFETY: as above.
            let mut v = if load { unsafe { *cij } } else { 0.0 };
            for q in 0..kp {
                // SAFETY: word q·nr + jj < kp·nr of the panel; floats 2q, 2q+1
                // < 2·kp of row r of A (contract).
                let (bw, a0, a1) = unsafe {
                    (
                        *b.add(q * nr + jj),
                        *a.add(r * lda + 2 * q),
                        *a.add(r * lda + 2 * q + 1),
                    )
                };
                v = crate::kernels::bgemm::step(
                    v,
                    f32::from_bits(a0),
                    f32::from_bits(bw & 0xFFFF_0000),
                );
                v = crate::kernels::bgemm::step(v, f32::from_bits(a1), f32::from_bits(bw << 16));
            }
            // SAFETY: as above.
            unsafe { *cij = v };
        }
    }
}
