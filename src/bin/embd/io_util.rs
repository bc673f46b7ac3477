//! Reading input texts and writing `.npy` output.

use std::io::{Read, Write};

use embedder::{Error, ErrorKind};

/// The bytes of `input`: a file, or `-` for standard input.
fn read_raw(input: &str) -> Result<Vec<u8>, Error> {
    let mut raw = Vec::new();
    if input == "-" {
        std::io::stdin()
            .lock()
            .read_to_end(&mut raw)
            .map_err(|e| Error::io("stdin", e))?;
    } else {
        raw = std::fs::read(input).map_err(|e| Error::io(input, e))?;
    }
    Ok(raw)
}

/// Line `lineno` of `input` as UTF-8, or an error naming it.
fn utf8_line<'a>(input: &str, lineno: usize, line: &'a [u8]) -> Result<&'a str, Error> {
    std::str::from_utf8(line).map_err(|_| {
        Error::new(
            ErrorKind::InvalidUtf8,
            format!("{input}: line {lineno} is not valid UTF-8"),
        )
    })
}

/// Line `lineno` of `input` parsed as JSON, or an error naming it.
fn json_line(input: &str, lineno: usize, line: &str) -> Result<serde_json::Value, Error> {
    serde_json::from_str(line)
        .map_err(|e| Error::invalid_argument(format!("{input}: line {lineno}: invalid JSON: {e}")))
}

/// Reads texts: one per line (a trailing `\r` is kept only with `--jsonl`, where
/// texts are JSON strings), or JSON objects with a `"text"` field per line.
/// Input must be UTF-8.
pub fn read_texts(input: &str, jsonl: bool) -> Result<Vec<String>, Error> {
    let raw = read_raw(input)?;
    let mut texts = Vec::new();
    for (n, line) in raw.split(|&b| b == b'\n').enumerate() {
        let lineno = n + 1;
        let line = utf8_line(input, lineno, line)?;
        if jsonl {
            if line.trim().is_empty() {
                continue;
            }
            let v = json_line(input, lineno, line)?;
            let t = v.get("text").and_then(|t| t.as_str()).ok_or_else(|| {
                Error::invalid_argument(format!("{input}: line {lineno}: no string field \"text\""))
            })?;
            texts.push(t.to_string());
        } else {
            texts.push(line.strip_suffix('\r').unwrap_or(line).to_string());
        }
    }
    // A final newline does not start another (empty) text.
    if !jsonl && raw.ends_with(b"\n") {
        texts.pop();
    }
    if !jsonl && raw.is_empty() {
        texts.clear();
    }
    Ok(texts)
}

/// Reads `{"query": ..., "passage": ...}` objects, one per line (blank lines
/// skipped), from a file or `-` (standard input).
pub fn read_pairs(input: &str) -> Result<Vec<(String, String)>, Error> {
    let raw = read_raw(input)?;
    let mut pairs = Vec::new();
    for (n, line) in raw.split(|&b| b == b'\n').enumerate() {
        let lineno = n + 1;
        let line = utf8_line(input, lineno, line)?;
        if line.trim().is_empty() {
            continue;
        }
        let v = json_line(input, lineno, line)?;
        let field = |k: &str| {
            v.get(k)
                .and_then(|t| t.as_str())
                .map(str::to_string)
                .ok_or_else(|| {
                    Error::invalid_argument(format!(
                        "{input}: line {lineno}: no string field \"{k}\""
                    ))
                })
        };
        pairs.push((field("query")?, field("passage")?));
    }
    Ok(pairs)
}

/// Writes a float32 `[n, dim]` array in NumPy `.npy` format (version 1.0).
pub fn write_npy(w: &mut dyn Write, data: &[f32], n: usize, dim: usize) -> std::io::Result<()> {
    npy_header(w, "<f4", n, dim)?;
    let mut buf = Vec::with_capacity(data.len() * 4);
    for x in data {
        buf.extend_from_slice(&x.to_le_bytes());
    }
    w.write_all(&buf)
}

/// Writes an `n x cols` matrix of one-byte elements as `.npy`: `descr` is
/// `|i1` (int8) or `|u1` (uint8); `data` holds the bytes.
pub fn write_npy_bytes(
    w: &mut dyn Write,
    data: &[u8],
    descr: &str,
    n: usize,
    cols: usize,
) -> std::io::Result<()> {
    npy_header(w, descr, n, cols)?;
    w.write_all(data)
}

fn npy_header(w: &mut dyn Write, descr: &str, n: usize, dim: usize) -> std::io::Result<()> {
    let dict = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': ({n}, {dim}), }}");
    // magic(6) + version(2) + header_len(2) + dict + padding + '\n' is a multiple of 64.
    let unpadded = 10 + dict.len() + 1;
    let pad = (64 - unpadded % 64) % 64;
    let header_len = dict.len() + pad + 1;
    w.write_all(b"\x93NUMPY\x01\x00")?;
    w.write_all(&(header_len as u16).to_le_bytes())?;
    w.write_all(dict.as_bytes())?;
    w.write_all(&vec![b' '; pad])?;
    w.write_all(b"\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn npy_header_is_aligned() {
        let mut v = Vec::new();
        write_npy(&mut v, &[1.0, 2.0], 1, 2).unwrap();
        let hl = u16::from_le_bytes([v[8], v[9]]) as usize;
        assert_eq!((10 + hl) % 64, 0);
        assert_eq!(v.len(), 10 + hl + 8);
        assert_eq!(v[10 + hl - 1], b'\n');
    }
}
