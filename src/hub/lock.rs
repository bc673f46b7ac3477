//! An exclusive advisory lock on a file, held until dropped: the lock
//! `huggingface_hub`'s `filelock` takes (`flock` on Unix), so a download of
//! one blob by `embd pull` and by `huggingface_hub` take turns.

use std::fs::{File, OpenOptions};
use std::path::Path;

use crate::error::{Error, Result};

/// A held lock; released when dropped.
#[derive(Debug)]
pub struct FileLock {
    _file: File,
}

impl FileLock {
    /// Waits for and takes the lock of `path` (created with its folders).
    ///
    /// # Errors
    /// [`crate::ErrorKind::Io`] when the file cannot be created or locked.
    pub fn acquire(path: &Path) -> Result<FileLock> {
        if let Some(d) = path.parent() {
            std::fs::create_dir_all(d).map_err(|e| Error::io(d.display(), e))?;
        }
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .map_err(|e| Error::io(path.display(), e))?;
        file.lock()
            .map_err(|e| Error::io(format!("locking {}", path.display()), e))?;
        Ok(FileLock { _file: file })
    }
}
