//! The descriptor types of the kernel variants: what a row of
//! [`VARIANTS`](crate::kernels::isa::VARIANTS) provides for each precision,
//! and the function types of its tiles. The fronts
//! ([`sgemm`](crate::kernels::sgemm), [`qgemm`](crate::kernels::qgemm),
//! [`bgemm`](crate::kernels::bgemm), [`ops`](crate::kernels::ops)) read
//! them; the ISA modules under `arch/` define them. Every function in a
//! descriptor may only run once [`isa`](crate::kernels::isa) has reported its
//! row's features (the row's `needs`): that is the safety contract of every
//! call through these tables.

use crate::kernels::attention::HeadInput;

/// One f32 variant: the GEMM tiles, the row operations of
/// [`ops`](crate::kernels::ops) and the vector
/// [`attend`](crate::kernels::attention::attend).
pub(crate) struct SKernel {
    /// Tile height.
    pub(crate) mr: usize,
    /// Tile width (columns per packed panel).
    pub(crate) nr: usize,
    /// Depth of one packed block (the B panel, `kc x nr`, stays in L1).
    pub(crate) kc: usize,
    /// The tiles of 1..=`mr` rows (index = rows - 1).
    pub(crate) tiles: &'static [Kernel],
    /// The row operations (and the vector attention) of the ISA.
    pub(crate) ops: &'static RowOps,
}

/// One f32 register-tile kernel: `C (+)= Apanel · Bpanel` over `kc`.
/// Arguments: `kc`, A (read in place, row stride `lda`), `lda`, the B panel
/// (`kc` rows of `nr` floats), C, `ldc`, `load` (start from C, else from
/// zero), and where the next B panel lies (prefetched while this one is
/// used; never dereferenced, may be anywhere).
pub(crate) type Kernel =
    unsafe fn(usize, *const f32, usize, *const f32, *mut f32, usize, bool, *const f32);

/// The row operations of one ISA, as its f32 descriptor holds them.
pub(crate) struct RowOps {
    /// [`add_assign`](crate::kernels::ops::add_assign).
    pub(crate) add_assign: unsafe fn(&mut [f32], &[f32]),
    /// [`scale`](crate::kernels::ops::scale).
    pub(crate) scale: unsafe fn(&mut [f32], f32),
    /// [`layer_norm`](crate::kernels::ops::layer_norm).
    pub(crate) layer_norm: unsafe fn(&mut [f32], &[f32], &[f32], f32),
    /// [`bias_layer_norm`](crate::kernels::ops::bias_layer_norm).
    pub(crate) bias_layer_norm: BiasLayerNormFn,
    /// [`bias_gelu`](crate::kernels::ops::bias_gelu).
    pub(crate) bias_gelu: unsafe fn(&mut [f32], &[f32]),
    /// [`bias_gelu_tanh`](crate::kernels::ops::bias_gelu_tanh).
    pub(crate) bias_gelu_tanh: unsafe fn(&mut [f32], &[f32]),
    /// [`softmax`](crate::kernels::ops::softmax).
    pub(crate) softmax: unsafe fn(&mut [f32]),
    /// The vector form of [`attend`](crate::kernels::attention::attend) for
    /// heads whose width is a multiple of 16 (`None`: the scalar form only).
    pub(crate) attend: Option<AttendFn>,
    /// `x = exp(x)` element-wise, the `exp` of the kernels above (tests).
    #[cfg(test)]
    pub(crate) exp: unsafe fn(&mut [f32]),
}

/// `bias_layer_norm`'s form in [`RowOps`].
pub(crate) type BiasLayerNormFn = unsafe fn(&mut [f32], &[f32], &[f32], &[f32], f32);

/// A vector form of [`attend`](crate::kernels::attention::attend): same
/// arguments, same bits as its scalar form; its sizes checked, the head's
/// width a multiple of 16.
pub(crate) type AttendFn = unsafe fn(HeadInput<'_>, f32, &mut [f32], &mut [f32], usize);

/// One int8 variant.
pub(crate) struct QKernel {
    /// Tile height (rows of A per kernel call).
    pub(crate) mr: usize,
    /// Tile and panel width (columns).
    pub(crate) nr: usize,
    /// What A's bytes hold: `qa + a_offset` (128 for the u8 · s8 VNNI forms).
    pub(crate) a_offset: i32,
    /// The tiles of 1..=`mr` rows (index = rows - 1).
    pub(crate) tiles: &'static [TileFn],
    /// The vector row quantization, bit for bit
    /// [`quantize_row_scalar`](crate::kernels::qgemm::quantize_row_scalar)
    /// (`None`: that scalar form).
    pub(crate) quantize_row: Option<QuantizeRowFn>,
}

/// A vector form of `quantize_row_scalar` (same arguments and results).
pub(crate) type QuantizeRowFn = unsafe fn(&[f32], Option<&[f32]>, &mut [u8], i32) -> (f32, i32);

/// What one int8 kernel call needs: `h` rows of A from `a` (row stride
/// `lda` bytes) times one packed panel `b` over `kq` groups of 4,
/// dequantized into C (row stride `ldc`) with the rows' scales and
/// corrections and the panel's column scales and sums. A [`TileFn`] of `h`
/// rows may rely on: `h` rows of `4·kq` bytes of A, `kq·4·nr` bytes of
/// panel, `h` entries of `sa` and `zc`, `nr` of `sw` and `wsum`, and `h`
/// rows of `nr` writable floats of C (read first when `load`).
pub(crate) struct Tile {
    pub(crate) kq: usize,
    pub(crate) a: *const u8,
    pub(crate) lda: usize,
    pub(crate) b: *const u8,
    pub(crate) next: *const u8,
    pub(crate) sa: *const f32,
    pub(crate) zc: *const i32,
    pub(crate) sw: *const f32,
    pub(crate) wsum: *const i32,
    pub(crate) c: *mut f32,
    pub(crate) ldc: usize,
    pub(crate) load: bool,
}

/// One int8 kernel for a tile of a fixed number of rows.
pub(crate) type TileFn = unsafe fn(&Tile);

/// One bf16 variant.
pub(crate) struct BKernel {
    /// Tile height.
    pub(crate) mr: usize,
    /// Tile width (columns per packed panel).
    pub(crate) nr: usize,
    /// Pairs of k per packed block (the `kc x nr` panel of 32-bit words
    /// stays in L1).
    pub(crate) kc: usize,
    /// The tiles of 1..=`mr` rows (index = rows - 1); empty: every tile
    /// takes the exact scalar path (`generic::bgemm::tile_exact`).
    pub(crate) tiles: &'static [BKernelFn],
    /// How A is rounded, and so what its words hold.
    pub(crate) round_a: RoundA,
    /// Whether the front times this variant once against the next one the
    /// CPU runs and keeps the faster (the same bits either way).
    pub(crate) race: bool,
}

/// The rounding of one row of A
/// ([`round_bf16_operand`](crate::kernels::bgemm::round_bf16_operand)) for
/// a variant's tiles.
pub(crate) enum RoundA {
    /// To bf16 pairs, element `2q` in the high half of word `q` (as
    /// `vdpbf16ps` reads them; the element after an odd `k` zero); needs no
    /// exponent bounds.
    #[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
    Pairs(unsafe fn(&[f32], &mut [u32])),
    /// To the rounded values as floats, returning the row's smallest
    /// biased exponent (as `bgemm::round_row`, which is the portable form).
    Floats(unsafe fn(&[f32], &mut [u32]) -> i16),
}

/// One bf16 register-tile kernel: `C[0..R][0..nr] = (load ? C : 0) + A ·
/// Bpanel` over `kp` pairs. Arguments: `kp`, A (`R` rows at stride `lda`
/// words, bf16 pairs or floats as the ISA reads them), `lda`, the B panel
/// (`kp` rows of `nr` words), C, `ldc`, `load`, and where the next B panel
/// lies (prefetched; never dereferenced, may be anywhere).
pub(crate) type BKernelFn =
    unsafe fn(usize, *const u32, usize, *const u32, *mut f32, usize, bool, *const u32);
