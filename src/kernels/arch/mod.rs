//! The kernels' ISA-specific code, one module per instruction set (the layout
//! of memchr's `arch/`): [`generic`] is portable code, `x86_64` the x86-64
//! ISAs. Each variant of a kernel family has its descriptor here, beside its
//! kernels (`SKERNEL`, `QKERNEL`, `BKERNEL`: see [`kernels`](super)'s
//! docs); the fronts ([`sgemm`](super::sgemm), [`qgemm`](super::qgemm),
//! [`bgemm`](super::bgemm), [`ops`](super::ops),
//! [`attention`](super::attention)) and the GEMM driver keep the algorithms
//! (blocking, packing, threading, epilogues) and call into these through the
//! descriptor of the variant [`isa`](super::isa) selects.

pub(crate) mod generic;
#[cfg(target_arch = "x86_64")]
pub(crate) mod x86_64;
