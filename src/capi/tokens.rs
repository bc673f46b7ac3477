//! Tokens: the token ids and token counts of a text as the model sees it.

use std::ffi::c_char;

use super::boundary::{self, ffi_boundary, slice_mut, text_slice, write_opt, Fail};
use super::handles::{self, embd_model};
use super::model::model_value;
use super::status::embd_status;

/// Tokenizes a text as the model sees it: `[CLS]`, the WordPiece ids truncated
/// to `embd_max_seq_length(model) - 2`, `[SEP]`.
///
/// - `model`: borrowed for the duration of the call.
/// - `text`, `text_len`: UTF-8 bytes, borrowed for the duration of the call; no
///   NUL needed; `text` may be NULL when `text_len` is 0.
/// - `ids_out`: caller-owned buffer of `ids_len` token ids; may be NULL when
///   `ids_len` is 0 (to ask for the size).
/// - `ids_len`: capacity of `ids_out`.
/// - `n_ids_out`: receives the number of ids (required).
///
/// Returns `EMBD_STATUS_OK`; `EMBD_STATUS_NULL_ARGUMENT`;
/// `EMBD_STATUS_INVALID_HANDLE`; `EMBD_STATUS_INVALID_UTF8`;
/// `EMBD_STATUS_LIMIT_EXCEEDED`; `EMBD_STATUS_BUFFER_TOO_SMALL` when
/// `ids_len` is less than the number of ids.
///
/// On success `*n_ids_out` is the number of ids written; on
/// `EMBD_STATUS_BUFFER_TOO_SMALL` it is the needed capacity (nothing written to
/// `ids_out`); on other failures it is 0.
///
/// Thread safety: safe to call concurrently on the same model.
///
/// # Safety
/// `text` must be NULL or readable for `text_len` bytes; `ids_out` NULL or
/// writable for `ids_len` ids; `n_ids_out` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn embd_tokenize(
    model: *const embd_model,
    text: *const c_char,
    text_len: usize,
    ids_out: *mut u32,
    ids_len: usize,
    n_ids_out: *mut usize,
) -> embd_status {
    // SAFETY: `n_ids_out` is NULL or writable per the contract.
    unsafe { write_opt(n_ids_out, 0) };
    ffi_boundary("embd_tokenize", || {
        let m = handles::resolve(model, "model")?;
        boundary::non_null(n_ids_out, "n_ids_out")?;
        // SAFETY: `text` is NULL or readable for `text_len` bytes per the contract.
        let text = unsafe { text_slice(text, text_len, "text") }?;
        let ids = m.embedder.tokenize(text);
        if ids_len < ids.len() {
            // SAFETY: `n_ids_out` is non-NULL (checked) and writable.
            unsafe { n_ids_out.write(ids.len()) };
            return Err(Fail::new(
                embd_status::BufferTooSmall,
                format!("ids_out has room for {ids_len} ids, needs {}", ids.len()),
            ));
        }
        // SAFETY: `ids_out` is writable for `ids_len` >= ids.len() ids.
        let dst = unsafe { slice_mut(ids_out, ids.len(), "ids_out") }?;
        dst.copy_from_slice(&ids);
        // SAFETY: `n_ids_out` is non-NULL (checked) and writable.
        unsafe { n_ids_out.write(ids.len()) };
        Ok(())
    })
}

/// Counts the tokens of a text as the model sees it (same as the count
/// `embd_tokenize` gives: `[CLS]` and `[SEP]` included, truncated to the maximum
/// sequence length).
///
/// - `model`: borrowed for the duration of the call.
/// - `text`, `text_len`: UTF-8 bytes, borrowed for the duration of the call;
///   `text` may be NULL when `text_len` is 0.
/// - `n_tokens_out`: receives the count (required).
///
/// Returns `EMBD_STATUS_OK`; `EMBD_STATUS_NULL_ARGUMENT`;
/// `EMBD_STATUS_INVALID_HANDLE`; `EMBD_STATUS_INVALID_UTF8`;
/// `EMBD_STATUS_LIMIT_EXCEEDED`.
///
/// On success `*n_tokens_out` is the count; on failure it is 0.
///
/// Thread safety: safe to call concurrently on the same model.
///
/// # Safety
/// `text` must be NULL or readable for `text_len` bytes; `n_tokens_out` NULL
/// or writable.
#[no_mangle]
pub unsafe extern "C" fn embd_count_tokens(
    model: *const embd_model,
    text: *const c_char,
    text_len: usize,
    n_tokens_out: *mut usize,
) -> embd_status {
    // SAFETY: `n_tokens_out` is NULL or writable per the contract.
    unsafe {
        model_value(
            "embd_count_tokens",
            model,
            n_tokens_out,
            "n_tokens_out",
            |m| {
                // SAFETY: `text` is NULL or readable for `text_len` bytes per the contract.
                let text = text_slice(text, text_len, "text")?;
                Ok(m.embedder.count_tokens(text))
            },
        )
    }
}
