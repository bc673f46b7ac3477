//! The library's limits, defined once: request sizes an [`crate::Embedder`]
//! accepts and model dimensions a model file may declare.
//!
//! Requests beyond the first three are refused with
//! [`crate::ErrorKind::LimitExceeded`] (or [`crate::ErrorKind::InvalidArgument`]
//! for threads); model files beyond the dimension bounds with
//! [`crate::ErrorKind::Model`]. The C API mirrors [`MAX_BATCH`] and
//! [`MAX_TEXT_BYTES`] as `EMBD_MAX_BATCH` and `EMBD_MAX_TEXT_BYTES` (checked
//! equal by its tests).

/// Most texts accepted by one embedding call; larger requests are refused with
/// [`crate::ErrorKind::LimitExceeded`] (split them into several calls).
pub const MAX_BATCH: usize = 1 << 20;

/// Longest text accepted, in bytes (64 MiB); longer texts are refused with
/// [`crate::ErrorKind::LimitExceeded`]. Texts are truncated to `max_seq_length` tokens
/// after tokenization, so this bound only limits tokenization work.
pub const MAX_TEXT_BYTES: usize = 1 << 26;

/// Most worker threads accepted in [`crate::Options::threads`].
pub const MAX_THREADS: usize = 1024;

/// Largest `hidden_size` a model may declare (keeps every size computation far
/// from overflow, like the bounds below).
pub const MAX_HIDDEN_SIZE: usize = 1 << 16;

/// Largest `intermediate_size`.
pub const MAX_INTERMEDIATE_SIZE: usize = 1 << 18;

/// Most encoder layers.
pub const MAX_LAYERS: usize = 1024;

/// Largest `max_position_emb` (rows of the position table).
pub const MAX_POSITION: usize = 1 << 16;

/// Largest `relative_attention_num_buckets` (MPNet-style relative attention).
pub const MAX_RELATIVE_BUCKETS: usize = 1024;

/// Most labels a classifier (cross-encoder) may declare (`num_labels`).
pub const MAX_LABELS: usize = 1 << 16;
