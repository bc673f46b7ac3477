//! The C boundary, shared by both C layers (`embd_*` here, cpp_embedder's in
//! `crate::compat`): every export runs its body through `guard`, which
//! catches panics and hands each failure to the layer's `ErrorSink` (its
//! codes and its per-thread message store). For `embd_*`, `ffi_boundary`
//! (status functions) and `ffi_boundary_or` (getters) are `guard` with the
//! `Embd` sink. Also the checked conversions from raw C arguments to Rust
//! values (NULL checks naming the parameter, UTF-8, slice bounds).

use std::any::Any;
use std::ffi::{c_char, CStr};
use std::panic::{catch_unwind, AssertUnwindSafe};

use super::last_error;
use super::status::embd_status;
use crate::error::Error;

/// A failed call: the code the C layer returns (`embd_status` for `embd_*`)
/// and the message for its per-thread error store.
#[derive(Debug)]
pub(crate) struct Fail<C = embd_status> {
    pub(crate) status: C,
    pub(crate) msg: String,
}

impl<C> Fail<C> {
    pub(crate) fn new(status: C, msg: impl Into<String>) -> Fail<C> {
        Fail {
            status,
            msg: msg.into(),
        }
    }
}

impl Fail {
    pub(crate) fn null(param: &str) -> Fail {
        Fail::new(embd_status::NullArgument, format!("{param} is NULL"))
    }
}

impl From<Error> for Fail {
    fn from(e: Error) -> Fail {
        Fail::new(embd_status::from_kind(e.kind()), e.to_string())
    }
}

/// Result type of export bodies (`C`: the layer's code type).
pub(crate) type FfiResult<T, C = embd_status> = Result<T, Fail<C>>;

/// Where a C layer reports failures: its code type and its per-thread store.
pub(crate) trait ErrorSink {
    /// The codes the layer returns to C.
    type Code: Copy;
    /// The code of a panic caught at the boundary.
    const PANIC: Self::Code;
    /// Records the failure of the export `func` for the calling thread.
    fn record(func: &str, fail: Fail<Self::Code>);
}

/// The `embd_*` sink: `embd_status`, and the message, prefixed by the
/// function's name, in `embd_last_error`.
pub(crate) struct Embd;

impl ErrorSink for Embd {
    type Code = embd_status;
    const PANIC: embd_status = embd_status::InternalPanic;
    fn record(func: &str, fail: Fail) {
        last_error::set(&format!("{func}: {}", fail.msg));
    }
}

/// The text of a panic payload.
fn panic_message(payload: &(dyn Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "non-string panic payload".to_string()
    }
}

/// Runs the body of the export `func`: a failure or a panic (which becomes
/// `S::PANIC`) is recorded in the sink `S` and its code returned as `Err`.
pub(crate) fn guard<S: ErrorSink, T>(
    func: &str,
    body: impl FnOnce() -> FfiResult<T, S::Code>,
) -> Result<T, S::Code> {
    let fail = match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(v)) => return Ok(v),
        Ok(Err(f)) => f,
        Err(payload) => Fail::new(
            S::PANIC,
            format!(
                "internal panic caught at the C boundary: {}",
                panic_message(payload.as_ref())
            ),
        ),
    };
    let code = fail.status;
    S::record(func, fail);
    Err(code)
}

/// Runs the body of a status-returning `embd_*` export named `func`: panics
/// become `EMBD_STATUS_INTERNAL_PANIC`, failures set the last error (prefixed
/// by `func`) and return their status.
pub(crate) fn ffi_boundary(func: &str, body: impl FnOnce() -> FfiResult<()>) -> embd_status {
    guard::<Embd, ()>(func, body)
        .err()
        .unwrap_or(embd_status::Ok)
}

/// Runs the body of an infallible-looking `embd_*` export (a getter or a free
/// function): a failure or a panic sets the last error and returns `default`.
pub(crate) fn ffi_boundary_or<T>(func: &str, default: T, body: impl FnOnce() -> FfiResult<T>) -> T {
    guard::<Embd, T>(func, body).unwrap_or(default)
}

/// Checks a pointer for NULL.
pub(crate) fn non_null<T>(p: *const T, param: &str) -> FfiResult<*const T> {
    if p.is_null() {
        Err(Fail::null(param))
    } else {
        Ok(p)
    }
}

/// Reads a NUL-terminated UTF-8 string.
///
/// # Safety
/// `p`, if not NULL, must point to a NUL-terminated string readable for the
/// lifetime `'a`.
pub(crate) unsafe fn c_str<'a>(p: *const c_char, param: &str) -> FfiResult<&'a str> {
    let p = non_null(p, param)?;
    // SAFETY: `p` is non-NULL and NUL-terminated per the caller's contract.
    let bytes = unsafe { CStr::from_ptr(p) }.to_bytes();
    utf8(bytes, param)
}

/// Validates UTF-8, naming the parameter and byte offset on failure.
pub(crate) fn utf8<'a>(bytes: &'a [u8], param: &str) -> FfiResult<&'a str> {
    std::str::from_utf8(bytes).map_err(|e| {
        Fail::new(
            embd_status::InvalidUtf8,
            format!(
                "{param} is not valid UTF-8 (invalid byte sequence at byte offset {})",
                e.valid_up_to()
            ),
        )
    })
}

/// Reads a length-delimited UTF-8 string. `(NULL, 0)` is the empty string.
///
/// # Safety
/// `p`, if not NULL, must be readable for `len` bytes for the lifetime `'a`.
pub(crate) unsafe fn text_slice<'a>(
    p: *const c_char,
    len: usize,
    param: &str,
) -> FfiResult<&'a str> {
    if len == 0 {
        return Ok("");
    }
    let p = non_null(p, param)?;
    if len > crate::MAX_TEXT_BYTES {
        return Err(Fail::new(
            embd_status::LimitExceeded,
            format!(
                "{param} is {len} bytes long, more than the maximum of {} bytes",
                crate::MAX_TEXT_BYTES
            ),
        ));
    }
    // SAFETY: `p` is non-NULL and readable for `len` bytes per the caller's
    // contract; `len` <= MAX_TEXT_BYTES < isize::MAX.
    let bytes = unsafe { std::slice::from_raw_parts(p.cast::<u8>(), len) };
    utf8(bytes, param)
}

/// The largest element count whose byte size fits in `isize`, for a `T`.
pub(crate) fn max_elems<T>() -> usize {
    isize::MAX as usize / std::mem::size_of::<T>().max(1)
}

/// Builds a shared slice from a C array; `len == 0` gives an empty slice even
/// for NULL.
///
/// # Safety
/// `p`, if not NULL, must be readable for `len` elements for `'a`.
pub(crate) unsafe fn slice<'a, T>(p: *const T, len: usize, param: &str) -> FfiResult<&'a [T]> {
    if len == 0 {
        return Ok(&[]);
    }
    let p = non_null(p, param)?;
    if len > max_elems::<T>() {
        return Err(Fail::new(
            embd_status::InvalidArgument,
            format!("{param} length {len} is larger than any addressable array"),
        ));
    }
    // SAFETY: non-NULL, readable for `len` elements per the caller's contract,
    // and `len * size_of::<T>()` <= isize::MAX (checked above).
    Ok(unsafe { std::slice::from_raw_parts(p, len) })
}

/// Builds a mutable slice from a C array; `len == 0` gives an empty slice even
/// for NULL.
///
/// # Safety
/// `p`, if not NULL, must be writable for `len` elements for `'a` and not
/// aliased by any other live reference.
pub(crate) unsafe fn slice_mut<'a, T>(
    p: *mut T,
    len: usize,
    param: &str,
) -> FfiResult<&'a mut [T]> {
    if len == 0 {
        return Ok(&mut []);
    }
    if p.is_null() {
        return Err(Fail::null(param));
    }
    if len > max_elems::<T>() {
        return Err(Fail::new(
            embd_status::InvalidArgument,
            format!("{param} length {len} is larger than any addressable array"),
        ));
    }
    // SAFETY: non-NULL, writable and unaliased for `len` elements per the
    // caller's contract, and the byte size fits in isize (checked above).
    Ok(unsafe { std::slice::from_raw_parts_mut(p, len) })
}

/// Writes `v` through an out-pointer if it is not NULL.
///
/// # Safety
/// `p`, if not NULL, must be valid for a write of one `T`.
pub(crate) unsafe fn write_opt<T>(p: *mut T, v: T) {
    if !p.is_null() {
        // SAFETY: non-NULL and writable per the caller's contract.
        unsafe { p.write(v) };
    }
}

/// Test-only export (cargo feature `test-panic`): panics inside the library so
/// a test can check that the panic is caught at the boundary.
///
/// Returns `EMBD_STATUS_INTERNAL_PANIC` and sets `embd_last_error()`; the
/// library remains usable afterwards.
///
/// Thread safety: safe from any thread.
#[cfg(feature = "test-panic")]
#[no_mangle]
pub extern "C" fn embd_test_panic() -> embd_status {
    ffi_boundary("embd_test_panic", || {
        panic!("deliberate panic from embd_test_panic")
    })
}
