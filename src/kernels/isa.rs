//! What the CPU can do, and which kernels run: the one place that detects CPU
//! features and reads `EMBD_SIMD`.
//!
//! The features are detected once ([`Features::available`]); `EMBD_SIMD` is
//! read once ([`cap`]). Each kernel family (the f32 GEMM, row operations and
//! attention; the int8 GEMM; the bf16 GEMM) lists its variants best first
//! (`Isa::ALL`), and each variant's descriptor, written beside its kernels
//! under `kernels/arch/` (`sgemm::SKernel`, `qgemm::QKernel`,
//! `bgemm::BKernel`), says what it needs from the CPU and the lowest cap
//! that still allows it; `Family` reads them. The family's choice is the
//! first variant both allow, made once and cached in an atomic, so the fast
//! path of [`fp32`], [`int8`] and `bf16` is one relaxed load.
//!
//! | variant | CPU features | allowed by `EMBD_SIMD` |
//! |---|---|---|
//! | f32 [`sgemm::Isa::Avx512`] (also [`ops`](super::ops), [`attention`](super::attention)) | AVX2, FMA, AVX-512F | unset, `avx512`, `avxvnni` |
//! | f32 [`sgemm::Isa::Avx2`] | AVX2, FMA | all but `none` |
//! | f32 none (portable `matrixmultiply`, scalar ops) | | all |
//! | int8 [`qgemm::Isa::Avx512Vnni`] | AVX2, FMA, AVX-512F/BW/VNNI | unset |
//! | int8 [`qgemm::Isa::AvxVnni`] | AVX2, FMA, AVX-VNNI | unset, `avx512`, `avxvnni` |
//! | int8 [`qgemm::Isa::Avx2`] | AVX2, FMA | all but `none` |
//! | int8 [`qgemm::Isa::Scalar`] | | all |
//! | bf16 [`bgemm::Isa::Avx512Bf16`] | AVX2, FMA, AVX-512F/BW/VL/BF16 | unset |
//! | bf16 [`bgemm::Isa::Avx512`] | AVX2, FMA, AVX-512F/BW | unset, `avx512` |
//! | bf16 [`bgemm::Isa::Avx2`] | AVX2, FMA | all but `none` |
//! | bf16 [`bgemm::Isa::Scalar`] | | all |
//!
//! "Unset" means any value other than `none`, `avx2`, `avxvnni` and `avx512`.
//! The bf16 family also times its two AVX-512 variants once and keeps the
//! faster (see [`bgemm::isa`]).
//!
//! Adding an ISA: its module under `kernels/arch/` with its descriptor
//! (tiles, shape, features, cap, and the family's hooks), its variant in the
//! family's `Isa` enum and `ALL`, and one line of the family's table
//! (`Isa::kernel`); a feature bit here if it needs a new one. No other code
//! matches on the variants (but the bf16 family's timing of its two
//! AVX-512 ones).

use std::sync::atomic::{AtomicU32, AtomicU8, Ordering::Relaxed};

use super::{bgemm, qgemm, sgemm};

/// A set of CPU features.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Features(u32);

impl Features {
    /// Nothing beyond the baseline.
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
    /// Never detected: what the x86 variants need where they cannot exist.
    #[cfg(not(target_arch = "x86_64"))]
    pub(crate) const ABSENT: Features = Features(1 << 30);

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
    CPU.store(v, Relaxed);
    v
}

/// The cap `EMBD_SIMD` puts on the kernels (for testing), lowest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Cap {
    /// `none`: portable code only.
    None,
    /// `avx2`: AVX2 (+ FMA) at most.
    Avx2,
    /// `avxvnni`: the 256-bit VNNI int8 kernels; AVX-512 for f32.
    AvxVnni,
    /// `avx512`: AVX-512 without its VNNI and BF16 extensions.
    Avx512,
    /// Unset (or any other value): the best the CPU has.
    Unlimited,
}

/// The cap of `EMBD_SIMD` (read once).
#[inline]
pub fn cap() -> Cap {
    match CAP.load(Relaxed) {
        1 => Cap::None,
        2 => Cap::Avx2,
        3 => Cap::AvxVnni,
        4 => Cap::Avx512,
        5 => Cap::Unlimited,
        _ => read_cap(),
    }
}

/// [`cap`]'s state: 0 = not read yet, else 1 + the cap's rank.
static CAP: AtomicU8 = AtomicU8::new(0);

#[cold]
fn read_cap() -> Cap {
    let cap = match std::env::var("EMBD_SIMD").unwrap_or_default().as_str() {
        "none" => Cap::None,
        "avx2" => Cap::Avx2,
        "avxvnni" => Cap::AvxVnni,
        "avx512" => Cap::Avx512,
        _ => Cap::Unlimited,
    };
    CAP.store(1 + cap as u8, Relaxed);
    cap
}

/// A kernel family's variants and what each needs.
pub(crate) trait Family: Copy + PartialEq + 'static {
    /// Every variant, best first.
    const ALL: &'static [Self];
    /// What the CPU must have to run the variant's kernels.
    fn features(self) -> Features;
    /// The lowest [`Cap`] that allows the variant.
    fn min_cap(self) -> Cap;
}

/// The first variant of `F` this CPU runs and `EMBD_SIMD` allows.
pub(crate) fn best<F: Family>() -> Option<F> {
    let cap = cap();
    F::ALL
        .iter()
        .copied()
        .find(|f| cap >= f.min_cap() && f.features().available())
}

/// A family's choice, made once: 0 = not yet, 1 = none, `2 + i` = `ALL[i]`.
struct Choice(AtomicU8);

impl Choice {
    const fn new() -> Choice {
        Choice(AtomicU8::new(0))
    }

    /// The cached choice, or `select`'s (stored). Constant indices, so that
    /// once inlined each arm is a constant: the fast path is a load and a
    /// compare (the row operations dispatch on every call).
    #[inline(always)]
    fn get<F: Family>(&self, select: fn() -> Option<F>) -> Option<F> {
        match self.0.load(Relaxed) {
            1 => None,
            2 => F::ALL.first().copied(),
            3 => F::ALL.get(1).copied(),
            4 => F::ALL.get(2).copied(),
            5 => F::ALL.get(3).copied(),
            _ => self.init(select),
        }
    }

    #[cold]
    #[inline(never)]
    fn init<F: Family>(&self, select: fn() -> Option<F>) -> Option<F> {
        const { assert!(F::ALL.len() <= 4, "Choice::get decodes four variants") };
        let found = select();
        let code = found.map_or(1, |f| {
            2 + F::ALL
                .iter()
                .position(|&g| g == f)
                .expect("a variant of ALL") as u8
        });
        self.0.store(code, Relaxed);
        found
    }
}

static F32: Choice = Choice::new();
static INT8: Choice = Choice::new();
static BF16: Choice = Choice::new();

/// The f32 kernels' ISA: the [`sgemm`] tiles and the vector code of
/// [`ops`](super::ops) (`None`: `matrixmultiply` and portable code).
#[inline]
pub fn fp32() -> Option<sgemm::Isa> {
    F32.get(best)
}

/// The int8 kernels' ISA ([`qgemm`]).
#[inline]
pub fn int8() -> qgemm::Isa {
    INT8.get(best).unwrap_or(qgemm::Isa::Scalar)
}

/// The bf16 kernels' ISA ([`bgemm`]): `select` is the family's own choice
/// (see [`bgemm::isa`]), run once.
#[inline]
pub(crate) fn bf16(select: fn() -> Option<bgemm::Isa>) -> bgemm::Isa {
    BF16.get(select).unwrap_or(bgemm::Isa::Scalar)
}

/// `Family` for each family's variant enum: its `ALL`, and what the CPU
/// must have and the lowest cap from each variant's descriptor (`kernel()`:
/// `sgemm::SKernel`, `qgemm::QKernel`, `bgemm::BKernel`, written beside the
/// kernels under `arch/`).
macro_rules! family {
    ($($isa:ty),*) => {$(
        impl Family for $isa {
            const ALL: &'static [Self] = &<$isa>::ALL;

            fn features(self) -> Features {
                self.kernel().needs
            }

            fn min_cap(self) -> Cap {
                self.kernel().min_cap
            }
        }
    )*};
}

family!(sgemm::Isa, qgemm::Isa, bgemm::Isa);

#[cfg(test)]
mod tests {
    use super::*;

    /// The choices under this process's `EMBD_SIMD`, against the rules each
    /// family applied before detection moved here (run the kernel tests with
    /// `EMBD_SIMD=none`, `avx2`, `avxvnni` and `avx512` too).
    #[test]
    fn choices_follow_the_cap() {
        let env = std::env::var("EMBD_SIMD").unwrap_or_default();
        #[cfg(target_arch = "x86_64")]
        let has = |f: &str| match f {
            "avx2" => std::is_x86_feature_detected!("avx2"),
            "fma" => std::is_x86_feature_detected!("fma"),
            "avx512f" => std::is_x86_feature_detected!("avx512f"),
            "avx512bw" => std::is_x86_feature_detected!("avx512bw"),
            "avx512vnni" => std::is_x86_feature_detected!("avx512vnni"),
            "avxvnni" => std::is_x86_feature_detected!("avxvnni"),
            "avx512vl" => std::is_x86_feature_detected!("avx512vl"),
            "avx512bf16" => std::is_x86_feature_detected!("avx512bf16"),
            _ => unreachable!(),
        };
        #[cfg(not(target_arch = "x86_64"))]
        let has = |_: &str| false;
        let avx2 = has("avx2") && has("fma");
        let f32_want = if env == "none" {
            None
        } else if env != "avx2" && avx2 && has("avx512f") {
            Some(sgemm::Isa::Avx512)
        } else if avx2 {
            Some(sgemm::Isa::Avx2)
        } else {
            None
        };
        assert_eq!(fp32(), f32_want, "EMBD_SIMD={env:?}");
        let int8_want = if env == "none" || !has("avx2") || !has("fma") {
            qgemm::Isa::Scalar
        } else if !matches!(env.as_str(), "avx2" | "avxvnni" | "avx512")
            && has("avx512f")
            && has("avx512bw")
            && has("avx512vnni")
        {
            qgemm::Isa::Avx512Vnni
        } else if env != "avx2" && has("avxvnni") {
            qgemm::Isa::AvxVnni
        } else {
            qgemm::Isa::Avx2
        };
        assert_eq!(int8(), int8_want, "EMBD_SIMD={env:?}");
        let avx512 = avx2 && has("avx512f") && has("avx512bw");
        let bf16_ceiling = match env.as_str() {
            "none" => bgemm::Isa::Scalar,
            "avx2" | "avxvnni" => bgemm::Isa::Avx2,
            "avx512" => bgemm::Isa::Avx512,
            _ => bgemm::Isa::Avx512Bf16,
        };
        let bf16_best = bgemm::Isa::ALL
            .into_iter()
            .skip_while(|&i| i != bf16_ceiling)
            .find(|&i| match i {
                bgemm::Isa::Avx512Bf16 => avx512 && has("avx512bf16") && has("avx512vl"),
                bgemm::Isa::Avx512 => avx512,
                bgemm::Isa::Avx2 => avx2,
                bgemm::Isa::Scalar => true,
            })
            .unwrap();
        // The timing may trade vdpbf16ps for its emulation, nothing else.
        let bf16_got = bgemm::isa();
        assert!(
            bf16_got == bf16_best
                || (bf16_best == bgemm::Isa::Avx512Bf16 && bf16_got == bgemm::Isa::Avx512),
            "EMBD_SIMD={env:?}: bf16 {bf16_got:?}, best {bf16_best:?}"
        );
        eprintln!(
            "EMBD_SIMD={env:?}: f32 {:?}, int8 {:?}, bf16 {bf16_got:?}",
            fp32(),
            int8()
        );
    }
}
