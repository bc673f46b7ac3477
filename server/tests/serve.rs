//! The server on 127.0.0.1 port 0, started and stopped by each test: the
//! routes' shapes and numbers (against the sentence-transformers reference
//! and the in-process engine), batching across requests, limits, bad input
//! of every kind, slow and vanishing clients, SIGTERM; Ollama's and
//! Cohere's embed APIs and the API keys (`apis/`); the replay of the server's
//! fuzz inputs (`fuzz_regressions/`).

mod apis;
mod common;
mod fuzz_regressions;

use std::io::{Read, Write};
use std::time::{Duration, Instant};

use base64::Engine as _;
use common::*;
use embedder::{Embedder, Options};
use serde_json::{json, Value};

fn engine(path: &std::path::Path) -> Embedder {
    Embedder::open(path, &Options::new().threads(2)).unwrap()
}

// ---------------------------------------------------------------- routes

#[test]
fn embed_matches_the_reference_and_the_engine_bit_for_bit() {
    let Some(m) = minilm("embed") else { return };
    let srv = start(&m, |_| {});
    let e = engine(&m);
    let cases = reference();
    let texts: Vec<&str> = cases.iter().take(24).map(|c| c.0.as_str()).collect();
    let want = e.embed(&texts).unwrap();
    // One request of 24 inputs, on both TEI routes.
    for path in ["/embed", "/"] {
        let r = post(srv.addr, path, &json!({ "inputs": texts }));
        assert_eq!(r.status, 200);
        assert_eq!(r.header("x-compute-type"), Some("cpu"));
        let rows = r.json();
        let rows = rows.as_array().unwrap();
        assert_eq!(rows.len(), texts.len());
        for (i, row) in rows.iter().enumerate() {
            let v = floats(row);
            assert!(same(&v, &want[i * 384..(i + 1) * 384]), "{path} row {i}");
            assert!(cosine(&v, &cases[i].2) > 0.9999, "{:?}", cases[i].0);
        }
    }
    // A single string is still a list of one vector.
    let r = post(srv.addr, "/embed", &json!({"inputs": texts[5]}));
    let rows = r.json();
    assert_eq!(rows.as_array().unwrap().len(), 1);
    assert!(same(&floats(&rows[0]), &want[5 * 384..6 * 384]));
    // Unknown fields are ignored.
    let r = post(
        srv.addr,
        "/embed",
        &json!({"inputs": texts[5], "whatever": [1, {"a": null}]}),
    );
    assert!(same(&floats(&r.json()[0]), &want[5 * 384..6 * 384]));
}

/// The decoder embedders through the server's `/embed`: Qwen3-Embedding's
/// `query` prompt and EmbeddingGemma's `document` prompt by name (Gemma
/// with Matryoshka `dimensions` 32), against their prompt references.
#[test]
fn decoder_embedders_take_their_prompts() {
    let dir = shared().join("reference/architectures");
    for (file, prompt, dims) in [
        ("qwen3-embedding-tiny", "query", None),
        ("embeddinggemma-tiny", "document", Some(32usize)),
    ] {
        let Some(m) = model(&format!("{file}.weights"), "decoder_prompts") else {
            return;
        };
        let srv = start(&m, |_| {});
        let text =
            std::fs::read_to_string(dir.join(format!("{file}_prompt_reference.jsonl"))).unwrap();
        let rows: Vec<Value> = text
            .lines()
            .filter(|l| !l.is_empty())
            .map(|l| serde_json::from_str(l).unwrap())
            .filter(|v: &Value| v["prompt_name"].as_str().unwrap_or("query") == prompt)
            .take(12)
            .collect();
        assert_eq!(rows.len(), 12, "{file}");
        let inputs: Vec<&str> = rows.iter().map(|r| r["text"].as_str().unwrap()).collect();
        let mut body = json!({"inputs": inputs, "prompt_name": prompt});
        if let Some(d) = dims {
            body["dimensions"] = json!(d);
        }
        let r = post(srv.addr, "/embed", &body);
        assert_eq!(r.status, 200, "{file}");
        let got: Vec<Vec<f32>> = r.json().as_array().unwrap().iter().map(floats).collect();
        assert_eq!(got.len(), rows.len());
        for (g, r) in got.iter().zip(&rows) {
            let mut want = floats(&r["embedding"]);
            want.truncate(dims.unwrap_or(want.len()));
            assert!(cosine(g, &want) > 0.99999, "{file} {:?}", r["text"]);
        }
    }
}

#[test]
fn embed_options_normalize_dimensions_truncation() {
    let Some(m) = minilm("embed_options") else {
        return;
    };
    let srv = start(&m, |_| {});
    let raw = Embedder::open(&m, &Options::new().threads(2).normalize(false)).unwrap();
    let cut = Embedder::open(&m, &Options::new().threads(2).dimensions(128)).unwrap();
    let text = "A man is playing guitar";
    let r = post(
        srv.addr,
        "/embed",
        &json!({"inputs": text, "normalize": false}),
    );
    assert!(same(&floats(&r.json()[0]), &raw.embed(&[text]).unwrap()));
    let r = post(
        srv.addr,
        "/embed",
        &json!({"inputs": text, "dimensions": 128}),
    );
    assert!(same(&floats(&r.json()[0]), &cut.embed(&[text]).unwrap()));
    let r = post(
        srv.addr,
        "/embed",
        &json!({"inputs": text, "dimensions": 0}),
    );
    tei_error(&r, 422, "validation");
    // A text over the model's 256 tokens: truncated by default, refused with
    // truncate false (413), and cut from the left when asked.
    let long = vec!["garden river"; 200].join(" ") + " violin";
    let r = post(srv.addr, "/embed", &json!({"inputs": long}));
    assert_eq!(r.status, 200);
    let msg = tei_error(
        &post(
            srv.addr,
            "/embed",
            &json!({"inputs": long, "truncate": false}),
        ),
        413,
        "validation",
    );
    assert!(msg.contains("max_seq_length 256"), "{msg}");
    let left = post(
        srv.addr,
        "/embed",
        &json!({"inputs": long, "truncation_direction": "left"}),
    );
    assert_eq!(left.status, 200);
    assert!(!same(&floats(&left.json()[0]), &floats(&r.json()[0])));
    let r = post(
        srv.addr,
        "/embed",
        &json!({"inputs": long, "truncation_direction": "up"}),
    );
    tei_error(&r, 422, "validation");
    // No such prompt.
    let r = post(
        srv.addr,
        "/embed",
        &json!({"inputs": "x", "prompt_name": "query"}),
    );
    let msg = tei_error(&r, 422, "validation");
    assert!(msg.contains("stores none"), "{msg}");
}

#[test]
fn openai_embeddings_float_base64_and_token_ids() {
    let Some(m) = minilm("openai") else { return };
    let srv = start(&m, |_| {});
    let all = reference();
    // Texts with words (OpenAI refuses "", and token-id inputs need ids).
    let cases: Vec<_> = all.iter().filter(|c| c.1.len() > 2).take(4).collect();
    let e = engine(&m);
    let texts: Vec<&str> = cases.iter().map(|c| c.0.as_str()).collect();
    let want = e.embed(&texts).unwrap();
    let ntok: usize = cases.iter().map(|c| c.1.len()).sum();
    for path in ["/v1/embeddings", "/embeddings"] {
        let r = post(
            srv.addr,
            path,
            &json!({"input": texts, "model": "text-embedding-3-small", "encoding_format": "float"}),
        );
        assert_eq!(r.status, 200);
        let v = r.json();
        assert_eq!(v["object"], "list");
        assert_eq!(v["model"], "all-MiniLM-L6-v2");
        assert_eq!(v["usage"]["prompt_tokens"], ntok);
        assert_eq!(v["usage"]["total_tokens"], ntok);
        for (i, d) in v["data"].as_array().unwrap().iter().enumerate() {
            assert_eq!(d["object"], "embedding");
            assert_eq!(d["index"], i);
            assert!(same(
                &floats(&d["embedding"]),
                &want[i * 384..(i + 1) * 384]
            ));
        }
    }
    // base64: little-endian f32 bytes.
    let r = post(
        srv.addr,
        "/v1/embeddings",
        &json!({"input": texts, "model": "m", "encoding_format": "base64"}),
    );
    let v = r.json();
    for (i, d) in v["data"].as_array().unwrap().iter().enumerate() {
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(d["embedding"].as_str().unwrap())
            .unwrap();
        let got: Vec<f32> = bytes
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect();
        assert!(same(&got, &want[i * 384..(i + 1) * 384]));
    }
    // Token ids (the reference's, without [CLS]/[SEP]): refused by default
    // (OpenAI's clients send tiktoken ids), with a message naming the model,
    // the LangChain setting that sends texts, and the flag; in every form.
    let ids: Vec<Vec<u32>> = cases
        .iter()
        .map(|c| c.1[1..c.1.len() - 1].to_vec())
        .collect();
    for (path, input) in [
        ("/v1/embeddings", json!(ids)),
        ("/embeddings", json!(ids[0])),
        ("/v1/embeddings", json!(["a text", ids[1]])),
    ] {
        let msg = openai_error(
            &post(srv.addr, path, &json!({"input": input, "model": "m"})),
            422,
            "validation",
        );
        for part in [
            "own vocabulary ('all-MiniLM-L6-v2')",
            "tiktoken",
            "check_embedding_ctx_length=False",
            "--accept-token-ids",
        ] {
            assert!(msg.contains(part), "{path}: {msg}");
        }
    }
    // TEI's /embed takes them as ever.
    let r = post(srv.addr, "/embed", &json!({ "inputs": ids }));
    assert!(same(&floats(&r.json()[0]), &want[..384]));
    // With --accept-token-ids: [int] and [[int]].
    drop(srv);
    let srv = start(&m, |c| c.accept_token_ids = true);
    let r = post(
        srv.addr,
        "/v1/embeddings",
        &json!({"input": ids, "model": "m"}),
    );
    for (i, d) in r.json()["data"].as_array().unwrap().iter().enumerate() {
        assert!(same(
            &floats(&d["embedding"]),
            &want[i * 384..(i + 1) * 384]
        ));
    }
    let r = post(
        srv.addr,
        "/v1/embeddings",
        &json!({"input": ids[0], "model": "m"}),
    );
    assert!(same(
        &floats(&r.json()["data"][0]["embedding"]),
        &want[..384]
    ));
    // Ids out of range, an empty string, a bad format: OpenAI's error body.
    let msg = openai_error(
        &post(srv.addr, "/v1/embeddings", &json!({"input": [[5, 30522]]})),
        422,
        "validation",
    );
    assert!(msg.contains("30522"), "{msg}");
    openai_error(
        &post(srv.addr, "/v1/embeddings", &json!({"input": ""})),
        400,
        "empty",
    );
    openai_error(
        &post(
            srv.addr,
            "/v1/embeddings",
            &json!({"input": "a", "encoding_format": "hex"}),
        ),
        422,
        "validation",
    );
    // dimensions
    let r = post(
        srv.addr,
        "/v1/embeddings",
        &json!({"input": "a", "dimensions": 32}),
    );
    assert_eq!(
        r.json()["data"][0]["embedding"].as_array().unwrap().len(),
        32
    );
}

#[test]
fn tokenize_decode_similarity_info_health_metrics() {
    let Some(m) = minilm("tokenize") else { return };
    let srv = start(&m, |_| {});
    let cases = reference();
    let with_words: Vec<&(String, Vec<u32>, Vec<f32>)> =
        cases.iter().filter(|c| c.1.len() > 4).take(6).collect();
    let texts: Vec<&str> = with_words.iter().map(|c| c.0.as_str()).collect();
    let r = post(srv.addr, "/tokenize", &json!({ "inputs": texts }));
    assert_eq!(r.status, 200);
    let v = r.json();
    for (c, toks) in with_words.iter().zip(v.as_array().unwrap()) {
        let ids: Vec<u32> = toks
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["id"].as_u64().unwrap() as u32)
            .collect();
        if c.1.len() < 256 {
            assert_eq!(ids, c.1, "{:?}", c.0);
        }
        assert_eq!(toks[0]["text"], "[CLS]");
        for t in toks.as_array().unwrap() {
            let special = [0, 100, 101, 102, 103].contains(&t["id"].as_u64().unwrap());
            assert_eq!(t["special"], special, "{t}");
        }
    }
    let r = post(
        srv.addr,
        "/tokenize",
        &json!({"inputs": "hello world", "add_special_tokens": false}),
    );
    let v = r.json();
    assert_eq!(v[0].as_array().unwrap().len(), 2);
    assert_eq!(v[0][0]["text"], "hello");
    // Byte offsets into the input.
    let r = post(srv.addr, "/tokenize", &json!({"inputs": "Héllo, wörld"}));
    let spans: Vec<(Value, Value)> = r.json()[0]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| (t["start"].clone(), t["stop"].clone()))
        .collect();
    assert_eq!(
        spans,
        vec![
            (Value::Null, Value::Null),
            (json!(0), json!(6)),
            (json!(6), json!(7)),
            (json!(8), json!(14)),
            (Value::Null, Value::Null),
        ]
    );
    // decode
    let r = post(
        srv.addr,
        "/decode",
        &json!({"ids": [[101, 7592, 2088, 102]]}),
    );
    assert_eq!(r.json(), json!(["hello world"]));
    // similarity: the cosine of the engine's vectors.
    let e = engine(&m);
    let (src, s) = (
        "A man is playing guitar",
        ["A man plays a guitar", "Stocks fell"],
    );
    let r = post(
        srv.addr,
        "/similarity",
        &json!({"inputs": {"source_sentence": src, "sentences": s}}),
    );
    assert_eq!(r.status, 200);
    let sims = floats(&r.json());
    let v = e.embed(&[src, s[0], s[1]]).unwrap();
    for (k, &sim) in sims.iter().enumerate() {
        let want = embedder::cosine_similarity(&v[..384], &v[(k + 1) * 384..(k + 2) * 384]);
        assert_eq!(sim.to_bits(), want.to_bits());
    }
    assert!(sims[0] > sims[1]);
    // info
    let v = get(srv.addr, "/info").json();
    assert_eq!(v["model_id"], "all-MiniLM-L6-v2");
    assert_eq!(v["max_input_length"], 256);
    assert_eq!(v["max_batch_tokens"], 16384);
    assert_eq!(v["max_client_batch_size"], 32);
    assert_eq!(v["models"][0]["dim"], 384);
    assert_eq!(v["model_type"]["embedding"]["pooling"], "mean");
    assert_eq!(v["models"][0]["model_id"], "all-MiniLM-L6-v2");
    assert!(v["models"][0].get("path").is_none(), "{v}");
    assert!(!v.to_string().contains(".weights"), "{v}");
    assert_eq!(get(srv.addr, "/health").status, 200);
    assert_eq!(get(srv.addr, "/ping").status, 200);
    // metrics count what happened.
    let r = get(srv.addr, "/metrics");
    assert_eq!(r.status, 200);
    assert!(r.header("content-type").unwrap().starts_with("text/plain"));
    let text = String::from_utf8(r.body).unwrap();
    for needle in [
        "embd_requests_total{route=\"/similarity\",status=\"200\"} 1",
        "embd_requests_total{route=\"/tokenize\",status=\"200\"} 3",
        "embd_inputs_total 3",
        "embd_batch_size_count",
        "embd_queue_depth 0",
        "embd_errors_total{type=\"validation\"} 0",
        "embd_request_duration_seconds_bucket{route=\"/similarity\",le=\"+Inf\"} 1",
    ] {
        assert!(text.contains(needle), "{needle} not in\n{text}");
    }
}

#[test]
fn rerank_routes_name_the_missing_capability() {
    let Some(m) = minilm("rerank") else { return };
    let srv = start(&m, |_| {});
    let msg = tei_error(
        &post(
            srv.addr,
            "/rerank",
            &json!({"query": "q", "texts": ["a", "b"]}),
        ),
        424,
        "backend",
    );
    assert!(msg.contains("no re-ranker model"), "{msg}");
    let msg = openai_error(
        &post(
            srv.addr,
            "/v1/rerank",
            &json!({"model": "m", "query": "q", "documents": ["a"]}),
        ),
        424,
        "backend",
    );
    assert!(msg.contains("no re-ranker model"), "{msg}");
    // A malformed rerank request is still a validation error first.
    tei_error(
        &post(srv.addr, "/rerank", &json!({"query": 1})),
        422,
        "validation",
    );
}

/// The reference cross-encoder (scripts/fetch_reranker.sh) beside MiniLM,
/// with CrossEncoder's max_length 256 and room for the 40 documents.
fn rerank_server(test: &str) -> Option<embd_server::Handle> {
    let r = model("minilm-reranker.weights", test)?;
    let m = minilm(test)?;
    Some(start(&r, |c| {
        c.models = vec![
            format!("rr={}", r.display()),
            format!("emb={}", m.display()),
        ];
        c.max_input_length = Some(256);
        c.max_client_batch_size = 64;
    }))
}

fn read_json_file(name: &str) -> Value {
    let p = shared().join("reference/families").join(name);
    serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap()
}

#[test]
fn rerank_routes_match_the_cross_encoder_reference() {
    let Some(srv) = rerank_server("rerank_reference") else {
        return;
    };
    // CrossEncoder.rank of one query over 40 documents.
    let rank = read_json_file("minilm-reranker_rank.json");
    let docs: Vec<&str> = rank["documents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d.as_str().unwrap())
        .collect();
    let want = rank["ranking"].as_array().unwrap();
    let r = post(
        srv.addr,
        "/rerank",
        &json!({"query": rank["query"], "texts": docs, "return_text": true}),
    );
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    assert!(r.header("x-compute-tokens").is_some());
    let got = r.json();
    let got = got.as_array().unwrap();
    assert_eq!(got.len(), docs.len());
    for (g, w) in got.iter().zip(want) {
        assert_eq!(g["index"], w["corpus_id"]);
        let (s, ws) = (g["score"].as_f64().unwrap(), w["score"].as_f64().unwrap());
        assert!(
            (s - ws).abs() <= 1e-5,
            "document {}: {s} vs {ws}",
            w["corpus_id"]
        );
        assert_eq!(
            g["text"],
            json!(docs[g["index"].as_u64().unwrap() as usize])
        );
    }
    // The Jina / Cohere shape: top_n, documents as strings or objects.
    let objects: Vec<Value> = docs.iter().map(|d| json!({"text": d})).collect();
    for documents in [json!(docs), json!(objects)] {
        let r = post(
            srv.addr,
            "/v1/rerank",
            &json!({"model": "rr", "query": rank["query"], "documents": documents,
                "top_n": 10, "return_documents": true}),
        );
        assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
        let v = r.json();
        assert_eq!(v["model"], "rr");
        assert_eq!(v["object"], "list");
        assert!(v["usage"]["prompt_tokens"].as_u64().unwrap() > 40);
        assert_eq!(v["usage"]["prompt_tokens"], v["usage"]["total_tokens"]);
        let res = v["results"].as_array().unwrap();
        assert_eq!(res.len(), 10);
        for (g, w) in res.iter().zip(want) {
            assert_eq!(g["index"], w["corpus_id"]);
            let s = g["relevance_score"].as_f64().unwrap();
            assert!((s - w["score"].as_f64().unwrap()).abs() <= 1e-5);
            let i = g["index"].as_u64().unwrap() as usize;
            assert_eq!(g["document"]["text"], json!(docs[i]));
        }
    }
    // Cohere's v2 shape: id, results, meta; documents only when asked for.
    let mut ids = Vec::new();
    for (documents, with_docs) in [(json!(docs), true), (json!(objects), false)] {
        let r = post(
            srv.addr,
            "/v2/rerank",
            &json!({"model": "rr", "query": rank["query"], "documents": documents,
                "top_n": 7, "return_documents": with_docs}),
        );
        assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
        assert!(r.header("x-compute-tokens").is_some());
        let v = r.json();
        let id = v["id"].as_str().unwrap().to_string();
        assert_eq!(id.len(), 36, "{id}");
        assert_eq!(id.as_bytes()[14], b'4', "{id}");
        ids.push(id);
        assert_eq!(v["meta"]["api_version"]["version"], "2");
        assert!(v["meta"]["tokens"]["input_tokens"].as_u64().unwrap() > 40);
        assert!(v.get("object").is_none() && v.get("model").is_none(), "{v}");
        let res = v["results"].as_array().unwrap();
        assert_eq!(res.len(), 7);
        for (g, w) in res.iter().zip(want) {
            assert_eq!(g["index"], w["corpus_id"]);
            let s = g["relevance_score"].as_f64().unwrap();
            assert!((s - w["score"].as_f64().unwrap()).abs() <= 1e-5);
            let i = g["index"].as_u64().unwrap() as usize;
            if with_docs {
                assert_eq!(g["document"]["text"], json!(docs[i]));
            } else {
                assert!(g.get("document").is_none(), "{g}");
            }
        }
    }
    assert_ne!(ids[0], ids[1]);
    // Pair by pair against CrossEncoder.predict.
    pairs_match_reference(
        srv.addr,
        &shared().join("reference/families/minilm-reranker_reference.jsonl"),
        5,
    );
    // The embedding routes go to the embedder, wherever it is in the list;
    // naming the reranker there is a 424 that says so.
    let r = post(srv.addr, "/embed", &json!({"inputs": "a text"}));
    assert_eq!(r.status, 200);
    let msg = tei_error(
        &post(
            srv.addr,
            "/embed",
            &json!({"inputs": "a text", "model": "rr"}),
        ),
        424,
        "backend",
    );
    assert!(
        msg.contains("model 'rr' is a re-ranker model, not an embedding model"),
        "{msg}"
    );
    let msg = tei_error(
        &post(
            srv.addr,
            "/rerank",
            &json!({"query": "q", "texts": ["a"], "model": "emb"}),
        ),
        424,
        "backend",
    );
    assert!(
        msg.contains("model 'emb' is an embedding model, not a re-ranker model"),
        "{msg}"
    );
    let info = get(srv.addr, "/info").json();
    assert!(
        info["model_type"]["reranker"]["id2label"].is_object(),
        "{info}"
    );
    assert_eq!(
        info["models"][1]["model_type"]["embedding"]["pooling"],
        "mean"
    );
    assert_eq!(info["max_input_length"], 256);
    // Names, never a path on the server's disk.
    assert_eq!(info["models"][0]["model_id"], "rr");
    assert_eq!(info["models"][1]["model_id"], "emb");
    let text = info.to_string();
    assert!(
        !text.contains(".weights") && !text.contains("models/"),
        "{text}"
    );
}

/// An LLM reranker (Qwen3-Reranker, tiny) on the three rerank routes: each
/// reference pair's score, under its instruction (`prompt`, or
/// `instruction`) where the line has one.
#[test]
fn rerank_routes_take_an_llm_rerankers_prompt() {
    let Some(r) = model("qwen3-reranker-tiny.weights", "rerank_qwen3") else {
        return;
    };
    let srv = start(&r, |c| c.max_client_batch_size = 64);
    let p = shared().join("reference/architectures/qwen3-reranker-tiny_reference.jsonl");
    let lines = std::fs::read_to_string(p).unwrap();
    let lines: Vec<Value> = lines
        .lines()
        .filter(|l| !l.is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 243);
    for (k, c) in lines
        .iter()
        .enumerate()
        .filter(|(k, _)| k % 7 == 0 || *k >= 235)
    {
        let want = c["score"].as_f64().unwrap();
        let mut tei = json!({"query": c["query"], "texts": [c["passage"]]});
        let mut v1 = json!({"query": c["query"], "documents": [c["passage"]]});
        if let Some(p) = c.get("prompt") {
            tei["prompt"] = p.clone();
            v1["instruction"] = p.clone();
        }
        let s = post(srv.addr, "/rerank", &tei).json()[0]["score"]
            .as_f64()
            .unwrap();
        assert!((s - want).abs() <= 1e-5, "line {k}: {s} vs {want}");
        for route in ["/v1/rerank", "/v2/rerank"] {
            let v = post(srv.addr, route, &v1).json();
            let s = v["results"][0]["relevance_score"].as_f64().unwrap();
            assert!((s - want).abs() <= 1e-5, "{route} line {k}: {s} vs {want}");
        }
    }
}

/// A DeBERTa-v2 cross-encoder (tiny, disentangled attention) on the three
/// rerank routes: CrossEncoder.rank's order and scores, and every third
/// reference pair's score and logit.
#[test]
fn rerank_routes_serve_a_deberta_cross_encoder() {
    let Some(r) = model("deberta-reranker-tiny.weights", "rerank_deberta") else {
        return;
    };
    let srv = start(&r, |c| c.max_client_batch_size = 64);
    let enc = shared().join("reference/encoders");
    let rank: Value = serde_json::from_str(
        &std::fs::read_to_string(enc.join("deberta-reranker-tiny_rank.json")).unwrap(),
    )
    .unwrap();
    let docs = rank["documents"].as_array().unwrap();
    let want = rank["ranking"].as_array().unwrap();
    // A document whose text another repeats may take that one's place (ties
    // by index here, by rounding noise in the reference's padded batch).
    let same_doc = |g: &Value, w: &Value| {
        let (gi, wi) = (
            g["index"].as_u64().unwrap(),
            w["corpus_id"].as_u64().unwrap(),
        );
        gi == wi || docs[gi as usize] == docs[wi as usize]
    };
    let got = post(
        srv.addr,
        "/rerank",
        &json!({"query": rank["query"], "texts": docs}),
    )
    .json();
    let got = got.as_array().unwrap();
    assert_eq!(got.len(), docs.len());
    for (g, w) in got.iter().zip(want) {
        assert!(same_doc(g, w), "{g} vs {w}");
        let (s, ws) = (g["score"].as_f64().unwrap(), w["score"].as_f64().unwrap());
        assert!((s - ws).abs() <= 1e-5, "{s} vs {ws}");
    }
    for route in ["/v1/rerank", "/v2/rerank"] {
        let body = json!({"query": rank["query"], "documents": docs, "top_n": 10});
        let v = post(srv.addr, route, &body).json();
        let res = v["results"].as_array().unwrap();
        assert_eq!(res.len(), 10, "{route}");
        for (g, w) in res.iter().zip(want) {
            assert!(same_doc(g, w), "{route}: {g} vs {w}");
            let s = g["relevance_score"].as_f64().unwrap();
            assert!((s - w["score"].as_f64().unwrap()).abs() <= 1e-5, "{route}");
        }
    }
    pairs_match_reference(
        srv.addr,
        &enc.join("deberta-reranker-tiny_reference.jsonl"),
        3,
    );
}

/// Every `step`-th pair of a CrossEncoder reference file on `/rerank`: its
/// score (sigmoid) within 1e-5 and, with `raw_scores`, its logit within 1e-4.
fn pairs_match_reference(addr: std::net::SocketAddr, path: &std::path::Path, step: usize) {
    let lines = std::fs::read_to_string(path).unwrap();
    for l in lines.lines().filter(|l| !l.is_empty()).step_by(step) {
        let c: Value = serde_json::from_str(l).unwrap();
        let body = json!({"query": c["query"], "texts": [c["passage"]]});
        let s = post(addr, "/rerank", &body).json()[0]["score"]
            .as_f64()
            .unwrap();
        assert!((s - c["score"].as_f64().unwrap()).abs() <= 1e-5, "{l}");
        let mut raw = body.clone();
        raw["raw_scores"] = json!(true);
        let lg = post(addr, "/rerank", &raw).json()[0]["score"]
            .as_f64()
            .unwrap();
        assert!((lg - c["logit"].as_f64().unwrap()).abs() <= 1e-4, "{l}");
    }
}

#[test]
fn rerank_bad_input_gets_clear_errors() {
    let Some(srv) = rerank_server("rerank_bad_input") else {
        return;
    };
    let q = "what is a slice";
    let cases: Vec<(&str, Value, u16, &str)> = vec![
        ("/rerank", json!({"query": q, "texts": []}), 400, "empty"),
        (
            "/rerank",
            json!({"query": "", "texts": ["a"]}),
            422,
            "validation",
        ),
        (
            "/rerank",
            json!({"query": "  ", "texts": ["a"]}),
            422,
            "validation",
        ),
        (
            "/rerank",
            json!({"query": q, "texts": [1]}),
            422,
            "validation",
        ),
        (
            "/rerank",
            json!({"query": q, "texts": ["a"], "truncation_direction": "left"}),
            422,
            "validation",
        ),
        (
            "/rerank",
            json!({"query": q, "texts": vec!["a"; 65]}),
            413,
            "validation",
        ),
        (
            "/rerank",
            json!({"query": q, "texts": ["word ".repeat(400)], "truncate": false}),
            413,
            "validation",
        ),
    ];
    for (path, body, status, kind) in cases {
        let msg = tei_error(&post(srv.addr, path, &body), status, kind);
        assert!(!msg.is_empty());
    }
    // A prompt for a cross-encoder without a prompt template: named, 422.
    let msg = tei_error(
        &post(
            srv.addr,
            "/rerank",
            &json!({"query": q, "texts": ["a"], "prompt": "x"}),
        ),
        422,
        "validation",
    );
    assert!(msg.contains("takes no prompt"), "{msg}");
    let msg = openai_error(
        &post(
            srv.addr,
            "/v1/rerank",
            &json!({"query": q, "documents": ["a"], "instruction": "x"}),
        ),
        422,
        "validation",
    );
    assert!(msg.contains("takes no prompt"), "{msg}");
    for (body, status, code) in [
        (
            json!({"query": q, "documents": ["a"], "top_n": 0}),
            422,
            "validation",
        ),
        (
            json!({"query": q, "documents": [{"txt": "a"}]}),
            422,
            "validation",
        ),
        (json!({"query": q, "documents": []}), 400, "empty"),
    ] {
        openai_error(&post(srv.addr, "/v1/rerank", &body), status, code);
    }
    // /v2/rerank: the same checks, in Cohere's error body {"message"}.
    for (body, status) in [
        (json!({"query": q, "documents": ["a"], "top_n": 0}), 422),
        (json!({"query": q, "documents": [{"txt": "a"}]}), 422),
        (json!({"query": q, "documents": []}), 400),
        (json!({"query": q}), 422),
        (json!({"query": q, "documents": vec!["a"; 65]}), 413),
    ] {
        let r = post(srv.addr, "/v2/rerank", &body);
        assert_eq!(r.status, status, "{body}");
        let v = r.json();
        assert!(v["message"].as_str().is_some_and(|m| !m.is_empty()), "{v}");
        assert!(v.get("error").is_none(), "{v}");
    }
    let r = post(
        srv.addr,
        "/v2/rerank",
        &json!({"query": q, "documents": ["a"], "model": "emb"}),
    );
    assert_eq!(r.status, 424);
    // Long pairs are cut as CrossEncoder cuts them; a NUL is text; top_n
    // beyond the documents gives them all.
    let long = "word ".repeat(400);
    let r = post(
        srv.addr,
        "/rerank",
        &json!({"query": q, "texts": [long, "a\u{0}b"]}),
    );
    assert_eq!(r.status, 200);
    let r = post(
        srv.addr,
        "/v1/rerank",
        &json!({"query": q, "documents": ["a", "b"], "top_n": 5}),
    );
    assert_eq!(r.json()["results"].as_array().unwrap().len(), 2);
    assert_eq!(get(srv.addr, "/health").status, 200);
}

#[test]
fn embed_all_gives_token_vectors_that_pool_to_the_reference() {
    let Some(m) = minilm("embed_all") else { return };
    let srv = start(&m, |_| {});
    let e = engine(&m);
    let cases = reference();
    let texts: Vec<&str> = cases.iter().take(16).map(|c| c.0.as_str()).collect();
    let r = post(srv.addr, "/embed_all", &json!({ "inputs": texts }));
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    let got = r.json();
    let got = got.as_array().unwrap();
    let want = e
        .embed_tokens_with(&texts, &embedder::CallOptions::default(), None)
        .unwrap();
    for (i, rows) in got.iter().enumerate() {
        let rows = rows.as_array().unwrap();
        // One vector per token of the reference ids, [CLS] and [SEP] included.
        assert_eq!(rows.len(), cases[i].1.len());
        let flat: Vec<f32> = rows.iter().flat_map(floats).collect();
        assert!(same(&flat, &want[i]), "input {i}");
        // all-MiniLM-L6-v2 mean-pools every token and normalizes.
        let mut mean = vec![0.0f64; 384];
        for r in flat.chunks_exact(384) {
            for (a, &x) in mean.iter_mut().zip(r) {
                *a += f64::from(x);
            }
        }
        let n = mean.iter().map(|x| x * x).sum::<f64>().sqrt();
        for (a, b) in mean.iter().zip(&cases[i].2) {
            assert!((a / n - f64::from(*b)).abs() <= 1e-5, "input {i}");
        }
    }
    // Options: dimensions and normalize per token; errors as for /embed.
    let r = post(
        srv.addr,
        "/embed_all",
        &json!({"inputs": "a b c", "dimensions": 32, "normalize": true}),
    );
    let rows = r.json();
    assert_eq!(rows[0].as_array().unwrap().len(), 5);
    let v = floats(&rows[0][1]);
    assert_eq!(v.len(), 32);
    assert!((v.iter().map(|x| x * x).sum::<f32>() - 1.0).abs() < 1e-5);
    tei_error(
        &post(srv.addr, "/embed_all", &json!({"inputs": []})),
        400,
        "empty",
    );
    tei_error(
        &post(
            srv.addr,
            "/embed_all",
            &json!({"inputs": "x", "dimensions": 0}),
        ),
        422,
        "validation",
    );
}

#[test]
fn openapi_document_lists_exactly_the_routes() {
    let Some(m) = minilm("openapi") else { return };
    let srv = start(&m, |_| {});
    let doc = get(srv.addr, "/openapi.json").json();
    assert_eq!(doc["openapi"], "3.0.3");
    let paths = doc["paths"].as_object().unwrap();
    let mut in_doc: Vec<(String, String)> = Vec::new();
    for (p, item) in paths {
        for m in item.as_object().unwrap().keys() {
            in_doc.push((m.to_ascii_uppercase(), p.clone()));
        }
    }
    in_doc.sort();
    let mut routes: Vec<(String, String)> = embd_server::routes::ROUTES
        .iter()
        .map(|r| (r.method.to_string(), r.path.to_string()))
        .collect();
    routes.sort();
    assert_eq!(in_doc, routes);
    // Every listed route is served with its method (never 404/405), and
    // answers with a status the document lists.
    for (method, path) in &routes {
        let r = request(srv.addr, method, path, b"{}");
        assert!(
            r.status != 404 && r.status != 405,
            "{method} {path}: {}",
            r.status
        );
        let responses = &paths[path][method.to_ascii_lowercase()]["responses"];
        assert!(
            responses.get(r.status.to_string()).is_some(),
            "{method} {path} answered {} which the document does not list",
            r.status
        );
    }
    // And nothing else is.
    assert_eq!(get(srv.addr, "/v2/embeddings").status, 404);
    tei_error(&get(srv.addr, "/embed"), 405, "not_found");
}

// ---------------------------------------------------------------- batching

#[test]
fn concurrent_requests_are_batched_and_bit_identical_to_lone_calls() {
    let Some(m) = minilm("batching") else { return };
    // Hold each engine call 200 ms for more requests, so that concurrent ones
    // surely share calls.
    let srv = start(&m, |c| c.max_batch_wait_us = 200_000);
    let e = engine(&m);
    let cases = reference();
    let texts: Vec<String> = cases.iter().take(32).map(|c| c.0.clone()).collect();
    let addr = srv.addr;
    let results: Vec<(usize, Vec<f32>)> = std::thread::scope(|s| {
        let hs: Vec<_> = texts
            .iter()
            .enumerate()
            .map(|(i, t)| {
                s.spawn(move || {
                    let r = post(addr, "/embed", &json!({"inputs": t}));
                    assert_eq!(r.status, 200);
                    (i, floats(&r.json()[0]))
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for (i, v) in results {
        let lone = e.embed(&[texts[i].as_str()]).unwrap();
        assert!(same(&v, &lone), "text {i}");
    }
    // Fewer engine calls than requests: they were batched.
    let text = String::from_utf8(get(addr, "/metrics").body).unwrap();
    let calls: u64 = text
        .lines()
        .find_map(|l| l.strip_prefix("embd_batch_size_count "))
        .unwrap()
        .parse()
        .unwrap();
    assert!(calls < 32, "{calls} engine calls for 32 requests");
}

#[test]
fn a_token_budget_splits_calls_and_mixed_options_do_not_mix() {
    let Some(m) = minilm("budget") else { return };
    let srv = start(&m, |c| {
        c.max_batch_tokens = 64;
        c.max_batch_wait_us = 100_000;
    });
    let e = engine(&m);
    let raw = Embedder::open(&m, &Options::new().threads(2).normalize(false)).unwrap();
    let cases = reference();
    let texts: Vec<String> = cases.iter().take(16).map(|c| c.0.clone()).collect();
    let addr = srv.addr;
    std::thread::scope(|s| {
        for (i, t) in texts.iter().enumerate() {
            let (e, raw) = (&e, &raw);
            s.spawn(move || {
                let normalize = i % 2 == 0;
                let r = post(
                    addr,
                    "/embed",
                    &json!({"inputs": t, "normalize": normalize}),
                );
                assert_eq!(r.status, 200);
                let want = if normalize { e } else { raw }
                    .embed(&[t.as_str()])
                    .unwrap();
                assert!(same(&floats(&r.json()[0]), &want), "text {i}");
            });
        }
    });
}

#[test]
fn several_models_by_name() {
    let Some(a) = minilm("models") else { return };
    let Some(b) = model("all-mpnet-base-v2.weights", "models") else {
        return;
    };
    let mut cfg = embd_server::Config::for_model(format!("mini={}", a.display()));
    cfg.models.push(format!("mpnet={}", b.display()));
    cfg.threads = Some(2);
    let srv = embd_server::spawn(cfg).unwrap();
    let dim = |model: Option<&str>| {
        let mut body = json!({"inputs": "hello"});
        if let Some(m) = model {
            body["model"] = json!(m);
        }
        post(srv.addr, "/embed", &body).json()[0]
            .as_array()
            .unwrap()
            .len()
    };
    assert_eq!(dim(None), 384);
    assert_eq!(dim(Some("mini")), 384);
    assert_eq!(dim(Some("mpnet")), 768);
    assert_eq!(dim(Some("unknown")), 384);
    let v = post(
        srv.addr,
        "/v1/embeddings",
        &json!({"input": "x", "model": "mpnet"}),
    )
    .json();
    assert_eq!(v["model"], "mpnet");
    let info = get(srv.addr, "/info").json();
    assert_eq!(info["models"].as_array().unwrap().len(), 2);
    // Duplicate names are refused at start.
    let mut cfg = embd_server::Config::for_model(format!("x={}", a.display()));
    cfg.models.push(format!("x={}", a.display()));
    let err = embd_server::spawn(cfg).err().unwrap();
    assert!(err.contains("two models are named 'x'"), "{err}");
}

// ---------------------------------------------------------------- limits

#[test]
fn limits_answer_413_and_429() {
    let Some(m) = minilm("limits") else { return };
    let srv = start(&m, |c| {
        c.max_client_batch_size = 4;
        c.payload_limit = 10_000;
        c.max_concurrent_requests = 1;
    });
    let msg = tei_error(
        &post(
            srv.addr,
            "/embed",
            &json!({"inputs": ["a", "b", "c", "d", "e"]}),
        ),
        413,
        "validation",
    );
    assert!(
        msg.contains("batch size 5 > maximum allowed batch size 4"),
        "{msg}"
    );
    assert_eq!(
        post(srv.addr, "/embed", &json!({"inputs": ["a", "b", "c", "d"]})).status,
        200
    );
    let big = "word ".repeat(3000);
    let msg = tei_error(
        &post(srv.addr, "/embed", &json!({ "inputs": big })),
        413,
        "validation",
    );
    assert!(msg.contains("payload limit of 10000"), "{msg}");
    openai_error(
        &post(srv.addr, "/v1/embeddings", &json!({ "input": big })),
        413,
        "validation",
    );
    // One request holds the only permit (its body is slow to come); the next is 429.
    let mut slow = connect(srv.addr);
    slow.write_all(
        b"POST /embed HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 20\r\n\r\n{\"inp",
    )
    .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let r = post(srv.addr, "/embed", &json!({"inputs": "a"}));
    tei_error(&r, 429, "overloaded");
    openai_error(
        &post(srv.addr, "/v1/embeddings", &json!({"input": "a"})),
        429,
        "overloaded",
    );
    // Non-inference routes still answer.
    assert_eq!(get(srv.addr, "/health").status, 200);
    slow.write_all(b"uts\": \"hello\"} ").unwrap();
    let r = read_response(&mut slow);
    assert_eq!(r.status, 200, "{:?}", String::from_utf8_lossy(&r.body));
    assert_eq!(
        post(srv.addr, "/embed", &json!({"inputs": "a"})).status,
        200
    );
}

/// `POST path` with `body` and these extra header lines (each ending in
/// `\r\n`), without the default Content-Type.
fn with_headers(addr: std::net::SocketAddr, path: &str, headers: &str, body: &[u8]) -> Resp {
    let mut r = format!(
        "POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n{headers}Content-Length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    r.extend_from_slice(body);
    raw(addr, &r)
}

const JSON: &str = "Content-Type: application/json\r\n";

fn gzip(b: &[u8]) -> Vec<u8> {
    use flate2::write::GzEncoder;
    let mut e = GzEncoder::new(Vec::new(), flate2::Compression::best());
    e.write_all(b).unwrap();
    e.finish().unwrap()
}

#[test]
fn bodies_must_be_json_by_content_type() {
    let Some(m) = minilm("content_type") else {
        return;
    };
    let srv = start(&m, |_| {});
    let a = srv.addr;
    let body = br#"{"inputs": "a cat"}"#;
    for h in [
        "",
        "Content-Type: text/plain\r\n",
        "Content-Type: application/x-www-form-urlencoded\r\n",
    ] {
        let msg = tei_error(&with_headers(a, "/embed", h, body), 415, "validation");
        assert!(msg.contains("application/json"), "{msg}");
    }
    let r = with_headers(
        a,
        "/v1/embeddings",
        "Content-Type: text/plain\r\n",
        br#"{"input": "a cat"}"#,
    );
    openai_error(&r, 415, "validation");
    for h in [
        JSON,
        "Content-Type: application/json; charset=utf-8\r\n",
        "content-type: Application/JSON\r\n",
    ] {
        assert_eq!(with_headers(a, "/embed", h, body).status, 200, "{h}");
    }
    // The GET routes read no body.
    assert_eq!(raw(a, b"GET /info HTTP/1.1\r\nHost: x\r\n\r\n").status, 200);
}

#[test]
fn a_declared_length_over_the_limit_is_refused_before_the_body() {
    let Some(m) = minilm("content_length") else {
        return;
    };
    let srv = start(&m, |c| c.read_timeout_secs = 5);
    // 50 MB declared, a few bytes sent: 413 at once (not after reading 2 MB
    // or waiting for the read timeout), and the connection closes.
    let t = Instant::now();
    let r = raw(
        srv.addr,
        b"POST /embed HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n\
          Content-Length: 50000000\r\n\r\n{\"inputs\": \"",
    );
    assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
    let msg = tei_error(&r, 413, "validation");
    assert!(msg.contains("50000000") && msg.contains("2000000"), "{msg}");
    assert_eq!(r.header("connection"), Some("close"));
    let r = raw(
        srv.addr,
        b"POST /v1/embeddings HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n\
          Content-Length: 2000001\r\n\r\n{",
    );
    openai_error(&r, 413, "validation");
    // At the limit, the body is read.
    let mut b = br#"{"inputs": "a cat"}"#.to_vec();
    b.resize(2_000_000, b' ');
    assert_eq!(request(srv.addr, "POST", "/embed", &b).status, 200);
}

#[test]
fn gzip_and_deflate_bodies_are_decoded_within_the_limit() {
    let Some(m) = minilm("content_encoding") else {
        return;
    };
    let srv = start(&m, |c| c.payload_limit = 100_000);
    let a = srv.addr;
    let plain = json!({"inputs": ["a cat sits outside", "a man plays guitar"]}).to_string();
    let want = post(a, "/embed", &serde_json::from_str(&plain).unwrap()).json();
    let zlib = {
        let mut e = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::best());
        e.write_all(plain.as_bytes()).unwrap();
        e.finish().unwrap()
    };
    let deflate = {
        let mut e = flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::best());
        e.write_all(plain.as_bytes()).unwrap();
        e.finish().unwrap()
    };
    for (coding, b) in [
        ("gzip", gzip(plain.as_bytes())),
        ("x-gzip", gzip(plain.as_bytes())),
        ("deflate", zlib),
        ("deflate", deflate),
        ("identity", plain.as_bytes().to_vec()),
    ] {
        let h = format!("{JSON}Content-Encoding: {coding}\r\n");
        let r = with_headers(a, "/embed", &h, &b);
        assert_eq!(
            r.status,
            200,
            "{coding}: {:?}",
            String::from_utf8_lossy(&r.body)
        );
        assert_eq!(r.json(), want, "{coding}");
    }
    // OpenAI's route too.
    let h = format!("{JSON}Content-Encoding: gzip\r\n");
    let r = with_headers(
        a,
        "/v1/embeddings",
        &h,
        &gzip(br#"{"input": "a cat", "encoding_format": "float"}"#),
    );
    assert_eq!(r.status, 200);
    // A bomb: 10 MB of spaces in 10 KB; refused at the limit after decoding.
    let mut bomb = br#"{"inputs": "a"}"#.to_vec();
    bomb.resize(10 << 20, b' ');
    let bomb = gzip(&bomb);
    assert!(bomb.len() < 100_000, "{}", bomb.len());
    let t = Instant::now();
    let msg = tei_error(&with_headers(a, "/embed", &h, &bomb), 413, "validation");
    assert!(
        msg.contains("decodes to more than the payload limit of 100000"),
        "{msg}"
    );
    assert!(t.elapsed() < Duration::from_secs(5));
    // Just below the limit once decoded: served.
    let mut fits = br#"{"inputs": "a"}"#.to_vec();
    fits.resize(100_000, b' ');
    assert_eq!(with_headers(a, "/embed", &h, &gzip(&fits)).status, 200);
    // Not gzip, cut short, stacked or unknown codings.
    let good = gzip(plain.as_bytes());
    tei_error(
        &with_headers(a, "/embed", &h, b"plain text"),
        400,
        "validation",
    );
    tei_error(
        &with_headers(a, "/embed", &h, &good[..good.len() / 2]),
        400,
        "validation",
    );
    for coding in ["br", "zstd", "gzip, gzip", "compress"] {
        let h = format!("{JSON}Content-Encoding: {coding}\r\n");
        let msg = tei_error(&with_headers(a, "/embed", &h, &good), 415, "validation");
        assert!(msg.contains("gzip or deflate"), "{msg}");
    }
    // An empty gzip body is an empty body.
    tei_error(&with_headers(a, "/embed", &h, b""), 400, "empty");
    assert_eq!(get(a, "/health").status, 200);
}

#[test]
fn nesting_is_limited_wherever_it_is() {
    let Some(m) = minilm("nesting") else { return };
    let srv = start(&m, |_| {});
    let a = srv.addr;
    // The body's object is level 1: `x` may hold 126 more levels, not 127.
    let nest = |n: usize| format!("{}{}", "[".repeat(n), "]".repeat(n));
    let body = |n: usize| format!("{{\"inputs\": \"a\", \"x\": {}}}", nest(n));
    assert_eq!(
        request(a, "POST", "/embed", body(126).as_bytes()).status,
        200
    );
    let msg = tei_error(
        &request(a, "POST", "/embed", body(127).as_bytes()),
        400,
        "validation",
    );
    assert!(msg.contains("deeper than 127"), "{msg}");
    // Deep in an ignored field, in objects, on every JSON route.
    let objects = format!(
        "{{\"inputs\": \"a\", \"x\": {}1{}}}",
        "{\"k\": ".repeat(100_000),
        "}".repeat(100_000)
    );
    let arrays = body(100_000);
    for route in embd_server::routes::ROUTES {
        let (m, p) = (route.method, route.path);
        if m != "POST" {
            continue;
        }
        for b in [&objects, &arrays] {
            let r = request(a, "POST", p, b.as_bytes());
            assert_eq!(r.status, 400, "{p}: {:?}", String::from_utf8_lossy(&r.body));
        }
    }
    // Brackets inside strings are text.
    let r = post(a, "/embed", &json!({"inputs": "[".repeat(1000)}));
    assert_eq!(r.status, 200);
}

// ---------------------------------------------------------------- CORS

fn preflight(addr: std::net::SocketAddr, path: &str, origin: &str) -> Resp {
    raw(
        addr,
        format!(
            "OPTIONS {path} HTTP/1.1\r\nHost: x\r\nOrigin: {origin}\r\n\
             Access-Control-Request-Method: POST\r\n\
             Access-Control-Request-Headers: content-type, authorization, x-stainless-os\r\n\r\n"
        )
        .as_bytes(),
    )
}

#[test]
fn cors_is_off_by_default_and_answers_preflights_when_on() {
    let Some(m) = minilm("cors") else { return };
    let page = "http://localhost:3000";
    // Off: no CORS headers, OPTIONS is a method no route answers.
    let srv = start(&m, |_| {});
    let r = preflight(srv.addr, "/v1/embeddings", page);
    // In the route's own error body (OpenAI's here).
    openai_error(&r, 405, "not_found");
    assert_eq!(r.header("access-control-allow-origin"), None);
    let r = with_headers(
        srv.addr,
        "/embed",
        &format!("{JSON}Origin: {page}\r\n"),
        br#"{"inputs": "a"}"#,
    );
    assert_eq!(r.status, 200);
    assert_eq!(r.header("access-control-allow-origin"), None);
    drop(srv);
    // On, for one origin.
    let srv = start(&m, |c| {
        c.cors_allow_origin = vec![format!("{page},https://app.example.com")]
    });
    for path in ["/v1/embeddings", "/embed", "/v2/rerank"] {
        let r = preflight(srv.addr, path, page);
        assert_eq!(r.status, 204, "{path}");
        assert_eq!(r.header("access-control-allow-origin"), Some(page));
        assert_eq!(r.header("access-control-allow-methods"), Some("POST"));
        assert_eq!(
            r.header("access-control-allow-headers"),
            Some("content-type, authorization, x-stainless-os")
        );
        assert_eq!(r.header("access-control-max-age"), Some("3600"));
        assert!(r.header("vary").unwrap().contains("origin"));
    }
    let r = raw(
        srv.addr,
        b"OPTIONS /info HTTP/1.1\r\nHost: x\r\nOrigin: https://app.example.com\r\n\
          Access-Control-Request-Method: GET\r\n\r\n",
    );
    assert_eq!(r.status, 204);
    assert_eq!(r.header("access-control-allow-methods"), Some("GET"));
    assert_eq!(
        r.header("access-control-allow-origin"),
        Some("https://app.example.com")
    );
    // The call itself, an error too, carries the origin and exposes the
    // timing headers.
    let h = format!("{JSON}Origin: {page}\r\n");
    let r = with_headers(srv.addr, "/embed", &h, br#"{"inputs": "a"}"#);
    assert_eq!(r.status, 200);
    assert_eq!(r.header("access-control-allow-origin"), Some(page));
    assert!(r
        .header("access-control-expose-headers")
        .unwrap()
        .contains("x-compute-time"));
    let r = with_headers(srv.addr, "/embed", &h, br#"{"inputs": []}"#);
    assert_eq!(r.status, 400);
    assert_eq!(r.header("access-control-allow-origin"), Some(page));
    // Another origin: no allow headers (the browser refuses), the server
    // still answers what is not a browser's business.
    let r = preflight(srv.addr, "/v1/embeddings", "http://evil.example");
    assert_eq!(r.status, 204);
    assert_eq!(r.header("access-control-allow-origin"), None);
    assert_eq!(r.header("access-control-allow-methods"), None);
    let h = format!("{JSON}Origin: http://evil.example\r\n");
    let r = with_headers(srv.addr, "/embed", &h, br#"{"inputs": "a"}"#);
    assert_eq!(r.header("access-control-allow-origin"), None);
    // Unknown routes stay 404; a plain OPTIONS (no preflight) stays 405.
    assert_eq!(preflight(srv.addr, "/nope", page).status, 404);
    let r = raw(srv.addr, b"OPTIONS /embed HTTP/1.1\r\nHost: x\r\n\r\n");
    assert_eq!(r.status, 405);
    drop(srv);
    // Any origin.
    let srv = start(&m, |c| c.cors_allow_origin = vec!["*".into()]);
    let r = preflight(srv.addr, "/embed", "http://anything.example:8000");
    assert_eq!(r.header("access-control-allow-origin"), Some("*"));
    drop(srv);
    // A value that is not an origin is refused at start.
    let mut cfg = embd_server::Config::for_model(m.display().to_string());
    cfg.cors_allow_origin = vec!["http://localhost:3000/".into()];
    let err = embd_server::spawn(cfg).err().unwrap();
    assert!(err.contains("is not an origin"), "{err}");
}

// ---------------------------------------------------------------- bad input

#[test]
fn bad_requests_get_clear_errors_and_the_server_stays_up() {
    let Some(m) = minilm("bad_input") else { return };
    let srv = start(&m, |_| {});
    let a = srv.addr;
    let body = |b: &[u8]| request(a, "POST", "/embed", b);
    // Malformed JSON, wrong types, empty and missing inputs.
    tei_error(&body(b"{\"inputs\": [\"a\""), 400, "validation");
    tei_error(&body(b"not json"), 400, "validation");
    tei_error(&body(b""), 400, "empty");
    tei_error(&body(b"[1, 2]"), 422, "validation");
    tei_error(&body(b"{\"inputs\": 5}"), 422, "validation");
    tei_error(&body(b"{\"inputs\": [\"a\", {}]}"), 422, "validation");
    tei_error(
        &body(b"{\"inputs\": \"a\", \"normalize\": \"yes\"}"),
        422,
        "validation",
    );
    tei_error(
        &body(b"{\"inputs\": \"a\", \"dimensions\": -3}"),
        422,
        "validation",
    );
    tei_error(&body(b"{\"inputs\": []}"), 400, "empty");
    tei_error(&body(b"{}"), 422, "validation");
    tei_error(&body(b"{\"inputs\": [[]]}"), 400, "empty");
    // Invalid UTF-8 inside a JSON string, a lone surrogate escape.
    tei_error(&body(b"{\"inputs\": \"a\xff\xfeb\"}"), 400, "validation");
    tei_error(&body(b"{\"inputs\": \"\\ud800\"}"), 400, "validation");
    // NULs and control characters are text like any other.
    let r = body(b"{\"inputs\": [\"a\\u0000b\", \"\\u0001\\u0000\"]}");
    assert_eq!(r.status, 200);
    assert_eq!(r.json().as_array().unwrap().len(), 2);
    // Huge numbers.
    tei_error(&body(b"{\"inputs\": [1e400]}"), 400, "validation");
    tei_error(&body(b"{\"inputs\": [99999999999]}"), 422, "validation");
    tei_error(&body(b"{\"inputs\": [-1]}"), 422, "validation");
    tei_error(&body(b"{\"inputs\": [1.5]}"), 422, "validation");
    tei_error(
        &body(b"{\"inputs\": \"a\", \"dimensions\": 18446744073709551616}"),
        422,
        "validation",
    );
    tei_error(
        &body(b"{\"inputs\": \"a\", \"dimensions\": 4294967296}"),
        422,
        "validation",
    );
    // Ids out of range.
    let msg = tei_error(&body(b"{\"inputs\": [101, 40000, 102]}"), 422, "validation");
    assert!(msg.contains("40000"), "{msg}");
    // Deep nesting: refused by the parser's depth limit, no stack overflow.
    let deep = format!(
        "{{\"inputs\": {}{}}}",
        "[".repeat(100_000),
        "]".repeat(100_000)
    );
    tei_error(&body(deep.as_bytes()), 400, "validation");
    // The same on the other routes.
    for path in [
        "/v1/embeddings",
        "/tokenize",
        "/similarity",
        "/decode",
        "/rerank",
    ] {
        let r = request(a, "POST", path, b"{\"x\": ");
        assert_eq!(r.status, 400, "{path}");
        // Deep nesting is refused wherever it is, also in a field the route
        // ignores.
        let r = request(a, "POST", path, deep.as_bytes());
        assert_eq!(r.status, 400, "{path}");
    }
    tei_error(
        &post(
            a,
            "/similarity",
            &json!({"inputs": {"source_sentence": "a", "sentences": []}}),
        ),
        400,
        "empty",
    );
    tei_error(
        &post(a, "/tokenize", &json!({"inputs": [1, 2]})),
        422,
        "validation",
    );
    tei_error(
        &post(a, "/decode", &json!({"ids": "abc"})),
        422,
        "validation",
    );
    // Garbage that is not HTTP: the connection is closed, nothing else happens.
    let mut s = connect(a);
    s.write_all(b"\x00\x01\x02 garbage \r\n\r\n").unwrap();
    let mut buf = Vec::new();
    let _ = s.read_to_end(&mut buf);
    assert!(
        buf.is_empty() || buf.starts_with(b"HTTP/1.1 400"),
        "{buf:?}"
    );
    // Still serving.
    assert_eq!(post(a, "/embed", &json!({"inputs": "ok"})).status, 200);
    let text = String::from_utf8(get(a, "/metrics").body).unwrap();
    assert!(!text.contains("status=\"500\""), "{text}");
}

#[test]
fn slow_and_vanishing_clients() {
    let Some(m) = minilm("slow") else { return };
    let srv = start(&m, |c| c.read_timeout_secs = 1);
    let a = srv.addr;
    // Headers that never end: the connection is closed after the read timeout.
    let mut s = connect(a);
    s.write_all(b"POST /embed HTTP/1.1\r\nHost: x\r\n").unwrap();
    let t = Instant::now();
    let mut buf = Vec::new();
    let _ = s.read_to_end(&mut buf);
    let took = t.elapsed();
    assert!(took < Duration::from_secs(5), "{took:?}");
    assert!(
        buf.is_empty() || buf.starts_with(b"HTTP/1.1 408"),
        "{:?}",
        String::from_utf8_lossy(&buf)
    );
    // A body that never completes: 408 with TEI's body.
    let mut s = connect(a);
    s.write_all(
        b"POST /embed HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n\
                  Content-Length: 100\r\n\r\n{\"inputs\": ",
    )
    .unwrap();
    let r = read_response(&mut s);
    tei_error(&r, 408, "timeout");
    // Clients that vanish mid-body and right after sending: the server goes on.
    for _ in 0..8 {
        let mut s = connect(a);
        s.write_all(
            b"POST /embed HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n\
                  Content-Length: 50\r\n\r\n{\"in",
        )
        .unwrap();
        drop(s);
        let mut s = connect(a);
        let texts = vec!["some words to embed"; 32];
        s.write_all(&request_bytes(
            "POST",
            "/embed",
            json!({ "inputs": texts }).to_string().as_bytes(),
        ))
        .unwrap();
        drop(s);
    }
    std::thread::sleep(Duration::from_millis(200));
    let r = post(a, "/embed", &json!({"inputs": "still here"}));
    assert_eq!(r.status, 200);
    // Keep-alive: several requests on one connection.
    let mut s = connect(a);
    for i in 0..5 {
        s.write_all(&request_bytes(
            "POST",
            "/embed",
            json!({ "inputs": format!("text {i}") })
                .to_string()
                .as_bytes(),
        ))
        .unwrap();
        assert_eq!(read_response(&mut s).status, 200);
    }
}

// ---------------------------------------------------------------- shutdown

#[test]
fn sigterm_finishes_in_flight_requests_and_exits_zero() {
    let Some(m) = minilm("sigterm") else { return };
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_embd-serve"))
        .args(["-m", m.to_str().unwrap(), "--port", "0", "--threads", "2"])
        // Each engine call waits 700 ms for company: a request is surely in
        // flight when the signal comes.
        .args(["--max-batch-wait-us", "700000"])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = child.stderr.take().unwrap();
    let mut line = Vec::new();
    let mut b = [0u8; 1];
    while !line.ends_with(b"\n") {
        assert_eq!(err.read(&mut b).unwrap(), 1, "server exited: {line:?}");
        line.push(b[0]);
    }
    let line = String::from_utf8(line).unwrap();
    let port: u16 = line
        .split("http://127.0.0.1:")
        .nth(1)
        .and_then(|r| r.split(' ').next())
        .unwrap()
        .parse()
        .unwrap();
    let addr: std::net::SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let inflight =
        std::thread::spawn(move || post(addr, "/embed", &json!({"inputs": "in flight"})));
    std::thread::sleep(Duration::from_millis(250));
    let t = Instant::now();
    let kill = std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    let r = inflight.join().unwrap();
    assert_eq!(r.status, 200, "{:?}", String::from_utf8_lossy(&r.body));
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            assert!(status.success(), "{status:?}");
            break;
        }
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "no exit 10 s after SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut rest = String::new();
    let _ = err.read_to_string(&mut rest);
    assert!(rest.contains("stopped"), "{rest}");
    // Nothing listens any more.
    assert!(std::net::TcpStream::connect(addr).is_err());
}

#[test]
fn stopping_a_handle_waits_for_in_flight_work() {
    let Some(m) = minilm("stop") else { return };
    let srv = start(&m, |c| c.max_batch_wait_us = 500_000);
    let addr = srv.addr;
    let h = std::thread::spawn(move || post(addr, "/embed", &json!({"inputs": ["a", "b"]})));
    std::thread::sleep(Duration::from_millis(150));
    let t = Instant::now();
    srv.stop();
    assert!(t.elapsed() < Duration::from_secs(5));
    let r = h.join().unwrap();
    assert_eq!(r.status, 200);
    assert_eq!(r.json().as_array().unwrap().len(), 2);
}

#[test]
fn start_up_is_quick() {
    let Some(m) = minilm("startup") else { return };
    let srv = start(&m, |_| {});
    let t = Instant::now();
    assert_eq!(
        post(srv.addr, "/embed", &json!({"inputs": "first"})).status,
        200
    );
    eprintln!(
        "start-up {:?}, first request {:?}",
        srv.startup,
        t.elapsed()
    );
    let v: Value = get(srv.addr, "/info").json();
    assert_eq!(v["version"], embd_server::VERSION);
}
