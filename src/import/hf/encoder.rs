//! HuggingFace / sentence-transformers encoder folders (the converter's input):
//! BERT, MPNet, RoBERTa and XLM-RoBERTa, with a WordPiece, SentencePiece-Unigram
//! or byte-level BPE tokenizer.
//!
//! Reads `config.json`, `model.safetensors` (memory-mapped, validated by the
//! reference `safetensors` crate, tensors kept zero-copy), `vocab.txt` (or the
//! WordPiece vocabulary inside `tokenizer.json`), `tokenizer_config.json`,
//! `sentence_bert_config.json`, `1_Pooling/config.json` and `modules.json`
//! (a Unigram or BPE `tokenizer.json` is stored whole: [`crate::model::tokenizer`]), and
//! produces a [`ModelFile`] carrying every metadata key of the EMBD notes, so that
//! writing it out as `.weights` is a plain serialization.
//!
//! Folders whose architecture the engine cannot run are refused with a message
//! that says why.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::Value;

use crate::error::{Error, ErrorKind, Result};
use crate::formats::{Backing, DType, FormatKind, ModelFile, TensorData, TensorEntry};
use crate::model::pooling::{self, Pooling};
use crate::model::tokenizer as model_tokenizer;
use crate::tokenizer::spec::{Layout, TokenizerKind, TokenizerSpec};
use crate::tokenizer::vocab::{SpecialIds, Vocab};

/// Options for reading a HF folder.
#[derive(Debug, Clone, Default)]
pub struct HfOptions {
    /// `model_name` to record; default: the folder's name (its parent's name when
    /// the folder is called `model`).
    pub name: Option<String>,
    /// `model_version` to record; default `1.0.0`.
    pub version: Option<String>,
    /// How a Unigram/BPE `tokenizer.json` is read: as transformers 5 and
    /// sentence-transformers load it (the default, the reference), or as
    /// written (as the `tokenizers` library and text-embeddings-inference run
    /// it).
    pub tokenizer_layout: Layout,
    /// A static vocabulary folder's behaviour (`None`: sentence-transformers'
    /// on a folder with a `modules.json`, else model2vec's).
    pub static_behaviour: Option<crate::model::static_vocab::Behaviour>,
}

/// Whether a `tokenizer.json` has a WordPiece model (or no model type).
fn is_wordpiece(tok_json: &Value) -> bool {
    matches!(
        tok_json
            .get("model")
            .and_then(|m| m.get("type"))
            .and_then(Value::as_str),
        None | Some("WordPiece")
    )
}

pub(super) fn read_json(path: &Path) -> Result<Value> {
    let text = std::fs::read_to_string(path).map_err(|e| Error::io(path.display(), e))?;
    serde_json::from_str(&text).map_err(|e| {
        Error::new(
            ErrorKind::Format,
            format!("{}: invalid JSON: {e}", path.display()),
        )
    })
}

pub(super) fn read_json_opt(path: &Path) -> Result<Option<Value>> {
    if path.is_file() {
        read_json(path).map(Some)
    } else {
        Ok(None)
    }
}

fn cfg_usize(cfg: &Value, key: &str, file: &str) -> Result<usize> {
    cfg.get(key)
        .and_then(Value::as_u64)
        .and_then(|v| usize::try_from(v).ok())
        .ok_or_else(|| {
            Error::model(format!(
                "{file}: '{key}' is missing or not a non-negative integer"
            ))
        })
}

/// Today's date and time in ISO 8601 (UTC), without a date crate.
pub fn now_iso8601() -> String {
    iso8601(std::time::SystemTime::now())
}

/// `t` as `YYYY-MM-DDTHH:MM:SSZ` (UTC; the epoch for a time before it).
pub fn iso8601(t: std::time::SystemTime) -> String {
    let secs = t
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    // Civil-from-days (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        (rem / 60) % 60,
        rem % 60
    )
}

/// Maps a safetensors dtype to ours; `None` when EMBD cannot store it.
fn map_dtype(d: safetensors::Dtype) -> Option<DType> {
    use safetensors::Dtype as S;
    Some(match d {
        S::F32 => DType::F32,
        S::F16 => DType::F16,
        S::BF16 => DType::BF16,
        S::I32 => DType::I32,
        S::I16 => DType::I16,
        S::I8 => DType::I8,
        S::U32 => DType::U32,
        S::U16 => DType::U16,
        S::U8 => DType::U8,
        _ => return None,
    })
}

/// Reads the tensors of a safetensors file into entries that point into `backing`.
pub fn safetensors_entries(backing: &Backing, what: &str) -> Result<Vec<TensorEntry>> {
    let bytes = backing.bytes();
    let st = safetensors::SafeTensors::deserialize(bytes).map_err(|e| {
        Error::new(
            ErrorKind::Format,
            format!("{what}: invalid safetensors file: {e}"),
        )
    })?;
    let base = bytes.as_ptr() as usize;
    let mut out = Vec::new();
    let mut names: Vec<String> = st.names().into_iter().map(str::to_string).collect();
    names.sort();
    for raw in names {
        let Some(name) = crate::model::names::canonical_name(&raw) else {
            continue;
        };
        let view = st
            .tensor(&raw)
            .map_err(|e| Error::new(ErrorKind::Format, format!("{what}: tensor '{raw}': {e}")))?;
        let dtype = map_dtype(view.dtype()).ok_or_else(|| {
            Error::unsupported(format!(
                "{what}: tensor '{raw}' has dtype {:?}, which the EMBD format cannot store",
                view.dtype()
            ))
        })?;
        let data = view.data();
        // The view borrows from `bytes`, so its start lies inside the buffer.
        let start = (data.as_ptr() as usize).wrapping_sub(base);
        out.push(TensorEntry {
            name,
            dtype,
            shape: view.shape().to_vec(),
            data: TensorData::Mapped {
                start,
                len: data.len(),
            },
            file_offset: start as u64,
        });
    }
    // Keep a stable, readable order: embeddings, layers by number, then the rest.
    out.sort_by_key(|t| tensor_order_key(&t.name));
    Ok(out)
}

/// Sort key: embeddings first, then encoder layers in numeric order, then others.
pub fn tensor_order_key(name: &str) -> (u32, u32, String) {
    if name.starts_with("embeddings.") {
        return (0, 0, name.to_string());
    }
    if let Some((n, tail)) = crate::model::names::split_layer_name(name) {
        return (1, n, tail.to_string());
    }
    (2, 0, name.to_string())
}

pub(super) fn read_vocab(dir: &Path) -> Result<Vec<String>> {
    let txt = dir.join("vocab.txt");
    if txt.is_file() {
        let text = std::fs::read_to_string(&txt).map_err(|e| Error::io(txt.display(), e))?;
        let mut tokens: Vec<String> = text.split('\n').map(str::to_string).collect();
        // A trailing newline leaves one empty string after the last token.
        if tokens.last().is_some_and(|t| t.is_empty()) {
            tokens.pop();
        }
        return Ok(tokens);
    }
    let tj = dir.join("tokenizer.json");
    let v = read_json(&tj)?;
    let model = v
        .get("model")
        .ok_or_else(|| Error::model(format!("{}: no 'model' section", tj.display())))?;
    if model.get("type").and_then(Value::as_str) != Some("WordPiece") {
        return Err(Error::unsupported(format!(
            "{}: tokenizer model is not WordPiece",
            tj.display()
        )));
    }
    let map = model
        .get("vocab")
        .and_then(Value::as_object)
        .ok_or_else(|| Error::model(format!("{}: no WordPiece vocab", tj.display())))?;
    let mut tokens = vec![None; map.len()];
    for (tok, id) in map {
        let id = id
            .as_u64()
            .and_then(|i| usize::try_from(i).ok())
            .filter(|&i| i < tokens.len())
            .ok_or_else(|| {
                Error::model(format!("{}: token '{tok}' has an invalid id", tj.display()))
            })?;
        tokens[id] = Some(tok.clone());
    }
    tokens
        .into_iter()
        .enumerate()
        .map(|(i, t)| {
            t.ok_or_else(|| Error::model(format!("{}: vocabulary has no id {i}", tj.display())))
        })
        .collect()
}

pub(super) fn special_ids(
    tokens: &[String],
    tok_cfg: Option<&Value>,
    defaults: &crate::model::arch::SpecialTokens,
) -> Result<SpecialIds> {
    let name_of = |key: &str, default: &str| -> String {
        let v = tok_cfg.and_then(|c| c.get(key));
        match v {
            Some(Value::String(s)) => s.clone(),
            Some(Value::Object(o)) => o
                .get("content")
                .and_then(Value::as_str)
                .unwrap_or(default)
                .to_string(),
            _ => default.to_string(),
        }
    };
    let find = |key: &str, default: &str| -> Result<u32> {
        let n = name_of(key, default);
        tokens
            .iter()
            .position(|t| *t == n)
            .map(|i| i as u32)
            .ok_or_else(|| Error::model(format!("vocabulary has no {key} '{n}'")))
    };
    Ok(SpecialIds {
        pad: find("pad_token", defaults.pad)?,
        unk: find("unk_token", defaults.unk)?,
        cls: find("cls_token", defaults.cls)?,
        sep: find("sep_token", defaults.sep)?,
        mask: find("mask_token", defaults.mask)?,
    })
}

/// Checks `tokenizer.json`'s post-processor against the family's (`cls text
/// sep` for a single text) and that its `cls`/`sep` ids are the ones found.
fn check_post_processor(
    tok_json: Option<&Value>,
    family: &crate::model::arch::Family,
    specials: &SpecialIds,
) -> Result<()> {
    let Some(pp) = tok_json.and_then(|t| t.get("post_processor")) else {
        return Ok(());
    };
    if pp.is_null() {
        return Ok(());
    }
    let ty = pp.get("type").and_then(Value::as_str).unwrap_or("");
    let allowed = family.special_tokens.post_processors;
    if !allowed.contains(&ty) {
        return Err(Error::unsupported(format!(
            "tokenizer.json post_processor '{ty}' is not supported for {} models ({})",
            family.name,
            allowed.join(", ")
        )));
    }
    // BertProcessing / RobertaProcessing: "cls": [token, id], "sep": [token, id].
    for (key, want) in [("cls", specials.cls), ("sep", specials.sep)] {
        if let Some(id) = pp.get(key).and_then(|v| v.get(1)).and_then(Value::as_u64) {
            if id != u64::from(want) {
                return Err(Error::unsupported(format!(
                    "tokenizer.json post_processor {key} id {id} differs from the tokenizer config's ({want})"
                )));
            }
        }
    }
    Ok(())
}

/// The added special tokens of `tokenizer.json` beyond the five of the
/// vocabulary section that are matched in the normalized text
/// (`"normalized": true`, MPNet's `<unk>`), by id. Further raw-matched ones
/// are refused (the engine matches only the five raw).
fn extra_special_ids(tok_json: Option<&Value>, specials: &SpecialIds) -> Result<Vec<u32>> {
    let Some(list) = tok_json
        .and_then(|t| t.get("added_tokens"))
        .and_then(Value::as_array)
    else {
        return Ok(Vec::new());
    };
    let five = specials.as_array();
    let mut out = Vec::new();
    for t in list {
        let Some(id) = t
            .get("id")
            .and_then(Value::as_u64)
            .and_then(|i| u32::try_from(i).ok())
        else {
            continue;
        };
        if five.contains(&id) || t.get("special").and_then(Value::as_bool) != Some(true) {
            continue;
        }
        let content = t.get("content").and_then(Value::as_str).unwrap_or("");
        if t.get("normalized").and_then(Value::as_bool) == Some(true) {
            out.push(id);
        } else {
            return Err(Error::unsupported(format!(
                "tokenizer.json: added special token '{content}' (id {id}) is matched in the raw text, which is only supported for the pad, unk, cls, sep and mask tokens"
            )));
        }
    }
    Ok(out)
}

pub(super) fn default_name(dir: &Path) -> String {
    let canon = dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf());
    let own = canon
        .file_name()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    if own == "model" {
        if let Some(parent) = canon.parent().and_then(Path::file_name) {
            return parent.to_string_lossy().into_owned();
        }
    }
    own
}

/// Pooling mode from `1_Pooling/config.json` (mean when the folder has none),
/// and its `include_prompt` (default true: prompt tokens are pooled).
fn pooling_mode(dir: &Path, modules: Option<&Value>) -> Result<(String, bool)> {
    let mut pool_dir: PathBuf = dir.join("1_Pooling");
    if let Some(list) = modules.and_then(Value::as_array) {
        for m in list {
            let ty = m.get("type").and_then(Value::as_str).unwrap_or("");
            if ty.ends_with("Pooling") && !ty.ends_with("SpladePooling") {
                if let Some(p) = m.get("path").and_then(Value::as_str) {
                    pool_dir = module_dir(dir, p)?;
                }
            }
        }
    }
    let Some(cfg) = read_json_opt(&pool_dir.join("config.json"))? else {
        return Ok(("mean".to_string(), true));
    };
    let include_prompt = cfg
        .get("include_prompt")
        .and_then(Value::as_bool)
        .unwrap_or(true);
    pooling_mode_of(&cfg).map(|m| (m, include_prompt))
}

/// A word-embedding table with more rows than the tokenizer has ids (padded
/// to a multiple of 64 or 128, as Qwen2's 151,936 rows for 151,665 ids): the
/// rows no id reaches are dropped (the entry keeps pointing into the
/// checkpoint, shorter). Fewer rows than ids is an error naming both.
fn fit_word_table(
    tensors: &mut [TensorEntry],
    family: &crate::model::arch::Family,
    vocab: usize,
) -> Result<()> {
    let name = format!("{}.weight", family.embeddings.word);
    let Some(t) = tensors.iter_mut().find(|t| t.name == name) else {
        return Ok(());
    };
    let (rows, width) = match t.shape[..] {
        [r, w] => (r, w),
        _ => return Ok(()),
    };
    if rows < vocab {
        return Err(Error::model(format!(
            "tensor '{name}' has {rows} rows, fewer than the tokenizer's {vocab} ids"
        )));
    }
    if rows > vocab {
        let row_bytes = width * t.dtype.size();
        if let crate::formats::TensorData::Mapped { len, .. } = &mut t.data {
            *len = vocab * row_bytes;
            t.shape[0] = vocab;
        }
    }
    Ok(())
}

/// Whether a `modules.json` type is sentence-transformers' `Dense` module
/// (`sentence_transformers.models.Dense`, `...base.modules.dense.Dense`).
fn is_dense_module(ty: &str) -> bool {
    ty.rsplit('.').next() == Some("Dense") && ty.starts_with("sentence_transformers.")
}

/// A sentence-transformers `Dense` module of a folder.
struct DenseModule {
    in_features: usize,
    out_features: usize,
    activation: crate::model::config::DenseActivation,
    /// `[out x in]`.
    weight: Vec<f32>,
    bias: Option<Vec<f32>>,
}

/// Elements `range` of an F32 or BF16 safetensors tensor as f32 (`what`
/// names it in the error for another dtype).
pub(super) fn view_f32(
    view: &safetensors::tensor::TensorView<'_>,
    range: std::ops::Range<usize>,
    what: &str,
) -> Result<Vec<f32>> {
    let d = view.data();
    match view.dtype() {
        safetensors::Dtype::F32 => Ok(d[range.start * 4..range.end * 4]
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect()),
        safetensors::Dtype::BF16 => Ok(d[range.start * 2..range.end * 2]
            .chunks_exact(2)
            .map(|b| f32::from_bits(u32::from(u16::from_le_bytes([b[0], b[1]])) << 16))
            .collect()),
        safetensors::Dtype::F16 => Ok(d[range.start * 2..range.end * 2]
            .chunks_exact(2)
            .map(|b| half::f16::from_le_bytes([b[0], b[1]]).to_f32())
            .collect()),
        other => Err(Error::unsupported(format!(
            "{what} has dtype {other:?} (F32, F16 or BF16 only)"
        ))),
    }
}

/// A module folder named by `modules.json` (only a folder inside the model
/// folder: an absolute path or `..` would make an untrusted modules.json
/// read elsewhere).
pub(super) fn module_dir(dir: &Path, p: &str) -> Result<PathBuf> {
    let inside = Path::new(p)
        .components()
        .all(|c| matches!(c, std::path::Component::Normal(_)));
    if !inside {
        return Err(Error::unsupported(format!(
            "modules.json: module path '{p}' is not a folder inside the model folder"
        )));
    }
    Ok(dir.join(p))
}

/// The `Dense` modules of `modules.json`, in order, chained from `hidden`:
/// each folder's `config.json` (`in_features`, `out_features`, `bias`,
/// `activation_function`) and `model.safetensors` (`linear.weight`,
/// `linear.bias`).
fn dense_modules(dir: &Path, modules: Option<&Value>, hidden: usize) -> Result<Vec<DenseModule>> {
    let mut out: Vec<DenseModule> = Vec::new();
    let Some(list) = modules.and_then(Value::as_array) else {
        return Ok(out);
    };
    for m in list {
        let ty = m.get("type").and_then(Value::as_str).unwrap_or("");
        if !is_dense_module(ty) {
            continue;
        }
        let path = m.get("path").and_then(Value::as_str).unwrap_or("");
        let mdir = module_dir(dir, path)?;
        let cfg_path = mdir.join("config.json");
        let cfg = read_json(&cfg_path)?;
        let what = cfg_path.display().to_string();
        let in_features = cfg_usize(&cfg, "in_features", &what)?;
        let out_features = cfg_usize(&cfg, "out_features", &what)?;
        let want_in = out.last().map_or(hidden, |d| d.out_features);
        if in_features != want_in {
            return Err(Error::model(format!(
                "{what}: in_features {in_features}, but the module before gives {want_in} values"
            )));
        }
        let act_name = cfg
            .get("activation_function")
            .and_then(Value::as_str)
            .unwrap_or("torch.nn.modules.activation.Tanh");
        let activation =
            crate::model::config::DenseActivation::from_name(act_name).ok_or_else(|| {
                Error::unsupported(format!(
                    "{what}: activation_function '{act_name}' is not supported (Identity, Tanh)"
                ))
            })?;
        let st_path = mdir.join("model.safetensors");
        if !st_path.is_file() {
            return Err(Error::new(
                ErrorKind::NotFound,
                format!(
                    "{}: missing (a Dense module saved as pytorch_model.bin is not read; save it as safetensors)",
                    st_path.display()
                ),
            ));
        }
        let backing = Backing::map(&st_path)?;
        let st_what = st_path.display().to_string();
        let st = safetensors::SafeTensors::deserialize(backing.bytes()).map_err(|e| {
            Error::new(
                ErrorKind::Format,
                format!("{st_what}: invalid safetensors file: {e}"),
            )
        })?;
        let read = |name: &str, shape: &[usize]| -> Result<Option<Vec<f32>>> {
            let Ok(view) = st.tensor(name) else {
                return Ok(None);
            };
            if view.shape() != shape {
                return Err(Error::model(format!(
                    "{st_what}: tensor '{name}' has shape {:?}, expected {shape:?}",
                    view.shape()
                )));
            }
            let n = shape.iter().product();
            let what = format!("{st_what}: tensor '{name}'");
            view_f32(&view, 0..n, &what).map(Some)
        };
        let weight = read("linear.weight", &[out_features, in_features])?
            .ok_or_else(|| Error::model(format!("{st_what}: tensor 'linear.weight' is missing")))?;
        let want_bias = cfg.get("bias").and_then(Value::as_bool).unwrap_or(true);
        let bias = read("linear.bias", &[out_features])?;
        if want_bias && bias.is_none() {
            return Err(Error::model(format!(
                "{st_what}: tensor 'linear.bias' is missing (config.json says bias true)"
            )));
        }
        out.push(DenseModule {
            in_features,
            out_features,
            activation,
            weight,
            bias: bias.filter(|_| want_bias),
        });
    }
    Ok(out)
}

/// `prompts` (as a JSON object of strings, when not empty) and
/// `default_prompt_name` of `config_sentence_transformers.json`.
fn prompts(dir: &Path) -> Result<(Option<String>, Option<String>)> {
    let Some(cfg) = read_json_opt(&dir.join("config_sentence_transformers.json"))? else {
        return Ok((None, None));
    };
    let bad = |why: &str| Error::unsupported(format!("config_sentence_transformers.json: {why}"));
    let prompts = match cfg.get("prompts") {
        None | Some(Value::Null) => None,
        Some(Value::Object(m)) if m.is_empty() => None,
        Some(Value::Object(m)) => {
            if m.values().any(|v| !v.is_string()) {
                return Err(bad("a prompt is not a string"));
            }
            Some(Value::Object(m.clone()).to_string())
        }
        Some(_) => return Err(bad("'prompts' is not an object")),
    };
    let default = match cfg.get("default_prompt_name") {
        None | Some(Value::Null) => None,
        Some(Value::String(d)) => {
            let known = cfg
                .get("prompts")
                .and_then(Value::as_object)
                .is_some_and(|m| m.contains_key(d));
            if !known {
                return Err(bad(&format!(
                    "default_prompt_name '{d}' is not one of the prompts"
                )));
            }
            Some(d.clone())
        }
        Some(_) => return Err(bad("'default_prompt_name' is not a string")),
    };
    Ok((prompts, default))
}

/// The one pooling mode a pooling config selects (names and flags:
/// [`crate::model::pooling`]).
fn pooling_mode_of(cfg: &Value) -> Result<String> {
    let flag = |k: &str| cfg.get(k).and_then(Value::as_bool).unwrap_or(false);
    let supported = |mode: &str| match Pooling::from_name(mode) {
        Some(p) => Ok(p.name().to_string()),
        None => Err(Error::unsupported(format!(
            "pooling mode '{mode}' is not supported ({})",
            Pooling::expected()
        ))),
    };
    if let Some(mode) = cfg.get("pooling_mode").and_then(Value::as_str) {
        return supported(mode);
    }
    let modes: Vec<&str> = pooling::SENTENCE_TRANSFORMERS_FLAGS
        .iter()
        .filter(|(k, _)| flag(k))
        .map(|(_, m)| *m)
        .collect();
    match modes.as_slice() {
        [] => Ok(Pooling::Mean.name().to_string()),
        [m] => supported(m),
        many => Err(Error::unsupported(format!(
            "several pooling modes at once ({}) are not supported",
            many.join(", ")
        ))),
    }
}

/// Reads a HF / sentence-transformers BERT folder into a [`ModelFile`].
///
/// # Errors
/// I/O and JSON errors naming the file; [`ErrorKind::Unsupported`] for
/// architectures or options the engine cannot run.
pub fn read_dir(root: &Path, opts: &HfOptions) -> Result<ModelFile> {
    if !root.is_dir() {
        return Err(Error::new(
            ErrorKind::NotFound,
            format!("{}: not a directory", root.display()),
        ));
    }
    // A Router keeps its transformer in a module folder.
    let layout = super::outputs::layout(root)?;
    let dir = layout.dir.as_path();
    let config_path = dir.join("config.json");
    let mut cfg = read_json(&config_path)?;
    if super::model2vec::is_static(&cfg, layout.modules.as_ref()) {
        return super::model2vec::read_dir(dir, &cfg, opts);
    }
    let cfile = "config.json";
    let model_type = cfg
        .get("model_type")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let archs: Vec<String> = cfg
        .get("architectures")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default();
    let Some(family) = crate::model::arch::by_hf_model_type(&model_type) else {
        let types: Vec<&str> = crate::model::arch::FAMILIES
            .iter()
            .flat_map(|f| f.hf_model_types.iter().copied())
            .collect();
        return Err(Error::unsupported(format!(
            "{}: model_type '{model_type}' (architectures {archs:?}) is not supported; the encoder families that run are model_type {}",
            config_path.display(),
            types.join(", ")
        )));
    };
    // Another layout of the family's `config.json` read as the core keys,
    // before anything reads them.
    (family.hf_alias)(&mut cfg)?;
    let cfg = cfg;
    let mut family_md = BTreeMap::new();
    (family.hf_config)(&cfg, &mut family_md)?;
    // The BERT-shaped families' activation key (a family with its own says
    // so in `family_md`).
    let hidden_act = match cfg
        .get("hidden_act")
        .and_then(Value::as_str)
        .unwrap_or("gelu")
    {
        _ if family_md.contains_key("hidden_act") => "",
        "gelu" => "gelu",
        "gelu_new" | "gelu_pytorch_tanh" => "gelu_tanh",
        other => {
            return Err(Error::unsupported(format!(
                "{}: hidden_act '{other}' is not supported (gelu, gelu_new)",
                config_path.display()
            )))
        }
    };
    let hidden = cfg_usize(&cfg, "hidden_size", cfile)?;
    let layers = cfg_usize(&cfg, "num_hidden_layers", cfile)?;
    let heads = cfg_usize(&cfg, "num_attention_heads", cfile)?;
    let inter = cfg_usize(&cfg, "intermediate_size", cfile)?;
    let max_pos = cfg_usize(&cfg, "max_position_embeddings", cfile)?;
    let eps = cfg
        .get("layer_norm_eps")
        .and_then(Value::as_f64)
        .unwrap_or(1e-12);

    let tok_cfg = read_json_opt(&dir.join("tokenizer_config.json"))?;
    let tok_json = read_json_opt(&dir.join("tokenizer.json"))?;
    // A Unigram or BPE `tokenizer.json` is the source of truth for those
    // tokenizers (stored whole: model::tokenizer); WordPiece keeps the BERT
    // normalizer options below.
    let spec = match tok_json.as_ref() {
        Some(tj) if !is_wordpiece(tj) => Some(TokenizerSpec::from_hf_json(
            tj,
            tok_cfg.as_ref(),
            opts.tokenizer_layout,
        )?),
        _ => None,
    };
    let kind = spec.as_ref().map_or(TokenizerKind::WordPiece, |s| s.kind);
    model_tokenizer::check_combination(family, kind)?;
    let normalizer = tok_json
        .as_ref()
        .filter(|_| spec.is_none())
        .and_then(|t| t.get("normalizer"));
    if let Some(n) = normalizer {
        let ty = n.get("type").and_then(Value::as_str).unwrap_or("");
        if !ty.is_empty() && ty != "BertNormalizer" {
            return Err(Error::unsupported(format!(
                "tokenizer.json normalizer '{ty}' is not supported (BertNormalizer only)"
            )));
        }
    }
    // The fast tokenizer's normalizer is what sentence-transformers runs; the
    // slow tokenizer config is the fallback.
    let bool_of = |norm_key: &str, cfg_key: &str, default: bool| -> bool {
        normalizer
            .and_then(|n| n.get(norm_key))
            .and_then(Value::as_bool)
            .or_else(|| {
                tok_cfg
                    .as_ref()
                    .and_then(|c| c.get(cfg_key))
                    .and_then(Value::as_bool)
            })
            .unwrap_or(default)
    };
    let lowercase = bool_of("lowercase", "do_lower_case", true);
    let chinese = bool_of("handle_chinese_chars", "tokenize_chinese_chars", true);
    let strip_accents: Option<bool> = normalizer
        .and_then(|n| n.get("strip_accents"))
        .and_then(Value::as_bool)
        .or_else(|| {
            tok_cfg
                .as_ref()
                .and_then(|c| c.get("strip_accents"))
                .and_then(Value::as_bool)
        });

    let st_cfg = read_json_opt(&dir.join("sentence_bert_config.json"))?;
    if st_cfg
        .as_ref()
        .and_then(|c| c.get("do_lower_case"))
        .and_then(Value::as_bool)
        == Some(true)
        && !lowercase
    {
        return Err(Error::unsupported(
            "sentence_bert_config.json lowercases input text but the tokenizer does not; this combination is not supported",
        ));
    }
    let max_seq = st_cfg
        .as_ref()
        .and_then(|c| c.get("max_seq_length"))
        .and_then(Value::as_u64)
        .or_else(|| {
            tok_cfg
                .as_ref()
                .and_then(|c| c.get("model_max_length"))
                .and_then(Value::as_u64)
        })
        .map(|v| (v as usize).min(max_pos))
        .unwrap_or(max_pos);

    let modules = layout.modules.clone();
    let dense = dense_modules(root, modules.as_ref(), hidden)?;
    let normalize = modules.as_ref().and_then(Value::as_array).is_some_and(|l| {
        l.iter().any(|m| {
            m.get("type")
                .and_then(Value::as_str)
                .is_some_and(|t| t.ends_with("Normalize"))
        })
    });
    if let Some(list) = modules.as_ref().and_then(Value::as_array) {
        for m in list {
            let ty = m.get("type").and_then(Value::as_str).unwrap_or("");
            let known = ty.ends_with("Transformer")
                || ty.ends_with("Pooling")
                || ty.ends_with(".LogitScore")
                || ty.ends_with("Normalize")
                || is_dense_module(ty)
                || super::outputs::is_output_module(ty);
            if !known {
                return Err(Error::unsupported(format!(
                    "modules.json: module '{ty}' is not supported (Transformer, Pooling, Dense, \
                     Normalize, SpladePooling, Router, PyLate's Dense only)"
                )));
            }
        }
    }
    let score_dir = logit_score_module(root, modules.as_ref())?;
    let classifier = score_dir.is_some()
        || archs
            .iter()
            .any(|a| a.ends_with("ForSequenceClassification"));
    let (pooling, include_prompt) = if classifier {
        // A cross-encoder's head reads the first token's final state.
        (Pooling::Cls.name().to_string(), true)
    } else {
        pooling_mode(root, modules.as_ref())?
    };
    let (prompts, default_prompt) = prompts(root)?;

    let tokens = match &spec {
        Some(spec) => spec.pieces.to_vec(),
        None => read_vocab(dir)?,
    };
    let specials = match &spec {
        // A family without token names of its own: the tokenizer files
        // declare them (stand-ins where they declare none).
        Some(spec) if family.special_tokens.declared() => spec
            .declared_specials(tok_cfg.as_ref())?
            .special_ids(&spec.template()?),
        // A family's names, else (another vocabulary's, as mmBERT's Gemma
        // tokenizer in a ModernBERT folder) what the tokenizer declares.
        Some(spec) => match special_ids(&tokens, tok_cfg.as_ref(), &family.special_tokens) {
            Ok(ids) => ids,
            Err(named) => spec
                .declared_specials(tok_cfg.as_ref())
                .and_then(|d| Ok(d.special_ids(&spec.template()?)))
                .map_err(|_| named)?,
        },
        None => special_ids(&tokens, tok_cfg.as_ref(), &family.special_tokens)?,
    };
    let mut extra_specials = if spec.is_none() {
        check_post_processor(tok_json.as_ref(), family, &specials)?;
        extra_special_ids(tok_json.as_ref(), &specials)?
    } else {
        Vec::new()
    };
    if let Some(&id) = extra_specials.iter().find(|&&i| i as usize >= tokens.len()) {
        return Err(Error::model(format!(
            "tokenizer.json: added token id {id} is outside the vocabulary"
        )));
    }
    let vocab = Vocab::new(tokens, specials)?;

    let st_path = dir.join("model.safetensors");
    if !st_path.is_file() {
        let what = if dir.join("pytorch_model.bin").is_file() {
            " (only pytorch_model.bin found: pickled checkpoints are not read; save the model as safetensors)"
        } else {
            ""
        };
        return Err(Error::new(
            ErrorKind::NotFound,
            format!("{}: missing{what}", st_path.display()),
        ));
    }
    let backing = Arc::new(Backing::map(&st_path)?);
    let mut tensors = safetensors_entries(&backing, &st_path.display().to_string())?;
    fit_word_table(&mut tensors, family, vocab.len())?;
    let embedding_dim = dense.last().map_or(hidden, |d| d.out_features);
    let dense_acts: Vec<&str> = dense.iter().map(|d| d.activation.name()).collect();
    for (i, d) in dense.into_iter().enumerate() {
        tensors.push(TensorEntry::owned_f32(
            crate::model::dense::weight_name(i),
            vec![d.out_features, d.in_features],
            &d.weight,
        ));
        if let Some(b) = &d.bias {
            tensors.push(TensorEntry::owned_f32(
                crate::model::dense::bias_name(i),
                vec![d.out_features],
                b,
            ));
        }
    }
    let head_md = match &score_dir {
        Some(sd) => {
            let (md, t) = logit_score_metadata(
                dir,
                sd,
                &cfg,
                tok_cfg.as_ref(),
                backing.bytes(),
                hidden,
                vocab.len(),
            )?;
            tensors.push(t);
            Some(md)
        }
        None if classifier => {
            let archs: Vec<&str> = archs.iter().map(String::as_str).collect();
            Some(classifier_metadata(dir, &cfg, &archs, &tensors)?)
        }
        None => None,
    };

    let mut md = BTreeMap::new();
    let outputs = super::outputs::read_heads(
        &super::outputs::Inputs {
            layout: &layout,
            cfg: &cfg,
            weights: backing.bytes(),
            vocab: &vocab,
            hidden,
        },
        &mut tensors,
        &mut md,
    )?;
    // ColBERT's markers are special tokens of its tokenizer (matched in the
    // text as sentence-transformers adds them).
    for key in [
        crate::model::multi_vector::COLBERT_QUERY_PREFIX,
        crate::model::multi_vector::COLBERT_DOCUMENT_PREFIX,
    ] {
        if let Some(id) = md.get(key).and_then(|v| v.parse::<u32>().ok()) {
            if spec.is_none()
                && !extra_specials.contains(&id)
                && !vocab.specials().as_array().contains(&id)
            {
                extra_specials.push(id);
            }
        }
    }
    if outputs.is_some() && classifier {
        return Err(Error::unsupported(
            "a cross-encoder with sparse or multi-vector outputs is not supported",
        ));
    }
    let mut put = |k: &str, v: String| {
        md.insert(k.to_string(), v);
    };
    put(
        "model_name",
        opts.name.clone().unwrap_or_else(|| default_name(root)),
    );
    put(
        "model_version",
        opts.version.clone().unwrap_or_else(|| "1.0.0".to_string()),
    );
    put("embedding_dim", embedding_dim.to_string());
    if !dense_acts.is_empty() {
        put("dense_modules", dense_acts.join(" "));
    }
    put("vocab_size", vocab.len().to_string());
    put("num_layers", layers.to_string());
    put("num_attention_heads", heads.to_string());
    put("hidden_size", hidden.to_string());
    put("intermediate_size", inter.to_string());
    put("max_position_emb", max_pos.to_string());
    put("created_at", now_iso8601());
    put("architecture", family.name.to_string());
    put("pooling", pooling);
    if !include_prompt {
        put("pooling_include_prompt", "false".to_string());
    }
    if let Some(p) = prompts {
        put("prompts", p);
    }
    if let Some(d) = default_prompt {
        put("default_prompt_name", d);
    }
    put("normalize", (normalize && !classifier).to_string());
    put("max_seq_length", max_seq.to_string());
    if spec.is_none() {
        put("do_lower_case", lowercase.to_string());
        put("tokenize_chinese_chars", chinese.to_string());
        if let Some(s) = strip_accents {
            put("strip_accents", s.to_string());
        }
    }
    put("layer_norm_eps", format!("{eps:e}"));
    if !hidden_act.is_empty() {
        put("hidden_act", hidden_act.to_string());
    }
    if !extra_specials.is_empty() {
        let ids: Vec<String> = extra_specials.iter().map(u32::to_string).collect();
        put("special_ids_normalized", ids.join(" "));
    }
    for (k, v) in family_md {
        put(&k, v);
    }
    for (k, v) in head_md.into_iter().flatten() {
        put(&k, v);
    }
    if let Some(src) = cfg.get("_name_or_path").and_then(Value::as_str) {
        put("source_model", src.to_string());
    }

    if let Some(spec) = &spec {
        model_tokenizer::store(spec, &mut md, &mut tensors);
    }
    let mut file = ModelFile::new(FormatKind::HfSafetensors, backing, md, Some(vocab), tensors)?;
    file.details
        .push(("source".to_string(), dir.display().to_string()));
    Ok(file)
}

/// The activation of a cross-encoder's scores, as sentence-transformers 6's
/// `CrossEncoder` resolves it (see [`classifier_metadata`]).
fn score_activation(
    dir: &Path,
    cfg: &Value,
    num_labels: usize,
) -> Result<crate::model::head::ScoreActivation> {
    use crate::model::head::ScoreActivation;
    let st = read_json_opt(&dir.join("config_sentence_transformers.json"))?;
    let saved = st
        .as_ref()
        .and_then(|c| c.get("activation_fn"))
        .and_then(Value::as_str);
    let mut activation = match saved {
        Some(p) => ScoreActivation::from_torch_path(p)?,
        None => None,
    };
    if activation.is_none() {
        let legacy = cfg
            .get("sentence_transformers")
            .and_then(|s| s.get("activation_fn"))
            .or_else(|| cfg.get("sbert_ce_default_activation_function"))
            .and_then(Value::as_str);
        if let Some(p) = legacy {
            activation = ScoreActivation::from_torch_path(p)?;
        }
    }
    Ok(activation.unwrap_or_else(|| ScoreActivation::default_for(num_labels)))
}

/// The `LogitScore` module of `modules.json`, if any: its folder.
fn logit_score_module(dir: &Path, modules: Option<&Value>) -> Result<Option<PathBuf>> {
    for m in modules.and_then(Value::as_array).into_iter().flatten() {
        let ty = m.get("type").and_then(Value::as_str).unwrap_or("");
        if ty.rsplit('.').next() == Some("LogitScore") {
            let p = m.get("path").and_then(Value::as_str).unwrap_or("");
            return module_dir(dir, p).map(Some);
        }
    }
    Ok(None)
}

/// An LLM reranker (a `*ForCausalLM` with sentence-transformers'
/// `LogitScore`, Qwen3-Reranker): the classifier keys, the prompt template
/// of the folder's chat template ([`crate::model::pair_template`]), and
/// the head tensor `logit_score.weight` = the LM head's rows of the true and
/// false tokens (the word embeddings' when tied).
fn logit_score_metadata(
    dir: &Path,
    score_dir: &Path,
    cfg: &Value,
    tok_cfg: Option<&Value>,
    st_bytes: &[u8],
    hidden: usize,
    vocab: usize,
) -> Result<(BTreeMap<String, String>, TensorEntry)> {
    use crate::model::head::{HeadLayout, TASK_CLASSIFICATION, TASK_KEY};
    use crate::model::pair_template::{self, PairTemplate};
    let sc_path = score_dir.join("config.json");
    let sc = read_json(&sc_path)?;
    let what = sc_path.display().to_string();
    let token = |key: &str| -> Result<usize> {
        let id = cfg_usize(&sc, key, &what)?;
        if id >= vocab {
            return Err(Error::model(format!(
                "{what}: {key} {id} is not below the vocabulary size {vocab}"
            )));
        }
        Ok(id)
    };
    let (t, f) = (token("true_token_id")?, token("false_token_id")?);
    let template_src = match std::fs::read_to_string(dir.join("chat_template.jinja")) {
        Ok(s) => s,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => tok_cfg
            .and_then(|c| c.get("chat_template"))
            .and_then(Value::as_str)
            .map(str::to_string)
            .ok_or_else(|| {
                Error::model(format!(
                    "{}: an LLM reranker needs its chat template (chat_template.jinja or tokenizer_config.json's chat_template)",
                    dir.display()
                ))
            })?,
        Err(e) => return Err(Error::io(dir.join("chat_template.jinja").display(), e)),
    };
    let template = PairTemplate::from_jinja(&template_src)?;
    // The LM head: `lm_head.weight`, else (tied) the word embeddings.
    let st = safetensors::SafeTensors::deserialize(st_bytes)
        .map_err(|e| Error::new(ErrorKind::Format, format!("model.safetensors: {e}")))?;
    let tied = cfg
        .get("tie_word_embeddings")
        .and_then(Value::as_bool)
        .unwrap_or(true);
    let names = st.names();
    let pick = |suffix: &str| {
        names
            .iter()
            .find(|n| **n == suffix || n.ends_with(&format!(".{suffix}")))
            .map(|n| n.to_string())
    };
    let head_name = match (pick("lm_head.weight"), tied) {
        (Some(n), _) => n,
        (None, true) => pick("embed_tokens.weight").ok_or_else(|| {
            Error::model("model.safetensors: no lm_head.weight and no embed_tokens.weight")
        })?,
        (None, false) => {
            return Err(Error::model(
                "model.safetensors: tie_word_embeddings is false but lm_head.weight is missing",
            ))
        }
    };
    let view = st
        .tensor(&head_name)
        .map_err(|e| Error::new(ErrorKind::Format, format!("{head_name}: {e}")))?;
    if view.shape().len() != 2 || view.shape()[1] != hidden || view.shape()[0] < vocab {
        return Err(Error::model(format!(
            "{head_name} has shape {:?}, expected [>= {vocab}, {hidden}]",
            view.shape()
        )));
    }
    let row = |i: usize| view_f32(&view, i * hidden..(i + 1) * hidden, &head_name);
    let mut w = row(t)?;
    w.extend(row(f)?);
    let (_, out) = HeadLayout::LogitScore.tensors();
    let tensor = TensorEntry::owned_f32(format!("{out}.weight"), vec![2, hidden], &w);
    let mut md = BTreeMap::new();
    md.insert(TASK_KEY.to_string(), TASK_CLASSIFICATION.to_string());
    md.insert(
        "classifier_head".to_string(),
        HeadLayout::LogitScore.name().to_string(),
    );
    md.insert("num_labels".to_string(), "1".to_string());
    md.insert(
        "activation".to_string(),
        score_activation(dir, cfg, 1)?.name().to_string(),
    );
    md.insert(
        crate::model::head::CLASSIFIER_POOLING.to_string(),
        "last".to_string(),
    );
    md.insert(pair_template::KEY.to_string(), template.to_json());
    Ok((md, tensor))
}

/// The classifier keys of a `*ForSequenceClassification` folder
/// ([`crate::model::head`]): `task`, `classifier_head` (from the head tensors
/// present), `num_labels` and `id2label` (from `config.json`, checked against
/// the output tensor), and `activation` resolved as sentence-transformers 6's
/// `CrossEncoder` does: `activation_fn` of `config_sentence_transformers.json`,
/// else `config.json`'s `sentence_transformers.activation_fn`, else its older
/// `sbert_ce_default_activation_function`, else sigmoid for one label and
/// identity for several (a class path outside `torch.` is not imported by
/// sentence-transformers without `trust_remote_code`, so the default applies).
fn classifier_metadata(
    dir: &Path,
    cfg: &Value,
    archs: &[&str],
    tensors: &[TensorEntry],
) -> Result<BTreeMap<String, String>> {
    use crate::model::head::{HeadLayout, TASK_CLASSIFICATION, TASK_KEY};
    let layout = HeadLayout::detect(tensors.iter().map(|t| t.name.as_str())).ok_or_else(|| {
        Error::model(format!(
            "config.json: architectures {archs:?} is a classifier, but model.safetensors has no classification head (pooler.dense + classifier, classifier.dense + classifier.out_proj, or head.dense + classifier)"
        ))
    })?;
    let (_, out) = layout.tensors();
    let out_rows = tensors
        .iter()
        .find(|t| t.name == format!("{out}.weight"))
        .and_then(|t| t.shape.first().copied())
        .unwrap_or(0);
    let id2label = cfg.get("id2label").and_then(Value::as_object);
    let num_labels = match (cfg.get("num_labels").and_then(Value::as_u64), id2label) {
        (Some(n), _) => n as usize,
        (None, Some(m)) => m.len(),
        // transformers' PretrainedConfig default.
        (None, None) => 2,
    };
    if num_labels != out_rows {
        return Err(Error::model(format!(
            "config.json: {num_labels} labels, but the head's '{out}.weight' has {out_rows} rows"
        )));
    }
    let mut labels = serde_json::Map::new();
    if let Some(m) = id2label {
        for (k, v) in m {
            let name = v.as_str().ok_or_else(|| {
                Error::model(format!("config.json: id2label '{k}' is not a string"))
            })?;
            if k.parse::<usize>()
                .ok()
                .filter(|&i| i < num_labels)
                .is_none()
            {
                return Err(Error::model(format!(
                    "config.json: id2label key '{k}' is not a label index below {num_labels}"
                )));
            }
            labels.insert(k.clone(), Value::String(name.to_string()));
        }
    }
    let activation = score_activation(dir, cfg, num_labels)?;
    let mut md = BTreeMap::new();
    md.insert(TASK_KEY.to_string(), TASK_CLASSIFICATION.to_string());
    md.insert("classifier_head".to_string(), layout.name().to_string());
    md.insert("num_labels".to_string(), num_labels.to_string());
    if !labels.is_empty() {
        md.insert("id2label".to_string(), Value::Object(labels).to_string());
    }
    md.insert("activation".to_string(), activation.name().to_string());
    if layout == HeadLayout::ModernBert {
        let pooling = cfg
            .get("classifier_pooling")
            .and_then(Value::as_str)
            .unwrap_or("cls");
        if pooling != "cls" && pooling != "mean" {
            return Err(Error::unsupported(format!(
                "config.json: classifier_pooling '{pooling}' is not supported (cls, mean)"
            )));
        }
        let act = cfg
            .get("classifier_activation")
            .and_then(Value::as_str)
            .unwrap_or("gelu");
        if act != "gelu" {
            return Err(Error::unsupported(format!(
                "config.json: classifier_activation '{act}' is not supported (gelu)"
            )));
        }
        md.insert(
            crate::model::head::CLASSIFIER_POOLING.to_string(),
            pooling.to_string(),
        );
    }
    Ok(md)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn order_key_sorts_layers_numerically() {
        let mut v = vec![
            "encoder.layer.10.a",
            "pooler.dense.weight",
            "encoder.layer.2.a",
            "embeddings.x",
        ];
        v.sort_by_key(|n| tensor_order_key(n));
        assert_eq!(
            v,
            [
                "embeddings.x",
                "encoder.layer.2.a",
                "encoder.layer.10.a",
                "pooler.dense.weight"
            ]
        );
    }

    #[test]
    fn iso_date_shape() {
        let s = now_iso8601();
        assert_eq!(s.len(), 20, "{s}");
        assert!(s.ends_with('Z'));
        let epoch = std::time::UNIX_EPOCH;
        assert_eq!(iso8601(epoch), "1970-01-01T00:00:00Z");
        let leap = epoch + std::time::Duration::from_secs(1_709_251_199);
        assert_eq!(iso8601(leap), "2024-02-29T23:59:59Z");
    }
}
