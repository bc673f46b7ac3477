//! Embedding: the batch limits, `embd_text`, and the `embd_encode*`
//! functions writing float vectors (quantized output is in `output`).

use std::ffi::c_char;
use std::sync::Arc;

use super::boundary::{c_str, ffi_boundary, slice, slice_mut, text_slice, Fail, FfiResult};
use super::handles::{self, embd_model};
use super::status::embd_status;

/// Most texts accepted by one `embd_encode` / `embd_encode_texts` call; more
/// gives `EMBD_STATUS_LIMIT_EXCEEDED`.
pub const EMBD_MAX_BATCH: usize = 1048576;

/// Longest text accepted, in bytes (64 MiB); longer gives
/// `EMBD_STATUS_LIMIT_EXCEEDED`. Texts are truncated to the model's maximum
/// sequence length after tokenization.
pub const EMBD_MAX_TEXT_BYTES: usize = 67108864;

// The limits are defined by the safe API (`crate::MAX_BATCH`,
// `crate::MAX_TEXT_BYTES`); cbindgen needs literals, so the two above are
// checked to equal them at compile time.
const _: () = assert!(EMBD_MAX_BATCH == crate::MAX_BATCH);
const _: () = assert!(EMBD_MAX_TEXT_BYTES == crate::MAX_TEXT_BYTES);

/// A length-delimited UTF-8 text: `len` bytes at `ptr`, no NUL terminator
/// needed (Go and Swift strings pass as they are). `ptr` may be NULL when `len`
/// is 0. A NUL byte inside the text is ordinary text (BERT cleaning drops it as
/// a control character); it does not end the text.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct embd_text {
    /// The bytes; borrowed for the duration of the call.
    pub ptr: *const c_char,
    /// Number of bytes at `ptr`.
    pub len: usize,
}

/// Refuses more than `EMBD_MAX_BATCH` texts.
pub(crate) fn check_batch(n_texts: usize) -> FfiResult<()> {
    if n_texts > EMBD_MAX_BATCH {
        return Err(Fail::new(
            embd_status::LimitExceeded,
            format!("n_texts is {n_texts}, more than EMBD_MAX_BATCH ({EMBD_MAX_BATCH}); split the batch"),
        ));
    }
    Ok(())
}

/// Refuses a NULL `out` when `needed` > 0 and an `out_len` below `needed`
/// (`unit` and `detail` word the message: "floats", "2 texts x 384 dims").
pub(crate) fn check_out_len(
    out_is_null: bool,
    out_len: usize,
    needed: usize,
    unit: &str,
    detail: impl FnOnce() -> String,
) -> FfiResult<()> {
    if out_is_null && needed > 0 {
        return Err(Fail::null("out"));
    }
    if out_len < needed {
        return Err(Fail::new(
            embd_status::BufferTooSmall,
            format!(
                "out has room for {out_len} {unit}, needs {needed} ({})",
                detail()
            ),
        ));
    }
    Ok(())
}

/// The first steps of the float encode functions: the model, `texts` (NULL
/// only when `n_texts` is 0), the batch limit, and `out` as a slice of
/// `n_texts` rows.
fn begin<'a, T>(
    model: *const embd_model,
    texts: *const T,
    n_texts: usize,
    out: *mut f32,
    out_len: usize,
) -> FfiResult<(Arc<embd_model>, &'a mut [f32])> {
    let m = handles::resolve(model, "model")?;
    if texts.is_null() && n_texts > 0 {
        return Err(Fail::null("texts"));
    }
    check_batch(n_texts)?;
    let dim = m.embedder.dim();
    let needed = n_texts
        .checked_mul(dim)
        .ok_or_else(|| Fail::new(embd_status::LimitExceeded, "n_texts x dim overflows size_t"))?;
    check_out_len(out.is_null(), out_len, needed, "floats", || {
        format!("{n_texts} texts x {dim} dims")
    })?;
    // SAFETY: `out` is writable for `out_len` >= `needed` floats per the
    // caller's contract and not aliased during the call.
    let out = unsafe { slice_mut(out, needed, "out") }?;
    Ok((m, out))
}

/// Embeds a batch of NUL-terminated texts into a row-major `n_texts x dim`
/// block of floats. Each text gets exactly the vector it gets alone.
///
/// - `model`: borrowed for the duration of the call.
/// - `texts`: array of `n_texts` NUL-terminated UTF-8 strings, borrowed for the
///   duration of the call; may be NULL when `n_texts` is 0.
/// - `n_texts`: number of texts; 0 is allowed and does nothing; at most
///   `EMBD_MAX_BATCH`.
/// - `out`: caller-owned buffer of `out_len` floats; row i receives text i.
///   May be NULL when `n_texts` is 0.
/// - `out_len`: capacity of `out` in floats; must be at least
///   `n_texts * embd_dim(model)`.
///
/// Returns `EMBD_STATUS_OK`; `EMBD_STATUS_NULL_ARGUMENT` (`model`, `texts`,
/// `texts[i]` or `out`); `EMBD_STATUS_INVALID_HANDLE`;
/// `EMBD_STATUS_INVALID_UTF8` (the message names the index and byte offset);
/// `EMBD_STATUS_BUFFER_TOO_SMALL` (the message gives the needed size);
/// `EMBD_STATUS_LIMIT_EXCEEDED`; `EMBD_STATUS_CANCELLED` (the model's progress
/// callback stopped the call; see `embd_progress_fn` for the complete rows);
/// `EMBD_STATUS_INTERNAL`, `EMBD_STATUS_INTERNAL_PANIC`.
///
/// On success the first `n_texts * dim` floats of `out` hold the vectors; on
/// failure the contents of `out` are unspecified.
///
/// Thread safety: safe to call concurrently on the same model from many
/// threads (no global lock; each call may use `threads` worker threads).
///
/// # Safety
/// `texts` must be NULL or point to `n_texts` pointers, each NULL or
/// NUL-terminated; `out` must be NULL or writable for `out_len` floats.
#[no_mangle]
pub unsafe extern "C" fn embd_encode(
    model: *const embd_model,
    texts: *const *const c_char,
    n_texts: usize,
    out: *mut f32,
    out_len: usize,
) -> embd_status {
    ffi_boundary("embd_encode", || {
        let (m, out) = begin(model, texts, n_texts, out, out_len)?;
        // SAFETY: `texts` is readable for `n_texts` pointers per the contract;
        // n_texts <= EMBD_MAX_BATCH (checked by `begin`).
        let ptrs = unsafe { slice(texts, n_texts, "texts") }?;
        let mut strs = Vec::with_capacity(ptrs.len());
        for (i, &p) in ptrs.iter().enumerate() {
            // SAFETY: each element is NULL or NUL-terminated per the contract.
            strs.push(unsafe { c_str(p, &format!("texts[{i}]")) }?);
        }
        m.embedder.embed_into(&strs, out)?;
        Ok(())
    })
}

/// Embeds a batch of length-delimited texts (`embd_text`: pointer + byte
/// length, no NUL needed) into a row-major `n_texts x dim` block of floats.
/// Same contract as `embd_encode` otherwise.
///
/// - `model`: borrowed for the duration of the call.
/// - `texts`: array of `n_texts` `embd_text`, borrowed for the duration of the
///   call; may be NULL when `n_texts` is 0. `texts[i].ptr` may be NULL when
///   `texts[i].len` is 0 (the empty text). NUL bytes inside a text are
///   accepted as text.
/// - `n_texts`: number of texts; 0 does nothing; at most `EMBD_MAX_BATCH`.
/// - `out`, `out_len`: as for `embd_encode`.
///
/// Returns the statuses of `embd_encode`, and `EMBD_STATUS_LIMIT_EXCEEDED` for
/// a text longer than `EMBD_MAX_TEXT_BYTES`.
///
/// On success the first `n_texts * dim` floats of `out` hold the vectors; on
/// failure the contents of `out` are unspecified.
///
/// Thread safety: safe to call concurrently on the same model.
///
/// # Safety
/// `texts` must be NULL or point to `n_texts` `embd_text`, each readable for
/// `len` bytes; `out` must be NULL or writable for `out_len` floats.
#[no_mangle]
pub unsafe extern "C" fn embd_encode_texts(
    model: *const embd_model,
    texts: *const embd_text,
    n_texts: usize,
    out: *mut f32,
    out_len: usize,
) -> embd_status {
    // SAFETY: forwarded contract.
    unsafe {
        encode_texts(
            "embd_encode_texts",
            model,
            texts,
            n_texts,
            out,
            out_len,
            NO_INFO,
        )
    }
}

/// Embeds a batch of length-delimited texts like `embd_encode_texts`, and
/// reports for each text how many tokens the model saw and whether it was
/// truncated.
///
/// - `model`, `texts`, `n_texts`, `out`, `out_len`: as for
///   `embd_encode_texts`.
/// - `tokens_out`: NULL when not wanted, else a caller-owned array of at least
///   `n_texts` elements; element i receives text i's token count, `[CLS]` and
///   `[SEP]` included, after truncation (at most `embd_max_seq_length`; for
///   static word-embedding models, its number of whitespace-separated words).
/// - `truncated_out`: NULL when not wanted, else a caller-owned array of at
///   least `n_texts` bytes; element i receives 1 when text i had more tokens
///   than `embd_max_seq_length` (the rest was cut off), else 0.
///
/// Returns the statuses of `embd_encode_texts`.
///
/// On success `out`, `tokens_out` and `truncated_out` hold the results of all
/// `n_texts` texts; on failure their contents are unspecified.
///
/// Thread safety: safe to call concurrently on the same model.
///
/// # Safety
/// As `embd_encode_texts`; `tokens_out` must be NULL or writable for `n_texts`
/// elements, `truncated_out` NULL or writable for `n_texts` bytes.
#[no_mangle]
pub unsafe extern "C" fn embd_encode_ex(
    model: *const embd_model,
    texts: *const embd_text,
    n_texts: usize,
    out: *mut f32,
    out_len: usize,
    tokens_out: *mut usize,
    truncated_out: *mut u8,
) -> embd_status {
    // SAFETY: forwarded contract.
    unsafe {
        encode_texts(
            "embd_encode_ex",
            model,
            texts,
            n_texts,
            out,
            out_len,
            (tokens_out, truncated_out),
        )
    }
}

/// `tokens_out` and `truncated_out` of `embd_encode_ex`, both NULL.
const NO_INFO: (*mut usize, *mut u8) = (std::ptr::null_mut(), std::ptr::null_mut());

/// The body of `embd_encode_texts` and `embd_encode_ex` (named `func`);
/// `info` is `(tokens_out, truncated_out)`.
///
/// # Safety
/// The contract of `embd_encode_ex`.
unsafe fn encode_texts(
    func: &str,
    model: *const embd_model,
    texts: *const embd_text,
    n_texts: usize,
    out: *mut f32,
    out_len: usize,
    info: (*mut usize, *mut u8),
) -> embd_status {
    let (tokens_out, truncated_out) = info;
    ffi_boundary(func, || {
        let (m, out) = begin(model, texts, n_texts, out, out_len)?;
        // SAFETY: `texts` is readable for `n_texts` elements per the contract;
        // n_texts <= EMBD_MAX_BATCH (checked by `begin`).
        let strs = unsafe { texts_from_c(texts, n_texts) }?;
        let want_info = !tokens_out.is_null() || !truncated_out.is_null();
        let mut info = vec![crate::TextInfo::default(); if want_info { n_texts } else { 0 }];
        m.embedder
            .embed_into_ex(&strs, out, want_info.then_some(info.as_mut_slice()))?;
        // SAFETY: `tokens_out` / `truncated_out` are NULL or writable for
        // `n_texts` elements per the contract.
        unsafe { write_info(&info, tokens_out, truncated_out) }
    })
}

/// The texts of an `embd_text` array, checked for UTF-8.
///
/// # Safety
/// `texts` must be NULL (only when `n` is 0) or readable for `n` elements,
/// each readable for its `len` bytes.
pub(crate) unsafe fn texts_from_c<'a>(
    texts: *const embd_text,
    n: usize,
) -> FfiResult<Vec<&'a str>> {
    // SAFETY: readable for `n` elements per the caller's contract.
    let items = unsafe { slice(texts, n, "texts") }?;
    let mut strs = Vec::with_capacity(items.len());
    for (i, t) in items.iter().enumerate() {
        // SAFETY: `t.ptr` is NULL or readable for `t.len` bytes per the contract.
        strs.push(unsafe { text_slice(t.ptr, t.len, &format!("texts[{i}]")) }?);
    }
    Ok(strs)
}

/// Writes the token counts and truncation flags of `info` to the optional C
/// arrays (each NULL when not wanted).
///
/// # Safety
/// `tokens_out` and `truncated_out` must each be NULL or writable for
/// `info.len()` elements.
pub(crate) unsafe fn write_info(
    info: &[crate::TextInfo],
    tokens_out: *mut usize,
    truncated_out: *mut u8,
) -> FfiResult<()> {
    let n = info.len();
    if !tokens_out.is_null() {
        // SAFETY: non-NULL and writable for `n` elements per the contract.
        let t = unsafe { slice_mut(tokens_out, n, "tokens_out") }?;
        for (d, i) in t.iter_mut().zip(info) {
            *d = i.tokens;
        }
    }
    if !truncated_out.is_null() {
        // SAFETY: non-NULL and writable for `n` bytes per the contract.
        let t = unsafe { slice_mut(truncated_out, n, "truncated_out") }?;
        for (d, i) in t.iter_mut().zip(info) {
            *d = u8::from(i.truncated);
        }
    }
    Ok(())
}
