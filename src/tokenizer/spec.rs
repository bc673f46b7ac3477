//! [`TokenizerSpec`]: everything needed to rebuild a HF-`tokenizers`-style
//! pipeline, in a storable form: the pieces (id order), the Unigram scores, the
//! BPE merges, the SentencePiece char map, and `settings`, a compact JSON object
//! with the EFFECTIVE normalizer, pre-tokenizer, post-processor, decoder, added
//! tokens and model options (the big arrays left out).
//!
//! `settings` (version 1):
//! ```json
//! {"version": 1,
//!  "model": {"type": "Unigram", "vocab_size": 8001, "unk_id": 3, "byte_fallback": false},
//!  "added_tokens": [{"id": 0, "content": "<s>", "single_word": false, "lstrip": false,
//!                    "rstrip": false, "normalized": false, "special": true}, ...],
//!  "normalizer": {"type": "Precompiled"} | {...HF JSON...} | null,
//!  "pre_tokenizer": {...HF JSON...} | null,
//!  "post_processor": {...HF JSON...} | null,
//!  "decoder": {...HF JSON...} | null,
//!  "source": {"layout": "as_transformers", "tokenizer_class": "XLMRobertaTokenizer",
//!             "rebuilt_from_class": true}}
//! ```
//! `model.vocab_size` is the number of model pieces: pieces past it are added
//! tokens only. A `Precompiled` normalizer has no `precompiled_charsmap` field:
//! its map is [`TokenizerSpec::charsmap`]. A reader refuses any other `version`
//! by name.
//!
//! [`Layout`] decides what the effective settings are. transformers 5 (so
//! sentence-transformers) rebuilds some tokenizers from their class, taking
//! only the vocabulary, scores, merges and char map from `tokenizer.json`:
//! - `XLMRobertaTokenizer`: Unigram (`unk_id` 3, no byte fallback), normalizer
//!   `Precompiled` (the file's char map; none if the file has none),
//!   pre-tokenizer `Sequence[WhitespaceSplit, Metaspace(▁, always|never, split)]`
//!   (`never` when `add_prefix_space` is false in `tokenizer_config.json`),
//!   decoder `Metaspace`, post-processor `<s> $A </s>` / `<s> $A </s> </s> $B </s>`
//!   with its `bos_token`/`eos_token`;
//! - `RobertaTokenizer`: BPE (no prefixes/suffixes, no unk fusion), no normalizer,
//!   pre-tokenizer `ByteLevel(add_prefix_space)` (default false), decoder
//!   `ByteLevel`, `RobertaProcessing(sep, cls)`;
//! - `DebertaV2Tokenizer`: Unigram (the file's `unk_id`, no byte fallback),
//!   normalizer `Sequence[Replace("\s{2,}|[\n\r\t]", " "), NFC,
//!   Strip(right)]` (`Lowercase` first with `do_lower_case`; `split_by_punct`
//!   refused), no char map, pre-tokenizer `Sequence[Metaspace(▁, always|never,
//!   split)]`, decoder `Metaspace`, the file's post-processor (`[CLS] $A
//!   [SEP]`, `[CLS] $A [SEP] $B [SEP]` with type ids 1 for `$B`). The hub's
//!   files (transformers 4's `DebertaV2Converter`: `Sequence[Strip,
//!   Precompiled, Replace(" {2,}", " ")]`, `Metaspace`) tokenize otherwise on
//!   leading spaces, tabs and newlines, NFKC-folded characters and `▁` in a
//!   text; sentence-transformers runs the rebuild.
//!
//! Added tokens come from the file in both layouts, plus the class's special
//! tokens (`tokenizer_config.json`'s `bos_token` ...) where the file lacks them.
//! Other classes load `tokenizer.json` as written.

use serde_json::{json, Map, Value};

use super::added::{AddedToken, AddedVocab};
use super::bpe::Bpe;
use super::normalizers::Normalizer;
use super::pipeline::{Decoder, Model, Pipeline};
use super::pre_tokenizers::PreTokenizer;
use super::template::Template;
use super::unigram::{Scores, Unigram};
use super::vocab::Pieces;
use crate::error::{Error, Result};

/// The settings version this code writes and reads.
pub const SETTINGS_VERSION: u64 = 1;

/// The tokenizer model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenizerKind {
    /// SentencePiece Unigram.
    Unigram,
    /// (Byte-level) BPE.
    Bpe,
    /// WordPiece.
    WordPiece,
}

impl TokenizerKind {
    /// The HF model type name.
    pub fn name(self) -> &'static str {
        match self {
            TokenizerKind::Unigram => "Unigram",
            TokenizerKind::Bpe => "BPE",
            TokenizerKind::WordPiece => "WordPiece",
        }
    }
}

/// Which behaviour to reproduce from a HF folder.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Layout {
    /// As transformers 5 / sentence-transformers load it (class rebuilds).
    #[default]
    AsTransformers,
    /// As the `tokenizers` library runs `tokenizer.json` as written.
    AsWritten,
}

/// A storable tokenizer description (see the module notes).
#[derive(Debug, Clone, PartialEq)]
pub struct TokenizerSpec {
    /// The model.
    pub kind: TokenizerKind,
    /// Every token, in id order (model pieces, then added tokens past them),
    /// in one shared buffer (a model file's [`crate::Vocab`] and the
    /// tokenizer built from the spec hold the same one).
    pub pieces: Pieces,
    /// Unigram log-probabilities, one per model piece (a model file's are
    /// borrowed from its mapping, not copied).
    pub scores: Scores,
    /// BPE merges as token ids (rank = index).
    pub merges: Vec<(u32, u32)>,
    /// The raw SentencePiece char map (empty if none).
    pub charsmap: Vec<u8>,
    /// The unknown id.
    pub unk_id: Option<u32>,
    /// Unknown pieces fall back to `<0xXX>` byte pieces.
    pub byte_fallback: bool,
    /// The effective settings (see the module notes).
    pub settings: Value,
}

fn model_err(d: impl Into<String>) -> Error {
    Error::model(d.into())
}

/// A token string from a config value: a string or an AddedToken object.
fn config_token(cfg: Option<&Value>, key: &str) -> Option<String> {
    let v = cfg?.get(key)?;
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Object(o) => o.get("content")?.as_str().map(str::to_string),
        _ => None,
    }
}

fn decode_base64(s: &str, what: &str) -> Result<Vec<u8>> {
    fn val(c: u8) -> Option<u32> {
        Some(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        } as u32)
    }
    let body = s.trim_end_matches('=');
    if s.len() - body.len() > 2 {
        return Err(model_err(format!("{what}: bad base64 padding")));
    }
    let mut out = Vec::with_capacity(body.len() * 3 / 4);
    let mut acc = 0u32;
    let mut bits = 0;
    for (i, &c) in body.as_bytes().iter().enumerate() {
        let v = val(c).ok_or_else(|| model_err(format!("{what}: byte {i} is not base64")))?;
        acc = (acc << 6) | v;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    if bits >= 6 {
        return Err(model_err(format!("{what}: truncated base64")));
    }
    Ok(out)
}

/// Removes `precompiled_charsmap` fields, collecting the (single) map.
fn strip_charsmap(v: &Value, found: &mut Option<Vec<u8>>, path: &str) -> Result<Value> {
    match v {
        Value::Object(o) => {
            let mut m = Map::new();
            for (k, x) in o {
                if k == "precompiled_charsmap" {
                    let s = x
                        .as_str()
                        .ok_or_else(|| model_err(format!("{path}.{k}: not a string")))?;
                    let bytes = decode_base64(s, &format!("{path}.{k}"))?;
                    if found.as_ref().is_some_and(|f| *f != bytes) {
                        return Err(Error::unsupported(format!(
                            "{path}: two different precompiled char maps"
                        )));
                    }
                    *found = Some(bytes);
                    continue;
                }
                m.insert(k.clone(), strip_charsmap(x, found, &format!("{path}.{k}"))?);
            }
            Ok(Value::Object(m))
        }
        Value::Array(a) => Ok(Value::Array(
            a.iter()
                .enumerate()
                .map(|(i, x)| strip_charsmap(x, found, &format!("{path}[{i}]")))
                .collect::<Result<_>>()?,
        )),
        other => Ok(other.clone()),
    }
}

fn added_json(t: &AddedToken) -> Value {
    json!({"id": t.id, "content": t.content, "single_word": t.single_word, "lstrip": t.lstrip,
           "rstrip": t.rstrip, "normalized": t.normalized, "special": t.special})
}

fn parse_added(v: &Value, path: &str) -> Result<AddedToken> {
    let b = |k: &str, d: bool| super::normalizers::get_bool(v, k, d, path);
    let special = b("special", false)?;
    Ok(AddedToken {
        id: v
            .get("id")
            .and_then(Value::as_u64)
            .and_then(|x| u32::try_from(x).ok())
            .ok_or_else(|| model_err(format!("{path}.id: missing or not an id")))?,
        content: super::normalizers::get_str(v, "content", path)?.to_string(),
        single_word: b("single_word", false)?,
        lstrip: b("lstrip", false)?,
        rstrip: b("rstrip", false)?,
        normalized: b("normalized", !special)?,
        special,
    })
}

impl TokenizerSpec {
    /// Reads a HF folder's `tokenizer.json` (and `tokenizer_config.json`, for
    /// `tokenizer_class`, the special tokens and `add_prefix_space`).
    ///
    /// # Errors
    /// [`crate::ErrorKind::Model`] naming the field for anything malformed;
    /// [`crate::ErrorKind::Unsupported`] for a model type other than Unigram,
    /// BPE and WordPiece.
    pub fn from_hf_json(
        tokenizer_json: &Value,
        tokenizer_config: Option<&Value>,
        layout: Layout,
    ) -> Result<TokenizerSpec> {
        let model = tokenizer_json
            .get("model")
            .filter(|m| m.is_object())
            .ok_or_else(|| model_err("tokenizer.json: no model object"))?;
        let ty = model.get("type").and_then(Value::as_str).unwrap_or("");
        let mut scores = Vec::new();
        let mut merges = Vec::new();
        let mut unk_id = None;
        let mut byte_fallback = false;
        let mut model_settings = Map::new();
        let (kind, mut pieces) = match ty {
            "Unigram" => {
                let vocab = model
                    .get("vocab")
                    .and_then(Value::as_array)
                    .ok_or_else(|| model_err("model.vocab: not a list"))?;
                let mut pieces = Vec::with_capacity(vocab.len());
                scores.reserve(vocab.len());
                for (i, e) in vocab.iter().enumerate() {
                    let bad = || model_err(format!("model.vocab[{i}]: not a [piece, score] pair"));
                    let a = e.as_array().filter(|a| a.len() == 2).ok_or_else(bad)?;
                    pieces.push(a[0].as_str().ok_or_else(bad)?.to_string());
                    scores.push(a[1].as_f64().ok_or_else(bad)? as f32);
                }
                unk_id = match model.get("unk_id") {
                    None | Some(Value::Null) => None,
                    Some(x) => Some(
                        x.as_u64()
                            .and_then(|x| u32::try_from(x).ok())
                            .ok_or_else(|| model_err("model.unk_id: not an id"))?,
                    ),
                };
                byte_fallback = model
                    .get("byte_fallback")
                    .and_then(Value::as_bool)
                    .unwrap_or(false);
                (TokenizerKind::Unigram, pieces)
            }
            "BPE" | "WordPiece" => {
                let vocab = model
                    .get("vocab")
                    .and_then(Value::as_object)
                    .ok_or_else(|| model_err("model.vocab: not an object"))?;
                let mut pieces = vec![None; vocab.len()];
                for (p, id) in vocab {
                    let id = id
                        .as_u64()
                        .filter(|&id| (id as usize) < pieces.len())
                        .ok_or_else(|| {
                            model_err(format!(
                                "model.vocab[{p:?}]: id is not below the vocabulary size {}",
                                vocab.len()
                            ))
                        })?;
                    if pieces[id as usize].replace(p.clone()).is_some() {
                        return Err(model_err(format!("model.vocab: id {id} is given twice")));
                    }
                }
                let pieces: Vec<String> =
                    pieces.into_iter().map(Option::unwrap_or_default).collect();
                for (k, v) in model.as_object().into_iter().flatten() {
                    if k != "vocab" && k != "merges" {
                        model_settings.insert(k.clone(), v.clone());
                    }
                }
                if let Some(u) = model.get("unk_token").and_then(Value::as_str) {
                    unk_id = pieces.iter().position(|p| p == u).map(|i| i as u32);
                }
                if ty == "BPE" {
                    byte_fallback = model
                        .get("byte_fallback")
                        .and_then(Value::as_bool)
                        .unwrap_or(false);
                    // HF's forms: all "a b" strings (split at single spaces into
                    // exactly two, `#version` entries skipped) or all pairs.
                    merges = super::bpe::merges_by_id(
                        super::bpe::json_merges(model.get("merges"))?,
                        &pieces,
                        "tokenizer.json model.merges",
                    )?;
                    (TokenizerKind::Bpe, pieces)
                } else {
                    (TokenizerKind::WordPiece, pieces)
                }
            }
            other => {
                return Err(Error::unsupported(format!(
                    "model.type: {other:?} is not supported (Unigram, BPE, WordPiece)"
                )))
            }
        };
        let vocab_size = pieces.len();

        // Added tokens, with HF's id assignment: the model's id (last one for a
        // duplicated piece) or the next id past the model.
        let mut model_ids: std::collections::HashMap<&str, u32> = std::collections::HashMap::new();
        for (i, p) in pieces.iter().enumerate() {
            model_ids.insert(p.as_str(), i as u32);
        }
        let mut added: Vec<AddedToken> = Vec::new();
        let mut extra: Vec<String> = Vec::new();
        let add = |mut t: AddedToken, extra: &mut Vec<String>, added: &mut Vec<AddedToken>| {
            if t.content.is_empty() {
                return;
            }
            let known = added
                .iter()
                .find(|a| a.content == t.content)
                .map(|a| a.id)
                .or_else(|| model_ids.get(t.content.as_str()).copied());
            t.id = match known {
                Some(id) => id,
                None => {
                    extra.push(t.content.clone());
                    (vocab_size + extra.len() - 1) as u32
                }
            };
            if let Some(a) = added.iter_mut().find(|a| a.id == t.id) {
                *a = t;
            } else {
                added.push(t);
            }
        };
        if let Some(list) = tokenizer_json.get("added_tokens") {
            let list = list
                .as_array()
                .ok_or_else(|| model_err("added_tokens: not a list"))?;
            for (i, t) in list.iter().enumerate() {
                add(
                    parse_added(t, &format!("added_tokens[{i}]"))?,
                    &mut extra,
                    &mut added,
                );
            }
        }
        let class = tokenizer_config
            .and_then(|c| c.get("tokenizer_class"))
            .and_then(Value::as_str)
            .map(|s| s.trim_end_matches("Fast").to_string());
        let rebuild = layout == Layout::AsTransformers
            && matches!(
                (class.as_deref(), kind),
                (Some("XLMRobertaTokenizer"), TokenizerKind::Unigram)
                    | (Some("RobertaTokenizer"), TokenizerKind::Bpe)
                    | (Some("DebertaV2Tokenizer"), TokenizerKind::Unigram)
            );
        let deberta = class.as_deref() == Some("DebertaV2Tokenizer");
        if rebuild {
            // The class's special tokens, where the file lacks them (only those
            // the vocabulary has: a new id would be past the model's embeddings).
            for key in [
                "bos_token",
                "eos_token",
                "unk_token",
                "sep_token",
                "pad_token",
                "cls_token",
                "mask_token",
            ] {
                let Some(content) = config_token(tokenizer_config, key) else {
                    continue;
                };
                if added.iter().any(|a| a.content == content) {
                    continue;
                }
                if !model_ids.contains_key(content.as_str()) {
                    continue;
                }
                add(
                    AddedToken {
                        id: 0,
                        content,
                        single_word: false,
                        lstrip: false,
                        rstrip: false,
                        normalized: false,
                        special: true,
                    },
                    &mut extra,
                    &mut added,
                );
            }
        }
        let id_of = |name: &str, key: &str| -> Result<u32> {
            added
                .iter()
                .find(|a| a.content == name)
                .map(|a| a.id)
                .or_else(|| model_ids.get(name).copied())
                .ok_or_else(|| {
                    model_err(format!(
                        "tokenizer_config.json {key}: {name:?} is not in the vocabulary"
                    ))
                })
        };

        let mut charsmap = None;
        let file_normalizer = match tokenizer_json.get("normalizer") {
            Some(n) if !n.is_null() => strip_charsmap(n, &mut charsmap, "normalizer")?,
            _ => Value::Null,
        };
        let field = |k: &str| tokenizer_json.get(k).cloned().unwrap_or(Value::Null);
        let add_prefix_space = |default: bool| {
            tokenizer_config
                .and_then(|c| c.get("add_prefix_space"))
                .and_then(Value::as_bool)
                .unwrap_or(default)
        };
        let (normalizer, pre_tokenizer, post_processor, decoder) = if !rebuild {
            (
                file_normalizer,
                field("pre_tokenizer"),
                field("post_processor"),
                field("decoder"),
            )
        } else if deberta {
            // transformers 5's `DebertaV2Tokenizer`: its own normalizer and
            // pre-tokenizer over the file's vocabulary and scores; the
            // file's post-processor (`[CLS] $A [SEP]`, `$B [SEP]` typed 1).
            byte_fallback = false;
            let cfg_bool = |key: &str| {
                tokenizer_config
                    .and_then(|c| c.get(key))
                    .and_then(Value::as_bool)
                    .unwrap_or(false)
            };
            if cfg_bool("split_by_punct") {
                return Err(Error::unsupported(
                    "tokenizer_config.json: DebertaV2Tokenizer split_by_punct is not supported",
                ));
            }
            let mut list = Vec::new();
            if cfg_bool("do_lower_case") {
                list.push(json!({"type": "Lowercase"}));
            }
            list.push(json!({"type": "Replace", "pattern": {"Regex": "\\s{2,}|[\\n\\r\\t]"}, "content": " "}));
            list.push(json!({"type": "NFC"}));
            list.push(json!({"type": "Strip", "strip_left": false, "strip_right": true}));
            let scheme = if add_prefix_space(true) {
                "always"
            } else {
                "never"
            };
            let metaspace = json!({"type": "Metaspace", "replacement": "▁",
                                   "prepend_scheme": scheme, "split": true});
            charsmap = None;
            (
                json!({"type": "Sequence", "normalizers": list}),
                json!({"type": "Sequence", "pretokenizers": [metaspace.clone()]}),
                field("post_processor"),
                metaspace,
            )
        } else if kind == TokenizerKind::Unigram {
            unk_id = Some(3);
            byte_fallback = false;
            let scheme = if add_prefix_space(true) {
                "always"
            } else {
                "never"
            };
            let bos = config_token(tokenizer_config, "bos_token").unwrap_or("<s>".into());
            let eos = config_token(tokenizer_config, "eos_token").unwrap_or("</s>".into());
            let (bos_id, eos_id) = (id_of(&bos, "bos_token")?, id_of(&eos, "eos_token")?);
            let sp = |n: &str| json!({"SpecialToken": {"id": n, "type_id": 0}});
            let seq = |n: &str| json!({"Sequence": {"id": n, "type_id": 0}});
            let metaspace = json!({"type": "Metaspace", "replacement": "▁",
                                   "prepend_scheme": scheme, "split": true});
            (
                if charsmap.is_some() {
                    json!({"type": "Precompiled"})
                } else {
                    Value::Null
                },
                json!({"type": "Sequence", "pretokenizers": [{"type": "WhitespaceSplit"}, metaspace]}),
                json!({"type": "TemplateProcessing",
                       "single": [sp(&bos), seq("A"), sp(&eos)],
                       "pair": [sp(&bos), seq("A"), sp(&eos), sp(&eos), seq("B"), sp(&eos)],
                       "special_tokens": {
                           bos.clone(): {"id": bos, "ids": [bos_id], "tokens": [bos]},
                           eos.clone(): {"id": eos, "ids": [eos_id], "tokens": [eos]}}}),
                json!({"type": "Metaspace", "replacement": "▁", "prepend_scheme": scheme, "split": true}),
            )
        } else {
            let aps = add_prefix_space(false);
            let trim = tokenizer_config
                .and_then(|c| c.get("trim_offsets"))
                .and_then(Value::as_bool)
                .unwrap_or(true);
            let sep = config_token(tokenizer_config, "sep_token").unwrap_or("</s>".into());
            let cls = config_token(tokenizer_config, "cls_token").unwrap_or("<s>".into());
            let (sep_id, cls_id) = (id_of(&sep, "sep_token")?, id_of(&cls, "cls_token")?);
            for k in ["dropout", "byte_fallback", "ignore_merges"] {
                model_settings.remove(k);
            }
            model_settings.insert("continuing_subword_prefix".into(), json!(""));
            model_settings.insert("end_of_word_suffix".into(), json!(""));
            model_settings.insert("fuse_unk".into(), json!(false));
            byte_fallback = false;
            (
                Value::Null,
                json!({"type": "ByteLevel", "add_prefix_space": aps, "trim_offsets": true, "use_regex": true}),
                json!({"type": "RobertaProcessing", "sep": [sep, sep_id], "cls": [cls, cls_id],
                       "trim_offsets": trim, "add_prefix_space": aps}),
                json!({"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true, "use_regex": true}),
            )
        };
        let mut model_obj = Map::new();
        model_obj.insert("type".into(), json!(kind.name()));
        model_obj.insert("vocab_size".into(), json!(vocab_size));
        model_obj.insert("unk_id".into(), json!(unk_id));
        model_obj.insert("byte_fallback".into(), json!(byte_fallback));
        for (k, v) in model_settings {
            model_obj.entry(k).or_insert(v);
        }
        added.sort_by_key(|a| a.id);
        let settings = json!({
            "version": SETTINGS_VERSION,
            "model": model_obj,
            "added_tokens": added.iter().map(added_json).collect::<Vec<_>>(),
            "normalizer": normalizer,
            "pre_tokenizer": pre_tokenizer,
            "post_processor": post_processor,
            "decoder": decoder,
            "source": {
                "layout": match layout { Layout::AsTransformers => "as_transformers", Layout::AsWritten => "as_written" },
                "tokenizer_class": class,
                "rebuilt_from_class": rebuild,
            },
        });
        let charsmap = match (&settings["normalizer"], charsmap) {
            (Value::Null, _) => Vec::new(),
            (_, c) => c.unwrap_or_default(),
        };
        if kind != TokenizerKind::Unigram {
            scores.clear();
        }
        drop(model_ids);
        pieces.extend(extra);
        let spec = TokenizerSpec {
            kind,
            pieces: Pieces::new(&pieces)?,
            scores: scores.into(),
            merges,
            charsmap,
            unk_id,
            byte_fallback,
            settings,
        };
        spec.validate()?;
        Ok(spec)
    }

    /// Rebuilds a spec from its stored parts, validating everything.
    ///
    /// # Errors
    /// [`crate::ErrorKind::Model`] naming the field for a corrupt settings string,
    /// an id out of range, mismatched lengths or an added token whose content is
    /// not its piece; [`crate::ErrorKind::Unsupported`] for another settings
    /// version.
    pub fn from_parts(
        kind: TokenizerKind,
        pieces: Pieces,
        scores: impl Into<Scores>,
        merges: Vec<(u32, u32)>,
        charsmap: Vec<u8>,
        settings_json: &str,
    ) -> Result<TokenizerSpec> {
        let settings: Value = serde_json::from_str(settings_json)
            .map_err(|e| model_err(format!("tokenizer settings: not JSON ({e})")))?;
        let model = settings
            .get("model")
            .ok_or_else(|| model_err("tokenizer settings: no model"))?;
        let unk_id = match model.get("unk_id") {
            None | Some(Value::Null) => None,
            Some(x) => Some(
                x.as_u64()
                    .and_then(|x| u32::try_from(x).ok())
                    .ok_or_else(|| model_err("tokenizer settings model.unk_id: not an id"))?,
            ),
        };
        let byte_fallback = super::normalizers::get_bool(
            model,
            "byte_fallback",
            false,
            "tokenizer settings model",
        )?;
        let spec = TokenizerSpec {
            kind,
            pieces,
            scores: scores.into(),
            merges,
            charsmap,
            unk_id,
            byte_fallback,
            settings,
        };
        spec.validate()?;
        Ok(spec)
    }

    /// The number of model pieces (`settings.model.vocab_size`).
    pub fn vocab_size(&self) -> usize {
        self.settings["model"]["vocab_size"]
            .as_u64()
            .map_or(0, |v| v as usize)
    }

    /// The settings as a compact string (what a model file stores).
    pub fn settings_string(&self) -> String {
        self.settings.to_string()
    }

    /// The added tokens of the settings.
    pub fn added_tokens(&self) -> Result<Vec<AddedToken>> {
        let list = match self.settings.get("added_tokens") {
            None | Some(Value::Null) => return Ok(Vec::new()),
            Some(l) => l
                .as_array()
                .ok_or_else(|| model_err("tokenizer settings added_tokens: not a list"))?,
        };
        list.iter()
            .enumerate()
            .map(|(i, t)| parse_added(t, &format!("tokenizer settings added_tokens[{i}]")))
            .collect()
    }

    fn validate(&self) -> Result<()> {
        let s = &self.settings;
        let at = "tokenizer settings";
        if !s.is_object() {
            return Err(model_err(format!("{at}: not an object")));
        }
        match s.get("version").and_then(Value::as_u64) {
            Some(SETTINGS_VERSION) => {}
            Some(v) => {
                return Err(Error::unsupported(format!(
                    "{at}: version {v} is not supported by this reader (it reads version {SETTINGS_VERSION}); a newer embedder wrote this file"
                )))
            }
            None => return Err(model_err(format!("{at}.version: missing or not a number"))),
        }
        let ty = s["model"]["type"].as_str().unwrap_or("");
        if ty != self.kind.name() {
            return Err(model_err(format!(
                "{at}.model.type: {ty:?} but the tokenizer kind is {}",
                self.kind.name()
            )));
        }
        let vs = s["model"]["vocab_size"]
            .as_u64()
            .ok_or_else(|| model_err(format!("{at}.model.vocab_size: missing")))?
            as usize;
        let n = self.pieces.len();
        if vs > n || vs == 0 {
            return Err(model_err(format!(
                "{at}.model.vocab_size: {vs} but there are {n} pieces"
            )));
        }
        if let Some(u) = self.unk_id {
            if u as usize >= vs {
                return Err(model_err(format!(
                    "{at}.model.unk_id: {u} is outside the {vs} model pieces"
                )));
            }
        }
        match self.kind {
            TokenizerKind::Unigram => {
                if self.scores.len() != vs {
                    return Err(model_err(format!(
                        "tokenizer scores: {} for {vs} model pieces",
                        self.scores.len()
                    )));
                }
                if let Some(i) = self.scores.iter().position(|x| !x.is_finite()) {
                    return Err(model_err(format!("tokenizer scores[{i}]: not finite")));
                }
                if self.unk_id.is_none() {
                    return Err(model_err(format!(
                        "{at}.model.unk_id: a Unigram model needs one"
                    )));
                }
                if !self.merges.is_empty() {
                    return Err(model_err("tokenizer merges: a Unigram model has none"));
                }
            }
            TokenizerKind::Bpe => {
                if let Some((i, m)) = self
                    .merges
                    .iter()
                    .enumerate()
                    .find(|(_, m)| m.0 as usize >= vs || m.1 as usize >= vs)
                {
                    return Err(model_err(format!(
                        "tokenizer merges[{i}]: ({}, {}) is outside the {vs} model pieces",
                        m.0, m.1
                    )));
                }
            }
            TokenizerKind::WordPiece => {}
        }
        let added = self.added_tokens()?;
        for (i, t) in added.iter().enumerate() {
            match self.pieces.get(t.id as usize) {
                Some(p) if p == t.content => {}
                _ => {
                    return Err(model_err(format!(
                        "{at}.added_tokens[{i}]: id {} is not the piece {:?}",
                        t.id, t.content
                    )))
                }
            }
        }
        if let Some(i) = (vs..n).find(|&i| !added.iter().any(|t| t.id as usize == i)) {
            return Err(model_err(format!(
                "tokenizer pieces[{i}]: past the model's {vs} pieces but not an added token"
            )));
        }
        if self.kind == TokenizerKind::Bpe {
            super::bpe::options_from_json(&s["model"])?;
        }
        if matches!(self.kind, TokenizerKind::Unigram | TokenizerKind::Bpe) {
            // Parse every part (cheap; the model is built by `build`).
            self.parts()?;
        }
        Ok(())
    }

    #[allow(clippy::type_complexity)]
    fn parts(
        &self,
    ) -> Result<(
        Option<Normalizer>,
        Option<PreTokenizer>,
        Template,
        Decoder,
        AddedVocab,
    )> {
        let s = &self.settings;
        let at = "tokenizer settings";
        let cm = (!self.charsmap.is_empty()).then_some(self.charsmap.as_slice());
        let normalizer = match s.get("normalizer") {
            None | Some(Value::Null) => None,
            Some(v) => Normalizer::from_json(v, cm, &format!("{at}.normalizer"))?,
        };
        if !self.charsmap.is_empty() && !has_precompiled(&normalizer) {
            return Err(model_err(format!(
                "tokenizer charsmap: present but {at}.normalizer has no Precompiled"
            )));
        }
        let pre_tokenizer = match s.get("pre_tokenizer") {
            None | Some(Value::Null) => None,
            Some(v) => PreTokenizer::from_json(v, &format!("{at}.pre_tokenizer"))?,
        };
        let template = Template::from_json(
            s.get("post_processor").unwrap_or(&Value::Null),
            self.pieces.len(),
            &format!("{at}.post_processor"),
        )?;
        let decoder = Decoder::from_json(s.get("decoder").unwrap_or(&Value::Null));
        let added = AddedVocab::new(self.added_tokens()?, normalizer.as_ref())?;
        Ok((normalizer, pre_tokenizer, template, decoder, added))
    }

    /// Builds the pipeline.
    ///
    /// # Errors
    /// As [`TokenizerSpec::from_parts`]; [`crate::ErrorKind::Unsupported`] for a
    /// model this pipeline does not run (WordPiece:
    /// [`crate::tokenizer::Tokenizer`]).
    pub fn build(&self) -> Result<Pipeline> {
        self.build_over(&self.pieces)
    }

    /// As [`TokenizerSpec::build`], with `pieces` (equal to the spec's) as
    /// the pipeline's token buffer.
    pub(crate) fn build_over(&self, pieces: &Pieces) -> Result<Pipeline> {
        let (normalizer, pre_tokenizer, template, decoder, added) = self.parts()?;
        let model = match self.kind {
            TokenizerKind::Unigram => {
                let vs = self.vocab_size();
                Model::Unigram(Unigram::from_pieces(
                    pieces,
                    vs,
                    self.scores.clone(),
                    self.unk_id.unwrap_or(0),
                    self.byte_fallback,
                )?)
            }
            TokenizerKind::Bpe => {
                let vs = self.vocab_size();
                Model::Bpe(Bpe::with_pieces(
                    pieces.clone(),
                    vs,
                    &self.merges,
                    super::bpe::options_from_json(&self.settings["model"])?,
                )?)
            }
            other => {
                return Err(Error::unsupported(format!(
                    "the {} tokenizer is not built by this pipeline",
                    other.name()
                )))
            }
        };
        Ok(Pipeline::new(
            added,
            normalizer,
            pre_tokenizer,
            model,
            template,
            decoder,
            pieces.clone(),
        ))
    }
}

/// The special tokens a HF folder declares (`tokenizer_config.json`'s
/// `pad_token`, `unk_token`, `cls_token`, `sep_token`, `mask_token`,
/// `bos_token`, `eos_token`, a string or an AddedToken object; `null` or
/// absent: none), as ids of the spec's pieces. A model need not have any of
/// them (Qwen3 declares only `pad` and `eos`); the post-processor's template,
/// not these, frames a text.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DeclaredSpecials {
    /// `pad_token`.
    pub pad: Option<u32>,
    /// `unk_token`, else the model's unknown id.
    pub unk: Option<u32>,
    /// `cls_token`.
    pub cls: Option<u32>,
    /// `sep_token`.
    pub sep: Option<u32>,
    /// `mask_token`.
    pub mask: Option<u32>,
    /// `bos_token`.
    pub bos: Option<u32>,
    /// `eos_token`.
    pub eos: Option<u32>,
}

impl DeclaredSpecials {
    /// The five ids a [`super::vocab::Vocab`] (and an EMBD file's vocabulary
    /// section) holds, for a pipeline tokenizer: each declared one, else a
    /// stand-in (`cls`: the first id the template puts before a text, else
    /// `bos`; `sep`: the last one it puts after, else `eos`; any other role:
    /// the pad id, else the first stand-in found, else 0). The pipeline never
    /// reads these five: its template frames texts; the stand-ins only fill
    /// the fixed slots.
    pub fn special_ids(&self, template: &Template) -> super::vocab::SpecialIds {
        let cls = self
            .cls
            .or_else(|| template.single_prefix.ids.first().copied())
            .or(self.bos);
        let sep = self
            .sep
            .or_else(|| template.single_suffix.ids.last().copied())
            .or(self.eos);
        let filler = self
            .pad
            .or(self.unk)
            .or(cls)
            .or(sep)
            .or(self.eos)
            .unwrap_or(0);
        super::vocab::SpecialIds {
            pad: self.pad.unwrap_or(filler),
            unk: self.unk.unwrap_or(filler),
            cls: cls.unwrap_or(filler),
            sep: sep.unwrap_or(filler),
            mask: self.mask.unwrap_or(filler),
        }
    }
}

impl TokenizerSpec {
    /// The special tokens `tokenizer_config` declares (see
    /// [`DeclaredSpecials`]); a declared token that is not a piece is refused
    /// by name.
    ///
    /// # Errors
    /// [`crate::ErrorKind::Model`] naming the key.
    pub fn declared_specials(&self, tokenizer_config: Option<&Value>) -> Result<DeclaredSpecials> {
        let find = |key: &str| -> Result<Option<u32>> {
            let Some(name) = config_token(tokenizer_config, key) else {
                return Ok(None);
            };
            // The last piece of that name (an added token past a model piece
            // of the same string is the one HF matches).
            let added = self.added_tokens()?;
            if let Some(t) = added.iter().find(|t| t.content == name) {
                return Ok(Some(t.id));
            }
            self.pieces
                .iter()
                .position(|p| p == name)
                .map(|i| Some(i as u32))
                .ok_or_else(|| {
                    model_err(format!(
                        "tokenizer_config.json {key}: {name:?} is not in the vocabulary"
                    ))
                })
        };
        Ok(DeclaredSpecials {
            pad: find("pad_token")?,
            unk: find("unk_token")?.or(self.unk_id),
            cls: find("cls_token")?,
            sep: find("sep_token")?,
            mask: find("mask_token")?,
            bos: find("bos_token")?,
            eos: find("eos_token")?,
        })
    }

    /// The post-processor's template (what frames one text or a pair).
    ///
    /// # Errors
    /// As [`TokenizerSpec::build`].
    pub fn template(&self) -> Result<Template> {
        Ok(self.parts()?.2)
    }
}

fn has_precompiled(n: &Option<Normalizer>) -> bool {
    match n {
        Some(Normalizer::Precompiled(_)) => true,
        Some(Normalizer::Sequence(l)) => l.iter().any(|x| matches!(x, Normalizer::Precompiled(_))),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_decoding() {
        assert_eq!(decode_base64("", "x").unwrap(), b"");
        assert_eq!(decode_base64("TWFu", "x").unwrap(), b"Man");
        assert_eq!(decode_base64("TWE=", "x").unwrap(), b"Ma");
        assert_eq!(decode_base64("TQ==", "x").unwrap(), b"M");
        assert_eq!(decode_base64("+/8=", "x").unwrap(), [0xFB, 0xFF]);
        assert!(decode_base64("TQ=*", "x").is_err());
        assert!(decode_base64("T", "x").is_err());
        assert!(decode_base64("TQ===", "x").is_err());
    }

    fn tiny_json() -> Value {
        json!({
            "added_tokens": [
                {"id": 0, "content": "<s>", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true},
                {"id": 2, "content": "</s>", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true},
                {"id": 99, "content": "<new>", "single_word": false, "lstrip": false, "rstrip": false, "normalized": true, "special": false}
            ],
            "normalizer": null,
            "pre_tokenizer": {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "always", "split": true},
            "post_processor": {"type": "RobertaProcessing", "sep": ["</s>", 2], "cls": ["<s>", 0]},
            "decoder": {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "always", "split": true},
            "model": {"type": "Unigram", "unk_id": 1, "byte_fallback": false,
                      "vocab": [["<s>", 0.0], ["<unk>", 0.0], ["</s>", 0.0], ["▁a", -1.0], ["b", -2.0]]}
        })
    }

    #[test]
    fn from_hf_json_and_back_through_parts() {
        let spec = TokenizerSpec::from_hf_json(&tiny_json(), None, Layout::AsTransformers).unwrap();
        assert_eq!(spec.kind, TokenizerKind::Unigram);
        assert_eq!(spec.vocab_size(), 5);
        // The new added token gets the next id, whatever the file says.
        assert_eq!(spec.pieces.len(), 6);
        assert_eq!(&spec.pieces[5], "<new>");
        let again = TokenizerSpec::from_parts(
            spec.kind,
            spec.pieces.clone(),
            spec.scores.clone(),
            spec.merges.clone(),
            spec.charsmap.clone(),
            &spec.settings_string(),
        )
        .unwrap();
        assert_eq!(again, spec);
        let p = spec.build().unwrap();
        // "a" -> "▁a"; "<new>" matched after normalization; "b" -> "▁b", whose "▁"
        // is no piece: unk, then "b".
        assert_eq!(p.encode("a<new>b", None), [0, 3, 5, 1, 4, 2]);
    }

    #[test]
    fn corrupt_parts_are_refused_by_name() {
        let spec = TokenizerSpec::from_hf_json(&tiny_json(), None, Layout::AsWritten).unwrap();
        let s = spec.settings_string();
        let try_parts = |pieces: Vec<String>, scores: Vec<f32>, settings: &str| {
            TokenizerSpec::from_parts(
                TokenizerKind::Unigram,
                pieces.into(),
                scores,
                vec![],
                vec![],
                settings,
            )
            .unwrap_err()
            .to_string()
        };
        let e = try_parts(spec.pieces.to_vec(), spec.scores.to_vec(), "{not json");
        assert!(e.contains("not JSON"), "{e}");
        let e = try_parts(
            spec.pieces.to_vec(),
            spec.scores.to_vec(),
            &s.replace("\"version\":1", "\"version\":2"),
        );
        assert!(e.contains("version 2"), "{e}");
        let e = try_parts(spec.pieces.to_vec(), spec.scores[..4].to_vec(), &s);
        assert!(e.contains("scores"), "{e}");
        let e = try_parts(spec.pieces.to_vec()[..5].to_vec(), spec.scores.to_vec(), &s);
        assert!(e.contains("added_tokens"), "{e}");
        let e = try_parts(
            spec.pieces.to_vec(),
            spec.scores.to_vec(),
            &s.replace("\"unk_id\":1", "\"unk_id\":7"),
        );
        assert!(e.contains("model.unk_id"), "{e}");
        let e = try_parts(
            spec.pieces.to_vec(),
            spec.scores.to_vec(),
            &s.replace("[\"</s>\",2]", "[\"</s>\",9]"),
        );
        assert!(e.contains("post_processor"), "{e}");
        let e = try_parts(
            spec.pieces.to_vec(),
            spec.scores.to_vec(),
            &s.replace("Metaspace", "Foo"),
        );
        assert!(e.contains("pre_tokenizer"), "{e}");
        let mut bad = spec.pieces.to_vec();
        bad[0] = "<x>".into();
        let e = try_parts(bad, spec.scores.to_vec(), &s);
        assert!(e.contains("added_tokens[0]"), "{e}");
        let e = TokenizerSpec::from_parts(
            TokenizerKind::Unigram,
            spec.pieces.clone(),
            spec.scores.clone(),
            vec![],
            vec![1, 2, 3],
            &s,
        )
        .unwrap_err();
        assert!(e.to_string().contains("charsmap"), "{e}");
    }

    #[test]
    fn xlmr_class_rebuild() {
        let cfg = json!({"tokenizer_class": "XLMRobertaTokenizer", "bos_token": "<s>", "eos_token": "</s>",
                         "unk_token": "<unk>", "add_prefix_space": false});
        let mut j = tiny_json();
        j["model"]["vocab"][3][0] = json!("<unk>");
        j["model"]["vocab"][1][0] = json!("x");
        let spec = TokenizerSpec::from_hf_json(&j, Some(&cfg), Layout::AsTransformers).unwrap();
        assert_eq!(spec.unk_id, Some(3));
        assert_eq!(
            spec.settings["pre_tokenizer"]["pretokenizers"][1]["prepend_scheme"],
            "never"
        );
        assert_eq!(spec.settings["source"]["rebuilt_from_class"], true);
        let written = TokenizerSpec::from_hf_json(&j, Some(&cfg), Layout::AsWritten).unwrap();
        assert_eq!(written.unk_id, Some(1));
        assert_eq!(written.settings["pre_tokenizer"]["type"], "Metaspace");
    }
}
