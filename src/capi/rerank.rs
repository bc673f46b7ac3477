//! `embd_reranker`: cross-encoders (rerankers) over the safe `Reranker`:
//! open, free, facts, scoring pairs and ranking documents.

use std::ffi::{c_char, c_int};

use super::boundary::{self, c_str, ffi_boundary, ffi_boundary_or, slice_mut, text_slice};
use super::boundary::{write_opt, Fail, FfiResult};
use super::encode::{check_batch, check_out_len, embd_text, texts_from_c, write_info};
use super::handles::{self, embd_options, Handle};
use super::status::embd_status;
use crate::reranker::Reranker;
use crate::Options;

/// An open cross-encoder (reranker). Immutable after `embd_rerank_open`;
/// every function taking a `const embd_reranker *` may be called on the same
/// handle from many threads at once. Created by `embd_rerank_open`, destroyed
/// by `embd_rerank_free`.
pub struct embd_reranker {
    pub(crate) reranker: Reranker,
}

impl Handle for embd_reranker {
    const NAME: &'static str = "embd_reranker";
}

/// One document of a ranking (`embd_rerank_rank`).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct embd_ranked {
    /// The document's index in the call's `docs`.
    pub index: usize,
    /// Its score (the model's activation of the logit, e.g. sigmoid).
    pub score: f32,
    /// Its logit.
    pub logit: f32,
}

/// Opens a cross-encoder file: a model converted from a HF
/// `*ForSequenceClassification` folder (metadata `task` = `classification`),
/// or such a folder itself.
///
/// - `path`: NUL-terminated UTF-8 file path, borrowed for the call; or a hub
///   id `org/name[@revision]` in the local HuggingFace cache, as `embd_open`.
/// - `options`: borrowed for the call; NULL means defaults. Applies:
///   threads, max_seq_length (sentence-transformers' `CrossEncoder`
///   `max_length`), precision, verify_checksums, prepack_weights, progress.
///   The embedding options (normalize, dimensions, output ranges, prompts,
///   window overlap) give `EMBD_STATUS_INVALID_ARGUMENT`.
/// - `reranker_out`: receives the reranker, owned by the caller, free with
///   `embd_rerank_free`.
///
/// Returns `EMBD_STATUS_OK`; `EMBD_STATUS_NULL_ARGUMENT` (`path` or
/// `reranker_out`); `EMBD_STATUS_INVALID_UTF8`; `EMBD_STATUS_INVALID_HANDLE`
/// (`options`); `EMBD_STATUS_INVALID_ARGUMENT` (an embedding option);
/// `EMBD_STATUS_MODEL` (an embedding model, not a cross-encoder: the message
/// says to open it with `embd_open`; or bad head metadata or tensors); the
/// other statuses of `embd_open`.
///
/// On any failure `*reranker_out` is set to NULL (when `reranker_out` is not
/// NULL).
///
/// Thread safety: safe from any thread.
///
/// # Safety
/// `path` must be NULL or NUL-terminated; `reranker_out` must be NULL or valid
/// for one pointer write.
#[no_mangle]
pub unsafe extern "C" fn embd_rerank_open(
    path: *const c_char,
    options: *const embd_options,
    reranker_out: *mut *mut embd_reranker,
) -> embd_status {
    // SAFETY: `reranker_out` is NULL or writable per the contract.
    unsafe { write_opt(reranker_out, std::ptr::null_mut()) };
    ffi_boundary("embd_rerank_open", || {
        boundary::non_null(reranker_out, "reranker_out")?;
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
        let reranker = Reranker::open(&path, &opts)?;
        let p = handles::register(embd_reranker { reranker });
        // SAFETY: non-NULL (checked) and writable per the contract.
        unsafe { reranker_out.write(p) };
        Ok(())
    })
}

/// Closes a reranker and releases its memory and file mapping.
///
/// - `reranker`: from `embd_rerank_open`; NULL is a no-op. A pointer that is
///   not a live reranker (double free, an `embd_model`, a foreign pointer) is
///   detected, ignored and recorded in `embd_last_error()`. Calls still running
///   in other threads finish safely.
///
/// Thread safety: safe from any thread; using `reranker` afterwards gives
/// `EMBD_STATUS_INVALID_HANDLE`.
#[no_mangle]
pub extern "C" fn embd_rerank_free(reranker: *mut embd_reranker) {
    ffi_boundary_or("embd_rerank_free", (), || {
        handles::release(reranker, "reranker")
    })
}

/// Returns the number of labels (logits per pair), e.g. 1; 0 if `reranker` is
/// NULL or not a live reranker.
///
/// Thread safety: safe to call concurrently.
#[no_mangle]
pub extern "C" fn embd_rerank_num_labels(reranker: *const embd_reranker) -> usize {
    ffi_boundary_or("embd_rerank_num_labels", 0, || {
        Ok(handles::resolve(reranker, "reranker")?
            .reranker
            .num_labels())
    })
}

/// Returns the effective maximum length of a pair in tokens, special tokens
/// included (after the `embd_options_set_max_seq_length` override); 0 if
/// `reranker` is NULL or not a live reranker.
///
/// Thread safety: safe to call concurrently.
#[no_mangle]
pub extern "C" fn embd_rerank_max_seq_length(reranker: *const embd_reranker) -> usize {
    ffi_boundary_or("embd_rerank_max_seq_length", 0, || {
        Ok(handles::resolve(reranker, "reranker")?
            .reranker
            .max_seq_length())
    })
}

/// A C flag: 0 or 1.
fn flag(v: c_int, param: &str) -> FfiResult<bool> {
    match v {
        0 => Ok(false),
        1 => Ok(true),
        _ => Err(Fail::new(
            embd_status::InvalidArgument,
            format!("{param} is {v}; expected 0 or 1"),
        )),
    }
}

/// Scores `n_pairs` (query, passage) pairs, as sentence-transformers'
/// `CrossEncoder.predict`: each pair's logits and scores (the model's
/// activation of the logits, e.g. sigmoid), `n_pairs x num_labels` floats
/// row-major. Each pair's numbers are those it gets alone.
///
/// - `reranker`: borrowed for the call.
/// - `queries`, `passages`: arrays of `n_pairs` length-delimited UTF-8 texts
///   (`embd_text`), borrowed; NULL only when `n_pairs` is 0. A NUL byte inside
///   a text is ordinary text (cleaned away as a control character).
/// - `n_pairs`: 0 does nothing; at most `EMBD_MAX_BATCH`.
/// - `scores_out`, `logits_out`: caller-owned arrays of `out_len` floats, each
///   NULL when not wanted (not both).
/// - `out_len`: capacity of each non-NULL array; at least
///   `n_pairs * embd_rerank_num_labels(reranker)`.
/// - `tokens_out`: NULL, or at least `n_pairs` elements: pair i's token count
///   (special tokens included, after truncation).
/// - `truncated_out`: NULL, or at least `n_pairs` bytes: 1 when pair i was cut
///   to `embd_rerank_max_seq_length` tokens, else 0.
///
/// Returns `EMBD_STATUS_OK`; `EMBD_STATUS_NULL_ARGUMENT` (`reranker`,
/// `queries`, `passages`, a text's `ptr` with a non-zero `len`);
/// `EMBD_STATUS_INVALID_ARGUMENT` (both outputs NULL);
/// `EMBD_STATUS_INVALID_HANDLE`; `EMBD_STATUS_INVALID_UTF8` (names the text);
/// `EMBD_STATUS_BUFFER_TOO_SMALL`; `EMBD_STATUS_LIMIT_EXCEEDED` (more than
/// `EMBD_MAX_BATCH` pairs, a text longer than `EMBD_MAX_TEXT_BYTES`);
/// `EMBD_STATUS_CANCELLED` (the progress callback stopped the call);
/// `EMBD_STATUS_INTERNAL`, `EMBD_STATUS_INTERNAL_PANIC`.
///
/// Thread safety: safe to call concurrently on the same reranker.
///
/// # Safety
/// `queries` and `passages` must be NULL or readable for `n_pairs` elements,
/// each readable for its `len` bytes; the output arrays NULL or writable for
/// their sizes above.
#[no_mangle]
pub unsafe extern "C" fn embd_rerank_score(
    reranker: *const embd_reranker,
    queries: *const embd_text,
    passages: *const embd_text,
    n_pairs: usize,
    scores_out: *mut f32,
    logits_out: *mut f32,
    out_len: usize,
    tokens_out: *mut usize,
    truncated_out: *mut u8,
) -> embd_status {
    // SAFETY: forwarded contract; a NULL prompt is allowed.
    unsafe {
        embd_rerank_score_prompted(
            reranker,
            std::ptr::null(),
            queries,
            passages,
            n_pairs,
            scores_out,
            logits_out,
            out_len,
            tokens_out,
            truncated_out,
        )
    }
}

/// `embd_rerank_score` under an instruction: an LLM reranker's CrossEncoder
/// prompt (Qwen3-Reranker's `<Instruct>`).
///
/// - `prompt`: NUL-terminated UTF-8, borrowed for the call; NULL scores
///   under the instruction set at open (`embd_options_set_prompt`), else the
///   model's default. A cross-encoder without a prompt template refuses a
///   non-NULL prompt with `EMBD_STATUS_INVALID_ARGUMENT`.
/// - the other parameters and the statuses as `embd_rerank_score`.
///
/// Thread safety: safe to call concurrently on the same reranker.
///
/// # Safety
/// `prompt` NULL or NUL-terminated; the rest as `embd_rerank_score`.
#[no_mangle]
pub unsafe extern "C" fn embd_rerank_score_prompted(
    reranker: *const embd_reranker,
    prompt: *const c_char,
    queries: *const embd_text,
    passages: *const embd_text,
    n_pairs: usize,
    scores_out: *mut f32,
    logits_out: *mut f32,
    out_len: usize,
    tokens_out: *mut usize,
    truncated_out: *mut u8,
) -> embd_status {
    ffi_boundary("embd_rerank_score", || {
        let r = handles::resolve(reranker, "reranker")?;
        // SAFETY: NULL or NUL-terminated per the contract.
        let prompt = unsafe { opt_prompt(prompt) }?;
        check_batch(n_pairs)?;
        if queries.is_null() && n_pairs > 0 {
            return Err(Fail::null("queries"));
        }
        if passages.is_null() && n_pairs > 0 {
            return Err(Fail::null("passages"));
        }
        if scores_out.is_null() && logits_out.is_null() && n_pairs > 0 {
            return Err(Fail::new(
                embd_status::InvalidArgument,
                "scores_out and logits_out are both NULL; ask for at least one",
            ));
        }
        let labels = r.reranker.num_labels();
        let needed = n_pairs * labels;
        for (p, name) in [(scores_out, "scores_out"), (logits_out, "logits_out")] {
            if !p.is_null() {
                check_out_len(false, out_len, needed, "floats", || {
                    format!("{n_pairs} pairs x {labels} labels, {name}")
                })?;
            }
        }
        // SAFETY: readable for `n_pairs` elements per the contract.
        let qs = unsafe { named_texts(queries, n_pairs, "queries") }?;
        // SAFETY: as above.
        let ps = unsafe { named_texts(passages, n_pairs, "passages") }?;
        let pairs: Vec<(&str, &str)> = qs.into_iter().zip(ps).collect();
        let opt_out = |p: *mut f32, name: &str| -> FfiResult<Option<&mut [f32]>> {
            if p.is_null() {
                Ok(None)
            } else {
                // SAFETY: writable for `out_len` >= `needed` floats per the
                // contract, not aliased during the call.
                Ok(Some(unsafe { slice_mut(p, needed, name) }?))
            }
        };
        let scores = opt_out(scores_out, "scores_out")?;
        let logits = opt_out(logits_out, "logits_out")?;
        let want_info = !tokens_out.is_null() || !truncated_out.is_null();
        let mut info = vec![crate::TextInfo::default(); if want_info { n_pairs } else { 0 }];
        r.reranker.predict_prompted(
            &pairs,
            prompt,
            scores,
            logits,
            want_info.then_some(info.as_mut_slice()),
        )?;
        // SAFETY: NULL or writable for `n_pairs` elements per the contract.
        unsafe { write_info(&info, tokens_out, truncated_out) }
    })
}

/// A call's prompt: NULL for none.
///
/// # Safety
/// `p` NULL or NUL-terminated.
unsafe fn opt_prompt<'a>(p: *const c_char) -> FfiResult<Option<&'a str>> {
    if p.is_null() {
        return Ok(None);
    }
    // SAFETY: non-NULL and NUL-terminated per the contract.
    unsafe { c_str(p, "prompt") }.map(Some)
}

/// The texts of an `embd_text` array, with messages naming `param[i]`.
///
/// # Safety
/// As `texts_from_c`.
unsafe fn named_texts<'a>(
    texts: *const embd_text,
    n: usize,
    param: &str,
) -> FfiResult<Vec<&'a str>> {
    // SAFETY: forwarded contract.
    unsafe { texts_from_c(texts, n) }.map_err(|f| Fail {
        msg: f.msg.replacen("texts", param, 1),
        ..f
    })
}

/// Ranks `n_docs` documents for one query, as sentence-transformers'
/// `CrossEncoder.rank`: the best `top_k` documents, best first (ties by
/// index), each with its index, score and logit.
///
/// - `reranker`: borrowed for the call; a model with one label.
/// - `query`: length-delimited UTF-8; must not be empty or only whitespace.
/// - `docs`: `n_docs` length-delimited texts, borrowed.
/// - `n_docs`: 1..=`EMBD_MAX_BATCH`.
/// - `top_k`: 1..=`n_docs` (`n_docs` for all of them).
/// - `raw`: 0 orders by score, 1 by logit (the identity activation).
/// - `out`: caller-owned array of `out_len` >= `top_k` elements; the first
///   `top_k` receive the ranking.
/// - `n_out`: NULL, or receives the number of elements written (`top_k`; 0 on
///   failure).
///
/// Returns `EMBD_STATUS_OK`; `EMBD_STATUS_NULL_ARGUMENT` (`reranker`, `docs`,
/// `out`, a text's `ptr` with a non-zero `len`); `EMBD_STATUS_INVALID_HANDLE`;
/// `EMBD_STATUS_INVALID_ARGUMENT` (empty query, no documents, `top_k` of 0 or
/// more than `n_docs`, `raw` not 0 or 1, a model with several labels);
/// `EMBD_STATUS_INVALID_UTF8`; `EMBD_STATUS_BUFFER_TOO_SMALL` (`out_len` <
/// `top_k`); `EMBD_STATUS_LIMIT_EXCEEDED`; `EMBD_STATUS_CANCELLED`;
/// `EMBD_STATUS_INTERNAL`, `EMBD_STATUS_INTERNAL_PANIC`.
///
/// Thread safety: safe to call concurrently on the same reranker.
///
/// # Safety
/// `query.ptr` must be NULL or readable for `query.len` bytes; `docs` NULL or
/// readable for `n_docs` elements, each readable for its `len` bytes; `out`
/// NULL or writable for `out_len` elements; `n_out` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn embd_rerank_rank(
    reranker: *const embd_reranker,
    query: embd_text,
    docs: *const embd_text,
    n_docs: usize,
    top_k: usize,
    raw: c_int,
    out: *mut embd_ranked,
    out_len: usize,
    n_out: *mut usize,
) -> embd_status {
    // SAFETY: forwarded contract; a NULL prompt is allowed.
    unsafe {
        embd_rerank_rank_prompted(
            reranker,
            std::ptr::null(),
            query,
            docs,
            n_docs,
            top_k,
            raw,
            out,
            out_len,
            n_out,
        )
    }
}

/// `embd_rerank_rank` under an instruction (see
/// `embd_rerank_score_prompted`).
///
/// - `prompt`: NUL-terminated UTF-8 or NULL, as `embd_rerank_score_prompted`.
/// - the other parameters and the statuses as `embd_rerank_rank`.
///
/// Thread safety: safe to call concurrently on the same reranker.
///
/// # Safety
/// `prompt` NULL or NUL-terminated; the rest as `embd_rerank_rank`.
#[no_mangle]
pub unsafe extern "C" fn embd_rerank_rank_prompted(
    reranker: *const embd_reranker,
    prompt: *const c_char,
    query: embd_text,
    docs: *const embd_text,
    n_docs: usize,
    top_k: usize,
    raw: c_int,
    out: *mut embd_ranked,
    out_len: usize,
    n_out: *mut usize,
) -> embd_status {
    // SAFETY: `n_out` is NULL or writable per the contract.
    unsafe { write_opt(n_out, 0) };
    ffi_boundary("embd_rerank_rank", || {
        let r = handles::resolve(reranker, "reranker")?;
        // SAFETY: NULL or NUL-terminated per the contract.
        let prompt = unsafe { opt_prompt(prompt) }?;
        let raw = flag(raw, "raw")?;
        check_batch(n_docs)?;
        if docs.is_null() && n_docs > 0 {
            return Err(Fail::null("docs"));
        }
        if top_k > 0 && top_k <= n_docs {
            check_out_len(out.is_null(), out_len, top_k, "elements", || {
                format!("top_k {top_k}")
            })?;
        }
        // SAFETY: `query.ptr` is NULL or readable for `query.len` bytes.
        let q = unsafe { text_slice(query.ptr, query.len, "query") }?;
        // SAFETY: readable for `n_docs` elements per the contract.
        let ds = unsafe { named_texts(docs, n_docs, "docs") }?;
        let ranked = r
            .reranker
            .rank_prompted(q, &ds, Some(top_k), raw, prompt, None)?;
        // SAFETY: writable for `out_len` >= `top_k` elements per the contract.
        let dst = unsafe { slice_mut(out, ranked.len(), "out") }?;
        for (d, x) in dst.iter_mut().zip(&ranked) {
            *d = embd_ranked {
                index: x.index,
                score: x.score,
                logit: x.logit,
            };
        }
        // SAFETY: NULL or writable per the contract.
        unsafe { write_opt(n_out, ranked.len()) };
        Ok(())
    })
}

/// Tokenizes one (query, passage) pair as the reranker reads it: ids with the
/// special tokens (`[CLS] q [SEP] p [SEP]` for BERT), each id's token type (0
/// for the query's part, 1 for the passage's), cut to
/// `embd_rerank_max_seq_length` tokens by HF's `longest_first` truncation.
///
/// - `reranker`: borrowed for the call.
/// - `query`, `passage`: length-delimited UTF-8 texts.
/// - `ids_out`, `types_out`: caller-owned arrays of `capacity` elements (either
///   may be NULL when not wanted).
/// - `n_out`: receives the number of ids (also on `EMBD_STATUS_BUFFER_TOO_SMALL`,
///   so a caller can size the arrays); must not be NULL.
///
/// Returns `EMBD_STATUS_OK`; `EMBD_STATUS_NULL_ARGUMENT`;
/// `EMBD_STATUS_INVALID_HANDLE`; `EMBD_STATUS_INVALID_UTF8`;
/// `EMBD_STATUS_LIMIT_EXCEEDED` (a text beyond `EMBD_MAX_TEXT_BYTES`);
/// `EMBD_STATUS_BUFFER_TOO_SMALL` (`capacity` < the ids; `*n_out` holds the
/// count); `EMBD_STATUS_INTERNAL_PANIC`.
///
/// Thread safety: safe to call concurrently.
///
/// # Safety
/// The texts' `ptr` NULL or readable for `len` bytes; `ids_out` and
/// `types_out` NULL or writable for `capacity` elements; `n_out` NULL or
/// writable.
#[no_mangle]
pub unsafe extern "C" fn embd_rerank_tokenize(
    reranker: *const embd_reranker,
    query: embd_text,
    passage: embd_text,
    ids_out: *mut u32,
    types_out: *mut u32,
    capacity: usize,
    n_out: *mut usize,
) -> embd_status {
    // SAFETY: `n_out` is NULL or writable per the contract.
    unsafe { write_opt(n_out, 0) };
    ffi_boundary("embd_rerank_tokenize", || {
        let r = handles::resolve(reranker, "reranker")?;
        boundary::non_null(n_out, "n_out")?;
        // SAFETY: readable for `len` bytes per the contract.
        let q = unsafe { text_slice(query.ptr, query.len, "query") }?;
        // SAFETY: as above.
        let p = unsafe { text_slice(passage.ptr, passage.len, "passage") }?;
        let enc = r.reranker.tokenize_pair(q, p);
        let n = enc.ids.len();
        // SAFETY: non-NULL (checked) and writable per the contract.
        unsafe { n_out.write(n) };
        if capacity < n && (!ids_out.is_null() || !types_out.is_null()) {
            return Err(Fail::new(
                embd_status::BufferTooSmall,
                format!("capacity is {capacity}, the pair has {n} ids"),
            ));
        }
        for (p, src, name) in [
            (ids_out, &enc.ids, "ids_out"),
            (types_out, &enc.type_ids, "types_out"),
        ] {
            if !p.is_null() {
                // SAFETY: writable for `capacity` >= `n` elements per the contract.
                unsafe { slice_mut(p, n, name) }?.copy_from_slice(src);
            }
        }
        Ok(())
    })
}
