//! EMBD and legacy containers through the public API, plus cross-checks against
//! the independent Python implementation in `scripts/embd_format.py`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use embedder::formats::embd::{self, WriteOptions};
use embedder::formats::legacy;
use embedder::formats::{Backing, TensorEntry};
use embedder::{DType, ErrorKind, FormatKind, ModelFile, ReadOptions, Vocab};

use crate::common::TempDir;

fn vocab() -> Vocab {
    let toks = [
        "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "word", "##piece", "naïve", "日本",
    ];
    Vocab::from_tokens_bert(toks.iter().map(|s| s.to_string()).collect()).unwrap()
}

fn metadata(vocab_size: usize) -> BTreeMap<String, String> {
    let mut md: BTreeMap<String, String> = [
        ("model_name", "it-model"),
        ("model_version", "2.1"),
        ("embedding_dim", "4"),
        ("num_layers", "1"),
        ("num_attention_heads", "1"),
        ("hidden_size", "4"),
        ("intermediate_size", "8"),
        ("max_position_emb", "16"),
        ("created_at", "2025-01-16T12:00:00Z"),
        ("pooling", "mean"),
        ("normalize", "true"),
        ("comment", "ünïcödé välue"),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    md.insert("vocab_size".into(), vocab_size.to_string());
    md
}

fn shape_for(ndim: usize) -> Vec<usize> {
    match ndim {
        1 => vec![7],
        2 => vec![3, 5],
        3 => vec![2, 1, 3],
        _ => vec![2, 3, 1, 2],
    }
}

/// One tensor per dtype x ndim, with distinct deterministic bytes.
fn all_dtypes_model() -> ModelFile {
    let mut tensors = Vec::new();
    for (di, d) in DType::ALL.iter().enumerate() {
        for ndim in 1..=4 {
            let shape = shape_for(ndim);
            let n: usize = shape.iter().product::<usize>() * d.size();
            let bytes: Vec<u8> = (0..n)
                .map(|i| {
                    (i as u8)
                        .wrapping_mul(31)
                        .wrapping_add((di * 7 + ndim) as u8)
                })
                .collect();
            tensors.push(TensorEntry::owned_bytes(
                format!("t.{}.{ndim}d", d.name()),
                *d,
                shape,
                &bytes,
            ));
        }
    }
    let v = vocab();
    ModelFile::new(
        FormatKind::Embd,
        Arc::new(Backing::from_bytes(&[])),
        metadata(v.len()),
        Some(v),
        tensors,
    )
    .unwrap()
}

fn assert_same(a: &ModelFile, b: &ModelFile) {
    assert_eq!(a.metadata, b.metadata);
    let (va, vb) = (a.vocab.as_ref().unwrap(), b.vocab.as_ref().unwrap());
    assert_eq!(va.tokens(), vb.tokens());
    assert_eq!(va.specials(), vb.specials());
    assert_eq!(a.tensors.len(), b.tensors.len());
    for (x, y) in a.tensors.iter().zip(&b.tensors) {
        assert_eq!(x.name, y.name);
        assert_eq!(x.dtype, y.dtype, "{}", x.name);
        assert_eq!(x.shape, y.shape, "{}", x.name);
        assert_eq!(a.tensor_bytes(x), b.tensor_bytes(y), "{}", x.name);
    }
}

#[test]
fn round_trip_every_dtype_and_ndim() {
    let m = all_dtypes_model();
    for checksums in [true, false] {
        let b = embd::to_bytes(&m, &WriteOptions { checksums }).unwrap();
        let r = ModelFile::from_bytes(&b, ReadOptions::default()).unwrap();
        assert_eq!(r.format, FormatKind::Embd);
        assert_same(&m, &r);
        for t in &r.tensors {
            assert_eq!(t.file_offset % 64, 0);
            if t.dtype == DType::F32 {
                assert!(
                    r.tensor_f32(t).is_some(),
                    "zero-copy f32 view of {}",
                    t.name
                );
            }
        }
    }
}

#[test]
fn write_file_then_open_with_progress() {
    let dir = TempDir::new("write-file");
    let path = dir.path().join("m.weights");
    let m = all_dtypes_model();
    let mut calls = Vec::new();
    embd::write_file(&m, &path, &WriteOptions::default(), &mut |d, t| {
        calls.push((d, t))
    })
    .unwrap();
    let total = calls.last().unwrap().1;
    assert!(total > 0);
    assert_eq!(calls.last().unwrap().0, total);
    assert!(calls.windows(2).all(|w| w[0].0 <= w[1].0));
    let r = ModelFile::open(&path, ReadOptions::default()).unwrap();
    assert_same(&m, &r);
    // Only the final file is left in the directory.
    let names: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, vec![std::ffi::OsString::from("m.weights")]);
}

#[test]
fn failed_write_leaves_nothing_behind() {
    let dir = TempDir::new("write-fail");
    let path = dir.path().join("bad.weights");
    let mut m = all_dtypes_model();
    m.vocab = None;
    let e = embd::write_file(&m, &path, &WriteOptions::default(), &mut |_, _| {}).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument);
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

#[test]
fn legacy_round_trip_through_public_api() {
    let hidden = 32;
    let v = vocab();
    let mut tensors = Vec::new();
    let mut add = |name: &str, shape: Vec<usize>| {
        let n: usize = shape.iter().product();
        let vals: Vec<f32> = (0..n)
            .map(|i| i as f32 * 0.5 - tensors.len() as f32)
            .collect();
        tensors.push(TensorEntry::owned_f32(name, shape, &vals));
    };
    add("embeddings.word_embeddings.weight", vec![v.len(), hidden]);
    add("embeddings.position_embeddings.weight", vec![20, hidden]);
    add("embeddings.LayerNorm.weight", vec![hidden]);
    add(
        "encoder.layer.0.attention.self.query.weight",
        vec![hidden, hidden],
    );
    add(
        "encoder.layer.0.intermediate.dense.weight",
        vec![48, hidden],
    );
    add("encoder.layer.0.output.dense.weight", vec![hidden, 48]);
    add("encoder.layer.0.output.dense.bias", vec![hidden]);
    let m = ModelFile::new(
        FormatKind::Embd,
        Arc::new(Backing::from_bytes(&[])),
        BTreeMap::new(),
        Some(v),
        tensors,
    )
    .unwrap();
    let mut b = Vec::new();
    legacy::write_legacy(&m, &mut b).unwrap();
    assert!(legacy::looks_legacy(&b));
    let dir = TempDir::new("legacy");
    let path = dir.path().join("old.bin");
    std::fs::write(&path, &b).unwrap();
    let r = ModelFile::open(&path, ReadOptions::default()).unwrap();
    assert_eq!(r.format, FormatKind::EmbdLegacy);
    for t in &m.tensors {
        let u = r.tensor(&t.name).unwrap();
        assert_eq!(u.shape, t.shape, "{}", t.name);
        assert_eq!(r.tensor_to_f32(u), m.tensor_to_f32(t), "{}", t.name);
    }
    assert_eq!(r.metadata["num_attention_heads"], "1");
    assert_eq!(r.metadata["intermediate_size"], "48");
    assert_eq!(r.metadata["num_layers"], "1");
    assert_eq!(r.metadata["max_position_emb"], "20");
    // Every truncation errors.
    for n in 0..b.len() {
        assert!(
            ModelFile::from_bytes(&b[..n], ReadOptions::default()).is_err(),
            "{n}"
        );
    }
}

// ---------------------------------------------------------------- Python

fn python() -> Option<&'static str> {
    let ok = Command::new("python3")
        .arg("--version")
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    if ok {
        Some("python3")
    } else {
        println!("python3 not found: skipping the cross-check with scripts/embd_format.py");
        None
    }
}

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/embd_format.py")
}

fn encode(dtype: DType, v: &serde_json::Value) -> Vec<u8> {
    let f = || v.as_f64().unwrap();
    let i = || v.as_i64().unwrap();
    match dtype {
        DType::F32 => (f() as f32).to_le_bytes().to_vec(),
        DType::F16 => half::f16::from_f64(f()).to_le_bytes().to_vec(),
        DType::BF16 => half::bf16::from_f64(f()).to_le_bytes().to_vec(),
        DType::I32 => (i() as i32).to_le_bytes().to_vec(),
        DType::I16 => (i() as i16).to_le_bytes().to_vec(),
        DType::I8 => (i() as i8).to_le_bytes().to_vec(),
        DType::U32 => (i() as u32).to_le_bytes().to_vec(),
        DType::U16 => (i() as u16).to_le_bytes().to_vec(),
        DType::U8 => (i() as u8).to_le_bytes().to_vec(),
    }
}

#[test]
fn reads_files_written_by_the_python_reference() {
    let Some(py) = python() else { return };
    let dir = TempDir::new("py-write");
    let path = dir.path().join("py.weights");
    let out = Command::new(py)
        .arg(script())
        .arg("write")
        .arg(&path)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let desc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let r = ModelFile::open(&path, ReadOptions::default()).unwrap();
    assert_eq!(r.format, FormatKind::Embd);
    let md = desc["metadata"].as_object().unwrap();
    assert_eq!(r.metadata.len(), md.len());
    for (k, v) in md {
        assert_eq!(r.metadata[k], v.as_str().unwrap(), "{k}");
    }
    let voc = r.vocab.as_ref().unwrap();
    let toks: Vec<&str> = desc["tokens"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect();
    assert_eq!(voc.tokens(), toks.as_slice());
    let specials: Vec<u32> = desc["specials"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_u64().unwrap() as u32)
        .collect();
    assert_eq!(voc.specials().as_array().to_vec(), specials);
    let tensors = desc["tensors"].as_array().unwrap();
    assert_eq!(r.tensors.len(), tensors.len());
    let mut dtypes_seen = std::collections::BTreeSet::new();
    for t in tensors {
        let name = t["name"].as_str().unwrap();
        let e = r.tensor(name).unwrap_or_else(|| panic!("missing {name}"));
        let dtype = DType::from_name(t["dtype"].as_str().unwrap()).unwrap();
        dtypes_seen.insert(dtype.code());
        assert_eq!(e.dtype, dtype, "{name}");
        let shape: Vec<usize> = t["shape"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_u64().unwrap() as usize)
            .collect();
        assert_eq!(e.shape, shape, "{name}");
        let expect: Vec<u8> = t["values"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|v| encode(dtype, v))
            .collect();
        assert_eq!(r.tensor_bytes(e), expect.as_slice(), "{name}");
    }
    assert_eq!(dtypes_seen.len(), 9, "the Python file covers every dtype");
}

fn py_check(py: &str, path: &Path) -> (bool, String) {
    let out = Command::new(py)
        .arg(script())
        .arg("check")
        .arg(path)
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr),
    )
}

#[test]
fn python_reference_accepts_files_we_write() {
    let Some(py) = python() else { return };
    let dir = TempDir::new("py-check");
    let m = all_dtypes_model();
    for checksums in [true, false] {
        let path = dir.path().join(format!("rs-{checksums}.weights"));
        embd::write_file(&m, &path, &WriteOptions { checksums }, &mut |_, _| {}).unwrap();
        let (ok, msg) = py_check(py, &path);
        assert!(
            ok,
            "python check rejected our file (checksums {checksums}): {msg}"
        );
    }
    // And the checker is not a rubber stamp: a flipped data byte is refused.
    let path = dir.path().join("rs-true.weights");
    let mut b = std::fs::read(&path).unwrap();
    let tdo = u32::from_le_bytes(b[36..40].try_into().unwrap()) as usize;
    b[tdo] ^= 1;
    std::fs::write(&path, &b).unwrap();
    let (ok, msg) = py_check(py, &path);
    assert!(!ok, "python check accepted a damaged file: {msg}");
    assert!(msg.contains("data checksum"), "{msg}");
}
