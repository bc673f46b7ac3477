//! The `TokenizerHandle`: the model's own tokenizer (`Embedder::tokenizer`),
//! borrowed from an `EmbedderHandle`; encoding, decoding and the special ids.

use std::ffi::{c_char, c_int, c_void};
use std::sync::Arc;

use super::embedder::{EmbedderHandle, DEFAULT_MAX_SEQ, MAX_SEQ_TOKENS};
use super::{boundary, c_text, code, null, status, CResult};
use crate::capi::boundary::{slice, slice_mut, Fail};
use crate::capi::handles::{self, Handle};

/// The object behind a `TokenizerHandle` (registered at the address of the
/// embedder handle's `tokenizer_token`): it follows the handle's current model.
struct TokenizerHandle {
    embedder: Arc<EmbedderHandle>,
}

impl Handle for TokenizerHandle {
    const NAME: &'static str = "TokenizerHandle";
}

/// Registers the `TokenizerHandle` of a new embedder handle.
pub(super) fn register(h: &Arc<EmbedderHandle>) {
    let t = Arc::new(TokenizerHandle {
        embedder: h.clone(),
    });
    handles::register_at(h.tokenizer_addr() as usize, t);
}

/// Resolves a `TokenizerHandle` argument to its embedder handle.
fn resolve(t: *mut c_void) -> CResult<Arc<EmbedderHandle>> {
    Ok(handles::resolve::<TokenizerHandle>(t.cast(), "tokenizer")?
        .embedder
        .clone())
}

/// cpp_embedder: the tokenizer of a handle (borrowed; never destroy it). NULL
/// for a NULL handle or when no model is loaded. Unlike cpp_embedder's, it
/// stays valid across `embedder_load` (it follows the handle's current model)
/// and becomes invalid (detected) at `embedder_destroy`.
#[no_mangle]
pub extern "C" fn embedder_get_tokenizer(handle_: *mut c_void) -> *mut c_void {
    boundary(std::ptr::null_mut(), || {
        let h = EmbedderHandle::resolve(handle_)?;
        h.loaded()?;
        Ok(h.tokenizer_addr() as *mut c_void)
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
    status(|| {
        let h = resolve(tokenizer)?;
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
        if max_len > MAX_SEQ_TOKENS {
            return Err(Fail::new(
                code::SEQUENCE_TOO_LONG,
                format!("max_length {max_len} is larger than {MAX_SEQ_TOKENS}"),
            ));
        }
        if max_len > output_size as usize {
            return Err(Fail::new(
                code::BUFFER_TOO_SMALL,
                format!("Output buffer too small: need {max_len}, got {output_size}"),
            ));
        }
        // SAFETY: non-NULL (checked) and NUL-terminated per the contract.
        let t = unsafe { c_text(text, "text") }?;
        if t.len() > crate::limits::MAX_TEXT_BYTES {
            return Err(Fail::new(
                code::SEQUENCE_TOO_LONG,
                format!(
                    "text is {} bytes, more than {}",
                    t.len(),
                    crate::limits::MAX_TEXT_BYTES
                ),
            ));
        }
        let specials = m.tokenizer().vocab().specials();
        let mut ids = m.tokenize_full(t);
        if ids.len() > max_len {
            ids.truncate(max_len - 1);
            ids.push(specials.sep);
        }
        ids.resize(max_len, specials.pad);
        // SAFETY: writable for output_size >= max_len ids per the contract.
        let out = unsafe { slice_mut(output, max_len, "output") }?;
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
    status(|| {
        let h = resolve(tokenizer)?;
        if token_ids.is_null() && num_tokens > 0 {
            return Err(null("token_ids"));
        }
        if output.is_null() {
            return Err(null("output"));
        }
        let m = h.loaded()?;
        // SAFETY: readable for `num_tokens` ids per the contract.
        let ids = unsafe { slice(token_ids, num_tokens as usize, "token_ids") }?;
        let s = m.tokenizer().decode(ids, skip_special != 0);
        let need = s.len() + 1;
        if need > output_size as usize {
            return Err(Fail::new(
                code::BUFFER_TOO_SMALL,
                format!("Output buffer too small: need {need}, got {output_size}"),
            ));
        }
        // SAFETY: writable for output_size >= need bytes per the contract.
        let out = unsafe { slice_mut(output.cast::<u8>(), need, "output") }?;
        out[..s.len()].copy_from_slice(s.as_bytes());
        out[s.len()] = 0;
        Ok(())
    })
}

fn special(
    tokenizer: *mut c_void,
    pick: impl FnOnce(crate::tokenizer::vocab::SpecialIds) -> u32,
) -> u32 {
    boundary(0, || {
        Ok(pick(
            resolve(tokenizer)?.loaded()?.tokenizer().vocab().specials(),
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
