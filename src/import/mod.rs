//! Importers: model folders of other ecosystems read into a [`ModelFile`]
//! (the converter's input). Unlike the containers in [`crate::formats`], an
//! import maps another project's model layout (names, configuration) onto
//! ours.
//!
//! Opening any model path, a container file, a folder container or a HF
//! folder, is [`ModelFile::open`], defined here rather than in
//! [`crate::formats`]: the containers know nothing of the importers.

pub mod hf;

use std::path::Path;

use crate::error::Result;
use crate::formats::{ModelFile, ReadHint, ReadOptions};

impl ModelFile {
    /// Opens `path`, detecting the container from its first bytes; a directory is
    /// read as a folder container (a Core ML blob folder with `manifest.json`)
    /// or a HF folder (with `config.json`).
    pub fn open(path: impl AsRef<Path>, opts: ReadOptions) -> Result<ModelFile> {
        Self::open_hinted(path, opts, &ReadHint::default())
    }

    /// [`ModelFile::open`] with a hint about what the caller reads first.
    pub fn open_hinted(
        path: impl AsRef<Path>,
        opts: ReadOptions,
        hint: &ReadHint,
    ) -> Result<ModelFile> {
        let path = path.as_ref();
        if !ModelFile::is_folder_container(path) && hf::is_hf_dir(path) {
            return hf::read_dir(path, &hf::HfOptions::default());
        }
        ModelFile::open_container(path, opts, hint)
    }

    /// Reads a HuggingFace / sentence-transformers BERT folder (see
    /// [`crate::import::hf`]).
    pub fn open_hf_dir(dir: impl AsRef<Path>, opts: &hf::HfOptions) -> Result<ModelFile> {
        hf::read_dir(dir.as_ref(), opts)
    }
}
