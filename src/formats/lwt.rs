//! LightwatchAI2 `.lwt` (magic `LWATCHV1`), as resolved in `docs/formats/lwt.md`.
//! The HuggingFace GPT-2 import that produces its models is
//! [`crate::import::hf::gpt2`].
//!
//! Layout: magic, `u64` JSON length, JSON header, `tensor_count` 216-byte index
//! entries, zero padding to 64, the f32 data section (each tensor 64-aligned),
//! and a CRC32 trailer over the data section. Tensors are zero-copy views of
//! the mapped file.

use std::collections::{BTreeMap, HashSet};
use std::io::Write;
use std::path::Path;
use std::sync::Arc;

use serde_json::{json, Value};

use super::bytes::{self, Cursor};
use super::{Backing, DType, FormatKind, ModelFile, ReadOptions, TensorData, TensorEntry};
use crate::error::{Error, ErrorKind, Result};
use crate::tokenizer::vocab::Vocab;

/// The file magic.
pub const MAGIC: &[u8; 8] = b"LWATCHV1";
/// Size of one index entry (natural alignment of the seed's struct).
pub const ENTRY_LEN: usize = 216;
/// Alignment of the data section and of every tensor.
pub const ALIGN: usize = 64;
/// Largest accepted JSON header.
pub const MAX_JSON: u64 = 64 << 20;

/// The Conv1D weights stored transposed (`[out, in]`) in the `out_in` layout.
pub const CONV1D: [&str; 4] = [
    "attn.c_attn.weight",
    "attn.c_proj.weight",
    "mlp.c_fc.weight",
    "mlp.c_proj.weight",
];

/// GPT-2 hyper-parameters.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Gpt2Config {
    /// Layers.
    pub n_layer: usize,
    /// Attention heads.
    pub n_head: usize,
    /// Hidden size E.
    pub n_embd: usize,
    /// Vocabulary size V.
    pub vocab_size: usize,
    /// Positions P (`n_positions`, the seed's `block_size`).
    pub n_positions: usize,
    /// Feed-forward size I (default 4E).
    pub n_inner: usize,
    /// LayerNorm epsilon.
    pub layer_norm_epsilon: f64,
}

impl Gpt2Config {
    /// The parameter count computed from the configuration (tied `lm_head` not counted).
    pub fn param_count(&self) -> Option<u64> {
        let (v, e, p, l, i) = (
            self.vocab_size as u64,
            self.n_embd as u64,
            self.n_positions as u64,
            self.n_layer as u64,
            self.n_inner as u64,
        );
        let emb = v.checked_mul(e)?.checked_add(p.checked_mul(e)?)?;
        let attn = e.checked_mul(3 * e)?.checked_add(3 * e)?;
        let proj = e.checked_mul(e)?.checked_add(e)?;
        let fc = e.checked_mul(i)?.checked_add(i)?;
        let fc2 = i.checked_mul(e)?.checked_add(e)?;
        let per = (2 * e + 2 * e)
            .checked_add(attn)?
            .checked_add(proj)?
            .checked_add(fc)?
            .checked_add(fc2)?;
        emb.checked_add(l.checked_mul(per)?)?.checked_add(2 * e)
    }

    /// The expected tensors (`transformer.` names) and shapes in `out_in` layout.
    pub fn expected(&self) -> Vec<(String, Vec<usize>)> {
        let (e, i) = (self.n_embd, self.n_inner);
        let mut v = vec![
            (
                "transformer.wte.weight".to_string(),
                vec![self.vocab_size, e],
            ),
            (
                "transformer.wpe.weight".to_string(),
                vec![self.n_positions, e],
            ),
        ];
        for l in 0..self.n_layer {
            let p = format!("transformer.h.{l}.");
            for (n, s) in [
                ("ln_1.weight", vec![e]),
                ("ln_1.bias", vec![e]),
                ("attn.c_attn.weight", vec![3 * e, e]),
                ("attn.c_attn.bias", vec![3 * e]),
                ("attn.c_proj.weight", vec![e, e]),
                ("attn.c_proj.bias", vec![e]),
                ("ln_2.weight", vec![e]),
                ("ln_2.bias", vec![e]),
                ("mlp.c_fc.weight", vec![i, e]),
                ("mlp.c_fc.bias", vec![i]),
                ("mlp.c_proj.weight", vec![e, i]),
                ("mlp.c_proj.bias", vec![e]),
            ] {
                v.push((format!("{p}{n}"), s));
            }
        }
        v.push(("transformer.ln_f.weight".to_string(), vec![e]));
        v.push(("transformer.ln_f.bias".to_string(), vec![e]));
        v
    }

    /// Checks that `m` holds every tensor of [`Gpt2Config::expected`] with its
    /// shape.
    ///
    /// # Errors
    /// [`ErrorKind::Model`] naming the first missing or misshapen tensor.
    pub fn check_tensors(&self, m: &ModelFile) -> Result<()> {
        for (name, shape) in self.expected() {
            let t = m.tensor(&name).ok_or_else(|| {
                Error::new(ErrorKind::Model, format!("gpt2 tensor '{name}' is missing"))
            })?;
            if t.shape != shape {
                return Err(Error::new(
                    ErrorKind::Model,
                    format!(
                        "gpt2 tensor '{name}' has shape {:?}, expected {shape:?}",
                        t.shape
                    ),
                ));
            }
        }
        Ok(())
    }

    pub(crate) fn from_json(c: &Value, what: &str) -> Result<Gpt2Config> {
        let get = |k: &str| -> Option<usize> {
            c.get(k)
                .and_then(Value::as_u64)
                .and_then(|x| usize::try_from(x).ok())
        };
        let req = |k: &str| -> Result<usize> {
            get(k).ok_or_else(|| Error::model(format!("{what}: '{k}' is missing or invalid")))
        };
        let n_embd = req("n_embd")?;
        let n_positions = get("n_positions")
            .or_else(|| get("block_size"))
            .or_else(|| get("n_ctx"))
            .ok_or_else(|| Error::model(format!("{what}: 'n_positions' is missing")))?;
        let cfg = Gpt2Config {
            n_layer: req("n_layer")?,
            n_head: req("n_head")?,
            n_embd,
            vocab_size: req("vocab_size")?,
            n_positions,
            n_inner: get("n_inner").unwrap_or(n_embd.saturating_mul(4)),
            layer_norm_epsilon: c
                .get("layer_norm_epsilon")
                .and_then(Value::as_f64)
                .unwrap_or(1e-5),
        };
        if cfg.n_embd == 0
            || cfg.n_head == 0
            || !cfg.n_embd.is_multiple_of(cfg.n_head)
            || cfg.vocab_size == 0
            || cfg.n_positions == 0
            || cfg.n_inner == 0
            || cfg.n_layer > 4096
            || cfg.n_embd > 1 << 20
            || cfg.n_inner > 1 << 22
        {
            return Err(Error::model(format!(
                "{what}: inconsistent GPT-2 config {cfg:?}"
            )));
        }
        cfg.param_count()
            .ok_or_else(|| Error::model(format!("{what}: parameter count overflows")))?;
        Ok(cfg)
    }

    fn to_json(self) -> Value {
        json!({"n_layer": self.n_layer, "n_head": self.n_head, "n_embd": self.n_embd,
               "vocab_size": self.vocab_size, "block_size": self.n_positions,
               "n_inner": self.n_inner, "layer_norm_epsilon": self.layer_norm_epsilon})
    }

    /// EMBD-style metadata for a GPT-2 model.
    pub fn metadata(&self) -> BTreeMap<String, String> {
        let mut md = BTreeMap::new();
        let mut put = |k: &str, v: String| {
            md.insert(k.to_string(), v);
        };
        put("architecture", "gpt2".into());
        put("num_layers", self.n_layer.to_string());
        put("num_attention_heads", self.n_head.to_string());
        put("hidden_size", self.n_embd.to_string());
        put("embedding_dim", self.n_embd.to_string());
        put("vocab_size", self.vocab_size.to_string());
        put("max_position_emb", self.n_positions.to_string());
        put("intermediate_size", self.n_inner.to_string());
        put("layer_norm_eps", format!("{:e}", self.layer_norm_epsilon));
        md
    }

    /// Reads the config back from metadata written by [`Gpt2Config::metadata`].
    pub fn from_metadata(md: &BTreeMap<String, String>) -> Result<Gpt2Config> {
        let get = |k: &str| -> Result<usize> {
            md.get(k)
                .and_then(|v| v.trim().parse().ok())
                .ok_or_else(|| Error::model(format!("metadata '{k}' is missing or invalid")))
        };
        let c = json!({
            "n_layer": get("num_layers")?, "n_head": get("num_attention_heads")?,
            "n_embd": get("hidden_size")?, "vocab_size": get("vocab_size")?,
            "n_positions": get("max_position_emb")?, "n_inner": get("intermediate_size")?,
            "layer_norm_epsilon": md.get("layer_norm_eps").and_then(|v| v.parse::<f64>().ok()).unwrap_or(1e-5),
        });
        Gpt2Config::from_json(&c, "metadata")
    }
}

/// Reads a `.lwt` file from a backing.
pub fn read(backing: Arc<Backing>, opts: ReadOptions) -> Result<ModelFile> {
    let b = backing.bytes();
    let mut c = Cursor::new(b, 0);
    c.magic(MAGIC, "LWT magic", "not an LWT file")?;
    let u32_prefix = b.get(12) == Some(&b'{');
    let json_len = if u32_prefix {
        u64::from(c.u32("JSON length")?)
    } else {
        c.u64("JSON length")?
    };
    if json_len > MAX_JSON {
        return Err(Error::format(
            "JSON length",
            8,
            format!("{json_len} exceeds the 64 MiB limit"),
        ));
    }
    let json_at = c.pos();
    let text = c.str(json_len as usize, "JSON header")?;
    let header: Value = serde_json::from_str(text)
        .map_err(|e| Error::format("JSON header", json_at as u64, format!("invalid JSON: {e}")))?;
    let hfield = |k: &str| header.get(k);
    if hfield("version").and_then(Value::as_u64) != Some(1) {
        return Err(Error::unsupported(format!(
            "LWT version {:?} is not supported (only 1)",
            hfield("version")
        )));
    }
    for (k, want) in [("dtype", "float32"), ("byte_order", "little")] {
        if let Some(v) = hfield(k) {
            if v.as_str() != Some(want) {
                return Err(Error::unsupported(format!(
                    "LWT {k} {v} is not supported (only {want})"
                )));
            }
        }
    }
    let count = hfield("tensor_count")
        .and_then(Value::as_u64)
        .ok_or_else(|| Error::format("JSON header", json_at as u64, "no tensor_count"))?;
    let total = hfield("total_bytes")
        .and_then(Value::as_u64)
        .ok_or_else(|| Error::format("JSON header", json_at as u64, "no total_bytes"))?;
    let layout = hfield("linear_layout")
        .and_then(Value::as_str)
        .unwrap_or("out_in");
    if layout != "out_in" && layout != "in_out" {
        return Err(Error::unsupported(format!(
            "linear_layout '{layout}' (out_in or in_out)"
        )));
    }
    let index_at = c.pos();
    let index_len = bytes::mul(count, ENTRY_LEN as u64, "tensor index")?;
    let index_end = bytes::add(index_at as u64, index_len, "tensor index")?;
    let data_at = index_end.div_ceil(ALIGN as u64) * ALIGN as u64;
    let data_end = bytes::add(data_at, total, "data section")?;
    let file_end = bytes::add(data_end, 4, "crc trailer")?;
    if file_end != b.len() as u64 {
        return Err(Error::format(
            "LWT layout",
            index_at as u64,
            format!(
                "header describes {file_end} bytes ({count} tensors, {total} data bytes), the file has {}",
                b.len()
            ),
        ));
    }
    let (data_at, data_end) = (data_at as usize, data_end as usize);
    let mut details = vec![
        ("tensor_count".to_string(), count.to_string()),
        ("linear_layout".to_string(), layout.to_string()),
        (
            "length prefix".to_string(),
            if u32_prefix { "u32" } else { "u64" }.to_string(),
        ),
    ];
    let stored = u32::from_le_bytes([
        b[data_end],
        b[data_end + 1],
        b[data_end + 2],
        b[data_end + 3],
    ]);
    if opts.verify_checksums {
        let computed = bytes::crc32(&b[data_at..data_end]);
        if computed != stored {
            return Err(Error::checksum("LWT data section", stored, computed));
        }
        details.push(("crc32".to_string(), format!("{stored:#010x} ok")));
    } else {
        details.push(("crc32".to_string(), format!("{stored:#010x} not verified")));
    }
    let mut tensors = Vec::with_capacity(count as usize);
    let mut names = HashSet::new();
    let mut prev_end = 0u64;
    for k in 0..count as usize {
        let at = index_at + k * ENTRY_LEN;
        let mut e = Cursor::new(b, at);
        let raw = e.bytes(128, "entry name")?;
        let nul = raw.iter().position(|&x| x == 0).ok_or_else(|| {
            Error::format("entry name", at as u64, "not NUL-terminated in 128 bytes")
        })?;
        let name = bytes::utf8(&raw[..nul], "entry name", at)?.to_string();
        if name.is_empty() || !names.insert(name.clone()) {
            return Err(Error::format(
                "entry name",
                at as u64,
                format!("empty or duplicate name '{name}'"),
            ));
        }
        let ndim = e.u32("entry ndim")? as usize;
        e.bytes(4, "entry padding")?;
        let mut dims = [0u64; 8];
        for d in &mut dims {
            *d = e.u64("entry shape")?;
        }
        let offset = e.u64("entry offset")?;
        let size = e.u64("entry size_bytes")?;
        if ndim == 0 || ndim > 8 {
            return Err(Error::format(
                "entry ndim",
                (at + 128) as u64,
                format!("{ndim} is not in 1..=8"),
            ));
        }
        let shape: Vec<usize> = dims[..ndim]
            .iter()
            .map(|&d| bytes::to_usize(d, "entry shape"))
            .collect::<Result<_>>()?;
        let numel = bytes::product(&shape, &name)?;
        if (numel as u64).checked_mul(4) != Some(size) {
            return Err(Error::format(
                "entry size_bytes",
                (at + 208) as u64,
                format!("tensor '{name}': {size} bytes for shape {shape:?}"),
            ));
        }
        let end = bytes::add(offset, size, "tensor end")?;
        if offset % ALIGN as u64 != 0 || offset < prev_end || end > total {
            return Err(Error::format(
                "entry offset",
                (at + 200) as u64,
                format!("tensor '{name}': offset {offset} is misaligned, overlapping or outside the data section"),
            ));
        }
        prev_end = end;
        let start = data_at + offset as usize;
        tensors.push(TensorEntry {
            name,
            dtype: DType::F32,
            shape,
            data: TensorData::Mapped {
                start,
                len: size as usize,
            },
            file_offset: start as u64,
        });
    }
    let mut metadata = BTreeMap::new();
    if let Some(Value::Object(m)) = hfield("metadata") {
        for (k, v) in m {
            let s = match v {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            metadata.insert(k.clone(), s);
        }
    }
    if let Some(cfg) = hfield("config") {
        if let Ok(g) = Gpt2Config::from_json(cfg, "LWT config") {
            for (k, v) in g.metadata() {
                metadata.entry(k).or_insert(v);
            }
        }
    }
    if let Some(t) = hfield("model_type").and_then(Value::as_str) {
        metadata
            .entry("architecture".to_string())
            .or_insert_with(|| t.to_string());
    }
    metadata.insert("lwt.linear_layout".to_string(), layout.to_string());
    let vocab = read_vocab_extension(hfield("vocab"), hfield("special_ids"))?;
    let mut m = ModelFile::new(FormatKind::Lwt, backing.clone(), metadata, vocab, tensors)?;
    m.details = details;
    Ok(m)
}

/// Our extension (docs/formats/lwt.md): an optional `vocab` array of token strings
/// by id and `special_ids` = [pad, unk, cls, sep, mask], so a BERT model with its
/// WordPiece vocabulary round-trips through LWT and still runs.
fn read_vocab_extension(vocab: Option<&Value>, specials: Option<&Value>) -> Result<Option<Vocab>> {
    let Some(vocab) = vocab else {
        return Ok(None);
    };
    let list = vocab
        .as_array()
        .ok_or_else(|| Error::model("LWT header 'vocab' is not an array"))?;
    let tokens = list
        .iter()
        .enumerate()
        .map(|(i, t)| {
            t.as_str()
                .map(str::to_string)
                .ok_or_else(|| Error::model(format!("LWT header 'vocab'[{i}] is not a string")))
        })
        .collect::<Result<Vec<_>>>()?;
    let ids: [u32; 5] = specials
        .and_then(Value::as_array)
        .and_then(|a| {
            a.iter()
                .map(|v| v.as_u64().and_then(|x| u32::try_from(x).ok()))
                .collect::<Option<Vec<u32>>>()
        })
        .and_then(|v| v.try_into().ok())
        .ok_or_else(|| {
            Error::model("LWT header 'special_ids' must be 5 integers (pad, unk, cls, sep, mask)")
        })?;
    Vocab::new(tokens, super::special_ids(&ids)).map(Some)
}

/// Serializes `model` (all tensors f32; names ≤ 127 bytes, ≤ 8 dims) as `.lwt`.
/// GPT-2 models (metadata `architecture` = `gpt2`) get their `config` block
/// and the `out_in` layout; the caller guarantees Conv1D weights are already
/// transposed (as [`crate::import::hf::gpt2::import_gpt2_dir`] does).
pub fn write(model: &ModelFile, w: &mut impl Write) -> Result<()> {
    let mut offsets = Vec::with_capacity(model.tensors.len());
    let mut off = 0u64;
    for t in &model.tensors {
        if t.dtype != DType::F32 {
            return Err(Error::unsupported(format!(
                "tensor '{}' is {}: LWT stores float32 only",
                t.name, t.dtype
            )));
        }
        if t.name.len() > 127 || t.name.as_bytes().contains(&0) || t.name.is_empty() {
            return Err(Error::invalid_argument(format!(
                "tensor name '{}' does not fit LWT's char[128]",
                t.name
            )));
        }
        if t.shape.is_empty() || t.shape.len() > 8 {
            return Err(Error::invalid_argument(format!(
                "tensor '{}' has {} dims (LWT: 1..=8)",
                t.name,
                t.shape.len()
            )));
        }
        off = off.div_ceil(ALIGN as u64) * ALIGN as u64;
        offsets.push(off);
        off += t.byte_len() as u64;
    }
    let total = off;
    let gpt2 = if model.metadata.get("architecture").map(String::as_str) == Some("gpt2") {
        Gpt2Config::from_metadata(&model.metadata).ok()
    } else {
        None
    };
    let mut md = model.metadata.clone();
    md.remove("lwt.linear_layout");
    let mut header = json!({
        "version": 1,
        "model_type": model.metadata.get("architecture").cloned().unwrap_or_else(|| "gpt2".into()),
        "config": gpt2.map(Gpt2Config::to_json).unwrap_or(Value::Null),
        "dtype": "float32",
        "byte_order": "little",
        "tensor_count": model.tensors.len(),
        "total_bytes": total,
        "linear_layout": "out_in",
        "tied_lm_head": true,
        "metadata": md,
    });
    if let (Some(v), Value::Object(h)) = (&model.vocab, &mut header) {
        h.insert("vocab".into(), json!(v.tokens()));
        h.insert("special_ids".into(), json!(v.specials().as_array()));
    }
    let text = serde_json::to_vec(&header)
        .map_err(|e| Error::new(ErrorKind::Internal, format!("JSON: {e}")))?;
    let mut out = Vec::new();
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&(text.len() as u64).to_le_bytes());
    out.extend_from_slice(&text);
    for (t, &o) in model.tensors.iter().zip(&offsets) {
        let mut e = [0u8; ENTRY_LEN];
        e[..t.name.len()].copy_from_slice(t.name.as_bytes());
        e[128..132].copy_from_slice(&(t.shape.len() as u32).to_le_bytes());
        for (k, &d) in t.shape.iter().enumerate() {
            e[136 + 8 * k..144 + 8 * k].copy_from_slice(&(d as u64).to_le_bytes());
        }
        e[200..208].copy_from_slice(&o.to_le_bytes());
        e[208..216].copy_from_slice(&(t.byte_len() as u64).to_le_bytes());
        out.extend_from_slice(&e);
    }
    out.resize(out.len().div_ceil(ALIGN) * ALIGN, 0);
    let data_at = out.len();
    for (t, &o) in model.tensors.iter().zip(&offsets) {
        out.resize(data_at + o as usize, 0);
        out.extend_from_slice(model.tensor_bytes(t));
    }
    let crc = bytes::crc32(&out[data_at..]);
    out.extend_from_slice(&crc.to_le_bytes());
    w.write_all(&out)
        .map_err(|e| Error::new(ErrorKind::Io, format!("writing LWT data: {e}")))
}

/// Writes `model` as `.lwt` at `path`, atomically
/// ([`crate::atomic_write::atomic_write`]).
pub fn write_file(model: &ModelFile, path: &Path) -> Result<()> {
    crate::atomic_write::atomic_write(path, |w| write(model, w))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gpt2_small_param_count() {
        let c = Gpt2Config {
            n_layer: 12,
            n_head: 12,
            n_embd: 768,
            vocab_size: 50257,
            n_positions: 1024,
            n_inner: 3072,
            layer_norm_epsilon: 1e-5,
        };
        assert_eq!(c.param_count(), Some(124_439_808));
        let n: u64 = c
            .expected()
            .iter()
            .map(|(_, s)| s.iter().product::<usize>() as u64)
            .sum();
        assert_eq!(n, 124_439_808);
        assert_eq!(c.expected().len(), 148);
    }
}
