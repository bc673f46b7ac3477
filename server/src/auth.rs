//! API keys (`--api-key`, `EMBD_API_KEY`, `--api-key-file`): with keys set,
//! every route of [`Access::Key`] (and `/metrics` unless `--metrics-public`)
//! needs `Authorization: Bearer KEY` with one of them. A refusal is a 401 in
//! the route's own error body (TEI, OpenAI, Cohere, Ollama), carries
//! `WWW-Authenticate: Bearer`, is counted as an `unauthorized` error, and
//! never repeats what the client sent. Keys are compared in constant time.
//! A key in the query string is refused: URLs end up in logs and histories.

use std::path::Path;
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::header::{AUTHORIZATION, WWW_AUTHENTICATE};
use axum::http::{HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::api::{Access, Route};
use crate::error::{ApiError, Dialect, ErrorType};
use crate::AppState;

/// Query parameters that carry keys in other servers' URLs; refused here.
const QUERY_KEY_NAMES: &[&str] = &[
    "api_key",
    "api-key",
    "apikey",
    "key",
    "token",
    "access_token",
];

/// The server's API keys (none: no check).
#[derive(Default)]
pub struct Keys {
    keys: Vec<Vec<u8>>,
}

impl std::fmt::Debug for Keys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the keys themselves.
        write!(f, "Keys({} keys)", self.keys.len())
    }
}

impl Keys {
    /// The keys of `--api-key` (and `EMBD_API_KEY`) and of the key file
    /// (one key a line; blank lines and lines starting with `#` skipped).
    ///
    /// # Errors
    /// An empty key, a key with characters a Bearer token cannot carry, a key
    /// file that cannot be read or holds no key. Messages never show a key.
    pub fn load(given: &[String], file: Option<&Path>) -> Result<Keys, String> {
        let mut keys = Vec::new();
        for (i, k) in given.iter().enumerate() {
            keys.push(check_key(
                k,
                &format!("--api-key number {} (or EMBD_API_KEY)", i + 1),
            )?);
        }
        if let Some(p) = file {
            let text = std::fs::read_to_string(p)
                .map_err(|e| format!("--api-key-file {}: {e}", p.display()))?;
            let what = format!("--api-key-file {}", p.display());
            keys.extend(Keys::from_file_text(&text, &what)?.keys);
        }
        Ok(Keys { keys })
    }

    /// The keys of a key file's text, one a line (blank lines and lines
    /// starting with `#` skipped); `what` names the file in messages.
    ///
    /// # Errors
    /// A line that is not a key (naming its number, never its text), or no
    /// key at all.
    pub fn from_file_text(text: &str, what: &str) -> Result<Keys, String> {
        let mut keys = Vec::new();
        for (n, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            keys.push(check_key(line, &format!("{what} line {}", n + 1))?);
        }
        if keys.is_empty() {
            return Err(format!(
                "{what}: the file holds no key (one key a line; lines starting with # are \
                 comments)"
            ));
        }
        Ok(Keys { keys })
    }

    /// True when requests need a key.
    pub fn enabled(&self) -> bool {
        !self.keys.is_empty()
    }

    /// True when `given` is one of the keys. Every key is compared, each in
    /// time that depends on the lengths only.
    pub fn accepts(&self, given: &[u8]) -> bool {
        let mut ok = false;
        for k in &self.keys {
            ok |= constant_time_eq(k, given);
        }
        ok
    }
}

fn check_key(k: &str, what: &str) -> Result<Vec<u8>, String> {
    if k.is_empty() {
        return Err(format!("{what}: an API key cannot be empty"));
    }
    // RFC 6750's b64token characters, which is what a Bearer header carries.
    let ok = |b: u8| b.is_ascii_alphanumeric() || b"-._~+/=".contains(&b);
    if !k.bytes().all(ok) {
        return Err(format!(
            "{what}: an API key may hold only letters, digits and - . _ ~ + / = (what an \
             `Authorization: Bearer` header can carry)"
        ));
    }
    Ok(k.as_bytes().to_vec())
}

/// Compares two byte strings without an early exit: the time depends on
/// the longer length only, not on where they differ.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    let n = a.len().max(b.len());
    let mut diff = u8::from(a.len() != b.len());
    for i in 0..n {
        let x = a.get(i).copied().unwrap_or(0);
        let y = b.get(i).copied().unwrap_or(0);
        diff |= std::hint::black_box(x ^ y);
    }
    diff == 0
}

/// Why a request was refused (the message of the 401).
fn refusal(req: &Request, keys: &Keys) -> Option<&'static str> {
    if let Some(q) = req.uri().query() {
        let named = q.split('&').any(|pair| {
            let name = pair.split('=').next().unwrap_or("");
            QUERY_KEY_NAMES.iter().any(|k| name.eq_ignore_ascii_case(k))
        });
        if named {
            return Some(
                "API keys are not taken from the query string (URLs are logged); send the \
                 header `Authorization: Bearer KEY` instead",
            );
        }
    }
    let Some(h) = req.headers().get(AUTHORIZATION) else {
        return Some("this server needs an API key: send the header `Authorization: Bearer KEY`");
    };
    match bearer_token(h.as_bytes()) {
        Err(why) => Some(why),
        Ok(token) if keys.accepts(token) => None,
        Ok(_) => Some("invalid API key"),
    }
}

/// The key of an `Authorization` header value `Bearer KEY` (the scheme in
/// any case, spaces around the key ignored).
///
/// # Errors
/// Why it is not one: another scheme, or no key.
pub fn bearer_token(h: &[u8]) -> Result<&[u8], &'static str> {
    const EMPTY: &str = "the API key in the Authorization header is empty";
    let h = h.trim_ascii();
    if h.eq_ignore_ascii_case(b"bearer") {
        return Err(EMPTY);
    }
    let token = match h.iter().position(|&b| b == b' ') {
        Some(i) if h[..i].eq_ignore_ascii_case(b"bearer") => h[i + 1..].trim_ascii(),
        _ => {
            return Err(
                "the Authorization header is not of the form `Bearer KEY` (the only scheme \
                 this server takes)",
            )
        }
    };
    if token.is_empty() {
        Err(EMPTY)
    } else {
        Ok(token)
    }
}

/// The middleware over the route table: lets through what the route's
/// [`Access`] allows, answers 401 in the route's dialect otherwise.
pub async fn check(
    State((st, routes)): State<(Arc<AppState>, &'static [Route])>,
    req: Request,
    next: Next,
) -> Response {
    if !st.keys.enabled() {
        return next.run(req).await;
    }
    let route = routes.iter().find(|r| r.path == req.uri().path());
    let access = route.map_or(Access::Key, |r| r.access);
    let open = match access {
        Access::Public => true,
        Access::Metrics => st.cfg.metrics_public,
        Access::Key => false,
    };
    if open {
        return next.run(req).await;
    }
    match refusal(&req, &st.keys) {
        None => next.run(req).await,
        Some(why) => {
            let dialect = route.map_or(Dialect::Tei, |r| r.dialect);
            let mut err = ApiError::new(StatusCode::UNAUTHORIZED, ErrorType::Unauthorized, why)
                .dialect(dialect);
            // Read the body the answer does not need, so that the client's
            // keep-alive connection survives the 401.
            if !crate::body::discard(&st, req).await {
                err = err.closing();
            }
            let mut resp = err.into_response();
            resp.headers_mut()
                .insert(WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            resp
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compare_and_load() {
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abc", b"abd"));
        assert!(!constant_time_eq(b"abc", b"abcd"));
        assert!(!constant_time_eq(b"", b"a"));
        let k = Keys::load(&["k1".into(), "k2".into()], None).unwrap();
        assert!(k.accepts(b"k2") && k.accepts(b"k1") && !k.accepts(b"k3") && !k.accepts(b""));
        assert!(Keys::load(&[String::new()], None)
            .unwrap_err()
            .contains("empty"));
        let e = Keys::load(&["bad key".into()], None).unwrap_err();
        assert!(e.contains("may hold only") && !e.contains("bad key"), "{e}");
        assert!(!Keys::default().enabled());
        assert_eq!(format!("{k:?}"), "Keys(2 keys)");
    }
}
