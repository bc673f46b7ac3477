//! Request bodies of the JSON routes: the rules every POST route applies
//! before its JSON is parsed (docs/SERVER.md, "Request bodies"), in this
//! order:
//!
//! 1. `Content-Type` must be JSON (`application/json`, parameters such as
//!    `charset` allowed, or `application/<x>+json`), as TEI's extractor asks;
//!    none or another is 415.
//! 2. `Content-Encoding` may be `identity`, `gzip` (`x-gzip`) or `deflate`
//!    (zlib, or raw deflate as some clients send it); anything else is 415.
//! 3. A `Content-Length` over `--payload-limit` is 413 before any of the body
//!    is read.
//! 4. The body as sent, and again after decoding, is at most
//!    `--payload-limit` bytes (413): decoding stops one byte past the limit,
//!    so a small compressed bomb never expands further. It must arrive within
//!    `--read-timeout-secs` (408).
//! 5. Arrays and objects nest at most [`MAX_DEPTH`] deep anywhere in the
//!    body, also in fields the route ignores (400); then `serde_json` parses.

use std::io::Read;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::Request;
use axum::http::header::{CONTENT_ENCODING, CONTENT_LENGTH, CONTENT_TYPE};
use axum::http::{HeaderMap, StatusCode};
use http_body_util::BodyExt;
use serde::de::DeserializeOwned;

use crate::error::{ApiError, ErrorType};
use crate::AppState;

/// The deepest nesting of arrays and objects a body may have, counting the
/// body's own object: `serde_json`'s own limit (it refuses a 128th level),
/// enforced here over the whole body, ignored fields included (`serde_json`
/// skips an ignored value without a depth limit).
pub const MAX_DEPTH: usize = 127;

/// Bodies larger than this (as sent) are decoded on the blocking pool.
const INLINE_DECODE_BYTES: usize = 64 << 10;

/// A body's content coding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Coding {
    /// As sent.
    Identity,
    /// gzip (RFC 1952), one or more members.
    Gzip,
    /// zlib (RFC 1950), or raw deflate (RFC 1951) when the first two bytes
    /// are not a zlib header.
    Deflate,
}

/// 415 with TEI's body (the route may switch the dialect).
fn unsupported(message: impl Into<String>) -> ApiError {
    ApiError::new(
        StatusCode::UNSUPPORTED_MEDIA_TYPE,
        ErrorType::Validation,
        message,
    )
    .closing()
}

/// Rule 1: the body is JSON by its `Content-Type`.
pub fn check_content_type(headers: &HeaderMap) -> Result<(), ApiError> {
    let Some(v) = headers.get(CONTENT_TYPE) else {
        return Err(unsupported(
            "the request has no Content-Type; send the JSON body with \
             `Content-Type: application/json`",
        ));
    };
    let essence = v
        .to_str()
        .ok()
        .and_then(|s| s.split(';').next())
        .map(|s| s.trim().to_ascii_lowercase())
        .unwrap_or_default();
    let json = match essence.split_once('/') {
        Some(("application", sub)) => sub == "json" || sub.ends_with("+json"),
        _ => false,
    };
    if json {
        Ok(())
    } else {
        Err(unsupported(format!(
            "Content-Type {:?} is not JSON; send the body with `Content-Type: application/json`",
            String::from_utf8_lossy(v.as_bytes())
        )))
    }
}

/// Rule 2: the body's content coding (every `Content-Encoding` header, each
/// a comma-separated list; `identity` entries count for nothing).
pub fn content_coding(headers: &HeaderMap) -> Result<Coding, ApiError> {
    let mut codings = Vec::new();
    for v in headers.get_all(CONTENT_ENCODING) {
        let s = String::from_utf8_lossy(v.as_bytes()).to_ascii_lowercase();
        codings.extend(
            s.split(',')
                .map(str::trim)
                .filter(|c| !c.is_empty() && *c != "identity")
                .map(String::from),
        );
    }
    match codings.as_slice() {
        [] => Ok(Coding::Identity),
        [c] if c == "gzip" || c == "x-gzip" => Ok(Coding::Gzip),
        [c] if c == "deflate" => Ok(Coding::Deflate),
        _ => Err(unsupported(format!(
            "Content-Encoding {:?} is not supported; send the body as it is, \
             or with one of gzip or deflate",
            codings.join(", ")
        ))),
    }
}

/// Rule 3: a declared length over the limit.
fn check_declared_length(headers: &HeaderMap, limit: usize) -> Result<(), ApiError> {
    let declared = headers
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|s| s.trim().parse::<u64>().ok());
    match declared {
        Some(n) if n > limit as u64 => Err(ApiError::too_large(format!(
            "the request body ({n} bytes, by its Content-Length) is larger than the \
             payload limit of {limit} bytes (--payload-limit)"
        ))
        .closing()),
        _ => Ok(()),
    }
}

/// Rule 4, the body as sent: at most `limit` bytes within `timeout`.
async fn collect(body: Body, limit: usize, timeout: Duration) -> Result<Bytes, ApiError> {
    let limited = http_body_util::Limited::new(body, limit);
    match tokio::time::timeout(timeout, limited.collect()).await {
        Err(_) => Err(ApiError::new(
            StatusCode::REQUEST_TIMEOUT,
            ErrorType::Timeout,
            format!("the request body did not arrive within {timeout:?}"),
        )
        .closing()),
        Ok(Err(e)) if e.is::<http_body_util::LengthLimitError>() => {
            Err(ApiError::too_large(format!(
                "the request body is larger than the payload limit of {limit} bytes \
                 (--payload-limit)"
            ))
            .closing())
        }
        Ok(Err(e)) => Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            ErrorType::Validation,
            format!("cannot read the request body: {e}"),
        )
        .closing()),
        Ok(Ok(c)) => Ok(c.to_bytes()),
    }
}

/// Reads and drops a body the server answers without using (a refused API
/// key), within `--payload-limit` and `--read-timeout-secs`, so that the
/// client's keep-alive connection stays usable. False when it could not be
/// read to its end: the answer must close the connection.
pub async fn discard(st: &AppState, req: Request) -> bool {
    let (parts, body) = req.into_parts();
    let limit = st.cfg.payload_limit;
    if check_declared_length(&parts.headers, limit).is_err() {
        return false;
    }
    let timeout = Duration::from_secs(st.cfg.read_timeout_secs.max(1));
    collect(body, limit, timeout).await.is_ok()
}

/// Rule 4, after decoding: `raw` decoded, at most `limit` bytes (the
/// decoder is read to `limit + 1` bytes at most).
pub fn decode(coding: Coding, raw: &[u8], limit: usize) -> Result<Vec<u8>, ApiError> {
    use flate2::bufread::{DeflateDecoder, MultiGzDecoder, ZlibDecoder};
    let reader: Box<dyn Read + '_> = match coding {
        Coding::Identity => return Ok(raw.to_vec()),
        Coding::Gzip => Box::new(MultiGzDecoder::new(raw)),
        Coding::Deflate if is_zlib_header(raw) => Box::new(ZlibDecoder::new(raw)),
        Coding::Deflate => Box::new(DeflateDecoder::new(raw)),
    };
    let name = match coding {
        Coding::Gzip => "gzip",
        _ => "deflate",
    };
    let mut out = Vec::new();
    reader
        .take(limit as u64 + 1)
        .read_to_end(&mut out)
        .map_err(|e| {
            ApiError::new(
                StatusCode::BAD_REQUEST,
                ErrorType::Validation,
                format!("cannot decode the {name} request body: {e}"),
            )
        })?;
    if out.len() > limit {
        return Err(ApiError::too_large(format!(
            "the {name} request body decodes to more than the payload limit of {limit} bytes \
             (--payload-limit)"
        )));
    }
    Ok(out)
}

/// A zlib stream's first two bytes: method 8 (deflate), a window of at most
/// 32 KiB, and the check bits (RFC 1950).
fn is_zlib_header(b: &[u8]) -> bool {
    match b {
        [cmf, flg, ..] => {
            cmf & 0x0f == 8 && cmf >> 4 <= 7 && (u16::from(*cmf) * 256 + u16::from(*flg)) % 31 == 0
        }
        _ => false,
    }
}

/// Rule 5: the byte offset of the first array or object nested deeper than
/// [`MAX_DEPTH`], outside strings.
pub fn too_deep(b: &[u8]) -> Option<usize> {
    let (mut depth, mut in_string, mut escaped) = (0usize, false, false);
    for (i, &c) in b.iter().enumerate() {
        if in_string {
            if escaped {
                escaped = false;
            } else if c == b'\\' {
                escaped = true;
            } else if c == b'"' {
                in_string = false;
            }
            continue;
        }
        match c {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                if depth > MAX_DEPTH {
                    return Some(i);
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    None
}

/// Reads and parses a JSON route's body under the rules above.
pub async fn read_json<T: DeserializeOwned>(st: &AppState, req: Request) -> Result<T, ApiError> {
    let (parts, body) = req.into_parts();
    check_content_type(&parts.headers)?;
    let coding = content_coding(&parts.headers)?;
    let limit = st.cfg.payload_limit;
    check_declared_length(&parts.headers, limit)?;
    let timeout = Duration::from_secs(st.cfg.read_timeout_secs.max(1));
    let raw = collect(body, limit, timeout).await?;
    let bytes: Bytes = if coding == Coding::Identity || raw.is_empty() {
        raw
    } else if raw.len() <= INLINE_DECODE_BYTES {
        decode(coding, &raw, limit)?.into()
    } else {
        tokio::task::spawn_blocking(move || decode(coding, &raw, limit))
            .await
            .map_err(|_| ApiError::backend("decoding the request body failed"))??
            .into()
    };
    parse_json(&bytes)
}

/// A decoded body as JSON of type `T`: empty (400), nested too deep (400),
/// not JSON (400), or not of `T`'s shape (422).
///
/// # Errors
/// As above, with a message naming the cause.
pub fn parse_json<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    if bytes.is_empty() {
        return Err(ApiError::empty(
            "the request body is empty; send a JSON object",
        ));
    }
    if let Some(at) = too_deep(bytes) {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            ErrorType::Validation,
            format!(
                "invalid JSON request: arrays and objects nest deeper than {MAX_DEPTH} levels \
                 (at byte {at})"
            ),
        ));
    }
    serde_json::from_slice(bytes).map_err(|e| {
        let status = if e.is_data() {
            StatusCode::UNPROCESSABLE_ENTITY
        } else {
            StatusCode::BAD_REQUEST
        };
        ApiError::new(
            status,
            ErrorType::Validation,
            format!("invalid JSON request: {e}"),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn depth_counts_arrays_and_objects_outside_strings() {
        let nest = |n: usize| format!("{}{}", "[".repeat(n), "]".repeat(n));
        assert_eq!(too_deep(nest(MAX_DEPTH).as_bytes()), None);
        assert_eq!(too_deep(nest(MAX_DEPTH + 1).as_bytes()), Some(MAX_DEPTH));
        // serde_json agrees at the edge.
        assert!(serde_json::from_str::<serde_json::Value>(&nest(MAX_DEPTH)).is_ok());
        assert!(serde_json::from_str::<serde_json::Value>(&nest(MAX_DEPTH + 1)).is_err());
        // Brackets in strings, escaped quotes, objects.
        let s = format!("{{\"a\": \"{}\\\"[[\"}}", "[".repeat(500));
        assert_eq!(too_deep(s.as_bytes()), None);
        let o = format!(
            "{}1{}",
            "{\"k\":".repeat(MAX_DEPTH + 1),
            "}".repeat(MAX_DEPTH + 1)
        );
        assert_eq!(too_deep(o.as_bytes()), Some(5 * MAX_DEPTH));
    }

    #[test]
    fn content_types_and_codings() {
        let h = |k: &'static str, v: &'static str| {
            let mut m = HeaderMap::new();
            m.insert(k, v.parse().unwrap());
            m
        };
        for ok in [
            "application/json",
            "Application/JSON; charset=utf-8",
            "application/vnd.x+json",
        ] {
            assert!(check_content_type(&h("content-type", ok)).is_ok(), "{ok}");
        }
        for bad in [
            "text/plain",
            "application/x-www-form-urlencoded",
            "json",
            "",
        ] {
            let e = check_content_type(&h("content-type", bad)).unwrap_err();
            assert_eq!(e.status, 415, "{bad}");
        }
        assert_eq!(
            check_content_type(&HeaderMap::new()).unwrap_err().status,
            415
        );
        assert_eq!(content_coding(&HeaderMap::new()).unwrap(), Coding::Identity);
        assert_eq!(
            content_coding(&h("content-encoding", "GZIP")).unwrap(),
            Coding::Gzip
        );
        assert_eq!(
            content_coding(&h("content-encoding", "identity, deflate")).unwrap(),
            Coding::Deflate
        );
        for bad in ["br", "zstd", "gzip, gzip", "compress"] {
            let e = content_coding(&h("content-encoding", bad)).unwrap_err();
            assert_eq!(e.status, 415, "{bad}");
        }
    }

    #[test]
    fn decoding_stops_at_the_limit() {
        use flate2::write::{DeflateEncoder, GzEncoder, ZlibEncoder};
        use flate2::Compression;
        use std::io::Write;
        let text = b"{\"inputs\": \"hello\"}".repeat(10);
        let bomb = vec![b' '; 10 << 20];
        let mut gz = GzEncoder::new(Vec::new(), Compression::best());
        gz.write_all(&text).unwrap();
        let gz = gz.finish().unwrap();
        assert_eq!(decode(Coding::Gzip, &gz, 1000).unwrap(), text);
        assert_eq!(decode(Coding::Gzip, &gz, 100).unwrap_err().status, 413);
        let mut z = ZlibEncoder::new(Vec::new(), Compression::best());
        z.write_all(&text).unwrap();
        assert_eq!(
            decode(Coding::Deflate, &z.finish().unwrap(), 1000).unwrap(),
            text
        );
        let mut d = DeflateEncoder::new(Vec::new(), Compression::best());
        d.write_all(&text).unwrap();
        assert_eq!(
            decode(Coding::Deflate, &d.finish().unwrap(), 1000).unwrap(),
            text
        );
        let mut b = GzEncoder::new(Vec::new(), Compression::best());
        b.write_all(&bomb).unwrap();
        let b = b.finish().unwrap();
        assert!(b.len() < 20_000, "{}", b.len());
        assert_eq!(decode(Coding::Gzip, &b, 2_000_000).unwrap_err().status, 413);
        assert_eq!(
            decode(Coding::Gzip, b"not gzip", 1000).unwrap_err().status,
            400
        );
        assert_eq!(
            decode(Coding::Gzip, &gz[..gz.len() / 2], 1000)
                .unwrap_err()
                .status,
            400
        );
    }
}
