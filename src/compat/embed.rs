//! Embedding: `embedder_embed*`, one text or a batch, with the handle's or an
//! explicit normalize flag. All four share one body (`embed_export`).

use std::ffi::{c_char, c_int, c_void};

use super::embedder::EmbedderHandle;
use super::{boundary, c_text, code, null, status, CResult};
use crate::capi::boundary::{slice_mut, Fail};
use crate::error::ErrorKind;

/// When an embed fails, which code a Rust error kind becomes.
fn embed_code(kind: ErrorKind) -> i32 {
    match kind {
        ErrorKind::InvalidArgument | ErrorKind::InvalidUtf8 => code::INVALID_INPUT,
        ErrorKind::LimitExceeded => code::SEQUENCE_TOO_LONG,
        ErrorKind::BufferTooSmall => code::BUFFER_TOO_SMALL,
        ErrorKind::OutOfMemory => code::ALLOCATION_FAILED,
        _ => code::COMPUTATION,
    }
}

/// The normalize default of the handle (1 when it is not a live handle, so
/// that the `_ex` call reports the handle's error).
fn default_normalize(handle_: *mut c_void) -> c_int {
    boundary(1, || {
        Ok(c_int::from(EmbedderHandle::resolve(handle_)?.normalize()))
    })
}

/// The body of `embedder_embed_ex` and `embedder_embed_batch_ex`: checks the
/// handle, the texts (`null_texts` names the parameter when it is NULL) and
/// `output`, then embeds `n` texts (text `i` read by `text(i)`) of the
/// handle's model into `output` (room for `output_size` floats),
/// L2-normalizing each row when `normalize` is not 0.
///
/// # Safety
/// `output` must be NULL or writable for `output_size` floats.
unsafe fn embed_export<'a>(
    handle_: *mut c_void,
    null_texts: Option<&str>,
    n: usize,
    text: impl Fn(usize) -> CResult<&'a str>,
    output: *mut f32,
    output_size: u32,
    normalize: c_int,
) -> c_int {
    status(|| {
        let h = EmbedderHandle::resolve(handle_)?;
        if let Some(param) = null_texts {
            return Err(null(param));
        }
        if output.is_null() {
            return Err(null("output"));
        }
        if n == 0 {
            return Ok(());
        }
        let m = h.loaded()?;
        let dim = m.dim();
        if n > crate::limits::MAX_BATCH {
            return Err(Fail::new(
                code::INVALID_INPUT,
                format!(
                    "num_texts {n} exceeds the maximum batch of {}",
                    crate::limits::MAX_BATCH
                ),
            ));
        }
        let needed = n * dim; // n <= 2^20 and dim is small: no overflow on 64-bit
        if (output_size as usize) < needed {
            return Err(Fail::new(
                code::BUFFER_TOO_SMALL,
                format!("Output buffer too small: need {needed}, got {output_size}"),
            ));
        }
        let strs = (0..n).map(text).collect::<CResult<Vec<&str>>>()?;
        // SAFETY: writable for output_size >= needed floats per the contract.
        let out = unsafe { slice_mut(output, needed, "output") }?;
        m.embed_into(&strs, out)
            .map_err(|e| Fail::new(embed_code(e.kind()), format!("Inference failed: {e}")))?;
        if normalize != 0 {
            out.chunks_mut(dim.max(1)).for_each(|v| {
                crate::vector::l2_normalize(v);
            });
        }
        Ok(())
    })
}

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
    let norm = default_normalize(handle_);
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
    // SAFETY: forwarded contract: `text` is NUL-terminated when not NULL
    // (checked by `embed_export` before any text is read).
    unsafe {
        embed_export(
            handle_,
            text.is_null().then_some("text"),
            1,
            |_| c_text(text, "text"),
            output,
            output_size,
            normalize,
        )
    }
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
    let norm = default_normalize(handle_);
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
    let text = |i: usize| {
        // SAFETY: `texts` is non-NULL (checked by `embed_export` before any
        // text is read) and readable for `num_texts` > i pointers.
        let p = unsafe { *texts.add(i) };
        if p.is_null() {
            return Err(Fail::new(
                code::NULL_POINTER,
                format!("Null text at index {i}"),
            ));
        }
        // SAFETY: non-NULL and NUL-terminated per the contract.
        unsafe { c_text(p, &format!("text at index {i}")) }
    };
    // SAFETY: forwarded contract.
    unsafe {
        embed_export(
            handle_,
            texts.is_null().then_some("texts"),
            num_texts as usize,
            text,
            output,
            output_size,
            normalize,
        )
    }
}
