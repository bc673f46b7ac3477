//! Opaque handles and the registry of live handles.
//!
//! A handle given to C is the address of an `Arc`'s contents. The library never
//! dereferences a pointer received from C to reach a handle: it looks the address
//! up in a process-wide registry of live handles (a `RwLock<HashMap>`, held only
//! for the lookup, never during work) and clones the `Arc` it finds. So a freed
//! handle, a handle of another type, or a random pointer is reported as
//! `EMBD_STATUS_INVALID_HANDLE` without undefined behaviour, and a call that is
//! still running when another thread frees the handle keeps its own reference
//! (the memory is released when that call returns). Each handle also carries a
//! magic tag, checked after the lookup as a second line of defence.

use std::collections::HashMap;
use std::ffi::CString;
use std::sync::{Arc, Mutex, RwLock};

use super::boundary::{Fail, FfiResult};
use super::compat::{CompatHandle, COMPAT_MAGIC};
use super::status::embd_status;
use crate::{Engine, ModelInfo, Options};

pub(crate) const MODEL_MAGIC: u64 = 0x454d_4244_4d4f_444c; // "EMBDMODL"
pub(crate) const OPTIONS_MAGIC: u64 = 0x454d_4244_4f50_5453; // "EMBDOPTS"

/// An open model. Immutable after `embd_open`; every function taking a
/// `const embd_model *` may be called on the same handle from many threads at
/// once. Created by `embd_open`, destroyed by `embd_free`.
pub struct embd_model {
    pub(crate) magic: u64,
    pub(crate) embedder: Engine,
    pub(crate) info: ModelInfo,
    pub(crate) name: CString,
}

/// Options for `embd_open`: a builder created by `embd_options_new`, changed by
/// the `embd_options_set_*` functions and destroyed by `embd_options_free`. Not
/// shared between threads while being changed; `embd_open` only reads it.
pub struct embd_options {
    pub(crate) magic: u64,
    pub(crate) opts: Mutex<Options>,
}

/// A live handle of any type.
#[derive(Clone)]
pub(crate) enum Live {
    Model(Arc<embd_model>),
    Options(Arc<embd_options>),
    Compat(Arc<CompatHandle>),
    CompatTokenizer(Arc<CompatHandle>),
}

impl Live {
    fn type_name(&self) -> &'static str {
        match self {
            Live::Model(_) => "an embd_model",
            Live::Options(_) => "an embd_options",
            Live::Compat(_) => "a cpp_embedder EmbedderHandle",
            Live::CompatTokenizer(_) => "a cpp_embedder TokenizerHandle",
        }
    }
}

type Registry = RwLock<HashMap<usize, Live>>;

fn registry() -> &'static Registry {
    static REGISTRY: std::sync::OnceLock<Registry> = std::sync::OnceLock::new();
    REGISTRY.get_or_init(|| RwLock::new(HashMap::new()))
}

/// Registers a handle under `addr`.
pub(crate) fn register(addr: usize, live: Live) {
    registry()
        .write()
        .unwrap_or_else(|e| e.into_inner())
        .insert(addr, live);
}

/// Removes a handle; returns it if it was live.
pub(crate) fn unregister(addr: usize) -> Option<Live> {
    registry()
        .write()
        .unwrap_or_else(|e| e.into_inner())
        .remove(&addr)
}

/// Looks up a live handle without removing it.
pub(crate) fn lookup(addr: usize) -> Option<Live> {
    registry()
        .read()
        .unwrap_or_else(|e| e.into_inner())
        .get(&addr)
        .cloned()
}

/// Number of live handles (for leak tests).
#[cfg(test)]
pub(crate) fn live_count() -> usize {
    registry().read().unwrap_or_else(|e| e.into_inner()).len()
}

fn not_live(param: &str, addr: usize, expected: &str) -> Fail {
    Fail::new(
        embd_status::InvalidHandle,
        format!(
            "{param} ({addr:#x}) is not a live {expected} handle (already freed, or never returned by this library)"
        ),
    )
}

fn wrong_type(param: &str, live: &Live, expected: &str) -> Fail {
    Fail::new(
        embd_status::InvalidHandle,
        format!("{param} is {}, not {expected} handle", live.type_name()),
    )
}

/// Resolves a model handle.
pub(crate) fn model(p: *const embd_model, param: &str) -> FfiResult<Arc<embd_model>> {
    if p.is_null() {
        return Err(Fail::null(param));
    }
    match lookup(p as usize) {
        Some(Live::Model(m)) if m.magic == MODEL_MAGIC => Ok(m),
        Some(other @ (Live::Options(_) | Live::Compat(_) | Live::CompatTokenizer(_))) => {
            Err(wrong_type(param, &other, "an embd_model"))
        }
        _ => Err(not_live(param, p as usize, "embd_model")),
    }
}

/// Resolves an options handle.
pub(crate) fn options(p: *const embd_options, param: &str) -> FfiResult<Arc<embd_options>> {
    if p.is_null() {
        return Err(Fail::null(param));
    }
    match lookup(p as usize) {
        Some(Live::Options(o)) if o.magic == OPTIONS_MAGIC => Ok(o),
        Some(other @ (Live::Model(_) | Live::Compat(_) | Live::CompatTokenizer(_))) => {
            Err(wrong_type(param, &other, "an embd_options"))
        }
        _ => Err(not_live(param, p as usize, "embd_options")),
    }
}

/// Resolves a cpp_embedder `EmbedderHandle`.
pub(crate) fn compat(p: *const std::ffi::c_void, param: &str) -> FfiResult<Arc<CompatHandle>> {
    if p.is_null() {
        return Err(Fail::null(param));
    }
    match lookup(p as usize) {
        Some(Live::Compat(h)) if h.magic == COMPAT_MAGIC => Ok(h),
        Some(other @ (Live::Model(_) | Live::Options(_) | Live::CompatTokenizer(_))) => {
            Err(wrong_type(param, &other, "an EmbedderHandle"))
        }
        _ => Err(not_live(param, p as usize, "EmbedderHandle")),
    }
}

/// Resolves a cpp_embedder `TokenizerHandle` to its embedder handle.
pub(crate) fn compat_tokenizer(
    p: *const std::ffi::c_void,
    param: &str,
) -> FfiResult<Arc<CompatHandle>> {
    if p.is_null() {
        return Err(Fail::null(param));
    }
    match lookup(p as usize) {
        Some(Live::CompatTokenizer(h)) if h.magic == COMPAT_MAGIC => Ok(h),
        Some(other @ (Live::Model(_) | Live::Options(_) | Live::Compat(_))) => {
            Err(wrong_type(param, &other, "a TokenizerHandle"))
        }
        _ => Err(not_live(param, p as usize, "TokenizerHandle")),
    }
}
