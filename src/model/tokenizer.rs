//! The tokenizer a model file carries, and how it is stored there.
//!
//! A file without the metadata key [`KIND_KEY`] carries a BERT WordPiece
//! tokenizer: its vocabulary section plus the BERT normalizer options in the
//! metadata ([`ModelConfig::tokenizer`]). Any other tokenizer is stored as a
//! [`TokenizerSpec`] (docs/formats/tokenizers.md):
//!
//! | where | what |
//! |---|---|
//! | vocabulary section | every piece in id order, and the five special ids |
//! | metadata `tokenizer.kind` | `unigram` or `bpe` |
//! | metadata `tokenizer.settings` | the effective normalizer, pre-tokenizer, post-processor, added tokens and model options as compact JSON, with its `version` |
//! | tensor `tokenizer.scores` | Unigram: F32 `[pieces]` log-probabilities |
//! | tensor `tokenizer.merges` | BPE: U32 `[merges x 2]` token ids, rank = row |
//! | tensor `tokenizer.charsmap` | SentencePiece `Precompiled` char map: U8 `[bytes]` |
//!
//! In EMBD files flag bit 4 (`TOKENIZER`) is set exactly when `tokenizer.kind`
//! is present, so that a reader predating it refuses the file instead of
//! tokenizing it as WordPiece.
//!
//! The families know nothing of this: the runtime builds the tokenizer from
//! the file ([`tokenizer_of`]), the HF import stores it ([`store`]).

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::formats::Backing;
use crate::formats::{DType, ModelFile, TensorEntry};
use crate::model::arch::Family;
use crate::model::config::ModelConfig;
use crate::tokenizer::spec::{TokenizerKind, TokenizerSpec};
use crate::tokenizer::unigram::Scores;
use crate::tokenizer::vocab::Vocab;
use crate::tokenizer::Tokenizer;

/// Metadata key: the tokenizer model (`unigram`, `bpe`); absent = WordPiece.
pub const KIND_KEY: &str = crate::formats::embd::TOKENIZER_KIND_KEY;
/// Metadata key: the effective settings (JSON).
pub const SETTINGS_KEY: &str = "tokenizer.settings";
/// Tensor: Unigram scores.
pub const SCORES: &str = "tokenizer.scores";
/// Tensor: BPE merges.
pub const MERGES: &str = "tokenizer.merges";
/// Tensor: the SentencePiece char map.
pub const CHARSMAP: &str = "tokenizer.charsmap";
/// Prefix of every tokenizer tensor (never an encoder weight: converters keep
/// them as they are).
pub const TENSOR_PREFIX: &str = "tokenizer.";

/// Refuses a family/tokenizer combination that is not among the families'
/// [`Family::tokenizers`] (each checked against its reference).
pub fn check_combination(family: &Family, kind: TokenizerKind) -> Result<()> {
    if family.tokenizers.contains(&kind) {
        return Ok(());
    }
    let runs: Vec<String> = crate::model::arch::FAMILIES
        .iter()
        .flat_map(|f| {
            f.tokenizers
                .iter()
                .map(move |k| format!("{} + {}", f.name, kind_name(*k)))
        })
        .collect();
    Err(Error::unsupported(format!(
        "a {} model with a {} tokenizer is not supported (the engine runs {})",
        family.name,
        kind_name(kind),
        runs.join(", ")
    )))
}

/// The stored name of a tokenizer kind.
pub fn kind_name(kind: TokenizerKind) -> &'static str {
    match kind {
        TokenizerKind::Unigram => "unigram",
        TokenizerKind::Bpe => "bpe",
        TokenizerKind::WordPiece => "wordpiece",
    }
}

fn kind_of(name: &str) -> Result<TokenizerKind> {
    match name.trim() {
        "unigram" => Ok(TokenizerKind::Unigram),
        "bpe" => Ok(TokenizerKind::Bpe),
        other => Err(Error::unsupported(format!(
            "metadata '{KIND_KEY}' = '{other}' is not a tokenizer this engine runs (unigram, bpe; WordPiece files carry no such key)"
        ))),
    }
}

/// The tokenizer `file` describes, with the vocabulary `vocab` it carries:
/// its stored [`TokenizerSpec`] when [`KIND_KEY`] is present, else the BERT
/// WordPiece tokenizer of `cfg`.
///
/// # Errors
/// A corrupt or inconsistent tokenizer description, named.
pub fn tokenizer_of(file: &ModelFile, cfg: &ModelConfig, vocab: Vocab) -> Result<Tokenizer> {
    let spec = spec_of(file, &vocab)?;
    let kind = spec.as_ref().map_or(TokenizerKind::WordPiece, |s| s.kind);
    check_combination(cfg.family()?, kind)?;
    match spec {
        Some(spec) => Tokenizer::from_spec(&spec, vocab),
        None => Ok(cfg.tokenizer(vocab)),
    }
}

/// A model file's bytes, for a tokenizer that borrows a tensor from them.
struct FileBytes(Arc<Backing>);

impl AsRef<[u8]> for FileBytes {
    fn as_ref(&self) -> &[u8] {
        self.0.bytes()
    }
}

/// The stored tokenizer description of `file` (over its vocabulary `vocab`),
/// `None` for a WordPiece file.
///
/// # Errors
/// As [`tokenizer_of`].
pub fn spec_of(file: &ModelFile, vocab: &Vocab) -> Result<Option<TokenizerSpec>> {
    let Some(kind) = file.metadata.get(KIND_KEY) else {
        return Ok(None);
    };
    let kind = kind_of(kind)?;
    let settings = file.metadata.get(SETTINGS_KEY).ok_or_else(|| {
        Error::model(format!(
            "metadata '{KIND_KEY}' is set but '{SETTINGS_KEY}' is missing"
        ))
    })?;
    let tensor = |name: &str, dtype: DType, rank: usize| -> Result<Option<&[u8]>> {
        let Some(t) = file.tensor(name) else {
            return Ok(None);
        };
        if t.dtype != dtype || t.shape.len() != rank {
            return Err(Error::model(format!(
                "tensor '{name}' is {} {:?}; the tokenizer needs {} of rank {rank}",
                t.dtype.name(),
                t.shape,
                dtype.name()
            )));
        }
        Ok(Some(file.tensor_bytes(t)))
    };
    let scores: Scores = match tensor(SCORES, DType::F32, 1)? {
        None => Scores::default(),
        Some(b) => {
            // Borrowed from the mapping when the tensor is mapped (no copy).
            let mapped = file.tensor(SCORES).and_then(|t| file.tensor_file_range(t));
            let owner: Arc<dyn AsRef<[u8]> + Send + Sync> =
                Arc::new(FileBytes(file.backing().clone()));
            match mapped.and_then(|r| Scores::borrow(owner, r.start, b.len() / 4)) {
                Some(s) => s,
                None => Scores::from(
                    b.chunks_exact(4)
                        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                        .collect::<Vec<f32>>(),
                ),
            }
        }
    };
    let merges: Vec<(u32, u32)> = match tensor(MERGES, DType::U32, 2)? {
        Some(b) => {
            if file.tensor(MERGES).is_some_and(|t| t.shape[1] != 2) {
                return Err(Error::model(format!(
                    "tensor '{MERGES}' must have 2 columns"
                )));
            }
            b.chunks_exact(8)
                .map(|c| {
                    (
                        u32::from_le_bytes([c[0], c[1], c[2], c[3]]),
                        u32::from_le_bytes([c[4], c[5], c[6], c[7]]),
                    )
                })
                .collect()
        }
        None => Vec::new(),
    };
    let charsmap = tensor(CHARSMAP, DType::U8, 1)?
        .map(<[u8]>::to_vec)
        .unwrap_or_default();
    // The vocabulary's own buffer: the pieces are not copied.
    let pieces = vocab.pieces().clone();
    TokenizerSpec::from_parts(kind, pieces, scores, merges, charsmap, settings).map(Some)
}

/// Stores `spec` (a non-WordPiece tokenizer) as metadata keys and tensors of
/// a model file; its pieces go to the vocabulary section (the caller builds
/// the [`Vocab`] from `spec.pieces`).
pub fn store(
    spec: &TokenizerSpec,
    md: &mut BTreeMap<String, String>,
    tensors: &mut Vec<TensorEntry>,
) {
    md.insert(KIND_KEY.into(), kind_name(spec.kind).into());
    md.insert(SETTINGS_KEY.into(), spec.settings_string());
    if !spec.scores.is_empty() {
        tensors.push(TensorEntry::owned_f32(
            SCORES,
            vec![spec.scores.len()],
            &spec.scores,
        ));
    }
    if !spec.merges.is_empty() {
        let bytes: Vec<u8> = spec
            .merges
            .iter()
            .flat_map(|&(a, b)| a.to_le_bytes().into_iter().chain(b.to_le_bytes()))
            .collect();
        tensors.push(TensorEntry::owned_bytes(
            MERGES,
            DType::U32,
            vec![spec.merges.len(), 2],
            &bytes,
        ));
    }
    if !spec.charsmap.is_empty() {
        tensors.push(TensorEntry::owned_bytes(
            CHARSMAP,
            DType::U8,
            vec![spec.charsmap.len()],
            &spec.charsmap,
        ));
    }
}

/// What `embd inspect` shows of a file's tokenizer: `(field, value)` pairs
/// (kind, sizes and the settings' stages), read without building it.
pub fn describe(file: &ModelFile) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let Some(kind) = file.metadata.get(KIND_KEY) else {
        if file.vocab.is_some()
            && file
                .metadata
                .get("architecture")
                .is_none_or(|a| a != "static")
        {
            out.push(("kind".into(), "wordpiece".into()));
            for k in ["do_lower_case", "strip_accents", "tokenize_chinese_chars"] {
                if let Some(v) = file.metadata.get(k) {
                    out.push((k.into(), v.clone()));
                }
            }
        }
        return out;
    };
    out.push(("kind".into(), kind.clone()));
    if let Some(v) = &file.vocab {
        out.push(("pieces".into(), v.len().to_string()));
    }
    for (name, what) in [
        (SCORES, "scores"),
        (MERGES, "merges"),
        (CHARSMAP, "charsmap bytes"),
    ] {
        if let Some(t) = file.tensor(name) {
            out.push((
                what.into(),
                t.shape.first().copied().unwrap_or(0).to_string(),
            ));
        }
    }
    let settings: Option<serde_json::Value> = file
        .metadata
        .get(SETTINGS_KEY)
        .and_then(|s| serde_json::from_str(s).ok());
    let Some(s) = settings else {
        out.push(("settings".into(), "missing or not JSON".into()));
        return out;
    };
    /// `Type` or `Sequence[A, B]` of one stage.
    fn stage(v: &serde_json::Value) -> String {
        let ty = v.get("type").and_then(|t| t.as_str()).unwrap_or("none");
        let list = ["normalizers", "pretokenizers", "processors"]
            .iter()
            .find_map(|k| v.get(*k).and_then(|l| l.as_array()));
        match list {
            Some(l) => format!(
                "{ty}[{}]",
                l.iter().map(stage).collect::<Vec<_>>().join(", ")
            ),
            None => ty.to_string(),
        }
    }
    for key in ["normalizer", "pre_tokenizer", "post_processor", "decoder"] {
        out.push((key.into(), s.get(key).map_or("none".into(), stage)));
    }
    if let Some(m) = s.get("model") {
        for k in ["unk_id", "byte_fallback"] {
            if let Some(v) = m.get(k) {
                out.push((format!("model.{k}"), v.to_string()));
            }
        }
    }
    if let Some(l) = s.get("added_tokens").and_then(|l| l.as_array()) {
        let names: Vec<String> = l
            .iter()
            .filter_map(|t| {
                t.get("content")
                    .and_then(|c| c.as_str())
                    .map(str::to_string)
            })
            .collect();
        out.push(("added tokens".into(), names.join(" ")));
    }
    if let Some(src) = s.get("source") {
        out.push(("source".into(), src.to_string()));
    }
    if let Some(v) = s.get("version") {
        out.push(("settings version".into(), v.to_string()));
    }
    out
}

/// Opens the tokenizer of the model file at `path` alone (the tensors are
/// mapped, not loaded): for tokenizing without an encoder, and to time a
/// tokenizer's open.
///
/// # Errors
/// As [`crate::formats::ModelFile::open`] and [`tokenizer_of`].
pub fn open(path: impl AsRef<std::path::Path>) -> Result<Tokenizer> {
    let mut file = ModelFile::open(
        path,
        crate::formats::ReadOptions {
            verify_checksums: false,
        },
    )?;
    let cfg = ModelConfig::from_metadata(&file.metadata)?;
    let vocab = file
        .vocab
        .take()
        .ok_or_else(|| Error::model("model file has no vocabulary"))?;
    tokenizer_of(&file, &cfg, vocab)
}
