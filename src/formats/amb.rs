//! embee.cpp AMB (`.amb`, magic `AMBEE`), as resolved in `docs/formats/amb.md`.
//!
//! 28-byte header, JSON metadata and config sections, a tokenizer section
//! (WordPiece vocabularies are read and written), and weight records with
//! FP32/FP16/BF16/INT8 data or INT4/INT5 block quantization (plus the adaptive
//! FP16/INT mix). Quantized tensors are dequantized to owned f32 at read, so a
//! BERT model stored as AMB runs through the same encoder.

use std::collections::BTreeMap;
use std::io::Write;
use std::sync::Arc;

use serde_json::{json, Map, Value};

use super::bytes::{self, Cursor};
use super::{Backing, DType, FormatKind, ModelFile, ReadOptions, TensorData, TensorEntry};
use crate::error::{Error, ErrorKind, Result};
use crate::model::names::canonical_name;
use crate::tokenizer::vocab::{SpecialIds, Vocab};

/// The file magic.
pub const MAGIC: &[u8; 5] = b"AMBEE";
/// Header size.
pub const HEADER_LEN: usize = 28;
/// Flag bit 0: a CRC32 trailer follows the weights section.
pub const FLAG_CRC32: u16 = 1;

/// Record dtype codes (seed data-type table).
pub mod code {
    /// FP32.
    pub const FP32: u8 = 0;
    /// FP16.
    pub const FP16: u8 = 1;
    /// BF16.
    pub const BF16: u8 = 2;
    /// INT8 (raw).
    pub const INT8: u8 = 3;
    /// INT4 without scales (unsupported).
    pub const INT4: u8 = 4;
    /// INT5 without scales (unsupported).
    pub const INT5: u8 = 5;
    /// INT4 block quantization.
    pub const INT4BLOCK: u8 = 6;
    /// INT5 block quantization.
    pub const INT5BLOCK: u8 = 7;
    /// Adaptive FP16 / INT block mix.
    pub const ADAPTIVE: u8 = 8;
}

const TOK_WORDPIECE: u8 = 2;
const ABSENT: u16 = 0xFFFF;

/// Scale storage type of quantized blocks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScaleType {
    /// f32 scales (code 0).
    F32,
    /// f16 scales (code 1).
    F16,
}

impl ScaleType {
    fn size(self) -> usize {
        match self {
            ScaleType::F32 => 4,
            ScaleType::F16 => 2,
        }
    }
    fn code(self) -> u8 {
        match self {
            ScaleType::F32 => 0,
            ScaleType::F16 => 1,
        }
    }
    fn from_code(c: u8) -> Option<ScaleType> {
        match c {
            0 => Some(ScaleType::F32),
            1 => Some(ScaleType::F16),
            _ => None,
        }
    }
    fn round(self, s: f32) -> f32 {
        match self {
            ScaleType::F32 => s,
            ScaleType::F16 => half::f16::from_f32(s).to_f32(),
        }
    }
    fn put(self, out: &mut Vec<u8>, s: f32) {
        match self {
            ScaleType::F32 => out.extend_from_slice(&s.to_le_bytes()),
            ScaleType::F16 => out.extend_from_slice(&half::f16::from_f32(s).to_le_bytes()),
        }
    }
    fn get(self, b: &[u8]) -> f32 {
        match self {
            ScaleType::F32 => f32::from_le_bytes([b[0], b[1], b[2], b[3]]),
            ScaleType::F16 => half::f16::from_le_bytes([b[0], b[1]]).to_f32(),
        }
    }
}

/// Quantization applied by the writer to the encoder's Linear weights.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Quant {
    /// Keep every tensor's dtype.
    None,
    /// INT4BLOCK with this block size and scale type.
    Int4Block {
        /// Elements per block (positive multiple of 8).
        block: u16,
        /// Scale type.
        scale: ScaleType,
    },
    /// INT5BLOCK with this block size and scale type.
    Int5Block {
        /// Elements per block (positive multiple of 8).
        block: u16,
        /// Scale type.
        scale: ScaleType,
    },
    /// ADAPTIVE: INT4/INT5 blocks, with the `fp16_fraction` of blocks that
    /// quantize worst stored as FP16.
    Adaptive {
        /// 4 or 5.
        bits: u8,
        /// Elements per block.
        block: u16,
        /// Scale type of the low-precision blocks.
        scale: ScaleType,
        /// Fraction of blocks in FP16, 0..=1.
        fp16_fraction: f32,
    },
}

/// Writer options.
#[derive(Debug, Clone, Copy)]
pub struct WriteOptions {
    /// Quantization of the encoder Linear weights.
    pub quant: Quant,
    /// Append the CRC32 trailer (flag bit 0). Default true.
    pub checksum: bool,
}

impl Default for WriteOptions {
    fn default() -> Self {
        WriteOptions {
            quant: Quant::None,
            checksum: true,
        }
    }
}

fn offset_of(bits: u32) -> i32 {
    1 << (bits - 1)
}

fn block_bytes(bits: u32, block: usize) -> usize {
    block * bits as usize / 8
}

/// Quantizes one block of `block` values (missing tail values count as 0):
/// returns the (rounded) scale and the packed codes.
fn quantize_block(vals: &[f32], block: usize, bits: u32, st: ScaleType) -> (f32, Vec<u8>) {
    let qmax = (offset_of(bits) - 1) as f32;
    let absmax = vals.iter().fold(0f32, |m, v| m.max(v.abs()));
    let scale = st.round(absmax / qmax);
    let off = offset_of(bits);
    let mut codes = vec![0u8; block_bytes(bits, block)];
    for i in 0..block {
        let x = vals.get(i).copied().unwrap_or(0.0);
        let q = if scale > 0.0 && scale.is_finite() {
            (x / scale).round().clamp(-(off as f32), qmax) as i32
        } else {
            0
        };
        let u = (q + off) as u32;
        for k in 0..bits as usize {
            let p = i * bits as usize + k;
            if (u >> k) & 1 == 1 {
                codes[p / 8] |= 1 << (p % 8);
            }
        }
    }
    (scale, codes)
}

fn dequantize_block(codes: &[u8], scale: f32, bits: u32, out: &mut [f32]) {
    let off = offset_of(bits);
    for (i, o) in out.iter_mut().enumerate() {
        let mut u: u32 = 0;
        for k in 0..bits as usize {
            let p = i * bits as usize + k;
            let byte = codes.get(p / 8).copied().unwrap_or(0);
            u |= u32::from((byte >> (p % 8)) & 1) << k;
        }
        *o = (u as i32 - off) as f32 * scale;
    }
}

/// Block-quantizes `values` (INT4BLOCK when `bits` = 4, INT5BLOCK when 5): the
/// full record payload including the 4-byte quantization header.
pub fn quantize_blocks(values: &[f32], bits: u32, block: u16, st: ScaleType) -> Result<Vec<u8>> {
    check_block(block)?;
    let bs = usize::from(block);
    let ty = if bits == 4 {
        code::INT4BLOCK
    } else {
        code::INT5BLOCK
    };
    let mut out = vec![ty];
    out.extend_from_slice(&block.to_le_bytes());
    out.push(st.code());
    for chunk in values.chunks(bs) {
        let (s, c) = quantize_block(chunk, bs, bits, st);
        st.put(&mut out, s);
        out.extend_from_slice(&c);
    }
    Ok(out)
}

fn check_block(block: u16) -> Result<()> {
    if block == 0 || !block.is_multiple_of(8) {
        return Err(Error::invalid_argument(format!(
            "AMB block size {block} is not a positive multiple of 8"
        )));
    }
    Ok(())
}

/// ADAPTIVE payload: INT`bits` blocks, the worst `fp16_fraction` of them as FP16.
pub fn quantize_adaptive(
    values: &[f32],
    bits: u32,
    block: u16,
    st: ScaleType,
    fp16_fraction: f32,
) -> Result<Vec<u8>> {
    check_block(block)?;
    let bs = usize::from(block);
    let nb = values.len().div_ceil(bs);
    let mut errs: Vec<(f32, usize)> = Vec::with_capacity(nb);
    let mut quant = Vec::with_capacity(nb);
    for (k, chunk) in values.chunks(bs).enumerate() {
        let (s, c) = quantize_block(chunk, bs, bits, st);
        let mut back = vec![0f32; bs];
        dequantize_block(&c, s, bits, &mut back);
        let err = chunk
            .iter()
            .zip(&back)
            .fold(0f32, |m, (a, b)| m.max((a - b).abs()));
        errs.push((err, k));
        quant.push((s, c));
    }
    errs.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    let n16 = ((nb as f32) * fp16_fraction.clamp(0.0, 1.0)).round() as usize;
    let mut mask = vec![0u8; nb.div_ceil(8)];
    for &(_, k) in errs.iter().take(n16) {
        mask[k / 8] |= 1 << (k % 8);
    }
    let mut out = vec![code::ADAPTIVE];
    out.extend_from_slice(&block.to_le_bytes());
    out.push(st.code());
    out.push(if bits == 4 {
        code::INT4BLOCK
    } else {
        code::INT5BLOCK
    });
    out.extend_from_slice(&mask);
    for (k, chunk) in values.chunks(bs).enumerate() {
        if mask[k / 8] >> (k % 8) & 1 == 1 {
            for i in 0..bs {
                let v = chunk.get(i).copied().unwrap_or(0.0);
                out.extend_from_slice(&half::f16::from_f32(v).to_le_bytes());
            }
        } else {
            let (s, c) = &quant[k];
            st.put(&mut out, *s);
            out.extend_from_slice(c);
        }
    }
    Ok(out)
}

/// Dequantizes a record payload of dtype 6, 7 or 8 holding `numel` values.
/// `at` is the payload's absolute offset, for messages.
pub fn dequantize(dtype: u8, payload: &[u8], numel: usize, at: usize) -> Result<Vec<f32>> {
    let mut c = Cursor::new(payload, 0);
    let err = |what: &str, detail: String| Error::format(what, at as u64, detail);
    let qt = c.u8("quant type")?;
    if qt != dtype {
        return Err(err(
            "quant type",
            format!("{qt} differs from the record dtype {dtype}"),
        ));
    }
    let block = c.u16("block size")?;
    if block == 0 || block % 8 != 0 {
        return Err(err(
            "block size",
            format!("{block} is not a positive multiple of 8"),
        ));
    }
    let st_code = c.u8("scale type")?;
    let st = ScaleType::from_code(st_code)
        .ok_or_else(|| err("scale type", format!("unknown scale type {st_code}")))?;
    let bs = usize::from(block);
    let nb = numel.div_ceil(bs);
    let (bits, mask) = if dtype == code::ADAPTIVE {
        let low = c.u8("adaptive low kind")?;
        let bits = match low {
            code::INT4BLOCK => 4,
            code::INT5BLOCK => 5,
            other => return Err(err("adaptive low kind", format!("{other} is not 6 or 7"))),
        };
        (bits, Some(c.bytes(nb.div_ceil(8), "adaptive mask")?))
    } else if dtype == code::INT4BLOCK {
        (4, None)
    } else {
        (5, None)
    };
    let low_len = st.size() + block_bytes(bits, bs);
    let hi_len = 2 * bs;
    // Bound the allocation by what the payload can hold (every block has at least 2 bytes).
    let nb_possible = c.remaining() / low_len.min(hi_len);
    if nb > nb_possible {
        return Err(err(
            "quantized data",
            format!("{nb} blocks do not fit in {} bytes", c.remaining()),
        ));
    }
    let mut out = vec![0f32; nb * bs];
    for k in 0..nb {
        let dst = &mut out[k * bs..(k + 1) * bs];
        let is16 = mask.is_some_and(|m| m[k / 8] >> (k % 8) & 1 == 1);
        if is16 {
            let b = c.bytes(hi_len, "fp16 block")?;
            for (o, h) in dst.iter_mut().zip(b.chunks_exact(2)) {
                *o = half::f16::from_le_bytes([h[0], h[1]]).to_f32();
            }
        } else {
            let s = st.get(c.bytes(st.size(), "block scale")?);
            let codes = c.bytes(block_bytes(bits, bs), "block codes")?;
            dequantize_block(codes, s, bits, dst);
        }
    }
    if let Some(m) = mask {
        let used = nb % 8;
        if used != 0 && m.last().is_some_and(|&x| x >> used != 0) {
            return Err(err("adaptive mask", "unused mask bits are set".to_string()));
        }
    }
    if c.remaining() != 0 {
        return Err(err(
            "quantized data",
            format!("{} bytes left after the last block", c.remaining()),
        ));
    }
    out.truncate(numel);
    Ok(out)
}

fn json_section(b: &[u8], what: &str, at: usize) -> Result<Map<String, Value>> {
    if b.is_empty() {
        return Ok(Map::new());
    }
    let s = bytes::utf8(b, what, at)?;
    match serde_json::from_str::<Value>(s) {
        Ok(Value::Object(m)) => Ok(m),
        Ok(_) => Err(Error::format(what, at as u64, "is not a JSON object")),
        Err(e) => Err(Error::format(what, at as u64, format!("invalid JSON: {e}"))),
    }
}

fn value_str(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

const CONFIG_MAP: &[(&str, &str)] = &[
    ("architecture", "architecture"),
    ("n_vocab", "vocab_size"),
    ("n_embd", "hidden_size"),
    ("n_layers", "num_layers"),
    ("n_heads", "num_attention_heads"),
    ("max_seq_len", "max_seq_length"),
    ("activation_fn", "hidden_act"),
    ("intermediate_size", "intermediate_size"),
    ("max_position_embeddings", "max_position_emb"),
    ("type_vocab_size", "type_vocab_size"),
    ("layer_norm_eps", "layer_norm_eps"),
    ("pooling", "pooling"),
    ("normalize", "normalize"),
    ("do_lower_case", "do_lower_case"),
    ("strip_accents", "strip_accents"),
    ("tokenize_chinese_chars", "tokenize_chinese_chars"),
];

/// Reads an AMB file from a backing.
pub fn read(backing: Arc<Backing>, opts: ReadOptions) -> Result<ModelFile> {
    let b = backing.bytes();
    let mut c = Cursor::new(b, 0);
    c.magic(MAGIC, "AMB magic", "not an AMB file")?;
    let version = c.u8("AMB version")?;
    if version != 1 {
        return Err(Error::unsupported(format!(
            "AMB version {version} is not supported (only 1)"
        )));
    }
    let flags = c.u16("AMB flags")?;
    if flags & !FLAG_CRC32 != 0 {
        return Err(Error::unsupported(format!(
            "AMB flags {flags:#06x} use undefined bits"
        )));
    }
    let m = u64::from(c.u32("metadata size")?);
    let cs = u64::from(c.u32("config size")?);
    let t = u64::from(c.u32("tokenizer size")?);
    let w = c.u64("weights size")?;
    let mut end = HEADER_LEN as u64;
    for (v, what) in [
        (m, "metadata"),
        (cs, "config"),
        (t, "tokenizer"),
        (w, "weights"),
    ] {
        end = bytes::add(end, v, what)?;
    }
    let total = if flags & FLAG_CRC32 != 0 {
        bytes::add(end, 4, "crc trailer")?
    } else {
        end
    };
    if total != b.len() as u64 {
        return Err(Error::format(
            "AMB section sizes",
            8,
            format!(
                "header sizes add up to {total} bytes, the file has {}",
                b.len()
            ),
        ));
    }
    let end = end as usize;
    let mut details = vec![
        ("version".to_string(), version.to_string()),
        ("flags".to_string(), format!("{flags:#06x}")),
    ];
    if flags & FLAG_CRC32 != 0 {
        let stored = u32::from_le_bytes([b[end], b[end + 1], b[end + 2], b[end + 3]]);
        if opts.verify_checksums {
            let computed = bytes::crc32(&b[..end]);
            if computed != stored {
                return Err(Error::checksum("AMB file", stored, computed));
            }
            details.push(("crc32".to_string(), format!("{stored:#010x} ok")));
        } else {
            details.push(("crc32".to_string(), format!("{stored:#010x} not verified")));
        }
    }
    let (m, cs, t) = (m as usize, cs as usize, t as usize);
    let md_at = HEADER_LEN;
    let cfg_at = md_at + m;
    let tok_at = cfg_at + cs;
    let w_at = tok_at + t;
    let md_json = json_section(&b[md_at..cfg_at], "AMB metadata section", md_at)?;
    let cfg_json = json_section(&b[cfg_at..tok_at], "AMB config section", cfg_at)?;
    let mut metadata = BTreeMap::new();
    if let Some(Value::Object(e)) = md_json.get("embd_metadata") {
        // Written by us: the complete metadata.
        for (k, v) in e {
            metadata.insert(k.clone(), value_str(v));
        }
    } else {
        map_metadata(&md_json, &cfg_json, &mut metadata);
    }
    let vocab = read_tokenizer(&b[tok_at..w_at], tok_at, &mut details)?;
    let tensors = read_records(b, w_at, end)?;
    let mut mf = ModelFile::new(FormatKind::Amb, backing.clone(), metadata, vocab, tensors)?;
    mf.details = details;
    Ok(mf)
}

/// Maps seed-style metadata and config JSON onto EMBD keys.
fn map_metadata(
    md_json: &Map<String, Value>,
    cfg_json: &Map<String, Value>,
    metadata: &mut BTreeMap<String, String>,
) {
    for (k, v) in cfg_json {
        match CONFIG_MAP.iter().find(|(ck, _)| ck == k) {
            Some((_, ek)) => {
                if !v.is_null() {
                    metadata.insert(ek.to_string(), value_str(v));
                }
            }
            None => {
                metadata.insert(format!("amb.config.{k}"), value_str(v));
            }
        }
    }
    if let Some(h) = metadata.get("hidden_size").cloned() {
        metadata.entry("embedding_dim".to_string()).or_insert(h);
    }
    for (k, v) in md_json {
        let key = match k.as_str() {
            "name" => "model_name".to_string(),
            "version" => "model_version".to_string(),
            "created" => "created_at".to_string(),
            _ => format!("amb.{k}"),
        };
        metadata.insert(key, value_str(v));
    }
}

fn read_tokenizer(
    sec: &[u8],
    at: usize,
    details: &mut Vec<(String, String)>,
) -> Result<Option<Vocab>> {
    if sec.is_empty() {
        details.push(("tokenizer".to_string(), "none".to_string()));
        return Ok(None);
    }
    // Positions inside the section; errors add `at`.
    let mut c = Cursor::new(sec, 0);
    let fix = |e: Error| e.context(format!("tokenizer section at offset {at}"));
    let ty = c.u8("tokenizer type").map_err(fix)?;
    let mut ids = [0u16; 5];
    for id in &mut ids {
        *id = c.u16("special token id").map_err(fix)?;
    }
    if ty != TOK_WORDPIECE {
        let name = match ty {
            0 => "bpe",
            1 => "sentencepiece",
            3 => "custom",
            _ => {
                return Err(Error::format(
                    "tokenizer type",
                    at as u64,
                    format!("unknown type {ty}"),
                ))
            }
        };
        details.push((
            "tokenizer".to_string(),
            format!("{name}, {} bytes (not read)", sec.len()),
        ));
        return Ok(None);
    }
    let n = c.u32("token count").map_err(fix)?;
    let mut tokens = Vec::with_capacity((n as usize).min(c.remaining() / 2));
    for _ in 0..n {
        let l = usize::from(c.u16("token length").map_err(fix)?);
        tokens.push(c.str(l, "token").map_err(fix)?.to_string());
    }
    if c.remaining() != 0 {
        return Err(Error::format(
            "tokenizer section",
            (at + c.pos()) as u64,
            format!("{} bytes after the last token", c.remaining()),
        ));
    }
    let [bos, eos, pad, unk, mask] = ids;
    if ids.contains(&ABSENT) {
        return Err(Error::model(
            "AMB WordPiece tokenizer lacks a special token id (BOS/EOS/PAD/UNK/MASK)",
        ));
    }
    let specials = SpecialIds {
        pad: u32::from(pad),
        unk: u32::from(unk),
        cls: u32::from(bos),
        sep: u32::from(eos),
        mask: u32::from(mask),
    };
    details.push(("tokenizer".to_string(), format!("wordpiece, {n} tokens")));
    Ok(Some(Vocab::new(tokens, specials)?))
}

fn read_records(b: &[u8], start: usize, end: usize) -> Result<Vec<TensorEntry>> {
    let sec = &b[..end];
    let mut c = Cursor::new(sec, start);
    let mut out = Vec::new();
    while c.pos() < end {
        let rec_at = c.pos();
        let nl = usize::from(c.u16("tensor name length")?);
        let name = c.str(nl, "tensor name")?.to_string();
        if name.is_empty() {
            return Err(Error::format("tensor name", rec_at as u64, "empty name"));
        }
        let dims = usize::from(c.u8("tensor dims")?);
        let mut shape = Vec::with_capacity(dims);
        for _ in 0..dims {
            shape.push(c.u32("tensor shape")? as usize);
        }
        let dt_at = c.pos();
        let dt = c.u8("tensor dtype")?;
        let size = c.u64("tensor data size")?;
        let data_at = c.pos();
        let len = bytes::to_usize(size, "tensor data size")?;
        let data = c.bytes(len, "tensor data")?;
        let numel = bytes::product(&shape, &name)?;
        let what = format!("tensor '{name}'");
        let plain = |d: DType| -> Result<()> {
            if numel.checked_mul(d.size()) != Some(len) {
                return Err(Error::format(
                    &what,
                    data_at as u64,
                    format!(
                        "{} data of {len} bytes for shape {shape:?} (needs {} per element)",
                        d.name(),
                        d.size()
                    ),
                ));
            }
            Ok(())
        };
        let entry = match dt {
            code::FP32 | code::FP16 | code::BF16 | code::INT8 => {
                let d = match dt {
                    code::FP32 => DType::F32,
                    code::FP16 => DType::F16,
                    code::BF16 => DType::BF16,
                    _ => DType::I8,
                };
                plain(d)?;
                if data_at.is_multiple_of(d.size()) {
                    TensorEntry {
                        name: name.clone(),
                        dtype: d,
                        shape: shape.clone(),
                        data: TensorData::Mapped {
                            start: data_at,
                            len,
                        },
                        file_offset: data_at as u64,
                    }
                } else {
                    let mut e = TensorEntry::owned_bytes(name.clone(), d, shape.clone(), data);
                    e.file_offset = data_at as u64;
                    e
                }
            }
            code::INT4BLOCK | code::INT5BLOCK | code::ADAPTIVE => {
                let v = dequantize(dt, data, numel, data_at).map_err(|e| e.context(&what))?;
                let mut e = TensorEntry::owned_f32(name.clone(), shape.clone(), &v);
                e.file_offset = data_at as u64;
                e
            }
            code::INT4 | code::INT5 => {
                return Err(Error::unsupported(format!(
                    "{what}: AMB dtype {dt} (INT4/INT5 without scales) is not supported"
                )))
            }
            other => {
                return Err(Error::format(
                    "tensor dtype",
                    dt_at as u64,
                    format!("{what}: unknown dtype {other}"),
                ))
            }
        };
        let pad = (8 - c.pos() % 8) % 8;
        c.bytes(pad, "record padding")?;
        if c.pos() > end {
            return Err(Error::format(
                "weights section",
                rec_at as u64,
                "record runs past the section",
            ));
        }
        if let Some(canon) = canonical_name(&entry.name) {
            let mut entry = entry;
            entry.name = canon;
            out.push(entry);
        }
    }
    Ok(out)
}

fn is_encoder_linear_weight(t: &TensorEntry) -> bool {
    crate::model::names::is_layer_linear_weight(&t.name, &t.shape)
}

fn config_value(ek: &str, v: &str) -> Value {
    if let Ok(n) = v.parse::<u64>() {
        return json!(n);
    }
    match v {
        "true" => return json!(true),
        "false" => return json!(false),
        _ => {}
    }
    if ek == "layer_norm_eps" {
        if let Ok(f) = v.parse::<f64>() {
            return json!(f);
        }
    }
    json!(v)
}

/// Serializes `model` as AMB.
pub fn write(model: &ModelFile, w: &mut impl Write, opts: &WriteOptions) -> Result<()> {
    let md = &model.metadata;
    let mut meta = Map::new();
    for (k, ek) in [
        ("name", "model_name"),
        ("version", "model_version"),
        ("created", "created_at"),
    ] {
        if let Some(v) = md.get(ek) {
            meta.insert(k.to_string(), json!(v));
        }
    }
    meta.insert("embd_metadata".to_string(), json!(md));
    let mut cfg = Map::new();
    for (ck, ek) in CONFIG_MAP {
        if let Some(v) = md.get(*ek) {
            cfg.insert(ck.to_string(), config_value(ek, v));
        }
    }
    if let Some(h) = cfg.get("n_heads").cloned() {
        cfg.insert("n_kv_heads".to_string(), h);
    }
    let quant_json = match opts.quant {
        Quant::None => json!({"type": "none"}),
        Quant::Int4Block { block, scale } => {
            json!({"type": "int4_block", "block_size": block, "scale_type": scale_name(scale)})
        }
        Quant::Int5Block { block, scale } => {
            json!({"type": "int5_block", "block_size": block, "scale_type": scale_name(scale)})
        }
        Quant::Adaptive {
            bits, block, scale, ..
        } => {
            json!({"type": "adaptive", "bits": bits, "block_size": block, "scale_type": scale_name(scale)})
        }
    };
    cfg.insert("quant".to_string(), quant_json);
    let to_json = |m: Map<String, Value>| -> Result<Vec<u8>> {
        serde_json::to_vec(&Value::Object(m))
            .map_err(|e| Error::new(ErrorKind::Internal, format!("JSON: {e}")))
    };
    let meta_b = to_json(meta)?;
    let cfg_b = to_json(cfg)?;
    let tok_b = match &model.vocab {
        None => Vec::new(),
        Some(v) => tokenizer_bytes(v)?,
    };
    let sec32 = |n: usize, what: &str| -> Result<u32> {
        u32::try_from(n).map_err(|_| {
            Error::invalid_argument(format!("AMB {what} section of {n} bytes exceeds 4 GiB"))
        })
    };
    let mut out = Vec::new();
    out.extend_from_slice(MAGIC);
    out.push(1);
    let flags = if opts.checksum { FLAG_CRC32 } else { 0 };
    out.extend_from_slice(&flags.to_le_bytes());
    out.extend_from_slice(&sec32(meta_b.len(), "metadata")?.to_le_bytes());
    out.extend_from_slice(&sec32(cfg_b.len(), "config")?.to_le_bytes());
    out.extend_from_slice(&sec32(tok_b.len(), "tokenizer")?.to_le_bytes());
    out.extend_from_slice(&0u64.to_le_bytes());
    out.extend_from_slice(&meta_b);
    out.extend_from_slice(&cfg_b);
    out.extend_from_slice(&tok_b);
    let w_at = out.len();
    for t in &model.tensors {
        let nb = t.name.as_bytes();
        let nl = u16::try_from(nb.len()).map_err(|_| {
            Error::invalid_argument(format!("tensor name '{}' is too long for AMB", t.name))
        })?;
        let dims = u8::try_from(t.shape.len()).map_err(|_| {
            Error::invalid_argument(format!("tensor '{}' has too many dims", t.name))
        })?;
        let quantize = opts.quant != Quant::None
            && is_encoder_linear_weight(t)
            && matches!(t.dtype, DType::F32 | DType::F16 | DType::BF16);
        let (dt, payload): (u8, Vec<u8>) = if quantize {
            let v = model.tensor_to_f32(t);
            match opts.quant {
                Quant::Int4Block { block, scale } => {
                    (code::INT4BLOCK, quantize_blocks(&v, 4, block, scale)?)
                }
                Quant::Int5Block { block, scale } => {
                    (code::INT5BLOCK, quantize_blocks(&v, 5, block, scale)?)
                }
                Quant::Adaptive {
                    bits,
                    block,
                    scale,
                    fp16_fraction,
                } => {
                    if bits != 4 && bits != 5 {
                        return Err(Error::invalid_argument("adaptive bits must be 4 or 5"));
                    }
                    (
                        code::ADAPTIVE,
                        quantize_adaptive(&v, u32::from(bits), block, scale, fp16_fraction)?,
                    )
                }
                Quant::None => (code::FP32, Vec::new()),
            }
        } else {
            let dt = match t.dtype {
                DType::F32 => code::FP32,
                DType::F16 => code::FP16,
                DType::BF16 => code::BF16,
                DType::I8 => code::INT8,
                other => {
                    return Err(Error::unsupported(format!(
                        "tensor '{}': AMB cannot store dtype {other}",
                        t.name
                    )))
                }
            };
            (dt, model.tensor_bytes(t).to_vec())
        };
        out.extend_from_slice(&nl.to_le_bytes());
        out.extend_from_slice(nb);
        out.push(dims);
        for &d in &t.shape {
            let d = u32::try_from(d).map_err(|_| {
                Error::invalid_argument(format!("tensor '{}' dim {d} exceeds u32", t.name))
            })?;
            out.extend_from_slice(&d.to_le_bytes());
        }
        out.push(dt);
        out.extend_from_slice(&(payload.len() as u64).to_le_bytes());
        out.extend_from_slice(&payload);
        let pad = (8 - out.len() % 8) % 8;
        out.resize(out.len() + pad, 0);
    }
    let wsize = (out.len() - w_at) as u64;
    out[20..28].copy_from_slice(&wsize.to_le_bytes());
    if opts.checksum {
        let crc = bytes::crc32(&out);
        out.extend_from_slice(&crc.to_le_bytes());
    }
    w.write_all(&out)
        .map_err(|e| Error::new(ErrorKind::Io, format!("writing AMB data: {e}")))
}

fn scale_name(s: ScaleType) -> &'static str {
    match s {
        ScaleType::F32 => "fp32",
        ScaleType::F16 => "fp16",
    }
}

fn tokenizer_bytes(v: &Vocab) -> Result<Vec<u8>> {
    let s = v.specials();
    let mut out = vec![TOK_WORDPIECE];
    for id in [s.cls, s.sep, s.pad, s.unk, s.mask] {
        let id = u16::try_from(id)
            .ok()
            .filter(|&x| x != ABSENT)
            .ok_or_else(|| {
                Error::invalid_argument(format!("special token id {id} does not fit AMB's u16"))
            })?;
        out.extend_from_slice(&id.to_le_bytes());
    }
    let n = u32::try_from(v.len())
        .map_err(|_| Error::invalid_argument("vocabulary too large for AMB"))?;
    out.extend_from_slice(&n.to_le_bytes());
    for t in v.tokens() {
        let l = u16::try_from(t.len()).map_err(|_| {
            Error::invalid_argument(format!("token of {} bytes is too long", t.len()))
        })?;
        out.extend_from_slice(&l.to_le_bytes());
        out.extend_from_slice(t.as_bytes());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn int4_packing_is_low_nibble_first() {
        let p = quantize_blocks(
            &[7.0, -7.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0],
            4,
            8,
            ScaleType::F32,
        )
        .unwrap();
        assert_eq!(&p[..4], &[6, 8, 0, 0]);
        assert_eq!(f32::from_le_bytes([p[4], p[5], p[6], p[7]]), 1.0);
        // codes: 7+8=15, -7+8=1, 8, 9, 8, 8, 8, 8
        assert_eq!(&p[8..12], &[0x1F, 0x98, 0x88, 0x88]);
        let back = dequantize(6, &p, 8, 0).unwrap();
        assert_eq!(back, vec![7.0, -7.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0]);
    }

    #[test]
    fn block_error_is_bounded() {
        let v: Vec<f32> = (0..100)
            .map(|i| ((i * 37 % 101) as f32 - 50.0) / 7.0)
            .collect();
        for (bits, qmax) in [(4u32, 7.0f32), (5, 15.0)] {
            for st in [ScaleType::F32, ScaleType::F16] {
                let p = quantize_blocks(&v, bits, 32, st).unwrap();
                let back = dequantize(if bits == 4 { 6 } else { 7 }, &p, v.len(), 0).unwrap();
                assert_eq!(back.len(), v.len());
                for (blk, bb) in v.chunks(32).zip(back.chunks(32)) {
                    let amax = blk.iter().fold(0f32, |m, x| m.max(x.abs()));
                    for (a, b) in blk.iter().zip(bb) {
                        assert!((a - b).abs() <= amax / qmax * 0.5 + amax * 1e-3, "{a} {b}");
                    }
                }
            }
        }
    }

    #[test]
    fn adaptive_keeps_worst_blocks_in_fp16() {
        let mut v: Vec<f32> = (0..64).map(|i| i as f32 * 0.01).collect();
        v[40] = 100.0; // block 2 quantizes worst
        let p = quantize_adaptive(&v, 4, 16, ScaleType::F16, 0.25).unwrap();
        assert_eq!(p[5], 0b0100);
        let back = dequantize(8, &p, 64, 0).unwrap();
        assert_eq!(back[40], 100.0);
        assert!((back[41] - 0.41).abs() < 1e-3);
    }

    #[test]
    fn dequantize_rejects_short_payload() {
        let p = quantize_blocks(&[1.0; 16], 5, 8, ScaleType::F16).unwrap();
        for n in 0..p.len() {
            assert!(dequantize(7, &p[..n], 16, 0).is_err());
        }
        assert!(dequantize(7, &p, 17, 0).is_err());
    }
}
