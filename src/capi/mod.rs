//! The C ABI: `embd_*` functions over the safe `Embedder` API. (The
//! cpp_embedder compatibility functions are in `crate::compat`.)
//!
//! This layer has no logic beyond argument checking, conversion and status
//! mapping. Every export runs inside `boundary::ffi_boundary` (panics are
//! caught and become `EMBD_STATUS_INTERNAL_PANIC`), resolves handles through the
//! registry in `handles`, and reports failures as an `embd_status` plus a
//! per-thread message (`embd_last_error`). `include/embedder.h` is generated
//! from this module by cbindgen (see `build.rs`); the `///` docs here are the
//! header's documentation.
//!
//! One file per C object, as the header groups them: `options`
//! (`embd_options`), `model` (`embd_model`: open, free, facts), `encode`
//! (float vectors), `tokens`, `vectors` (similarity), `output` (quantized
//! output), `rerank` (`embd_reranker`), `precision`, `status`, `version`, `last_error`. Adding a C
//! function means writing it in its object's file (the globs below re-export
//! it) and blessing the header. Two tables serve the objects: `c_enum` (each
//! C enumeration's constants as rows, from which its conversions and names
//! follow) and `setters` (the setters `embd_options` and `embd_call_options`
//! share). cbindgen emits functions in the order of the
//! `mod` lines below (hence the groups: rustfmt sorts only within a group).
#![allow(non_camel_case_types)]

// The C objects, in the order of the header.
pub mod options;

pub mod model;

pub mod call;
pub mod encode;
pub mod outputs;
pub mod tokens;
pub mod vectors;

pub mod rerank;

// The boundary (and the test-panic export), handles, the tables, and the
// rest.
pub mod boundary;
pub(crate) mod c_enum;
pub mod handles;
pub mod last_error;
pub mod output;
pub mod precision;
pub(crate) mod setters;
pub mod status;
pub mod version;

// Every C object's exports, at `embedder::capi::*` (globs, so a new function
// needs no line here).
pub use call::*;
pub use encode::*;
pub use handles::{embd_model, embd_options};
pub use last_error::*;
pub use model::*;
pub use options::*;
pub use output::*;
pub use outputs::*;
pub use precision::*;
pub use rerank::*;
pub use status::*;
pub use tokens::*;
pub use vectors::*;
pub use version::*;

#[cfg(feature = "test-panic")]
pub use boundary::embd_test_panic;

#[cfg(test)]
mod tests;
