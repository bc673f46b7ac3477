//! EMBD `.weights` reader and writer (to be written).
use super::{Backing, ModelFile, ReadOptions};
use crate::error::{Error, Result};
use std::sync::Arc;
/// Reads an EMBD file.
pub fn read(_b: Arc<Backing>, _o: ReadOptions) -> Result<ModelFile> {
    Err(Error::unsupported("not yet"))
}
