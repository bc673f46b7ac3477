//! HuggingFace / sentence-transformers folders: detection ([`detect`]) and the
//! importer per architecture ([`encoder`] for the encoder families the engine
//! runs (BERT, MPNet, RoBERTa, XLM-RoBERTa) with their tokenizers, [`gpt2`] for GPT-2 models stored as LWT).

pub mod encoder;
pub mod gpt2;
pub mod model2vec;
mod outputs;

use std::path::Path;

use serde_json::Value;

use crate::error::{Error, ErrorKind, Result};
use crate::formats::ModelFile;

pub use encoder::{
    iso8601, now_iso8601, read_dir, safetensors_entries, tensor_order_key, HfOptions,
};

/// Which importer a HF folder needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HfArchitecture {
    /// A BERT-family encoder (BERT, MPNet, RoBERTa, ...; see [`encoder::read_dir`]).
    Encoder,
    /// GPT-2 (`model_type` = `gpt2`; see [`gpt2::import_gpt2_dir`]).
    Gpt2,
}

/// Whether `path` is a folder with a `config.json`, the mark of a HF folder.
pub fn is_hf_dir(path: &Path) -> bool {
    path.is_dir()
        && (path.join("config.json").is_file() || path.join("router_config.json").is_file())
}

/// The importer `path` needs: `None` when it is not a HF folder. A folder whose
/// `config.json` says `model_type` = `gpt2` is [`HfArchitecture::Gpt2`]; any
/// other HF folder goes to the encoder importer (which names what it cannot
/// run).
pub fn detect(path: &Path) -> Option<HfArchitecture> {
    if is_gpt2_dir(path) {
        Some(HfArchitecture::Gpt2)
    } else if is_hf_dir(path) {
        Some(HfArchitecture::Encoder)
    } else {
        None
    }
}

/// True for a folder whose `config.json` says GPT-2.
fn is_gpt2_dir(dir: &Path) -> bool {
    let Ok(text) = std::fs::read_to_string(dir.join("config.json")) else {
        return false;
    };
    serde_json::from_str::<Value>(&text)
        .ok()
        .and_then(|v| {
            v.get("model_type")
                .and_then(|t| t.as_str())
                .map(|t| t == "gpt2")
        })
        .unwrap_or(false)
}

/// Imports a HF folder with the importer [`detect`] picks. `opts` apply to
/// encoder folders; a GPT-2 import records the folder's name as `model_name`.
///
/// # Errors
/// [`ErrorKind::NotFound`] when `dir` is not a HF folder; else the importer's.
pub fn import_dir(dir: &Path, opts: &HfOptions) -> Result<ModelFile> {
    match detect(dir) {
        Some(HfArchitecture::Gpt2) => gpt2::import_gpt2_dir(dir),
        Some(HfArchitecture::Encoder) => read_dir(dir, opts),
        None => Err(Error::new(
            ErrorKind::NotFound,
            format!(
                "{}: not a HuggingFace folder (no config.json)",
                dir.display()
            ),
        )),
    }
}
