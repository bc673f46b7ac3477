//! The output heads of a sentence-transformers / HF folder beyond the pooled
//! vector ([`crate::model::outputs`]):
//!
//! - SPLADE (`SparseEncoder`): a `SpladePooling` module (`MLMTransformer` in
//!   older folders) over `BertForMaskedLM` / `RobertaForMaskedLM`, whose
//!   MLM head (`cls.predictions.*` / `lm_head.*` / DistilBERT's `vocab_*`)
//!   becomes `mlm.*`;
//! - an inference-free SPLADE: a `Router` whose query route is a
//!   `SparseStaticEmbedding` (`sparse_query.weight`) and whose document route
//!   is the SPLADE above ([`layout`] finds the transformer's folder);
//! - BGE-M3: `sparse_linear.pt` and `colbert_linear.pt` beside the weights,
//!   read by the restricted `torch.save` reader ([`crate::formats::torch_pt`])
//!   into `lexical.*` and `multi_vector.*`;
//! - ColBERT: PyLate's `Dense` module (`1_Dense/`, `linear.weight`) or the
//!   Stanford-NLP layout (`linear.weight` in the model, `artifact.metadata`),
//!   with the markers, lengths and skip-list of
//!   `config_sentence_transformers.json` (or `artifact.metadata`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::encoder::{module_dir, read_json, read_json_opt, view_f32};
use crate::error::{Error, Result};
use crate::formats::torch_pt;
use crate::formats::TensorEntry;
use crate::model::multi_vector as mv;
use crate::model::outputs::{OutputKind, OUTPUTS};
use crate::model::sparse;
use crate::tokenizer::vocab::Vocab;

/// Where a folder's parts are: the transformer's folder, the folder
/// `modules.json` paths start from, the module list, and a Router's query
/// route.
pub(super) struct Layout {
    /// `config.json`, the tokenizer and the weights.
    pub dir: PathBuf,
    /// Module paths start here (and `config_sentence_transformers.json` is
    /// here).
    pub root: PathBuf,
    /// The modules that run on documents (a Router's document route).
    pub modules: Option<Value>,
    /// A Router's `SparseStaticEmbedding` folder (the query route).
    pub static_query: Option<PathBuf>,
}

fn type_of(m: &Value) -> &str {
    m.get("type").and_then(Value::as_str).unwrap_or("")
}

/// The parts of folder `root` (see [`Layout`]).
///
/// # Errors
/// A Router whose routes are not one `SparseStaticEmbedding` for queries and
/// a transformer (+ `SpladePooling`) for documents, named.
pub(super) fn layout(root: &Path) -> Result<Layout> {
    let modules = read_json_opt(&root.join("modules.json"))?;
    let router = modules
        .as_ref()
        .and_then(Value::as_array)
        .and_then(|l| l.iter().find(|m| type_of(m).ends_with(".Router")));
    if router.is_none() {
        return Ok(Layout {
            dir: root.to_path_buf(),
            root: root.to_path_buf(),
            modules,
            static_query: None,
        });
    }
    let cfg = read_json(&root.join("router_config.json"))?;
    let bad = |why: String| Error::unsupported(format!("router_config.json: {why}"));
    let types = cfg.get("types").and_then(Value::as_object);
    let route = |name: &str| -> Result<Vec<(String, String)>> {
        let list = cfg
            .get("structure")
            .and_then(|s| s.get(name))
            .and_then(Value::as_array)
            .ok_or_else(|| bad(format!("no '{name}' route")))?;
        list.iter()
            .map(|m| {
                let m = m
                    .as_str()
                    .ok_or_else(|| bad(format!("a module of route '{name}' is not a name")))?;
                let ty = types
                    .and_then(|t| t.get(m))
                    .and_then(Value::as_str)
                    .unwrap_or("");
                Ok((m.to_string(), ty.to_string()))
            })
            .collect()
    };
    let query = route("query")?;
    let document = route("document")?;
    let default = cfg
        .get("parameters")
        .and_then(|p| p.get("default_route"))
        .and_then(Value::as_str)
        .unwrap_or("document");
    if default != "document" {
        return Err(bad(format!(
            "default_route '{default}' is not supported (document only)"
        )));
    }
    let static_query = match query.as_slice() {
        [(m, ty)] if ty.ends_with("SparseStaticEmbedding") => module_dir(root, m)?,
        _ => {
            return Err(bad(format!(
                "the query route {:?} is not one SparseStaticEmbedding",
                query.iter().map(|(m, _)| m.as_str()).collect::<Vec<_>>()
            )))
        }
    };
    let Some((tdir, _)) = document.iter().find(|(_, ty)| ty.ends_with("Transformer")) else {
        return Err(bad("the document route has no Transformer".to_string()));
    };
    let list: Vec<Value> = document
        .iter()
        .map(|(m, ty)| serde_json::json!({"path": m, "type": ty}))
        .collect();
    Ok(Layout {
        dir: module_dir(root, tdir)?,
        root: root.to_path_buf(),
        modules: Some(Value::Array(list)),
        static_query: Some(static_query),
    })
}

/// Whether a `modules.json` type is one this module reads.
pub(super) fn is_output_module(ty: &str) -> bool {
    ty.ends_with("SpladePooling") || ty.ends_with(".Router") || is_pylate_dense(ty)
}

fn is_pylate_dense(ty: &str) -> bool {
    ty.starts_with("pylate.") && ty.ends_with(".Dense")
}

/// What the importer needs to know of the folder besides its heads.
pub(super) struct Inputs<'a> {
    pub layout: &'a Layout,
    /// `config.json`.
    pub cfg: &'a Value,
    /// The model's safetensors bytes.
    pub weights: &'a [u8],
    pub vocab: &'a Vocab,
    pub hidden: usize,
}

/// Reads the folder's output heads into `tensors` and `md`; returns the
/// outputs it has (`None`: dense only, nothing added).
///
/// # Errors
/// A head's file or tensor missing, misshapen or unreadable, named.
pub(super) fn read_heads(
    x: &Inputs<'_>,
    tensors: &mut Vec<TensorEntry>,
    md: &mut BTreeMap<String, String>,
) -> Result<Option<Vec<OutputKind>>> {
    let modules: Vec<(String, PathBuf)> = x
        .layout
        .modules
        .as_ref()
        .and_then(Value::as_array)
        .map(|l| {
            l.iter()
                .map(|m| {
                    let p = m.get("path").and_then(Value::as_str).unwrap_or("");
                    Ok((type_of(m).to_string(), module_dir(&x.layout.root, p)?))
                })
                .collect::<Result<_>>()
        })
        .transpose()?
        .unwrap_or_default();
    let mut kinds = Vec::new();
    if let Some((_, dir)) = modules.iter().find(|(t, _)| t.ends_with("SpladePooling")) {
        splade(x, dir, tensors, md)?;
        kinds.push(OutputKind::Sparse);
    }
    if let Some(q) = &x.layout.static_query {
        static_query(q, x.vocab.len(), tensors, md)?;
    }
    let dir = &x.layout.dir;
    let (sl, cl) = (dir.join("sparse_linear.pt"), dir.join("colbert_linear.pt"));
    if sl.is_file() || cl.is_file() {
        // BGE-M3: the dense vector, the lexical weights, the ColBERT vectors.
        kinds.push(OutputKind::Dense);
        if sl.is_file() {
            let (w, b) = linear_pt(&sl, x.hidden)?;
            if w.len() != x.hidden {
                return Err(Error::model(format!(
                    "{}: weight is [{} x {}], expected [1 x {}]",
                    sl.display(),
                    w.len() / x.hidden,
                    x.hidden,
                    x.hidden
                )));
            }
            tensors.push(TensorEntry::owned_f32(
                "lexical.weight",
                vec![1, x.hidden],
                &w,
            ));
            tensors.push(TensorEntry::owned_f32(
                "lexical.bias",
                vec![1],
                &b.unwrap_or(vec![0.0]),
            ));
            md.insert(sparse::SPARSE_HEAD.into(), "lexical".into());
            kinds.push(OutputKind::Sparse);
        }
        if cl.is_file() {
            let (w, b) = linear_pt(&cl, x.hidden)?;
            let d = w.len() / x.hidden;
            tensors.push(TensorEntry::owned_f32(
                "multi_vector.weight",
                vec![d, x.hidden],
                &w,
            ));
            if let Some(b) = b {
                tensors.push(TensorEntry::owned_f32("multi_vector.bias", vec![d], &b));
            }
            md.insert(mv::MV_SKIP_FIRST.into(), "true".into());
            md.insert(mv::MV_NORMALIZE.into(), "true".into());
            kinds.push(OutputKind::MultiVector);
        }
    } else if let Some(dense_dir) = colbert_dense(x, &modules)? {
        colbert(x, dense_dir.as_deref(), tensors, md)?;
        kinds.push(OutputKind::MultiVector);
    }
    if kinds.is_empty() {
        return Ok(None);
    }
    kinds.sort();
    kinds.dedup();
    md.insert(
        OUTPUTS.into(),
        kinds.iter().map(|k| k.name()).collect::<Vec<_>>().join(" "),
    );
    Ok(Some(kinds))
}

/// The MLM head and the `SpladePooling` settings.
fn splade(
    x: &Inputs<'_>,
    pool_dir: &Path,
    tensors: &mut Vec<TensorEntry>,
    md: &mut BTreeMap<String, String>,
) -> Result<()> {
    let cfg = read_json(&pool_dir.join("config.json"))?;
    let s = |k: &str, d: &str| cfg.get(k).and_then(Value::as_str).unwrap_or(d).to_string();
    let pooling = s("pooling_strategy", "max");
    let act = s("activation_function", "relu");
    if !matches!(pooling.as_str(), "max" | "sum") || !matches!(act.as_str(), "relu" | "log1p_relu")
    {
        return Err(Error::unsupported(format!(
            "{}: SpladePooling pooling_strategy '{pooling}' / activation_function '{act}' \
             is not supported (max or sum; relu or log1p_relu)",
            pool_dir.display()
        )));
    }
    md.insert(sparse::SPARSE_HEAD.into(), "splade".into());
    md.insert(sparse::SPLADE_POOLING.into(), pooling);
    md.insert(sparse::SPLADE_ACTIVATION.into(), act);
    let mlm_act = match x
        .cfg
        .get("hidden_act")
        .and_then(Value::as_str)
        .unwrap_or("gelu")
    {
        "gelu" => "gelu",
        "gelu_new" | "gelu_pytorch_tanh" => "gelu_tanh",
        o => {
            return Err(Error::unsupported(format!(
                "config.json: the MLM head's hidden_act '{o}' is not supported (gelu, gelu_new)"
            )))
        }
    };
    md.insert(sparse::MLM_ACT.into(), mlm_act.into());
    if let Some(k) = read_json_opt(&x.layout.root.join("config_sentence_transformers.json"))?
        .and_then(|c| c.get("max_active_dims").and_then(Value::as_u64))
    {
        md.insert(sparse::SPARSE_TOP_K.into(), k.to_string());
    }
    let st = safetensors::SafeTensors::deserialize(x.weights)
        .map_err(|e| Error::model(format!("model.safetensors: {e}")))?;
    fn pick<'n>(st: &safetensors::SafeTensors<'_>, names: &[&'n str]) -> Option<&'n str> {
        names.iter().find(|n| st.tensor(n).is_ok()).copied()
    }
    let h = x.hidden;
    let v = x.vocab.len();
    let heads: [(&str, &[&str], Vec<usize>); 6] = [
        (
            "mlm.transform.weight",
            &[
                "cls.predictions.transform.dense.weight",
                "lm_head.dense.weight",
                "vocab_transform.weight",
            ],
            vec![h, h],
        ),
        (
            "mlm.transform.bias",
            &[
                "cls.predictions.transform.dense.bias",
                "lm_head.dense.bias",
                "vocab_transform.bias",
            ],
            vec![h],
        ),
        (
            "mlm.norm.weight",
            &[
                "cls.predictions.transform.LayerNorm.weight",
                "cls.predictions.transform.LayerNorm.gamma",
                "lm_head.layer_norm.weight",
                "vocab_layer_norm.weight",
            ],
            vec![h],
        ),
        (
            "mlm.norm.bias",
            &[
                "cls.predictions.transform.LayerNorm.bias",
                "cls.predictions.transform.LayerNorm.beta",
                "lm_head.layer_norm.bias",
                "vocab_layer_norm.bias",
            ],
            vec![h],
        ),
        (
            "mlm.decoder.bias",
            &[
                "cls.predictions.bias",
                "cls.predictions.decoder.bias",
                "lm_head.bias",
                "lm_head.decoder.bias",
                "vocab_projector.bias",
            ],
            vec![v],
        ),
        (
            "mlm.decoder.weight",
            &[
                "cls.predictions.decoder.weight",
                "lm_head.decoder.weight",
                "vocab_projector.weight",
            ],
            vec![v, h],
        ),
    ];
    let tied = x
        .cfg
        .get("tie_word_embeddings")
        .and_then(Value::as_bool)
        .unwrap_or(true);
    for (ours, theirs, shape) in heads {
        let decoder_w = ours == "mlm.decoder.weight";
        if decoder_w && tied {
            // The decoder is the word-embedding table.
            continue;
        }
        let Some(name) = pick(&st, theirs) else {
            return Err(Error::model(format!(
                "model.safetensors: the MLM head's tensor '{}' is missing (a SPLADE model needs \
                 the masked-LM head)",
                theirs[0]
            )));
        };
        let view = st
            .tensor(name)
            .map_err(|e| Error::model(format!("model.safetensors: '{name}': {e}")))?;
        let n: usize = shape.iter().product();
        // Rows past the tokenizer's ids (padded vocabularies) are dropped.
        let have: usize = view.shape().iter().product();
        let fits = if decoder_w || ours == "mlm.decoder.bias" {
            view.shape().first().is_some_and(|&r| r >= shape[0]) && view.shape()[1..] == shape[1..]
        } else {
            view.shape() == shape.as_slice()
        };
        if !fits || have < n {
            return Err(Error::model(format!(
                "model.safetensors: '{name}' has shape {:?}, expected {shape:?}",
                view.shape()
            )));
        }
        let vals = view_f32(&view, 0..n, &format!("'{name}'"))?;
        tensors.push(TensorEntry::owned_f32(ours, shape, &vals));
    }
    Ok(())
}

/// An inference-free model's query weights.
fn static_query(
    dir: &Path,
    vocab: usize,
    tensors: &mut Vec<TensorEntry>,
    md: &mut BTreeMap<String, String>,
) -> Result<()> {
    let path = dir.join("model.safetensors");
    let bytes = std::fs::read(&path).map_err(|e| {
        Error::new(
            crate::error::ErrorKind::NotFound,
            format!("{}: {e}", path.display()),
        )
    })?;
    let st = safetensors::SafeTensors::deserialize(&bytes)
        .map_err(|e| Error::model(format!("{}: {e}", path.display())))?;
    let view = st
        .tensor("weight")
        .map_err(|_| Error::model(format!("{}: no tensor 'weight'", path.display())))?;
    if view.shape().len() != 1 || view.shape()[0] < vocab {
        return Err(Error::model(format!(
            "{}: 'weight' has shape {:?}, expected [{vocab}]",
            path.display(),
            view.shape()
        )));
    }
    let w = view_f32(&view, 0..vocab, "the static query weights")?;
    tensors.push(TensorEntry::owned_f32(
        "sparse_query.weight",
        vec![vocab],
        &w,
    ));
    md.insert(sparse::SPARSE_QUERY.into(), "static".into());
    Ok(())
}

/// A `torch.save`d `nn.Linear` state dict (`weight` `[out x hidden]`,
/// optional `bias`): the weight and bias as f32.
fn linear_pt(path: &Path, hidden: usize) -> Result<(Vec<f32>, Option<Vec<f32>>)> {
    let what = path.display().to_string();
    let ts = torch_pt::read_state_dict_path(path)
        .map_err(|e| Error::new(e.kind(), format!("{what}: {}", e.message())))?;
    let get = |n: &str| ts.iter().find(|t| t.name == n);
    let w = get("weight").ok_or_else(|| Error::model(format!("{what}: no tensor 'weight'")))?;
    if w.shape.len() != 2 || w.shape[1] != hidden || w.shape[0] == 0 {
        return Err(Error::model(format!(
            "{what}: 'weight' has shape {:?}, expected [out x {hidden}]",
            w.shape
        )));
    }
    let b = match get("bias") {
        None => None,
        Some(b) if b.shape == [w.shape[0]] => Some(b.to_f32()),
        Some(b) => {
            return Err(Error::model(format!(
                "{what}: 'bias' has shape {:?}, expected [{}]",
                b.shape, w.shape[0]
            )))
        }
    };
    if let Some(o) = ts.iter().find(|t| t.name != "weight" && t.name != "bias") {
        return Err(Error::model(format!(
            "{what}: unexpected tensor '{}' (a Linear has weight and bias)",
            o.name
        )));
    }
    Ok((w.to_f32(), b))
}

/// A ColBERT folder's projection: `Some(Some(dir))` for PyLate's `Dense`
/// module folder, `Some(None)` for the Stanford-NLP layout, `None` when the
/// folder is no ColBERT.
fn colbert_dense(x: &Inputs<'_>, modules: &[(String, PathBuf)]) -> Result<Option<Option<PathBuf>>> {
    if let Some((_, d)) = modules.iter().find(|(t, _)| is_pylate_dense(t)) {
        return Ok(Some(Some(d.clone())));
    }
    let stanford = x
        .cfg
        .get("architectures")
        .and_then(Value::as_array)
        .is_some_and(|a| a.iter().any(|v| v.as_str() == Some("HF_ColBERT")));
    Ok(stanford.then_some(None))
}

/// ColBERT's projection and framing.
fn colbert(
    x: &Inputs<'_>,
    dense_dir: Option<&Path>,
    tensors: &mut Vec<TensorEntry>,
    md: &mut BTreeMap<String, String>,
) -> Result<()> {
    let h = x.hidden;
    let (path, bytes);
    let src: &[u8] = match dense_dir {
        Some(d) => {
            if let Some(c) = read_json_opt(&d.join("config.json"))? {
                let bias = c.get("bias").and_then(Value::as_bool).unwrap_or(false);
                let act = c
                    .get("activation_function")
                    .and_then(Value::as_str)
                    .unwrap_or("torch.nn.modules.linear.Identity");
                if bias || !act.ends_with("Identity") {
                    return Err(Error::unsupported(format!(
                        "{}: a ColBERT projection with a bias or activation '{act}' is not supported",
                        d.display()
                    )));
                }
            }
            path = d.join("model.safetensors");
            bytes = std::fs::read(&path).map_err(|e| {
                Error::new(
                    crate::error::ErrorKind::NotFound,
                    format!("{}: {e} (PyLate's Dense module weights)", path.display()),
                )
            })?;
            &bytes
        }
        None => {
            path = x.layout.dir.join("model.safetensors");
            x.weights
        }
    };
    let st = safetensors::SafeTensors::deserialize(src)
        .map_err(|e| Error::model(format!("{}: {e}", path.display())))?;
    let view = st
        .tensor("linear.weight")
        .map_err(|_| Error::model(format!("{}: no tensor 'linear.weight'", path.display())))?;
    let shape = view.shape().to_vec();
    if shape.len() != 2 || shape[1] != h || shape[0] == 0 {
        return Err(Error::model(format!(
            "{}: 'linear.weight' has shape {shape:?}, expected [dim x {h}]",
            path.display()
        )));
    }
    let w = view_f32(&view, 0..shape[0] * h, "'linear.weight'")?;
    tensors.retain(|t| t.name != "linear.weight");
    tensors.push(TensorEntry::owned_f32("multi_vector.weight", shape, &w));
    md.insert(mv::MV_NORMALIZE.into(), "true".into());

    // The framing: PyLate's config, else Stanford-NLP's artifact.metadata.
    let st_cfg = read_json_opt(&x.layout.root.join("config_sentence_transformers.json"))?;
    let art = read_json_opt(&x.layout.dir.join("artifact.metadata"))?;
    let get = |pylate: &str, stanford: &str| -> Option<Value> {
        st_cfg
            .as_ref()
            .and_then(|c| c.get(pylate))
            .or_else(|| art.as_ref().and_then(|a| a.get(stanford)))
            .cloned()
    };
    let token_id = |key: &str, v: Option<Value>, default: &str| -> Result<u32> {
        let t = v
            .as_ref()
            .and_then(Value::as_str)
            .unwrap_or(default)
            .to_string();
        x.vocab.id(&t).ok_or_else(|| {
            Error::model(format!(
                "ColBERT {key} '{t}' is not a token of the vocabulary"
            ))
        })
    };
    let q = token_id(
        "query prefix",
        get("query_prefix", "query_token_id"),
        "[unused0]",
    )?;
    let d = token_id(
        "document prefix",
        get("document_prefix", "doc_token_id"),
        "[unused1]",
    )?;
    let len = |v: Option<Value>, default: u64| v.and_then(|v| v.as_u64()).unwrap_or(default);
    let ql = len(get("query_length", "query_maxlen"), 32);
    let dl = len(get("document_length", "doc_maxlen"), 180);
    let attend = get("attend_to_expansion_tokens", "attend_to_mask_tokens")
        .and_then(|v| v.as_bool())
        .unwrap_or(false);
    let words: Vec<String> = match st_cfg.as_ref().and_then(|c| c.get("skiplist_words")) {
        Some(Value::Array(a)) => a
            .iter()
            .filter_map(Value::as_str)
            .map(str::to_string)
            .collect(),
        _ if art
            .as_ref()
            .and_then(|a| a.get("mask_punctuation"))
            .and_then(Value::as_bool)
            .unwrap_or(true) =>
        {
            "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~"
                .chars()
                .map(|c| c.to_string())
                .collect()
        }
        _ => Vec::new(),
    };
    let skip: Vec<String> = words
        .iter()
        .filter_map(|w| x.vocab.id(w))
        .map(|i| i.to_string())
        .collect();
    md.insert(mv::COLBERT_QUERY_PREFIX.into(), q.to_string());
    md.insert(mv::COLBERT_DOCUMENT_PREFIX.into(), d.to_string());
    md.insert(mv::COLBERT_QUERY_LENGTH.into(), ql.to_string());
    md.insert(mv::COLBERT_DOCUMENT_LENGTH.into(), dl.to_string());
    md.insert(mv::COLBERT_ATTEND_EXPANSION.into(), attend.to_string());
    md.insert(mv::COLBERT_SKIPLIST.into(), skip.join(" "));
    md.insert(mv::COLBERT_MASK.into(), x.vocab.specials().mask.to_string());
    Ok(())
}
