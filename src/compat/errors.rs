//! cpp_embedder's version functions and its thread-local error (code +
//! message), which the [`super::Cpp`] sink writes.

use std::cell::RefCell;
use std::ffi::{c_char, c_int, CString};

use crate::capi::last_error::to_cstring;

thread_local! {
    static COMPAT_ERROR: RefCell<(i32, CString)> = RefCell::new((0, CString::default()));
}

/// Records the calling thread's error.
pub(super) fn set(code: i32, msg: &str) {
    let c = to_cstring(msg);
    COMPAT_ERROR.with(|e| *e.borrow_mut() = (code, c));
}

/// Resets the calling thread's error.
pub(super) fn clear() {
    let _ = COMPAT_ERROR.try_with(|e| *e.borrow_mut() = (0, CString::default()));
}

/// cpp_embedder: the API version implemented, "1.0.0".
#[no_mangle]
pub extern "C" fn embedder_version() -> *const c_char {
    c"1.0.0".as_ptr()
}

/// cpp_embedder: a build description naming this library.
#[no_mangle]
pub extern "C" fn embedder_build_info() -> *const c_char {
    static INFO: &str = concat!(
        "embedder v",
        env!("CARGO_PKG_VERSION"),
        " (Rust; cpp_embedder 1.0.0 compatible C API)\0"
    );
    INFO.as_ptr().cast()
}

/// cpp_embedder: the calling thread's last error message ("" when none).
#[no_mangle]
pub extern "C" fn embedder_get_error() -> *const c_char {
    COMPAT_ERROR
        .try_with(|e| e.borrow().1.as_ptr())
        .unwrap_or(c"".as_ptr())
}

/// cpp_embedder: the calling thread's last error code (0 when none).
#[no_mangle]
pub extern "C" fn embedder_get_error_code() -> c_int {
    COMPAT_ERROR.try_with(|e| e.borrow().0).unwrap_or(0)
}

/// cpp_embedder: resets the calling thread's error code and message.
#[no_mangle]
pub extern "C" fn embedder_clear_error() {
    clear();
}
