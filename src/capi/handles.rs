//! Opaque handles and the registry of live handles, for both C layers.
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
//!
//! Any type implementing [`Handle`] can be registered; [`resolve`] is the one
//! lookup for all of them (the registry knows no handle type by name).

use std::any::Any;
use std::collections::HashMap;
use std::ffi::CString;
use std::sync::{Arc, Mutex, RwLock};

use super::boundary::{Fail, FfiResult};
use super::status::embd_status;
use crate::{Engine, ModelInfo, Options};

/// A type whose `Arc`s are handed to C as opaque handles.
pub(crate) trait Handle: Any + Send + Sync {
    /// The C name, for messages: "embd_model".
    const NAME: &'static str;
    /// The C name with its article, for messages: "an embd_model".
    const A_NAME: &'static str;
    /// The magic tag every live value of the type carries.
    const MAGIC: u64;
    /// The value's magic tag.
    fn magic(&self) -> u64;
}

/// An open model. Immutable after `embd_open`; every function taking a
/// `const embd_model *` may be called on the same handle from many threads at
/// once. Created by `embd_open`, destroyed by `embd_free`.
pub struct embd_model {
    pub(crate) magic: u64,
    pub(crate) embedder: Engine,
    pub(crate) info: ModelInfo,
    pub(crate) name: CString,
}

impl Handle for embd_model {
    const NAME: &'static str = "embd_model";
    const A_NAME: &'static str = "an embd_model";
    const MAGIC: u64 = 0x454d_4244_4d4f_444c; // "EMBDMODL"
    fn magic(&self) -> u64 {
        self.magic
    }
}

/// Options for `embd_open`: a builder created by `embd_options_new`, changed by
/// the `embd_options_set_*` functions and destroyed by `embd_options_free`. Not
/// shared between threads while being changed; `embd_open` only reads it.
pub struct embd_options {
    pub(crate) magic: u64,
    pub(crate) opts: Mutex<Options>,
}

impl Handle for embd_options {
    const NAME: &'static str = "embd_options";
    const A_NAME: &'static str = "an embd_options";
    const MAGIC: u64 = 0x454d_4244_4f50_5453; // "EMBDOPTS"
    fn magic(&self) -> u64 {
        self.magic
    }
}

/// A live handle: the object, and its type's name for messages.
#[derive(Clone)]
pub(crate) struct Live {
    obj: Arc<dyn Any + Send + Sync>,
    a_name: &'static str,
}

type Registry = RwLock<HashMap<usize, Live>>;

fn registry() -> &'static Registry {
    static REGISTRY: std::sync::OnceLock<Registry> = std::sync::OnceLock::new();
    REGISTRY.get_or_init(|| RwLock::new(HashMap::new()))
}

/// Registers `h` under `addr` (usually `Arc::as_ptr(&h)`; see [`register`]).
pub(crate) fn register_at<T: Handle>(addr: usize, h: Arc<T>) {
    let live = Live {
        obj: h,
        a_name: T::A_NAME,
    };
    registry()
        .write()
        .unwrap_or_else(|e| e.into_inner())
        .insert(addr, live);
}

/// Makes `value` a live handle; returns the pointer C receives.
pub(crate) fn register<T: Handle>(value: T) -> *mut T {
    let h = Arc::new(value);
    let p = Arc::as_ptr(&h) as *mut T;
    register_at(p as usize, h);
    p
}

/// Removes a handle; returns whether it was live.
pub(crate) fn unregister<P>(p: *const P) -> bool {
    registry()
        .write()
        .unwrap_or_else(|e| e.into_inner())
        .remove(&(p as usize))
        .is_some()
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

/// Resolves the handle `p` (the parameter `param`) to a live `T`: NULL gives
/// `EMBD_STATUS_NULL_ARGUMENT`; a freed, foreign or other-type handle
/// `EMBD_STATUS_INVALID_HANDLE`, with a message naming both types.
pub(crate) fn resolve<T: Handle>(p: *const T, param: &str) -> FfiResult<Arc<T>> {
    if p.is_null() {
        return Err(Fail::null(param));
    }
    let addr = p as usize;
    let not_live = || {
        Fail::new(
            embd_status::InvalidHandle,
            format!(
                "{param} ({addr:#x}) is not a live {} handle (already freed, or never returned by this library)",
                T::NAME
            ),
        )
    };
    let Some(live) = lookup(addr) else {
        return Err(not_live());
    };
    match live.obj.downcast::<T>() {
        Ok(h) if h.magic() == T::MAGIC => Ok(h),
        Ok(_) => Err(not_live()),
        Err(_) => Err(Fail::new(
            embd_status::InvalidHandle,
            format!("{param} is {}, not {} handle", live.a_name, T::A_NAME),
        )),
    }
}
