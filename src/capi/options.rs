//! `embd_options`: the options object for `embd_open`, its constructor,
//! destructor and setters.

use std::ffi::{c_char, c_int};
use std::sync::Mutex;

use super::boundary::{c_str, ffi_boundary_or, Fail};
use super::c_enum::CEnum;
use super::handles::{self, embd_options};
use super::precision::{embd_precision, Precisions};
use super::setters::{self, bool_flag, with, OptionsHandle};
use super::status::embd_status;
use crate::{Matryoshka, Options};

/// Creates an options object holding the defaults: all CPU threads, the model's
/// own maximum sequence length, normalization and precision, checksums
/// verified, weights pre-packed.
///
/// Returns a new options object, owned by the caller, free with
/// `embd_options_free`; NULL only if an internal error occurred (then
/// `embd_last_error()` says why).
///
/// Thread safety: safe from any thread. The object itself must not be changed
/// from two threads at once.
#[no_mangle]
pub extern "C" fn embd_options_new() -> *mut embd_options {
    ffi_boundary_or("embd_options_new", std::ptr::null_mut(), || {
        Ok(handles::register(embd_options {
            opts: Mutex::new(Options::new()),
        }))
    })
}

/// Destroys an options object.
///
/// - `options`: owned by the caller, created by `embd_options_new`; NULL is a
///   no-op. After the call the pointer is dangling and must not be used. A
///   pointer that is not a live options object (already freed, foreign) is
///   detected, ignored, and recorded in `embd_last_error()`.
///
/// Thread safety: must not race with other calls using the same `options`.
#[no_mangle]
pub extern "C" fn embd_options_free(options: *mut embd_options) {
    ffi_boundary_or("embd_options_free", (), || {
        handles::release(options, "options")
    })
}

impl OptionsHandle for embd_options {
    type Opts = Options;
    fn opts(&self) -> &Mutex<Options> {
        &self.opts
    }
}

/// Sets the number of worker threads one embedding call may use.
///
/// - `options`: borrowed for the duration of the call.
/// - `threads`: 0 means all available CPU threads (the default).
///
/// Returns `EMBD_STATUS_OK`, `EMBD_STATUS_NULL_ARGUMENT`,
/// `EMBD_STATUS_INVALID_HANDLE`.
///
/// Thread safety: must not race with other calls using the same `options`.
#[no_mangle]
pub extern "C" fn embd_options_set_threads(
    options: *mut embd_options,
    threads: usize,
) -> embd_status {
    with("embd_options_set_threads", options, |o| {
        *o = o.clone().threads(threads);
        Ok(())
    })
}

/// Overrides the model's maximum sequence length (tokens including `[CLS]` and
/// `[SEP]`); longer texts are truncated. Checked against the model by `embd_open`
/// (must be between 2 and the model's position-embedding count, else
/// `EMBD_STATUS_INVALID_ARGUMENT`).
///
/// - `options`: borrowed for the duration of the call.
/// - `max_seq_length`: 0 means the model's own value (the default).
///
/// Returns `EMBD_STATUS_OK`, `EMBD_STATUS_NULL_ARGUMENT`,
/// `EMBD_STATUS_INVALID_HANDLE`.
///
/// Thread safety: must not race with other calls using the same `options`.
#[no_mangle]
pub extern "C" fn embd_options_set_max_seq_length(
    options: *mut embd_options,
    max_seq_length: usize,
) -> embd_status {
    with("embd_options_set_max_seq_length", options, |o| {
        o.max_seq_length = if max_seq_length == 0 {
            None
        } else {
            Some(max_seq_length)
        };
        Ok(())
    })
}

/// Overrides the model's L2 normalization of the output vectors.
///
/// - `options`: borrowed for the duration of the call.
/// - `normalize`: 1 to normalize to unit length, 0 to return raw pooled
///   vectors, -1 to follow the model's metadata (the default).
///
/// Returns `EMBD_STATUS_OK`, `EMBD_STATUS_NULL_ARGUMENT`,
/// `EMBD_STATUS_INVALID_HANDLE`, `EMBD_STATUS_INVALID_ARGUMENT` (any other
/// value).
///
/// Thread safety: must not race with other calls using the same `options`.
#[no_mangle]
pub extern "C" fn embd_options_set_normalize(
    options: *mut embd_options,
    normalize: c_int,
) -> embd_status {
    setters::normalize("embd_options_set_normalize", options, normalize)
}

/// Turns verification of the model file's data and whole-file checksums at
/// `embd_open` on (1, the default) or off (0, faster start-up for trusted
/// files). The header checksum is always verified.
///
/// - `options`: borrowed for the duration of the call.
///
/// Returns `EMBD_STATUS_OK`, `EMBD_STATUS_NULL_ARGUMENT`,
/// `EMBD_STATUS_INVALID_HANDLE`, `EMBD_STATUS_INVALID_ARGUMENT` (not 0 or 1).
///
/// Thread safety: must not race with other calls using the same `options`.
#[no_mangle]
pub extern "C" fn embd_options_set_verify_checksums(
    options: *mut embd_options,
    verify: c_int,
) -> embd_status {
    with("embd_options_set_verify_checksums", options, |o| {
        o.verify_checksums = bool_flag(verify, "verify")?;
        Ok(())
    })
}

/// Turns pre-packing of the weights on (1, the default) or off (0). When on,
/// a background thread started by the first embedding call copies the
/// encoder's weight matrices into the layout the matrix kernels read, so that
/// later calls do not rearrange them on every call (short texts get several
/// times faster); the copy costs the size of those matrices in memory (42 MB
/// for all-MiniLM-L6-v2; the mapped originals are released from resident
/// memory). Results are identical either way.
///
/// - `options`: borrowed for the duration of the call.
///
/// Returns `EMBD_STATUS_OK`, `EMBD_STATUS_NULL_ARGUMENT`,
/// `EMBD_STATUS_INVALID_HANDLE`, `EMBD_STATUS_INVALID_ARGUMENT` (not 0 or 1).
///
/// Thread safety: must not race with other calls using the same `options`.
#[no_mangle]
pub extern "C" fn embd_options_set_prepack_weights(
    options: *mut embd_options,
    prepack: c_int,
) -> embd_status {
    with("embd_options_set_prepack_weights", options, |o| {
        o.prepack_weights = bool_flag(prepack, "prepack")?;
        Ok(())
    })
}

/// Sets the arithmetic of the encoder's dense layers (see `embd_precision`).
/// Asking for a lower precision than the file's own (`EMBD_PRECISION_BF16` or
/// `EMBD_PRECISION_INT8` on an f32 file) converts the weights at `embd_open`,
/// which then takes a little longer. Lower precisions are faster and give
/// vectors close to, but not bitwise equal to, the f32 ones.
/// `embd_model_precision` tells which precision an open model runs. Static
/// word-embedding models (`.fifu`) have no dense layers and ignore it.
///
/// - `options`: borrowed for the duration of the call.
/// - `precision`: one of `EMBD_PRECISION_DEFAULT` (the file's own: int8 for
///   files converted with `--dtype int8`, bf16 for `--dtype bf16` (packed),
///   f32 otherwise; the default),
///   `EMBD_PRECISION_F32`, `EMBD_PRECISION_BF16`, `EMBD_PRECISION_INT8`.
///
/// Returns `EMBD_STATUS_OK`, `EMBD_STATUS_NULL_ARGUMENT`,
/// `EMBD_STATUS_INVALID_HANDLE`, `EMBD_STATUS_INVALID_ARGUMENT` (any other
/// value; the message names it and the accepted ones, and `options` is left
/// unchanged).
///
/// Thread safety: must not race with other calls using the same `options`.
#[no_mangle]
pub extern "C" fn embd_options_set_precision(
    options: *mut embd_options,
    precision: embd_precision,
) -> embd_status {
    with("embd_options_set_precision", options, |o| {
        o.precision = Precisions::from_c(precision)?;
        Ok(())
    })
}

/// Matryoshka truncation: keep only the first `dimensions` components of
/// every vector. When the model normalizes its output, each cut vector is
/// L2-normalized again (what cosine or dot-product search needs; as
/// sentence-transformers' `truncate_dim` with `normalize_embeddings`).
/// `embd_dim` of the opened model then returns `dimensions`, and every output
/// buffer is sized by it. Checked by `embd_open`: a value above the model's
/// dimension gives `EMBD_STATUS_INVALID_ARGUMENT` there (the message names
/// both numbers).
///
/// - `options`: borrowed for the duration of the call.
/// - `dimensions`: 0 means all of the model's dimensions (the default).
///
/// Returns `EMBD_STATUS_OK`, `EMBD_STATUS_NULL_ARGUMENT`,
/// `EMBD_STATUS_INVALID_HANDLE`.
///
/// Thread safety: must not race with other calls using the same `options`.
#[no_mangle]
pub extern "C" fn embd_options_set_dimensions(
    options: *mut embd_options,
    dimensions: usize,
) -> embd_status {
    setters::dimensions("embd_options_set_dimensions", options, dimensions)
}

/// The Matryoshka recipe: how a sentence vector is cut to the dimensions
/// of `embd_options_set_dimensions`. `"truncate"` (the default, as NULL) is
/// sentence-transformers' `truncate_dim`: the first components, normalized
/// again when the model normalizes. `"layer-norm"` is nomic-embed-text-v1.5's
/// recipe: a layer norm without affine (eps 1e-5) over the whole vector, the
/// cut, then L2 normalization; it applies to every sentence vector, cut or
/// not. No model file says which one a model wants. Token vectors are always
/// truncated.
///
/// - `options`: borrowed for the duration of the call.
/// - `name`: NUL-terminated UTF-8, borrowed for the duration of the call;
///   NULL sets `"truncate"`.
///
/// Returns `EMBD_STATUS_OK`, `EMBD_STATUS_NULL_ARGUMENT` (`options`),
/// `EMBD_STATUS_INVALID_HANDLE`, `EMBD_STATUS_INVALID_UTF8`,
/// `EMBD_STATUS_INVALID_ARGUMENT` (a name that is not a recipe, named).
///
/// Thread safety: must not race with other calls using the same `options`.
///
/// # Safety
/// `name` must be NULL or NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn embd_options_set_matryoshka(
    options: *mut embd_options,
    name: *const c_char,
) -> embd_status {
    with("embd_options_set_matryoshka", options, |o| {
        o.matryoshka = if name.is_null() {
            Matryoshka::Truncate
        } else {
            // SAFETY: non-NULL and NUL-terminated per the contract.
            let n = unsafe { c_str(name, "name") }?;
            Matryoshka::from_name(n)
                .map_err(|e| Fail::new(embd_status::InvalidArgument, e.message().to_string()))?
        };
        Ok(())
    })
}

/// Sets a prompt prepended to every text, as sentence-transformers'
/// `prompt`: the model reads the prompt followed by the text (truncated
/// together to the maximum sequence length; token counts include the
/// prompt). When the model's pooling config says `include_prompt: false`,
/// `[CLS]` and the prompt's tokens are left out of mean and max pooling. An
/// empty prompt turns the model's default prompt off.
///
/// - `options`: borrowed for the duration of the call.
/// - `prompt`: NUL-terminated UTF-8, borrowed for the duration of the call
///   (copied); NULL removes a prompt set before (the model's default prompt,
///   if any, applies again).
///
/// Returns `EMBD_STATUS_OK`, `EMBD_STATUS_NULL_ARGUMENT` (`options`),
/// `EMBD_STATUS_INVALID_HANDLE`, `EMBD_STATUS_INVALID_UTF8`. Setting both a
/// prompt and a prompt name makes `embd_open` fail with
/// `EMBD_STATUS_INVALID_ARGUMENT`.
///
/// Thread safety: must not race with other calls using the same `options`.
///
/// # Safety
/// `prompt` must be NULL or NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn embd_options_set_prompt(
    options: *mut embd_options,
    prompt: *const c_char,
) -> embd_status {
    // SAFETY: NULL or NUL-terminated per the contract.
    unsafe { setters::prompt("embd_options_set_prompt", options, prompt) }
}

/// Selects a prompt stored in the model file by name, as
/// sentence-transformers' `prompt_name` (the converter stores the `prompts`
/// of `config_sentence_transformers.json`; without a prompt or a prompt name,
/// the model's `default_prompt_name` applies, if it has one). Checked by
/// `embd_open`: a name the model does not store gives
/// `EMBD_STATUS_INVALID_ARGUMENT` there, naming the stored ones.
///
/// - `options`: borrowed for the duration of the call.
/// - `name`: NUL-terminated UTF-8, borrowed for the duration of the call
///   (copied); NULL removes a name set before.
///
/// Returns `EMBD_STATUS_OK`, `EMBD_STATUS_NULL_ARGUMENT` (`options`),
/// `EMBD_STATUS_INVALID_HANDLE`, `EMBD_STATUS_INVALID_UTF8`.
///
/// Thread safety: must not race with other calls using the same `options`.
///
/// # Safety
/// `name` must be NULL or NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn embd_options_set_prompt_name(
    options: *mut embd_options,
    name: *const c_char,
) -> embd_status {
    // SAFETY: NULL or NUL-terminated per the contract.
    unsafe { setters::prompt_name("embd_options_set_prompt_name", options, name) }
}

/// Long texts: by default (`enable` 0) a text is truncated to the maximum
/// sequence length, as sentence-transformers does. With `enable` 1, a longer
/// text is embedded as windows of `embd_max_seq_length` tokens, each with its
/// own `[CLS]` and `[SEP]`, consecutive windows sharing `overlap` tokens; the
/// windows' vectors are averaged weighted by their token counts, then
/// L2-normalized when the model normalizes. `embd_encode_ex` then reports the
/// whole text's token count and never a truncation.
///
/// - `options`: borrowed for the duration of the call.
/// - `enable`: 0 or 1.
/// - `overlap`: tokens shared by consecutive windows (ignored when `enable`
///   is 0); must be less than `embd_max_seq_length - 2`, checked by
///   `embd_open` (`EMBD_STATUS_INVALID_ARGUMENT` there).
///
/// Returns `EMBD_STATUS_OK`, `EMBD_STATUS_NULL_ARGUMENT`,
/// `EMBD_STATUS_INVALID_HANDLE`, `EMBD_STATUS_INVALID_ARGUMENT` (`enable`
/// not 0 or 1).
///
/// Thread safety: must not race with other calls using the same `options`.
#[no_mangle]
pub extern "C" fn embd_options_set_windows(
    options: *mut embd_options,
    enable: c_int,
    overlap: usize,
) -> embd_status {
    with("embd_options_set_windows", options, |o| {
        o.window_overlap = bool_flag(enable, "enable")?.then_some(overlap);
        Ok(())
    })
}

/// A progress callback (`embd_options_set_progress`): `user` is the pointer
/// given with it, `done` the number of the call's texts whose rows of the
/// output are complete (rows 0 .. done-1), `total` the call's number of
/// texts. Return 0 to continue, non-zero to stop the call, which then returns
/// `EMBD_STATUS_CANCELLED` with rows 0 .. done-1 complete (in every output
/// precision; `tokens_out` / `truncated_out` are unspecified) and the others
/// unspecified.
///
/// Thread safety: called on the thread that called the encode function; when
/// several threads encode on one model at once, it runs on each of them,
/// concurrently.
pub type embd_progress_fn =
    Option<unsafe extern "C" fn(user: *mut std::ffi::c_void, done: usize, total: usize) -> c_int>;

/// The user pointer of a progress callback, passed back unchanged.
#[derive(Clone, Copy)]
struct UserPtr(*mut std::ffi::c_void);

// SAFETY: the library never dereferences the pointer; it only hands it back to
// the caller's callback, which the header documents may run on any thread that
// calls an encode function on the model.
unsafe impl Send for UserPtr {}
// SAFETY: as above: shared only to be passed back.
unsafe impl Sync for UserPtr {}

/// Sets a progress callback, stored in every model opened with these options:
/// each `embd_encode*` call on such a model calls `progress(user, done,
/// total)` on the calling thread between chunks of work (at least every ~50
/// ms of work, about every 256 tokens per worker thread; with long-text
/// windows, every 16 texts; static word-embedding models do not call it),
/// the last time with `done == total`. A non-zero return stops the call with
/// `EMBD_STATUS_CANCELLED` (see `embd_progress_fn` for which rows are
/// complete). The vectors do not depend on whether a callback is set.
///
/// - `options`: borrowed for the duration of the call.
/// - `progress`: the callback, or NULL to remove one set before. It must not
///   call back into the library on the same model while it runs, and must
///   return (no longjmp or exception through the library).
/// - `user`: passed to `progress` unchanged; owned by the caller, who keeps it
///   valid as long as a model opened with these options may call it.
///
/// Returns `EMBD_STATUS_OK`, `EMBD_STATUS_NULL_ARGUMENT` (`options`),
/// `EMBD_STATUS_INVALID_HANDLE`.
///
/// Thread safety: must not race with other calls using the same `options`.
/// The callback may be called from several threads at once when several
/// threads encode on the model at the same time.
#[no_mangle]
pub extern "C" fn embd_options_set_progress(
    options: *mut embd_options,
    progress: embd_progress_fn,
    user: *mut std::ffi::c_void,
) -> embd_status {
    with("embd_options_set_progress", options, |o| {
        o.progress = progress.map(|f| {
            let user = UserPtr(user);
            crate::options::ProgressFn::new(move |done, total| {
                let u = user;
                // SAFETY: `f` is the caller's callback, called as its type
                // documents, with the caller's own user pointer.
                if unsafe { f(u.0, done, total) } == 0 {
                    std::ops::ControlFlow::Continue(())
                } else {
                    std::ops::ControlFlow::Break(())
                }
            })
        });
        Ok(())
    })
}
