//! Ollama's and Cohere's embed APIs and the API keys, over real sockets:
//! vectors against the sentence-transformers reference and the TEI route,
//! the clients' error shapes and statuses, hostile bodies (wrong types,
//! oversize inputs, every `embedding_types` combination), and the key check
//! on every route in every error dialect. A module of the `serve` test
//! binary (one link for the server's tests).

use serde_json::{json, Value};

use crate::common::*;

fn ints(v: &Value) -> Vec<i64> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_i64().unwrap())
        .collect()
}

/// `{"error": str}` with `status`, Ollama's body; returns the message.
fn ollama_error(r: &Resp, status: u16) -> String {
    assert_eq!(r.status, status, "{:?}", String::from_utf8_lossy(&r.body));
    let v = r.json();
    let o = v.as_object().unwrap();
    assert_eq!(o.len(), 1, "{v}");
    o["error"].as_str().unwrap().to_string()
}

/// `{"message": str}` with `status`, Cohere's body; returns the message.
fn cohere_error(r: &Resp, status: u16) -> String {
    assert_eq!(r.status, status, "{:?}", String::from_utf8_lossy(&r.body));
    let v = r.json();
    assert_eq!(v.as_object().unwrap().len(), 1, "{v}");
    v["message"].as_str().unwrap().to_string()
}

fn normalized(v: &[f32]) -> Vec<f32> {
    let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    v.iter().map(|x| x / n).collect()
}

#[test]
fn ollama_embed_matches_the_reference_and_the_tei_route() {
    let Some(m) = minilm("ollama_embed") else {
        return;
    };
    let srv = start(&m, |c| c.max_client_batch_size = 8);
    let reference = reference();
    let rows: Vec<&(String, Vec<u32>, Vec<f32>)> = reference
        .iter()
        .filter(|r| r.1.len() > 2)
        .take(20)
        .collect();
    let texts: Vec<&str> = rows.iter().map(|r| r.0.as_str()).collect();
    // 20 inputs over a batch size of 8: three jobs, in order.
    let r = post(
        srv.addr,
        "/api/embed",
        &json!({"model": "all-MiniLM-L6-v2", "input": texts, "keep_alive": "5m",
                "options": {"temperature": null, "num_ctx": 2048}}),
    );
    assert_eq!(r.status, 200);
    let v = r.json();
    assert_eq!(v["model"], "all-MiniLM-L6-v2");
    let embs = v["embeddings"].as_array().unwrap();
    assert_eq!(embs.len(), 20);
    let tokens: usize = rows.iter().map(|r| r.1.len()).sum();
    assert_eq!(v["prompt_eval_count"], tokens);
    assert!(v["total_duration"].as_u64().unwrap() >= v["load_duration"].as_u64().unwrap());
    for (e, r) in embs.iter().zip(&rows) {
        assert!(cosine(&floats(e), &r.2) > 0.9999);
    }
    let tei = post(srv.addr, "/embed", &json!({"inputs": texts[..8]})).json();
    for (a, b) in embs.iter().zip(tei.as_array().unwrap()) {
        assert!(same(&floats(a), &floats(b)));
    }
    // A string, a tagged and differently cased name, dimensions cut and
    // normalized again (as Ollama); dimensions outside 1..dim keep all.
    let one = post(
        srv.addr,
        "/api/embed",
        &json!({"model": "All-MiniLM-L6-v2:latest", "input": texts[0], "dimensions": 32}),
    )
    .json();
    assert_eq!(one["model"], "All-MiniLM-L6-v2:latest");
    let cut = floats(&one["embeddings"][0]);
    assert_eq!(cut.len(), 32);
    assert!(cosine(&cut, &normalized(&rows[0].2[..32])) > 0.9999);
    for d in [0, -1, 384, 5000] {
        let all = post(
            srv.addr,
            "/api/embed",
            &json!({"model": "all-MiniLM-L6-v2", "input": texts[0], "dimensions": d}),
        )
        .json();
        assert_eq!(all["embeddings"][0].as_array().unwrap().len(), 384, "{d}");
    }
    // No input (or an empty string): no vectors, as Ollama loading a model.
    for input in [json!(null), json!(""), json!([])] {
        let r = post(
            srv.addr,
            "/api/embed",
            &json!({"model": "all-MiniLM-L6-v2", "input": input}),
        );
        assert_eq!(r.status, 200);
        assert_eq!(r.json()["embeddings"], json!([]));
    }
    // The legacy route: the model's own output, one prompt.
    let legacy = post(
        srv.addr,
        "/api/embeddings",
        &json!({"model": "all-MiniLM-L6-v2", "prompt": texts[1]}),
    )
    .json();
    assert!(same(&floats(&legacy["embedding"]), &floats(&tei[1])));
    let empty = post(
        srv.addr,
        "/api/embeddings",
        &json!({"model": "all-MiniLM-L6-v2", "prompt": ""}),
    );
    assert_eq!(empty.json(), json!({"embedding": []}));
}

#[test]
fn ollama_errors_have_ollamas_shape_and_status() {
    let Some(m) = minilm("ollama_errors") else {
        return;
    };
    let srv = start(&m, |_| {});
    let long = "word ".repeat(600);
    let msg = ollama_error(
        &post(
            srv.addr,
            "/api/embed",
            &json!({"model": "all-MiniLM-L6-v2", "input": [long.clone()], "truncate": false}),
        ),
        400,
    );
    assert!(
        msg.starts_with("the input length exceeds the context length"),
        "{msg}"
    );
    // truncate: true (and absent) cuts.
    for t in [json!(true), json!(null)] {
        let r = post(
            srv.addr,
            "/api/embed",
            &json!({"model": "all-MiniLM-L6-v2", "input": long, "truncate": t}),
        );
        assert_eq!(r.status, 200);
        assert_eq!(r.json()["prompt_eval_count"], 256);
    }
    let msg = ollama_error(
        &post(
            srv.addr,
            "/api/embed",
            &json!({"model": "nomic-embed-text", "input": "a"}),
        ),
        404,
    );
    assert!(
        msg.starts_with("model 'nomic-embed-text' not found"),
        "{msg}"
    );
    assert!(msg.contains("all-MiniLM-L6-v2"), "{msg}");
    for bad in [json!([1, 2]), json!(["a", null]), json!(7), json!({"a": 1})] {
        let r = post(
            srv.addr,
            "/api/embed",
            &json!({"model": "all-MiniLM-L6-v2", "input": bad}),
        );
        assert_eq!(ollama_error(&r, 400), "invalid input type");
    }
    for (field, value) in [
        ("truncate", json!("yes")),
        ("dimensions", json!("8")),
        ("dimensions", json!(1.5)),
        ("model", json!(3)),
        ("options", json!([1])),
        ("keep_alive", json!([1])),
    ] {
        let mut body = json!({"model": "all-MiniLM-L6-v2", "input": "a"});
        body[field] = value;
        let msg = ollama_error(&post(srv.addr, "/api/embed", &body), 400);
        assert!(msg.contains(field), "{field}: {msg}");
    }
    // Bodies that are not JSON, or not objects, are 400 too (Ollama's
    // binding errors), never TEI's 415 / 422.
    let r = request(srv.addr, "POST", "/api/embed", b"{\"model\": ");
    ollama_error(&r, 400);
    ollama_error(&post(srv.addr, "/api/embed", &json!([1])), 400);
    ollama_error(&request(srv.addr, "POST", "/api/embed", b""), 400);
    assert_eq!(
        ollama_error(
            &post(srv.addr, "/api/embeddings", &json!({"prompt": "a"})),
            400
        ),
        "model is required"
    );
    assert_eq!(
        ollama_error(&post(srv.addr, "/api/show", &json!({})), 400),
        "model is required"
    );
    ollama_error(&post(srv.addr, "/api/show", &json!({"model": "x"})), 404);
    ollama_error(&get(srv.addr, "/api/embed"), 405);
    // Still up.
    assert_eq!(get(srv.addr, "/health").status, 200);
}

#[test]
fn ollama_lists_and_shows_the_served_models() {
    let Some(m) = minilm("ollama_tags") else {
        return;
    };
    let srv = start(&m, |_| {});
    let tags = get(srv.addr, "/api/tags").json();
    let models = tags["models"].as_array().unwrap();
    assert_eq!(models.len(), 1);
    let t = &models[0];
    assert_eq!(t["name"], "all-MiniLM-L6-v2:latest");
    assert_eq!(t["model"], "all-MiniLM-L6-v2:latest");
    assert_eq!(t["size"], std::fs::metadata(&m).unwrap().len());
    assert_eq!(t["details"]["embedding_length"], 384);
    assert_eq!(t["details"]["family"], "bert");
    let modified = t["modified_at"].as_str().unwrap();
    assert!(
        modified.len() == 20 && modified.ends_with('Z'),
        "{modified}"
    );
    // The deprecated `name` works as Ollama's.
    for body in [
        json!({"model": "all-MiniLM-L6-v2"}),
        json!({"name": "all-minilm-l6-v2:latest"}),
    ] {
        let s = post(srv.addr, "/api/show", &body).json();
        assert_eq!(s["capabilities"], json!(["embedding"]));
        assert_eq!(s["model_info"]["general.architecture"], "bert");
        assert_eq!(s["model_info"]["bert.embedding_length"], 384);
        assert_eq!(s["model_info"]["bert.context_length"], 256);
    }
    assert_eq!(
        get(srv.addr, "/api/version").json()["version"],
        embd_server::VERSION
    );
}

/// A copy of MiniLM with output ranges stored from `texts` (as `embd
/// convert --output-ranges-corpus` stores them), in a scratch folder.
fn ranged_minilm(m: &std::path::Path, tag: &str) -> std::path::PathBuf {
    use embedder::{ModelFile, ReadOptions};
    let src = ModelFile::open(m, ReadOptions::default()).unwrap();
    let calib: Vec<String> = reference().into_iter().take(64).map(|r| r.0).collect();
    let with = embedder::convert::with_output_ranges(&src, &calib, 2).unwrap();
    let dir = std::env::temp_dir().join(format!("embd-apis-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let out = dir.join("ranged.weights");
    embedder::formats::embd::write_file(&with, &out, &Default::default(), &mut |_, _| {}).unwrap();
    out
}

#[test]
fn cohere_embed_answers_every_embedding_type() {
    let Some(m) = minilm("cohere_embed") else {
        return;
    };
    let ranged = ranged_minilm(&m, "types");
    let srv = start(&m, |c| {
        c.models = vec![
            m.display().to_string(),
            format!("ranged={}", ranged.display()),
        ];
        c.max_client_batch_size = 4;
    });
    let reference = reference();
    let texts: Vec<&str> = reference
        .iter()
        .filter(|r| r.1.len() > 2)
        .take(6)
        .map(|r| r.0.as_str())
        .collect();
    let tei = post(srv.addr, "/embed", &json!({"inputs": texts[..4]})).json();
    let v = post(
        srv.addr,
        "/v2/embed",
        &json!({"model": "embed-english-v3.0", "texts": texts, "input_type": "search_document",
                "embedding_types": ["float", "binary", "ubinary"]}),
    );
    assert_eq!(v.status, 200);
    let v = v.json();
    assert_eq!(v["response_type"], "embeddings_by_type");
    assert_eq!(v["meta"]["api_version"]["version"], "2");
    assert!(v["meta"]["billed_units"]["input_tokens"].as_u64().unwrap() > 6);
    assert_eq!(v["texts"], json!(texts));
    let e = &v["embeddings"];
    assert_eq!(e.as_object().unwrap().len(), 3);
    let fl = e["float"].as_array().unwrap();
    assert_eq!(fl.len(), 6);
    for (a, b) in fl.iter().zip(tei.as_array().unwrap()) {
        assert!(same(&floats(a), &floats(b)));
    }
    // binary / ubinary: the sign bits, first component in the top bit
    // (np.packbits), 48 bytes for 384 components; binary is ubinary - 128.
    for (i, f) in fl.iter().enumerate() {
        let f = floats(f);
        let ub = ints(&e["ubinary"][i]);
        let b = ints(&e["binary"][i]);
        assert_eq!(ub.len(), 48);
        for (k, byte) in ub.iter().enumerate() {
            let want: i64 = (0..8)
                .map(|j| i64::from(f[k * 8 + j] > 0.0) << (7 - j))
                .sum();
            assert_eq!(*byte, want);
            assert_eq!(b[k], want - 128);
        }
    }
    // int8 / uint8: without stored ranges a 422 saying how to store them.
    for t in ["int8", "uint8"] {
        let msg = cohere_error(
            &post(
                srv.addr,
                "/v2/embed",
                &json!({"texts": ["a"], "embedding_types": [t]}),
            ),
            422,
        );
        assert!(
            msg.contains("--output-ranges-corpus") && msg.contains(t),
            "{msg}"
        );
    }
    // With them: the buckets of sentence-transformers' quantize_embeddings
    // (the library's, which scripts/quantize/parity.sh holds to it); uint8
    // is int8 + 128.
    let q = post(
        srv.addr,
        "/v2/embed",
        &json!({"model": "ranged", "texts": texts, "embedding_types": ["uint8", "int8", "float"]}),
    )
    .json();
    let engine = embedder::Engine::open(&ranged, &embedder::Options::new().threads(2))
        .unwrap()
        .into_embedder()
        .ok()
        .unwrap();
    let mut want = vec![0u8; texts.len() * 384];
    engine
        .embed_quantized_into(&texts, embedder::OutputPrecision::Int8, &mut want, None)
        .unwrap();
    for i in 0..texts.len() {
        let i8s = ints(&q["embeddings"]["int8"][i]);
        let u8s = ints(&q["embeddings"]["uint8"][i]);
        for k in 0..384 {
            assert_eq!(i8s[k], i64::from(want[i * 384 + k] as i8));
            assert_eq!(u8s[k], i8s[k] + 128);
        }
    }
    // Cut vectors do not fit the stored (full-width) ranges: a 422 saying so.
    let msg = cohere_error(
        &post(
            srv.addr,
            "/v2/embed",
            &json!({"model": "ranged", "texts": ["a"], "embedding_types": ["int8"],
                    "output_dimension": 64}),
        ),
        422,
    );
    assert!(msg.contains("output_dimension"), "{msg}");
    let cut = post(
        srv.addr,
        "/v2/embed",
        &json!({"texts": ["a"], "output_dimension": 64, "embedding_types": ["float", "ubinary"]}),
    )
    .json();
    assert_eq!(cut["embeddings"]["float"][0].as_array().unwrap().len(), 64);
    assert_eq!(cut["embeddings"]["ubinary"][0].as_array().unwrap().len(), 8);
    // v2 without embedding_types: floats by type. v1: a plain list, or by type.
    let d = post(srv.addr, "/v2/embed", &json!({"texts": texts[..1]})).json();
    assert!(same(
        &floats(&d["embeddings"]["float"][0]),
        &floats(&tei[0])
    ));
    let v1 = post(srv.addr, "/v1/embed", &json!({"texts": texts[..2]})).json();
    assert_eq!(v1["response_type"], "embeddings_floats");
    assert_eq!(v1["meta"]["api_version"]["version"], "1");
    assert!(same(&floats(&v1["embeddings"][1]), &floats(&tei[1])));
    let v1t = post(
        srv.addr,
        "/v1/embed",
        &json!({"texts": texts[..2], "embedding_types": ["int8"], "model": "ranged"}),
    )
    .json();
    assert_eq!(v1t["response_type"], "embeddings_by_type");
    assert_eq!(ints(&v1t["embeddings"]["int8"][0]).len(), 384);
    // v2's inputs of text parts.
    let inp = post(
        srv.addr,
        "/v2/embed",
        &json!({"inputs": [{"content": [{"type": "text", "text": texts[0]}]}]}),
    )
    .json();
    assert!(same(
        &floats(&inp["embeddings"]["float"][0]),
        &floats(&tei[0])
    ));
    let _ = std::fs::remove_dir_all(ranged.parent().unwrap());
}

#[test]
fn cohere_embed_every_type_combination_and_truncation() {
    let Some(m) = minilm("cohere_combinations") else {
        return;
    };
    let ranged = ranged_minilm(&m, "combinations");
    let srv = start(&ranged, |_| {});
    const TYPES: [&str; 5] = ["float", "int8", "uint8", "binary", "ubinary"];
    let lens = [384, 384, 384, 48, 48];
    let full = post(
        srv.addr,
        "/v2/embed",
        &json!({"texts": ["a cat", "a dog"], "embedding_types": TYPES}),
    )
    .json();
    // Every non-empty subset (and with repeats) answers exactly its types,
    // each the same as in the full answer.
    for mask in 1u32..32 {
        let mut asked: Vec<&str> = (0..5)
            .filter(|i| mask & (1 << i) != 0)
            .map(|i| TYPES[i])
            .collect();
        asked.reverse();
        asked.push(asked[0]);
        let r = post(
            srv.addr,
            "/v2/embed",
            &json!({"texts": ["a cat", "a dog"], "embedding_types": asked}),
        );
        assert_eq!(r.status, 200, "{asked:?}");
        let e = r.json()["embeddings"].clone();
        let keys: Vec<&String> = e.as_object().unwrap().keys().collect();
        assert_eq!(keys.len(), mask.count_ones() as usize, "{asked:?}");
        for (i, t) in TYPES.iter().enumerate() {
            if mask & (1 << i) != 0 {
                assert_eq!(e[t], full["embeddings"][t], "{t} in {asked:?}");
                assert_eq!(e[t][0].as_array().unwrap().len(), lens[i]);
            } else {
                assert!(e.get(t).is_none());
            }
        }
    }
    // Truncation: END cuts the end, START the start, NONE refuses (413).
    let long = format!("{} {}", "alpha ".repeat(300), "omega ".repeat(300));
    let end = post(
        srv.addr,
        "/v2/embed",
        &json!({"texts": [long], "truncate": "END"}),
    )
    .json();
    let start = post(
        srv.addr,
        "/v2/embed",
        &json!({"texts": [long], "truncate": "START"}),
    )
    .json();
    let dflt = post(srv.addr, "/v2/embed", &json!({"texts": [long]})).json();
    let alpha = post(srv.addr, "/embed", &json!({"inputs": "alpha ".repeat(300)})).json();
    let omega = post(srv.addr, "/embed", &json!({"inputs": "omega ".repeat(300)})).json();
    assert!(same(
        &floats(&end["embeddings"]["float"][0]),
        &floats(&alpha[0])
    ));
    assert!(same(
        &floats(&start["embeddings"]["float"][0]),
        &floats(&omega[0])
    ));
    assert_eq!(end["embeddings"], dflt["embeddings"]);
    let msg = cohere_error(
        &post(
            srv.addr,
            "/v2/embed",
            &json!({"texts": [long], "truncate": "NONE"}),
        ),
        413,
    );
    assert!(msg.contains("max_seq_length"), "{msg}");
    let _ = std::fs::remove_dir_all(ranged.parent().unwrap());
}

#[test]
fn cohere_bad_bodies_get_cohere_errors() {
    let Some(m) = minilm("cohere_errors") else {
        return;
    };
    let srv = start(&m, |c| c.payload_limit = 4096);
    for (body, status, part) in [
        (
            json!({"texts": ["a"], "embedding_types": ["int4"]}),
            422,
            "embedding_types[0]",
        ),
        (
            json!({"texts": ["a"], "embedding_types": "float"}),
            422,
            "embedding_types",
        ),
        (
            json!({"texts": ["a"], "embedding_types": [1]}),
            422,
            "embedding_types[0]",
        ),
        (
            json!({"texts": ["a"], "truncate": "MIDDLE"}),
            422,
            "truncate",
        ),
        (json!({"texts": ["a"], "truncate": true}), 422, "truncate"),
        (
            json!({"texts": ["a"], "input_type": "query"}),
            422,
            "input_type",
        ),
        (
            json!({"texts": ["a"], "output_dimension": 0}),
            422,
            "output_dimension",
        ),
        (
            json!({"texts": ["a"], "output_dimension": 385}),
            422,
            "dimensions",
        ),
        (
            json!({"texts": ["a"], "output_dimension": "64"}),
            422,
            "output_dimension",
        ),
        (json!({"texts": ["a"], "max_tokens": 8}), 422, "max_tokens"),
        (json!({"texts": "a"}), 422, "texts"),
        (json!({"texts": [["a"]]}), 422, "texts[0]"),
        (json!({"texts": ["a"], "inputs": []}), 422, "not both"),
        (json!({"inputs": [{"content": "a"}]}), 422, "inputs[0]"),
        (
            json!({"inputs": [{"content": [{"type": "image_url", "image_url": {"url": "data:"}}]}]}),
            422,
            "image",
        ),
        (
            json!({"images": ["data:image/png;base64,AAAA"]}),
            422,
            "texts only",
        ),
        (json!({"texts": []}), 400, "empty"),
        (json!({}), 400, "texts"),
        (json!({"texts": ["a"], "model": 5}), 422, "model"),
    ] {
        for route in ["/v2/embed", "/v1/embed"] {
            let msg = cohere_error(&post(srv.addr, route, &body), status);
            assert!(msg.contains(part), "{route} {body}: {msg}");
        }
    }
    // Over the payload limit, and a body that is not JSON.
    let big = json!({"texts": ["x".repeat(5000)]});
    cohere_error(&post(srv.addr, "/v2/embed", &big), 413);
    cohere_error(
        &request(srv.addr, "POST", "/v2/embed", b"{\"texts\": [\"a\""),
        400,
    );
    // Ollama's route maps the same limit to its 400.
    ollama_error(
        &post(
            srv.addr,
            "/api/embed",
            &json!({"model": "all-MiniLM-L6-v2", "input": ["x".repeat(5000)]}),
        ),
        400,
    );
    assert_eq!(get(srv.addr, "/health").status, 200);
}

/// A request with an `Authorization` header line (or none).
fn with_auth(
    addr: std::net::SocketAddr,
    method: &str,
    path: &str,
    auth: Option<&str>,
    body: &[u8],
) -> Resp {
    let auth = auth.map_or(String::new(), |a| format!("Authorization: {a}\r\n"));
    let mut r = format!(
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n{auth}Content-Length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    r.extend_from_slice(body);
    raw(addr, &r)
}

#[test]
fn api_keys_guard_every_route_in_its_own_error_shape() {
    let Some(m) = minilm("api_keys") else {
        return;
    };
    let dir = std::env::temp_dir().join(format!("embd-apis-keys-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("keys");
    std::fs::write(&file, "# the deploy key\n\nfile-key-3\n").unwrap();
    let srv = start(&m, |c| {
        c.api_keys = vec!["key-one".into(), "key-two".into()];
        c.api_key_file = Some(file.clone());
    });
    let body = br#"{"model": "all-MiniLM-L6-v2", "input": "a", "inputs": "a", "texts": ["a"], "prompt": "a", "query": "q", "documents": ["a"]}"#;
    for route in embd_server::routes::ROUTES {
        let (method, path) = (route.method, route.path);
        let public = route.access == embd_server::routes::Access::Public;
        for auth in [
            None,
            Some("Bearer wrong-key"),
            Some("Bearer "),
            Some("Basic a2V5LW9uZQ=="),
            Some("Bearer key-one2"),
        ] {
            let r = with_auth(srv.addr, method, path, auth, body);
            if public {
                assert_eq!(r.status, 200, "{method} {path}");
                continue;
            }
            assert_eq!(r.status, 401, "{method} {path} {auth:?}");
            assert_eq!(r.header("www-authenticate"), Some("Bearer"));
            let v = r.json();
            let msg = match route.dialect {
                embd_server::error::Dialect::Tei => {
                    assert_eq!(v["error_type"], "unauthorized");
                    v["error"].as_str().unwrap().to_string()
                }
                embd_server::error::Dialect::OpenAi => {
                    assert_eq!(v["error"]["code"], "unauthorized");
                    v["error"]["message"].as_str().unwrap().to_string()
                }
                embd_server::error::Dialect::Cohere => cohere_error(&r, 401),
                embd_server::error::Dialect::Ollama => ollama_error(&r, 401),
            };
            assert!(
                !msg.contains("wrong-key") && !msg.contains("key-one"),
                "{msg}"
            );
        }
        // Each key works; a key in the query string is refused even with one.
        for key in ["key-one", "key-two", "file-key-3"] {
            let r = with_auth(srv.addr, method, path, Some(&format!("Bearer {key}")), body);
            assert!(r.status != 401, "{method} {path} with {key}: {}", r.status);
            assert!(r.status < 500, "{method} {path}: {}", r.status);
        }
        if !public {
            let q = format!("{path}?api_key=key-one");
            let r = with_auth(srv.addr, method, &q, Some("bearer key-one"), body);
            assert_eq!(r.status, 401, "{q}");
            assert!(!String::from_utf8_lossy(&r.body).contains("key-one"));
        }
    }
    // A refused request's body is read, so its keep-alive connection
    // serves the next request.
    {
        use std::io::Write;
        let mut c = connect(srv.addr);
        let body = br#"{"inputs": "a cat"}"#;
        for auth in ["Bearer wrong-key", "Bearer key-two"] {
            let head = format!(
                "POST /embed HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n\
                 Authorization: {auth}\r\nContent-Length: {}\r\n\r\n",
                body.len()
            );
            c.write_all(head.as_bytes()).unwrap();
            c.write_all(body).unwrap();
            let r = read_response(&mut c);
            let want = if auth.ends_with("wrong-key") {
                401
            } else {
                200
            };
            assert_eq!(r.status, want, "{auth}");
            assert_ne!(r.header("connection"), Some("close"));
        }
    }
    // Refusals are counted; /metrics needs the key too.
    let metrics = with_auth(srv.addr, "GET", "/metrics", Some("Bearer key-two"), b"");
    let text = String::from_utf8_lossy(&metrics.body).to_string();
    let line = text
        .lines()
        .find(|l| l.starts_with("embd_errors_total{type=\"unauthorized\"}"))
        .unwrap();
    let n: u64 = line.rsplit(' ').next().unwrap().parse().unwrap();
    let guarded = embd_server::routes::ROUTES
        .iter()
        .filter(|r| r.access != embd_server::routes::Access::Public)
        .count() as u64;
    // Six refusals per guarded route, and the keep-alive one.
    assert_eq!(n, guarded * 6 + 1);
    // The document declares the scheme.
    let doc = with_auth(
        srv.addr,
        "GET",
        "/openapi.json",
        Some("Bearer key-one"),
        b"",
    )
    .json();
    assert_eq!(
        doc["components"]["securitySchemes"]["bearer"]["scheme"],
        "bearer"
    );
    assert_eq!(
        doc["paths"]["/api/embed"]["post"]["security"],
        json!([{"bearer": []}])
    );
    assert_eq!(doc["paths"]["/health"]["get"]["security"], json!([]));
    drop(srv);
    // --metrics-public opens /metrics only.
    let srv = start(&m, |c| {
        c.api_keys = vec!["k".into()];
        c.metrics_public = true;
    });
    assert_eq!(get(srv.addr, "/metrics").status, 200);
    assert_eq!(get(srv.addr, "/info").status, 401);
    drop(srv);
    // Bad keys and key files stop the start with a message that shows no key.
    for (keys, file_text, part) in [
        (vec![String::new()], None, "cannot be empty"),
        (vec!["has space".to_string()], None, "may hold only"),
        (vec![], Some("# only a comment\n"), "holds no key"),
        (vec![], Some("good\nbad key\n"), "line 2"),
    ] {
        let mut cfg = embd_server::Config::for_model(m.display().to_string());
        cfg.api_keys = keys;
        if let Some(t) = file_text {
            std::fs::write(&file, t).unwrap();
            cfg.api_key_file = Some(file.clone());
        }
        let e = embd_server::spawn(cfg).err().unwrap();
        assert!(
            e.contains(part) && !e.contains("has space") && !e.contains("bad key"),
            "{e}"
        );
    }
    let mut cfg = embd_server::Config::for_model(m.display().to_string());
    cfg.api_key_file = Some(dir.join("absent"));
    assert!(embd_server::spawn(cfg).err().unwrap().contains("absent"));
    let _ = std::fs::remove_dir_all(&dir);
}
