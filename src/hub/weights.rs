//! The converted models of hub snapshots: each snapshot converted once (the
//! `embd convert` code path, f32 EMBD) into
//! `$EMBD_CACHE_DIR/models--org--name/<commit>-<key>.weights`, then opened
//! in place. `<key>` covers the snapshot's files (names and the blobs they
//! point to, or sizes and times for plain files) and the converter's format
//! version, so a snapshot that gains a file or a converter that writes other
//! bytes converts again; any other open reuses the file.
//!
//! The root is `EMBD_CACHE_DIR`, else `$XDG_CACHE_HOME/embedder`, else
//! `~/.cache/embedder`. Conversions of one snapshot by several processes
//! take turns on a lock file; the file appears by an atomic rename.

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::hub::cache::{env_path, user_cache_dir, Snapshot};
use crate::hub::id::HubId;
use crate::hub::lock::FileLock;

/// Where converted hub models are kept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WeightsCache {
    root: PathBuf,
}

impl WeightsCache {
    /// The cache of this environment (`EMBD_CACHE_DIR`, `XDG_CACHE_HOME`, `HOME`).
    ///
    /// # Errors
    /// [`crate::ErrorKind::NotFound`] when none of them is set.
    pub fn from_env() -> Result<WeightsCache> {
        Ok(WeightsCache {
            root: match env_path("EMBD_CACHE_DIR") {
                Some(p) => p,
                None => user_cache_dir()?.join("embedder"),
            },
        })
    }

    /// A cache at `root`.
    pub fn at(root: impl Into<PathBuf>) -> WeightsCache {
        WeightsCache { root: root.into() }
    }

    /// The converted file of `snapshot` (it may not exist yet).
    ///
    /// # Errors
    /// [`crate::ErrorKind::Io`] when the snapshot folder cannot be read.
    pub fn path_of(&self, id: &HubId, snapshot: &Snapshot) -> Result<PathBuf> {
        Ok(self.root.join(id.cache_folder()).join(format!(
            "{}-{:08x}.weights",
            snapshot.commit,
            snapshot_key(&snapshot.dir)?
        )))
    }

    /// The converted file of `snapshot`, converting it first unless a
    /// conversion of the same files by the same converter exists.
    ///
    /// # Errors
    /// The converter's errors for the snapshot folder (with the hub id);
    /// [`crate::ErrorKind::Io`] for file system failures.
    pub fn weights_for(&self, id: &HubId, snapshot: &Snapshot) -> Result<PathBuf> {
        let path = self.path_of(id, snapshot)?;
        if path.is_file() {
            return Ok(path);
        }
        let dir = path.parent().unwrap_or(&self.root).to_path_buf();
        std::fs::create_dir_all(&dir).map_err(|e| Error::io(dir.display(), e))?;
        let _turn = FileLock::acquire(&dir.join(format!("{}.lock", snapshot.commit)))?;
        if path.is_file() {
            return Ok(path);
        }
        convert_snapshot(id, &snapshot.dir, &path)?;
        remove_stale(&dir, &snapshot.commit, &path);
        Ok(path)
    }
}

/// `embd convert <snapshot> -o <path> --name org/name`.
fn convert_snapshot(id: &HubId, src: &Path, path: &Path) -> Result<()> {
    use crate::convert::{convert_dtype, TargetDType};
    use crate::formats::embd::{write_file, WriteOptions};
    use crate::import::hf::{import_dir, HfOptions};
    let ctx = |e: Error| e.context(format_args!("hub model {id} ({})", src.display()));
    let model = import_dir(
        src,
        &HfOptions {
            name: Some(id.repo.clone()),
            ..HfOptions::default()
        },
    )
    .map_err(ctx)?;
    let converted = convert_dtype(&model, TargetDType::F32).map_err(ctx)?;
    write_file(&converted, path, &WriteOptions::default(), &mut |_, _| {})
}

/// Removes the other conversions of `commit` (older snapshot contents or
/// converter versions); best effort.
fn remove_stale(dir: &Path, commit: &str, keep: &Path) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for e in rd.flatten() {
        let p = e.path();
        let name = e.file_name().to_string_lossy().into_owned();
        if p != keep && name.starts_with(&format!("{commit}-")) && name.ends_with(".weights") {
            let _ = std::fs::remove_file(&p);
        }
    }
}

/// A CRC32 over the converter's format version and, for every file of the
/// snapshot in name order, its relative path and its symlink target (a blob
/// named by its content), or its size and modification time for a plain file.
fn snapshot_key(dir: &Path) -> Result<u32> {
    let mut h = crc32fast::Hasher::new();
    h.update(&crate::convert::CONVERTER_VERSION.to_le_bytes());
    h.update(&crate::formats::embd::VERSION_MAJOR.to_le_bytes());
    h.update(&crate::formats::embd::VERSION_MINOR.to_le_bytes());
    let mut files = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let rd = std::fs::read_dir(&d).map_err(|e| Error::io(d.display(), e))?;
        for e in rd {
            let e = e.map_err(|e| Error::io(d.display(), e))?;
            let p = e.path();
            let ft = e.file_type().map_err(|e| Error::io(p.display(), e))?;
            if ft.is_dir() {
                stack.push(p);
            } else {
                files.push(p);
            }
        }
    }
    files.sort();
    for p in files {
        let rel = p.strip_prefix(dir).unwrap_or(&p);
        h.update(rel.to_string_lossy().as_bytes());
        h.update(&[0]);
        match std::fs::read_link(&p) {
            Ok(t) => h.update(t.to_string_lossy().as_bytes()),
            Err(_) => {
                let m = std::fs::metadata(&p).map_err(|e| Error::io(p.display(), e))?;
                h.update(&m.len().to_le_bytes());
                if let Ok(t) = m.modified() {
                    let d = t.duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
                    h.update(&d.as_nanos().to_le_bytes());
                }
            }
        }
        h.update(&[0]);
    }
    Ok(h.finalize())
}
