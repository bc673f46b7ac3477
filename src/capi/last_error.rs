//! The per-thread message of the most recent failed `embd_*` call.

use std::cell::RefCell;
use std::ffi::{c_char, CString};

thread_local! {
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
}

/// Turns a message into a C string, replacing interior NULs so nothing is lost.
pub(crate) fn to_cstring(msg: &str) -> CString {
    CString::new(msg.replace('\0', "\\0")).unwrap_or_default()
}

/// Records `msg` as the calling thread's last error.
pub(crate) fn set(msg: &str) {
    let c = to_cstring(msg);
    LAST_ERROR.with(|e| *e.borrow_mut() = c);
}

/// The calling thread's last error, as Rust text (for tests).
#[cfg(test)]
pub(crate) fn get() -> String {
    LAST_ERROR.with(|e| e.borrow().to_string_lossy().into_owned())
}

/// Returns the message of the most recent failed `embd_*` call on the calling
/// thread, e.g. "embd_open: models/x.weights: No such file or directory (os
/// error 2)".
///
/// Returns a NUL-terminated UTF-8 string, never NULL (empty when no call has
/// failed on this thread). Owned by the library, valid until the next failing
/// `embd_*` call on the same thread; copy it to keep it. Successful calls do not
/// clear it.
///
/// Thread safety: safe from any thread; each thread sees its own message.
#[no_mangle]
pub extern "C" fn embd_last_error() -> *const c_char {
    // The CString lives in the thread-local until the next `set` on this thread;
    // its heap buffer does not move when the RefCell is borrowed again.
    LAST_ERROR
        .try_with(|e| e.borrow().as_ptr())
        .unwrap_or(c"".as_ptr())
}
