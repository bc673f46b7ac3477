//! Static vocabulary folders: model2vec / potion (`config.json` `model_type`
//! `model2vec`) and sentence-transformers `StaticEmbedding` folders, read
//! into a model file for [`crate::model::static_vocab`].
//!
//! The folder, as model2vec 0.10 writes it: `config.json` (`normalize`,
//! `max_length`), `model.safetensors` with `embeddings` `[rows x dim]`
//! (float32, float16 or bfloat16) and, vocabulary-quantized, `mapping`
//! (int32 or int64, token id -> row) and `weights` (one float per token
//! id), `tokenizer.json`, and for sentence-transformers a `modules.json`
//! (`StaticEmbedding` at `.`, then `Normalize`).

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use serde_json::Value;

use super::encoder::{now_iso8601, read_json, read_json_opt, HfOptions};
use crate::error::{Error, ErrorKind, Result};
use crate::formats::{Backing, FormatKind, ModelFile, TensorEntry};
use crate::model::static_vocab::{
    Behaviour, ARCHITECTURE, KEY_BEHAVIOUR, KEY_MAX_LENGTH, KEY_TOKENIZER_MAX_LENGTH, TABLE,
};
use crate::tokenizer::vocab::Vocab;

/// Whether the folder at `dir` (its `config.json` read as `cfg`, its
/// `modules.json` as `modules`) is a static vocabulary model.
pub fn is_static(cfg: &Value, modules: Option<&Value>) -> bool {
    cfg.get("model_type").and_then(Value::as_str) == Some("model2vec")
        || modules
            .and_then(Value::as_array)
            .and_then(|l| l.first())
            .and_then(|m| m.get("type"))
            .and_then(Value::as_str)
            .is_some_and(|t| t.ends_with("StaticEmbedding"))
}

/// Reads the static vocabulary folder `dir`.
///
/// # Errors
/// I/O and JSON errors naming the file; what is not supported (a tokenizer
/// other than WordPiece, a `StaticEmbedding` module folder elsewhere than
/// `.`, a table narrower than the vocabulary), named.
pub fn read_dir(dir: &Path, cfg: &Value, opts: &HfOptions) -> Result<ModelFile> {
    let modules = read_json_opt(&dir.join("modules.json"))?;
    let list = modules.as_ref().and_then(Value::as_array);
    if let Some(first) = list.and_then(|l| l.first()) {
        let path = first.get("path").and_then(Value::as_str).unwrap_or(".");
        if !matches!(path, "." | "" | "./") {
            return Err(Error::unsupported(format!(
                "modules.json: a StaticEmbedding module in '{path}' is not supported (at '.' only, as model2vec writes it)"
            )));
        }
    }
    let st_normalize = list.is_some_and(|l| {
        l.iter().any(|m| {
            m.get("type")
                .and_then(Value::as_str)
                .is_some_and(|t| t.ends_with("Normalize"))
        })
    });
    if let Some(l) = list {
        for m in l.iter().skip(1) {
            let ty = m.get("type").and_then(Value::as_str).unwrap_or("");
            if !ty.ends_with("Normalize") {
                return Err(Error::unsupported(format!(
                    "modules.json: module '{ty}' after a StaticEmbedding is not supported (Normalize only)"
                )));
            }
        }
    }
    let behaviour = match opts.static_behaviour {
        Some(b) => b,
        None if modules.is_some() => Behaviour::SentenceTransformers,
        None => Behaviour::Model2Vec,
    };
    let normalize = match behaviour {
        Behaviour::SentenceTransformers => st_normalize,
        Behaviour::Model2Vec => cfg
            .get("normalize")
            .and_then(Value::as_bool)
            .unwrap_or(true),
    };

    // The tokenizer: WordPiece from `tokenizer.json` (the BERT normalizer's
    // options).
    let tj_path = dir.join("tokenizer.json");
    let tj = read_json(&tj_path)?;
    let model_type = tj
        .get("model")
        .and_then(|m| m.get("type"))
        .and_then(Value::as_str)
        .unwrap_or("");
    if model_type != "WordPiece" {
        return Err(Error::unsupported(format!(
            "{}: a static model with a '{model_type}' tokenizer is not supported (WordPiece only)",
            tj_path.display()
        )));
    }
    let norm = tj.get("normalizer").filter(|n| !n.is_null());
    if let Some(ty) = norm.and_then(|n| n.get("type")).and_then(Value::as_str) {
        if ty != "BertNormalizer" {
            return Err(Error::unsupported(format!(
                "{}: normalizer '{ty}' is not supported (BertNormalizer only)",
                tj_path.display()
            )));
        }
    }
    let nflag = |k: &str| norm.and_then(|n| n.get(k)).and_then(Value::as_bool);
    let lowercase = nflag("lowercase").unwrap_or(true);
    let chinese = nflag("handle_chinese_chars").unwrap_or(true);
    let strip_accents = nflag("strip_accents");
    let tokens = super::encoder::read_vocab(dir)?;
    let tok_cfg = read_json_opt(&dir.join("tokenizer_config.json"))?;
    let specials = super::encoder::special_ids(
        &tokens,
        tok_cfg.as_ref(),
        &crate::model::arch::bert::FAMILY.special_tokens,
    )?;
    let vocab = Vocab::new(tokens, specials)?;

    // The table: one row per id (a quantized folder's rows folded).
    let st_path = dir.join("model.safetensors");
    if !st_path.is_file() {
        return Err(Error::new(
            ErrorKind::NotFound,
            format!("{}: missing", st_path.display()),
        ));
    }
    let backing = Arc::new(Backing::map(&st_path)?);
    let st = safetensors::SafeTensors::deserialize(backing.bytes())
        .map_err(|e| Error::model(format!("{}: {e}", st_path.display())))?;
    let what = |n: &str| format!("{}: '{n}'", st_path.display());
    let emb = st
        .tensor("embeddings")
        .or_else(|_| st.tensor("embedding.weight"))
        .map_err(|_| Error::model(format!("{}: no 'embeddings' tensor", st_path.display())))?;
    let (rows, dim) = match emb.shape() {
        [r, d] if *r > 0 && *d > 0 => (*r, *d),
        s => {
            return Err(Error::model(format!(
                "{} has shape {s:?}, not [rows, dim]",
                what("embeddings")
            )))
        }
    };
    let table = super::encoder::view_f32(&emb, 0..rows * dim, &what("embeddings"))?;
    let n = vocab.len();
    let mapping: Option<Vec<usize>> = match st.tensor("mapping") {
        Err(_) => None,
        Ok(m) => {
            if m.shape() != [n] {
                return Err(Error::model(format!(
                    "{} has shape {:?}, not [{n}] (one row per token id)",
                    what("mapping"),
                    m.shape()
                )));
            }
            let d = m.data();
            let ids: Vec<i64> = match m.dtype() {
                safetensors::Dtype::I32 => d
                    .chunks_exact(4)
                    .map(|b| i64::from(i32::from_le_bytes([b[0], b[1], b[2], b[3]])))
                    .collect(),
                safetensors::Dtype::I64 => d
                    .chunks_exact(8)
                    .map(|b| i64::from_le_bytes(b.try_into().unwrap_or([0; 8])))
                    .collect(),
                other => {
                    return Err(Error::unsupported(format!(
                        "{} has dtype {other:?} (I32 or I64 only)",
                        what("mapping")
                    )))
                }
            };
            Some(
                ids.into_iter()
                    .enumerate()
                    .map(|(i, r)| {
                        usize::try_from(r)
                            .ok()
                            .filter(|&r| r < rows)
                            .ok_or_else(|| {
                                Error::model(format!(
                                    "{}: id {i} maps to row {r}, outside the {rows} rows",
                                    what("mapping")
                                ))
                            })
                    })
                    .collect::<Result<_>>()?,
            )
        }
    };
    let weights = match st.tensor("weights") {
        Err(_) => None,
        Ok(w) => {
            if w.shape() != [n] {
                return Err(Error::model(format!(
                    "{} has shape {:?}, not [{n}] (one weight per token id)",
                    what("weights"),
                    w.shape()
                )));
            }
            Some(super::encoder::view_f32(&w, 0..n, &what("weights"))?)
        }
    };
    if mapping.is_none() && rows < n {
        return Err(Error::model(format!(
            "{} has {rows} rows, fewer than the tokenizer's {n} ids",
            what("embeddings")
        )));
    }
    let mut folded = Vec::with_capacity(n * dim);
    for id in 0..n {
        let r = mapping.as_ref().map_or(id, |m| m[id]);
        let row = &table[r * dim..(r + 1) * dim];
        match &weights {
            Some(w) => folded.extend(row.iter().map(|&x| x * w[id])),
            None => folded.extend_from_slice(row),
        }
    }
    let tensors = vec![TensorEntry::owned_f32(TABLE, vec![n, dim], &folded)];

    let mut md = BTreeMap::new();
    let mut put = |k: &str, v: String| {
        md.insert(k.to_string(), v);
    };
    put(
        "model_name",
        opts.name
            .clone()
            .unwrap_or_else(|| super::encoder::default_name(dir)),
    );
    put(
        "model_version",
        opts.version.clone().unwrap_or_else(|| "1.0.0".to_string()),
    );
    put("architecture", ARCHITECTURE.to_string());
    put(KEY_BEHAVIOUR, behaviour.name().to_string());
    put("embedding_dim", dim.to_string());
    put("vocab_size", n.to_string());
    // The container's required shape keys: no transformer.
    put("hidden_size", dim.to_string());
    for k in [
        "num_layers",
        "num_attention_heads",
        "intermediate_size",
        "max_position_emb",
    ] {
        put(k, "0".to_string());
    }
    put("normalize", normalize.to_string());
    put("created_at", now_iso8601());
    if let Some(m) = cfg.get("max_length").and_then(Value::as_u64) {
        put(KEY_MAX_LENGTH, m.to_string());
    }
    if let Some(m) = tj
        .get("truncation")
        .and_then(|t| t.get("max_length"))
        .and_then(Value::as_u64)
    {
        put(KEY_TOKENIZER_MAX_LENGTH, m.to_string());
    }
    put("do_lower_case", lowercase.to_string());
    put("tokenize_chinese_chars", chinese.to_string());
    if let Some(s) = strip_accents {
        put("strip_accents", s.to_string());
    }
    let mut file = ModelFile::new(FormatKind::HfSafetensors, backing, md, Some(vocab), tensors)?;
    file.details
        .push(("source".to_string(), dir.display().to_string()));
    Ok(file)
}
