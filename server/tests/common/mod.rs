//! Helpers of the server tests: the model, the reference data, a server on
//! 127.0.0.1 port 0, and a raw HTTP/1.1 client over `TcpStream` (so that the
//! tests can also send what no well-behaved client sends).

#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::time::Duration;

use embd_server::{spawn, Config, Handle};
use serde_json::Value;

/// The repository root.
pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// `models/<name>` if present; `None` after a skip line with
/// `EMBD_SKIP_MODEL_TESTS=1`; else the test fails saying how to fetch it.
pub fn model(name: &str, test: &str) -> Option<PathBuf> {
    let p = repo().join("models").join(name);
    if p.exists() {
        return Some(p);
    }
    if std::env::var("EMBD_SKIP_MODEL_TESTS").as_deref() == Ok("1") {
        eprintln!("skipping {test}: {} is absent", p.display());
        return None;
    }
    panic!(
        "{} is absent: run scripts/fetch_model.sh (or set EMBD_SKIP_MODEL_TESTS=1)",
        p.display()
    );
}

/// all-MiniLM-L6-v2.
pub fn minilm(test: &str) -> Option<PathBuf> {
    model("all-MiniLM-L6-v2.weights", test)
}

/// `$EMBD_SHARED_DIR`, else `../shared` beside the repository (or one further
/// up, for a worktree).
pub fn shared() -> PathBuf {
    if let Some(d) = std::env::var_os("EMBD_SHARED_DIR") {
        return PathBuf::from(d);
    }
    let near = repo().join("../shared");
    if near.join("reference").is_dir() {
        near
    } else {
        repo().join("../../shared")
    }
}

/// (text, input_ids, embedding) of the MiniLM reference.
pub fn reference() -> Vec<(String, Vec<u32>, Vec<f32>)> {
    let p = shared().join("reference/minilm_reference.jsonl");
    let text = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap();
            (
                v["text"].as_str().unwrap().to_string(),
                v["input_ids"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|x| x.as_u64().unwrap() as u32)
                    .collect(),
                v["embedding"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|x| x.as_f64().unwrap() as f32)
                    .collect(),
            )
        })
        .collect()
}

/// A server for `model` with two engine threads, a 2 s read timeout, and
/// whatever `f` changes.
pub fn start(model: &std::path::Path, f: impl FnOnce(&mut Config)) -> Handle {
    let mut cfg = Config::for_model(model.display().to_string());
    cfg.threads = Some(2);
    cfg.read_timeout_secs = 2;
    cfg.shutdown_timeout_secs = 10;
    f(&mut cfg);
    spawn(cfg).unwrap()
}

/// An answer.
#[derive(Debug)]
pub struct Resp {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Resp {
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| {
            panic!(
                "status {}: body is not JSON ({e}): {:?}",
                self.status,
                String::from_utf8_lossy(&self.body)
            )
        })
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// Connects with a 30 s read timeout.
pub fn connect(addr: SocketAddr) -> TcpStream {
    let s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    s
}

/// Reads one answer from `s` (content-length or chunked; or to EOF).
pub fn read_response(s: &mut TcpStream) -> Resp {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    let head_end = loop {
        if let Some(p) = find(&buf, b"\r\n\r\n") {
            break p;
        }
        let n = s.read(&mut chunk).unwrap();
        assert!(n > 0, "connection closed before the headers: {buf:?}");
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8(buf[..head_end].to_vec()).unwrap();
    let mut lines = head.split("\r\n");
    let status: u16 = lines
        .next()
        .unwrap()
        .split(' ')
        .nth(1)
        .unwrap()
        .parse()
        .unwrap();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let mut body = buf[head_end + 4..].to_vec();
    let get = |k: &str| headers.iter().find(|(h, _)| h == k).map(|(_, v)| v.clone());
    if let Some(len) = get("content-length") {
        let len: usize = len.parse().unwrap();
        while body.len() < len {
            let n = s.read(&mut chunk).unwrap();
            assert!(n > 0, "connection closed in the body");
            body.extend_from_slice(&chunk[..n]);
        }
        body.truncate(len);
    } else if get("transfer-encoding").as_deref() == Some("chunked") {
        loop {
            if body.ends_with(b"0\r\n\r\n") {
                break;
            }
            let n = s.read(&mut chunk).unwrap();
            if n == 0 {
                break;
            }
            body.extend_from_slice(&chunk[..n]);
        }
        body = dechunk(&body);
    } else {
        let _ = s.read_to_end(&mut body);
    }
    Resp {
        status,
        headers,
        body,
    }
}

fn find(h: &[u8], n: &[u8]) -> Option<usize> {
    h.windows(n.len()).position(|w| w == n)
}

fn dechunk(mut b: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    while let Some(p) = find(b, b"\r\n") {
        let size = usize::from_str_radix(std::str::from_utf8(&b[..p]).unwrap().trim(), 16).unwrap();
        if size == 0 {
            break;
        }
        out.extend_from_slice(&b[p + 2..p + 2 + size]);
        b = &b[p + 2 + size + 2..];
    }
    out
}

/// Sends raw bytes on a new connection and reads the answer.
pub fn raw(addr: SocketAddr, bytes: &[u8]) -> Resp {
    let mut s = connect(addr);
    s.write_all(bytes).unwrap();
    read_response(&mut s)
}

/// The bytes of `method path` with `body`, on a keep-alive connection.
pub fn request_bytes(method: &str, path: &str, body: &[u8]) -> Vec<u8> {
    let mut r = format!(
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    r.extend_from_slice(body);
    r
}

/// `method path` with `body` on a new connection.
pub fn request(addr: SocketAddr, method: &str, path: &str, body: &[u8]) -> Resp {
    raw(addr, &request_bytes(method, path, body))
}

/// POSTs JSON.
pub fn post(addr: SocketAddr, path: &str, v: &Value) -> Resp {
    request(addr, "POST", path, v.to_string().as_bytes())
}

/// GETs.
pub fn get(addr: SocketAddr, path: &str) -> Resp {
    request(addr, "GET", path, b"")
}

/// The floats of a JSON array.
pub fn floats(v: &Value) -> Vec<f32> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap() as f32)
        .collect()
}

/// Bitwise equality.
pub fn same(a: &[f32], b: &[f32]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits())
}

/// Cosine similarity in f64.
pub fn cosine(a: &[f32], b: &[f32]) -> f64 {
    let dot: f64 = a
        .iter()
        .zip(b)
        .map(|(x, y)| f64::from(*x) * f64::from(*y))
        .sum();
    let na: f64 = a.iter().map(|x| f64::from(*x).powi(2)).sum::<f64>().sqrt();
    let nb: f64 = b.iter().map(|x| f64::from(*x).powi(2)).sum::<f64>().sqrt();
    dot / (na * nb)
}

/// Asserts a TEI error body with `status` and `error_type`.
pub fn tei_error(r: &Resp, status: u16, kind: &str) -> String {
    assert_eq!(r.status, status, "{:?}", String::from_utf8_lossy(&r.body));
    let v = r.json();
    assert_eq!(v["error_type"], kind, "{v}");
    v["error"].as_str().unwrap().to_string()
}

/// Asserts an OpenAI error body with `status` and `code`.
pub fn openai_error(r: &Resp, status: u16, code: &str) -> String {
    assert_eq!(r.status, status, "{:?}", String::from_utf8_lossy(&r.body));
    let v = r.json();
    assert_eq!(v["error"]["code"], code, "{v}");
    assert!(v["error"]["type"].is_string(), "{v}");
    v["error"]["message"].as_str().unwrap().to_string()
}
