//! Models by name: a hub id (`org/name[@revision]`) resolved through the
//! local HuggingFace cache (`huggingface_hub`'s layout, [`cache`]) to its
//! snapshot, converted once into a cached `.weights` file ([`weights`]) and
//! opened from there. No network code: `embd pull` (crate `embd-hub`)
//! fills the same cache, and reads the hub's answers with [`api`].

pub mod api;
pub mod cache;
pub mod id;
pub mod lock;
pub mod weights;

use std::path::{Path, PathBuf};

use crate::error::{Error, ErrorKind, Result};

pub use cache::{HfCache, Snapshot};
pub use id::HubId;
pub use weights::WeightsCache;

/// The model file `spec` names: `spec` itself when it exists or cannot be a
/// hub id (a path with a container's extension, an absolute or `./` path,
/// no `org/name` shape); else the converted file of the hub id's snapshot in
/// the HuggingFace cache (converted on first use).
///
/// # Errors
/// [`ErrorKind::NotFound`] naming both readings when `spec` is neither a
/// file nor a model in the cache; the converter's errors for a snapshot
/// that does not convert.
pub fn resolve_model_path(spec: &Path) -> Result<PathBuf> {
    match hub_id_of(spec) {
        Some(id) => resolve_hub_model(&id).map_err(|e| {
            if e.kind() == ErrorKind::NotFound {
                Error::new(
                    ErrorKind::NotFound,
                    format!("{}: no such file, and {}", spec.display(), e.message()),
                )
            } else {
                e
            }
        }),
        None => Ok(spec.to_path_buf()),
    }
}

/// The hub id `spec` reads as, when it is not an existing path and has the
/// shape of one.
pub fn hub_id_of(spec: &Path) -> Option<HubId> {
    if spec.exists() {
        return None;
    }
    let s = spec.to_str()?;
    if s.starts_with(['/', '.', '~']) {
        return None;
    }
    let file_part = s.split('@').next().unwrap_or(s);
    let has_model_ext = Path::new(file_part)
        .extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| {
            crate::formats::CONTAINERS
                .iter()
                .any(|c| c.extensions.contains(&e))
        });
    if has_model_ext {
        return None;
    }
    HubId::parse(s).ok()
}

/// The converted file of `id` from the caches of this environment
/// ([`HfCache::from_env`], [`WeightsCache::from_env`]).
///
/// # Errors
/// As [`HfCache::find_snapshot`] and [`WeightsCache::weights_for`].
pub fn resolve_hub_model(id: &HubId) -> Result<PathBuf> {
    let snapshot = HfCache::from_env()?.find_snapshot(id)?;
    WeightsCache::from_env()?.weights_for(id, &snapshot)
}
