//! CORS (`--cors-allow-origin`, off by default): which web pages may call
//! the server from a browser. With origins configured, a request whose
//! `Origin` is one of them (or any, with `*`) gets
//! `Access-Control-Allow-Origin` on its answer (errors included) and may
//! read the timing headers; a preflight (`OPTIONS` with `Origin` and
//! `Access-Control-Request-Method`) on a route is answered 204 with the
//! route's method, the request headers it asked for, and a max age. A
//! preflight from an origin not allowed gets 204 without those headers (the
//! browser then refuses the call). Without `--cors-allow-origin` the server
//! adds nothing and `OPTIONS` is 405 like any other method a route does not
//! answer.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::header::{
    ACCESS_CONTROL_ALLOW_HEADERS, ACCESS_CONTROL_ALLOW_METHODS, ACCESS_CONTROL_ALLOW_ORIGIN,
    ACCESS_CONTROL_EXPOSE_HEADERS, ACCESS_CONTROL_MAX_AGE, ACCESS_CONTROL_REQUEST_HEADERS,
    ACCESS_CONTROL_REQUEST_METHOD, ORIGIN, VARY,
};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::api::Route;
use crate::AppState;

/// Seconds a browser may cache a preflight's answer.
pub const MAX_AGE_SECS: u32 = 3600;

/// The answer headers a page's script may read (TEI's timing headers).
const EXPOSED: &str = "x-compute-type, x-compute-tokens, x-compute-characters, \
    x-tokenization-time, x-queue-time, x-inference-time, x-compute-time, x-total-time";

/// The origins allowed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origins {
    /// `*`: every origin.
    Any,
    /// These, as browsers send them (`scheme://host[:port]`, lower case).
    List(Vec<String>),
}

impl Origins {
    /// `--cors-allow-origin` values: `None` when there are none (CORS off).
    ///
    /// # Errors
    /// A value that is neither `*` nor an origin (`http(s)://host[:port]`,
    /// no path: browsers send no trailing slash).
    pub fn parse(values: &[String]) -> Result<Option<Origins>, String> {
        let values: Vec<String> = values
            .iter()
            .flat_map(|v| v.split(','))
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())
            .collect();
        if values.is_empty() {
            return Ok(None);
        }
        if values.iter().any(|v| v == "*") {
            return Ok(Some(Origins::Any));
        }
        let mut list = Vec::new();
        for v in values {
            let lower = v.to_ascii_lowercase();
            let host = lower
                .strip_prefix("http://")
                .or_else(|| lower.strip_prefix("https://"));
            match host {
                Some(h) if !h.is_empty() && !h.contains(['/', '?', '#', ' ', '@']) => {
                    list.push(lower);
                }
                _ => {
                    return Err(format!(
                        "--cors-allow-origin {v:?} is not an origin: give \
                         scheme://host[:port] as the browser sends it (such as \
                         https://app.example.com or http://localhost:3000, no path or \
                         trailing slash), or * for any"
                    ))
                }
            }
        }
        Ok(Some(Origins::List(list)))
    }

    /// The `Access-Control-Allow-Origin` value for a request's `Origin`, if
    /// allowed.
    fn allow(&self, origin: &HeaderValue) -> Option<HeaderValue> {
        match self {
            Origins::Any => Some(HeaderValue::from_static("*")),
            Origins::List(l) => {
                let o = origin.to_str().ok()?.to_ascii_lowercase();
                l.contains(&o).then(|| origin.clone())
            }
        }
    }
}

/// The methods `path` answers among `routes`, as an
/// `Access-Control-Allow-Methods` value.
fn methods_of(routes: &[Route], path: &str) -> Option<String> {
    let m: Vec<&str> = routes
        .iter()
        .filter(|r| r.path == path)
        .map(|r| r.method)
        .collect();
    (!m.is_empty()).then(|| m.join(", "))
}

fn add_vary(h: &mut HeaderMap, what: &'static str) {
    h.append(VARY, HeaderValue::from_static(what));
}

/// The middleware over the route table `routes`: answers preflights, adds
/// the allow headers to answers.
pub async fn cors(
    State((st, routes)): State<(Arc<AppState>, &'static [Route])>,
    req: Request,
    next: Next,
) -> Response {
    let Some(origins) = &st.cors else {
        return next.run(req).await;
    };
    let origin = req.headers().get(ORIGIN).cloned();
    let preflight = req.method() == Method::OPTIONS
        && origin.is_some()
        && req.headers().contains_key(ACCESS_CONTROL_REQUEST_METHOD);
    if preflight {
        let Some(methods) = methods_of(routes, req.uri().path()) else {
            // No such route: the router's 404.
            return next.run(req).await;
        };
        let mut resp = StatusCode::NO_CONTENT.into_response();
        let h = resp.headers_mut();
        add_vary(
            h,
            "origin, access-control-request-method, access-control-request-headers",
        );
        if let Some(allow) = origin.as_ref().and_then(|o| origins.allow(o)) {
            h.insert(ACCESS_CONTROL_ALLOW_ORIGIN, allow);
            if let Ok(v) = HeaderValue::from_str(&methods) {
                h.insert(ACCESS_CONTROL_ALLOW_METHODS, v);
            }
            // Any request header may be sent (the server has no credentials
            // to protect): the ones asked for are allowed.
            if let Some(asked) = req.headers().get(ACCESS_CONTROL_REQUEST_HEADERS) {
                h.insert(ACCESS_CONTROL_ALLOW_HEADERS, asked.clone());
            }
            h.insert(ACCESS_CONTROL_MAX_AGE, HeaderValue::from(MAX_AGE_SECS));
        }
        return resp;
    }
    let mut resp = next.run(req).await;
    let h = resp.headers_mut();
    if *origins != Origins::Any {
        add_vary(h, "origin");
    }
    if let Some(allow) = origin.as_ref().and_then(|o| origins.allow(o)) {
        h.insert(ACCESS_CONTROL_ALLOW_ORIGIN, allow);
        h.insert(
            ACCESS_CONTROL_EXPOSE_HEADERS,
            HeaderValue::from_static(EXPOSED),
        );
    }
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origins_parse() {
        let p = |v: &[&str]| Origins::parse(&v.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        assert_eq!(p(&[]).unwrap(), None);
        assert_eq!(p(&["http://a.b", "*"]).unwrap(), Some(Origins::Any));
        assert_eq!(
            p(&["HTTP://Localhost:3000,https://x.org"]).unwrap(),
            Some(Origins::List(vec![
                "http://localhost:3000".into(),
                "https://x.org".into()
            ]))
        );
        for bad in ["localhost:3000", "http://x.org/", "https://", "ftp://x"] {
            assert!(p(&[bad]).is_err(), "{bad}");
        }
    }
}
