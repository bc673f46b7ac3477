//! The one GEMM driver of the three precisions: the loops that
//! [`sgemm`](super::sgemm), [`bgemm`](super::bgemm) and [`qgemm`](super::qgemm)
//! share around their register tiles.
//!
//! `C[m x n] (+)= A · B`, then an epilogue on every finished row segment:
//! the columns split into contiguous ranges of whole panels, one rayon task
//! each ([`column_tasks`], [`product`]); inside a task, blocks of k (the
//! running value of C stored and reloaded between them), blocks of rows, B
//! panels of `nr` columns, and the row tiles of a block ([`row_tiles`]); a
//! last panel narrower than `nr` goes through a tile-sized buffer
//! ([`CTile::full_width`]). A precision supplies only what really differs,
//! as an [`Operands`]: its [`Blocking`] (tile shape and block sizes, where
//! the epilogue runs), how it gets one B panel (packed ahead, packed now,
//! or with per-column data beside it) and how it runs one tile (its
//! descriptor's kernel on its own form of A). The driver is generic over
//! that type, so each precision gets its own monomorphised loops: no
//! dynamic call in them but the tile kernel chosen from the descriptor's
//! table and the caller's epilogue, as before.
//!
//! None of this changes a bit: every precision computes each element of C
//! from its row of A and its column of B alone, whatever the tile, block
//! or task it falls in (see each front's docs), and blocking of k only
//! stores and reloads C (the int8 product, whose tiles dequantize, is never
//! blocked in k).

use std::cell::RefCell;

use rayon::prelude::*;

use super::row_tiles;
use super::sgemm::EpilogueFn;
use super::Par;

/// Rows of A swept per B panel by the precisions that block rows (a
/// multiple of every kernel's tile height; the rows' current k block stays
/// in L2).
pub(crate) const MC: usize = 240;
/// The largest tile height of any kernel.
const MAX_MR: usize = 12;
/// The largest tile width of any kernel.
const MAX_NR: usize = 32;
/// Products smaller than this (m·n·k) never split across threads.
const MIN_SPLIT_WORK: usize = 1 << 16;

/// Floats a view of `rows` rows of `cols` values at row stride `ld` spans.
pub(crate) fn span(rows: usize, cols: usize, ld: usize) -> usize {
    if rows == 0 || cols == 0 {
        0
    } else {
        (rows - 1) * ld + cols
    }
}

/// Where the epilogue runs on finished rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum EpilogueAt {
    /// On each panel's row segments right after its last k block, while
    /// the tile is in cache.
    Panel,
    /// Once per row over the task's whole column range after a block of
    /// rows (one call of a vector routine per row rather than one per
    /// panel).
    Rows,
}

/// How a precision blocks its product. Depths count the units the
/// precision's panels and tiles step through (floats, bf16 pairs, groups
/// of 4 bytes).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Blocking {
    /// Tile height (at most 12).
    pub(crate) mr: usize,
    /// Tile and panel width (at most 32).
    pub(crate) nr: usize,
    /// Depth of one k block (`usize::MAX`: never blocked).
    pub(crate) kc: usize,
    /// Depth of the product.
    pub(crate) depth: usize,
    /// Rows per block (`usize::MAX`: all rows at once).
    pub(crate) mc: usize,
    /// Where the epilogue runs.
    pub(crate) epilogue: EpilogueAt,
}

/// What one precision's product supplies to the driver: its A and B
/// operands, already checked (bounds, depth, CPU support) by its front.
pub(crate) trait Operands: Sync {
    /// One B panel as [`tile`](Operands::tile) reads it.
    type Panel;

    /// Readies the calling thread for the kernels (the row's per-thread
    /// set-up, [`isa::prepare`](super::isa::prepare)); run once per task.
    fn prepare(&self);

    /// Floats of the per-thread buffer [`panel`](Operands::panel) may pack
    /// into (0: it never packs; the driver then touches no buffer).
    const PACK_FLOATS: usize = 0;

    /// Tile shape and blocks.
    fn blocking(&self) -> Blocking;

    /// B's panel of columns `j0..j0 + w` (`w <= nr`) for the k block
    /// `p0..p0 + kc`.
    ///
    /// # Safety
    /// `j0 + w` is at most the product's `n` and `p0 + kc` at most its
    /// depth; `pack` is 64-byte aligned with
    /// [`PACK_FLOATS`](Operands::PACK_FLOATS) writable floats (null when
    /// that is 0).
    unsafe fn panel(
        &self,
        p0: usize,
        kc: usize,
        j0: usize,
        w: usize,
        pack: *mut f32,
    ) -> Self::Panel;

    /// Rows `row0..row0 + h` of C at the panel's columns `(+)=` those rows
    /// of A times the panel over the k block `p0..p0 + kc`, into `c`.
    ///
    /// # Safety
    /// `panel` came from [`panel`](Operands::panel) for this k block;
    /// `row0 + h` is at most the product's `m` and `1 <= h <= mr`; `c` is
    /// as [`CTile`] says.
    unsafe fn tile(
        &self,
        panel: &Self::Panel,
        p0: usize,
        kc: usize,
        row0: usize,
        h: usize,
        c: CTile<'_>,
    );
}

/// Where one tile's results go: `h` rows of `w` columns of C at `c` (row
/// stride `ldc`), of a panel `nr` wide; `load`: add to the values there
/// (else overwrite them).
pub(crate) struct CTile<'a> {
    c: *mut f32,
    ldc: usize,
    h: usize,
    w: usize,
    nr: usize,
    load: bool,
    tmp: &'a mut [f32; MAX_MR * MAX_NR],
}

impl CTile<'_> {
    /// Runs `kernel(c, ldc, load)`, a kernel that writes `h` rows of exactly
    /// `nr` columns at `c` (row stride `ldc`), reading them first when
    /// `load`: on C in place when the tile is `nr` wide, else on a
    /// tile-sized buffer copied from and back to C's `w` columns.
    ///
    /// # Safety
    /// The `h x w` block of C at `c` is writable and this task's alone.
    #[inline(always)]
    pub(crate) unsafe fn full_width(self, kernel: impl FnOnce(*mut f32, usize, bool)) {
        let CTile {
            c,
            ldc,
            h,
            w,
            nr,
            load,
            tmp,
        } = self;
        if w == nr {
            kernel(c, ldc, load);
            return;
        }
        if load {
            for r in 0..h {
                for jj in 0..w {
                    // SAFETY: row r < h, column jj < w of the block (contract).
                    tmp[r * nr + jj] = unsafe { *c.add(r * ldc + jj) };
                }
            }
        }
        kernel(tmp.as_mut_ptr(), nr, load);
        for r in 0..h {
            for jj in 0..w {
                // SAFETY: as above.
                unsafe { *c.add(r * ldc + jj) = tmp[r * nr + jj] };
            }
        }
    }

    /// C itself, for a kernel that writes any width: `(c, ldc, w, load)`.
    #[inline(always)]
    pub(crate) fn in_place(self) -> (*mut f32, usize, usize, bool) {
        (self.c, self.ldc, self.w, self.load)
    }
}

/// A raw pointer to C that may cross threads (each task writes its own
/// column range).
#[derive(Clone, Copy)]
struct CPtr(*mut f32);

// SAFETY: used only by `product` to hand disjoint column ranges of one
// exclusively borrowed C to rayon tasks that join before the borrow ends.
unsafe impl Send for CPtr {}
// SAFETY: as above.
unsafe impl Sync for CPtr {}

thread_local! {
    /// The packing buffer of this thread, for the precisions that pack B
    /// panels on the fly (allocated on first use and reused).
    static PACK: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
}

/// How many column tasks a product of `n` columns in panels of `nr` runs
/// under `par`: 1 (run on the calling thread) when `par` is serial or the
/// product's `work` (m·n·k) is too small to split.
pub(crate) fn column_tasks(n: usize, nr: usize, par: Par, work: usize) -> usize {
    let tasks = par.tasks().min(n.div_ceil(nr));
    if tasks <= 1 || work < MIN_SPLIT_WORK {
        1
    } else {
        tasks
    }
}

/// `C[m x n] (+)= A · B` as `ops` computes it, then `epi` on every finished
/// row segment, in `tasks` column ranges of whole panels (from
/// [`column_tasks`]) on the current rayon pool; the same values whatever
/// `tasks` is.
///
/// # Safety
/// `ops`'s operands hold `m` rows of A and `n` columns of B (checked by the
/// front); `c` has `m` rows of `ldc >= n` floats (`span(m, n, ldc)`).
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn product<O: Operands>(
    ops: &O,
    m: usize,
    n: usize,
    c: &mut [f32],
    ldc: usize,
    accumulate: bool,
    epi: EpilogueFn<'_>,
    tasks: usize,
) {
    debug_assert!(c.len() >= span(m, n, ldc));
    if m == 0 || n == 0 {
        return;
    }
    let nr = ops.blocking().nr;
    let cp = CPtr(c.as_mut_ptr());
    let run = |lo: usize, hi: usize| {
        ops.prepare();
        // SAFETY: forwarded contract; each task gets a disjoint column range
        // of C, which stays exclusively borrowed until all tasks have joined.
        unsafe { gemm_cols(ops, m, cp, ldc, lo, hi, accumulate, epi) }
    };
    if tasks <= 1 {
        run(0, n);
        return;
    }
    let per = n.div_ceil(nr).div_ceil(tasks) * nr;
    (0..n.div_ceil(per)).into_par_iter().for_each(|t| {
        run(t * per, ((t + 1) * per).min(n));
    });
}

/// `C[0..m][j_lo..j_hi] (+)= A · B[.., j_lo..j_hi]`, then the epilogue, with
/// this thread's packing buffer when the precision packs.
///
/// # Safety
/// As [`product`]'s; `j_hi <= n` and columns `j_lo..j_hi` of C are this
/// task's alone during the call.
#[allow(clippy::too_many_arguments)]
unsafe fn gemm_cols<O: Operands>(
    ops: &O,
    m: usize,
    c: CPtr,
    ldc: usize,
    j_lo: usize,
    j_hi: usize,
    accumulate: bool,
    epi: EpilogueFn<'_>,
) {
    if O::PACK_FLOATS == 0 {
        // SAFETY: forwarded contract; no packing buffer is needed.
        unsafe {
            sweep(
                ops,
                m,
                c.0,
                ldc,
                j_lo,
                j_hi,
                accumulate,
                epi,
                std::ptr::null_mut(),
            )
        };
        return;
    }
    PACK.with(|buf| {
        let mut buf = buf.borrow_mut();
        // Slack for 64-byte alignment.
        let len = O::PACK_FLOATS + 16;
        if buf.len() < len {
            buf.resize(len, 0.0);
        }
        let base = buf.as_mut_ptr();
        let pack = base.wrapping_add(base.align_offset(64).min(16));
        // SAFETY: forwarded contract; `pack` is 64-byte aligned with
        // PACK_FLOATS floats after it, borrowed for the whole call.
        unsafe { sweep(ops, m, c.0, ldc, j_lo, j_hi, accumulate, epi, pack) };
    });
}

/// The loops of [`gemm_cols`] (see the module docs).
///
/// # Safety
/// As [`gemm_cols`]'s; `pack` as [`Operands::panel`] needs it.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
unsafe fn sweep<O: Operands>(
    ops: &O,
    m: usize,
    c: *mut f32,
    ldc: usize,
    j_lo: usize,
    j_hi: usize,
    accumulate: bool,
    epi: EpilogueFn<'_>,
    pack: *mut f32,
) {
    let Blocking {
        mr,
        nr,
        kc: kcb,
        depth,
        mc: mcb,
        epilogue,
    } = ops.blocking();
    debug_assert!(mr <= MAX_MR && nr <= MAX_NR);
    let mut tmp = [0.0f32; MAX_MR * MAX_NR];
    // The row segment of row i at columns j0..j0 + w.
    let row = |i: usize, j0: usize, w: usize| {
        // SAFETY: row i < m, columns j0..j0 + w of this task's range; no
        // other reference to them exists.
        unsafe { std::slice::from_raw_parts_mut(c.wrapping_add(i * ldc + j0), w) }
    };
    let k_blocks = depth.div_ceil(kcb).max(1);
    for kb in 0..k_blocks {
        let p0 = kb * kcb;
        let kc = kcb.min(depth - p0.min(depth));
        let load = accumulate || kb > 0;
        let last = kb + 1 == k_blocks;
        let mut i0 = 0;
        while i0 < m {
            let mc = mcb.min(m - i0);
            let mut j0 = j_lo;
            while j0 < j_hi {
                let w = nr.min(j_hi - j0);
                // SAFETY: columns j0..j0 + w <= n, depth p0..p0 + kc (forwarded
                // contract); `pack` as required.
                let panel = unsafe { ops.panel(p0, kc, j0, w, pack) };
                for (i, h) in row_tiles(mc, mr) {
                    let row0 = i0 + i;
                    let tile = CTile {
                        c: c.wrapping_add(row0 * ldc + j0),
                        ldc,
                        h,
                        w,
                        nr,
                        load,
                        tmp: &mut tmp,
                    };
                    // SAFETY: rows row0..row0 + h <= m, 1 <= h <= mr; the h x w
                    // block of C at the tile is this task's (contract).
                    unsafe { ops.tile(&panel, p0, kc, row0, h, tile) };
                }
                if last && epilogue == EpilogueAt::Panel {
                    for r in i0..i0 + mc {
                        epi(j0, row(r, j0, w));
                    }
                }
                j0 += nr;
            }
            if last && epilogue == EpilogueAt::Rows {
                for r in i0..i0 + mc {
                    epi(j_lo, row(r, j_lo, j_hi - j_lo));
                }
            }
            i0 += mc;
        }
    }
}
