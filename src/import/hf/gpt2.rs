//! The HuggingFace GPT-2 import: a `config.json` + `model.safetensors` folder
//! into a [`ModelFile`] in LWT's layout ([`crate::formats::lwt`]).

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use serde_json::Value;

use crate::error::{Error, ErrorKind, Result};
use crate::formats::lwt::{Gpt2Config, CONV1D};
use crate::formats::{Backing, DType, FormatKind, ModelFile, TensorEntry};

fn transpose(v: &[f32], rows: usize, cols: usize) -> Vec<f32> {
    let mut out = vec![0f32; v.len()];
    for r in 0..rows {
        for c in 0..cols {
            out[c * rows + r] = v[r * cols + c];
        }
    }
    out
}

/// Imports a HuggingFace GPT-2 folder (`config.json` + `model.safetensors`)
/// into a [`ModelFile`] with `transformer.` names, Conv1D weights transposed to
/// `[out, in]`, mask buffers and the tied `lm_head` dropped, and the parameter
/// count checked against the count computed from the config.
pub fn import_gpt2_dir(dir: &Path) -> Result<ModelFile> {
    let cpath = dir.join("config.json");
    let text = std::fs::read_to_string(&cpath).map_err(|e| Error::io(cpath.display(), e))?;
    let cfg_json: Value = serde_json::from_str(&text)
        .map_err(|e| Error::model(format!("{}: invalid JSON: {e}", cpath.display())))?;
    if let Some(t) = cfg_json.get("model_type").and_then(Value::as_str) {
        if t != "gpt2" {
            return Err(Error::unsupported(format!(
                "{}: model_type '{t}' is not gpt2",
                cpath.display()
            )));
        }
    }
    let cfg = Gpt2Config::from_json(&cfg_json, "config.json")?;
    let spath = dir.join("model.safetensors");
    let backing = Arc::new(Backing::map(&spath)?);
    let st = safetensors::SafeTensors::deserialize(backing.bytes()).map_err(|e| {
        Error::new(
            ErrorKind::Format,
            format!("{}: invalid safetensors file: {e}", spath.display()),
        )
    })?;
    let expected = cfg.expected();
    let mut want: BTreeMap<String, Vec<usize>> = expected.iter().cloned().collect();
    let mut got: BTreeMap<String, TensorEntry> = BTreeMap::new();
    let mut lm_head = None;
    let mut wte = None;
    for raw in st.names() {
        let name = raw.strip_prefix("transformer.").unwrap_or(raw);
        if name.ends_with("attn.bias") && !name.ends_with("c_attn.bias")
            || name.ends_with("attn.masked_bias")
        {
            continue;
        }
        let view = st
            .tensor(raw)
            .map_err(|e| Error::model(format!("tensor '{raw}': {e}")))?;
        let dtype = match view.dtype() {
            safetensors::Dtype::F32 => DType::F32,
            safetensors::Dtype::F16 => DType::F16,
            safetensors::Dtype::BF16 => DType::BF16,
            other => {
                return Err(Error::unsupported(format!(
                    "tensor '{raw}' has dtype {other:?} (F32, F16, BF16)"
                )))
            }
        };
        let values = crate::formats::convert_to_f32(dtype, view.data());
        if name == "lm_head.weight" {
            lm_head = Some(values);
            continue;
        }
        let full = format!("transformer.{name}");
        let Some(shape) = want.remove(&full) else {
            return Err(Error::model(format!(
                "unexpected tensor '{raw}' for a GPT-2 with {} layers",
                cfg.n_layer
            )));
        };
        let src_shape = view.shape().to_vec();
        let conv = CONV1D.iter().any(|c| full.ends_with(c));
        let entry = if conv {
            // HF Conv1D is [in, out]; store [out, in].
            if src_shape != [shape[1], shape[0]] {
                return Err(Error::model(format!(
                    "tensor '{raw}' has shape {src_shape:?}, expected {:?} (Conv1D [in, out])",
                    [shape[1], shape[0]]
                )));
            }
            TensorEntry::owned_f32(
                &full,
                shape,
                &transpose(&values, src_shape[0], src_shape[1]),
            )
        } else {
            if src_shape != shape {
                return Err(Error::model(format!(
                    "tensor '{raw}' has shape {src_shape:?}, expected {shape:?}"
                )));
            }
            let e = TensorEntry::owned_f32(&full, shape, &values);
            if full == "transformer.wte.weight" {
                wte = Some(values);
            }
            e
        };
        got.insert(full, entry);
    }
    if let Some(missing) = want.keys().next() {
        return Err(Error::model(format!(
            "missing tensor '{missing}' ({} missing in all)",
            want.len()
        )));
    }
    if let Some(lm) = lm_head {
        if Some(&lm) != wte.as_ref() {
            return Err(Error::unsupported(
                "lm_head.weight differs from wte (untied heads cannot be stored in LWT)",
            ));
        }
    }
    let tensors: Vec<TensorEntry> = expected.iter().filter_map(|(n, _)| got.remove(n)).collect();
    let params: u64 = tensors.iter().map(|t| t.numel() as u64).sum();
    let computed = cfg
        .param_count()
        .ok_or_else(|| Error::model("parameter count overflows"))?;
    if params != computed {
        return Err(Error::model(format!(
            "parameter count {params} differs from {computed} computed from config.json"
        )));
    }
    let mut md = cfg.metadata();
    md.insert("parameter_count".to_string(), params.to_string());
    if let Some(n) = dir.file_name() {
        md.insert("model_name".to_string(), n.to_string_lossy().into_owned());
    }
    ModelFile::new(
        FormatKind::HfSafetensors,
        Arc::new(Backing::from_bytes(&[])),
        md,
        None,
        tensors,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transpose_small() {
        assert_eq!(
            transpose(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], 2, 3),
            vec![1.0, 4.0, 2.0, 5.0, 3.0, 6.0]
        );
    }
}
