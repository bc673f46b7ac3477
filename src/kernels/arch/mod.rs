//! The kernels' ISA-specific code, one module per instruction set (the layout
//! of memchr's `arch/`): [`generic`] is portable code, `x86_64` the x86-64
//! ISAs. Each variant of a kernel family has its descriptor here, beside its
//! kernels (`SKERNEL`, `QKERNEL`, `BKERNEL`: see [`kernels`](super)'s
//! docs); the fronts ([`sgemm`](super::sgemm), [`qgemm`](super::qgemm),
//! [`bgemm`](super::bgemm), [`ops`](super::ops),
//! [`attention`](super::attention)) and the GEMM driver keep the algorithms
//! (blocking, packing, threading, epilogues) and call into these through the
//! descriptor of the variant [`isa`](super::isa) selects.

#[macro_use]
mod simd;

/// `pub(crate) const $name: [$ty; N]`: `$kernel::<R>` for the tile heights
/// `R` listed (index = rows - 1).
#[allow(unused_macros)]
macro_rules! tiles {
    ($name:ident: $ty:ty = $kernel:ident, $($r:literal),*) => {
        pub(crate) const $name: [$ty; [$($r),*].len()] = [$($kernel::<$r>),*];
    };
}

/// `OPS`: the row operations the ISA module it expands in defines
/// (`add_assign`, `scale`, `layer_norm`, `bias_layer_norm`, `bias_gelu`,
/// `bias_gelu_tanh`, `softmax`), with `$attend` the vector attention
/// (`Some(attend)`) or `None`, for the f32 descriptor
/// (`sgemm::SKernel::ops`).
macro_rules! row_ops {
    ($attend:expr) => {
        /// This ISA's row operations (see [`RowOps`](crate::kernels::arch::types::RowOps)).
        pub(crate) const OPS: crate::kernels::arch::types::RowOps =
            crate::kernels::arch::types::RowOps {
                add_assign,
                scale,
                layer_norm,
                bias_layer_norm,
                bias_gelu,
                bias_gelu_tanh,
                softmax,
                attend: $attend,
                #[cfg(test)]
                exp: exp_slice,
            };
    };
}

#[cfg(target_arch = "aarch64")]
pub(crate) mod aarch64;
pub(crate) mod generic;
pub(crate) mod types;
#[cfg(target_arch = "x86_64")]
pub(crate) mod x86_64;

/// This target's table of kernel variants, best first (see
/// [`isa`](super::isa)).
#[cfg(target_arch = "x86_64")]
pub use x86_64::VARIANTS;

/// This target's table of kernel variants, best first (see
/// [`isa`](super::isa)).
#[cfg(target_arch = "aarch64")]
pub use aarch64::VARIANTS;

/// This target's table of kernel variants: the portable row only.
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
pub static VARIANTS: [crate::kernels::isa::Variant; 1] = [generic::VARIANT];
