//! Advanced SIMD (NEON), which every aarch64 CPU has: the f32 tile, the row
//! operations and attention, the bf16 emulation, and the dequantizing store
//! the int8 tiles share.

pub(crate) mod bgemm;
pub(crate) mod ops;
pub(crate) mod qgemm;
pub(crate) mod sgemm;

/// Asks for the cache line at `p` (`prfm pldl1keep`; a hint: it never
/// faults, whatever `p` is).
#[inline(always)]
pub(crate) fn prefetch<T>(p: *const T) {
    // SAFETY: `prfm` reads no memory architecturally and cannot fault.
    unsafe {
        std::arch::asm!(
            "prfm pldl1keep, [{p}]",
            p = in(reg) p,
            options(nostack, preserves_flags, readonly)
        )
    };
}

use std::arch::aarch64::*;

/// An `R x 16` f32 accumulator tile: C's rows (row stride `ldc`) when
/// `load`, else zeros.
///
/// # Safety
/// With `load`, C has R rows of 16 readable floats.
#[target_feature(enable = "neon")]
#[inline]
pub(crate) unsafe fn load_tile<const R: usize>(
    c: *const f32,
    ldc: usize,
    load: bool,
) -> [[float32x4_t; 4]; R] {
    let mut acc = [[vdupq_n_f32(0.0); 4]; R];
    if load {
        for (i, row) in acc.iter_mut().enumerate() {
            for (q, v) in row.iter_mut().enumerate() {
                // SAFETY: row i < R of C has 16 floats (contract).
                *v = unsafe { vld1q_f32(c.add(i * ldc + 4 * q)) };
            }
        }
    }
    acc
}

/// Stores an `R x 16` f32 tile into C's rows (row stride `ldc`).
///
/// # Safety
/// C has R rows of 16 writable floats.
#[target_feature(enable = "neon")]
#[inline]
pub(crate) unsafe fn store_tile<const R: usize>(
    c: *mut f32,
    ldc: usize,
    acc: &[[float32x4_t; 4]; R],
) {
    for (i, row) in acc.iter().enumerate() {
        for (q, &v) in row.iter().enumerate() {
            // SAFETY: row i < R of C has 16 writable floats (contract).
            unsafe { vst1q_f32(c.add(i * ldc + 4 * q), v) };
        }
    }
}
