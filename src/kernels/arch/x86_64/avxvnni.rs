//! AVX-VNNI (the 256-bit VEX form, with AVX2): the int8 GEMM's 6 x 16 tile.

use crate::kernels::arch::types::{QKernel, Tile, TileFn};
use std::arch::x86_64::*;

tiles!(KERNELS: TileFn = tile_vnni256, 1, 2, 3, 4, 5, 6);

/// AVX-VNNI: 6 x 16 tiles, u8 activations (`qa + 128`), the AVX2 row
/// quantization.
pub(crate) static QKERNEL: QKernel = QKernel {
    mr: 6,
    nr: 16,
    a_offset: 128,
    tiles: &KERNELS,
    quantize_row: Some(super::avx2::qgemm::quantize_row),
};

/// The `R x 16` tile with AVX-VNNI (256-bit).
///
/// # Safety
/// AVX2 and AVX-VNNI are available; the tile's pointers are valid for R
/// rows of 16 columns (see `qgemm::Tile`).
#[target_feature(enable = "avxvnni,avx2,fma")]
unsafe fn tile_vnni256<const R: usize>(t: &Tile) {
    // SAFETY: all accesses stay inside A's R rows, the panel, the column
    // arrays (16 entries) and C's R x 16 tile (contract); AVX2 for `store8`.
    unsafe {
        let mut acc = [[_mm256_setzero_si256(); 2]; R];
        let mut b = t.b;
        let mut next = t.next;
        for q in 0..t.kq {
            _mm_prefetch::<_MM_HINT_T0>(next.cast());
            next = next.wrapping_add(64);
            let b0 = _mm256_loadu_si256(b.cast());
            let b1 = _mm256_loadu_si256(b.add(32).cast());
            for (i, row) in acc.iter_mut().enumerate() {
                let ai =
                    _mm256_set1_epi32(t.a.add(i * t.lda + 4 * q).cast::<i32>().read_unaligned());
                row[0] = _mm256_dpbusd_avx_epi32(row[0], ai, b0);
                row[1] = _mm256_dpbusd_avx_epi32(row[1], ai, b1);
            }
            b = b.add(64);
        }
        super::avx2::qgemm::store8(t, &acc);
    }
}
