//! Vector maths on caller-owned vectors (`crate::vector` does the arithmetic).

use super::boundary::{self, ffi_boundary, slice, write_opt, Fail};
use super::status::embd_status;

/// Cosine similarity of two vectors of `len` floats (0 when either is all
/// zeros). Computed in double precision.
///
/// - `a`, `b`: caller-owned arrays of `len` floats, borrowed for the duration
///   of the call.
/// - `len`: number of floats, at least 1.
/// - `similarity_out`: receives the similarity in [-1, 1].
///
/// Returns `EMBD_STATUS_OK`; `EMBD_STATUS_NULL_ARGUMENT`;
/// `EMBD_STATUS_INVALID_ARGUMENT` (`len` is 0 or absurdly large).
///
/// On success `*similarity_out` is the similarity; on failure 0.
///
/// Thread safety: safe from any thread (pure function).
///
/// # Safety
/// `a` and `b` must be NULL or readable for `len` floats; `similarity_out`
/// NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn embd_similarity(
    a: *const f32,
    b: *const f32,
    len: usize,
    similarity_out: *mut f32,
) -> embd_status {
    // SAFETY: `similarity_out` is NULL or writable per the contract.
    unsafe { write_opt(similarity_out, 0.0) };
    ffi_boundary("embd_similarity", || {
        boundary::non_null(a, "a")?;
        boundary::non_null(b, "b")?;
        boundary::non_null(similarity_out, "similarity_out")?;
        if len == 0 {
            return Err(Fail::new(embd_status::InvalidArgument, "len is 0"));
        }
        // SAFETY: readable for `len` floats per the contract.
        let a = unsafe { slice(a, len, "a") }?;
        // SAFETY: readable for `len` floats per the contract.
        let b = unsafe { slice(b, len, "b") }?;
        let s = crate::cosine_similarity(a, b);
        // SAFETY: non-NULL (checked) and writable per the contract.
        unsafe { similarity_out.write(s) };
        Ok(())
    })
}
