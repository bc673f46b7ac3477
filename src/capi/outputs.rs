//! The output stage: which outputs a model has (`embd_has_output`,
//! `embd_multi_vector_dim`), and the sparse (SPLADE, BGE-M3's lexical
//! weights) and multi-vector (ColBERT, BGE-M3's ColBERT vectors) outputs,
//! for a query or a document (`embd_task`). Dense vectors stay with
//! `embd_encode_with`.

use std::ffi::{c_char, c_int};

use super::boundary::{c_str, ffi_boundary, ffi_boundary_or, slice_mut, Fail, FfiResult};
use super::c_enum::{c_enum, CEnum};
use super::call::{embd_call_options, read_options};
use super::encode::{check_batch, embd_text, texts_from_c};
use super::handles::{self, embd_model};
use super::status::embd_status;
use crate::{EncodeRequest, EncodeTask, Encoded, OutputKind};

/// Whether a call encodes queries or documents: one of the `EMBD_TASK_*`
/// constants (a plain `int32_t`; an unknown value is refused with
/// `EMBD_STATUS_INVALID_ARGUMENT`). The task chooses the model's stored
/// prompt of that name (unless the call options set one), an inference-free
/// SPLADE's query weights, and ColBERT's query or document markers.
pub type embd_task = i32;

/// Neither (ColBERT then encodes documents; a router takes its default
/// route).
pub const EMBD_TASK_NONE: embd_task = 0;

/// Queries (sentence-transformers' `encode_query`).
pub const EMBD_TASK_QUERY: embd_task = 1;

/// Documents (sentence-transformers' `encode_document`).
pub const EMBD_TASK_DOCUMENT: embd_task = 2;

c_enum! {
    /// `embd_task` as the task (`None`: neither).
    pub(crate) struct Tasks: Option<EncodeTask>, "task" {
        EMBD_TASK_NONE => [None];
        EMBD_TASK_QUERY => [Some(EncodeTask::Query)];
        EMBD_TASK_DOCUMENT => [Some(EncodeTask::Document)];
    }
}

/// Whether `model` has the output `name`.
///
/// - `model`: borrowed for the duration of the call.
/// - `name`: NUL-terminated, borrowed: `"dense"` (every model), `"sparse"`
///   (SPLADE, BGE-M3) or `"multi-vector"` (ColBERT, BGE-M3).
///
/// Returns 1 or 0; -1 if `model` is NULL or not a live model, `name` is NULL
/// or not one of the three names (then `embd_last_error()` says which).
///
/// Thread safety: safe to call concurrently on the same model.
///
/// # Safety
/// `name` must be NULL or NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn embd_has_output(model: *const embd_model, name: *const c_char) -> c_int {
    ffi_boundary_or("embd_has_output", -1, || {
        let m = handles::resolve(model, "model")?;
        // SAFETY: NULL or NUL-terminated per the contract.
        let name = unsafe { c_str(name, "name") }?;
        let kind = OutputKind::from_name(name).ok_or_else(|| {
            Fail::new(
                embd_status::InvalidArgument,
                format!("output '{name}' is not one of dense, sparse, multi-vector"),
            )
        })?;
        let has = match m.embedder.as_embedder() {
            Some(e) => e.outputs().contains(&kind),
            None => kind == OutputKind::Dense,
        };
        Ok(c_int::from(has))
    })
}

/// Floats per vector of the multi-vector output (`embd_encode_multi_vector`).
///
/// - `model`: borrowed for the duration of the call.
///
/// Returns 0 when the model has no multi-vector output, or if `model` is NULL
/// or not a live model (then `embd_last_error()` says which).
///
/// Thread safety: safe to call concurrently on the same model.
#[no_mangle]
pub extern "C" fn embd_multi_vector_dim(model: *const embd_model) -> usize {
    ffi_boundary_or("embd_multi_vector_dim", 0, || {
        let m = handles::resolve(model, "model")?;
        Ok(m.embedder
            .as_embedder()
            .and_then(|e| e.multi_vector_dim())
            .unwrap_or(0))
    })
}

/// The common steps of the output encoders: the model, options, task, texts
/// and one `Embedder::encode` of `kind`.
///
/// # Safety
/// `texts` must be NULL or readable for `n_texts` elements.
unsafe fn encode_one(
    model: *const embd_model,
    options: *const embd_call_options,
    task: embd_task,
    texts: *const embd_text,
    n_texts: usize,
    kind: OutputKind,
    top_k: Option<usize>,
) -> FfiResult<Encoded> {
    let m = handles::resolve(model, "model")?;
    let call = read_options(options)?;
    let task = Tasks::from_c(task)?;
    if texts.is_null() && n_texts > 0 {
        return Err(Fail::null("texts"));
    }
    check_batch(n_texts)?;
    let e = m.embedder.as_embedder().ok_or_else(|| {
        Fail::new(
            embd_status::Unsupported,
            format!(
                "the {} output needs an encoder model; this is a static word-embedding model \
                 (dense only)",
                kind.name()
            ),
        )
    })?;
    // SAFETY: `texts` is readable for `n_texts` elements per the contract.
    let strs = unsafe { texts_from_c(texts, n_texts) }?;
    let req = EncodeRequest {
        outputs: vec![kind],
        task,
        call,
        top_k,
    };
    Ok(e.encode(&strs, &req)?)
}

fn missing(kind: OutputKind) -> Fail {
    Fail::new(
        embd_status::Internal,
        format!("the encoder returned no {} output", kind.name()),
    )
}

/// Sparse vectors of a batch of length-delimited texts, in CSR form: the
/// entries of text i are `indices[offsets[i] .. offsets[i+1]]` (vocabulary
/// ids, ascending) with their weights in `values` at the same positions.
/// Each text gets the vector it gets alone.
///
/// - `model`: borrowed for the duration of the call; must have the sparse
///   output (`embd_has_output(model, "sparse")`).
/// - `options`: borrowed; NULL means every option unset (prompt and
///   truncation apply; dimensions and normalization do not concern sparse
///   vectors).
/// - `task`: an `EMBD_TASK_*` constant (an inference-free SPLADE encodes
///   queries with its static weights, without the encoder).
/// - `texts`, `n_texts`: as for `embd_encode_texts`.
/// - `top_k`: keep only the largest `top_k` weights of each text; 0 means the
///   model's own setting (sentence-transformers' `max_active_dims`, if any;
///   else every non-zero weight).
/// - `offsets`: required, caller-owned array of `n_texts + 1` elements;
///   receives the CSR offsets (`offsets[0]` is 0, `offsets[n_texts]` the
///   total entry count). Filled on success and on
///   `EMBD_STATUS_BUFFER_TOO_SMALL`.
/// - `indices`, `values`: caller-owned buffers of `capacity` elements each;
///   may be NULL when `capacity` is 0 (to ask for the size).
/// - `capacity`: the room in `indices` and in `values`, in elements.
/// - `nnz_out`: required; receives the total entry count written; on
///   `EMBD_STATUS_BUFFER_TOO_SMALL`, the count needed (nothing is written to
///   `indices` or `values`).
///
/// The texts are encoded once per call, so a size query costs a whole
/// encode, repeated by the second call. Prefer a capacity that surely
/// suffices: `top_k` (or the model's) times `n_texts`, or at most the
/// vocabulary size times `n_texts`.
///
/// Returns `EMBD_STATUS_OK`; `EMBD_STATUS_NULL_ARGUMENT` (`model`, `texts`,
/// `offsets`, `nnz_out`, or `indices`/`values` with a sufficient
/// `capacity`); `EMBD_STATUS_INVALID_HANDLE`; `EMBD_STATUS_INVALID_UTF8`;
/// `EMBD_STATUS_INVALID_ARGUMENT` (an unknown `task`, options the model
/// refuses); `EMBD_STATUS_BUFFER_TOO_SMALL` as above;
/// `EMBD_STATUS_LIMIT_EXCEEDED`; `EMBD_STATUS_UNSUPPORTED` (a model without
/// the sparse output, the message naming its outputs; a model opened with
/// windows); `EMBD_STATUS_CANCELLED`; `EMBD_STATUS_INTERNAL`,
/// `EMBD_STATUS_INTERNAL_PANIC`. On failure other than
/// `EMBD_STATUS_BUFFER_TOO_SMALL`, `*nnz_out` is 0 and the buffers'
/// contents are unspecified.
///
/// Thread safety: safe to call concurrently on the same model and options.
///
/// # Safety
/// `texts` as for `embd_encode_texts`; `offsets` NULL or writable for
/// `n_texts + 1` elements; `indices` and `values` NULL or writable for
/// `capacity` elements; `nnz_out` NULL or writable.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn embd_encode_sparse(
    model: *const embd_model,
    options: *const embd_call_options,
    task: embd_task,
    texts: *const embd_text,
    n_texts: usize,
    top_k: usize,
    offsets: *mut usize,
    indices: *mut u32,
    values: *mut f32,
    capacity: usize,
    nnz_out: *mut usize,
) -> embd_status {
    ffi_boundary("embd_encode_sparse", || {
        if nnz_out.is_null() {
            return Err(Fail::null("nnz_out"));
        }
        // SAFETY: non-NULL and writable per the contract.
        unsafe { nnz_out.write(0) };
        if offsets.is_null() {
            return Err(Fail::null("offsets"));
        }
        let kind = OutputKind::Sparse;
        // SAFETY: `texts` is NULL or readable for `n_texts` elements per the
        // contract.
        let enc = unsafe {
            encode_one(
                model,
                options,
                task,
                texts,
                n_texts,
                kind,
                (top_k != 0).then_some(top_k),
            )
        }?;
        let sparse = enc.sparse().ok_or_else(|| missing(kind))?;
        // SAFETY: non-NULL and writable for `n_texts + 1` elements per the
        // contract.
        let offs = unsafe { slice_mut(offsets, n_texts + 1, "offsets") }?;
        let mut needed = 0usize;
        offs[0] = 0;
        for (o, v) in offs[1..].iter_mut().zip(sparse) {
            needed += v.len();
            *o = needed;
        }
        // SAFETY: as above.
        unsafe { nnz_out.write(needed) };
        if capacity < needed {
            return Err(Fail::new(
                embd_status::BufferTooSmall,
                format!(
                    "indices and values have room for {capacity} entries, need {needed} \
                     ({n_texts} texts)"
                ),
            ));
        }
        if needed > 0 && indices.is_null() {
            // SAFETY: non-NULL and writable per the contract.
            unsafe { nnz_out.write(0) };
            return Err(Fail::null("indices"));
        }
        if needed > 0 && values.is_null() {
            // SAFETY: non-NULL and writable per the contract.
            unsafe { nnz_out.write(0) };
            return Err(Fail::null("values"));
        }
        // SAFETY: writable for `capacity` >= `needed` elements per the
        // contract.
        let idx = unsafe { slice_mut(indices, needed, "indices") }?;
        // SAFETY: as above.
        let val = unsafe { slice_mut(values, needed, "values") }?;
        let mut at = 0;
        for v in sparse {
            idx[at..at + v.len()].copy_from_slice(&v.indices);
            val[at..at + v.len()].copy_from_slice(&v.values);
            at += v.len();
        }
        Ok(())
    })
}

/// Multi-vector output (ColBERT) of a batch of length-delimited texts: text
/// 0's vectors, then text 1's, and so on, each vector
/// `embd_multi_vector_dim(model)` floats. Each text gets the vectors it gets
/// alone. With `EMBD_TASK_QUERY`, ColBERT's query marker and expansion
/// (a query padded with mask tokens to its fixed length); otherwise the
/// document marker and skip-list.
///
/// - `model`: borrowed for the duration of the call; must have the
///   multi-vector output (`embd_has_output(model, "multi-vector")`).
/// - `options`: borrowed; NULL means every option unset.
/// - `task`: an `EMBD_TASK_*` constant.
/// - `texts`, `n_texts`: as for `embd_encode_texts`.
/// - `out`: caller-owned buffer of `out_len` floats; may be NULL when
///   `out_len` is 0 (to ask for the size).
/// - `n_floats_out`: required; receives the number of floats written; on
///   `EMBD_STATUS_BUFFER_TOO_SMALL`, the number needed (nothing is written
///   to `out`).
/// - `vectors_out`: NULL when not wanted, else a caller-owned array of at
///   least `n_texts` elements; element i receives the number of vectors of
///   text i. Filled on success and on `EMBD_STATUS_BUFFER_TOO_SMALL`.
///
/// The texts are encoded once per call, so a size query costs a whole
/// encode, repeated by the second call.
///
/// Returns the statuses of `embd_encode_sparse` (`out`, `n_floats_out` for
/// NULL arguments), `EMBD_STATUS_UNSUPPORTED` for a model without the
/// multi-vector output. On failure other than `EMBD_STATUS_BUFFER_TOO_SMALL`,
/// `*n_floats_out` is 0 and the contents of `out` are unspecified.
///
/// Thread safety: safe to call concurrently on the same model and options.
///
/// # Safety
/// `texts` as for `embd_encode_texts`; `out` NULL or writable for `out_len`
/// floats; `n_floats_out` NULL or writable; `vectors_out` NULL or writable
/// for `n_texts` elements.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn embd_encode_multi_vector(
    model: *const embd_model,
    options: *const embd_call_options,
    task: embd_task,
    texts: *const embd_text,
    n_texts: usize,
    out: *mut f32,
    out_len: usize,
    n_floats_out: *mut usize,
    vectors_out: *mut usize,
) -> embd_status {
    ffi_boundary("embd_encode_multi_vector", || {
        if n_floats_out.is_null() {
            return Err(Fail::null("n_floats_out"));
        }
        // SAFETY: non-NULL and writable per the contract.
        unsafe { n_floats_out.write(0) };
        let kind = OutputKind::MultiVector;
        // SAFETY: `texts` is NULL or readable for `n_texts` elements per the
        // contract.
        let enc = unsafe { encode_one(model, options, task, texts, n_texts, kind, None) }?;
        let multi = enc.multi_vector().ok_or_else(|| missing(kind))?;
        if !vectors_out.is_null() {
            // SAFETY: non-NULL and writable for `n_texts` elements per the
            // contract.
            let v = unsafe { slice_mut(vectors_out, n_texts, "vectors_out") }?;
            for (d, mv) in v.iter_mut().zip(multi) {
                *d = mv.rows();
            }
        }
        let needed: usize = multi.iter().map(|mv| mv.data.len()).sum();
        // SAFETY: as above.
        unsafe { n_floats_out.write(needed) };
        if out_len < needed {
            return Err(Fail::new(
                embd_status::BufferTooSmall,
                format!(
                    "out has room for {out_len} floats, needs {needed} ({} vectors)",
                    multi.iter().map(|mv| mv.rows()).sum::<usize>()
                ),
            ));
        }
        if out.is_null() && needed > 0 {
            // SAFETY: non-NULL and writable per the contract.
            unsafe { n_floats_out.write(0) };
            return Err(Fail::null("out"));
        }
        // SAFETY: writable for `out_len` >= `needed` floats per the contract.
        let out = unsafe { slice_mut(out, needed, "out") }?;
        let mut at = 0;
        for mv in multi {
            out[at..at + mv.data.len()].copy_from_slice(&mv.data);
            at += mv.data.len();
        }
        Ok(())
    })
}
