//! The HuggingFace cache as `huggingface_hub` lays it out, so that what
//! sentence-transformers or `huggingface_hub` fetched is found here and what
//! `embd pull` fetches is found there:
//!
//! ```text
//! $HF_HUB_CACHE/models--org--name/
//!   refs/<revision>              the commit a branch or tag points to
//!   blobs/<etag>                 file contents, named by their etag (the
//!                                sha256 for LFS files, the git blob id else)
//!   blobs/<etag>.incomplete      a download under way (resumed from its size)
//!   snapshots/<commit>/<file>    relative symlinks into ../../blobs
//! $HF_HUB_CACHE/.locks/models--org--name/<etag>.lock
//! ```
//!
//! The root is `HF_HUB_CACHE`, else `HUGGINGFACE_HUB_CACHE`, else
//! `$HF_HOME/hub`, else `$XDG_CACHE_HOME/huggingface/hub`, else
//! `~/.cache/huggingface/hub` (`huggingface_hub.constants`).

use std::path::{Component, Path, PathBuf};

use crate::error::{Error, ErrorKind, Result};
use crate::hub::id::{is_commit, HubId};

/// The root of a HuggingFace hub cache.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HfCache {
    root: PathBuf,
}

/// A snapshot of a repo in the cache: the commit and its folder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snapshot {
    /// The commit hash.
    pub commit: String,
    /// `snapshots/<commit>`.
    pub dir: PathBuf,
}

/// A non-empty environment variable.
pub(crate) fn env_path(name: &str) -> Option<PathBuf> {
    std::env::var_os(name)
        .filter(|v| !v.is_empty())
        .map(|v| expand_home(PathBuf::from(v)))
}

/// `~/x` as `$HOME/x` (Python's `os.path.expanduser`, which
/// `huggingface_hub` applies to its paths).
fn expand_home(p: PathBuf) -> PathBuf {
    match (p.strip_prefix("~"), std::env::var_os("HOME")) {
        (Ok(rest), Some(home)) => PathBuf::from(home).join(rest),
        _ => p,
    }
}

/// `$XDG_CACHE_HOME`, else `~/.cache`.
pub(crate) fn user_cache_dir() -> Result<PathBuf> {
    if let Some(p) = env_path("XDG_CACHE_HOME") {
        return Ok(p);
    }
    match std::env::var_os("HOME").filter(|h| !h.is_empty()) {
        Some(h) => Ok(PathBuf::from(h).join(".cache")),
        None => Err(Error::new(
            ErrorKind::NotFound,
            "no cache folder: set HF_HUB_CACHE (or HF_HOME, XDG_CACHE_HOME or HOME)",
        )),
    }
}

impl HfCache {
    /// The cache `huggingface_hub` uses in this environment.
    ///
    /// # Errors
    /// [`ErrorKind::NotFound`] when no variable names a folder and `HOME` is unset.
    pub fn from_env() -> Result<HfCache> {
        let root = match env_path("HF_HUB_CACHE").or_else(|| env_path("HUGGINGFACE_HUB_CACHE")) {
            Some(p) => p,
            None => match env_path("HF_HOME") {
                Some(h) => h.join("hub"),
                None => user_cache_dir()?.join("huggingface").join("hub"),
            },
        };
        Ok(HfCache { root })
    }

    /// A cache at `root`.
    pub fn at(root: impl Into<PathBuf>) -> HfCache {
        HfCache { root: root.into() }
    }

    /// The cache's root folder.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// `models--org--name`.
    pub fn repo_dir(&self, id: &HubId) -> PathBuf {
        self.root.join(id.cache_folder())
    }

    /// `blobs/<etag>`.
    pub fn blob(&self, id: &HubId, etag: &str) -> PathBuf {
        self.repo_dir(id).join("blobs").join(etag)
    }

    /// `.locks/models--org--name/<etag>.lock`: the lock `huggingface_hub`
    /// holds while it downloads that blob.
    pub fn blob_lock(&self, id: &HubId, etag: &str) -> PathBuf {
        self.root
            .join(".locks")
            .join(id.cache_folder())
            .join(format!("{etag}.lock"))
    }

    /// `snapshots/<commit>`.
    pub fn snapshot_dir(&self, id: &HubId, commit: &str) -> PathBuf {
        self.repo_dir(id).join("snapshots").join(commit)
    }

    /// The snapshot `id`'s revision names, read from the cache alone: a
    /// commit hash with its snapshot folder, else `refs/<revision>`.
    ///
    /// # Errors
    /// [`ErrorKind::NotFound`] naming what the cache lacks (the repo, the
    /// revision, the snapshot folder) and how to fetch it.
    pub fn find_snapshot(&self, id: &HubId) -> Result<Snapshot> {
        let repo = self.repo_dir(id);
        let rev = id.revision();
        let not_found = |what: String| Error::new(ErrorKind::NotFound, what);
        if !repo.is_dir() {
            return Err(not_found(format!(
                "hub model {id} is not in the HuggingFace cache {} (no {}): run `embd pull {id}`, \
                 or set HF_HUB_CACHE or HF_HOME to the cache that holds it",
                self.root.display(),
                id.cache_folder()
            )));
        }
        if is_commit(rev) {
            let dir = self.snapshot_dir(id, rev);
            if dir.is_dir() {
                return Ok(Snapshot {
                    commit: rev.to_string(),
                    dir,
                });
            }
        }
        let ref_file = repo.join("refs").join(rev);
        let commit = match std::fs::read_to_string(&ref_file) {
            Ok(s) => s.trim().to_string(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let known = self.refs(id);
                return Err(not_found(format!(
                    "hub model {} has no revision '{rev}' in the HuggingFace cache {} \
                     (cached: {}): run `embd pull {} --revision {rev}`",
                    id.repo,
                    self.root.display(),
                    if known.is_empty() {
                        "none".to_string()
                    } else {
                        known.join(", ")
                    },
                    id.repo
                )));
            }
            Err(e) => return Err(Error::io(ref_file.display(), e)),
        };
        if !is_commit(&commit) {
            return Err(Error::format(
                ref_file.display(),
                0,
                format!("holds '{commit}', not a commit hash"),
            ));
        }
        let dir = self.snapshot_dir(id, &commit);
        if !dir.is_dir() {
            return Err(not_found(format!(
                "{} points to commit {commit}, whose snapshot folder {} is missing: run `embd pull {id}`",
                ref_file.display(),
                dir.display()
            )));
        }
        Ok(Snapshot { commit, dir })
    }

    /// The names under `refs/` (branches and tags, `refs/pr/N` included).
    pub fn refs(&self, id: &HubId) -> Vec<String> {
        let mut out = Vec::new();
        let base = self.repo_dir(id).join("refs");
        let mut stack = vec![base.clone()];
        while let Some(d) = stack.pop() {
            let Ok(rd) = std::fs::read_dir(&d) else {
                continue;
            };
            for e in rd.flatten() {
                let p = e.path();
                if p.is_dir() {
                    stack.push(p);
                } else if let Ok(rel) = p.strip_prefix(&base) {
                    out.push(rel.to_string_lossy().into_owned());
                }
            }
        }
        out.sort();
        out
    }

    /// Points `refs/<revision>` at `commit` (written atomically).
    ///
    /// # Errors
    /// [`ErrorKind::Io`] when the file cannot be written.
    pub fn write_ref(&self, id: &HubId, revision: &str, commit: &str) -> Result<()> {
        let path = self.repo_dir(id).join("refs").join(revision);
        if std::fs::read_to_string(&path).is_ok_and(|s| s.trim() == commit) {
            return Ok(());
        }
        create_dir_all(path.parent())?;
        crate::atomic_write::atomic_write(&path, |w| {
            use std::io::Write;
            w.write_all(commit.as_bytes())
                .map_err(|e| Error::io(path.display(), e))
        })
    }

    /// Links `snapshots/<commit>/<file>` to `blobs/<etag>` with a relative
    /// symlink, replacing what was there (as `huggingface_hub`'s
    /// `_create_symlink`).
    ///
    /// # Errors
    /// [`ErrorKind::InvalidArgument`] for a file name that is not a plain
    /// relative path; [`ErrorKind::Io`] when the link cannot be made.
    pub fn link(&self, id: &HubId, commit: &str, file: &str, etag: &str) -> Result<PathBuf> {
        check_repo_file(file)?;
        let dst = self.snapshot_dir(id, commit).join(file);
        let depth = Path::new(file).components().count();
        let mut target = PathBuf::new();
        for _ in 0..depth + 1 {
            target.push("..");
        }
        target.push("blobs");
        target.push(etag);
        create_dir_all(dst.parent())?;
        if std::fs::read_link(&dst).is_ok_and(|t| t == target) {
            return Ok(dst);
        }
        let tmp = dst.with_file_name(format!(
            ".{}.link-{}",
            dst.file_name()
                .map_or_else(String::new, |n| n.to_string_lossy().into_owned()),
            std::process::id()
        ));
        let _ = std::fs::remove_file(&tmp);
        symlink(&target, &tmp).map_err(|e| Error::io(tmp.display(), e))?;
        std::fs::rename(&tmp, &dst).map_err(|e| {
            let _ = std::fs::remove_file(&tmp);
            Error::io(dst.display(), e)
        })?;
        Ok(dst)
    }
}

#[cfg(unix)]
fn symlink(target: &Path, link: &Path) -> std::io::Result<()> {
    std::os::unix::fs::symlink(target, link)
}

#[cfg(not(unix))]
fn symlink(_target: &Path, _link: &Path) -> std::io::Result<()> {
    Err(std::io::Error::new(
        std::io::ErrorKind::Unsupported,
        "the HuggingFace cache layout needs symbolic links",
    ))
}

fn create_dir_all(dir: Option<&Path>) -> Result<()> {
    match dir {
        Some(d) => std::fs::create_dir_all(d).map_err(|e| Error::io(d.display(), e)),
        None => Ok(()),
    }
}

/// Checks that a file name from the hub is a plain relative path inside the
/// repo (`1_Pooling/config.json`): no absolute path, `..`, `.`, empty part or
/// backslash.
///
/// # Errors
/// [`ErrorKind::InvalidArgument`] naming the name.
pub fn check_repo_file(file: &str) -> Result<()> {
    let bad = file.is_empty()
        || file.len() > 1024
        || file.contains('\\')
        || file.contains('\0')
        || file
            .split('/')
            .any(|p| p.is_empty() || p == "." || p == "..")
        || !Path::new(file)
            .components()
            .all(|c| matches!(c, Component::Normal(_)));
    if bad {
        return Err(Error::invalid_argument(format!(
            "'{}' is not a file path inside a repo",
            file.escape_debug()
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tmp(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("embd-hfcache-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn links_are_relative_and_refs_resolve() {
        let root = tmp("links");
        let cache = HfCache::at(&root);
        let id = HubId::parse("org/name").unwrap();
        let commit = "0123456789abcdef0123456789abcdef01234567";
        std::fs::create_dir_all(cache.blob(&id, "x").parent().unwrap()).unwrap();
        std::fs::write(cache.blob(&id, "e1"), b"top").unwrap();
        std::fs::write(cache.blob(&id, "e2"), b"nested").unwrap();
        let a = cache.link(&id, commit, "config.json", "e1").unwrap();
        let b = cache
            .link(&id, commit, "1_Pooling/config.json", "e2")
            .unwrap();
        assert_eq!(std::fs::read_link(&a).unwrap(), Path::new("../../blobs/e1"));
        assert_eq!(
            std::fs::read_link(&b).unwrap(),
            Path::new("../../../blobs/e2")
        );
        assert_eq!(std::fs::read(&b).unwrap(), b"nested");
        let err = cache.find_snapshot(&id).unwrap_err();
        assert!(err.message().contains("no revision 'main'"), "{err}");
        cache.write_ref(&id, "main", commit).unwrap();
        let s = cache.find_snapshot(&id).unwrap();
        assert_eq!(s.commit, commit);
        assert_eq!(cache.refs(&id), ["main"]);
        let by_commit = HubId::parse(&format!("org/name@{commit}")).unwrap();
        assert_eq!(cache.find_snapshot(&by_commit).unwrap().dir, s.dir);
        let other = HubId::parse("org/other").unwrap();
        let err = cache.find_snapshot(&other).unwrap_err();
        assert!(err.message().contains("embd pull org/other"), "{err}");
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn repo_file_names_stay_inside_the_repo() {
        for ok in ["config.json", "1_Pooling/config.json", "a.b/c"] {
            check_repo_file(ok).unwrap();
        }
        for bad in [
            "",
            "/etc/passwd",
            "../x",
            "a/../b",
            "a//b",
            "./a",
            "a\\b",
            "a/",
        ] {
            assert!(check_repo_file(bad).is_err(), "{bad}");
        }
    }
}
