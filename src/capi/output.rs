//! Quantized output (`embd_output_precision`): the precision constants, the
//! caller's ranges on the options, the size function and
//! `embd_encode_quantized`. Semantics of sentence-transformers'
//! `quantize_embeddings` (see `crate::quantize`).

use std::ffi::{c_char, c_void, CStr};

use super::boundary::{self, ffi_boundary, slice, slice_mut, Fail, FfiResult};
use super::c_enum::{c_enum, CEnum};
use super::encode::{check_batch, check_out_len, embd_text, texts_from_c, write_info};
use super::handles::{self, embd_model, embd_options};
use super::model::model_value;
use super::setters::with;
use super::status::embd_status;
use crate::{OutputPrecision, OutputRanges, TextInfo};

/// Element type and packing of output vectors, for `embd_encode_quantized`
/// and `embd_output_len`: one of the `EMBD_OUTPUT_*` constants, with the
/// semantics of sentence-transformers' `quantize_embeddings`. (Not to be
/// confused with `embd_precision`, the arithmetic inside the model.) A plain
/// `int32_t`; an unknown value gives `EMBD_STATUS_INVALID_ARGUMENT`.
pub type embd_output_precision = i32;

/// `float` components (what `embd_encode` gives). Buffer type: `float`.
pub const EMBD_OUTPUT_FLOAT32: embd_output_precision = 0;

/// One `int8_t` per component: the `EMBD_OUTPUT_UINT8` bucket minus 128.
/// Needs ranges (see `EMBD_OUTPUT_UINT8`). Buffer type: `int8_t`.
pub const EMBD_OUTPUT_INT8: embd_output_precision = 1;

/// One `uint8_t` per component: with the per-dimension range `[min, max]`
/// and `step = (max - min) / 255` (1 when 0), the bucket
/// `clamp(floor((x - min) / step), 0, 255)`, in float arithmetic. The ranges
/// come from `embd_options_set_output_ranges`, else from the model file
/// (`embd convert --output-ranges-corpus`); never from the batch. Buffer type:
/// `uint8_t`.
pub const EMBD_OUTPUT_UINT8: embd_output_precision = 2;

/// The `EMBD_OUTPUT_UBINARY` bytes minus 128, as `int8_t`. Buffer type:
/// `int8_t`, `(dim + 7) / 8` per vector.
pub const EMBD_OUTPUT_BINARY: embd_output_precision = 3;

/// The bits `x > 0`, 8 components per byte, the first in the most
/// significant bit, the last byte zero-padded (`numpy.packbits`). Buffer
/// type: `uint8_t`, `(dim + 7) / 8` per vector.
pub const EMBD_OUTPUT_UBINARY: embd_output_precision = 4;

c_enum! {
    /// `embd_output_precision` as the output precision and the name
    /// sentence-transformers and the `embd` command line give it.
    pub(crate) struct OutputPrecisions: OutputPrecision, "output precision" {
        EMBD_OUTPUT_FLOAT32 => [OutputPrecision::Float32], c"float32";
        EMBD_OUTPUT_INT8 => [OutputPrecision::Int8], c"int8";
        EMBD_OUTPUT_UINT8 => [OutputPrecision::Uint8], c"uint8";
        EMBD_OUTPUT_BINARY => [OutputPrecision::Binary], c"binary";
        EMBD_OUTPUT_UBINARY => [OutputPrecision::Ubinary], c"ubinary";
    }
}

/// Returns the lowercase name of an output precision as sentence-transformers
/// and the `embd` command line spell it: "float32", "int8", "uint8",
/// "binary", "ubinary".
///
/// - `precision`: any integer.
///
/// Returns a static NUL-terminated string owned by the library, valid for the
/// life of the process; NULL for a value that is not an `EMBD_OUTPUT_*`
/// constant. Does not touch `embd_last_error()`.
///
/// Thread safety: safe from any thread at any time (pure function).
#[no_mangle]
pub extern "C" fn embd_output_precision_name(precision: embd_output_precision) -> *const c_char {
    OutputPrecisions::name(precision).map_or(std::ptr::null(), CStr::as_ptr)
}

/// Sets the per-dimension ranges of `EMBD_OUTPUT_INT8` / `EMBD_OUTPUT_UINT8`
/// output, overriding those stored in the model file (sentence-transformers'
/// `ranges` array of shape `(2, dim)`, row-major).
///
/// - `options`: borrowed for the duration of the call.
/// - `ranges`: caller-owned array of `len` floats, borrowed for the duration
///   of the call (copied): `dim` minima, then `dim` maxima, where `dim` is the
///   output dimension (after `embd_options_set_dimensions`). NULL with `len` 0
///   removes ranges set before.
/// - `len`: `2 * dim`; checked against the model by `embd_open`
///   (`EMBD_STATUS_INVALID_ARGUMENT` there when it does not match).
///
/// Returns `EMBD_STATUS_OK`, `EMBD_STATUS_NULL_ARGUMENT`,
/// `EMBD_STATUS_INVALID_HANDLE`, `EMBD_STATUS_INVALID_ARGUMENT` (odd `len`, or
/// a value that is not finite; `options` is left unchanged).
///
/// Thread safety: must not race with other calls using the same `options`.
///
/// # Safety
/// `ranges` must be NULL or readable for `len` floats.
#[no_mangle]
pub unsafe extern "C" fn embd_options_set_output_ranges(
    options: *mut embd_options,
    ranges: *const f32,
    len: usize,
) -> embd_status {
    with("embd_options_set_output_ranges", options, |o| {
        if len == 0 {
            o.output_ranges = None;
            return Ok(());
        }
        // SAFETY: NULL (refused by `slice`) or readable for `len` floats per
        // the contract.
        let v = unsafe { slice(ranges, len, "ranges") }?;
        o.output_ranges = Some(OutputRanges::from_rows(v)?);
        Ok(())
    })
}

/// Returns 1 when the model has ranges for `EMBD_OUTPUT_INT8` /
/// `EMBD_OUTPUT_UINT8` output (given with `embd_options_set_output_ranges`, or
/// stored in the model file and the vectors are not cut by
/// `embd_options_set_dimensions`), 0 when not or if `model` is NULL or not a
/// live model.
///
/// - `model`: borrowed for the duration of the call.
///
/// Thread safety: safe to call concurrently on the same model.
#[no_mangle]
pub extern "C" fn embd_has_output_ranges(model: *const embd_model) -> i32 {
    boundary::ffi_boundary_or("embd_has_output_ranges", 0, || {
        let m = handles::resolve(model, "model")?;
        Ok(i32::from(m.embedder.output_ranges().is_some()))
    })
}

fn output_len(m: &embd_model, p: OutputPrecision, n_texts: usize) -> FfiResult<usize> {
    check_batch(n_texts)?;
    n_texts
        .checked_mul(p.row_len(m.embedder.dim()))
        .ok_or_else(|| Fail::new(embd_status::LimitExceeded, "output size overflows size_t"))
}

/// Gives the number of elements (of the precision's buffer type) that
/// `embd_encode_quantized` needs for `n_texts` texts: `n_texts * dim` for
/// float32, int8 and uint8, `n_texts * ((dim + 7) / 8)` for binary and
/// ubinary (`dim` = `embd_dim(model)`).
///
/// - `model`: borrowed for the duration of the call.
/// - `precision`: an `EMBD_OUTPUT_*` constant.
/// - `n_texts`: at most `EMBD_MAX_BATCH`.
/// - `len_out`: receives the count (required).
///
/// Returns `EMBD_STATUS_OK`; `EMBD_STATUS_NULL_ARGUMENT`;
/// `EMBD_STATUS_INVALID_HANDLE`; `EMBD_STATUS_INVALID_ARGUMENT` (unknown
/// precision); `EMBD_STATUS_LIMIT_EXCEEDED`. On failure `*len_out` is 0.
///
/// Thread safety: safe to call concurrently on the same model.
///
/// # Safety
/// `len_out` must be NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn embd_output_len(
    model: *const embd_model,
    precision: embd_output_precision,
    n_texts: usize,
    len_out: *mut usize,
) -> embd_status {
    // SAFETY: `len_out` is NULL or writable per the contract.
    unsafe {
        model_value("embd_output_len", model, len_out, "len_out", |m| {
            output_len(m, OutputPrecisions::from_c(precision)?, n_texts)
        })
    }
}

/// Embeds a batch of length-delimited texts and writes the vectors in the
/// output precision `precision`, as sentence-transformers'
/// `quantize_embeddings` would turn this model's float vectors.
///
/// - `model`, `texts`, `n_texts`: as for `embd_encode_texts`.
/// - `precision`: an `EMBD_OUTPUT_*` constant. `EMBD_OUTPUT_INT8` and
///   `EMBD_OUTPUT_UINT8` need ranges (`embd_has_output_ranges`), else
///   `EMBD_STATUS_INVALID_ARGUMENT` before any work.
/// - `out`: caller-owned buffer of `out_len` elements of the precision's type:
///   `float` (FLOAT32), `int8_t` (INT8, BINARY) or `uint8_t` (UINT8,
///   UBINARY); row i receives text i. May be NULL when `n_texts` is 0.
/// - `out_len`: capacity of `out` in elements; at least what
///   `embd_output_len` gives.
/// - `tokens_out`, `truncated_out`: as for `embd_encode_ex` (NULL when not
///   wanted).
///
/// Returns the statuses of `embd_encode_ex`, and
/// `EMBD_STATUS_INVALID_ARGUMENT` for an unknown precision or missing ranges.
///
/// On success the first `embd_output_len` elements of `out` hold the vectors;
/// on failure the contents of `out` are unspecified.
///
/// Thread safety: safe to call concurrently on the same model.
///
/// # Safety
/// As `embd_encode_ex`; `out` must be NULL or writable for `out_len` elements
/// of the precision's type.
#[no_mangle]
pub unsafe extern "C" fn embd_encode_quantized(
    model: *const embd_model,
    texts: *const embd_text,
    n_texts: usize,
    precision: embd_output_precision,
    out: *mut c_void,
    out_len: usize,
    tokens_out: *mut usize,
    truncated_out: *mut u8,
) -> embd_status {
    ffi_boundary("embd_encode_quantized", || {
        let m = handles::resolve(model, "model")?;
        let p = OutputPrecisions::from_c(precision)?;
        if texts.is_null() && n_texts > 0 {
            return Err(Fail::null("texts"));
        }
        let needed = output_len(&m, p, n_texts)?;
        check_out_len(out.is_null(), out_len, needed, "elements", || {
            let row = p.row_len(m.embedder.dim());
            format!("{n_texts} texts x {row} {p} elements")
        })?;
        // SAFETY: `texts` is readable for `n_texts` elements per the contract;
        // n_texts <= EMBD_MAX_BATCH (checked by `output_len`).
        let strs = unsafe { texts_from_c(texts, n_texts) }?;
        let want_info = !tokens_out.is_null() || !truncated_out.is_null();
        let mut info = vec![TextInfo::default(); if want_info { n_texts } else { 0 }];
        let info_arg = want_info.then_some(info.as_mut_slice());
        if p == OutputPrecision::Float32 {
            // SAFETY: `out` is writable for `out_len` >= `needed` floats per
            // the contract (FLOAT32 buffers are `float`).
            let o = unsafe { slice_mut(out.cast::<f32>(), needed, "out") }?;
            m.embedder.embed_into_ex(&strs, o, info_arg)?;
        } else {
            // SAFETY: `out` is writable for `out_len` >= `needed` one-byte
            // elements (`int8_t` or `uint8_t`) per the contract.
            let o = unsafe { slice_mut(out.cast::<u8>(), needed, "out") }?;
            m.embedder.embed_quantized_into(&strs, p, o, info_arg)?;
        }
        // SAFETY: NULL or writable for `n_texts` elements per the contract.
        unsafe { write_info(&info, tokens_out, truncated_out) }
    })
}
