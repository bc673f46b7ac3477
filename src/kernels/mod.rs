//! Numeric kernels: GEMM, element-wise and row operations, and their scalar
//! reference versions. Nothing here knows about BERT.
//!
//! # Layout
//!
//! Laid out per ISA with one detection point, as memchr's `arch/` is:
//!
//! ```text
//! kernels/
//!   isa.rs               CPU features (detected once), EMBD_SIMD (read once),
//!                        each family's variants and what they need; the choice
//!   sgemm.rs             f32 GEMM: blocking, B packing, threading, epilogues
//!   qgemm.rs             int8 GEMM: quantization, packing, threading
//!   bgemm.rs             bf16 GEMM: operand rounding, packing, exactness bounds, threading
//!   ops.rs               row operations: scalar definitions + entry points (dispatch!)
//!   gemm.rs              the callers' front: Linear-style products, matrixmultiply fallback
//!   packbuf.rs, reference.rs (the oracles)
//!   arch/
//!     generic/           portable code: row loops, int8 tile, exact bf16 tile
//!     x86_64/
//!       ops.rs           the row operations' vector code, written once (a macro)
//!       avx2/            AVX2 + FMA: {sgemm, ops, qgemm, bgemm}.rs
//!       avx512/          AVX-512F/BW: {sgemm, ops, qgemm, bgemm}.rs
//!       avx512bf16.rs    bf16 vdpbf16ps tile, A rounded to pairs
//!       avx512vnni.rs    int8 12x32 tile
//!       avxvnni.rs       int8 6x16 tile
//! ```
//!
//! Each family has one enum of its variants (`sgemm::Isa`, `qgemm::Isa`,
//! `bgemm::Isa`), chosen once by [`isa`], and one dispatch from its front into
//! `arch/`: the kernel tables in `sgemm::gemm_cols` and `bgemm::kernels`, the
//! `dispatch!` macro of [`ops`] (and `attention::attend`'s match), the bf16
//! front's rounding of A. Adding an ISA touches its module under `arch/`, its
//! variant and row in [`isa`] (and a feature bit if it needs a new one), and
//! one line of the family's dispatch.
//!
//! The int8 family keeps every fact about a variant in one descriptor
//! (`qgemm::QKernel`: tile shape, A's byte offset, CPU features, `EMBD_SIMD`
//! cap, tiles, row quantization), defined as `QKERNEL` in the variant's
//! module under `arch/`; `qgemm::Isa::kernel` is its one table, and
//! [`isa`]'s `Family` impl, the tile dispatch and the quantization read it.
//! Adding an int8 ISA is its module with its `QKERNEL`, its variant, and one
//! line of that table.
//!
//! Every optimised kernel has a plain oracle in [`reference`](mod@reference) (or
//! the front's scalar definition) and unit tests that compare the two on
//! awkward shapes, bit for bit where the arithmetic is the same.

mod arch;
pub mod attention;
pub mod bgemm;
mod driver;
pub mod gemm;
pub mod isa;
pub mod ops;
pub mod packbuf;
pub mod qgemm;
pub mod reference;
pub mod sgemm;

/// How a kernel may use threads.
///
/// `Threads(n)` splits the work of one call into about `n` parallel tasks on the
/// current rayon pool (call it inside `ThreadPool::install`). Results never
/// depend on the choice: every output element is computed with the same
/// arithmetic in the same order either way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Par {
    /// Run on the calling thread.
    Serial,
    /// Split the work into about this many rayon tasks.
    Threads(usize),
}

impl Par {
    /// Number of tasks to split into (1 for serial).
    pub fn tasks(self) -> usize {
        match self {
            Par::Serial => 1,
            Par::Threads(n) => n.max(1),
        }
    }
}

/// The row tiles of a block of `m` rows for a kernel of at most `mr` rows:
/// `(first row, height)`, as few tiles as `mr` allows, their heights
/// differing by at most one (20 rows with `mr = 6`: 5, 5, 5, 5 rather than
/// 6, 6, 6, 2, whose 2-row tile has too few independent accumulators to hide
/// the FMA latency). Every kernel computes each element with the same
/// arithmetic whatever its height, so the split never changes a bit.
pub(crate) fn row_tiles(m: usize, mr: usize) -> impl Iterator<Item = (usize, usize)> {
    let tiles = m.div_ceil(mr.max(1));
    // No tiles (m = 0): nothing to divide.
    let base = m.checked_div(tiles).unwrap_or(0);
    let extra = m.checked_rem(tiles).unwrap_or(0);
    (0..tiles).map(move |t| (t * base + t.min(extra), base + usize::from(t < extra)))
}

/// CPU time of the calling thread in seconds, for the kernels' speed tests.
#[cfg(test)]
pub(crate) fn thread_cpu_seconds() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

#[cfg(test)]
mod tests {
    #[test]
    fn row_tiles_cover_the_block_evenly() {
        assert_eq!(
            super::row_tiles(20, 6).collect::<Vec<_>>(),
            [(0, 5), (5, 5), (10, 5), (15, 5)]
        );
        assert_eq!(
            super::row_tiles(13, 6).collect::<Vec<_>>(),
            [(0, 5), (5, 4), (9, 4)]
        );
        assert_eq!(
            super::row_tiles(12, 6).collect::<Vec<_>>(),
            [(0, 6), (6, 6)]
        );
        assert_eq!(super::row_tiles(0, 6).count(), 0);
        for mr in 1..=12 {
            for m in 0..100 {
                let mut next = 0;
                for (i, h) in super::row_tiles(m, mr) {
                    assert!(i == next && (1..=mr).contains(&h), "m{m} mr{mr}");
                    next += h;
                }
                assert_eq!(next, m);
                assert_eq!(super::row_tiles(m, mr).count(), m.div_ceil(mr));
            }
        }
    }
}
