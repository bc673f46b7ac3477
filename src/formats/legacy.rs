//! Legacy cpp_embedder layout (to be written).
use super::{Backing, ModelFile, ReadOptions};
use crate::error::{Error, Result};
use std::sync::Arc;
/// Detects the legacy layout.
pub fn looks_legacy(_b: &[u8]) -> bool {
    false
}
/// Reads a legacy file.
pub fn read(_b: Arc<Backing>, _o: ReadOptions) -> Result<ModelFile> {
    Err(Error::unsupported("not yet"))
}
