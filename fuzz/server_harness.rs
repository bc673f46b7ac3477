//! The fuzz entry points of the HTTP server's request parsers, shared by the
//! cargo-fuzz targets in `fuzz/fuzz_targets/` (`ollama_embed`,
//! `cohere_embed`, `api_keys`) and by the server's test
//! `server/tests/fuzz_regressions/`, which replays their seed corpora and
//! crash inputs on stable Rust.
//!
//! Each takes arbitrary bytes as a request body (or a key file and an
//! `Authorization` header) and panics only when an invariant is broken: a
//! parser returns `Ok` or a 4xx `Err` for any input, and what it returns as
//! `Ok` is consistent with the body.

#![allow(dead_code)]

use embd_server::body::parse_json;
use embd_server::{auth, cohere, ollama};
use serde_json::Value;

/// A fuzz entry point.
pub type Target = fn(&[u8]);

/// Every server target: `(name, entry point)`, named as the cargo-fuzz
/// target and the folders of its seeds (`fuzz/corpus/<name>/`) and crash
/// inputs (`tests/data/fuzz/<name>/`).
pub const TARGETS: &[(&str, Target)] = &[
    ("ollama_embed", fuzz_ollama_embed),
    ("cohere_embed", fuzz_cohere_embed),
    ("api_keys", fuzz_api_keys),
];

fn client_error(status: u16, what: &str) {
    assert!((400..500).contains(&status), "{what}: status {status}");
}

/// A body for `/api/embed` and `/api/embeddings` (and `/api/show`'s
/// reader): Ollama's 400s or a call whose inputs are the body's strings.
pub fn fuzz_ollama_embed(data: &[u8]) {
    let v: Value = match parse_json(data) {
        Ok(v) => v,
        Err(e) => return client_error(e.status.as_u16(), "parse"),
    };
    match ollama::EmbedCall::from_value(&v) {
        Ok(c) => {
            let given = match v.get("input") {
                Some(Value::String(s)) if !s.is_empty() => 1,
                Some(Value::Array(a)) => a.len(),
                _ => 0,
            };
            assert_eq!(c.input.len(), given);
            assert!(c.dimensions.is_none_or(|d| d >= 1));
        }
        Err(e) => assert_eq!(e.status.as_u16(), 400, "{}", e.message),
    }
    match ollama::EmbeddingsCall::from_value(&v) {
        Ok(c) => assert!(!c.model.is_empty()),
        Err(e) => assert_eq!(e.status.as_u16(), 400, "{}", e.message),
    }
}

/// A body for `/v2/embed` and `/v1/embed`: a 4xx, or texts and at least
/// one embedding type, each once, in the library's order.
pub fn fuzz_cohere_embed(data: &[u8]) {
    let v: Value = match parse_json(data) {
        Ok(v) => v,
        Err(e) => return client_error(e.status.as_u16(), "parse"),
    };
    match cohere::EmbedCall::from_value(&v) {
        Ok(c) => {
            assert!(!c.texts.is_empty());
            assert!(!c.types.is_empty());
            let order: Vec<usize> = c
                .types
                .iter()
                .map(|t| {
                    embedder::OutputPrecision::ALL
                        .iter()
                        .position(|p| p == t)
                        .unwrap()
                })
                .collect();
            assert!(order.windows(2).all(|w| w[0] < w[1]), "{order:?}");
            assert!(c.output_dimension.is_none_or(|d| d >= 1));
        }
        Err(e) => client_error(e.status.as_u16(), &e.message),
    }
}

/// A key file's text, then (after the first NUL byte) an `Authorization`
/// header value: the file gives keys or an error that shows no line of
/// it; a header holding exactly a key is accepted; no error repeats it.
pub fn fuzz_api_keys(data: &[u8]) {
    let split = data.iter().position(|&b| b == 0).unwrap_or(data.len());
    let (file, header) = (&data[..split], data.get(split + 1..).unwrap_or(&[]));
    let text = String::from_utf8_lossy(file);
    let keys = match auth::Keys::from_file_text(&text, "keys") {
        Ok(k) => k,
        Err(e) => {
            for line in text.lines().map(str::trim).filter(|l| l.len() > 8) {
                assert!(!e.contains(line), "the error shows a line: {e}");
            }
            auth::Keys::default()
        }
    };
    match auth::bearer_token(header) {
        Ok(token) => {
            assert!(!token.is_empty());
            // The key is what follows the scheme, without spaces around it.
            assert!(header.trim_ascii().ends_with(token));
            let _ = keys.accepts(token);
        }
        Err(why) => assert!(!why.is_empty()),
    }
    for line in text.lines().map(str::trim) {
        if line.is_empty() || line.starts_with('#') || !keys.enabled() {
            continue;
        }
        assert!(
            keys.accepts(line.as_bytes()),
            "a key of the file is refused"
        );
        let h = format!("Bearer {line}");
        assert_eq!(auth::bearer_token(h.as_bytes()), Ok(line.as_bytes()));
    }
}
