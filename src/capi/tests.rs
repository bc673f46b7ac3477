//! Calls the exports directly from Rust: NULL in every pointer slot, stale and
//! foreign handles, bad UTF-8, free(NULL). (Paths needing a real model are in
//! the C tests.)

use std::ffi::{c_char, CStr};
use std::ptr::{null, null_mut};

use super::*;

fn last() -> String {
    last_error::get()
}

#[test]
fn open_null_arguments_name_the_parameter() {
    let mut m: *mut embd_model = std::ptr::dangling_mut();
    // SAFETY: NULL path is allowed by the contract; `m` is writable.
    let st = unsafe { embd_open(null(), null(), &mut m) };
    assert_eq!(st, embd_status::NullArgument);
    assert!(m.is_null(), "out-handle set to NULL on failure");
    assert!(last().contains("path is NULL"), "{}", last());
    // SAFETY: literal path; NULL model_out is allowed by the contract.
    let st = unsafe { embd_open(c"x".as_ptr(), null(), null_mut()) };
    assert_eq!(st, embd_status::NullArgument);
    assert!(last().contains("model_out is NULL"), "{}", last());
}

#[test]
fn open_missing_file_is_not_found() {
    let mut m = null_mut();
    // SAFETY: literal path, writable out.
    let st = unsafe { embd_open(c"/nonexistent/dir/m.weights".as_ptr(), null(), &mut m) };
    assert_eq!(st, embd_status::NotFound, "{}", last());
    assert!(m.is_null());
    assert!(last().starts_with("embd_open: "), "{}", last());
}

#[test]
fn open_invalid_utf8_path() {
    let mut m = null_mut();
    let bad = b"\xff\xfe.weights\0";
    // SAFETY: NUL-terminated bytes, writable out.
    let st = unsafe { embd_open(bad.as_ptr().cast::<c_char>(), null(), &mut m) };
    assert_eq!(st, embd_status::InvalidUtf8);
}

#[test]
fn options_lifecycle_and_stale_handles() {
    let o = embd_options_new();
    assert!(!o.is_null());
    assert_eq!(embd_options_set_threads(o, 2), embd_status::Ok);
    assert_eq!(embd_options_set_max_seq_length(o, 128), embd_status::Ok);
    assert_eq!(embd_options_set_normalize(o, 0), embd_status::Ok);
    assert_eq!(embd_options_set_normalize(o, -1), embd_status::Ok);
    assert_eq!(
        embd_options_set_normalize(o, 7),
        embd_status::InvalidArgument
    );
    assert_eq!(
        embd_options_set_verify_checksums(o, 2),
        embd_status::InvalidArgument
    );
    assert_eq!(embd_options_set_verify_checksums(o, 0), embd_status::Ok);
    assert_eq!(
        embd_options_set_prepack_weights(o, -1),
        embd_status::InvalidArgument
    );
    assert!(last().contains("prepack"), "{}", last());
    assert_eq!(embd_options_set_prepack_weights(o, 0), embd_status::Ok);
    embd_options_free(o);
    assert_eq!(embd_options_set_threads(o, 2), embd_status::InvalidHandle);
    assert!(last().contains("not a live embd_options"), "{}", last());
    embd_options_free(o); // double free: detected, no crash
    embd_options_free(null_mut());
    assert_eq!(
        embd_options_set_threads(null_mut(), 1),
        embd_status::NullArgument
    );
}

#[test]
fn foreign_pointers_are_invalid_handles() {
    let x = 5u64;
    let fake = &x as *const u64 as *const embd_model;
    assert_eq!(embd_dim(fake), 0);
    assert!(last().contains("not a live embd_model"), "{}", last());
    let o = embd_options_new();
    assert_eq!(embd_dim(o as *const embd_model), 0);
    assert!(
        last().contains("is an embd_options, not an embd_model"),
        "{}",
        last()
    );
    embd_free(o as *mut embd_model); // wrong type: ignored
    assert_eq!(embd_options_set_threads(o, 1), embd_status::Ok);
    embd_options_free(o);
}

#[test]
fn getters_on_null() {
    assert_eq!(embd_dim(null()), 0);
    assert_eq!(embd_max_seq_length(null()), 0);
    assert!(embd_model_name(null()).is_null());
    assert!(embd_pooling(null()).is_null());
    assert_eq!(embd_num_layers(null()), 0);
    assert_eq!(embd_vocab_size(null()), 0);
    assert_eq!(embd_normalizes(null()), 0);
    embd_free(null_mut());
}

#[test]
fn encode_null_model() {
    let mut out = [0f32; 4];
    // SAFETY: valid pointers.
    let st = unsafe { embd_encode(null(), null(), 0, out.as_mut_ptr(), 4) };
    assert_eq!(st, embd_status::NullArgument);
    assert!(last().contains("model is NULL"));
    let mut n = 99usize;
    // SAFETY: valid pointers.
    let st = unsafe { embd_tokenize(null(), null(), 0, null_mut(), 0, &mut n) };
    assert_eq!(st, embd_status::NullArgument);
    assert_eq!(n, 0);
}

#[test]
fn similarity_paths() {
    let a = [1.0f32, 0.0];
    let b = [1.0f32, 1.0];
    let mut s = 0.0f32;
    // SAFETY: valid arrays of 2.
    let r1 = unsafe { embd_similarity(a.as_ptr(), b.as_ptr(), 2, &mut s) };
    assert_eq!(r1, embd_status::Ok);
    assert!((s - std::f32::consts::FRAC_1_SQRT_2).abs() < 1e-6);
    // SAFETY: as above.
    let r2 = unsafe { embd_similarity(a.as_ptr(), b.as_ptr(), 0, &mut s) };
    assert_eq!(r2, embd_status::InvalidArgument);
    // SAFETY: NULL is allowed by the contract.
    let r3 = unsafe { embd_similarity(null(), b.as_ptr(), 2, &mut s) };
    assert_eq!(r3, embd_status::NullArgument);
    // SAFETY: NULL out is allowed by the contract.
    let r4 = unsafe { embd_similarity(a.as_ptr(), b.as_ptr(), 2, null_mut()) };
    assert_eq!(r4, embd_status::NullArgument);
    // SAFETY: `len` is rejected before any read.
    let r5 = unsafe { embd_similarity(a.as_ptr(), b.as_ptr(), usize::MAX, &mut s) };
    assert_eq!(r5, embd_status::InvalidArgument);
}

#[test]
fn last_error_never_null_and_version() {
    assert!(!embd_last_error().is_null());
    // SAFETY: static NUL-terminated string.
    let v = unsafe { CStr::from_ptr(version::embd_version()) };
    assert_eq!(v.to_str().unwrap(), env!("CARGO_PKG_VERSION"));
    assert_eq!(
        version::embd_version_number(),
        version::VERSION_MAJOR * 1_000_000 + version::VERSION_MINOR * 1000 + version::VERSION_PATCH
    );
}

#[test]
fn limits_match_the_safe_api() {
    assert_eq!(EMBD_MAX_BATCH, crate::MAX_BATCH);
    assert_eq!(EMBD_MAX_TEXT_BYTES, crate::MAX_TEXT_BYTES);
}

#[test]
fn text_slice_rules() {
    // SAFETY: (NULL, 0) is the empty text.
    let r0 = unsafe { boundary::text_slice(null(), 0, "t") };
    assert_eq!(r0.unwrap(), "");
    // SAFETY: NULL with a length is rejected before reading.
    let r6 = unsafe { boundary::text_slice(null(), 3, "t") };
    assert_eq!(r6.unwrap_err().status, embd_status::NullArgument);
    let s = b"a\0b";
    // SAFETY: 3 readable bytes.
    let r7 = unsafe { boundary::text_slice(s.as_ptr().cast(), 3, "t") };
    assert_eq!(r7.unwrap(), "a\0b");
    let bad = b"a\xc3";
    // SAFETY: 2 readable bytes.
    let e = unsafe { boundary::text_slice(bad.as_ptr().cast(), 2, "texts[3]") }.unwrap_err();
    assert_eq!(e.status, embd_status::InvalidUtf8);
    assert!(
        e.msg.contains("texts[3]") && e.msg.contains("offset 1"),
        "{}",
        e.msg
    );
    // SAFETY: the length is rejected before reading.
    let e = unsafe { boundary::text_slice(s.as_ptr().cast(), usize::MAX, "t") }.unwrap_err();
    assert_eq!(e.status, embd_status::LimitExceeded);
}

#[test]
fn handles_are_unregistered_on_free() {
    let before = handles::live_count();
    let o = embd_options_new();
    embd_options_free(o);
    // Other tests run concurrently, so only check ours is gone.
    assert!(handles::lookup(o as usize).is_none());
    let _ = before;
}

/// The converted model, if present (tests below skip without it).
fn model_path() -> Option<std::path::PathBuf> {
    let p =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("models/all-MiniLM-L6-v2.weights");
    if p.exists() {
        Some(p)
    } else {
        eprintln!("skipping: {} not found", p.display());
        None
    }
}

#[test]
fn encode_matches_the_safe_api() {
    let Some(path) = model_path() else { return };
    let cpath = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
    let mut m = null_mut();
    // SAFETY: NUL-terminated path, writable out-handle.
    let st = unsafe { embd_open(cpath.as_ptr(), null(), &mut m) };
    assert_eq!(st, embd_status::Ok, "{}", last());
    let dim = embd_dim(m);
    let texts = [c"A classic mbox mailbox.".as_ptr(), c"hello".as_ptr()];
    let mut out = vec![0f32; 2 * dim];
    // SAFETY: 2 valid texts, `out` has 2*dim floats.
    let st = unsafe { embd_encode(m, texts.as_ptr(), 2, out.as_mut_ptr(), out.len()) };
    assert_eq!(st, embd_status::Ok, "{}", last());
    let e = crate::Embedder::open(&path, &crate::Options::new()).unwrap();
    let want = e.embed(&["A classic mbox mailbox.", "hello"]).unwrap();
    assert_eq!(out, want);
    embd_free(m);
    assert!(handles::lookup(m as usize).is_none());
}

#[test]
fn compat_reads_legacy_cpp_embedder_files() {
    use crate::compat::{embedder_create, embedder_destroy, embedder_embed, embedder_get_error};
    let Some(path) = model_path() else { return };
    let file = crate::ModelFile::open(&path, crate::ReadOptions::default()).unwrap();
    let dir = std::env::temp_dir().join(format!("embd-capi-legacy-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let legacy = dir.join("model.bin");
    let mut w = std::io::BufWriter::new(std::fs::File::create(&legacy).unwrap());
    crate::formats::legacy::write_legacy(&file, &mut w).unwrap();
    drop(w);
    let text = c"Return true if the object is a frame object.";
    let mut got = vec![[0f32; 384]; 2];
    for (i, p) in [&path, &legacy].iter().enumerate() {
        let c = std::ffi::CString::new(p.to_str().unwrap()).unwrap();
        // SAFETY: NUL-terminated path.
        let h = unsafe { embedder_create(c.as_ptr()) };
        // SAFETY: embedder_get_error returns a NUL-terminated string.
        let msg = unsafe { CStr::from_ptr(embedder_get_error()) };
        assert!(!h.is_null(), "{}: {msg:?}", p.display());
        // SAFETY: valid handle, text and 384-float buffer.
        let rc = unsafe { embedder_embed(h, text.as_ptr(), got[i].as_mut_ptr(), 384) };
        assert_eq!(rc, 0);
        embedder_destroy(h);
    }
    let max = got[0]
        .iter()
        .zip(&got[1])
        .map(|(a, b)| (a - b).abs())
        .fold(0f32, f32::max);
    assert!(max < 1e-5, "legacy and EMBD files differ by {max}");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn precision_option_values() {
    let o = embd_options_new();
    let current = |o: *mut embd_options| {
        handles::resolve(o, "o")
            .unwrap()
            .opts
            .lock()
            .unwrap()
            .precision
    };
    assert_eq!(current(o), None);
    for (c, p) in [
        (EMBD_PRECISION_F32, Some(crate::Precision::F32)),
        (EMBD_PRECISION_BF16, Some(crate::Precision::Bf16)),
        (EMBD_PRECISION_INT8, Some(crate::Precision::Int8)),
        (EMBD_PRECISION_DEFAULT, None),
    ] {
        assert_eq!(embd_options_set_precision(o, c), embd_status::Ok);
        assert_eq!(current(o), p);
    }
    assert_eq!(
        embd_options_set_precision(o, EMBD_PRECISION_BF16),
        embd_status::Ok
    );
    for bad in [4, -1, 16, i32::MAX] {
        assert_eq!(
            embd_options_set_precision(o, bad),
            embd_status::InvalidArgument
        );
        let msg = last();
        assert!(
            msg.starts_with("embd_options_set_precision: ")
                && msg.contains(&format!("precision {bad} "))
                && msg.contains("EMBD_PRECISION_F32 (1)"),
            "{msg}"
        );
        // A refused value leaves the options as they were.
        assert_eq!(current(o), Some(crate::Precision::Bf16));
    }
    assert_eq!(
        embd_options_set_precision(null_mut(), EMBD_PRECISION_F32),
        embd_status::NullArgument
    );
    assert!(last().contains("options is NULL"), "{}", last());
    embd_options_free(o);
    assert_eq!(
        embd_options_set_precision(o, EMBD_PRECISION_F32),
        embd_status::InvalidHandle
    );
    assert_eq!(embd_model_precision(null()), EMBD_PRECISION_DEFAULT);
    assert!(
        last().starts_with("embd_model_precision: model is NULL"),
        "{}",
        last()
    );
}

/// Opens `path` with `precision` through the C API; returns the model handle.
fn open_with_precision(path: &std::path::Path, precision: embd_precision) -> *mut embd_model {
    let cpath = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
    let o = embd_options_new();
    assert_eq!(embd_options_set_precision(o, precision), embd_status::Ok);
    assert_eq!(embd_options_set_threads(o, 1), embd_status::Ok);
    let mut m = null_mut();
    // SAFETY: NUL-terminated path, live options, writable out-handle.
    let st = unsafe { embd_open(cpath.as_ptr(), o, &mut m) };
    embd_options_free(o);
    assert_eq!(st, embd_status::Ok, "{}", last());
    m
}

#[test]
fn open_model_reports_its_precision() {
    let Some(path) = model_path() else { return };
    for (asked, runs) in [
        (EMBD_PRECISION_DEFAULT, EMBD_PRECISION_F32), // an f32 file
        (EMBD_PRECISION_F32, EMBD_PRECISION_F32),
        (EMBD_PRECISION_BF16, EMBD_PRECISION_BF16),
        (EMBD_PRECISION_INT8, EMBD_PRECISION_INT8),
    ] {
        let m = open_with_precision(&path, asked);
        assert_eq!(embd_model_precision(m), runs, "asked {asked}");
        // The model embeds in every precision (numbers are the kernels' tests).
        let dim = embd_dim(m);
        let mut out = vec![0f32; dim];
        let texts = [c"A classic mbox mailbox.".as_ptr()];
        // SAFETY: one valid text, `out` has dim floats.
        let st = unsafe { embd_encode(m, texts.as_ptr(), 1, out.as_mut_ptr(), dim) };
        assert_eq!(st, embd_status::Ok, "{}", last());
        assert!(out.iter().all(|x| x.is_finite()) && out.iter().any(|&x| x != 0.0));
        embd_free(m);
    }
}

#[test]
fn int8_file_defaults_to_int8() {
    use crate::convert::{convert_dtype, TargetDType};
    use crate::formats::embd::{write_file, WriteOptions};
    let Some(path) = model_path() else { return };
    let file = crate::ModelFile::open(&path, crate::ReadOptions::default()).unwrap();
    let int8 = convert_dtype(&file, TargetDType::Int8).unwrap();
    drop(file);
    let dir = std::env::temp_dir().join(format!("embd-capi-int8-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let out = dir.join("model-int8.weights");
    write_file(
        &int8,
        &out,
        &WriteOptions { checksums: true },
        &mut |_, _| {},
    )
    .unwrap();
    drop(int8);
    for (asked, runs) in [
        (EMBD_PRECISION_DEFAULT, EMBD_PRECISION_INT8),
        (EMBD_PRECISION_INT8, EMBD_PRECISION_INT8),
        (EMBD_PRECISION_F32, EMBD_PRECISION_F32),
    ] {
        let m = open_with_precision(&out, asked);
        assert_eq!(embd_model_precision(m), runs, "asked {asked}");
        embd_free(m);
    }
    std::fs::remove_dir_all(&dir).ok();
}
