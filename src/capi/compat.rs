//! The cpp_embedder C API (28 functions, same names, signatures and error
//! codes), declared by the hand-written `include/cpp_embedder/c_api.h`.
//!
//! These functions are not in `embedder.h` (cbindgen excludes them). They keep
//! cpp_embedder's conventions (a thread-local error code + message, `void*`
//! handles, `uint32_t` sizes) but fix its bugs; the differences are listed in
//! `docs/C_API.md` ("cpp_embedder compatibility"):
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

use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use super::boundary::{panic_message, slice, slice_mut};
use super::handles::{self, Live};
use super::last_error::to_cstring;
use crate::error::ErrorKind;
use crate::formats::{ModelFile, ReadOptions};
use crate::model::config::ModelConfig;
use crate::tokenizer::{Tokenizer, TokenizerConfig};
use crate::{Embedder, Options, Vocab};

pub(crate) const COMPAT_MAGIC: u64 = 0x4350_5045_4d42_4544; // "CPPEMBED"

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

/// Default sequence length of cpp_embedder when 0 is given.
const DEFAULT_MAX_SEQ: u32 = 256;

thread_local! {
    static COMPAT_ERROR: std::cell::RefCell<(i32, CString)> =
        std::cell::RefCell::new((0, CString::default()));
}

fn set_error(code: i32, msg: &str) {
    let c = to_cstring(msg);
    COMPAT_ERROR.with(|e| *e.borrow_mut() = (code, c));
}

fn clear_error() {
    COMPAT_ERROR.with(|e| *e.borrow_mut() = (0, CString::default()));
}

/// A compat failure: code + message.
struct CFail(i32, String);

type CResult<T> = Result<T, CFail>;

fn null(what: &str) -> CFail {
    CFail(code::NULL_POINTER, format!("Null pointer: {what}"))
}

/// When a load or an embed fails, which code a Rust error kind becomes.
fn load_code(kind: ErrorKind) -> i32 {
    match kind {
        ErrorKind::NotFound => code::FILE_NOT_FOUND,
        ErrorKind::Io => code::FILE_READ,
        ErrorKind::Format => code::FILE_FORMAT,
        ErrorKind::UnknownFormat => code::INVALID_MAGIC,
        ErrorKind::Unsupported => code::UNSUPPORTED_VERSION,
        ErrorKind::Model => code::WEIGHT_MISMATCH,
        ErrorKind::Checksum => code::CHECKSUM_MISMATCH,
        ErrorKind::InvalidArgument => code::INVALID_CONFIG,
        ErrorKind::OutOfMemory => code::ALLOCATION_FAILED,
        _ => code::UNKNOWN,
    }
}

fn embed_code(kind: ErrorKind) -> i32 {
    match kind {
        ErrorKind::InvalidArgument | ErrorKind::InvalidUtf8 => code::INVALID_INPUT,
        ErrorKind::LimitExceeded => code::SEQUENCE_TOO_LONG,
        ErrorKind::BufferTooSmall => code::BUFFER_TOO_SMALL,
        ErrorKind::OutOfMemory => code::ALLOCATION_FAILED,
        _ => code::COMPUTATION,
    }
}

/// Runs a compat export body: panics become code 99; failures set the
/// thread-local code and message.
fn boundary<T>(default: T, body: impl FnOnce() -> CResult<T>) -> T {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(body)) {
        Ok(Ok(v)) => v,
        Ok(Err(CFail(c, m))) => {
            set_error(c, &m);
            default
        }
        Err(p) => {
            set_error(
                code::UNKNOWN,
                &format!(
                    "internal panic caught at the C boundary: {}",
                    panic_message(p.as_ref())
                ),
            );
            default
        }
    }
}

fn status(body: impl FnOnce() -> CResult<()>) -> c_int {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(body)) {
        Ok(Ok(())) => code::OK,
        Ok(Err(CFail(c, m))) => {
            set_error(c, &m);
            c
        }
        Err(p) => {
            set_error(
                code::UNKNOWN,
                &format!(
                    "internal panic caught at the C boundary: {}",
                    panic_message(p.as_ref())
                ),
            );
            code::UNKNOWN
        }
    }
}

/// A loaded model behind a compat handle.
pub(crate) struct CompatModel {
    embedder: Embedder,
    /// The model's tokenizer, for `tokenizer_decode` and the special ids.
    tokenizer: Tokenizer,
}

/// What `embedder_create_with_config` was given.
#[derive(Clone, Copy)]
struct CompatConfig {
    max_seq_length: u32,
    normalize: bool,
    num_threads: u32,
}

/// The object behind an `EmbedderHandle`.
pub struct CompatHandle {
    pub(crate) magic: u64,
    config: CompatConfig,
    model: RwLock<Option<Arc<CompatModel>>>,
    /// A 1-byte allocation whose address is the `TokenizerHandle`.
    tokenizer_token: Box<u8>,
}

impl CompatHandle {
    fn current(&self) -> Option<Arc<CompatModel>> {
        self.model.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    fn loaded(&self) -> CResult<Arc<CompatModel>> {
        self.current()
            .ok_or_else(|| CFail(code::MODEL_NOT_LOADED, "Model not loaded".into()))
    }
}

/// Reads a `vocab.txt` with the tokenizer's reader (one token per line, ids by
/// line number), refusing files over 64 MiB.
fn read_vocab_txt(path: &Path) -> CResult<Vocab> {
    const MAX_VOCAB_FILE: u64 = 64 << 20;
    let fail = |msg: String| {
        CFail(
            code::VOCAB_NOT_LOADED,
            format!("Failed to load tokenizer from: {msg}"),
        )
    };
    let meta = std::fs::metadata(path).map_err(|e| fail(format!("{}: {e}", path.display())))?;
    if meta.len() > MAX_VOCAB_FILE {
        return Err(fail(format!("{}: larger than 64 MiB", path.display())));
    }
    Vocab::from_vocab_txt(path).map_err(|e| fail(e.to_string()))
}

/// cpp_embedder's sibling vocabulary: `dir/model.bin` -> `dir/model.vocab`
/// (only the file name's extension is replaced; theirs cut at the last '.'
/// anywhere in the path).
fn sibling_vocab(path: &Path) -> PathBuf {
    path.with_extension("vocab")
}

fn load_model(path: &str, vocab_path: Option<&str>, cfg: CompatConfig) -> CResult<CompatModel> {
    let fail = |e: crate::Error| CFail(load_code(e.kind()), format!("Failed to load model: {e}"));
    let mut opts = Options::new()
        .threads(cfg.num_threads as usize)
        .normalize(false);
    if cfg.max_seq_length != 0 {
        opts = opts.max_seq_length(cfg.max_seq_length as usize);
    }
    let mut file = ModelFile::open(path, ReadOptions::default()).map_err(fail)?;
    match vocab_path.filter(|p| !p.is_empty()) {
        Some(vp) => {
            let v = read_vocab_txt(Path::new(vp))?;
            match &file.vocab {
                Some(fv) if fv.tokens() != v.tokens() => {
                    let at = fv
                        .tokens()
                        .iter()
                        .zip(v.tokens())
                        .position(|(a, b)| a != b)
                        .unwrap_or(fv.len().min(v.len()));
                    return Err(CFail(
                        code::WEIGHT_MISMATCH,
                        format!(
                            "Failed to load model: vocabulary {vp} ({} tokens) differs from the vocabulary embedded in {path} ({} tokens) at id {at}",
                            v.len(),
                            fv.len()
                        ),
                    ));
                }
                Some(_) => {}
                None => file.vocab = Some(v),
            }
        }
        None => {
            if file.vocab.is_none() {
                let sib = sibling_vocab(Path::new(path));
                if sib.exists() {
                    file.vocab = Some(read_vocab_txt(&sib)?);
                } else {
                    return Err(CFail(
                        code::VOCAB_NOT_LOADED,
                        format!(
                            "Failed to load model: {path} has no embedded vocabulary and {} does not exist",
                            sib.display()
                        ),
                    ));
                }
            }
        }
    }
    let vocab = file
        .vocab
        .clone()
        .ok_or_else(|| CFail(code::VOCAB_NOT_LOADED, "no vocabulary".into()))?;
    let tokenizer = match ModelConfig::from_metadata(&file.metadata) {
        Ok(c) => Tokenizer::for_model(vocab, &c),
        Err(_) => Tokenizer::new(vocab, TokenizerConfig::bert_uncased()),
    };
    let embedder = Embedder::from_model_file(file, &opts).map_err(fail)?;
    Ok(CompatModel {
        embedder,
        tokenizer,
    })
}

/// Reads a C path argument (NULL is allowed by the caller's rules).
///
/// # Safety
/// `p` must be NULL or NUL-terminated.
unsafe fn opt_path<'a>(p: *const c_char, what: &str) -> CResult<Option<&'a str>> {
    if p.is_null() {
        return Ok(None);
    }
    // SAFETY: non-NULL and NUL-terminated per the contract.
    let b = unsafe { CStr::from_ptr(p) }.to_bytes();
    std::str::from_utf8(b)
        .map(Some)
        .map_err(|_| CFail(code::INVALID_INPUT, format!("{what} is not valid UTF-8")))
}

/// # Safety
/// `weights_path`, `vocab_path`: NULL or NUL-terminated.
unsafe fn create(
    weights_path: *const c_char,
    vocab_path: *const c_char,
    config: CompatConfig,
) -> *mut c_void {
    clear_error();
    boundary(std::ptr::null_mut(), || {
        // SAFETY: NULL or NUL-terminated per the contract.
        let path = unsafe { opt_path(weights_path, "weights_path") }?;
        // SAFETY: NULL or NUL-terminated per the contract.
        let vocab = unsafe { opt_path(vocab_path, "vocab_path") }?;
        if config.max_seq_length as usize > crate::MAX_BATCH {
            return Err(CFail(
                code::INVALID_CONFIG,
                format!("max_seq_length {} is too large", config.max_seq_length),
            ));
        }
        let model = match path.filter(|p| !p.is_empty()) {
            None => None,
            Some(p) => Some(Arc::new(load_model(p, vocab, config)?)),
        };
        let h = Arc::new(CompatHandle {
            magic: COMPAT_MAGIC,
            config,
            model: RwLock::new(model),
            tokenizer_token: Box::new(0),
        });
        let p = Arc::as_ptr(&h) as *mut c_void;
        let tok = &*h.tokenizer_token as *const u8 as usize;
        handles::register(tok, Live::CompatTokenizer(h.clone()));
        handles::register(p as usize, Live::Compat(h));
        Ok(p)
    })
}

fn handle(h: *mut c_void) -> CResult<Arc<CompatHandle>> {
    handles::compat(h, "handle").map_err(|f| {
        let c = if h.is_null() {
            code::NULL_POINTER
        } else {
            code::INVALID_INPUT
        };
        CFail(c, f.msg)
    })
}

fn tok_handle(t: *mut c_void) -> CResult<Arc<CompatHandle>> {
    handles::compat_tokenizer(t, "tokenizer").map_err(|f| {
        let c = if t.is_null() {
            code::NULL_POINTER
        } else {
            code::INVALID_INPUT
        };
        CFail(c, f.msg)
    })
}

// ---------------------------------------------------------------------------
// Version and errors
// ---------------------------------------------------------------------------

/// cpp_embedder: the API version implemented, "1.0.0".
#[no_mangle]
pub extern "C" fn embedder_version() -> *const c_char {
    c"1.0.0".as_ptr()
}

/// cpp_embedder: a build description naming this library.
#[no_mangle]
pub extern "C" fn embedder_build_info() -> *const c_char {
    static INFO: &str = concat!(
        "embedder v",
        env!("CARGO_PKG_VERSION"),
        " (Rust; cpp_embedder 1.0.0 compatible C API)\0"
    );
    INFO.as_ptr().cast()
}

/// cpp_embedder: the calling thread's last error message ("" when none).
#[no_mangle]
pub extern "C" fn embedder_get_error() -> *const c_char {
    COMPAT_ERROR
        .try_with(|e| e.borrow().1.as_ptr())
        .unwrap_or(c"".as_ptr())
}

/// cpp_embedder: the calling thread's last error code (0 when none).
#[no_mangle]
pub extern "C" fn embedder_get_error_code() -> c_int {
    COMPAT_ERROR.try_with(|e| e.borrow().0).unwrap_or(0)
}

/// cpp_embedder: resets the calling thread's error code and message.
#[no_mangle]
pub extern "C" fn embedder_clear_error() {
    let _ = COMPAT_ERROR.try_with(|e| *e.borrow_mut() = (0, CString::default()));
}

// ---------------------------------------------------------------------------
// Lifetime
// ---------------------------------------------------------------------------

/// cpp_embedder: `embedder_create_with_config(path, 0, 1, 0)`.
///
/// # Safety
/// `weights_path` must be NULL or NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn embedder_create(weights_path: *const c_char) -> *mut c_void {
    // SAFETY: forwarded contract.
    unsafe { embedder_create_with_config(weights_path, 0, 1, 0) }
}

/// cpp_embedder: creates a handle and loads `weights_path` (NULL or "" gives a
/// handle with no model). `max_seq_length` 0 = the model's own; `normalize` is
/// the default for `embedder_embed`/`_batch`; `num_threads` 0 = all CPUs.
///
/// # Safety
/// `weights_path` must be NULL or NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn embedder_create_with_config(
    weights_path: *const c_char,
    max_seq_length: u32,
    normalize: c_int,
    num_threads: u32,
) -> *mut c_void {
    let cfg = CompatConfig {
        max_seq_length,
        normalize: normalize != 0,
        num_threads,
    };
    // SAFETY: forwarded contract.
    unsafe { create(weights_path, std::ptr::null(), cfg) }
}

/// cpp_embedder: creates a handle from a weights file and a `vocab.txt`, which
/// must equal the file's embedded vocabulary (or supplies it when the file has
/// none).
///
/// # Safety
/// Both paths must be NULL or NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn embedder_create_with_vocab(
    weights_path: *const c_char,
    vocab_path: *const c_char,
) -> *mut c_void {
    let cfg = CompatConfig {
        max_seq_length: 0,
        normalize: true,
        num_threads: 0,
    };
    // SAFETY: forwarded contract.
    unsafe { create(weights_path, vocab_path, cfg) }
}

/// cpp_embedder: (re)loads a model into a handle. On failure the previous
/// model (if any) stays loaded.
///
/// # Safety
/// `weights_path` must be NULL or NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn embedder_load(handle_: *mut c_void, weights_path: *const c_char) -> c_int {
    clear_error();
    status(|| {
        let h = handle(handle_)?;
        // SAFETY: NULL or NUL-terminated per the contract.
        let path = unsafe { opt_path(weights_path, "weights_path") }?
            .ok_or_else(|| null("weights_path"))?;
        let m = load_model(path, None, h.config).map_err(|CFail(c, m)| {
            CFail(
                c,
                m.replacen("Failed to load model", "Failed to load weights", 1),
            )
        })?;
        *h.model.write().unwrap_or_else(|e| e.into_inner()) = Some(Arc::new(m));
        Ok(())
    })
}

/// cpp_embedder: destroys a handle (NULL is fine; a freed or foreign handle is
/// detected and ignored).
#[no_mangle]
pub extern "C" fn embedder_destroy(handle_: *mut c_void) {
    boundary((), || {
        if handle_.is_null() {
            return Ok(());
        }
        let h = handle(handle_)?;
        handles::unregister(&*h.tokenizer_token as *const u8 as usize);
        handles::unregister(handle_ as usize);
        Ok(())
    })
}

/// cpp_embedder: 1 if a model is loaded, else 0 (also for NULL).
#[no_mangle]
pub extern "C" fn embedder_is_loaded(handle_: *mut c_void) -> c_int {
    boundary(0, || Ok(c_int::from(handle(handle_)?.current().is_some())))
}

/// cpp_embedder: the embedding dimension; 0 for NULL or when no model is loaded.
#[no_mangle]
pub extern "C" fn embedder_get_dim(handle_: *mut c_void) -> u32 {
    boundary(0, || {
        Ok(handle(handle_)?
            .current()
            .map_or(0, |m| m.embedder.dim() as u32))
    })
}

/// cpp_embedder: the effective maximum sequence length; the configured value
/// (0 -> 256) when no model is loaded; 0 for NULL.
#[no_mangle]
pub extern "C" fn embedder_get_max_seq_length(handle_: *mut c_void) -> u32 {
    boundary(0, || {
        let h = handle(handle_)?;
        Ok(match h.current() {
            Some(m) => m.embedder.max_seq_length() as u32,
            None if h.config.max_seq_length == 0 => DEFAULT_MAX_SEQ,
            None => h.config.max_seq_length,
        })
    })
}

/// cpp_embedder: the vocabulary size; 0 for NULL or when no model is loaded.
#[no_mangle]
pub extern "C" fn embedder_get_vocab_size(handle_: *mut c_void) -> u32 {
    boundary(0, || {
        Ok(handle(handle_)?
            .current()
            .map_or(0, |m| m.tokenizer.vocab().len() as u32))
    })
}

// ---------------------------------------------------------------------------
// Embedding
// ---------------------------------------------------------------------------

/// cpp_embedder: embeds one text with the handle's normalize setting.
///
/// # Safety
/// `text` NULL or NUL-terminated; `output` NULL or writable for `output_size`
/// floats.
#[no_mangle]
pub unsafe extern "C" fn embedder_embed(
    handle_: *mut c_void,
    text: *const c_char,
    output: *mut f32,
    output_size: u32,
) -> c_int {
    let norm = boundary(1, || Ok(c_int::from(handle(handle_)?.config.normalize)));
    // SAFETY: forwarded contract.
    unsafe { embedder_embed_ex(handle_, text, output, output_size, norm) }
}

/// cpp_embedder: embeds one text; `normalize` != 0 gives a unit vector, 0 the
/// raw pooled vector (honoured both ways).
///
/// # Safety
/// `text` NULL or NUL-terminated; `output` NULL or writable for `output_size`
/// floats.
#[no_mangle]
pub unsafe extern "C" fn embedder_embed_ex(
    handle_: *mut c_void,
    text: *const c_char,
    output: *mut f32,
    output_size: u32,
    normalize: c_int,
) -> c_int {
    clear_error();
    status(|| {
        let h = handle(handle_)?;
        if text.is_null() {
            return Err(null("text"));
        }
        if output.is_null() {
            return Err(null("output"));
        }
        let m = h.loaded()?;
        let dim = m.embedder.dim();
        if (output_size as usize) < dim {
            return Err(CFail(
                code::BUFFER_TOO_SMALL,
                format!("Output buffer too small: need {dim}, got {output_size}"),
            ));
        }
        // SAFETY: non-NULL and NUL-terminated per the contract.
        let t = unsafe { CStr::from_ptr(text) }.to_str().map_err(|e| {
            CFail(
                code::INVALID_INPUT,
                format!("text is not valid UTF-8 (byte offset {})", e.valid_up_to()),
            )
        })?;
        // SAFETY: writable for output_size >= dim floats per the contract.
        let out = unsafe { slice_mut(output, dim, "output") }
            .map_err(|f| CFail(code::INVALID_INPUT, f.msg))?;
        m.embedder
            .embed_into(&[t], out)
            .map_err(|e| CFail(embed_code(e.kind()), format!("Inference failed: {e}")))?;
        if normalize != 0 {
            crate::vector::l2_normalize(out);
        }
        Ok(())
    })
}

/// cpp_embedder: embeds a batch (row-major `[num_texts, dim]`) with the
/// handle's normalize setting.
///
/// # Safety
/// `texts` NULL or `num_texts` pointers (each NULL or NUL-terminated);
/// `output` NULL or writable for `output_size` floats.
#[no_mangle]
pub unsafe extern "C" fn embedder_embed_batch(
    handle_: *mut c_void,
    texts: *const *const c_char,
    num_texts: u32,
    output: *mut f32,
    output_size: u32,
) -> c_int {
    let norm = boundary(1, || Ok(c_int::from(handle(handle_)?.config.normalize)));
    // SAFETY: forwarded contract.
    unsafe { embedder_embed_batch_ex(handle_, texts, num_texts, output, output_size, norm) }
}

/// cpp_embedder: embeds a batch with an explicit normalize flag (honoured both
/// ways). The texts are embedded together (batched), each giving the vector it
/// gets alone.
///
/// # Safety
/// `texts` NULL or `num_texts` pointers (each NULL or NUL-terminated);
/// `output` NULL or writable for `output_size` floats.
#[no_mangle]
pub unsafe extern "C" fn embedder_embed_batch_ex(
    handle_: *mut c_void,
    texts: *const *const c_char,
    num_texts: u32,
    output: *mut f32,
    output_size: u32,
    normalize: c_int,
) -> c_int {
    clear_error();
    status(|| {
        let h = handle(handle_)?;
        if texts.is_null() {
            return Err(null("texts"));
        }
        if output.is_null() {
            return Err(null("output"));
        }
        if num_texts == 0 {
            return Ok(());
        }
        let m = h.loaded()?;
        let dim = m.embedder.dim();
        let n = num_texts as usize;
        if n > crate::MAX_BATCH {
            return Err(CFail(
                code::INVALID_INPUT,
                format!(
                    "num_texts {n} exceeds the maximum batch of {}",
                    crate::MAX_BATCH
                ),
            ));
        }
        let needed = n * dim; // n <= 2^20 and dim is small: no overflow on 64-bit
        if (output_size as usize) < needed {
            return Err(CFail(
                code::BUFFER_TOO_SMALL,
                format!("Output buffer too small: need {needed}, got {output_size}"),
            ));
        }
        // SAFETY: `texts` readable for `n` pointers per the contract.
        let ptrs =
            unsafe { slice(texts, n, "texts") }.map_err(|f| CFail(code::INVALID_INPUT, f.msg))?;
        let mut strs = Vec::with_capacity(n);
        for (i, &p) in ptrs.iter().enumerate() {
            if p.is_null() {
                return Err(CFail(code::NULL_POINTER, format!("Null text at index {i}")));
            }
            // SAFETY: non-NULL and NUL-terminated per the contract.
            let s = unsafe { CStr::from_ptr(p) }.to_str().map_err(|e| {
                CFail(
                    code::INVALID_INPUT,
                    format!(
                        "text at index {i} is not valid UTF-8 (byte offset {})",
                        e.valid_up_to()
                    ),
                )
            })?;
            strs.push(s);
        }
        // SAFETY: writable for output_size >= needed floats per the contract.
        let out = unsafe { slice_mut(output, needed, "output") }
            .map_err(|f| CFail(code::INVALID_INPUT, f.msg))?;
        m.embedder
            .embed_into(&strs, out)
            .map_err(|e| CFail(embed_code(e.kind()), format!("Inference failed: {e}")))?;
        if normalize != 0 {
            out.chunks_mut(dim.max(1)).for_each(|v| {
                crate::vector::l2_normalize(v);
            });
        }
        Ok(())
    })
}

// ---------------------------------------------------------------------------
// Tokenizer
// ---------------------------------------------------------------------------

/// cpp_embedder: the tokenizer of a handle (borrowed; never destroy it). NULL
/// for a NULL handle or when no model is loaded. Unlike cpp_embedder's, it
/// stays valid across `embedder_load` (it follows the handle's current model)
/// and becomes invalid (detected) at `embedder_destroy`.
#[no_mangle]
pub extern "C" fn embedder_get_tokenizer(handle_: *mut c_void) -> *mut c_void {
    boundary(std::ptr::null_mut(), || {
        let h = handle(handle_)?;
        h.loaded()?;
        Ok(&*h.tokenizer_token as *const u8 as *mut c_void)
    })
}

/// cpp_embedder: encodes `text` as `[CLS]` ids `[SEP]` truncated to `max_length`
/// (0 -> 256, values below 2 -> 2, above 2^20 refused with code 22) and padded with `[PAD]` to `max_length`;
/// `*actual_length` receives the padded length.
///
/// # Safety
/// `text` NULL or NUL-terminated; `output` NULL or writable for `output_size`
/// ids; `actual_length` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn tokenizer_encode(
    tokenizer: *mut c_void,
    text: *const c_char,
    output: *mut u32,
    output_size: u32,
    actual_length: *mut u32,
    max_length: u32,
) -> c_int {
    clear_error();
    status(|| {
        let h = tok_handle(tokenizer)?;
        if text.is_null() {
            return Err(null("text"));
        }
        if output.is_null() {
            return Err(null("output"));
        }
        if actual_length.is_null() {
            return Err(null("actual_length"));
        }
        let m = h.loaded()?;
        let max_len = match max_length {
            0 => DEFAULT_MAX_SEQ,
            1 => 2,
            n => n,
        } as usize;
        if max_len > crate::MAX_BATCH {
            return Err(CFail(
                code::SEQUENCE_TOO_LONG,
                format!("max_length {max_len} is larger than {}", crate::MAX_BATCH),
            ));
        }
        if max_len > output_size as usize {
            return Err(CFail(
                code::BUFFER_TOO_SMALL,
                format!("Output buffer too small: need {max_len}, got {output_size}"),
            ));
        }
        // SAFETY: non-NULL and NUL-terminated per the contract.
        let t = unsafe { CStr::from_ptr(text) }.to_str().map_err(|e| {
            CFail(
                code::INVALID_INPUT,
                format!("text is not valid UTF-8 (byte offset {})", e.valid_up_to()),
            )
        })?;
        if t.len() > crate::MAX_TEXT_BYTES {
            return Err(CFail(
                code::SEQUENCE_TOO_LONG,
                format!(
                    "text is {} bytes, more than {}",
                    t.len(),
                    crate::MAX_TEXT_BYTES
                ),
            ));
        }
        let mut ids = m.embedder.tokenize_full(t);
        if ids.len() > max_len {
            let sep = m.tokenizer.vocab().specials().sep;
            ids.truncate(max_len - 1);
            ids.push(sep);
        }
        ids.resize(max_len, m.tokenizer.vocab().specials().pad);
        // SAFETY: writable for output_size >= max_len ids per the contract.
        let out = unsafe { slice_mut(output, max_len, "output") }
            .map_err(|f| CFail(code::INVALID_INPUT, f.msg))?;
        out.copy_from_slice(&ids);
        // SAFETY: non-NULL (checked) and writable per the contract.
        unsafe { actual_length.write(max_len as u32) };
        Ok(())
    })
}

/// cpp_embedder: decodes ids into a NUL-terminated string; `skip_special`
/// != 0 drops `[PAD]` `[UNK]` `[CLS]` `[SEP]` `[MASK]` (honoured, unlike cpp_embedder).
///
/// # Safety
/// `token_ids` NULL or readable for `num_tokens` ids; `output` NULL or
/// writable for `output_size` bytes.
#[no_mangle]
pub unsafe extern "C" fn tokenizer_decode(
    tokenizer: *mut c_void,
    token_ids: *const u32,
    num_tokens: u32,
    output: *mut c_char,
    output_size: u32,
    skip_special: c_int,
) -> c_int {
    clear_error();
    status(|| {
        let h = tok_handle(tokenizer)?;
        if token_ids.is_null() && num_tokens > 0 {
            return Err(null("token_ids"));
        }
        if output.is_null() {
            return Err(null("output"));
        }
        let m = h.loaded()?;
        // SAFETY: readable for `num_tokens` ids per the contract.
        let ids = unsafe { slice(token_ids, num_tokens as usize, "token_ids") }
            .map_err(|f| CFail(code::INVALID_INPUT, f.msg))?;
        let s = m.tokenizer.decode(ids, skip_special != 0);
        let need = s.len() + 1;
        if need > output_size as usize {
            return Err(CFail(
                code::BUFFER_TOO_SMALL,
                format!("Output buffer too small: need {need}, got {output_size}"),
            ));
        }
        // SAFETY: writable for output_size >= need bytes per the contract.
        let out = unsafe { slice_mut(output.cast::<u8>(), need, "output") }
            .map_err(|f| CFail(code::INVALID_INPUT, f.msg))?;
        out[..s.len()].copy_from_slice(s.as_bytes());
        out[s.len()] = 0;
        Ok(())
    })
}

fn special(tokenizer: *mut c_void, pick: impl FnOnce(crate::SpecialIds) -> u32) -> u32 {
    boundary(0, || {
        Ok(pick(
            tok_handle(tokenizer)?
                .loaded()?
                .tokenizer
                .vocab()
                .specials(),
        ))
    })
}

/// cpp_embedder: the `[CLS]` id (101 for BERT uncased); 0 for NULL.
#[no_mangle]
pub extern "C" fn tokenizer_cls_token_id(tokenizer: *mut c_void) -> u32 {
    special(tokenizer, |s| s.cls)
}

/// cpp_embedder: the `[SEP]` id (102 for BERT uncased); 0 for NULL.
#[no_mangle]
pub extern "C" fn tokenizer_sep_token_id(tokenizer: *mut c_void) -> u32 {
    special(tokenizer, |s| s.sep)
}

/// cpp_embedder: the `[PAD]` id (0 for BERT uncased); 0 for NULL.
#[no_mangle]
pub extern "C" fn tokenizer_pad_token_id(tokenizer: *mut c_void) -> u32 {
    special(tokenizer, |s| s.pad)
}

/// cpp_embedder: the `[UNK]` id (100 for BERT uncased); 0 for NULL.
#[no_mangle]
pub extern "C" fn tokenizer_unk_token_id(tokenizer: *mut c_void) -> u32 {
    special(tokenizer, |s| s.unk)
}

// ---------------------------------------------------------------------------
// Vector math (pure)
// ---------------------------------------------------------------------------

/// # Safety
/// NULL or readable for `dim` floats.
unsafe fn vec_or_none<'a>(p: *const f32, dim: u32) -> Option<&'a [f32]> {
    if p.is_null() || dim == 0 {
        return None;
    }
    // SAFETY: readable for `dim` floats per the contract; dim <= u32::MAX.
    Some(unsafe { std::slice::from_raw_parts(p, dim as usize) })
}

/// cpp_embedder: cosine similarity; 0 for NULL, dim 0, or a near-zero norm.
///
/// # Safety
/// `a`, `b` NULL or readable for `dim` floats.
#[no_mangle]
pub unsafe extern "C" fn embedder_cosine_similarity(a: *const f32, b: *const f32, dim: u32) -> f32 {
    boundary(0.0, || {
        // SAFETY: forwarded contract.
        let (Some(a), Some(b)) = (unsafe { vec_or_none(a, dim) }, unsafe {
            vec_or_none(b, dim)
        }) else {
            return Ok(0.0);
        };
        Ok(crate::cosine_similarity(a, b))
    })
}

/// cpp_embedder: L2-normalizes in place ([`crate::vector::l2_normalize`]:
/// a zero vector stays zero).
///
/// # Safety
/// `embedding` NULL or writable for `dim` floats.
#[no_mangle]
pub unsafe extern "C" fn embedder_normalize(embedding: *mut f32, dim: u32) {
    boundary((), || {
        if embedding.is_null() || dim == 0 {
            return Ok(());
        }
        // SAFETY: writable for `dim` floats per the contract.
        let v = unsafe { std::slice::from_raw_parts_mut(embedding, dim as usize) };
        crate::vector::l2_normalize(v);
        Ok(())
    })
}

/// cpp_embedder: the L2 norm; 0 for NULL or dim 0.
///
/// # Safety
/// `embedding` NULL or readable for `dim` floats.
#[no_mangle]
pub unsafe extern "C" fn embedder_norm(embedding: *const f32, dim: u32) -> f32 {
    boundary(0.0, || {
        // SAFETY: forwarded contract.
        Ok(unsafe { vec_or_none(embedding, dim) }.map_or(0.0, crate::vector::norm))
    })
}

/// cpp_embedder: the dot product; 0 for NULL or dim 0.
///
/// # Safety
/// `a`, `b` NULL or readable for `dim` floats.
#[no_mangle]
pub unsafe extern "C" fn embedder_dot_product(a: *const f32, b: *const f32, dim: u32) -> f32 {
    boundary(0.0, || {
        // SAFETY: forwarded contract.
        let (Some(a), Some(b)) = (unsafe { vec_or_none(a, dim) }, unsafe {
            vec_or_none(b, dim)
        }) else {
            return Ok(0.0);
        };
        Ok(crate::vector::dot(a, b))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sibling_vocab_replaces_only_the_file_extension() {
        assert_eq!(
            sibling_vocab(Path::new("a.b/model.bin")),
            PathBuf::from("a.b/model.vocab")
        );
        assert_eq!(
            sibling_vocab(Path::new("a.b/model")),
            PathBuf::from("a.b/model.vocab")
        );
    }

    #[test]
    fn missing_file_gives_code_1_and_null() {
        // SAFETY: a NUL-terminated literal.
        let h = unsafe { embedder_create(c"/nonexistent/x.weights".as_ptr()) };
        assert!(h.is_null());
        assert_eq!(embedder_get_error_code(), code::FILE_NOT_FOUND);
        embedder_clear_error();
        assert_eq!(embedder_get_error_code(), 0);
    }

    #[test]
    fn empty_handle_and_stale_handles() {
        // SAFETY: NULL path is allowed.
        let h = unsafe { embedder_create(std::ptr::null()) };
        assert!(!h.is_null());
        assert_eq!(embedder_is_loaded(h), 0);
        assert!(embedder_get_tokenizer(h).is_null());
        let mut out = [0f32; 4];
        // SAFETY: valid pointers.
        let c = unsafe { embedder_embed(h, c"x".as_ptr(), out.as_mut_ptr(), 4) };
        assert_eq!(c, code::MODEL_NOT_LOADED);
        embedder_destroy(h);
        assert_eq!(embedder_is_loaded(h), 0);
        embedder_destroy(h); // double destroy: detected, ignored
        assert_eq!(embedder_get_error_code(), code::INVALID_INPUT);
    }
}
