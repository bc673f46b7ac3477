//! Container interop and robustness tests: finalfusion, Core ML weight blob,
//! AMB and LWT.
//!
//! finalfusion files are written and read by the reference crate
//! `finalfusion` 0.18 (a dev-dependency); the Python cross-checks (PyPI
//! `finalfusion`, `coremltools`) run when `.venv/bin/python` exists and are
//! skipped with a printed reason otherwise.

use std::io::{BufReader, Cursor};
use std::path::{Path, PathBuf};

use crate::common::TempDir;
use embedder::formats::finalfusion as ff_ours;
use embedder::formats::ModelFile;
use embedder::ReadOptions;

use finalfusion::embeddings::Quantize;
use finalfusion::norms::NdNorms;
use finalfusion::prelude::*;
use finalfusion::storage::{NdArray, QuantizedArray, Storage as _};
use finalfusion::subword::BucketIndexer;
use finalfusion::vocab::{
    BucketSubwordVocab, ExplicitSubwordVocab, FastTextSubwordVocab, SimpleVocab, Vocab as _,
};
use ndarray::{Array1, Array2};
use rand_chacha::rand_core::SeedableRng;
use rand_chacha::ChaChaRng;

fn words(n: usize) -> Vec<String> {
    let base = [
        "berlin", "paris", "tree", "house", "Daniël", "köln", "a b", "über", "the", "cat",
    ];
    (0..n)
        .map(|i| format!("{}{}", base[i % base.len()], i / base.len()))
        .collect()
}

fn matrix(rows: usize, cols: usize, seed: u32) -> Array2<f32> {
    let mut s = seed.wrapping_mul(2_654_435_761).wrapping_add(12345);
    Array2::from_shape_fn((rows, cols), |_| {
        s ^= s << 13;
        s ^= s >> 17;
        s ^= s << 5;
        (s % 20_000) as f32 / 10_000.0 - 1.0
    })
}

fn norms(n: usize) -> NdNorms {
    NdNorms::new(Array1::from_iter((0..n).map(|i| 1.0 + i as f32 * 0.5)))
}

fn metadata() -> finalfusion::metadata::Metadata {
    let t: toml::Table = toml::from_str("name = \"test\"\n[model]\ndims = 8\n").unwrap();
    finalfusion::metadata::Metadata::new(t)
}

const PROBES: &[&str] = &[
    "berlin0",
    "paris0",
    "Daniël0",
    "a b0",
    "berlinx",
    "Daniël",
    "unknownword",
    "zz",
    "",
    "ü",
    "ka",
    "x y z",
];

fn assert_close(a: &[f32], b: &[f32], what: &str) {
    assert_eq!(a.len(), b.len(), "{what}: length");
    for (i, (x, y)) in a.iter().zip(b).enumerate() {
        assert!(
            (x - y).abs() <= 1e-5 * (1.0 + y.abs()),
            "{what}[{i}]: ours {x}, reference {y}"
        );
    }
}

/// Compares our lookups against the reference crate's for the probe words.
fn compare<V: finalfusion::vocab::Vocab, S: finalfusion::storage::Storage>(
    theirs: &Embeddings<V, S>,
    ours: &ff_ours::Embeddings,
    extra: &[String],
) {
    let probes = PROBES
        .iter()
        .map(|s| s.to_string())
        .chain(extra.iter().cloned());
    for w in probes {
        let r = theirs.embedding(&w).map(|v| v.to_vec());
        let o = ours.lookup(&w);
        match (r, o) {
            (None, None) => {}
            (Some(r), Some(o)) => assert_close(&o, &r, &w),
            (r, o) => panic!("{w}: reference {r:?}, ours {o:?}"),
        }
        if let (Some(r), Some((_, n))) = (theirs.embedding_with_norm(&w), ours.lookup_with_norm(&w))
        {
            assert!((r.norm - n).abs() <= 1e-4 * (1.0 + n.abs()), "{w}: norm");
        }
    }
}

fn write_ref<V, S>(e: &Embeddings<V, S>) -> Vec<u8>
where
    Embeddings<V, S>: finalfusion::io::WriteEmbeddings,
{
    use finalfusion::io::WriteEmbeddings;
    let mut c = Cursor::new(Vec::new());
    e.write_embeddings(&mut c).unwrap();
    c.into_inner()
}

fn read_ref(b: &[u8]) -> Embeddings<VocabWrap, StorageWrap> {
    Embeddings::read_embeddings(&mut BufReader::new(Cursor::new(b.to_vec()))).unwrap()
}

#[test]
fn fifu_reference_simple_vocab_array_norms_metadata() {
    let w = words(12);
    let e = Embeddings::new(
        Some(metadata()),
        SimpleVocab::new(w.clone()),
        NdArray::new(matrix(12, 8, 1)),
        norms(12),
    );
    let b = write_ref(&e);
    let ours = ff_ours::Embeddings::from_bytes(&b).unwrap();
    assert_eq!(ours.words(), &w[..]);
    assert!(ours.metadata().unwrap().contains("name = \"test\""));
    assert_eq!(ours.norms().unwrap()[3], 2.5);
    compare(&e, &ours, &w);
    // Our writer reproduces the reference bytes exactly.
    let mut again = Vec::new();
    ours.write(&mut again).unwrap();
    assert_eq!(again, b, "byte-identical re-write");
}

#[test]
fn fifu_reference_subword_vocabs() {
    let w = words(10);
    let rows_bucket = 10 + (1 << 6);
    let e = Embeddings::new(
        None,
        BucketSubwordVocab::new(
            w.clone(),
            3,
            6,
            finalfusion::subword::FinalfusionHashIndexer::new(6),
        ),
        NdArray::new(matrix(rows_bucket, 8, 2)),
        norms(10),
    );
    let b = write_ref(&e);
    let ours = ff_ours::Embeddings::from_bytes(&b).unwrap();
    compare(&e, &ours, &w);
    let mut again = Vec::new();
    ours.write(&mut again).unwrap();
    assert_eq!(again, b);

    let e = Embeddings::new(
        None,
        FastTextSubwordVocab::new(
            w.clone(),
            3,
            6,
            finalfusion::compat::fasttext::FastTextIndexer::new(37),
        ),
        NdArray::new(matrix(10 + 37, 8, 3)),
        norms(10),
    );
    let b = write_ref(&e);
    let ours = ff_ours::Embeddings::from_bytes(&b).unwrap();
    compare(&e, &ours, &w);

    // Explicit: indices given out of first-appearance order to exercise renumbering.
    let ngrams = vec![
        ("<be".to_string(), 2u64),
        ("ber".to_string(), 0),
        ("erl".to_string(), 2),
        ("lin".to_string(), 1),
        ("in0>".to_string(), 0),
        ("<Da".to_string(), 3),
    ];
    let (indexer, _) = finalfusion::subword::ExplicitIndexer::new_with_indices(ngrams);
    let e = Embeddings::new(
        None,
        ExplicitSubwordVocab::new(w.clone(), 3, 4, indexer),
        NdArray::new(matrix(10 + 4, 8, 4)),
        norms(10),
    );
    let b = write_ref(&e);
    let ours = ff_ours::Embeddings::from_bytes(&b).unwrap();
    compare(&e, &ours, &w);
}

#[test]
fn fifu_reference_quantized() {
    let w = words(16);
    let e = Embeddings::new(
        None,
        BucketSubwordVocab::new(
            w.clone(),
            3,
            6,
            finalfusion::subword::FinalfusionHashIndexer::new(4),
        ),
        NdArray::new(matrix(32, 8, 5)),
        norms(16),
    );
    let q: Embeddings<BucketSubwordVocab, QuantizedArray> = e
        .quantize_using::<reductive::pq::Pq<f32>, _>(4, 2, 5, 1, true, ChaChaRng::seed_from_u64(7))
        .unwrap();
    let b = write_ref(&q);
    let ours = ff_ours::Embeddings::from_bytes(&b).unwrap();
    assert!(ours.is_quantized());
    compare(&q, &ours, &w);
    let mut again = Vec::new();
    ours.write(&mut again).unwrap();
    assert_eq!(again, b);
}

#[test]
fn fifu_ours_read_by_reference_incl_projection() {
    let w = words(6);
    let rows = 6 + 8;
    let quant = ff_ours::Storage::Quantized {
        projection: Some(matrix(8, 8, 9).into_raw_vec()),
        quantized_len: 2,
        reconstructed_len: 8,
        n_centroids: 4,
        centroids: matrix(2 * 4, 4, 10).into_raw_vec(),
        norms: Some((0..rows).map(|i| 0.5 + i as f32).collect()),
        codes: (0..rows * 2).map(|i| (i * 7 % 4) as u8).collect(),
    };
    let array = ff_ours::Storage::Array {
        rows,
        dims: 8,
        data: matrix(rows, 8, 11).into_raw_vec(),
    };
    for storage in [quant, array] {
        for sub in [
            ff_ours::Subwords::Bucket {
                min_n: 3,
                max_n: 5,
                exp: 3,
            },
            ff_ours::Subwords::FastText {
                min_n: 3,
                max_n: 5,
                buckets: 8,
            },
        ] {
            let ours = ff_ours::Embeddings::from_parts(
                Some("name = \"x\"\n".into()),
                w.clone(),
                sub,
                storage.clone(),
                Some((0..6).map(|i| i as f32 + 0.25).collect()),
            )
            .unwrap();
            let mut b = Vec::new();
            ours.write(&mut b).unwrap();
            let theirs = read_ref(&b);
            assert_eq!(theirs.vocab().words(), &w[..]);
            assert_eq!(theirs.storage().shape(), (rows, 8));
            compare(&theirs, &ours, &w);
        }
    }
    // Simple vocab and explicit n-grams.
    let ngrams = vec![
        ("<pa".to_string(), 0u64),
        ("par".to_string(), 1),
        ("ari".to_string(), 0),
    ];
    for sub in [
        ff_ours::Subwords::None,
        ff_ours::Subwords::Explicit {
            min_n: 3,
            max_n: 3,
            ngrams,
        },
    ] {
        let rows = 6 + sub.rows().unwrap() as usize;
        let ours = ff_ours::Embeddings::from_parts(
            None,
            w.clone(),
            sub,
            ff_ours::Storage::Array {
                rows,
                dims: 8,
                data: matrix(rows, 8, 12).into_raw_vec(),
            },
            None,
        )
        .unwrap();
        let mut b = Vec::new();
        ours.write(&mut b).unwrap();
        let theirs = read_ref(&b);
        compare(&theirs, &ours, &w);
    }
}

#[test]
fn fifu_generic_model_file_view() {
    let w = words(5);
    let e = Embeddings::new(
        None,
        SimpleVocab::new(w.clone()),
        NdArray::new(matrix(5, 3, 13)),
        norms(5),
    );
    let b = write_ref(&e);
    let m = ModelFile::from_bytes(&b, ReadOptions::default()).unwrap();
    assert_eq!(m.metadata["architecture"], "static");
    assert_eq!(m.metadata["embedding_dim"], "3");
    let t = m.tensor("embeddings").unwrap();
    assert_eq!(t.shape, vec![5, 3]);
    // Zero-copy: the matrix is a 4-aligned view into the file.
    assert!(m.tensor_f32(t).is_some());
    let mut out = Vec::new();
    ff_ours::write_model(&m, &mut out).unwrap();
    assert_eq!(out, b);
}

/// The Python interpreter of the project venv, if present.
pub fn venv_python() -> Option<PathBuf> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join(".venv/bin/python");
    p.is_file().then_some(p)
}

fn run_python(args: &[&str]) -> Option<String> {
    let Some(py) = venv_python() else {
        eprintln!("skipped: no .venv/bin/python (run the venv setup in scripts/interop)");
        return None;
    };
    let out = std::process::Command::new(py).args(args).output().unwrap();
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        if err.contains("ModuleNotFoundError") {
            eprintln!("skipped: python package missing: {err}");
            return None;
        }
        panic!("python {args:?} failed: {err}");
    }
    Some(String::from_utf8(out.stdout).unwrap())
}

fn script(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("scripts/interop")
        .join(name)
        .display()
        .to_string()
}

const PY_PROBES: &[&str] = &[
    "berlin", "paris", "Daniël", "a b", "über", "berlinx", "Daniel", "xyz", "", "ü", "parisian",
];

fn py_vec(v: &serde_json::Value) -> Option<Vec<f32>> {
    v.as_array()
        .map(|a| a.iter().map(|x| x.as_f64().unwrap() as f32).collect())
}

#[test]
fn fifu_python_written_files_read_here() {
    let dir = TempDir::new("fifu-py");
    let probes = serde_json::to_string(PY_PROBES).unwrap();
    let d = dir.display().to_string();
    if run_python(&[&script("fifu_py.py"), "write", &d, &probes]).is_none() {
        return;
    }
    let text = std::fs::read_to_string(dir.join("lookups.json")).unwrap();
    let want: serde_json::Value = serde_json::from_str(&text).unwrap();
    let files = want.as_object().unwrap();
    assert_eq!(files.len(), 5);
    for (file, lookups) in files {
        let ours = ff_ours::Embeddings::open(dir.join(file)).unwrap();
        for w in PY_PROBES {
            let r = py_vec(&lookups[*w]);
            let o = ours.lookup(w);
            match (r, o) {
                (None, None) => {}
                (Some(r), Some(o)) => assert_close(&o, &r, &format!("{file} {w}")),
                (r, o) => panic!("{file} {w}: python {r:?}, ours {o:?}"),
            }
        }
    }
}

#[test]
fn fifu_our_files_read_by_python() {
    let dir = TempDir::new("fifu-ours");
    let w: Vec<String> = ["berlin", "paris", "Daniël", "a b", "über"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let mut paths = Vec::new();
    let mut ours_all = Vec::new();
    let rows = w.len() + 8;
    let storages = [
        ff_ours::Storage::Array {
            rows,
            dims: 6,
            data: matrix(rows, 6, 21).into_raw_vec(),
        },
        ff_ours::Storage::Quantized {
            projection: Some(matrix(6, 6, 22).into_raw_vec()),
            quantized_len: 3,
            reconstructed_len: 6,
            n_centroids: 4,
            centroids: matrix(3 * 4, 2, 23).into_raw_vec(),
            norms: Some((0..rows).map(|i| 0.5 + i as f32 * 0.1).collect()),
            codes: (0..rows * 3).map(|i| (i * 5 % 4) as u8).collect(),
        },
    ];
    let subs = [
        ff_ours::Subwords::Bucket {
            min_n: 3,
            max_n: 6,
            exp: 3,
        },
        ff_ours::Subwords::FastText {
            min_n: 3,
            max_n: 6,
            buckets: 8,
        },
    ];
    for (i, st) in storages.iter().enumerate() {
        for (j, sub) in subs.iter().enumerate() {
            let e = ff_ours::Embeddings::from_parts(
                Some("name = \"ours\"\n".into()),
                w.clone(),
                sub.clone(),
                st.clone(),
                Some((0..w.len()).map(|k| 1.0 + k as f32).collect()),
            )
            .unwrap();
            let p = dir.join(format!("ours_{i}_{j}.fifu"));
            e.write_file(&p).unwrap();
            paths.push(p.display().to_string());
            ours_all.push(e);
        }
    }
    let simple = ff_ours::Embeddings::from_parts(
        None,
        w.clone(),
        ff_ours::Subwords::None,
        ff_ours::Storage::Array {
            rows: w.len(),
            dims: 6,
            data: matrix(w.len(), 6, 24).into_raw_vec(),
        },
        None,
    )
    .unwrap();
    let p = dir.join("ours_simple.fifu");
    simple.write_file(&p).unwrap();
    paths.push(p.display().to_string());
    ours_all.push(simple);

    let probes = serde_json::to_string(PY_PROBES).unwrap();
    let mut args = vec![script("fifu_py.py"), "read".to_string(), probes];
    args.extend(paths.iter().cloned());
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    let Some(out) = run_python(&argv) else {
        return;
    };
    let got: serde_json::Value = serde_json::from_str(&out).unwrap();
    for (p, ours) in paths.iter().zip(&ours_all) {
        let name = Path::new(p).file_name().unwrap().to_str().unwrap();
        let entry = &got[name];
        let words: Vec<String> = serde_json::from_value(entry["__words__"].clone()).unwrap();
        assert_eq!(words, w);
        for word in PY_PROBES {
            match (py_vec(&entry[*word]), ours.lookup(word)) {
                (None, None) => {}
                (Some(r), Some(o)) => assert_close(&o, &r, &format!("{name} {word}")),
                (r, o) => panic!("{name} {word}: python {r:?}, ours {o:?}"),
            }
        }
    }
}

// ---------------------------------------------------------------- Core ML blob

use embedder::formats::coreml_blob::{self as cm, BlobDType, BlobWriter};

/// Values of a blob as f64 (float16 as its raw bits, like the Python helper).
fn blob_values(b: &[u8], info: &cm::BlobInfo) -> Vec<f64> {
    let d = &b[info.data_offset as usize..(info.data_offset + info.size) as usize];
    let n = info.element_count().unwrap() as usize;
    match info.dtype {
        BlobDType::Float32 => d
            .chunks_exact(4)
            .map(|c| f64::from(f32::from_le_bytes(c.try_into().unwrap())))
            .collect(),
        BlobDType::Float16 | BlobDType::UInt16 | BlobDType::BFloat16 => d
            .chunks_exact(2)
            .map(|c| f64::from(u16::from_le_bytes(c.try_into().unwrap())))
            .collect(),
        BlobDType::Int16 => d
            .chunks_exact(2)
            .map(|c| f64::from(i16::from_le_bytes(c.try_into().unwrap())))
            .collect(),
        BlobDType::Int32 => d
            .chunks_exact(4)
            .map(|c| f64::from(i32::from_le_bytes(c.try_into().unwrap())))
            .collect(),
        BlobDType::UInt32 => d
            .chunks_exact(4)
            .map(|c| f64::from(u32::from_le_bytes(c.try_into().unwrap())))
            .collect(),
        BlobDType::Int8 => d.iter().map(|&x| f64::from(x as i8)).collect(),
        BlobDType::UInt8 => d.iter().map(|&x| f64::from(x)).collect(),
        t => cm::unpack_bits(d, t.bits(), n, t == BlobDType::Int4)
            .into_iter()
            .map(f64::from)
            .collect(),
    }
}

fn json_f64s(v: &serde_json::Value) -> Vec<f64> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap())
        .collect()
}

#[test]
fn coreml_blob_written_by_coremltools_reads_here() {
    let dir = TempDir::new("cm-py");
    let file = dir.join("weight.bin").display().to_string();
    let Some(out) = run_python(&[&script("coreml_py.py"), "write", &file]) else {
        return;
    };
    let spec: serde_json::Value = serde_json::from_str(&out).unwrap();
    let b = std::fs::read(&file).unwrap();
    let blobs = cm::list_blobs(&b).unwrap();
    let spec = spec.as_array().unwrap();
    assert_eq!(blobs.len(), spec.len());
    for (info, e) in blobs.iter().zip(spec) {
        assert_eq!(info.metadata_offset, e["offset"].as_u64().unwrap());
        assert_eq!(info.dtype.name(), e["dtype"].as_str().unwrap());
        let want = json_f64s(&e["values"]);
        let got = blob_values(&b, info);
        if info.dtype == BlobDType::Float32 {
            assert_close(
                &got.iter().map(|&x| x as f32).collect::<Vec<_>>(),
                &want.iter().map(|&x| x as f32).collect::<Vec<_>>(),
                "float32",
            );
        } else {
            assert_eq!(got, want, "{}", info.dtype.name());
        }
    }
    // Re-writing the same blobs here gives the same bytes.
    let mut w = BlobWriter::new();
    for info in &blobs {
        let d = &b[info.data_offset as usize..(info.data_offset + info.size) as usize];
        w.add_raw(info.dtype, d, info.padding_bits).unwrap();
    }
    assert_eq!(w.finish(), b);
}

#[test]
fn coreml_blob_written_here_reads_in_coremltools() {
    let dir = TempDir::new("cm-ours");
    let file = dir.join("weight.bin");
    let mut w = BlobWriter::new();
    let mut spec = Vec::new();
    let f: Vec<f32> = vec![0.5, -1.25, 3.0e-5, 7.0];
    let fb: Vec<u8> = f.iter().flat_map(|x| x.to_le_bytes()).collect();
    spec.push((
        w.add_raw(BlobDType::Float32, &fb, 0).unwrap(),
        "float32",
        f.iter().map(|&x| f64::from(x)).collect::<Vec<_>>(),
    ));
    let h: Vec<u16> = vec![0x3c00, 0xbc00, 0x7bff];
    let hb: Vec<u8> = h.iter().flat_map(|x| x.to_le_bytes()).collect();
    spec.push((
        w.add_raw(BlobDType::Float16, &hb, 0).unwrap(),
        "float16",
        h.iter().map(|&x| f64::from(x)).collect(),
    ));
    let i8s: Vec<i8> = vec![-128, -3, 0, 99];
    spec.push((
        w.add_raw(
            BlobDType::Int8,
            &i8s.iter().map(|&x| x as u8).collect::<Vec<_>>(),
            0,
        )
        .unwrap(),
        "int8",
        i8s.iter().map(|&x| f64::from(x)).collect(),
    ));
    let i32s: Vec<i32> = vec![-5, 1 << 30, 17];
    spec.push((
        w.add_raw(
            BlobDType::Int32,
            &i32s
                .iter()
                .flat_map(|x| x.to_le_bytes())
                .collect::<Vec<_>>(),
            0,
        )
        .unwrap(),
        "int32",
        i32s.iter().map(|&x| f64::from(x)).collect(),
    ));
    for (t, vals) in [
        (BlobDType::Int4, vec![-8, 7, -1, 0, 3]),
        (BlobDType::UInt1, vec![1, 0, 0, 1, 1, 1, 0, 1, 1]),
        (BlobDType::UInt2, vec![3, 0, 2, 1, 3]),
        (BlobDType::UInt3, vec![7, 0, 5, 2, 6, 1, 3, 4, 7]),
        (BlobDType::UInt4, vec![15, 0, 9]),
        (BlobDType::UInt6, vec![63, 0, 42, 17, 5]),
    ] {
        let off = w.add_packed(t, &vals).unwrap();
        spec.push((off, t.name(), vals.iter().map(|&x| f64::from(x)).collect()));
    }
    std::fs::write(&file, w.finish()).unwrap();
    let js: Vec<serde_json::Value> = spec
        .iter()
        .map(|(o, d, _)| serde_json::json!({"offset": o, "dtype": d}))
        .collect();
    let arg = serde_json::to_string(&js).unwrap();
    let f = file.display().to_string();
    let Some(out) = run_python(&[&script("coreml_py.py"), "read", &f, &arg]) else {
        return;
    };
    let got: serde_json::Value = serde_json::from_str(&out).unwrap();
    for ((_, name, want), e) in spec.iter().zip(got.as_array().unwrap()) {
        let g = json_f64s(&e["values"]);
        if *name == "float32" {
            for (a, b) in g.iter().zip(want) {
                assert!((a - b).abs() <= 1e-6 * (1.0 + b.abs()), "{name}");
            }
        } else {
            assert_eq!(&g, want, "{name}");
        }
    }
}

// ---------------------------------------------------------------- shared model fixtures

use embedder::formats::{Backing, FormatKind};
use embedder::testutil::TinyBert;
use embedder::ModelConfig;
use std::collections::BTreeMap;
use std::sync::Arc;

/// A tiny BERT encoder with HF tensor names, EMBD metadata and a vocabulary
/// ([`TinyBert`], 16 positions, values from [`matrix`]).
pub fn tiny_bert(hidden: usize, layers: usize, inter: usize) -> ModelFile {
    let mut seed = 100;
    TinyBert::new(hidden, layers, inter, 16).build(|_, shape| {
        seed += 1;
        matrix(1, shape.iter().product(), seed).into_raw_vec()
    })
}

/// Same tensors (names, shapes, f32 values within `tol` relative to the max
/// |value| of the tensor), same vocabulary; metadata keys of `a` present in `b`.
pub fn assert_same_model(a: &ModelFile, b: &ModelFile, tol: f32) {
    assert_eq!(a.tensors.len(), b.tensors.len(), "tensor count");
    for ta in &a.tensors {
        let tb = b
            .tensor(&ta.name)
            .unwrap_or_else(|| panic!("missing {}", ta.name));
        assert_eq!(ta.shape, tb.shape, "{}", ta.name);
        let va = a.tensor_to_f32(ta);
        let vb = b.tensor_to_f32(tb);
        assert_eq!(va.len(), vb.len(), "{}", ta.name);
        let max = va.iter().fold(0f32, |m, x| m.max(x.abs()));
        for (x, y) in va.iter().zip(&vb) {
            assert!((x - y).abs() <= tol * max, "{}: {x} vs {y}", ta.name);
        }
    }
    match (&a.vocab, &b.vocab) {
        (Some(x), Some(y)) => {
            assert_eq!(x.tokens(), y.tokens());
            assert_eq!(x.specials(), y.specials());
        }
        (None, None) => {}
        _ => panic!("vocab presence differs"),
    }
    for (k, v) in &a.metadata {
        assert_eq!(b.metadata.get(k), Some(v), "metadata {k}");
    }
}

fn minilm_dir() -> Option<PathBuf> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("models/all-MiniLM-L6-v2-hf");
    if p.join("model.safetensors").is_file() {
        Some(p)
    } else {
        eprintln!("skipped: models/all-MiniLM-L6-v2-hf not present");
        None
    }
}

#[test]
fn coreml_dir_round_trip_bert() {
    let m = tiny_bert(8, 2, 16);
    let dir = TempDir::new("cm-bert");
    cm::write_dir(&m, &dir).unwrap();
    let back = ModelFile::open(&dir, ReadOptions::default()).unwrap();
    assert_eq!(back.format, FormatKind::CoremlBlob);
    assert_same_model(&m, &back, 0.0);
    ModelConfig::from_metadata(&back.metadata).unwrap();
    // Zero-copy: f32 tensors are 64-aligned views into the mapped blob.
    let t = back.tensor("embeddings.word_embeddings.weight").unwrap();
    assert!(back.tensor_f32(t).is_some());
}

#[test]
fn coreml_dir_round_trip_minilm() {
    let Some(src) = minilm_dir() else { return };
    let m = ModelFile::open_hf_dir(&src, &Default::default()).unwrap();
    let dir = TempDir::new("cm-minilm");
    cm::write_dir(&m, &dir).unwrap();
    let back = ModelFile::open(&dir, ReadOptions::default()).unwrap();
    assert_same_model(&m, &back, 0.0);
    assert_eq!(
        ModelConfig::from_metadata(&back.metadata).unwrap(),
        ModelConfig::from_metadata(&m.metadata).unwrap()
    );
}

// ---------------------------------------------------------------- AMB

use embedder::formats::amb;

#[test]
fn amb_seed_example_writer_output_reads() {
    let dir = TempDir::new("amb-seed");
    let f = dir.join("seed.amb");
    let fs = f.display().to_string();
    let Some(out) = run_python(&[&script("amb_seed_writer.py"), &fs]) else {
        return;
    };
    let want: serde_json::Value = serde_json::from_str(&out).unwrap();
    let m = ModelFile::open(&f, ReadOptions::default()).unwrap();
    assert_eq!(m.format, FormatKind::Amb);
    assert_eq!(m.metadata["model_name"], "seed-example");
    assert_eq!(m.metadata["created_at"], "2024-06-22");
    assert_eq!(m.metadata["amb.description"], "Ünïcode ok");
    assert_eq!(m.metadata["architecture"], "phi");
    assert_eq!(m.metadata["hidden_size"], "2048");
    assert_eq!(m.metadata["amb.config.is_rope"], "true");
    assert!(m.vocab.is_none());
    for (name, e) in want.as_object().unwrap() {
        let ours = if name == "bert.embeddings.LayerNorm.gamma" {
            "embeddings.LayerNorm.weight"
        } else {
            name.as_str()
        };
        let t = m.tensor(ours).unwrap_or_else(|| panic!("{ours}"));
        let shape: Vec<usize> = serde_json::from_value(e["shape"].clone()).unwrap();
        assert_eq!(t.shape, shape);
        let vals: Vec<f32> = json_f64s(&e["values"]).iter().map(|&x| x as f32).collect();
        assert_eq!(m.tensor_to_f32(t), vals, "{name}");
    }
}

fn amb_bytes(m: &ModelFile, quant: amb::Quant) -> Vec<u8> {
    let mut b = Vec::new();
    amb::write(
        m,
        &mut b,
        &amb::WriteOptions {
            quant,
            checksum: true,
        },
    )
    .unwrap();
    b
}

#[test]
fn amb_round_trip_bert_all_quantizations() {
    let m = tiny_bert(16, 2, 32);
    let b = amb_bytes(&m, amb::Quant::None);
    let back = ModelFile::from_bytes(&b, ReadOptions::default()).unwrap();
    assert_same_model(&m, &back, 0.0);
    ModelConfig::from_metadata(&back.metadata).unwrap();
    let mut b2 = Vec::new();
    amb::write(&back, &mut b2, &Default::default()).unwrap();
    assert!(b == b2, "re-write is byte-identical");

    use amb::{Quant, ScaleType};
    for (q, tol) in [
        (
            Quant::Int4Block {
                block: 32,
                scale: ScaleType::F16,
            },
            0.08,
        ),
        (
            Quant::Int4Block {
                block: 8,
                scale: ScaleType::F32,
            },
            0.08,
        ),
        (
            Quant::Int5Block {
                block: 64,
                scale: ScaleType::F16,
            },
            0.04,
        ),
        (
            Quant::Adaptive {
                bits: 4,
                block: 16,
                scale: ScaleType::F16,
                fp16_fraction: 0.3,
            },
            0.08,
        ),
    ] {
        let b = amb_bytes(&m, q);
        let back = ModelFile::from_bytes(&b, ReadOptions::default()).unwrap();
        assert_same_model(&m, &back, tol);
        // Non-Linear tensors are untouched.
        let e = back.tensor("embeddings.word_embeddings.weight").unwrap();
        assert_eq!(
            back.tensor_to_f32(e),
            m.tensor_to_f32(m.tensor("embeddings.word_embeddings.weight").unwrap())
        );
    }
}

#[test]
fn amb_crc_is_verified() {
    let m = tiny_bert(8, 1, 16);
    let mut b = amb_bytes(&m, amb::Quant::None);
    let n = b.len();
    b[n - 10] ^= 0x40;
    let e = ModelFile::from_bytes(&b, ReadOptions::default()).unwrap_err();
    assert_eq!(e.kind(), embedder::ErrorKind::Checksum);
    ModelFile::from_bytes(
        &b,
        ReadOptions {
            verify_checksums: false,
        },
    )
    .unwrap();
}

/// int4/int5 on the real MiniLM weights: relative RMS error of the Linear
/// weights (the encoder-level accuracy check needs the engine).
#[test]
fn amb_minilm_quantization_error() {
    let Some(src) = minilm_dir() else { return };
    let m = ModelFile::open_hf_dir(&src, &Default::default()).unwrap();
    let f32b = amb_bytes(&m, amb::Quant::None);
    let back = ModelFile::from_bytes(&f32b, ReadOptions::default()).unwrap();
    assert_same_model(&m, &back, 0.0);
    use amb::{Quant, ScaleType};
    for (q, limit) in [
        (
            Quant::Int4Block {
                block: 32,
                scale: ScaleType::F16,
            },
            0.15,
        ),
        (
            Quant::Int5Block {
                block: 32,
                scale: ScaleType::F16,
            },
            0.08,
        ),
    ] {
        let b = amb_bytes(&m, q);
        let back = ModelFile::from_bytes(&b, ReadOptions::default()).unwrap();
        let (mut num, mut den) = (0f64, 0f64);
        for t in &m.tensors {
            let a = m.tensor_to_f32(t);
            let c = back.tensor_to_f32(back.tensor(&t.name).unwrap());
            for (x, y) in a.iter().zip(&c) {
                num += f64::from(x - y).powi(2);
                den += f64::from(*x).powi(2);
            }
        }
        let rel = (num / den).sqrt();
        eprintln!(
            "{q:?}: relative RMS error over all tensors {rel:.4}, file {} bytes (f32 {} bytes)",
            b.len(),
            f32b.len()
        );
        assert!(rel < limit, "{rel}");
    }
}

// ---------------------------------------------------------------- LWT

use embedder::formats::lwt;
use embedder::import::hf::gpt2::import_gpt2_dir;

/// Writes a small GPT-2-shaped HF folder; returns the HF (Conv1D [in, out]) tensors.
fn write_gpt2_dir(
    dir: &Path,
    prefixed: bool,
    n_layer: usize,
) -> BTreeMap<String, (Vec<usize>, Vec<f32>)> {
    let (e, v, p) = (8usize, 11usize, 6usize);
    let cfg = serde_json::json!({"model_type": "gpt2", "n_layer": n_layer, "n_head": 2,
        "n_embd": e, "vocab_size": v, "n_positions": p, "n_ctx": p, "n_inner": null,
        "layer_norm_epsilon": 1e-5});
    std::fs::write(dir.join("config.json"), cfg.to_string()).unwrap();
    let mut ts: BTreeMap<String, (Vec<usize>, Vec<f32>)> = BTreeMap::new();
    let mut seed = 500;
    let mut add = |name: String, shape: Vec<usize>| {
        seed += 1;
        let n: usize = shape.iter().product();
        ts.insert(name, (shape, matrix(1, n, seed).into_raw_vec()));
    };
    add("wte.weight".into(), vec![v, e]);
    add("wpe.weight".into(), vec![p, e]);
    for l in 0..n_layer {
        for (n, s) in [
            ("ln_1.weight", vec![e]),
            ("ln_1.bias", vec![e]),
            ("attn.c_attn.weight", vec![e, 3 * e]),
            ("attn.c_attn.bias", vec![3 * e]),
            ("attn.c_proj.weight", vec![e, e]),
            ("attn.c_proj.bias", vec![e]),
            ("ln_2.weight", vec![e]),
            ("ln_2.bias", vec![e]),
            ("mlp.c_fc.weight", vec![e, 4 * e]),
            ("mlp.c_fc.bias", vec![4 * e]),
            ("mlp.c_proj.weight", vec![4 * e, e]),
            ("mlp.c_proj.bias", vec![e]),
        ] {
            add(format!("h.{l}.{n}"), s);
        }
    }
    add("ln_f.weight".into(), vec![e]);
    add("ln_f.bias".into(), vec![e]);
    let mut all = ts.clone();
    // Mask buffers (skipped by the import) and a tied lm_head.
    for l in 0..n_layer {
        all.insert(
            format!("h.{l}.attn.bias"),
            (vec![1, 1, p, p], vec![1.0; p * p]),
        );
        all.insert(format!("h.{l}.attn.masked_bias"), (vec![], vec![-1e4]));
    }
    all.insert("lm_head.weight".into(), ts["wte.weight"].clone());
    let bytes: Vec<(String, Vec<usize>, Vec<u8>)> = all
        .iter()
        .map(|(n, (s, d))| {
            let name = if prefixed && n != "lm_head.weight" {
                format!("transformer.{n}")
            } else {
                n.clone()
            };
            (
                name,
                s.clone(),
                d.iter().flat_map(|x| x.to_le_bytes()).collect(),
            )
        })
        .collect();
    let views: Vec<(String, safetensors::tensor::TensorView<'_>)> = bytes
        .iter()
        .map(|(n, s, b)| {
            (
                n.clone(),
                safetensors::tensor::TensorView::new(safetensors::Dtype::F32, s.clone(), b)
                    .unwrap(),
            )
        })
        .collect();
    safetensors::serialize_to_file(views, None, &dir.join("model.safetensors")).unwrap();
    ts
}

#[test]
fn lwt_gpt2_import_write_read() {
    for prefixed in [false, true] {
        let dir = TempDir::new(&format!("gpt2-{prefixed}"));
        let hf = write_gpt2_dir(&dir, prefixed, 2);
        let m = import_gpt2_dir(&dir).unwrap();
        assert_eq!(m.tensors.len(), 4 + 2 * 12);
        assert_eq!(
            m.metadata["parameter_count"],
            lwt::Gpt2Config::from_metadata(&m.metadata)
                .unwrap()
                .param_count()
                .unwrap()
                .to_string()
        );
        let f = dir.join("gpt2.lwt");
        lwt::write_file(&m, &f).unwrap();
        let back = ModelFile::open(&f, ReadOptions::default()).unwrap();
        assert_eq!(back.format, FormatKind::Lwt);
        assert_same_model(&m, &back, 0.0);
        assert_eq!(back.metadata["architecture"], "gpt2");
        // Conv1D weights are transposed: out[o][i] == hf[i][o].
        let (s, hv) = &hf["h.1.mlp.c_fc.weight"];
        let t = back.tensor("transformer.h.1.mlp.c_fc.weight").unwrap();
        assert_eq!(t.shape, vec![s[1], s[0]]);
        let ours = back.tensor_f32(t).expect("64-aligned zero-copy view");
        for i in 0..s[0] {
            for o in 0..s[1] {
                assert_eq!(ours[o * s[0] + i], hv[i * s[1] + o]);
            }
        }
        // Non-Conv1D tensors are unchanged.
        let wte = back.tensor("transformer.wte.weight").unwrap();
        assert_eq!(back.tensor_to_f32(wte), hf["wte.weight"].1);
        // Re-writing gives the same bytes.
        let mut again = Vec::new();
        lwt::write(&back, &mut again).unwrap();
        assert!(again == std::fs::read(&f).unwrap());
    }
}

#[test]
fn lwt_gpt2_import_rejects_wrong_config() {
    let dir = TempDir::new("gpt2-bad");
    write_gpt2_dir(&dir, false, 2);
    // Claim 3 layers: a tensor is missing and the count differs.
    let cfg = serde_json::json!({"model_type": "gpt2", "n_layer": 3, "n_head": 2, "n_embd": 8,
        "vocab_size": 11, "n_positions": 6});
    std::fs::write(dir.join("config.json"), cfg.to_string()).unwrap();
    let e = import_gpt2_dir(&dir).unwrap_err();
    assert!(e.to_string().contains("missing tensor"), "{e}");
    let cfg = serde_json::json!({"model_type": "gpt2", "n_layer": 1, "n_head": 2, "n_embd": 8,
        "vocab_size": 11, "n_positions": 6});
    std::fs::write(dir.join("config.json"), cfg.to_string()).unwrap();
    let e = import_gpt2_dir(&dir).unwrap_err();
    assert!(e.to_string().contains("unexpected tensor"), "{e}");
}

#[test]
fn lwt_accepts_u32_length_prefix_and_checks_crc() {
    let dir = TempDir::new("lwt-u32");
    write_gpt2_dir(&dir, false, 1);
    let m = import_gpt2_dir(&dir).unwrap();
    let mut b = Vec::new();
    lwt::write(&m, &mut b).unwrap();
    // Rebuild with a u32 prefix: the index and data shift by -4, so re-pad to 64.
    let json_len = u64::from_le_bytes(b[8..16].try_into().unwrap()) as usize;
    let json = b[16..16 + json_len].to_vec();
    let count = m.tensors.len();
    let index = b[16 + json_len..16 + json_len + count * 216].to_vec();
    let data_at = (16 + json_len + count * 216).div_ceil(64) * 64;
    let rest = b[data_at..].to_vec();
    let mut v = b"LWATCHV1".to_vec();
    v.extend_from_slice(&(json_len as u32).to_le_bytes());
    v.extend_from_slice(&json);
    v.extend_from_slice(&index);
    v.resize(v.len().div_ceil(64) * 64, 0);
    v.extend_from_slice(&rest);
    let back = ModelFile::from_bytes(&v, ReadOptions::default()).unwrap();
    assert_same_model(&m, &back, 0.0);
    assert!(back
        .details
        .iter()
        .any(|(k, val)| k == "length prefix" && val == "u32"));
    let n = b.len();
    b[n - 20] ^= 1;
    let e = ModelFile::from_bytes(&b, ReadOptions::default()).unwrap_err();
    assert_eq!(e.kind(), embedder::ErrorKind::Checksum);
}

// ---------------------------------------------------------------- robustness

const NO_CRC: ReadOptions = ReadOptions {
    verify_checksums: false,
};

/// Parses every truncation and every single-byte corruption (xor 0x01, 0x80,
/// 0xFF) of `valid`; `parse` must return (Ok or Err) without panicking.
fn never_panics(valid: &[u8], parse: impl Fn(&[u8])) {
    parse(valid);
    for n in 0..valid.len() {
        parse(&valid[..n]);
    }
    let mut b = valid.to_vec();
    for i in 0..b.len() {
        for x in [0x01u8, 0x80, 0xFF] {
            b[i] ^= x;
            parse(&b);
            b[i] ^= x;
        }
    }
}

fn small_fifu(sub: ff_ours::Subwords, quant: bool) -> Vec<u8> {
    let w: Vec<String> = ["ab", "cd", "éf"].iter().map(|s| s.to_string()).collect();
    let rows = 3 + sub.rows().unwrap() as usize;
    let storage = if quant {
        ff_ours::Storage::Quantized {
            projection: Some(matrix(4, 4, 1).into_raw_vec()),
            quantized_len: 2,
            reconstructed_len: 4,
            n_centroids: 2,
            centroids: matrix(2 * 2, 2, 2).into_raw_vec(),
            norms: Some(vec![1.5; rows]),
            codes: (0..rows * 2).map(|i| (i % 2) as u8).collect(),
        }
    } else {
        ff_ours::Storage::Array {
            rows,
            dims: 2,
            data: matrix(rows, 2, 3).into_raw_vec(),
        }
    };
    let e = ff_ours::Embeddings::from_parts(
        Some("a=1".into()),
        w,
        sub,
        storage,
        Some(vec![1.0, 2.0, 3.0]),
    )
    .unwrap();
    let mut b = Vec::new();
    e.write(&mut b).unwrap();
    b
}

#[test]
fn fifu_reader_never_panics() {
    let files = [
        small_fifu(
            ff_ours::Subwords::Bucket {
                min_n: 2,
                max_n: 3,
                exp: 2,
            },
            true,
        ),
        small_fifu(
            ff_ours::Subwords::FastText {
                min_n: 2,
                max_n: 3,
                buckets: 3,
            },
            false,
        ),
        small_fifu(
            ff_ours::Subwords::Explicit {
                min_n: 2,
                max_n: 2,
                ngrams: vec![("<a".into(), 0), ("ab".into(), 1)],
            },
            false,
        ),
        small_fifu(ff_ours::Subwords::None, false),
    ];
    for f in &files {
        never_panics(f, |b| {
            if let Ok(e) = ff_ours::Embeddings::from_bytes(b) {
                for w in ["ab", "zz", "éfx", ""] {
                    let _ = e.lookup(w);
                }
                let mut out = Vec::new();
                let _ = e.write(&mut out);
            }
        });
    }
}

#[test]
fn coreml_reader_never_panics() {
    let m = tiny_bert(4, 1, 8);
    let dir = TempDir::new("cm-fuzz");
    // A small model: only a few tensors, plus sub-byte blobs listed by hand.
    let small = ModelFile::new(
        FormatKind::Embd,
        Arc::new(Backing::from_bytes(&[])),
        m.metadata.clone(),
        m.vocab.clone(),
        m.tensors[3..5].to_vec(),
    )
    .unwrap();
    cm::write_dir(&small, &dir).unwrap();
    let blob = std::fs::read(dir.join("weight.bin")).unwrap();
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("manifest.json")).unwrap()).unwrap();
    let mut w = BlobWriter::new();
    w.add_packed(BlobDType::UInt3, &[1, 2, 3, 4, 5]).unwrap();
    w.add_packed(BlobDType::Int4, &[-1, 2, 3]).unwrap();
    let extra = w.finish();
    never_panics(&blob, |b| {
        let _ = cm::from_parts(
            Arc::new(Backing::from_bytes(b)),
            &manifest,
            ReadOptions::default(),
        );
        if let Ok(list) = cm::list_blobs(b) {
            for i in &list {
                let _ = i.element_count();
            }
        }
    });
    never_panics(&extra, |b| {
        if let Ok(list) = cm::list_blobs(b) {
            for i in &list {
                if let Ok(n) = i.element_count() {
                    let d = &b[i.data_offset as usize..(i.data_offset + i.size) as usize];
                    let _ = cm::unpack_bits(d, i.dtype.bits(), n as usize, true);
                }
            }
        }
    });
}

#[test]
fn amb_reader_never_panics() {
    let m = tiny_bert(8, 1, 8);
    let small = ModelFile::new(
        FormatKind::Embd,
        Arc::new(Backing::from_bytes(&[])),
        m.metadata.clone(),
        m.vocab.clone(),
        vec![
            m.tensors[3].clone(),
            m.tensor("encoder.layer.0.attention.self.query.weight")
                .unwrap()
                .clone(),
        ],
    )
    .unwrap();
    use amb::{Quant, ScaleType};
    for q in [
        Quant::None,
        Quant::Int4Block {
            block: 8,
            scale: ScaleType::F16,
        },
        Quant::Int5Block {
            block: 16,
            scale: ScaleType::F32,
        },
        Quant::Adaptive {
            bits: 5,
            block: 8,
            scale: ScaleType::F16,
            fp16_fraction: 0.5,
        },
    ] {
        let mut b = Vec::new();
        amb::write(
            &small,
            &mut b,
            &amb::WriteOptions {
                quant: q,
                checksum: false,
            },
        )
        .unwrap();
        never_panics(&b, |x| {
            let _ = ModelFile::from_bytes(x, NO_CRC);
        });
    }
}

#[test]
fn lwt_reader_never_panics() {
    let dir = TempDir::new("lwt-fuzz");
    write_gpt2_dir(&dir, false, 1);
    let m = import_gpt2_dir(&dir).unwrap();
    let small = ModelFile::new(
        FormatKind::Lwt,
        Arc::new(Backing::from_bytes(&[])),
        m.metadata.clone(),
        None,
        m.tensors[2..5].to_vec(),
    )
    .unwrap();
    let mut b = Vec::new();
    lwt::write(&small, &mut b).unwrap();
    never_panics(&b, |x| {
        let _ = ModelFile::from_bytes(x, NO_CRC);
    });
}

/// `Engine::open` on a `.fifu` written by the reference crate gives the static
/// embedder: each text is the L2-normalized mean of its words' vectors as the
/// reference library returns them (known words: stored rows; unknown: subwords).
#[test]
fn fifu_opens_as_static_embedder() {
    let w = words(20);
    let vocab = BucketSubwordVocab::new(w.clone(), 3, 6, BucketIndexer::new(8));
    let e = Embeddings::new(None, vocab, NdArray::new(matrix(20 + 256, 8, 7)), norms(20));
    let tmp = crate::common::TempDir::new("fifu-static");
    let path = tmp.path().join("w.fifu");
    std::fs::write(&path, write_ref(&e)).unwrap();
    let engine = embedder::Engine::open(&path, &embedder::Options::new()).unwrap();
    assert_eq!(engine.dim(), 8);
    assert_eq!(engine.max_seq_length(), 0);
    let texts = [
        format!("{} {}", w[0], w[3]),
        format!("{} unseenword", w[5]),
        String::new(),
    ];
    let got = engine.embed(&texts).unwrap();
    for (i, t) in texts.iter().enumerate() {
        let vecs: Vec<Vec<f32>> = t
            .split_whitespace()
            .filter_map(|word| e.embedding(word).map(|v| v.to_vec()))
            .collect();
        let mut want = vec![0f32; 8];
        if !vecs.is_empty() {
            for v in &vecs {
                for (a, b) in want.iter_mut().zip(v) {
                    *a += b / vecs.len() as f32;
                }
            }
            let n = want.iter().map(|x| x * x).sum::<f32>().sqrt();
            want.iter_mut().for_each(|x| *x /= n);
        }
        assert_close(&got[i * 8..(i + 1) * 8], &want, t);
    }
    let ids = engine.tokenize(&format!("{} unseenword", w[5]));
    assert_eq!(ids, vec![5, u32::MAX]);
}
