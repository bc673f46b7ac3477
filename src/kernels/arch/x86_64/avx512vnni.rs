//! AVX-512 VNNI (with AVX-512F/BW): the int8 GEMM's 12 x 32 tile.

use crate::kernels::arch::types::{QKernel, Tile, TileFn};
use std::arch::x86_64::*;

/// AVX-512 VNNI: 12 x 32 tiles, u8 activations (`qa + 128`), the AVX-512
/// row quantization.
pub(crate) static QKERNEL: QKernel = QKernel {
    mr: 12,
    nr: 32,
    a_offset: 128,
    tiles: &KERNELS,
    quantize_row: Some(super::avx512::qgemm::quantize_row),
};

tiles!(KERNELS: TileFn = tile_vnni512,
    1,
    2,
    3,
    4,
    5,
    6,
    7,
    8,
    9,
    10,
    11,
    12
);

/// The `R x 32` tile with AVX-512 VNNI.
///
/// # Safety
/// AVX-512F/BW/VNNI are available; the tile's pointers are valid for R
/// rows (see `qgemm::Tile`).
#[target_feature(enable = "avx512f,avx512bw,avx512vnni,avx2,fma")]
unsafe fn tile_vnni512<const R: usize>(t: &Tile) {
    // SAFETY: all accesses stay inside A's R rows, the panel, the column
    // arrays (32 entries) and C's R x 32 tile (contract).
    unsafe {
        let mut acc = [[_mm512_setzero_si512(); 2]; R];
        let mut b = t.b;
        let mut next = t.next;
        for q in 0..t.kq {
            _mm_prefetch::<_MM_HINT_T0>(next.cast());
            _mm_prefetch::<_MM_HINT_T0>(next.wrapping_add(64).cast());
            next = next.wrapping_add(128);
            let b0 = _mm512_loadu_si512(b.cast());
            let b1 = _mm512_loadu_si512(b.add(64).cast());
            for (i, row) in acc.iter_mut().enumerate() {
                let ai =
                    _mm512_set1_epi32(t.a.add(i * t.lda + 4 * q).cast::<i32>().read_unaligned());
                row[0] = _mm512_dpbusd_epi32(row[0], ai, b0);
                row[1] = _mm512_dpbusd_epi32(row[1], ai, b1);
            }
            b = b.add(128);
        }
        let sw = [_mm512_loadu_ps(t.sw), _mm512_loadu_ps(t.sw.add(16))];
        let ws = [
            _mm512_loadu_si512(t.wsum.cast()),
            _mm512_loadu_si512(t.wsum.add(16).cast()),
        ];
        for (i, row) in acc.iter().enumerate() {
            let zc = _mm512_set1_epi32(*t.zc.add(i));
            let sa = _mm512_set1_ps(*t.sa.add(i));
            for h in 0..2 {
                let tv = _mm512_sub_epi32(row[h], _mm512_mullo_epi32(zc, ws[h]));
                let v = _mm512_mul_ps(_mm512_cvtepi32_ps(tv), _mm512_mul_ps(sa, sw[h]));
                let cp = t.c.add(i * t.ldc + 16 * h);
                let v = if t.load {
                    _mm512_add_ps(_mm512_loadu_ps(cp), v)
                } else {
                    v
                };
                _mm512_storeu_ps(cp, v);
            }
        }
    }
}
