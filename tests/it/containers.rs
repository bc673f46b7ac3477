//! Container interop and robustness tests: finalfusion, Core ML weight blob,
//! AMB and LWT.
//!
//! finalfusion files are written and read by the reference crate
//! `finalfusion` 0.18 (a dev-dependency); the Python cross-checks (PyPI
//! `finalfusion`, `coremltools`) run when `.venv/bin/python` exists and are
//! skipped with a printed reason otherwise.

use std::io::{BufReader, Cursor};
use std::path::{Path, PathBuf};

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

fn tmp_dir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("embd-it-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
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
    let dir = tmp_dir("fifu-py");
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
    let dir = tmp_dir("fifu-ours");
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
