//! The hub's answers, read without any network code: the model info of
//! `GET /api/models/<repo>/revision/<revision>` (its commit and file list),
//! which of its files a conversion needs, the `ETag` of a
//! `resolve/<revision>/<file>` answer, and the hub's error answers (status,
//! `X-Error-Code`, `X-Error-Message`) as errors that name the cause.

use serde_json::Value;

use crate::error::{Error, ErrorKind, Result};
use crate::hub::cache::check_repo_file;
use crate::hub::id::is_commit;

/// Largest model-info answer read (a repo with many thousand files stays far below).
pub const MAX_INFO_BYTES: usize = 16 << 20;

/// Most files a model-info answer may list.
pub const MAX_FILES: usize = 100_000;

/// A repo at one commit, as the hub lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RepoInfo {
    /// The commit the revision resolved to.
    pub commit: String,
    /// Its files (`siblings[].rfilename`), in the hub's order.
    pub files: Vec<RepoFile>,
    /// `gated`: `"auto"`, `"manual"`, or `None` for an open repo.
    pub gated: Option<String>,
}

/// One file of a repo.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RepoFile {
    /// Its path in the repo.
    pub name: String,
    /// Its size, when the answer has it (`?blobs=true`).
    pub size: Option<u64>,
    /// The sha256 of an LFS file, when the answer has it.
    pub lfs_sha256: Option<String>,
}

/// Reads a model-info answer.
///
/// # Errors
/// [`ErrorKind::Format`] naming the field that is missing or malformed.
pub fn parse_repo_info(body: &[u8]) -> Result<RepoInfo> {
    let bad = |detail: String| Error::format("hub model info", 0, detail);
    if body.len() > MAX_INFO_BYTES {
        return Err(bad(format!(
            "{} bytes, more than {MAX_INFO_BYTES}",
            body.len()
        )));
    }
    let v: Value = serde_json::from_slice(body).map_err(|e| bad(format!("not JSON: {e}")))?;
    let obj = v
        .as_object()
        .ok_or_else(|| bad("not a JSON object".into()))?;
    let commit = obj
        .get("sha")
        .and_then(Value::as_str)
        .ok_or_else(|| bad("no \"sha\" (the commit)".into()))?;
    if !is_commit(commit) {
        return Err(bad(format!(
            "\"sha\" is '{}', not a commit hash",
            commit.escape_debug()
        )));
    }
    let siblings = obj
        .get("siblings")
        .and_then(Value::as_array)
        .ok_or_else(|| bad("no \"siblings\" list (the files)".into()))?;
    if siblings.len() > MAX_FILES {
        return Err(bad(format!(
            "{} files, more than {MAX_FILES}",
            siblings.len()
        )));
    }
    let mut files = Vec::with_capacity(siblings.len());
    for (i, s) in siblings.iter().enumerate() {
        let name = s
            .get("rfilename")
            .and_then(Value::as_str)
            .ok_or_else(|| bad(format!("siblings[{i}] has no \"rfilename\"")))?;
        check_repo_file(name).map_err(|e| bad(format!("siblings[{i}]: {}", e.message())))?;
        let lfs = s.get("lfs").filter(|l| !l.is_null());
        let lfs_sha256 = match lfs.map(|l| l.get("sha256").and_then(Value::as_str)) {
            None => None,
            Some(Some(h)) if is_sha256(h) => Some(h.to_string()),
            Some(_) => return Err(bad(format!("siblings[{i}].lfs has no valid \"sha256\""))),
        };
        let size = match s.get("size").or_else(|| lfs.and_then(|l| l.get("size"))) {
            None | Some(Value::Null) => None,
            Some(n) => Some(
                n.as_u64()
                    .ok_or_else(|| bad(format!("siblings[{i}].size is not a byte count")))?,
            ),
        };
        files.push(RepoFile {
            name: name.to_string(),
            size,
            lfs_sha256,
        });
    }
    let gated = match obj.get("gated") {
        Some(Value::String(g)) => Some(g.clone()),
        _ => None,
    };
    Ok(RepoInfo {
        commit: commit.to_string(),
        files,
        gated,
    })
}

/// Files of a model folder the converter reads (besides the weights), by name.
const FOLDER_FILES: &[&str] = &[
    "config.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "added_tokens.json",
    "vocab.txt",
    "vocab.json",
    "merges.txt",
    "sentencepiece.bpe.model",
    "spiece.model",
    "tokenizer.model",
    "modules.json",
    "config_sentence_transformers.json",
    "sentence_bert_config.json",
    "model.safetensors.index.json",
    "sparse_linear.pt",
    "colbert_linear.pt",
];

/// Extensions of the files read inside a sentence-transformers module folder
/// (`1_Pooling/config.json`, `2_Dense/model.safetensors`, ...).
const MODULE_EXTENSIONS: &[&str] = &["json", "txt", "model", "safetensors", "pt"];

/// Folders of other runtimes' exports, never read by the converter.
const OTHER_RUNTIMES: &[&str] = &["onnx", "openvino", "coreml", "tflite", "flax", "tf", "mlx"];

/// Whether the converter reads `name`: the folder files, the top-level
/// safetensors weights (one file or shards), and the module folders' configs
/// and weights. Not: other formats' weights (`pytorch_model.bin`, ONNX,
/// OpenVINO), checkpoints, docs.
pub fn needed_for_conversion(name: &str) -> bool {
    match name.split_once('/') {
        None => FOLDER_FILES.contains(&name) || name.ends_with(".safetensors"),
        Some((dir, rest)) => {
            let ext = rest.rsplit_once('.').map_or("", |(_, e)| e);
            !OTHER_RUNTIMES.contains(&dir)
                && !dir.starts_with("checkpoint")
                && !dir.starts_with('.')
                && MODULE_EXTENSIONS.contains(&ext)
        }
    }
}

/// The files of `info` to fetch for a conversion.
///
/// # Errors
/// [`ErrorKind::NotFound`] when the repo lacks what every conversion needs:
/// `config.json`, or weights in safetensors.
pub fn files_to_fetch<'a>(repo: &str, info: &'a RepoInfo) -> Result<Vec<&'a RepoFile>> {
    let has = |n: &str| info.files.iter().any(|f| f.name == n);
    let missing =
        |what: &str| {
            let others: Vec<&str> = info
                .files
                .iter()
                .take(12)
                .map(|f| f.name.as_str())
                .collect();
            Error::new(
                ErrorKind::NotFound,
                format!(
                "hub model {repo} at {} has no {what}, which the converter needs (its files: {}{})",
                info.commit,
                if others.is_empty() { "none".to_string() } else { others.join(", ") },
                if info.files.len() > others.len() { ", ..." } else { "" }
            ),
            )
        };
    if !has("config.json") {
        return Err(missing("config.json"));
    }
    if !info
        .files
        .iter()
        .any(|f| !f.name.contains('/') && f.name.ends_with(".safetensors"))
    {
        return Err(missing(
            "model.safetensors (weights in safetensors; pytorch_model.bin is not read)",
        ));
    }
    Ok(info
        .files
        .iter()
        .filter(|f| needed_for_conversion(&f.name))
        .collect())
}

/// Whether `s` is a sha256 in hex (an LFS file's etag).
pub fn is_sha256(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|b| b.is_ascii_hexdigit())
}

/// An `ETag` / `X-Linked-Etag` header as `huggingface_hub` stores it: the
/// weak prefix and the quotes removed.
///
/// # Errors
/// [`ErrorKind::Format`] when what is left could not name a blob file.
pub fn normalize_etag(header: &str) -> Result<String> {
    let e = header.trim();
    let e = e.strip_prefix("W/").unwrap_or(e);
    let e = e.trim_matches('"');
    if e.is_empty()
        || e.len() > 128
        || !e
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    {
        return Err(Error::format(
            "hub answer",
            0,
            format!("ETag '{}' cannot name a blob", header.escape_debug()),
        ));
    }
    Ok(e.to_string())
}

/// What a request was for, to name it in an error.
#[derive(Debug, Clone, Copy)]
pub enum Asked<'a> {
    /// The model info of a revision.
    Info {
        /// `org/name`.
        repo: &'a str,
        /// The revision.
        revision: &'a str,
    },
    /// One file.
    File {
        /// `org/name`.
        repo: &'a str,
        /// The revision.
        revision: &'a str,
        /// Its path in the repo.
        file: &'a str,
    },
}

/// An error answer of the hub as an error naming the cause: an unknown repo,
/// a revision or file that does not exist, a gated or private repo without
/// (or with an insufficient) token.
///
/// `code` and `message` are the `X-Error-Code` and `X-Error-Message`
/// headers, `has_token` whether the request carried `HF_TOKEN`.
pub fn hub_error(
    status: u16,
    code: Option<&str>,
    message: Option<&str>,
    asked: Asked<'_>,
    has_token: bool,
) -> Error {
    let (repo, revision, file) = match asked {
        Asked::Info { repo, revision } => (repo, revision, None),
        Asked::File {
            repo,
            revision,
            file,
        } => (repo, revision, Some(file)),
    };
    let said = message
        .filter(|m| !m.is_empty())
        .map(|m| {
            format!(
                " (the hub said: {})",
                m.chars().take(300).collect::<String>()
            )
        })
        .unwrap_or_default();
    let token_hint = if has_token {
        "the token in HF_TOKEN has no access to it"
    } else {
        "set HF_TOKEN to a token with access"
    };
    let (kind, text) = match (status, code) {
        (_, Some("GatedRepo")) | (403, _) => (
            ErrorKind::InvalidArgument,
            format!(
                "hub model {repo} is gated or private (HTTP {status}): request access on its page, then {token_hint}{said}"
            ),
        ),
        (_, Some("RepoNotFound")) | (401, _) => (
            ErrorKind::NotFound,
            format!(
                "no model {repo} on the hub (HTTP {status}): check the name; if it is private, {token_hint}{said}"
            ),
        ),
        (_, Some("RevisionNotFound")) => (
            ErrorKind::NotFound,
            format!("hub model {repo} has no revision '{revision}' (HTTP {status}){said}"),
        ),
        (404, _) => match file {
            Some(f) => (
                ErrorKind::NotFound,
                format!("hub model {repo}@{revision} has no file {f} (HTTP 404){said}"),
            ),
            None => (
                ErrorKind::NotFound,
                format!(
                    "hub model {repo}: no such repo or no revision '{revision}' (HTTP 404){said}"
                ),
            ),
        },
        _ => (
            ErrorKind::Io,
            format!(
                "the hub answered HTTP {status} for {}{said}",
                match file {
                    Some(f) => format!("{repo}@{revision}/{f}"),
                    None => format!("the model info of {repo}@{revision}"),
                }
            ),
        ),
    };
    Error::new(kind, text)
}

#[cfg(test)]
mod tests {
    use super::*;

    const COMMIT: &str = "c9745ed1d9f207416be6d2e6f8de32d1f16199bf";

    fn info(files: &[&str]) -> RepoInfo {
        let siblings: Vec<String> = files
            .iter()
            .map(|f| format!("{{\"rfilename\": \"{f}\"}}"))
            .collect();
        let body = format!(
            "{{\"id\": \"o/n\", \"sha\": \"{COMMIT}\", \"siblings\": [{}]}}",
            siblings.join(",")
        );
        parse_repo_info(body.as_bytes()).unwrap()
    }

    #[test]
    fn reads_the_model_info_and_picks_what_conversion_needs() {
        let i = info(&[
            ".gitattributes",
            "1_Pooling/config.json",
            "README.md",
            "config.json",
            "model.safetensors",
            "modules.json",
            "onnx/model.onnx",
            "onnx/config.json",
            "pytorch_model.bin",
            "sentence_bert_config.json",
            "tokenizer.json",
            "vocab.txt",
            "openvino/openvino_model.xml",
        ]);
        assert_eq!(i.commit, COMMIT);
        let names: Vec<&str> = files_to_fetch("o/n", &i)
            .unwrap()
            .iter()
            .map(|f| f.name.as_str())
            .collect();
        assert_eq!(
            names,
            [
                "1_Pooling/config.json",
                "config.json",
                "model.safetensors",
                "modules.json",
                "sentence_bert_config.json",
                "tokenizer.json",
                "vocab.txt"
            ]
        );
    }

    #[test]
    fn a_repo_without_config_or_safetensors_names_the_file() {
        let e = files_to_fetch("o/n", &info(&["config.json", "pytorch_model.bin"])).unwrap_err();
        assert!(e.message().contains("no model.safetensors"), "{e}");
        let e = files_to_fetch("o/n", &info(&["model.safetensors"])).unwrap_err();
        assert!(e.message().contains("no config.json"), "{e}");
    }

    #[test]
    fn malformed_answers_name_the_field() {
        for (body, what) in [
            (&b"[]"[..], "not a JSON object"),
            (b"{\"siblings\": []}", "no \"sha\""),
            (b"{\"sha\": \"main\", \"siblings\": []}", "not a commit"),
            (b"{\"sha\": \"c9745ed1d9f207416be6d2e6f8de32d1f16199bf\"}", "siblings"),
            (
                b"{\"sha\": \"c9745ed1d9f207416be6d2e6f8de32d1f16199bf\", \"siblings\": [{\"rfilename\": \"../x\"}]}",
                "not a file path",
            ),
            (b"{", "not JSON"),
        ] {
            let e = parse_repo_info(body).unwrap_err();
            assert!(e.message().contains(what), "{e}");
        }
    }

    #[test]
    fn etags_lose_quotes_and_weak_prefixes() {
        assert_eq!(normalize_etag("\"abc\"").unwrap(), "abc");
        assert_eq!(normalize_etag("W/\"abc-1\"").unwrap(), "abc-1");
        assert!(normalize_etag("\"../x\"").is_err());
        assert!(normalize_etag("\"\"").is_err());
    }

    #[test]
    fn error_answers_name_the_cause() {
        let info = Asked::Info {
            repo: "o/n",
            revision: "v9",
        };
        let m = |s, c, t| hub_error(s, c, None, info, t).message().to_string();
        assert!(m(401, Some("RepoNotFound"), false).contains("no model o/n"));
        assert!(m(404, Some("RevisionNotFound"), false).contains("no revision 'v9'"));
        assert!(m(401, Some("GatedRepo"), false).contains("set HF_TOKEN"));
        assert!(m(403, None, true).contains("no access"));
        let file = Asked::File {
            repo: "o/n",
            revision: "main",
            file: "config.json",
        };
        let e = hub_error(404, Some("EntryNotFound"), None, file, false);
        assert!(e.message().contains("no file config.json"), "{e}");
        assert!(hub_error(500, None, Some("boom"), file, false)
            .message()
            .contains("the hub said: boom"));
    }
}
