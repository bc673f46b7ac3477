//! The C boundary: every export runs its body through `ffi_boundary` (status
//! functions) or `ffi_boundary_or` (getters), which catch panics, record the
//! last error and convert failures to statuses. Also the checked conversions
//! from raw C arguments to Rust values (NULL checks naming the parameter, UTF-8,
//! slice bounds).

use std::any::Any;
use std::ffi::{c_char, CStr};
use std::panic::{catch_unwind, AssertUnwindSafe};

use super::last_error;
use super::status::embd_status;
use crate::error::Error;

/// A failed call: the status and the message for `embd_last_error`.
#[derive(Debug)]
pub(crate) struct Fail {
    pub(crate) status: embd_status,
    pub(crate) msg: String,
}

impl Fail {
    pub(crate) fn new(status: embd_status, msg: impl Into<String>) -> Fail {
        Fail {
            status,
            msg: msg.into(),
        }
    }

    pub(crate) fn null(param: &str) -> Fail {
        Fail::new(embd_status::NullArgument, format!("{param} is NULL"))
    }
}

impl From<Error> for Fail {
    fn from(e: Error) -> Fail {
        Fail::new(embd_status::from_kind(e.kind()), e.to_string())
    }
}

/// Result type of export bodies.
pub(crate) type FfiResult<T> = Result<T, Fail>;

/// The text of a panic payload.
pub(crate) fn panic_message(payload: &(dyn Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "non-string panic payload".to_string()
    }
}

/// Runs the body of a status-returning export named `func`: panics become
/// `EMBD_STATUS_INTERNAL_PANIC`, failures set the last error (prefixed by
/// `func`) and return their status.
pub(crate) fn ffi_boundary(func: &str, body: impl FnOnce() -> FfiResult<()>) -> embd_status {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(())) => embd_status::Ok,
        Ok(Err(f)) => {
            last_error::set(&format!("{func}: {}", f.msg));
            f.status
        }
        Err(payload) => {
            last_error::set(&format!(
                "{func}: internal panic caught at the C boundary: {}",
                panic_message(payload.as_ref())
            ));
            embd_status::InternalPanic
        }
    }
}

/// Runs the body of an infallible-looking export (a getter or a free function):
/// a failure or a panic sets the last error and returns `default`.
pub(crate) fn ffi_boundary_or<T>(func: &str, default: T, body: impl FnOnce() -> FfiResult<T>) -> T {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(v)) => v,
        Ok(Err(f)) => {
            last_error::set(&format!("{func}: {}", f.msg));
            default
        }
        Err(payload) => {
            last_error::set(&format!(
                "{func}: internal panic caught at the C boundary: {}",
                panic_message(payload.as_ref())
            ));
            default
        }
    }
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
