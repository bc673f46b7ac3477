//! The C ABI: `embd_*` functions over the safe `Embedder` API. (The
//! cpp_embedder compatibility functions are in `crate::compat`.)
//!
//! This layer has no logic beyond argument checking, conversion and status
//! mapping. Every export runs inside `boundary::ffi_boundary` (panics are
//! caught and become `EMBD_STATUS_INTERNAL_PANIC`), resolves handles through the
//! registry in `handles`, and reports failures as an `embd_status` plus a
//! per-thread message (`embd_last_error`). `include/embedder.h` is generated
//! from this module by cbindgen (see `build.rs`); the `///` docs here are the
//! header's documentation.
//!
//! One file per C object, as the header groups them: `options`
//! (`embd_options`), `model` (`embd_model`: open, free, facts), `encode`
//! (float vectors), `tokens`, `vectors` (similarity), `output` (quantized
//! output), `precision`, `status`, `version`, `last_error`. Adding a C
//! function means adding it to its object's file, re-exporting it below, and
//! blessing the header. cbindgen emits functions in the order of the `mod`
//! lines below (hence the groups: rustfmt sorts only within a group).
#![allow(non_camel_case_types)]

// The C objects, in the order of the header.
pub mod options;

pub mod model;

pub mod encode;
pub mod tokens;
pub mod vectors;

// The boundary (and the test-panic export), handles, and the rest.
pub mod boundary;
pub mod handles;
pub mod last_error;
pub mod output;
pub mod precision;
pub mod status;
pub mod version;

pub use encode::{
    embd_encode, embd_encode_ex, embd_encode_texts, embd_text, EMBD_MAX_BATCH, EMBD_MAX_TEXT_BYTES,
};
pub use handles::{embd_model, embd_options};
pub use last_error::embd_last_error;
pub use model::{
    embd_dim, embd_free, embd_max_seq_length, embd_model_name, embd_model_precision,
    embd_normalizes, embd_num_heads, embd_num_layers, embd_open, embd_pooling, embd_vocab_size,
};
pub use options::{
    embd_options_free, embd_options_new, embd_options_set_dimensions,
    embd_options_set_max_seq_length, embd_options_set_normalize, embd_options_set_precision,
    embd_options_set_prepack_weights, embd_options_set_progress, embd_options_set_prompt,
    embd_options_set_prompt_name, embd_options_set_threads, embd_options_set_verify_checksums,
    embd_options_set_windows, embd_progress_fn,
};
pub use output::{
    embd_encode_quantized, embd_has_output_ranges, embd_options_set_output_ranges, embd_output_len,
    embd_output_precision, embd_output_precision_name, EMBD_OUTPUT_BINARY, EMBD_OUTPUT_FLOAT32,
    EMBD_OUTPUT_INT8, EMBD_OUTPUT_UBINARY, EMBD_OUTPUT_UINT8,
};
pub use precision::{
    embd_precision, embd_precision_name, EMBD_PRECISION_BF16, EMBD_PRECISION_DEFAULT,
    EMBD_PRECISION_F32, EMBD_PRECISION_INT8,
};
pub use status::{embd_status, embd_status_str};
pub use tokens::{embd_count_tokens, embd_tokenize};
pub use vectors::embd_similarity;
pub use version::{embd_version, embd_version_number};

#[cfg(feature = "test-panic")]
pub use boundary::embd_test_panic;

#[cfg(test)]
mod tests;
