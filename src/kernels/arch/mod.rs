//! The kernels' ISA-specific code, one module per instruction set (the layout
//! of memchr's `arch/`): [`generic`] is portable code, `x86_64` the x86-64
//! ISAs. The fronts ([`sgemm`](super::sgemm), [`qgemm`](super::qgemm),
//! [`bgemm`](super::bgemm), [`ops`](super::ops)) keep the algorithms
//! (blocking, packing, threading, epilogues) and call into these through one
//! dispatch each, on the ISA [`isa`](super::isa) selects.

pub(crate) mod generic;
#[cfg(target_arch = "x86_64")]
pub(crate) mod x86_64;
