//! `embd_call_options`: per-call options (normalization, Matryoshka size,
//! prompt, truncation) for `embd_encode_with`, so that one open model serves
//! queries and documents without a second `embd_open`.

use std::ffi::{c_char, c_int};
use std::sync::Mutex;

use super::boundary::{ffi_boundary, ffi_boundary_or, Fail, FfiResult};
use super::c_enum::{c_enum, CEnum};
use super::encode::{check_batch, check_out_len, embd_text, texts_from_c, write_info};
use super::handles::{self, embd_model, Handle};
use super::setters::{self, OptionsHandle};
use super::status::embd_status;
use crate::{CallOptions, Truncation};

/// Options of one embedding call, for `embd_encode_with`: created by
/// `embd_call_options_new` (every option at "as the model was opened"),
/// changed by the `embd_call_options_set_*` functions, destroyed by
/// `embd_call_options_free`. Not changed from two threads at once;
/// `embd_encode_with` only reads it, so one object may serve many concurrent
/// calls.
pub struct embd_call_options {
    pub(crate) opts: Mutex<CallOptions>,
}

impl Handle for embd_call_options {
    const NAME: &'static str = "embd_call_options";
}

/// What a call does with a text longer than `embd_max_seq_length` tokens: one
/// of the `EMBD_TRUNCATION_*` constants (a plain `int32_t`; an unknown value
/// is refused with `EMBD_STATUS_INVALID_ARGUMENT`).
pub type embd_truncation = i32;

/// Keep the first tokens (the default, as sentence-transformers).
pub const EMBD_TRUNCATION_RIGHT: embd_truncation = 0;

/// Keep the last tokens.
pub const EMBD_TRUNCATION_LEFT: embd_truncation = 1;

/// Refuse the text: `embd_encode_with` returns `EMBD_STATUS_LIMIT_EXCEEDED`
/// naming the text and its token count.
pub const EMBD_TRUNCATION_REFUSE: embd_truncation = 2;

/// Creates a call options object with every option unset (a call with it
/// gives the vectors of `embd_encode_ex`, bit for bit).
///
/// Returns a new object, owned by the caller, free with
/// `embd_call_options_free`; NULL only if an internal error occurred (then
/// `embd_last_error()` says why).
///
/// Thread safety: safe from any thread.
#[no_mangle]
pub extern "C" fn embd_call_options_new() -> *mut embd_call_options {
    ffi_boundary_or("embd_call_options_new", std::ptr::null_mut(), || {
        Ok(handles::register(embd_call_options {
            opts: Mutex::new(CallOptions::default()),
        }))
    })
}

/// Destroys a call options object.
///
/// - `options`: owned by the caller, created by `embd_call_options_new`; NULL
///   is a no-op. A pointer that is not a live call options object is
///   detected, ignored, and recorded in `embd_last_error()`.
///
/// Thread safety: must not race with other calls using the same `options`.
#[no_mangle]
pub extern "C" fn embd_call_options_free(options: *mut embd_call_options) {
    ffi_boundary_or("embd_call_options_free", (), || {
        handles::release(options, "options")
    })
}

impl OptionsHandle for embd_call_options {
    type Opts = CallOptions;
    fn opts(&self) -> &Mutex<CallOptions> {
        &self.opts
    }
}

c_enum! {
    /// `embd_truncation` as the truncation.
    pub(crate) struct Truncations: Truncation, "truncation" {
        EMBD_TRUNCATION_RIGHT => [Truncation::Right];
        EMBD_TRUNCATION_LEFT => [Truncation::Left];
        EMBD_TRUNCATION_REFUSE => [Truncation::Refuse];
    }
}

/// L2 normalization of this call's vectors.
///
/// - `options`: borrowed for the duration of the call.
/// - `normalize`: 1 to normalize, 0 for raw pooled vectors, -1 as the model
///   was opened (the default).
///
/// Returns `EMBD_STATUS_OK`, `EMBD_STATUS_NULL_ARGUMENT`,
/// `EMBD_STATUS_INVALID_HANDLE`, `EMBD_STATUS_INVALID_ARGUMENT` (another
/// value).
///
/// Thread safety: must not race with other calls using the same `options`.
#[no_mangle]
pub extern "C" fn embd_call_options_set_normalize(
    options: *mut embd_call_options,
    normalize: c_int,
) -> embd_status {
    setters::normalize("embd_call_options_set_normalize", options, normalize)
}

/// Matryoshka size of this call's vectors: the first `dimensions` components
/// of the model's full vector (normalized again when normalizing), whatever
/// `embd_options_set_dimensions` chose at open. Checked by `embd_encode_with`
/// (must be at most the model's hidden size, else
/// `EMBD_STATUS_INVALID_ARGUMENT`).
///
/// - `options`: borrowed for the duration of the call.
/// - `dimensions`: 0 means `embd_dim(model)` (the default).
///
/// Returns `EMBD_STATUS_OK`, `EMBD_STATUS_NULL_ARGUMENT`,
/// `EMBD_STATUS_INVALID_HANDLE`.
///
/// Thread safety: must not race with other calls using the same `options`.
#[no_mangle]
pub extern "C" fn embd_call_options_set_dimensions(
    options: *mut embd_call_options,
    dimensions: usize,
) -> embd_status {
    setters::dimensions("embd_call_options_set_dimensions", options, dimensions)
}

/// The prompt of this call, replacing the one the model was opened with
/// (`""`: no prompt).
///
/// - `options`: borrowed for the duration of the call.
/// - `prompt`: NUL-terminated UTF-8, copied; NULL: as the model was opened.
///
/// Returns `EMBD_STATUS_OK`, `EMBD_STATUS_NULL_ARGUMENT` (`options`),
/// `EMBD_STATUS_INVALID_HANDLE`, `EMBD_STATUS_INVALID_UTF8`. Both a prompt
/// and a prompt name make `embd_encode_with` fail with
/// `EMBD_STATUS_INVALID_ARGUMENT`.
///
/// Thread safety: must not race with other calls using the same `options`.
///
/// # Safety
/// `prompt` must be NULL or NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn embd_call_options_set_prompt(
    options: *mut embd_call_options,
    prompt: *const c_char,
) -> embd_status {
    // SAFETY: NULL or NUL-terminated per the contract.
    unsafe { setters::prompt("embd_call_options_set_prompt", options, prompt) }
}

/// The name of one of the model's stored prompts for this call (checked by
/// `embd_encode_with`: an unknown name gives `EMBD_STATUS_INVALID_ARGUMENT`
/// naming the stored ones).
///
/// - `options`: borrowed for the duration of the call.
/// - `name`: NUL-terminated UTF-8, copied; NULL removes a name set before.
///
/// Returns `EMBD_STATUS_OK`, `EMBD_STATUS_NULL_ARGUMENT` (`options`),
/// `EMBD_STATUS_INVALID_HANDLE`, `EMBD_STATUS_INVALID_UTF8`.
///
/// Thread safety: must not race with other calls using the same `options`.
///
/// # Safety
/// `name` must be NULL or NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn embd_call_options_set_prompt_name(
    options: *mut embd_call_options,
    name: *const c_char,
) -> embd_status {
    // SAFETY: NULL or NUL-terminated per the contract.
    unsafe { setters::prompt_name("embd_call_options_set_prompt_name", options, name) }
}

/// What this call does with a text longer than `embd_max_seq_length` tokens.
///
/// - `options`: borrowed for the duration of the call.
/// - `truncation`: `EMBD_TRUNCATION_RIGHT` (the default),
///   `EMBD_TRUNCATION_LEFT` or `EMBD_TRUNCATION_REFUSE`.
///
/// Returns `EMBD_STATUS_OK`, `EMBD_STATUS_NULL_ARGUMENT`,
/// `EMBD_STATUS_INVALID_HANDLE`, `EMBD_STATUS_INVALID_ARGUMENT` (another
/// value; `options` is left unchanged).
///
/// Thread safety: must not race with other calls using the same `options`.
#[no_mangle]
pub extern "C" fn embd_call_options_set_truncation(
    options: *mut embd_call_options,
    truncation: embd_truncation,
) -> embd_status {
    setters::with("embd_call_options_set_truncation", options, |o| {
        o.truncation = Truncations::from_c(truncation)?;
        Ok(())
    })
}

/// Floats per vector of a call with `options` on `model`: `embd_dim(model)`,
/// or the call's dimensions.
///
/// - `model`: borrowed for the duration of the call.
/// - `options`: borrowed; NULL means every option unset.
/// - `dim_out`: receives the size.
///
/// Returns `EMBD_STATUS_OK`, `EMBD_STATUS_NULL_ARGUMENT` (`model`,
/// `dim_out`), `EMBD_STATUS_INVALID_HANDLE`, `EMBD_STATUS_INVALID_ARGUMENT`
/// (options the model refuses, named in the message),
/// `EMBD_STATUS_UNSUPPORTED` (options on a static word-embedding model).
///
/// Thread safety: safe to call concurrently.
///
/// # Safety
/// `dim_out` must be NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn embd_call_dim(
    model: *const embd_model,
    options: *const embd_call_options,
    dim_out: *mut usize,
) -> embd_status {
    ffi_boundary("embd_call_dim", || {
        let m = handles::resolve(model, "model")?;
        let opts = read_options(options)?;
        if dim_out.is_null() {
            return Err(Fail::null("dim_out"));
        }
        let dim = m.embedder.call_dim(&opts)?;
        // SAFETY: non-NULL and writable per the contract.
        unsafe { dim_out.write(dim) };
        Ok(())
    })
}

/// A copy of the options behind `options` (NULL: the defaults).
pub(crate) fn read_options(options: *const embd_call_options) -> FfiResult<CallOptions> {
    if options.is_null() {
        return Ok(CallOptions::default());
    }
    let o = handles::resolve(options, "options")?;
    let g = o.opts.lock().unwrap_or_else(|e| e.into_inner());
    Ok(g.clone())
}

/// Embeds a batch of length-delimited texts like `embd_encode_ex`, under the
/// per-call `options`: normalization, Matryoshka size, prompt, truncation.
/// With `options` NULL or unchanged the vectors are those of `embd_encode_ex`
/// bit for bit; otherwise each text gets the vector it gets alone under the
/// same options.
///
/// - `model`: borrowed for the duration of the call.
/// - `options`: borrowed; NULL means every option unset.
/// - `texts`, `n_texts`: as for `embd_encode_texts`.
/// - `out`: caller-owned buffer of `out_len` floats, row i for text i, each
///   row `embd_call_dim(model, options)` floats.
/// - `out_len`: at least `n_texts * embd_call_dim(model, options)`.
/// - `tokens_out`, `truncated_out`: as for `embd_encode_ex` (NULL when not
///   wanted).
///
/// Returns the statuses of `embd_encode_ex`; `EMBD_STATUS_INVALID_ARGUMENT`
/// for options the model refuses (an unknown prompt name, dimensions above
/// the hidden size, a prompt and a prompt name); `EMBD_STATUS_LIMIT_EXCEEDED`
/// for a text longer than the model with `EMBD_TRUNCATION_REFUSE` (the
/// message names the text and its token count); `EMBD_STATUS_UNSUPPORTED`
/// for options on a static word-embedding model or on a model opened with
/// windows.
///
/// Thread safety: safe to call concurrently on the same model and options.
///
/// # Safety
/// As `embd_encode_ex`.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn embd_encode_with(
    model: *const embd_model,
    options: *const embd_call_options,
    texts: *const embd_text,
    n_texts: usize,
    out: *mut f32,
    out_len: usize,
    tokens_out: *mut usize,
    truncated_out: *mut u8,
) -> embd_status {
    ffi_boundary("embd_encode_with", || {
        let m = handles::resolve(model, "model")?;
        let opts = read_options(options)?;
        if texts.is_null() && n_texts > 0 {
            return Err(Fail::null("texts"));
        }
        check_batch(n_texts)?;
        let dim = m.embedder.call_dim(&opts)?;
        let needed = n_texts.checked_mul(dim).ok_or_else(|| {
            Fail::new(embd_status::LimitExceeded, "n_texts x dim overflows size_t")
        })?;
        check_out_len(out.is_null(), out_len, needed, "floats", || {
            format!("{n_texts} texts x {dim} dims")
        })?;
        // SAFETY: `out` is writable for `out_len` >= `needed` floats per the
        // contract.
        let out = unsafe { super::boundary::slice_mut(out, needed, "out") }?;
        // SAFETY: `texts` is readable for `n_texts` elements per the contract.
        let strs = unsafe { texts_from_c(texts, n_texts) }?;
        let want_info = !tokens_out.is_null() || !truncated_out.is_null();
        let mut info = vec![crate::TextInfo::default(); if want_info { n_texts } else { 0 }];
        m.embedder
            .embed_with(&strs, &opts, out, want_info.then_some(info.as_mut_slice()))?;
        // SAFETY: NULL or writable for `n_texts` elements per the contract.
        unsafe { write_info(&info, tokens_out, truncated_out) }
    })
}

/// Token vectors of a batch of length-delimited texts under the per-call
/// `options`: the last hidden state of every token, un-pooled (special and
/// prompt tokens included), as sentence-transformers'
/// `encode(output_value="token_embeddings")`. The options' prompt,
/// truncation and dimensions apply as in `embd_encode_with`; the vectors are
/// normalized only when the options set normalization on. Each text gets
/// the vectors it gets alone.
///
/// - `model`: borrowed for the duration of the call.
/// - `options`: borrowed; NULL means every option unset.
/// - `texts`, `n_texts`: as for `embd_encode_texts`.
/// - `out`: caller-owned buffer of `out_len` floats: text 0's token vectors,
///   then text 1's, and so on, each vector `embd_call_dim(model, options)`
///   floats; may be NULL when `out_len` is 0 (to ask for the size).
/// - `n_floats_out`: receives the number of floats written (required); on
///   `EMBD_STATUS_BUFFER_TOO_SMALL`, the number needed (nothing is written
///   to `out`).
/// - `tokens_out`: NULL when not wanted, else a caller-owned array of at
///   least `n_texts` elements; element i receives the number of vectors of
///   text i (its token count). Filled on success and on
///   `EMBD_STATUS_BUFFER_TOO_SMALL`.
/// - `truncated_out`: as for `embd_encode_ex`.
///
/// Returns the statuses of `embd_encode_with`; `EMBD_STATUS_BUFFER_TOO_SMALL`
/// as above; `EMBD_STATUS_UNSUPPORTED` for a static word-embedding model or
/// a model opened with windows.
///
/// Thread safety: safe to call concurrently on the same model and options.
///
/// # Safety
/// As `embd_encode_ex`; `n_floats_out` must be NULL or writable.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn embd_encode_tokens(
    model: *const embd_model,
    options: *const embd_call_options,
    texts: *const embd_text,
    n_texts: usize,
    out: *mut f32,
    out_len: usize,
    n_floats_out: *mut usize,
    tokens_out: *mut usize,
    truncated_out: *mut u8,
) -> embd_status {
    ffi_boundary("embd_encode_tokens", || {
        let m = handles::resolve(model, "model")?;
        let opts = read_options(options)?;
        if n_floats_out.is_null() {
            return Err(Fail::null("n_floats_out"));
        }
        // SAFETY: non-NULL and writable per the contract.
        unsafe { n_floats_out.write(0) };
        if texts.is_null() && n_texts > 0 {
            return Err(Fail::null("texts"));
        }
        check_batch(n_texts)?;
        let e = m.embedder.as_embedder().ok_or_else(|| {
            Fail::new(
                embd_status::Unsupported,
                "token vectors need an encoder model; this is a static word-embedding model",
            )
        })?;
        let plan = e.plan_tokens(&opts)?;
        // SAFETY: `texts` is readable for `n_texts` elements per the contract.
        let strs = unsafe { texts_from_c(texts, n_texts) }?;
        let (seqs, info): (Vec<Vec<u32>>, Vec<crate::TextInfo>) = strs
            .iter()
            .enumerate()
            .map(|(i, t)| {
                e.tokenize_planned(t, &plan).map_err(|err| {
                    crate::Error::new(err.kind(), format!("text {i}: {}", err.message()))
                })
            })
            .collect::<crate::Result<Vec<_>>>()?
            .into_iter()
            .unzip();
        let refs: Vec<&[u32]> = seqs.iter().map(Vec::as_slice).collect();
        let needed = plan.rows(&refs).checked_mul(plan.dim()).ok_or_else(|| {
            Fail::new(embd_status::LimitExceeded, "tokens x dim overflows size_t")
        })?;
        // SAFETY: NULL or writable for `n_texts` elements per the contract.
        unsafe { write_info(&info, tokens_out, truncated_out) }?;
        // SAFETY: non-NULL and writable per the contract.
        unsafe { n_floats_out.write(needed) };
        // The size first: a NULL `out` with `out_len` 0 asks for it.
        check_out_len(false, out_len, needed, "floats", || {
            format!("{} tokens x {} dims", plan.rows(&refs), plan.dim())
        })?;
        if out.is_null() && needed > 0 {
            return Err(Fail::null("out"));
        }
        // SAFETY: `out` is writable for `out_len` >= `needed` floats per the
        // contract.
        let out = unsafe { super::boundary::slice_mut(out, needed, "out") }?;
        let r = e.embed_planned(&refs, &plan, out);
        if r.is_err() {
            // SAFETY: as above.
            unsafe { n_floats_out.write(0) };
        }
        Ok(r?)
    })
}
