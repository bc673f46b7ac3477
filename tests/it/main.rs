//! Integration tests: one binary, one module per area.

// `fuzz/pt_writer.rs` (a test-only torch.save writer) is compiled into the
// fuzz harness, the seed generator and the torch_pt tests, which the fuzz
// crate builds separately; here all three share one binary.
#![allow(clippy::duplicate_mod)]

mod arch_tokenizers;
mod bindings;
mod bpe;
mod call_options;
mod common;
mod compat_header;
mod containers;
mod convert;
mod cpp_embed;
mod cross_format;
mod deberta;
mod encoders;
mod engine;
mod families;
mod formats;
mod fuzz_regressions;
mod header;
mod hub;
mod layering;
mod mpnet;
mod options;
mod outputs;
mod precision;
mod reranker;
mod tokenizer;
mod torch_pt;
mod unigram;
mod vocab_250k;
