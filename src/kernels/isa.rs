//! What the CPU can do, and which kernels run: the one place that detects CPU
//! features, reads `EMBD_SIMD` and holds the table of kernel variants.
//!
//! Each target has one table, [`VARIANTS`], best first: a row per instruction
//! set level, with its name, the CPU features it needs, and the f32, int8 and
//! bf16 descriptors it provides (`SKernel`, `QKernel`, `BKernel`, defined
//! beside its kernels under `kernels/arch/`), and an optional per-thread
//! set-up hook. A row's rank is its place in the table (the last row, the
//! portable code, ranks lowest). For each precision the choice is the first
//! row that has a descriptor for it, whose features the CPU has and whose
//! rank `EMBD_SIMD` allows; it is made once and cached in an atomic, so the
//! fast path of [`fp32`], [`int8`] and `bf16` is one relaxed load.
//!
//! | target | rows, best first (`EMBD_SIMD` names) | f32 | int8 | bf16 |
//! |---|---|---|---|---|
//! | x86-64 | `avx512bf16` (AVX-512F/BW/VL/BF16) | | | `vdpbf16ps` |
//! | | `avx512vnni` (AVX-512F/BW/VNNI) | | `vpdpbusd zmm` | |
//! | | `avx512` (AVX-512F/BW) | 12 x 32 | | emulation 12 x 32 |
//! | | `avxvnni` (AVX-VNNI) | | `vpdpbusd ymm` | |
//! | | `avx2` (AVX2 + FMA) | 6 x 16 | `vpmaddubsw` | emulation 5 x 16 |
//! | aarch64 | `i8mm` (FEAT_I8MM + FEAT_DotProd) | | `smmla` | |
//! | | `dotprod` (FEAT_DotProd) | | `sdot` | |
//! | | `neon` (Advanced SIMD, every aarch64 CPU) | 6 x 16 `fmla` | | emulation 6 x 16 |
//! | every target | `none` (portable code) | 4 x 16 | 4 x 16 | exact scalar |
//!
//! Every x86-64 row needs AVX2 and FMA too (the rows above `avx2` build on
//! its packing and quantization code). `EMBD_SIMD=NAME` allows the named row
//! and every row below it; unset (or a name this target's table does not
//! have) allows all. So `EMBD_SIMD=avxvnni` runs what an AVX-VNNI CPU without
//! AVX-512 would (f32 and bf16 on `avx2`), and `EMBD_SIMD=neon` what a core
//! without the dot-product instructions would. Every row gives the same bits
//! (see the fronts' docs), so the cap changes speed only.
//!
//! The bf16 front may also race its chosen row against the next one once
//! and keep the faster (`BKernel::race`: `vdpbf16ps` against its FMA
//! emulation, whose order differs between AMD and Intel).
//!
//! Adding an ISA: its module under `kernels/arch/` with its descriptors, and
//! its row in that target's table; a feature bit here if it needs a new one.
//! Nothing else matches on a variant.

use std::cell::Cell;
use std::sync::atomic::{AtomicU32, AtomicU8, Ordering::Relaxed};

use super::arch::types::{BKernel, QKernel, SKernel};

pub use super::arch::VARIANTS;

/// A set of CPU features.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Features(u32);

impl Features {
    /// Nothing beyond the target's baseline.
    pub const NONE: Features = Features(0);
    /// AVX2.
    pub const AVX2: Features = Features(1);
    /// FMA (the 256-bit fused multiply-adds).
    pub const FMA: Features = Features(1 << 1);
    /// AVX-512F.
    pub const AVX512F: Features = Features(1 << 2);
    /// AVX-512BW.
    pub const AVX512BW: Features = Features(1 << 3);
    /// AVX-512VL.
    pub const AVX512VL: Features = Features(1 << 4);
    /// AVX-512 VNNI.
    pub const AVX512VNNI: Features = Features(1 << 5);
    /// AVX-VNNI (the 256-bit VEX form).
    pub const AVXVNNI: Features = Features(1 << 6);
    /// AVX-512 BF16.
    pub const AVX512BF16: Features = Features(1 << 7);
    /// aarch64 FEAT_DotProd (`sdot`, `udot`).
    pub const DOTPROD: Features = Features(1 << 8);
    /// aarch64 FEAT_I8MM (`smmla`, `usdot`).
    pub const I8MM: Features = Features(1 << 9);
    /// aarch64 FEAT_BF16 (`bfdot`, `bfmmla`; detected and reported, not used:
    /// their sums round otherwise than the bf16 arithmetic of every other row).
    pub const BF16: Features = Features(1 << 10);

    /// Both sets.
    pub const fn and(self, other: Features) -> Features {
        Features(self.0 | other.0)
    }

    /// Whether this CPU has every feature of the set (detected once).
    #[inline]
    pub fn available(self) -> bool {
        cpu() & self.0 == self.0
    }
}

/// The features of this CPU, and [`DETECTED`].
static CPU: AtomicU32 = AtomicU32::new(0);
/// Set in [`CPU`] once the features are known.
const DETECTED: u32 = 1 << 31;

#[inline]
fn cpu() -> u32 {
    match CPU.load(Relaxed) {
        0 => detect_cpu(),
        v => v,
    }
}

#[cold]
fn detect_cpu() -> u32 {
    #[allow(unused_mut)]
    let mut v = DETECTED;
    #[cfg(target_arch = "x86_64")]
    {
        use std::is_x86_feature_detected as has;
        for (yes, f) in [
            (has!("avx2"), Features::AVX2),
            (has!("fma"), Features::FMA),
            (has!("avx512f"), Features::AVX512F),
            (has!("avx512bw"), Features::AVX512BW),
            (has!("avx512vl"), Features::AVX512VL),
            (has!("avx512vnni"), Features::AVX512VNNI),
            (has!("avxvnni"), Features::AVXVNNI),
            (has!("avx512bf16"), Features::AVX512BF16),
        ] {
            if yes {
                v |= f.0;
            }
        }
    }
    #[cfg(target_arch = "aarch64")]
    {
        use std::arch::is_aarch64_feature_detected as has;
        for (yes, f) in [
            (has!("dotprod"), Features::DOTPROD),
            (has!("i8mm"), Features::I8MM),
            (has!("bf16"), Features::BF16),
        ] {
            if yes {
                v |= f.0;
            }
        }
    }
    CPU.store(v, Relaxed);
    v
}

/// One row of the table: an instruction-set level and the kernels it
/// provides.
pub struct Variant {
    /// Its `EMBD_SIMD` name.
    pub name: &'static str,
    /// What the CPU must have to run its kernels.
    pub needs: Features,
    /// The f32 GEMM tiles, row operations and vector attention.
    pub(crate) f32: Option<&'static SKernel>,
    /// The int8 GEMM tiles and row quantization.
    pub(crate) int8: Option<&'static QKernel>,
    /// The bf16 GEMM tiles and rounding of A.
    pub(crate) bf16: Option<&'static BKernel>,
    /// Run once on each thread before the row's kernels first run there
    /// (a per-thread CPU state such as a tile configuration).
    pub(crate) init: Option<fn()>,
}

impl Variant {
    /// The rows a product of this precision is written for.
    pub fn provides(&self) -> Vec<&'static str> {
        let mut p = Vec::new();
        if self.f32.is_some() {
            p.push("f32");
        }
        if self.int8.is_some() {
            p.push("int8");
        }
        if self.bf16.is_some() {
            p.push("bf16");
        }
        p
    }

    /// Whether this CPU runs the row's kernels.
    pub fn supported(&self) -> bool {
        self.needs.available()
    }
}

/// Runs the `init` hook of row `index` on this thread, once.
#[inline]
pub(crate) fn prepare(index: usize) {
    thread_local! {
        static READY: Cell<u64> = const { Cell::new(0) };
    }
    let Some(init) = VARIANTS[index].init else {
        return;
    };
    let bit = 1u64 << index;
    READY.with(|r| {
        if r.get() & bit == 0 {
            init();
            r.set(r.get() | bit);
        }
    });
}

/// The lowest index of [`VARIANTS`] that `EMBD_SIMD` allows (read once).
#[inline]
pub fn cap() -> usize {
    match CAP.load(Relaxed) {
        0 => read_cap(),
        v => usize::from(v - 1),
    }
}

/// [`cap`]'s state: 0 = not read yet, else 1 + the index.
static CAP: AtomicU8 = AtomicU8::new(0);

#[cold]
fn read_cap() -> usize {
    let want = std::env::var("EMBD_SIMD").unwrap_or_default();
    let cap = VARIANTS.iter().position(|v| v.name == want).unwrap_or(0);
    CAP.store(1 + cap as u8, Relaxed);
    cap
}

/// A precision's choice, made once: 0 = not yet, else 1 + the row's index.
pub(crate) struct Choice(AtomicU8);

impl Choice {
    const fn new() -> Choice {
        Choice(AtomicU8::new(0))
    }

    /// The cached row index, or `select`'s (stored).
    #[inline(always)]
    fn get(&self, select: impl FnOnce() -> usize) -> usize {
        match self.0.load(Relaxed) {
            0 => self.init(select),
            v => usize::from(v - 1),
        }
    }

    #[cold]
    #[inline(never)]
    fn init(&self, select: impl FnOnce() -> usize) -> usize {
        let i = select();
        self.0.store(1 + i as u8, Relaxed);
        i
    }
}

/// The handle of a row for one precision (`sgemm::Isa`, `qgemm::Isa`,
/// `bgemm::Isa`): an index into [`VARIANTS`] whose row has that precision's
/// descriptor.
macro_rules! precision_isa {
    ($(#[$doc:meta])* $name:ident, $field:ident, $desc:ty, $choice:ident) => {
        $(#[$doc])*
        #[derive(Clone, Copy, PartialEq, Eq, Hash)]
        pub struct $name(u8);

        static $choice: Choice = Choice::new();

        impl $name {
            /// Every row with this precision's kernels, best first.
            pub fn all() -> impl Iterator<Item = $name> {
                (0..VARIANTS.len())
                    .filter(|&i| VARIANTS[i].$field.is_some())
                    .map(|i| $name(i as u8))
            }

            /// The row of that `EMBD_SIMD` name, if it has this precision's
            /// kernels.
            pub fn by_name(name: &str) -> Option<$name> {
                Self::all().find(|i| i.name() == name)
            }

            /// The row's `EMBD_SIMD` name.
            pub fn name(self) -> &'static str {
                self.variant().name
            }

            /// The row.
            pub fn variant(self) -> &'static Variant {
                &VARIANTS[usize::from(self.0)]
            }

            /// The row's descriptor for this precision.
            #[inline]
            pub(crate) fn kernel(self) -> &'static $desc {
                match self.variant().$field {
                    Some(d) => d,
                    None => unreachable!("a handle names a row with its descriptor"),
                }
            }

            /// Whether this CPU runs the kernels.
            pub fn supported(self) -> bool {
                self.variant().supported()
            }

            /// Runs the row's per-thread set-up on this thread (once).
            #[inline]
            pub(crate) fn prepare(self) {
                prepare(usize::from(self.0))
            }

            /// The best row the CPU runs and `EMBD_SIMD` allows (the
            /// portable row always qualifies).
            pub(crate) fn best() -> $name {
                let cap = cap();
                Self::all()
                    .find(|i| usize::from(i.0) >= cap && i.supported())
                    .expect("the portable row has every precision")
            }

            /// The next row after this one that the CPU runs and
            /// `EMBD_SIMD` allows.
            pub fn next_best(self) -> Option<$name> {
                Self::all().find(|i| i.0 > self.0 && i.supported())
            }

            /// The choice of this process, made once with `select`.
            #[inline]
            pub(crate) fn chosen_by(select: fn() -> $name) -> $name {
                $name($choice.get(|| usize::from(select().0)) as u8)
            }
        }

        impl std::fmt::Debug for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.name())
            }
        }
    };
}

precision_isa!(
    /// A row of f32 kernels: the [`sgemm`](super::sgemm) tiles, the vector
    /// code of [`ops`](super::ops) and [`attention`](super::attention).
    F32Isa,
    f32,
    SKernel,
    F32
);
precision_isa!(
    /// A row of int8 kernels ([`qgemm`](super::qgemm)).
    Int8Isa,
    int8,
    QKernel,
    INT8
);
precision_isa!(
    /// A row of bf16 kernels ([`bgemm`](super::bgemm)).
    Bf16Isa,
    bf16,
    BKernel,
    BF16
);

/// The f32 kernels of this process.
#[inline]
pub fn fp32() -> F32Isa {
    F32Isa::chosen_by(F32Isa::best)
}

/// The int8 kernels of this process.
#[inline]
pub fn int8() -> Int8Isa {
    Int8Isa::chosen_by(Int8Isa::best)
}

/// The bf16 kernels of this process: `select` is the front's own choice
/// (see [`bgemm::isa`](super::bgemm::isa)), run once.
#[inline]
pub(crate) fn bf16(select: fn() -> Bf16Isa) -> Bf16Isa {
    Bf16Isa::chosen_by(select)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The choices under this process's `EMBD_SIMD` follow the table: for
    /// each precision the first row with its kernels that the CPU has, at
    /// or below the cap (run the kernel tests under each `EMBD_SIMD` name
    /// too).
    #[test]
    fn choices_follow_the_table() {
        let env = std::env::var("EMBD_SIMD").unwrap_or_default();
        let cap = VARIANTS.iter().position(|v| v.name == env).unwrap_or(0);
        assert_eq!(super::cap(), cap);
        let first = |has: fn(&Variant) -> bool| {
            VARIANTS
                .iter()
                .enumerate()
                .find(|&(i, v)| i >= cap && has(v) && v.needs.available())
                .map(|(_, v)| v.name)
                .unwrap()
        };
        assert_eq!(
            fp32().name(),
            first(|v| v.f32.is_some()),
            "EMBD_SIMD={env:?}"
        );
        assert_eq!(
            int8().name(),
            first(|v| v.int8.is_some()),
            "EMBD_SIMD={env:?}"
        );
        let bf16_best = first(|v| v.bf16.is_some());
        let bf16_got = super::super::bgemm::isa();
        // A racing row may give way to the next one the CPU runs, nothing else.
        let best = Bf16Isa::by_name(bf16_best).unwrap();
        assert!(
            bf16_got == best || (best.kernel().race && Some(bf16_got) == best.next_best()),
            "EMBD_SIMD={env:?}: bf16 {bf16_got:?}, best {bf16_best}"
        );
        eprintln!(
            "EMBD_SIMD={env:?}: f32 {:?}, int8 {:?}, bf16 {bf16_got:?}",
            fp32(),
            int8()
        );
    }

    /// The table's shape: unique names, the portable row last with every
    /// precision, and each row's needs a superset of every row below it
    /// that it builds on (so the cap only ever removes kernels).
    #[test]
    fn the_table_is_well_formed() {
        let last = VARIANTS.last().unwrap();
        assert_eq!(last.name, "none");
        assert_eq!(last.needs, Features::NONE);
        assert!(last.f32.is_some() && last.int8.is_some() && last.bf16.is_some());
        for (i, v) in VARIANTS.iter().enumerate() {
            assert!(VARIANTS[..i].iter().all(|w| w.name != v.name), "{}", v.name);
            assert!(!v.provides().is_empty(), "{} provides nothing", v.name);
        }
        assert!(F32Isa::by_name("none").is_some());
        assert_eq!(F32Isa::by_name("no such row"), None);
    }
}
