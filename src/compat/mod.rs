//! The cpp_embedder C API (29 functions, same names, signatures and error
//! codes), declared by the hand-written `include/cpp_embedder/c_api.h`.
//!
//! These functions are not in `embedder.h`: cbindgen parses only `src/capi`
//! (see `build.rs`), and `tests/it/compat_header.rs` checks the hand-written
//! header against the exports here. They keep cpp_embedder's conventions (a
//! thread-local error code + message, `void*` handles, `uint32_t` sizes) but
//! fix its bugs; the differences are listed in `docs/C_API.md`
//! ("cpp_embedder compatibility"):
//!
//! * the normalize flag of `*_ex` is honoured both ways (theirs could only add
//!   normalization), `num_threads` is honoured, one handle is really safe to use
//!   from many threads (no shared mutable config);
//! * the vocabulary comes from the model file; a sibling `<stem>.vocab` is only
//!   read when the file has none; `embedder_create_with_vocab` checks the given
//!   vocab equals the file's;
//! * load failures get the specific code (10 bad magic, 13 checksum, ...), not
//!   always 1;
//! * handles are validated (a freed or foreign handle gives
//!   `CPP_EMBEDDER_ERROR_INVALID_INPUT` instead of a crash);
//! * `tokenizer_decode` honours `skip_special` (it is the tokenizer's
//!   `decode`, HF's WordPiece decoder rule).
//!
//! The layer shares the `embd_*` layer's boundary (`capi::boundary::guard`,
//! with the `Cpp` error sink: cpp_embedder's codes and the store in
//! `errors`), its handle registry (`capi::handles`) and `crate::vector`. One
//! file per C object: `errors`, `embedder` (the `EmbedderHandle`), `embed`,
//! `tokenizer` (the `TokenizerHandle`), `vectors`.

mod embed;
mod embedder;
mod errors;
mod tokenizer;
mod vectors;

pub use embed::{embedder_embed, embedder_embed_batch, embedder_embed_batch_ex, embedder_embed_ex};
pub use embedder::{
    embedder_create, embedder_create_with_config, embedder_create_with_vocab, embedder_destroy,
    embedder_get_dim, embedder_get_max_seq_length, embedder_get_vocab_size, embedder_is_loaded,
    embedder_load,
};
pub use errors::{
    embedder_build_info, embedder_clear_error, embedder_get_error, embedder_get_error_code,
    embedder_version,
};
pub use tokenizer::{
    embedder_get_tokenizer, tokenizer_cls_token_id, tokenizer_decode, tokenizer_encode,
    tokenizer_pad_token_id, tokenizer_sep_token_id, tokenizer_unk_token_id,
};
pub use vectors::{
    embedder_cosine_similarity, embedder_dot_product, embedder_norm, embedder_normalize,
};

use std::ffi::{c_char, c_int, CStr};

use crate::capi::boundary::{guard, ErrorSink, Fail, FfiResult};
use crate::capi::status::embd_status;

/// cpp_embedder's error codes (`CppEmbedderError`).
mod code {
    pub(super) const OK: i32 = 0;
    pub(super) const FILE_NOT_FOUND: i32 = 1;
    pub(super) const FILE_READ: i32 = 2;
    pub(super) const FILE_FORMAT: i32 = 3;
    pub(super) const INVALID_MAGIC: i32 = 10;
    pub(super) const UNSUPPORTED_VERSION: i32 = 11;
    pub(super) const WEIGHT_MISMATCH: i32 = 12;
    pub(super) const CHECKSUM_MISMATCH: i32 = 13;
    pub(super) const VOCAB_NOT_LOADED: i32 = 20;
    pub(super) const SEQUENCE_TOO_LONG: i32 = 22;
    pub(super) const MODEL_NOT_LOADED: i32 = 30;
    pub(super) const INVALID_INPUT: i32 = 31;
    pub(super) const COMPUTATION: i32 = 32;
    pub(super) const ALLOCATION_FAILED: i32 = 40;
    pub(super) const INVALID_CONFIG: i32 = 50;
    pub(super) const NULL_POINTER: i32 = 60;
    pub(super) const BUFFER_TOO_SMALL: i32 = 61;
    pub(super) const UNKNOWN: i32 = 99;
}

/// The cpp_embedder sink: its codes, and the message (no function-name
/// prefix, as cpp_embedder's) in the store `embedder_get_error` reads.
struct Cpp;

impl ErrorSink for Cpp {
    type Code = c_int;
    const PANIC: c_int = code::UNKNOWN;
    fn record(_func: &str, fail: CFail) {
        errors::set(fail.status, &fail.msg);
    }
}

/// A compat failure: cpp_embedder code + message.
type CFail = Fail<c_int>;

type CResult<T> = FfiResult<T, c_int>;

/// The shared argument checks (`capi::boundary`, `capi::handles`) fail with
/// an `embd_status`; this is its cpp_embedder code.
impl From<Fail<embd_status>> for CFail {
    fn from(f: Fail<embd_status>) -> CFail {
        let c = match f.status {
            embd_status::NullArgument => code::NULL_POINTER,
            embd_status::BufferTooSmall => code::BUFFER_TOO_SMALL,
            _ => code::INVALID_INPUT,
        };
        Fail::new(c, f.msg)
    }
}

fn null(what: &str) -> CFail {
    Fail::new(code::NULL_POINTER, format!("Null pointer: {what}"))
}

/// Runs a compat export body that returns a value: a failure or a panic (code
/// 99) sets the thread-local code and message and returns `default`.
fn boundary<T>(default: T, body: impl FnOnce() -> CResult<T>) -> T {
    guard::<Cpp, T>("cpp_embedder", body).unwrap_or(default)
}

/// Runs a compat export body that returns a code: clears the thread-local
/// error first (as cpp_embedder's status functions do), then as `boundary`.
fn status(body: impl FnOnce() -> CResult<()>) -> c_int {
    errors::clear();
    guard::<Cpp, ()>("cpp_embedder", body)
        .err()
        .unwrap_or(code::OK)
}

/// Reads a non-NULL NUL-terminated C string as UTF-8 (`what` names it in the
/// message).
///
/// # Safety
/// `p` must be non-NULL and NUL-terminated.
unsafe fn c_text<'a>(p: *const c_char, what: &str) -> CResult<&'a str> {
    // SAFETY: non-NULL and NUL-terminated per the contract.
    unsafe { CStr::from_ptr(p) }.to_str().map_err(|e| {
        Fail::new(
            code::INVALID_INPUT,
            format!(
                "{what} is not valid UTF-8 (byte offset {})",
                e.valid_up_to()
            ),
        )
    })
}
