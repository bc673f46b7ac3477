//! The int8 GEMM's portable tile.

use crate::kernels::arch::types::{QKernel, Tile};

/// The portable variant: 4 x 16 tiles of the oracle's arithmetic, scalar
/// row quantization.
pub(crate) static QKERNEL: QKernel = QKernel {
    mr: 4,
    nr: 16,
    a_offset: 0,
    tiles: &[
        tile_rx16::<1>,
        tile_rx16::<2>,
        tile_rx16::<3>,
        tile_rx16::<4>,
    ],
    quantize_row: None,
};

/// [`tile`] of `R` rows and 16 columns.
///
/// # Safety
/// See `qgemm::Tile`.
unsafe fn tile_rx16<const R: usize>(t: &Tile) {
    // SAFETY: forwarded contract.
    unsafe { tile(16, R, t) }
}

/// The portable tile: the oracle's arithmetic over an `h x nr` tile (A holds
/// `qa` as s8, `zc = za`).
///
/// # Safety
/// See `qgemm::Tile`.
pub(crate) unsafe fn tile(nr: usize, h: usize, t: &Tile) {
    for r in 0..h {
        for jj in 0..nr {
            let mut acc = 0i32;
            for q in 0..t.kq {
                for e in 0..4 {
                    // SAFETY: row r < h of A has kq·4 bytes; the panel has kq
                    // groups of nr·4 bytes.
                    let (av, bv) = unsafe {
                        (
                            *t.a.add(r * t.lda + 4 * q + e) as i8,
                            *t.b.add(q * nr * 4 + jj * 4 + e) as i8,
                        )
                    };
                    acc += i32::from(av) * i32::from(bv);
                }
            }
            // SAFETY: the row and column arrays hold h and nr entries; C has
            // h rows of nr floats.
            unsafe {
                let v = crate::kernels::qgemm::dequant(
                    acc,
                    *t.zc.add(r),
                    *t.wsum.add(jj),
                    *t.sa.add(r),
                    *t.sw.add(jj),
                );
                let cp = t.c.add(r * t.ldc + jj);
                *cp = if t.load { *cp + v } else { v };
            }
        }
    }
}
