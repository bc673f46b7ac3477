//! `embd_model`: opening and freeing a model, and the facts about an open
//! model (dimension, sequence length, name, ...).

use std::ffi::{c_char, c_int};

use super::boundary::{self, c_str, ffi_boundary, ffi_boundary_or, write_opt, FfiResult};
use super::c_enum::CEnum;
use super::handles::{self, embd_model, embd_options};
use super::last_error;
use super::precision::{embd_precision, Precisions, EMBD_PRECISION_DEFAULT};
use super::status::embd_status;
use crate::{Engine, Options};

/// Opens a model file of any supported container,
/// validates it and prepares the engine.
///
/// Any supported file works: EMBD `.weights` (and legacy cpp_embedder files),
/// HF folders, AMB, LWT and Core ML blob folders holding a BERT encoder, and
/// finalfusion `.fifu` word embeddings, which give a static embedder (a text's
/// vector is the L2-normalized mean of its whitespace-separated words' vectors;
/// `embd_tokenize` then returns word indices, `UINT32_MAX` for unknown words).
///
/// - `path`: NUL-terminated UTF-8 file path, borrowed for the duration of the
///   call; or a hub id `org/name[@revision]` (no such file): its snapshot in
///   the local HuggingFace cache (`HF_HUB_CACHE`, `HF_HOME`,
///   `~/.cache/huggingface/hub`), converted on first use into
///   `$EMBD_CACHE_DIR` (default `~/.cache/embedder`) and opened from there.
///   Nothing is downloaded (`embd pull` does).
/// - `options`: borrowed for the duration of the call; NULL means defaults. Not
///   retained: changing or freeing it afterwards does not affect the model.
/// - `model_out`: receives the model, owned by the caller, free with
///   `embd_free`.
///
/// Returns `EMBD_STATUS_OK`; `EMBD_STATUS_NULL_ARGUMENT` (`path` or
/// `model_out`); `EMBD_STATUS_INVALID_UTF8` (`path`);
/// `EMBD_STATUS_INVALID_HANDLE` (`options`); `EMBD_STATUS_NOT_FOUND`,
/// `EMBD_STATUS_IO`; `EMBD_STATUS_UNKNOWN_FORMAT`, `EMBD_STATUS_FORMAT`,
/// `EMBD_STATUS_CHECKSUM`; `EMBD_STATUS_UNSUPPORTED`, `EMBD_STATUS_MODEL`;
/// `EMBD_STATUS_OUT_OF_MEMORY`; `EMBD_STATUS_INTERNAL_PANIC`.
///
/// On success `*model_out` is the new model; on any failure it is set to NULL
/// (when `model_out` itself is not NULL).
///
/// Thread safety: safe from any thread; opening the same file from several
/// threads at once is fine.
///
/// # Safety
/// `path` must be NULL or NUL-terminated; `model_out` must be NULL or valid
/// for one pointer write.
#[no_mangle]
pub unsafe extern "C" fn embd_open(
    path: *const c_char,
    options: *const embd_options,
    model_out: *mut *mut embd_model,
) -> embd_status {
    // SAFETY: `model_out` is NULL or writable per the contract.
    unsafe { write_opt(model_out, std::ptr::null_mut()) };
    ffi_boundary("embd_open", || {
        boundary::non_null(model_out, "model_out")?;
        // SAFETY: `path` is NULL or NUL-terminated per the contract.
        let path = unsafe { c_str(path, "path") }?;
        let opts = if options.is_null() {
            Options::new()
        } else {
            let o = handles::resolve(options, "options")?;
            let g = o.opts.lock().unwrap_or_else(|e| e.into_inner());
            g.clone()
        };
        let path = crate::hub::resolve_model_path(std::path::Path::new(path))?;
        let embedder = Engine::open(&path, &opts)?;
        let info = embedder.info();
        let name = last_error::to_cstring(&info.name);
        let p = handles::register(embd_model {
            embedder,
            info,
            name,
        });
        // SAFETY: `model_out` is non-NULL (checked) and writable per the contract.
        unsafe { model_out.write(p) };
        Ok(())
    })
}

/// Closes a model and releases its memory and file mapping.
///
/// - `model`: owned by the caller, from `embd_open`; NULL is a no-op. After the
///   call the pointer is dangling. A pointer that is not a live model (double
///   free, foreign pointer) is detected, ignored, and recorded in
///   `embd_last_error()`. Calls still running on the model in other threads
///   finish safely; the memory is released when the last one returns.
///
/// Thread safety: safe from any thread, but using `model` after (or while)
/// freeing it is a caller bug: later calls get `EMBD_STATUS_INVALID_HANDLE`.
#[no_mangle]
pub extern "C" fn embd_free(model: *mut embd_model) {
    ffi_boundary_or("embd_free", (), || handles::release(model, "model"))
}

/// The body of a function computing one value about a model into the
/// out-parameter `out` (named `out_param`; set to 0 first, so it is 0 on any
/// failure): the model is resolved, `out` checked, and `f`'s value written.
///
/// # Safety
/// `out` must be NULL or valid for one write.
pub(crate) unsafe fn model_value(
    func: &str,
    model: *const embd_model,
    out: *mut usize,
    out_param: &str,
    f: impl FnOnce(&embd_model) -> FfiResult<usize>,
) -> embd_status {
    // SAFETY: `out` is NULL or writable per the contract.
    unsafe { write_opt(out, 0) };
    ffi_boundary(func, || {
        let m = handles::resolve(model, "model")?;
        boundary::non_null(out, out_param)?;
        let v = f(&m)?;
        // SAFETY: non-NULL (checked) and writable per the contract.
        unsafe { out.write(v) };
        Ok(())
    })
}

fn getter<T>(
    func: &str,
    model: *const embd_model,
    default: T,
    f: impl FnOnce(&embd_model) -> T,
) -> T {
    ffi_boundary_or(func, default, || {
        let m = handles::resolve(model, "model")?;
        Ok(f(&m))
    })
}

/// Returns the embedding dimension (floats per text), e.g. 384; after
/// `embd_options_set_dimensions(options, K)`, K.
///
/// - `model`: borrowed for the duration of the call.
///
/// Returns 0 if `model` is NULL or not a live model (then `embd_last_error()`
/// says which).
///
/// Thread safety: safe to call concurrently on the same model.
#[no_mangle]
pub extern "C" fn embd_dim(model: *const embd_model) -> usize {
    getter("embd_dim", model, 0, |m| m.embedder.dim())
}

/// Returns the effective maximum sequence length in tokens, including `[CLS]`
/// and `[SEP]` (after the `embd_options_set_max_seq_length` override).
///
/// - `model`: borrowed for the duration of the call.
///
/// Returns 0 if `model` is NULL or not a live model, and for static
/// word-embedding models (no token limit).
///
/// Thread safety: safe to call concurrently on the same model.
#[no_mangle]
pub extern "C" fn embd_max_seq_length(model: *const embd_model) -> usize {
    getter("embd_max_seq_length", model, 0, |m| {
        m.embedder.max_seq_length()
    })
}

/// Returns the model's name from its metadata, e.g.
/// "sentence-transformers/all-MiniLM-L6-v2".
///
/// - `model`: borrowed for the duration of the call.
///
/// Returns a NUL-terminated UTF-8 string owned by the library, valid until
/// `embd_free(model)`; NULL if `model` is NULL or not a live model.
///
/// Thread safety: safe to call concurrently on the same model.
#[no_mangle]
pub extern "C" fn embd_model_name(model: *const embd_model) -> *const c_char {
    // The string lives inside the handle's Arc, which the registry keeps alive
    // until `embd_free`.
    getter("embd_model_name", model, std::ptr::null(), |m| {
        m.name.as_ptr()
    })
}

/// Returns the number of encoder layers, e.g. 6.
///
/// - `model`: borrowed for the duration of the call.
///
/// Returns 0 if `model` is NULL or not a live model.
///
/// Thread safety: safe to call concurrently on the same model.
#[no_mangle]
pub extern "C" fn embd_num_layers(model: *const embd_model) -> usize {
    getter("embd_num_layers", model, 0, |m| m.info.num_layers)
}

/// Returns the number of attention heads per layer, e.g. 12.
///
/// - `model`: borrowed for the duration of the call.
///
/// Returns 0 if `model` is NULL or not a live model.
///
/// Thread safety: safe to call concurrently on the same model.
#[no_mangle]
pub extern "C" fn embd_num_heads(model: *const embd_model) -> usize {
    getter("embd_num_heads", model, 0, |m| m.info.num_heads)
}

/// Returns the vocabulary size, e.g. 30522.
///
/// - `model`: borrowed for the duration of the call.
///
/// Returns 0 if `model` is NULL or not a live model.
///
/// Thread safety: safe to call concurrently on the same model.
#[no_mangle]
pub extern "C" fn embd_vocab_size(model: *const embd_model) -> usize {
    getter("embd_vocab_size", model, 0, |m| m.info.vocab_size)
}

/// Returns the pooling as a static string: "mean", "cls" or "max".
///
/// - `model`: borrowed for the duration of the call.
///
/// Returns a static NUL-terminated string owned by the library; NULL if
/// `model` is NULL or not a live model.
///
/// Thread safety: safe to call concurrently on the same model.
#[no_mangle]
pub extern "C" fn embd_pooling(model: *const embd_model) -> *const c_char {
    getter("embd_pooling", model, std::ptr::null(), |m| {
        m.info.pooling.c_name().as_ptr()
    })
}

/// Returns 1 if output vectors are L2-normalized (after the
/// `embd_options_set_normalize` override), 0 if not or if `model` is NULL or
/// not a live model.
///
/// - `model`: borrowed for the duration of the call.
///
/// Thread safety: safe to call concurrently on the same model.
#[no_mangle]
pub extern "C" fn embd_normalizes(model: *const embd_model) -> c_int {
    getter("embd_normalizes", model, 0, |m| {
        c_int::from(m.info.normalize)
    })
}

/// Returns the precision the model's dense layers run in: `EMBD_PRECISION_F32`,
/// `EMBD_PRECISION_BF16` or `EMBD_PRECISION_INT8` (after the
/// `embd_options_set_precision` override; with `EMBD_PRECISION_DEFAULT`, the
/// file's own). Static word-embedding models report `EMBD_PRECISION_F32`.
/// `embd_precision_name` turns it into "f32", "bf16" or "int8".
///
/// - `model`: borrowed for the duration of the call.
///
/// Returns 0 (`EMBD_PRECISION_DEFAULT`, never the value of a live model) if
/// `model` is NULL or not a live model (then `embd_last_error()` says which).
///
/// Thread safety: safe to call concurrently on the same model.
#[no_mangle]
pub extern "C" fn embd_model_precision(model: *const embd_model) -> embd_precision {
    getter("embd_model_precision", model, EMBD_PRECISION_DEFAULT, |m| {
        Precisions::to_c(Some(m.info.precision))
    })
}
