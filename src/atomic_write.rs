//! Writing a file so that readers see either the old file or the complete new
//! one, never a torn write: the one helper every writer uses (the container
//! writers in [`crate::formats`] and the `embd` CLI).
//!
//! The bytes go to a temporary file in the destination's directory (so the
//! rename stays on one file system), which is flushed, synced to disk, and
//! renamed over the destination; the directory is then synced where the
//! system allows it, so the rename itself survives a crash. On any failure the
//! temporary file is removed and the destination is left untouched.

use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::error::{Error, Result};

/// Buffer size of the writer handed to the closure.
const BUFFER: usize = 1 << 20;

/// Writes `path` atomically: `write` fills a buffered writer over a temporary
/// file `.<name>.tmp-<pid>-<n>` in the same directory, which replaces `path` only
/// once `write` succeeded and the data is on disk.
///
/// # Errors
/// The error of `write`, or [`crate::ErrorKind::Io`] for file system failures
/// (creating, syncing or renaming the temporary file);
/// [`crate::ErrorKind::InvalidArgument`] when `path` has no file name.
pub fn atomic_write(
    path: &Path,
    write: impl FnOnce(&mut BufWriter<std::fs::File>) -> Result<()>,
) -> Result<()> {
    let file_name = path
        .file_name()
        .ok_or_else(|| Error::invalid_argument(format!("{}: not a file path", path.display())))?;
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    // Unique per process and call, so that two threads writing the same
    // path do not share a temporary file.
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let tmp = dir.join(format!(
        ".{}.tmp-{}-{}",
        file_name.to_string_lossy(),
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    let result = (|| -> Result<()> {
        let f = std::fs::File::create(&tmp).map_err(|e| Error::io(tmp.display(), e))?;
        let mut bw = BufWriter::with_capacity(BUFFER, f);
        write(&mut bw)?;
        bw.flush().map_err(|e| Error::io(tmp.display(), e))?;
        let f = bw
            .into_inner()
            .map_err(|e| Error::io(tmp.display(), e.into_error()))?;
        f.sync_all().map_err(|e| Error::io(tmp.display(), e))?;
        drop(f);
        std::fs::rename(&tmp, path).map_err(|e| Error::io(path.display(), e))
    })();
    match result {
        Ok(()) => {
            sync_dir(&dir);
            Ok(())
        }
        Err(e) => {
            // Best effort: the temporary file may not exist.
            let _ = std::fs::remove_file(&tmp);
            Err(e)
        }
    }
}

/// Syncs a directory so that a rename inside it is durable (Unix; best effort,
/// a no-op elsewhere).
fn sync_dir(dir: &Path) {
    #[cfg(unix)]
    if let Ok(d) = std::fs::File::open(dir) {
        let _ = d.sync_all();
    }
    #[cfg(not(unix))]
    let _ = dir;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;

    /// Writes "old" to a scratch file, then `write` atomically over it;
    /// returns the result, the file's bytes after, and the folder's file count.
    fn over_old(
        name: &str,
        write: impl FnOnce(&mut BufWriter<std::fs::File>) -> Result<()>,
    ) -> (Result<()>, Vec<u8>, usize) {
        let d = std::env::temp_dir().join(format!("embd-atomic-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        let p = d.join("f.bin");
        std::fs::write(&p, b"old").unwrap();
        let r = atomic_write(&p, write);
        let after = (
            std::fs::read(&p).unwrap(),
            std::fs::read_dir(&d).unwrap().count(),
        );
        std::fs::remove_dir_all(&d).unwrap();
        (r, after.0, after.1)
    }

    #[test]
    fn writes_and_replaces() {
        let (r, bytes, files) =
            over_old("ok", |w| w.write_all(b"new").map_err(|e| Error::io("w", e)));
        r.unwrap();
        assert_eq!(bytes, b"new");
        assert_eq!(files, 1, "no temp file left");
    }

    #[test]
    fn failure_keeps_the_old_file_and_removes_the_temp() {
        let (r, bytes, files) = over_old("err", |w| {
            w.write_all(b"partial").unwrap();
            Err(Error::invalid_argument("stop"))
        });
        assert_eq!(r.unwrap_err().kind(), ErrorKind::InvalidArgument);
        assert_eq!(bytes, b"old");
        assert_eq!(files, 1, "no temp file left");
    }
}
