//! Opening a model file the way every face opens one: checksums as asked,
//! the encoder's tensors read first, its pages mapped in ahead of the first
//! call.

use std::path::Path;
use std::sync::Arc;

use crate::error::Result;
use crate::formats::{Backing, ChecksumStatus, ModelFile, ReadHint, ReadOptions};
use crate::model::precision::Precision;
use crate::options::Options;
use crate::threads::JoinOnDrop;

/// Opens and parses the model file at `path` the way every runtime opens one
/// ([`crate::Embedder`], [`crate::Engine`], [`crate::Reranker`]): checksums
/// as `opts` asks, the encoder's tensors read first ([`READ_HINT`]).
pub(crate) fn open_model_file(path: &Path, opts: &Options) -> Result<ModelFile> {
    ModelFile::open_hinted(
        path,
        ReadOptions {
            verify_checksums: opts.verify_checksums,
        },
        &READ_HINT,
    )
}

/// What an encoder reads first: the readers that check data CRCs check the
/// encoder's tensors last, so that a first embedding right after opening finds
/// them in cache.
const READ_HINT: ReadHint = ReadHint {
    read_first: Some(is_encoder_tensor),
};

/// The encoder's tensors (`encoder.` names, and every family's layers:
/// `layers.` for ModernBERT and the decoders): what the first embedding reads
/// right after opening (the word-embedding table is read a few rows at a
/// time).
fn is_encoder_tensor(name: &str) -> bool {
    name.starts_with(crate::model::names::ENCODER_PREFIX)
        || crate::model::names::split_layer_name(name).is_some()
}

/// Maps the encoder weights of a memory-mapped file in on a short-lived
/// background thread (in `slot`), so that the first embedding does not stop
/// on a page fault per 64 KiB of weights (about 4 ms for all-MiniLM-L6-v2 with
/// the file in the page cache). Skipped after a CRC check at open, which
/// mapped every page already. The word-embedding table is left alone: a text
/// touches only its tokens' rows.
pub(super) fn prefault_encoder(file: &Arc<ModelFile>, slot: &JoinOnDrop) {
    // After a CRC check at open every page is mapped already; walking them
    // again would only take CPU time from the first call.
    let verified = file.report.checksums == ChecksumStatus::Verified;
    if verified || !matches!(**file.backing(), Backing::Mmap(_)) {
        return;
    }
    let f = Arc::clone(file);
    // Best effort: without the thread, the first call takes the faults itself.
    slot.spawn_if_idle("embedder-prefault", move || {
        for t in f.tensors.iter().filter(|t| is_encoder_tensor(&t.name)) {
            if let Some(r) = f.tensor_file_range(t) {
                f.populate_pages(r);
            }
        }
    });
}

/// True when the file stores smoothing factors for its int8 weights.
pub(super) fn has_stored_smoothing(file: &ModelFile) -> bool {
    file.tensors
        .iter()
        .any(|t| t.name.ends_with(".weight_smooth"))
}

/// The precision a file runs in unless asked otherwise: int8 for files
/// converted with `--dtype int8` (metadata `quantization`), bf16 for files
/// whose weights are stored packed for the bf16 kernels
/// ([`crate::model::packed`]), else f32.
pub(super) fn file_precision(file: &ModelFile) -> Precision {
    let int8 = file
        .metadata
        .get("quantization")
        .is_some_and(|q| q.trim() == "int8_per_row");
    if int8 {
        Precision::Int8
    } else {
        crate::model::packed::file_precision(file).unwrap_or(Precision::F32)
    }
}
