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
