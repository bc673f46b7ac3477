//! Numeric kernels: GEMM, element-wise and row operations, and their scalar
//! reference versions. Nothing here knows about BERT.
//!
//! # Layout
//!
//! Laid out per ISA with one detection point and one table per target, as
//! memchr's `arch/` is:
//!
//! ```text
//! kernels/
//!   isa.rs               CPU features (detected once), EMBD_SIMD (read once),
//!                        each precision's choice of a row of the table
//!   sgemm.rs             f32 GEMM: B sources and packing
//!   qgemm.rs             int8 GEMM: quantization, packing
//!   bgemm.rs             bf16 GEMM: operand rounding, packing, exactness bounds
//!   driver.rs            the one GEMM driver of the three: column tasks, k and
//!                        row blocks, panels, row tiles, narrow tiles, epilogue
//!   ops.rs               row operations: scalar definitions + entry points
//!   attention.rs         one attention head: scalar form + entry point
//!   gemm.rs              the callers' front: Linear-style products
//!   packbuf.rs, reference.rs (the oracles)
//!   arch/
//!     types.rs           the descriptor types (SKernel, QKernel, BKernel,
//!                        RowOps, the tile function types)
//!     simd.rs            the row kernels and attention written once over a
//!                        16-lane vector (macros every ISA module expands)
//!     generic/           the portable row `none`: f32 4x16 FMA-chain tile,
//!                        int8 tile, exact bf16 tile, row loops
//!     x86_64/            VARIANTS (avx512bf16, avx512vnni, avx512, avxvnni,
//!                        avx2, none) and one module per ISA
//!     aarch64/           VARIANTS (i8mm, dotprod, neon, none): neon/ (f32
//!                        6x16, row ops, bf16 5x16), dotprod.rs (int8 6x16
//!                        sdot), i8mm.rs (int8 4x16 smmla)
//! ```
//!
//! # One table of variants per target
//!
//! Each target's `VARIANTS` ([`isa::VARIANTS`]) lists its rows best first:
//! a name (the `EMBD_SIMD` value), the CPU features it needs, and the
//! descriptors it provides, each defined beside its kernels under `arch/`:
//!
//! | precision | descriptor | what it holds |
//! |---|---|---|
//! | f32 | `SKernel` | tile shape and depth (`mr`, `nr`, `kc`), tiles, the row operations and vector attention (`RowOps`) |
//! | int8 | `QKernel` | tile shape, A's byte offset, tiles, row quantization |
//! | bf16 | `BKernel` | tile shape and depth, tiles (none: the exact scalar path), the rounding of A (bf16 pairs or floats), whether it races the next row |
//!
//! plus an optional per-thread `init` (run once on each thread before the
//! row's kernels, by the driver). Each precision's handle (`sgemm::Isa`,
//! `qgemm::Isa`, `bgemm::Isa`) is an index into the table; [`isa`] chooses
//! it once, the GEMM fronts, [`ops`] and [`attention`] read its
//! descriptor, and nothing matches on a variant. Adding an ISA is its
//! module under `arch/` and its row.
//!
//! # One GEMM driver
//!
//! The three GEMMs share one driver (`driver.rs`): splitting the columns
//! into tasks, blocks of k and of rows, B panels, row tiles
//! (`row_tiles`), the buffer of a panel narrower than the tile, and the
//! epilogue on finished rows. It is generic over `driver::Operands`, which
//! each front implements with only what really differs: its blocking (tile
//! shape, block sizes, where the epilogue runs), how it gets one B panel
//! (f32: packed ahead or packed now; bf16: its words and exponent bound;
//! int8: its bytes with the column scales and sums) and how it runs one
//! tile (the descriptor's kernel on its A: f32 in place, bf16 rounded,
//! int8 quantized; bf16 may take the exact scalar tile instead). Each front
//! gets its own monomorphised loops.
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

/// The name of a panel layout stored in files (`model::packed`):
/// `{kind}-nr{nr}-kc{kc}` (the f32 and bf16 kernels' column panels of `nr`
/// in blocks of `kc`).
pub(crate) fn panel_layout(kind: &str, nr: usize, kc: usize) -> String {
    format!("{kind}-nr{nr}-kc{kc}")
}

/// `(nr, kc)` of a [`panel_layout`] name of `kind`; `None` for another kind
/// or sizes no kernel has.
pub(crate) fn parse_panel_layout(layout: &str, kind: &str) -> Option<(usize, usize)> {
    let rest = layout.strip_prefix(kind)?.strip_prefix("-nr")?;
    let (nr, kc) = rest.split_once("-kc")?;
    let (nr, kc) = (nr.parse().ok()?, kc.parse().ok()?);
    (nr > 0 && kc > 0 && nr <= 64).then_some((nr, kc))
}

/// Visits every value of a weight stored in a panel layout ([`panel_layout`]):
/// column panels of `nr` outputs (the last zero-padded), in blocks of `kc`
/// depth units, each panel unit by unit; `visit(j, q, v)` for output `j < n`
/// and depth unit `q < depth` (a float, or a word of two bf16). `None` when
/// `data` is not `depth x n` rounded up to whole panels.
pub(crate) fn for_each_in_panels<T: Copy>(
    data: &[T],
    depth: usize,
    n: usize,
    nr: usize,
    kc: usize,
    mut visit: impl FnMut(usize, usize, T),
) -> Option<()> {
    let n_pad = n.next_multiple_of(nr);
    if Some(data.len()) != depth.checked_mul(n_pad) {
        return None;
    }
    let mut q0 = 0;
    while q0 < depth {
        let kcq = kc.min(depth - q0);
        for j0 in (0..n).step_by(nr) {
            let panel = &data[q0 * n_pad + j0 * kcq..][..kcq * nr];
            for jj in 0..nr.min(n - j0) {
                for q in 0..kcq {
                    visit(j0 + jj, q0 + q, panel[q * nr + jj]);
                }
            }
        }
        q0 += kcq;
    }
    Some(())
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
