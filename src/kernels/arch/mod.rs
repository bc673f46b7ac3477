//! The kernels' ISA-specific code, one module per instruction set (the layout
//! of memchr's `arch/`): [`generic`] is portable code, `x86_64` the x86-64
//! ISAs. Each variant of a kernel family has its descriptor here, beside its
//! kernels (`SKERNEL`, `QKERNEL`, `BKERNEL`: see [`kernels`](super)'s
//! docs); the fronts ([`sgemm`](super::sgemm), [`qgemm`](super::qgemm),
//! [`bgemm`](super::bgemm), [`ops`](super::ops),
//! [`attention`](super::attention)) and the GEMM driver keep the algorithms
//! (blocking, packing, threading, epilogues) and call into these through the
//! descriptor of the variant [`isa`](super::isa) selects.

/// `OPS`: the row operations the ISA module it expands in defines
/// (`add_assign`, `scale`, `layer_norm`, `bias_layer_norm`, `bias_gelu`,
/// `bias_gelu_tanh`, `softmax`), with `$attend` the vector attention
/// (`Some(attend)`) or `None`, for the f32 descriptor
/// (`sgemm::SKernel::ops`).
macro_rules! row_ops {
    ($attend:expr) => {
        /// This ISA's row operations (see [`RowOps`](crate::kernels::ops::RowOps)).
        pub(crate) const OPS: crate::kernels::ops::RowOps = crate::kernels::ops::RowOps {
            add_assign,
            scale,
            layer_norm,
            bias_layer_norm,
            bias_gelu,
            bias_gelu_tanh,
            softmax,
            attend: $attend,
        };
    };
}

pub(crate) mod generic;
#[cfg(target_arch = "x86_64")]
pub(crate) mod x86_64;
