//! Hub model ids: `org/name`, optionally `@revision` (a branch, a tag or a
//! commit), checked by `huggingface_hub`'s rules (`validate_repo_id`): one
//! `/`, ASCII letters, digits, `-`, `_` and `.`, no `--` or `..`, at most 96
//! characters, no `-` or `.` at either end of a part.

use std::fmt;

use crate::error::{Error, Result};

/// Longest repo id the hub accepts (`huggingface_hub`'s `validate_repo_id`).
pub const MAX_REPO_ID: usize = 96;

/// A model on the hub: `org/name` and the revision asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HubId {
    /// `org/name`.
    pub repo: String,
    /// A branch, tag or commit; `None`: `main`.
    pub revision: Option<String>,
}

/// The revision of an id that names none.
pub const DEFAULT_REVISION: &str = "main";

impl HubId {
    /// Parses `org/name[@revision]`.
    ///
    /// # Errors
    /// [`crate::ErrorKind::InvalidArgument`] naming what is wrong with the id.
    pub fn parse(s: &str) -> Result<HubId> {
        let (repo, revision) = match s.split_once('@') {
            Some((r, rev)) => (r, Some(rev)),
            None => (s, None),
        };
        check_repo(repo).map_err(|why| {
            Error::invalid_argument(format!(
                "'{s}' is not a hub model id (org/name[@revision]): {why}"
            ))
        })?;
        if let Some(rev) = revision {
            check_revision(rev).map_err(|why| {
                Error::invalid_argument(format!("'{s}': bad revision '{rev}': {why}"))
            })?;
        }
        Ok(HubId {
            repo: repo.to_string(),
            revision: revision.map(str::to_string),
        })
    }

    /// The id with an explicit revision (`--revision`), which must not
    /// contradict one given with `@`.
    ///
    /// # Errors
    /// [`crate::ErrorKind::InvalidArgument`] for a bad or contradicting revision.
    pub fn with_revision(mut self, revision: Option<&str>) -> Result<HubId> {
        let Some(rev) = revision else {
            return Ok(self);
        };
        check_revision(rev)
            .map_err(|why| Error::invalid_argument(format!("bad revision '{rev}': {why}")))?;
        match &self.revision {
            Some(r) if r != rev => Err(Error::invalid_argument(format!(
                "{self} names revision '{r}' and --revision '{rev}': give one"
            ))),
            _ => {
                self.revision = Some(rev.to_string());
                Ok(self)
            }
        }
    }

    /// The revision asked for: the one given, else `main`.
    pub fn revision(&self) -> &str {
        self.revision.as_deref().unwrap_or(DEFAULT_REVISION)
    }

    /// The folder name of the repo in the HF cache: `models--org--name`.
    pub fn cache_folder(&self) -> String {
        format!("models--{}", self.repo.replace('/', "--"))
    }
}

impl fmt::Display for HubId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.revision {
            Some(r) => write!(f, "{}@{r}", self.repo),
            None => f.write_str(&self.repo),
        }
    }
}

/// Whether `rev` is a full commit hash (40 lowercase hex digits).
pub fn is_commit(rev: &str) -> bool {
    rev.len() == 40
        && rev
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

fn check_repo(repo: &str) -> std::result::Result<(), String> {
    if repo.len() > MAX_REPO_ID {
        return Err(format!("longer than {MAX_REPO_ID} characters"));
    }
    let Some((org, name)) = repo.split_once('/') else {
        return Err("no '/' between the organization and the name".into());
    };
    for part in [org, name] {
        if part.is_empty() {
            return Err("an empty part".into());
        }
        if let Some(c) = part
            .chars()
            .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')))
        {
            return Err(format!(
                "the character {c:?} (letters, digits, '-', '_', '.' only)"
            ));
        }
        if part.starts_with(['-', '.']) || part.ends_with(['-', '.']) {
            return Err(format!("'{part}' starts or ends with '-' or '.'"));
        }
    }
    if repo.contains("--") || repo.contains("..") {
        return Err("'--' or '..' inside".into());
    }
    Ok(())
}

fn check_revision(rev: &str) -> std::result::Result<(), String> {
    if rev.is_empty() {
        return Err("empty".into());
    }
    if rev.len() > 255 {
        return Err("longer than 255 characters".into());
    }
    if let Some(c) = rev
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/')))
    {
        return Err(format!("the character {c:?}"));
    }
    if rev.starts_with('/') || rev.ends_with('/') || rev.contains("..") || rev.contains("//") {
        return Err("not a branch, tag or commit name".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_ids_and_revisions() {
        let id = HubId::parse("sentence-transformers/all-MiniLM-L6-v2").unwrap();
        assert_eq!(id.repo, "sentence-transformers/all-MiniLM-L6-v2");
        assert_eq!(id.revision(), "main");
        assert_eq!(
            id.cache_folder(),
            "models--sentence-transformers--all-MiniLM-L6-v2"
        );
        let id = HubId::parse("BAAI/bge-small-en-v1.5@refs/pr/3").unwrap();
        assert_eq!(id.revision(), "refs/pr/3");
        assert_eq!(id.to_string(), "BAAI/bge-small-en-v1.5@refs/pr/3");
    }

    #[test]
    fn refuses_what_the_hub_refuses() {
        for bad in [
            "name-only",
            "a/b/c",
            "/name",
            "org/",
            "org/na me",
            "org/na--me",
            "org/na..me",
            "-org/name",
            "org/name.",
            "org/name@",
            "org/name@../x",
            "org/name@a b",
            "",
        ] {
            assert!(HubId::parse(bad).is_err(), "{bad}");
        }
        let long = format!("o/{}", "n".repeat(MAX_REPO_ID));
        assert!(HubId::parse(&long).unwrap_err().message().contains("96"));
    }

    #[test]
    fn a_revision_flag_must_agree_with_the_id() {
        let id = HubId::parse("org/name@v1").unwrap();
        assert!(id.clone().with_revision(Some("v1")).is_ok());
        assert!(id.with_revision(Some("v2")).is_err());
        let id = HubId::parse("org/name")
            .unwrap()
            .with_revision(Some("dev"))
            .unwrap();
        assert_eq!(id.revision(), "dev");
    }

    #[test]
    fn commits_are_forty_hex_digits() {
        assert!(is_commit(&"a".repeat(40)));
        assert!(!is_commit(&"A".repeat(40)));
        assert!(!is_commit("main"));
    }
}
