//! Opaque handles and the registry of live handles, for both C layers.
//!
//! A handle given to C is the address of an `Arc`'s contents. The library never
//! dereferences a pointer received from C to reach a handle: it looks the address
//! up in a process-wide registry of live handles (a `RwLock<HashMap>`, held only
//! for the lookup, never during work) and clones the `Arc` it finds. So a freed
//! handle, a handle of another type, or a random pointer is reported as
//! `EMBD_STATUS_INVALID_HANDLE` without undefined behaviour, and a call that is
//! still running when another thread frees the handle keeps its own reference
//! (the memory is released when that call returns). The registry keeps each
//! handle as its typed `Arc` (`dyn Any`), so a handle of another type is told
//! apart by its Rust type, never by reading memory at the address.
//!
//! Any type implementing `Handle` can be registered; `resolve` is the one
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
}

/// "an embd_model", "a TokenizerHandle".
fn with_article(name: &str) -> String {
    let an = name.starts_with(['a', 'e', 'i', 'o', 'u', 'E']);
    format!("{} {name}", if an { "an" } else { "a" })
}

/// An open model. Immutable after `embd_open`; every function taking a
/// `const embd_model *` may be called on the same handle from many threads at
/// once. Created by `embd_open`, destroyed by `embd_free`.
pub struct embd_model {
    pub(crate) embedder: Engine,
    pub(crate) info: ModelInfo,
    pub(crate) name: CString,
}

impl Handle for embd_model {
    const NAME: &'static str = "embd_model";
}

/// Options for `embd_open`: a builder created by `embd_options_new`, changed by
/// the `embd_options_set_*` functions and destroyed by `embd_options_free`. Not
/// shared between threads while being changed; `embd_open` only reads it.
pub struct embd_options {
    pub(crate) opts: Mutex<Options>,
}

impl Handle for embd_options {
    const NAME: &'static str = "embd_options";
}

/// A live handle: the object, and its type's C name for messages.
#[derive(Clone)]
pub(crate) struct Live {
    obj: Arc<dyn Any + Send + Sync>,
    name: &'static str,
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
        name: T::NAME,
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
    let live = lookup(addr).ok_or_else(|| {
        Fail::new(
            embd_status::InvalidHandle,
            format!(
                "{param} ({addr:#x}) is not a live {} handle (already freed, or never returned by this library)",
                T::NAME
            ),
        )
    })?;
    live.obj.downcast::<T>().map_err(|_| {
        Fail::new(
            embd_status::InvalidHandle,
            format!(
                "{param} is {}, not {} handle",
                with_article(live.name),
                with_article(T::NAME)
            ),
        )
    })
}

/// The body of a free function: NULL is a no-op; otherwise `p` must be a live
/// `T` (see [`resolve`]), which is unregistered (its memory is released when
/// the last call using it returns).
pub(crate) fn release<T: Handle>(p: *const T, param: &str) -> FfiResult<()> {
    if !p.is_null() {
        resolve(p, param)?;
        unregister(p);
    }
    Ok(())
}
