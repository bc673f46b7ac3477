//! The output stage over HTTP, the server on 127.0.0.1 port 0 started and
//! stopped by each test: TEI's `/embed_sparse` (SPLADE, the inference-free
//! query route), `/embed_all`'s multi-vectors (ColBERT), the native
//! `/encode` (BGE-M3's three outputs from one pass), against the reference
//! files of `shared/reference/architectures/` and the in-process engine;
//! and the errors: a model without the output, a bad task, bad bodies.

mod common;

use std::path::PathBuf;

use common::*;
use embedder::{Embedder, EncodeRequest, EncodeTask, Options, OutputKind};
use serde_json::{json, Value};

/// `shared/reference/architectures/<name>` (a folder the server opens
/// directly); `None` after a skip line with `EMBD_SKIP_MODEL_TESTS=1`.
fn arch(name: &str, test: &str) -> Option<PathBuf> {
    let p = shared().join("reference/architectures").join(name);
    if p.is_dir() {
        return Some(p);
    }
    if std::env::var("EMBD_SKIP_MODEL_TESTS").as_deref() == Ok("1") {
        eprintln!("skipping {test}: {} is absent", p.display());
        return None;
    }
    panic!(
        "{} is absent (set EMBD_SHARED_DIR, or EMBD_SKIP_MODEL_TESTS=1)",
        p.display()
    );
}

fn arch_reference(name: &str) -> Vec<Value> {
    let p = shared()
        .join("reference/architectures")
        .join(format!("{name}_reference.jsonl"));
    std::fs::read_to_string(&p)
        .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn engine(path: &std::path::Path) -> Embedder {
    Embedder::open(path, &Options::new().threads(2)).unwrap()
}

/// (ids, values) of TEI's `[{"index", "value"}]`.
fn tei_sparse(v: &Value) -> (Vec<u32>, Vec<f32>) {
    v.as_array()
        .unwrap_or_else(|| panic!("not a sparse vector: {v}"))
        .iter()
        .map(|x| {
            (
                x["index"].as_u64().unwrap() as u32,
                x["value"].as_f64().unwrap() as f32,
            )
        })
        .unzip()
}

/// (ids, values) of `{"indices", "values"}`.
fn indexed_sparse(v: &Value) -> (Vec<u32>, Vec<f32>) {
    (
        v["indices"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_u64().unwrap() as u32)
            .collect(),
        floats(&v["values"]),
    )
}

/// The same ids, every value within 1e-5 of the vector's largest weight.
fn assert_sparse(what: &str, got: &(Vec<u32>, Vec<f32>), want: &(Vec<u32>, Vec<f32>)) {
    assert_eq!(got.0, want.0, "{what}: ids differ");
    let top = want.1.iter().fold(0f32, |m, v| m.max(v.abs()));
    for (k, (a, b)) in got.1.iter().zip(&want.1).enumerate() {
        assert!(
            (a - b).abs() <= 1e-5 * top,
            "{what}: id {} value {a} vs {b} (largest weight {top})",
            got.0[k]
        );
    }
}

/// The same number of vectors, each with cosine >= 0.99999.
fn assert_multi(what: &str, got: &Value, want: &Value) {
    let got = got.as_array().unwrap();
    let want = want.as_array().unwrap();
    assert_eq!(got.len(), want.len(), "{what}: vector count");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let c = cosine(&floats(g), &floats(w));
        assert!(c >= 0.99999, "{what}: vector {i} cosine {c}");
    }
}

fn texts_of(refs: &[Value], pick: &[usize]) -> Vec<String> {
    pick.iter()
        .map(|&i| refs[i]["text"].as_str().unwrap().to_string())
        .collect()
}

fn ok(r: &Resp) -> Value {
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    r.json()
}

#[test]
fn embed_sparse_matches_the_splade_reference_and_the_engine() {
    let Some(m) = arch("splade-tiny", "embed_sparse_splade") else {
        return;
    };
    let srv = start(&m, |_| {});
    let refs = arch_reference("splade-tiny");
    let pick: Vec<usize> = (0..refs.len()).step_by(refs.len() / 24).take(24).collect();
    let texts = texts_of(&refs, &pick);
    let got = ok(&post(
        srv.addr,
        "/embed_sparse",
        &json!({ "inputs": texts }),
    ));
    let got = got.as_array().unwrap();
    assert_eq!(got.len(), texts.len());
    let e = engine(&m);
    let lib = e
        .encode(&texts, &EncodeRequest::new(&[OutputKind::Sparse]))
        .unwrap();
    for (k, &i) in pick.iter().enumerate() {
        let g = tei_sparse(&got[k]);
        assert_sparse(
            &format!("{:?}", texts[k]),
            &g,
            &indexed_sparse(&refs[i]["sparse"]),
        );
        // Bit for bit the library's, ids ascending, no zero weights.
        let want = &lib.sparse().unwrap()[k];
        assert_eq!(g.0, want.indices);
        assert!(same(&g.1, &want.values), "{:?}", texts[k]);
        assert!(g.0.windows(2).all(|w| w[0] < w[1]));
        assert!(g.1.iter().all(|&v| v != 0.0));
    }
    // A single string is a list of one; TEI's headers.
    let r = post(srv.addr, "/embed_sparse", &json!({"inputs": texts[3]}));
    assert_eq!(r.header("x-compute-type"), Some("cpu"));
    assert!(r.header("x-compute-tokens").is_some());
    let one = ok(&r);
    assert_eq!(one.as_array().unwrap().len(), 1);
    assert_eq!(one[0], got[3]);
    // The model has no dense output: /embed says so, as TEI does for SPLADE.
    let msg = tei_error(
        &post(srv.addr, "/embed", &json!({"inputs": "a"})),
        424,
        "backend",
    );
    assert!(msg.contains("its outputs: sparse"), "{msg}");
    // Token ids without the special tokens, as TEI takes them: the vectors
    // of the texts they are the ids of, bit for bit; texts and ids are not
    // mixed in one request; an id beyond the vocabulary is named.
    let some: Vec<usize> = (0..texts.len())
        .filter(|&k| !texts[k].is_empty())
        .take(4)
        .collect();
    let ids: Vec<Vec<u32>> = some
        .iter()
        .map(|&k| {
            let full = e.tokenize(&texts[k]);
            full[1..full.len() - 1].to_vec()
        })
        .collect();
    let by_ids = ok(&post(srv.addr, "/embed_sparse", &json!({ "inputs": ids })));
    for (j, &k) in some.iter().enumerate() {
        assert_eq!(by_ids[j], got[k], "{:?} as ids", texts[k]);
    }
    let one = ok(&post(
        srv.addr,
        "/embed_sparse",
        &json!({ "inputs": ids[2] }),
    ));
    assert_eq!(one[0], got[some[2]]);
    let msg = tei_error(
        &post(
            srv.addr,
            "/embed_sparse",
            &json!({"inputs": [texts[some[0]], ids[0]]}),
        ),
        422,
        "validation",
    );
    assert!(msg.contains("not both"), "{msg}");
    let msg = tei_error(
        &post(
            srv.addr,
            "/embed_sparse",
            &json!({"inputs": [[7592, 99_999_999]]}),
        ),
        422,
        "validation",
    );
    assert!(msg.contains("99999999"), "{msg}");
    // truncate false on a text over the 256 tokens: 413.
    let long = vec!["garden river"; 200].join(" ");
    tei_error(
        &post(
            srv.addr,
            "/embed_sparse",
            &json!({"inputs": long, "truncate": false}),
        ),
        413,
        "validation",
    );
    assert_eq!(
        ok(&post(srv.addr, "/embed_sparse", &json!({ "inputs": long })))
            .as_array()
            .unwrap()
            .len(),
        1
    );
    // /info names the outputs.
    let info = get(srv.addr, "/info").json();
    assert_eq!(info["models"][0]["outputs"], json!(["sparse"]));
}

#[test]
fn inference_free_splade_takes_its_query_route_by_task() {
    let Some(m) = arch("splade-inference-free-tiny", "inference_free") else {
        return;
    };
    let srv = start(&m, |_| {});
    let refs = arch_reference("splade-inference-free-tiny");
    let pick: Vec<usize> = (0..refs.len()).step_by(refs.len() / 16).take(16).collect();
    let texts = texts_of(&refs, &pick);
    let q = ok(&post(
        srv.addr,
        "/embed_sparse",
        &json!({"inputs": texts, "task": "query"}),
    ));
    let d = ok(&post(
        srv.addr,
        "/embed_sparse",
        &json!({"inputs": texts, "task": "document"}),
    ));
    let plain = ok(&post(
        srv.addr,
        "/embed_sparse",
        &json!({ "inputs": texts }),
    ));
    for (k, &i) in pick.iter().enumerate() {
        let what = format!("{:?}", texts[k]);
        assert_sparse(
            &format!("query {what}"),
            &tei_sparse(&q[k]),
            &indexed_sparse(&refs[i]["query_sparse"]),
        );
        assert_sparse(
            &format!("document {what}"),
            &tei_sparse(&d[k]),
            &indexed_sparse(&refs[i]["document_sparse"]),
        );
    }
    // No task: the Router's default route (documents).
    assert_eq!(plain, d);
    // The native route agrees.
    let n = ok(&post(
        srv.addr,
        "/encode",
        &json!({"inputs": texts, "task": "query"}),
    ));
    for k in 0..texts.len() {
        assert_eq!(
            indexed_sparse(&n["data"][k]["sparse"]).0,
            tei_sparse(&q[k]).0
        );
        assert!(n["data"][k].get("dense").is_none());
    }
}

#[test]
fn embed_all_answers_colbert_multi_vectors() {
    let Some(m) = arch("colbert-tiny", "embed_all_colbert") else {
        return;
    };
    let srv = start(&m, |_| {});
    let refs = arch_reference("colbert-tiny");
    let pick: Vec<usize> = (0..refs.len()).step_by(refs.len() / 12).take(12).collect();
    let texts = texts_of(&refs, &pick);
    let q = ok(&post(
        srv.addr,
        "/embed_all",
        &json!({"inputs": texts, "task": "query"}),
    ));
    let d = ok(&post(
        srv.addr,
        "/embed_all",
        &json!({"inputs": texts, "task": "document"}),
    ));
    let e = engine(&m);
    let lib = e
        .encode(
            &texts,
            &EncodeRequest::new(&[OutputKind::MultiVector]).task(EncodeTask::Query),
        )
        .unwrap();
    for (k, &i) in pick.iter().enumerate() {
        let what = format!("{:?}", texts[k]);
        assert_eq!(q[k].as_array().unwrap().len(), 32, "{what}");
        assert_multi(&format!("query {what}"), &q[k], &refs[i]["query_vectors"]);
        assert_multi(
            &format!("document {what}"),
            &d[k],
            &refs[i]["document_vectors"],
        );
        let mv = &lib.multi_vector().unwrap()[k];
        let flat: Vec<f32> = q[k].as_array().unwrap().iter().flat_map(floats).collect();
        assert!(same(&flat, &mv.data), "{what}: not the library's bits");
    }
    // Token-state options do not apply to multi-vectors; ids are refused.
    for body in [
        json!({"inputs": "a", "dimensions": 8}),
        json!({"inputs": "a", "normalize": false}),
        json!({"inputs": [[7592]]}),
    ] {
        tei_error(&post(srv.addr, "/embed_all", &body), 422, "validation");
    }
    // No dense, no sparse output: 424 naming what it has.
    for path in ["/embed", "/embed_sparse"] {
        let msg = tei_error(
            &post(srv.addr, path, &json!({"inputs": "a"})),
            424,
            "backend",
        );
        assert!(msg.contains("its outputs: multi-vector"), "{path}: {msg}");
    }
}

#[test]
fn encode_gives_bgem3_three_outputs_from_one_pass() {
    let Some(m) = arch("bgem3-tiny", "encode_bgem3") else {
        return;
    };
    let srv = start(&m, |_| {});
    let refs = arch_reference("bgem3-tiny");
    // Lines with ColBERT vectors in the reference.
    let with_colbert: Vec<usize> = (0..refs.len())
        .filter(|&i| refs[i].get("colbert_vecs").is_some())
        .collect();
    let pick: Vec<usize> = with_colbert
        .iter()
        .copied()
        .step_by(with_colbert.len() / 16)
        .take(16)
        .collect();
    let texts = texts_of(&refs, &pick);
    let all = ok(&post(srv.addr, "/encode", &json!({ "inputs": texts })));
    let data = all["data"].as_array().unwrap();
    assert_eq!(data.len(), texts.len());
    assert!(all["usage"]["total_tokens"].as_u64().unwrap() > 0);
    let dense = ok(&post(srv.addr, "/embed", &json!({ "inputs": texts })));
    for (k, &i) in pick.iter().enumerate() {
        let what = format!("{:?}", texts[k]);
        let row = &data[k];
        // Dense: /embed's bits, and the reference.
        let dv = floats(&row["dense"]);
        assert!(same(&dv, &floats(&dense[k])), "{what}: dense != /embed");
        let c = cosine(&dv, &floats(&refs[i]["dense"]));
        assert!(c >= 0.99999, "{what}: dense cosine {c}");
        // Sparse: FlagEmbedding's lexical weights.
        let mut pairs: Vec<(u32, f32)> = refs[i]["lexical_weights"]
            .as_object()
            .unwrap()
            .iter()
            .map(|(k, v)| (k.parse().unwrap(), v.as_f64().unwrap() as f32))
            .collect();
        pairs.sort_by_key(|p| p.0);
        let want = pairs.into_iter().unzip();
        assert_sparse(&what, &indexed_sparse(&row["sparse"]), &want);
        // Multi-vector: the ColBERT vectors.
        assert_multi(&what, &row["multi_vector"], &refs[i]["colbert_vecs"]);
    }
    // One output asked for: only it, with the same bits.
    let sp = ok(&post(
        srv.addr,
        "/encode",
        &json!({"inputs": texts, "outputs": ["sparse"]}),
    ));
    for k in 0..texts.len() {
        let o = sp["data"][k].as_object().unwrap();
        assert_eq!(o.keys().collect::<Vec<_>>(), ["sparse"]);
        assert_eq!(sp["data"][k]["sparse"], data[k]["sparse"]);
    }
    // The TEI routes give the same outputs in their shapes.
    let tei = ok(&post(
        srv.addr,
        "/embed_sparse",
        &json!({ "inputs": texts }),
    ));
    let mv = ok(&post(srv.addr, "/embed_all", &json!({ "inputs": texts })));
    for k in 0..texts.len() {
        let (ids, vals) = indexed_sparse(&data[k]["sparse"]);
        let nz: (Vec<u32>, Vec<f32>) = ids
            .iter()
            .zip(&vals)
            .filter(|(_, v)| **v != 0.0)
            .map(|(i, v)| (*i, *v))
            .unzip();
        let t = tei_sparse(&tei[k]);
        assert_eq!(t.0, nz.0);
        assert!(same(&t.1, &nz.1));
        assert_eq!(mv[k], data[k]["multi_vector"]);
    }
    // top_k keeps the largest weights; dimensions cut the dense vector.
    let r = ok(&post(
        srv.addr,
        "/encode",
        &json!({"inputs": texts[5], "outputs": "dense,sparse", "top_k": 2, "dimensions": 16}),
    ));
    assert!(r["data"][0]["sparse"]["indices"].as_array().unwrap().len() <= 2);
    assert_eq!(r["data"][0]["dense"].as_array().unwrap().len(), 16);
    assert!(r["data"][0].get("multi_vector").is_none());
    // Bad outputs, top_k 0, a bad task.
    for body in [
        json!({"inputs": "a", "outputs": ["dense", "lexicon"]}),
        json!({"inputs": "a", "outputs": [1]}),
        json!({"inputs": "a", "outputs": {"dense": true}}),
        json!({"inputs": "a", "top_k": 0}),
        json!({"inputs": "a", "task": "passage"}),
        json!({"inputs": "a", "top_k": -1}),
    ] {
        tei_error(&post(srv.addr, "/encode", &body), 422, "validation");
    }
    let info = get(srv.addr, "/info").json();
    assert_eq!(
        info["models"][0]["outputs"],
        json!(["dense", "sparse", "multi-vector"])
    );
}

#[test]
fn output_routes_refuse_what_a_dense_model_lacks_and_bad_bodies() {
    let Some(m) = minilm("output_errors") else {
        return;
    };
    // A small payload limit: an oversized body still fits the socket
    // buffers, so the client finishes writing before the 413.
    let srv = start(&m, |c| c.payload_limit = 20_000);
    let text = "A man is playing guitar";
    // No sparse output: TEI's 424 (backend), naming the model's outputs.
    let msg = tei_error(
        &post(srv.addr, "/embed_sparse", &json!({ "inputs": text })),
        424,
        "backend",
    );
    assert!(
        msg.contains("no sparse output; its outputs: dense"),
        "{msg}"
    );
    let msg = tei_error(
        &post(
            srv.addr,
            "/encode",
            &json!({"inputs": text, "outputs": ["dense", "multi-vector"]}),
        ),
        424,
        "backend",
    );
    assert!(msg.contains("no multi-vector output"), "{msg}");
    // /encode's default is every output the model has: dense, /embed's bits.
    let enc = ok(&post(srv.addr, "/encode", &json!({ "inputs": [text] })));
    let emb = ok(&post(srv.addr, "/embed", &json!({ "inputs": [text] })));
    assert_eq!(
        enc["data"][0]
            .as_object()
            .unwrap()
            .keys()
            .collect::<Vec<_>>(),
        ["dense"]
    );
    assert!(same(&floats(&enc["data"][0]["dense"]), &floats(&emb[0])));
    // A task on a model without prompts or routes changes nothing.
    for path in ["/embed", "/embed_all"] {
        let a = ok(&post(srv.addr, path, &json!({ "inputs": text })));
        for task in ["query", "document"] {
            let b = ok(&post(
                srv.addr,
                path,
                &json!({"inputs": text, "task": task}),
            ));
            assert_eq!(a, b, "{path} {task}");
        }
    }
    // A bad task is 422 on every route that takes one.
    for path in ["/embed", "/embed_all", "/embed_sparse", "/encode"] {
        for task in [json!("Query"), json!("passage"), json!(""), json!(1)] {
            tei_error(
                &post(srv.addr, path, &json!({"inputs": text, "task": task})),
                422,
                "validation",
            );
        }
    }
    // Malformed bodies get TEI's shape: wrong types, empty, too many, a bad
    // prompt name, bad truncation, oversized, not JSON.
    for path in ["/embed_sparse", "/encode"] {
        tei_error(
            &post(srv.addr, path, &json!({"inputs": 5})),
            422,
            "validation",
        );
        tei_error(&post(srv.addr, path, &json!({})), 422, "validation");
        tei_error(
            &post(srv.addr, path, &json!({"inputs": ["a", 3]})),
            422,
            "validation",
        );
        tei_error(&post(srv.addr, path, &json!({"inputs": []})), 400, "empty");
        let many: Vec<String> = (0..33).map(|i| format!("text {i}")).collect();
        tei_error(
            &post(srv.addr, path, &json!({ "inputs": many })),
            413,
            "validation",
        );
        tei_error(
            &post(
                srv.addr,
                path,
                &json!({"inputs": "a", "truncation_direction": "middle"}),
            ),
            422,
            "validation",
        );
        tei_error(
            &post(srv.addr, path, &json!({"inputs": "a", "truncate": "yes"})),
            422,
            "validation",
        );
        tei_error(
            &request(srv.addr, "POST", path, b"{\"inputs\": [\"a\""),
            400,
            "validation",
        );
        let big = "x ".repeat(15_000);
        tei_error(
            &post(srv.addr, path, &json!({ "inputs": big })),
            413,
            "validation",
        );
    }
    // A prompt the model does not store (on /encode, where the model has
    // the output asked for).
    let msg = tei_error(
        &post(
            srv.addr,
            "/encode",
            &json!({"inputs": "a", "prompt_name": "nope"}),
        ),
        422,
        "validation",
    );
    assert!(msg.contains("prompt name 'nope'"), "{msg}");
    assert_eq!(get(srv.addr, "/health").status, 200);
}

/// Concurrent output-stage requests share engine calls and get the bits of
/// lone calls; a failing request in a shared call does not fail the others.
#[test]
fn concurrent_encode_requests_share_calls_bit_identically() {
    let Some(m) = arch("splade-tiny", "encode_batching") else {
        return;
    };
    let srv = start(&m, |c| c.max_batch_wait_us = 200_000);
    let refs = arch_reference("splade-tiny");
    let texts = texts_of(&refs, &(1..33).collect::<Vec<_>>());
    let e = engine(&m);
    let want = e
        .encode(&texts, &EncodeRequest::new(&[OutputKind::Sparse]))
        .unwrap();
    let long = vec!["garden river"; 200].join(" ");
    let addr = srv.addr;
    let answers: Vec<(usize, Resp)> = std::thread::scope(|s| {
        let mut hs = Vec::new();
        for (i, t) in texts.iter().enumerate() {
            hs.push(s.spawn(move || {
                (
                    i,
                    post(
                        addr,
                        "/encode",
                        &json!({"inputs": [t], "outputs": ["sparse"], "truncate": false}),
                    ),
                )
            }));
        }
        let bad = s.spawn(|| {
            post(
                addr,
                "/encode",
                &json!({"inputs": ["ok", long], "outputs": ["sparse"], "truncate": false}),
            )
        });
        let mut out: Vec<(usize, Resp)> = hs.into_iter().map(|h| h.join().unwrap()).collect();
        out.push((usize::MAX, bad.join().unwrap()));
        out
    });
    for (i, r) in answers {
        if i == usize::MAX {
            let msg = tei_error(&r, 413, "validation");
            assert!(msg.contains("text 1"), "{msg}");
            continue;
        }
        let v = ok(&r);
        let (ids, vals) = indexed_sparse(&v["data"][0]["sparse"]);
        let w = &want.sparse().unwrap()[i];
        assert_eq!(ids, w.indices, "text {i}");
        assert!(same(&vals, &w.values), "text {i}");
    }
    let metrics = String::from_utf8(get(srv.addr, "/metrics").body).unwrap();
    assert!(
        metrics.contains("route=\"/encode\",status=\"200\"} 32"),
        "{metrics}"
    );
}
