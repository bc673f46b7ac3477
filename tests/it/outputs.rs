//! Sparse and multi-vector outputs against the reference files of
//! `shared/reference/architectures/` (SPLADE, inference-free SPLADE, BGE-M3,
//! ColBERT): through the Rust API, in f32 (exact), and bf16/int8 (accuracy
//! reported, bit-identical across batches and threads).

use std::path::PathBuf;

use embedder::model::multi_vector::MultiVector;
use embedder::model::outputs::{EncodeTask, OutputKind};
use embedder::model::sparse::SparseVector;
use embedder::{Embedder, EncodeRequest, Options, Precision};
use serde_json::Value;

use crate::common::shared_dir;

pub fn arch_dir(name: &str) -> PathBuf {
    shared_dir().join("reference/architectures").join(name)
}

pub fn reference(name: &str) -> Vec<Value> {
    let p = shared_dir()
        .join("reference/architectures")
        .join(format!("{name}_reference.jsonl"));
    std::fs::read_to_string(&p)
        .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn open(name: &str, precision: Precision, threads: usize) -> Embedder {
    let opts = Options {
        precision: Some(precision),
        threads: Some(threads),
        ..Options::default()
    };
    Embedder::open(arch_dir(name), &opts).unwrap_or_else(|e| panic!("{name}: {e}"))
}

pub fn sparse_of(v: &Value) -> SparseVector {
    SparseVector {
        indices: v["indices"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_u64().unwrap() as u32)
            .collect(),
        values: v["values"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_f64().unwrap() as f32)
            .collect(),
    }
}

fn floats(v: &Value) -> Vec<f32> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap() as f32)
        .collect()
}

fn vectors(v: &Value) -> Vec<Vec<f32>> {
    v.as_array().unwrap().iter().map(floats).collect()
}

/// Sparse: the same ids, and every value within 1e-5 of the vector's
/// largest weight (relative to it): a weight near zero is the log of a
/// logit near zero, where f32 rounding of the logit is a large share of it.
pub fn assert_sparse(what: &str, got: &SparseVector, want: &SparseVector) {
    assert_eq!(got.indices, want.indices, "{what}: ids differ");
    let top = want.values.iter().fold(0f32, |m, v| m.max(v.abs()));
    for (k, (a, b)) in got.values.iter().zip(&want.values).enumerate() {
        assert!(
            (a - b).abs() <= 1e-5 * top,
            "{what}: id {} value {a} vs {b} (largest weight {top})",
            got.indices[k]
        );
    }
}

pub fn cosine(a: &[f32], b: &[f32]) -> f64 {
    let d: f64 = a
        .iter()
        .zip(b)
        .map(|(x, y)| f64::from(*x) * f64::from(*y))
        .sum();
    let na: f64 = a.iter().map(|x| f64::from(*x).powi(2)).sum::<f64>().sqrt();
    let nb: f64 = b.iter().map(|x| f64::from(*x).powi(2)).sum::<f64>().sqrt();
    d / (na * nb)
}

/// Multi-vectors: the same count, each vector with cosine >= 0.99999.
pub fn assert_multi(what: &str, got: &MultiVector, want: &[Vec<f32>]) {
    assert_eq!(got.rows(), want.len(), "{what}: vector count");
    for (i, w) in want.iter().enumerate() {
        let c = cosine(got.row(i), w);
        assert!(c >= 0.99999, "{what}: vector {i} cosine {c}");
    }
}

fn texts(refs: &[Value]) -> Vec<String> {
    refs.iter()
        .map(|r| r["text"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn splade_matches_sentence_transformers() {
    let refs = reference("splade-tiny");
    let e = open("splade-tiny", Precision::F32, 2);
    assert_eq!(e.outputs(), &[OutputKind::Sparse]);
    let t = texts(&refs);
    let got = e
        .encode(&t, &EncodeRequest::new(&[OutputKind::Sparse]))
        .unwrap();
    for (i, (r, g)) in refs.iter().zip(got.sparse().unwrap()).enumerate() {
        let ids: Vec<u32> = r["input_ids"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_u64().unwrap() as u32)
            .collect();
        assert_eq!(got.info[i].tokens, ids.len(), "text {i}: token count");
        assert_sparse(&format!("text {i}"), g, &sparse_of(&r["sparse"]));
    }
    // A model declares its outputs: a dense vector is refused by name.
    let err = e.embed(&["x"]).unwrap_err().to_string();
    assert!(
        err.contains("no dense output") && err.contains("sparse"),
        "{err}"
    );
}

#[test]
fn inference_free_splade_routes_queries_and_documents() {
    let refs = reference("splade-inference-free-tiny");
    let e = open("splade-inference-free-tiny", Precision::F32, 2);
    let t = texts(&refs);
    let sparse = [OutputKind::Sparse];
    let q = e
        .encode(&t, &EncodeRequest::new(&sparse).task(EncodeTask::Query))
        .unwrap();
    let d = e
        .encode(&t, &EncodeRequest::new(&sparse).task(EncodeTask::Document))
        .unwrap();
    let plain = e.encode(&t, &EncodeRequest::new(&sparse)).unwrap();
    for (i, r) in refs.iter().enumerate() {
        assert_sparse(
            &format!("query {i}"),
            &q.sparse().unwrap()[i],
            &sparse_of(&r["query_sparse"]),
        );
        assert_sparse(
            &format!("document {i}"),
            &d.sparse().unwrap()[i],
            &sparse_of(&r["document_sparse"]),
        );
    }
    // No task: the Router's default route (document).
    assert_eq!(plain.sparse(), d.sparse());
}

#[test]
fn bgem3_gives_its_three_outputs_from_one_pass() {
    let refs = reference("bgem3-tiny");
    let e = open("bgem3-tiny", Precision::F32, 2);
    assert_eq!(
        e.outputs(),
        &[
            OutputKind::Dense,
            OutputKind::Sparse,
            OutputKind::MultiVector
        ]
    );
    let t = texts(&refs);
    let all = e.encode(&t, &EncodeRequest::default()).unwrap();
    let dense_alone = e.embed(&t).unwrap();
    assert_eq!(
        all.dense(),
        Some(&dense_alone[..]),
        "dense alone = dense of three"
    );
    let dim = all.dim();
    for (i, r) in refs.iter().enumerate() {
        let want = floats(&r["dense"]);
        let c = cosine(&all.dense().unwrap()[i * dim..(i + 1) * dim], &want);
        assert!(c >= 0.99999, "text {i}: dense cosine {c}");
        let lw = r["lexical_weights"].as_object().unwrap();
        let mut pairs: Vec<(u32, f32)> = lw
            .iter()
            .map(|(k, v)| (k.parse().unwrap(), v.as_f64().unwrap() as f32))
            .collect();
        pairs.sort_by_key(|p| p.0);
        let want = SparseVector {
            indices: pairs.iter().map(|p| p.0).collect(),
            values: pairs.iter().map(|p| p.1).collect(),
        };
        assert_sparse(
            &format!("text {i} lexical"),
            &all.sparse().unwrap()[i],
            &want,
        );
        if let Some(cv) = r.get("colbert_vecs") {
            assert_multi(
                &format!("text {i} colbert"),
                &all.multi_vector().unwrap()[i],
                &vectors(cv),
            );
        }
    }
}

#[test]
fn colbert_matches_queries_and_documents() {
    let refs = reference("colbert-tiny");
    let e = open("colbert-tiny", Precision::F32, 2);
    assert_eq!(e.outputs(), &[OutputKind::MultiVector]);
    let t = texts(&refs);
    let mv = [OutputKind::MultiVector];
    let q = e
        .encode(&t, &EncodeRequest::new(&mv).task(EncodeTask::Query))
        .unwrap();
    let d = e
        .encode(&t, &EncodeRequest::new(&mv).task(EncodeTask::Document))
        .unwrap();
    for (i, r) in refs.iter().enumerate() {
        assert_multi(
            &format!("query {i}"),
            &q.multi_vector().unwrap()[i],
            &vectors(&r["query_vectors"]),
        );
        assert_multi(
            &format!("document {i}"),
            &d.multi_vector().unwrap()[i],
            &vectors(&r["document_vectors"]),
        );
    }
}

/// Every precision on every new output: bit-identical across batch
/// composition and thread count; int8 and bf16 close to f32 (reported).
#[test]
fn reduced_precisions_are_invariant_and_close() {
    for name in ["splade-tiny", "bgem3-tiny", "colbert-tiny"] {
        let refs = reference(name);
        let t: Vec<String> = texts(&refs).into_iter().take(60).collect();
        let f32_out = open(name, Precision::F32, 1)
            .encode(&t, &EncodeRequest::default())
            .unwrap();
        // f32 too: the invariance (the accuracy lines are then 1 and 0).
        for p in [Precision::F32, Precision::Bf16, Precision::Int8] {
            let one = open(name, p, 1);
            let two = open(name, p, 2);
            let a = one.encode(&t, &EncodeRequest::default()).unwrap();
            let b = two.encode(&t, &EncodeRequest::default()).unwrap();
            assert_eq!(a, b, "{name} {p:?}: 1 vs 2 threads");
            let singles: Vec<_> = t
                .iter()
                .map(|x| one.encode(&[x], &EncodeRequest::default()).unwrap())
                .collect();
            for (i, s) in singles.iter().enumerate() {
                if let Some(sp) = a.sparse() {
                    assert_eq!(sp[i], s.sparse().unwrap()[0], "{name} {p:?} text {i} alone");
                }
                if let Some(m) = a.multi_vector() {
                    assert_eq!(
                        m[i],
                        s.multi_vector().unwrap()[0],
                        "{name} {p:?} text {i} alone"
                    );
                }
            }
            if let (Some(g), Some(w)) = (a.sparse(), f32_out.sparse()) {
                let (mut overlap, mut rel) = (0f64, 0f64);
                for (g, w) in g.iter().zip(w) {
                    let top = |v: &SparseVector| {
                        let mut v = v.clone();
                        v.keep_top(64);
                        v.indices
                    };
                    let (tg, tw) = (top(g), top(w));
                    let common = tg.iter().filter(|i| tw.contains(i)).count();
                    overlap += common as f64 / tw.len().max(1) as f64;
                    let (dg, dw) = (f64::from(g.dot(w)), f64::from(w.dot(w)));
                    rel += ((dg - dw) / dw.max(1e-9)).abs();
                }
                let n = g.len() as f64;
                println!(
                    "{name} {p:?}: top-64 overlap {:.4}, dot relative error {:.2e}",
                    overlap / n,
                    rel / n
                );
                assert!(
                    overlap / n > 0.8,
                    "{name} {p:?}: top-64 overlap {}",
                    overlap / n
                );
            }
            if let (Some(g), Some(w)) = (a.multi_vector(), f32_out.multi_vector()) {
                let mut worst = 1f64;
                for (g, w) in g.iter().zip(w) {
                    assert_eq!(g.rows(), w.rows());
                    for r in 0..g.rows() {
                        worst = worst.min(cosine(g.row(r), w.row(r)));
                    }
                }
                println!("{name} {p:?}: worst multi-vector cosine {worst:.6}");
                assert!(worst > 0.95, "{name} {p:?}: worst cosine {worst}");
            }
        }
    }
}

/// `embd encode --emit` / `--task` print what the API gives, in the JSONL
/// fields the CLI documents.
#[test]
fn cli_emits_sparse_and_multi_vectors() {
    let tmp = crate::common::TempDir::new("outputs-cli");
    let input = tmp.path().join("in.txt");
    let refs = reference("colbert-tiny");
    let t: Vec<String> = texts(&refs)
        .into_iter()
        .take(40)
        .filter(|s| !s.contains('\n') && !s.trim().is_empty())
        .collect();
    std::fs::write(&input, t.join("\n") + "\n").unwrap();
    let run = |model: &str, extra: &[&str]| -> Vec<Value> {
        let out = std::process::Command::new(crate::common::embd_bin())
            .args(["encode", "-m"])
            .arg(arch_dir(model))
            .arg("--input")
            .arg(&input)
            .args(extra)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    };
    let q = run("colbert-tiny", &["--task", "query"]);
    let e = open("colbert-tiny", Precision::F32, 2);
    let want = e
        .encode(
            &t,
            &EncodeRequest::new(&[OutputKind::MultiVector]).task(EncodeTask::Query),
        )
        .unwrap();
    assert_eq!(q.len(), t.len());
    for (i, rec) in q.iter().enumerate() {
        let got = vectors(&rec["multi_vector"]);
        assert_multi(
            &format!("cli query {i}"),
            &want.multi_vector().unwrap()[i],
            &got,
        );
    }
    let s = run("bgem3-tiny", &["--emit", "sparse,dense", "--top-k", "5"]);
    for rec in &s {
        let v = sparse_of(&rec["sparse"]);
        assert!(v.len() <= 5 && v.indices.windows(2).all(|w| w[0] < w[1]));
        assert!(rec["embedding"].as_array().is_some() && rec.get("multi_vector").is_none());
    }
    // A model without a dense output prints the outputs it has, unasked
    // (the model opened once for the check and the encoding).
    let unasked = run("splade-tiny", &[]);
    assert_eq!(unasked.len(), t.len());
    assert!(unasked.iter().all(|r| r.get("embedding").is_none()));
    assert_eq!(unasked, run("splade-tiny", &["--emit", "sparse"]));
    let out = std::process::Command::new(crate::common::embd_bin())
        .args(["encode", "-m"])
        .arg(arch_dir("splade-tiny"))
        .arg("--input")
        .arg(&input)
        .args(["--emit", "multi-vector"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("no multi-vector output"),
        "{err}"
    );
    // embd similarity: the sparse dot product and MaxSim of the API.
    let sim = |model: &str, extra: &[&str], a: &str, b: &str| -> f32 {
        let out = std::process::Command::new(crate::common::embd_bin())
            .args(["similarity", "-m"])
            .arg(arch_dir(model))
            .args(extra)
            .args([a, b])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout)
            .unwrap()
            .trim()
            .parse()
            .unwrap()
    };
    let (a, b) = ("the cat sat on the mat", "a cat sits on a mat");
    let sp = open("splade-tiny", Precision::F32, 1)
        .encode(&[a, b], &EncodeRequest::default())
        .unwrap()
        .into_sparse();
    let got = sim("splade-tiny", &[], a, b);
    assert!(
        (got - sp[0].dot(&sp[1])).abs() <= 1e-5 * got.abs().max(1.0),
        "{got}"
    );
    let q = e
        .encode(&[a], &EncodeRequest::default().task(EncodeTask::Query))
        .unwrap();
    let d = e
        .encode(&[b], &EncodeRequest::default().task(EncodeTask::Document))
        .unwrap();
    let want = q.multi_vector().unwrap()[0].max_sim(&d.multi_vector().unwrap()[0]);
    let got = sim("colbert-tiny", &["--emit", "multi-vector"], a, b);
    assert!(
        (got - want).abs() <= 1e-5 * want.abs().max(1.0),
        "{got} vs {want}"
    );
}

/// A copy of reference folder `name` (writable) with `edit` applied.
fn edited_copy(name: &str, tag: &str, edit: impl Fn(&std::path::Path)) -> crate::common::TempDir {
    let tmp = crate::common::TempDir::new(tag);
    crate::families::copy_tree(&arch_dir(name), tmp.path());
    edit(tmp.path());
    tmp
}

fn set_writable(p: &std::path::Path) {
    let mut perm = std::fs::metadata(p).unwrap().permissions();
    #[allow(clippy::permissions_set_readonly_false)]
    perm.set_readonly(false);
    std::fs::set_permissions(p, perm).unwrap();
}

/// The Stanford-NLP layout alone (`config.json` with `HF_ColBERT`,
/// `artifact.metadata`, `linear.weight` in the model) gives the vectors of
/// the PyLate layout, bit for bit; and an older SPLADE folder naming its
/// module `MLMTransformer` reads as the current one.
#[test]
fn colbert_stanford_layout_and_mlm_transformer_name() {
    let stanford = edited_copy("colbert-tiny", "colbert-stanford", |d| {
        for f in [
            "modules.json",
            "config_sentence_transformers.json",
            "sentence_bert_config.json",
        ] {
            std::fs::remove_file(d.join(f)).unwrap();
        }
        std::fs::remove_dir_all(d.join("1_Dense")).unwrap();
    });
    let refs = reference("colbert-tiny");
    let t = texts(&refs);
    let opts = Options {
        threads: Some(2),
        ..Options::default()
    };
    let a = Embedder::open(stanford.path(), &opts).unwrap();
    let b = open("colbert-tiny", Precision::F32, 2);
    for task in [EncodeTask::Query, EncodeTask::Document] {
        let req = EncodeRequest::default().task(task);
        assert_eq!(
            a.encode(&t, &req).unwrap().into_multi_vector(),
            b.encode(&t, &req).unwrap().into_multi_vector(),
            "{task:?}"
        );
    }
    let old = edited_copy("splade-tiny", "splade-mlm", |d| {
        let p = d.join("modules.json");
        set_writable(&p);
        let s = std::fs::read_to_string(&p).unwrap().replace(
            "sentence_transformers.base.modules.transformer.Transformer",
            "sentence_transformers.sparse_encoder.models.MLMTransformer",
        );
        assert!(s.contains("MLMTransformer"));
        std::fs::write(&p, s).unwrap();
    });
    let refs = reference("splade-tiny");
    let t: Vec<String> = texts(&refs).into_iter().take(50).collect();
    let e = Embedder::open(old.path(), &opts).unwrap();
    let got = e
        .encode(&t, &EncodeRequest::default())
        .unwrap()
        .into_sparse();
    for (i, (g, r)) in got.iter().zip(&refs).enumerate() {
        assert_sparse(
            &format!("MLMTransformer text {i}"),
            g,
            &sparse_of(&r["sparse"]),
        );
    }
}

/// Long-text windows on the sparse and multi-vector outputs (BGE-M3's
/// three, SPLADE's): a text that fits gets bit for bit what it gets without
/// windows; a longer one gets the dense vector of the dense windows path,
/// every token's ColBERT vector once (the first window's as the truncated
/// text's), and sparse weights of its own tokens, each at least the
/// truncated text's weight (max pooling over more tokens).
#[test]
fn windows_apply_to_sparse_and_multi_vectors() {
    let max = 16;
    let open_with = |name: &str, windows: bool| {
        let opts = Options {
            max_seq_length: Some(max),
            window_overlap: windows.then_some(6),
            threads: Some(2),
            ..Options::default()
        };
        Embedder::open(arch_dir(name), &opts).unwrap_or_else(|e| panic!("{name}: {e}"))
    };
    for name in ["bgem3-tiny", "splade-tiny"] {
        let (win, cut) = (open_with(name, true), open_with(name, false));
        let t: Vec<String> = texts(&reference(name)).into_iter().take(80).collect();
        let long = t
            .iter()
            .filter(|s| cut.tokenize_full(s).len() > max + 10)
            .count();
        assert!(long >= 5, "{name}: {long} texts need windows");
        let w = win.encode(&t, &EncodeRequest::default()).unwrap();
        let c = cut.encode(&t, &EncodeRequest::default()).unwrap();
        let wt = win
            .encode(
                &t,
                &EncodeRequest {
                    top_k: Some(3),
                    ..EncodeRequest::default()
                },
            )
            .unwrap();
        let specials = {
            let sp = cut.tokenizer().vocab().specials();
            [sp.cls, sp.sep, sp.pad, sp.unk]
        };
        if let Some(d) = w.dense() {
            assert_eq!(
                d,
                &win.embed(&t).unwrap(),
                "{name}: dense = the windows path"
            );
        }
        for (i, s) in t.iter().enumerate() {
            let full = cut.tokenize_full(s);
            assert_eq!(w.info[i].tokens, full.len(), "{name} {i}: tokens");
            let (ws, cs) = (&w.sparse().unwrap()[i], &c.sparse().unwrap()[i]);
            if full.len() <= max {
                assert_eq!(ws, cs, "{name} {i}: a text that fits");
                if let (Some(wm), Some(cm)) = (w.multi_vector(), c.multi_vector()) {
                    assert_eq!(wm[i], cm[i], "{name} {i}: a text that fits");
                }
                if let (Some(wd), Some(cd)) = (w.dense(), c.dense()) {
                    let r = i * w.dim()..(i + 1) * w.dim();
                    assert_eq!(wd[r.clone()], cd[r], "{name} {i}: a text that fits");
                }
                continue;
            }
            let mut top = ws.clone();
            top.keep_top(3);
            assert_eq!(
                &wt.sparse().unwrap()[i],
                &top,
                "{name} {i}: top-k of the text"
            );
            for (id, v) in cs.indices.iter().zip(&cs.values) {
                let k = ws.indices.binary_search(id).unwrap_or_else(|_| {
                    panic!("{name} {i}: id {id} of the truncated text is missing")
                });
                assert!(
                    ws.values[k] >= *v,
                    "{name} {i}: id {id}: {} < {v}",
                    ws.values[k]
                );
            }
            if name == "bgem3-tiny" {
                // Lexical weights: the text's own non-special tokens.
                assert!(
                    ws.indices
                        .iter()
                        .all(|id| full.contains(id) && !specials.contains(id)),
                    "{name} {i}: an id outside the text"
                );
                let (wm, cm) = (&w.multi_vector().unwrap()[i], &c.multi_vector().unwrap()[i]);
                assert_eq!(wm.rows(), full.len() - 1, "{name} {i}: a vector per token");
                for r in 0..cm.rows() - 1 {
                    assert_eq!(wm.row(r), cm.row(r), "{name} {i}: first window, row {r}");
                }
            }
        }
    }
}

/// Token-id inputs (framed with the model's special tokens) give every
/// output of the texts they are the ids of, bit for bit; ColBERT and a
/// Router's query route, which frame texts themselves, refuse them by name;
/// bad ids are named.
#[test]
fn encode_ids_matches_encode() {
    for name in ["bgem3-tiny", "splade-tiny", "splade-inference-free-tiny"] {
        let e = open(name, Precision::F32, 2);
        let t: Vec<String> = texts(&reference(name)).into_iter().take(30).collect();
        let ids: Vec<Vec<u32>> = t.iter().map(|s| e.tokenize(s)).collect();
        let refs: Vec<&[u32]> = ids.iter().map(Vec::as_slice).collect();
        let req = EncodeRequest::default();
        let (a, b) = (
            e.encode(&t, &req).unwrap(),
            e.encode_ids(&refs, &req).unwrap(),
        );
        assert_eq!(a.outputs, b.outputs, "{name}");
        let bad: &[u32] = &[ids[0][0], 999_999_999, ids[0][ids[0].len() - 1]];
        let err = e.encode_ids(&[bad], &req).unwrap_err();
        assert!(err.message().contains("999999999"), "{name}: {err}");
    }
    let q = EncodeRequest::new(&[OutputKind::Sparse]).task(EncodeTask::Query);
    let e = open("splade-inference-free-tiny", Precision::F32, 1);
    let ids = e.tokenize("a query");
    let err = e.encode_ids(&[&ids[..]], &q).unwrap_err();
    assert!(err.message().contains("made from texts"), "{err}");
    let e = open("colbert-tiny", Precision::F32, 1);
    let ids = e.tokenize("a document");
    let err = e
        .encode_ids(&[&ids[..]], &EncodeRequest::default())
        .unwrap_err();
    assert!(err.message().contains("made from texts"), "{err}");
}
