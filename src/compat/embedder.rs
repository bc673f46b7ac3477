//! The `EmbedderHandle`: creating one (and loading its model), reloading,
//! destroying, and the facts about its model.

use std::ffi::{c_char, c_int, c_void};
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use super::{boundary, c_text, code, null, status, CResult};
use crate::capi::boundary::Fail;
use crate::capi::handles::{self, Handle};
use crate::embedder::Embedder;
use crate::error::ErrorKind;
use crate::formats::{ModelFile, ReadOptions};
use crate::options::Options;
use crate::tokenizer::vocab::Vocab;

/// Default sequence length of cpp_embedder when 0 is given.
pub(super) const DEFAULT_MAX_SEQ: u32 = 256;

/// The longest sequence a handle accepts as `max_seq_length` and
/// `tokenizer_encode` pads to (2^20 tokens; cpp_embedder had no bound, and
/// real models stop far below: this only keeps allocations sane).
pub(super) const MAX_SEQ_TOKENS: usize = 1 << 20;

/// When a load fails, which code a Rust error kind becomes.
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

/// What `embedder_create_with_config` was given.
#[derive(Clone, Copy)]
struct CompatConfig {
    max_seq_length: u32,
    normalize: bool,
    num_threads: u32,
}

/// The object behind an `EmbedderHandle`.
pub(super) struct EmbedderHandle {
    config: CompatConfig,
    /// The loaded model (its own tokenizer serves the `TokenizerHandle`).
    model: RwLock<Option<Arc<Embedder>>>,
    /// A 1-byte allocation whose address is the `TokenizerHandle`.
    tokenizer_token: Box<u8>,
}

impl Handle for EmbedderHandle {
    const NAME: &'static str = "EmbedderHandle";
}

impl EmbedderHandle {
    /// Resolves the `EmbedderHandle` argument `h`.
    pub(super) fn resolve(h: *mut c_void) -> CResult<Arc<EmbedderHandle>> {
        Ok(handles::resolve::<EmbedderHandle>(h.cast(), "handle")?)
    }

    fn current(&self) -> Option<Arc<Embedder>> {
        self.model.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// The loaded model, or `CPP_EMBEDDER_ERROR_MODEL_NOT_LOADED`.
    pub(super) fn loaded(&self) -> CResult<Arc<Embedder>> {
        self.current()
            .ok_or_else(|| Fail::new(code::MODEL_NOT_LOADED, "Model not loaded"))
    }

    /// The normalize default of `embedder_embed` / `_batch`.
    pub(super) fn normalize(&self) -> bool {
        self.config.normalize
    }

    /// The address handed out as this handle's `TokenizerHandle`.
    pub(super) fn tokenizer_addr(&self) -> *const u8 {
        &*self.tokenizer_token
    }
}

/// Reads a `vocab.txt` with the tokenizer's reader (one token per line, ids by
/// line number), refusing files over 64 MiB.
fn read_vocab_txt(path: &Path) -> CResult<Vocab> {
    const MAX_VOCAB_FILE: u64 = 64 << 20;
    let fail = |msg: String| {
        Fail::new(
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

fn load_model(path: &str, vocab_path: Option<&str>, cfg: CompatConfig) -> CResult<Embedder> {
    let fail = |e: crate::error::Error| {
        Fail::new(load_code(e.kind()), format!("Failed to load model: {e}"))
    };
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
                    return Err(Fail::new(
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
                    return Err(Fail::new(
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
    Embedder::from_model_file(file, &opts).map_err(fail)
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
    unsafe { c_text(p, what) }.map(Some)
}

/// # Safety
/// `weights_path`, `vocab_path`: NULL or NUL-terminated.
unsafe fn create(
    weights_path: *const c_char,
    vocab_path: *const c_char,
    config: CompatConfig,
) -> *mut c_void {
    super::errors::clear();
    boundary(std::ptr::null_mut(), || {
        // SAFETY: NULL or NUL-terminated per the contract.
        let path = unsafe { opt_path(weights_path, "weights_path") }?;
        // SAFETY: NULL or NUL-terminated per the contract.
        let vocab = unsafe { opt_path(vocab_path, "vocab_path") }?;
        if config.max_seq_length as usize > MAX_SEQ_TOKENS {
            return Err(Fail::new(
                code::INVALID_CONFIG,
                format!("max_seq_length {} is too large", config.max_seq_length),
            ));
        }
        let model = match path.filter(|p| !p.is_empty()) {
            None => None,
            Some(p) => Some(Arc::new(load_model(p, vocab, config)?)),
        };
        let h = Arc::new(EmbedderHandle {
            config,
            model: RwLock::new(model),
            tokenizer_token: Box::new(0),
        });
        let p = Arc::as_ptr(&h) as *mut c_void;
        super::tokenizer::register(&h);
        handles::register_at(p as usize, h);
        Ok(p)
    })
}

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
    status(|| {
        let h = EmbedderHandle::resolve(handle_)?;
        // SAFETY: NULL or NUL-terminated per the contract.
        let path = unsafe { opt_path(weights_path, "weights_path") }?
            .ok_or_else(|| null("weights_path"))?;
        let m = load_model(path, None, h.config).map_err(|f| {
            Fail::new(
                f.status,
                f.msg
                    .replacen("Failed to load model", "Failed to load weights", 1),
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
        let h = EmbedderHandle::resolve(handle_)?;
        handles::unregister(h.tokenizer_addr());
        handles::unregister(handle_);
        Ok(())
    })
}

/// cpp_embedder: 1 if a model is loaded, else 0 (also for NULL).
#[no_mangle]
pub extern "C" fn embedder_is_loaded(handle_: *mut c_void) -> c_int {
    boundary(0, || {
        Ok(c_int::from(
            EmbedderHandle::resolve(handle_)?.current().is_some(),
        ))
    })
}

/// cpp_embedder: the embedding dimension; 0 for NULL or when no model is loaded.
#[no_mangle]
pub extern "C" fn embedder_get_dim(handle_: *mut c_void) -> u32 {
    boundary(0, || {
        Ok(EmbedderHandle::resolve(handle_)?
            .current()
            .map_or(0, |m| m.dim() as u32))
    })
}

/// cpp_embedder: the effective maximum sequence length; the configured value
/// (0 -> 256) when no model is loaded; 0 for NULL.
#[no_mangle]
pub extern "C" fn embedder_get_max_seq_length(handle_: *mut c_void) -> u32 {
    boundary(0, || {
        let h = EmbedderHandle::resolve(handle_)?;
        Ok(match h.current() {
            Some(m) => m.max_seq_length() as u32,
            None if h.config.max_seq_length == 0 => DEFAULT_MAX_SEQ,
            None => h.config.max_seq_length,
        })
    })
}

/// cpp_embedder: the vocabulary size; 0 for NULL or when no model is loaded.
#[no_mangle]
pub extern "C" fn embedder_get_vocab_size(handle_: *mut c_void) -> u32 {
    boundary(0, || {
        Ok(EmbedderHandle::resolve(handle_)?
            .current()
            .map_or(0, |m| m.tokenizer().vocab().len() as u32))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compat::{embedder_embed, embedder_get_error_code, embedder_get_tokenizer};

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
        crate::compat::embedder_clear_error();
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
