//! Core ML MIL weight blob (`weight.bin`, blob storage version 2) plus a JSON
//! manifest naming the tensors.
//!
//! `weight.bin` is exactly what coremltools' `MILBlob` storage writes: a 64-byte
//! storage header (`u32 count`, `u32 version = 2`, 56 reserved bytes), then per
//! blob a 64-byte metadata record at a 64-aligned offset (`u32` sentinel
//! `0xDEADBEEF`, `u32` dtype, `u64` size in bytes, `u64` absolute data offset,
//! `u64` padding bits of the last byte, 32 reserved bytes never validated),
//! followed directly by the data. No padding after the last blob.
//!
//! A blob carries no name or shape (the MIL program holds them), so a model
//! directory written here has a `manifest.json` beside `weight.bin`:
//!
//! ```json
//! {"format": "embedder-coreml-blob", "version": 1, "blob": "weight.bin",
//!  "metadata": {"model_name": "...", ...},
//!  "vocab": {"tokens": [...], "pad": 0, "unk": 100, "cls": 101, "sep": 102, "mask": 103},
//!  "tensors": [{"name": "...", "dtype": "float32", "shape": [384], "offset": 64}, ...]}
//! ```
//!
//! `offset` is the offset of the blob's **metadata record** (as in a MIL
//! `BlobFileValue`), `null` for a tensor with no elements (Core ML cannot store
//! empty blobs). `vocab` may be `null`. Every dtype of the real enum reads; byte
//! types are zero-copy views of the mapped file, sub-byte types are unpacked
//! (little-endian bit order) into owned `i8` (int4) / `u8` (uintN) tensors and
//! float8 into owned f32.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;
use std::sync::Arc;

use serde_json::{json, Value};

use super::bytes::{self, Cursor};
use super::{Backing, DType, FormatKind, ModelFile, ReadOptions, TensorData, TensorEntry};
use crate::error::{Error, ErrorKind, Result};
use crate::tokenizer::vocab::{SpecialIds, Vocab};

/// `blob_metadata.sentinel`.
pub const SENTINEL: u32 = 0xDEAD_BEEF;
/// Storage version written and accepted.
pub const VERSION: u32 = 2;
/// Alignment of every metadata record.
pub const ALIGN: u64 = 64;
/// Value of the manifest's `format` key.
pub const MANIFEST_FORMAT: &str = "embedder-coreml-blob";

/// `BlobDataType` of MILBlob (codes are only ever appended upstream).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum BlobDType {
    /// IEEE binary16.
    Float16 = 1,
    /// IEEE binary32.
    Float32 = 2,
    /// u8.
    UInt8 = 3,
    /// i8.
    Int8 = 4,
    /// bfloat16.
    BFloat16 = 5,
    /// i16.
    Int16 = 6,
    /// u16.
    UInt16 = 7,
    /// 4-bit two's complement.
    Int4 = 8,
    /// 1-bit unsigned.
    UInt1 = 9,
    /// 2-bit unsigned.
    UInt2 = 10,
    /// 4-bit unsigned.
    UInt4 = 11,
    /// 3-bit unsigned.
    UInt3 = 12,
    /// 6-bit unsigned.
    UInt6 = 13,
    /// i32.
    Int32 = 14,
    /// u32.
    UInt32 = 15,
    /// OCP FP8 E4M3 (finite, no infinities).
    Float8E4M3FN = 16,
    /// OCP FP8 E5M2.
    Float8E5M2 = 17,
}

impl BlobDType {
    /// Every type, in code order.
    pub const ALL: [BlobDType; 17] = [
        BlobDType::Float16,
        BlobDType::Float32,
        BlobDType::UInt8,
        BlobDType::Int8,
        BlobDType::BFloat16,
        BlobDType::Int16,
        BlobDType::UInt16,
        BlobDType::Int4,
        BlobDType::UInt1,
        BlobDType::UInt2,
        BlobDType::UInt4,
        BlobDType::UInt3,
        BlobDType::UInt6,
        BlobDType::Int32,
        BlobDType::UInt32,
        BlobDType::Float8E4M3FN,
        BlobDType::Float8E5M2,
    ];

    /// The type for a code.
    pub fn from_code(c: u32) -> Option<BlobDType> {
        BlobDType::ALL.iter().copied().find(|d| *d as u32 == c)
    }

    /// Bits per element.
    pub fn bits(self) -> u32 {
        use BlobDType::*;
        match self {
            Float32 | Int32 | UInt32 => 32,
            Float16 | BFloat16 | Int16 | UInt16 => 16,
            UInt8 | Int8 | Float8E4M3FN | Float8E5M2 => 8,
            Int4 | UInt4 => 4,
            UInt1 => 1,
            UInt2 => 2,
            UInt3 => 3,
            UInt6 => 6,
        }
    }

    /// The manifest spelling.
    pub fn name(self) -> &'static str {
        use BlobDType::*;
        match self {
            Float16 => "float16",
            Float32 => "float32",
            UInt8 => "uint8",
            Int8 => "int8",
            BFloat16 => "bfloat16",
            Int16 => "int16",
            UInt16 => "uint16",
            Int4 => "int4",
            UInt1 => "uint1",
            UInt2 => "uint2",
            UInt4 => "uint4",
            UInt3 => "uint3",
            UInt6 => "uint6",
            Int32 => "int32",
            UInt32 => "uint32",
            Float8E4M3FN => "float8e4m3fn",
            Float8E5M2 => "float8e5m2",
        }
    }

    /// Parses [`BlobDType::name`].
    pub fn from_name(s: &str) -> Option<BlobDType> {
        BlobDType::ALL.iter().copied().find(|d| d.name() == s)
    }

    /// The blob type storing a tensor of `d` unchanged.
    pub fn from_dtype(d: DType) -> BlobDType {
        match d {
            DType::F32 => BlobDType::Float32,
            DType::F16 => BlobDType::Float16,
            DType::BF16 => BlobDType::BFloat16,
            DType::I32 => BlobDType::Int32,
            DType::I16 => BlobDType::Int16,
            DType::I8 => BlobDType::Int8,
            DType::U32 => BlobDType::UInt32,
            DType::U16 => BlobDType::UInt16,
            DType::U8 => BlobDType::UInt8,
        }
    }

    /// The tensor dtype a blob of this type reads into.
    pub fn read_dtype(self) -> DType {
        use BlobDType::*;
        match self {
            Float16 => DType::F16,
            Float32 | Float8E4M3FN | Float8E5M2 => DType::F32,
            UInt8 | UInt1 | UInt2 | UInt3 | UInt4 | UInt6 => DType::U8,
            Int8 | Int4 => DType::I8,
            BFloat16 => DType::BF16,
            Int16 => DType::I16,
            UInt16 => DType::U16,
            Int32 => DType::I32,
            UInt32 => DType::U32,
        }
    }

    fn is_sub_byte(self) -> bool {
        self.bits() < 8
    }
}

/// One blob's metadata record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlobInfo {
    /// Offset of the metadata record (what a MIL program references).
    pub metadata_offset: u64,
    /// Data type.
    pub dtype: BlobDType,
    /// Data bytes (incl. the last partial byte of sub-byte types).
    pub size: u64,
    /// Absolute offset of the data.
    pub data_offset: u64,
    /// Unused high bits of the last byte (sub-byte types).
    pub padding_bits: u64,
}

impl BlobInfo {
    /// Number of elements, checked against the padding rules of the reference reader.
    pub fn element_count(&self) -> Result<u64> {
        let bits = u64::from(self.dtype.bits());
        let what = "blob padding_size_in_bits";
        if !self.dtype.is_sub_byte() {
            if self.padding_bits != 0 || !self.size.is_multiple_of(bits / 8) {
                return Err(Error::format(
                    what,
                    self.metadata_offset + 24,
                    format!(
                        "{} blob of {} bytes with {} padding bits",
                        self.dtype.name(),
                        self.size,
                        self.padding_bits
                    ),
                ));
            }
            return Ok(self.size / (bits / 8));
        }
        let total = bytes::mul(self.size, 8, what)?;
        if self.padding_bits >= 8
            || (matches!(bits, 1 | 2 | 4) && !self.padding_bits.is_multiple_of(bits))
            || self.padding_bits > total
            || !(total - self.padding_bits).is_multiple_of(bits)
        {
            return Err(Error::format(
                what,
                self.metadata_offset + 24,
                format!(
                    "{} padding bits do not fit {} bytes of {}",
                    self.padding_bits,
                    self.size,
                    self.dtype.name()
                ),
            ));
        }
        Ok((total - self.padding_bits) / bits)
    }
}

/// Reads the storage header; returns the blob count.
pub fn read_header(b: &[u8]) -> Result<u32> {
    let mut c = Cursor::new(b, 0);
    let count = c.u32("storage_header.count")?;
    let version = c.u32("storage_header.version")?;
    c.bytes(56, "storage_header.reserved")?;
    if version != VERSION {
        return Err(Error::unsupported(format!(
            "Core ML blob storage version {version} is not supported (only 2)"
        )));
    }
    Ok(count)
}

/// Reads and checks the metadata record at `offset`.
pub fn blob_at(b: &[u8], offset: u64) -> Result<BlobInfo> {
    let at = bytes::to_usize(offset, "blob_metadata offset")?;
    let mut c = Cursor::new(b, at);
    let sentinel = c.u32("blob_metadata.sentinel")?;
    if sentinel != SENTINEL {
        return Err(Error::format(
            "blob_metadata.sentinel",
            offset,
            format!("{sentinel:#010x}, expected 0xdeadbeef"),
        ));
    }
    let code = c.u32("blob_metadata.mil_dtype")?;
    let dtype = BlobDType::from_code(code).ok_or_else(|| {
        Error::format(
            "blob_metadata.mil_dtype",
            offset + 4,
            format!("unknown type {code}"),
        )
    })?;
    let size = c.u64("blob_metadata.sizeInBytes")?;
    let data_offset = c.u64("blob_metadata.offset")?;
    let padding_bits = c.u64("blob_metadata.padding_size_in_bits")?;
    c.bytes(32, "blob_metadata.reserved")?;
    if size == 0 {
        return Err(Error::format(
            "blob_metadata.sizeInBytes",
            offset + 8,
            "empty blob",
        ));
    }
    let start = bytes::to_usize(data_offset, "blob data offset")?;
    let len = bytes::to_usize(size, "blob size")?;
    bytes::slice(b, start, len, "blob data")?;
    let info = BlobInfo {
        metadata_offset: offset,
        dtype,
        size,
        data_offset,
        padding_bits,
    };
    info.element_count()?;
    Ok(info)
}

fn align_up(v: u64, a: u64, what: &str) -> Result<u64> {
    let r = v % a;
    if r == 0 {
        Ok(v)
    } else {
        bytes::add(v, a - r, what)
    }
}

/// Enumerates the blobs as the reference reader does: the first record at 64,
/// each next at `align64(data_offset + size)`.
pub fn list_blobs(b: &[u8]) -> Result<Vec<BlobInfo>> {
    let count = read_header(b)?;
    let mut out = Vec::with_capacity((count as usize).min(b.len() / 64));
    let mut off = ALIGN;
    for _ in 0..count {
        let info = blob_at(b, off)?;
        let end = bytes::add(info.data_offset, info.size, "blob end")?;
        let next = align_up(end, ALIGN, "next blob offset")?;
        // A data offset that points back at (or before) its own record would make
        // the walk revisit it `count` times: each record must move forward, which
        // also bounds the loop (and `out`) by the file length / 64.
        if next <= off {
            return Err(Error::format(
                "blob_metadata.offset",
                off + 16,
                format!(
                    "blob data [{}, {end}) does not lie after its metadata record at {off}",
                    info.data_offset
                ),
            ));
        }
        off = next;
        out.push(info);
    }
    Ok(out)
}

/// Unpacks `n` elements of `bits` bits (little-endian bit order: element i at
/// bits `[i*bits, (i+1)*bits)` of the byte stream, LSB first). `signed`
/// sign-extends (Int4).
pub fn unpack_bits(data: &[u8], bits: u32, n: usize, signed: bool) -> Vec<i32> {
    let mut out = Vec::with_capacity(n.min(data.len().saturating_mul(8)));
    let mask = (1u32 << bits) - 1;
    for i in 0..n {
        let bit = i * bits as usize;
        let mut v: u32 = 0;
        for k in 0..bits as usize {
            let p = bit + k;
            let byte = data.get(p / 8).copied().unwrap_or(0);
            v |= u32::from((byte >> (p % 8)) & 1) << k;
        }
        let v = v & mask;
        out.push(if signed && v & (1 << (bits - 1)) != 0 {
            v as i32 - (1 << bits)
        } else {
            v as i32
        });
    }
    out
}

/// Packs values into `bits`-bit little-endian bit order; returns bytes and the
/// padding bits of the last byte. Fails when a value is out of range.
pub fn pack_bits(values: &[i32], bits: u32, signed: bool) -> Result<(Vec<u8>, u64)> {
    let (lo, hi) = if signed {
        (-(1i32 << (bits - 1)), (1i32 << (bits - 1)) - 1)
    } else {
        (0, (1i32 << bits) - 1)
    };
    let total = values.len() * bits as usize;
    let mut out = vec![0u8; total.div_ceil(8)];
    for (i, &v) in values.iter().enumerate() {
        if v < lo || v > hi {
            return Err(Error::invalid_argument(format!(
                "value {v} does not fit {bits} bits"
            )));
        }
        let u = (v as u32) & ((1u32 << bits) - 1);
        for k in 0..bits as usize {
            let p = i * bits as usize + k;
            if (u >> k) & 1 == 1 {
                out[p / 8] |= 1 << (p % 8);
            }
        }
    }
    Ok((out, ((8 - total % 8) % 8) as u64))
}

/// OCP FP8 E4M3FN to f32 (bias 7, no infinities, S.1111.111 is NaN).
pub fn f8e4m3fn_to_f32(b: u8) -> f32 {
    let sign = if b & 0x80 != 0 { -1.0 } else { 1.0 };
    let exp = i32::from((b >> 3) & 0xF);
    let man = f32::from(b & 0x7);
    if exp == 0xF && b & 0x7 == 0x7 {
        return f32::NAN;
    }
    if exp == 0 {
        sign * man / 8.0 * 2f32.powi(-6)
    } else {
        sign * (1.0 + man / 8.0) * 2f32.powi(exp - 7)
    }
}

/// OCP FP8 E5M2 to f32 (the top byte of an IEEE binary16).
pub fn f8e5m2_to_f32(b: u8) -> f32 {
    half::f16::from_bits(u16::from(b) << 8).to_f32()
}

/// Appends blobs the way coremltools' `StorageWriter` does.
#[derive(Debug, Clone)]
pub struct BlobWriter {
    buf: Vec<u8>,
    count: u32,
}

impl Default for BlobWriter {
    fn default() -> Self {
        Self::new()
    }
}

impl BlobWriter {
    /// An empty storage (header only).
    pub fn new() -> Self {
        let mut buf = vec![0u8; 64];
        buf[4..8].copy_from_slice(&VERSION.to_le_bytes());
        BlobWriter { buf, count: 0 }
    }

    /// Adds raw data of `dtype`; returns the metadata offset.
    pub fn add_raw(&mut self, dtype: BlobDType, data: &[u8], padding_bits: u64) -> Result<u64> {
        if data.is_empty() {
            return Err(Error::invalid_argument("Core ML blobs cannot be empty"));
        }
        let m = (self.buf.len() as u64).div_ceil(ALIGN) * ALIGN;
        self.buf.resize(m as usize, 0);
        let mut md = [0u8; 64];
        md[0..4].copy_from_slice(&SENTINEL.to_le_bytes());
        md[4..8].copy_from_slice(&(dtype as u32).to_le_bytes());
        md[8..16].copy_from_slice(&(data.len() as u64).to_le_bytes());
        md[16..24].copy_from_slice(&(m + 64).to_le_bytes());
        md[24..32].copy_from_slice(&padding_bits.to_le_bytes());
        self.buf.extend_from_slice(&md);
        self.buf.extend_from_slice(data);
        self.count += 1;
        self.buf[0..4].copy_from_slice(&self.count.to_le_bytes());
        let info = BlobInfo {
            metadata_offset: m,
            dtype,
            size: data.len() as u64,
            data_offset: m + 64,
            padding_bits,
        };
        info.element_count()?;
        Ok(m)
    }

    /// Adds sub-byte values (Int4, UInt1/2/3/4/6) packed little-endian.
    pub fn add_packed(&mut self, dtype: BlobDType, values: &[i32]) -> Result<u64> {
        if !dtype.is_sub_byte() {
            return Err(Error::invalid_argument(format!(
                "{} is not a sub-byte type",
                dtype.name()
            )));
        }
        let (b, pad) = pack_bits(values, dtype.bits(), dtype == BlobDType::Int4)?;
        self.add_raw(dtype, &b, pad)
    }

    /// The finished `weight.bin` bytes.
    pub fn finish(self) -> Vec<u8> {
        self.buf
    }
}

/// Whether `path` is a directory holding `manifest.json` and `weight.bin`.
pub fn is_blob_dir(path: &Path) -> bool {
    path.is_dir() && path.join("manifest.json").is_file()
}

/// Writes `model` as `dir/weight.bin` + `dir/manifest.json` (the directory is
/// created if missing). Every tensor is stored with its own dtype; metadata and
/// vocabulary go into the manifest, so the model reads back complete.
pub fn write_dir(model: &ModelFile, dir: &Path) -> Result<()> {
    std::fs::create_dir_all(dir).map_err(|e| Error::io(dir.display(), e))?;
    let mut w = BlobWriter::new();
    let mut entries = Vec::with_capacity(model.tensors.len());
    for t in &model.tensors {
        let data = model.tensor_bytes(t);
        let dt = BlobDType::from_dtype(t.dtype);
        let offset = if data.is_empty() {
            Value::Null
        } else {
            json!(w.add_raw(dt, data, 0)?)
        };
        entries.push(json!({
            "name": t.name,
            "dtype": dt.name(),
            "shape": t.shape,
            "offset": offset,
        }));
    }
    let vocab = match &model.vocab {
        None => Value::Null,
        Some(v) => {
            let s = v.specials();
            json!({"tokens": v.tokens(), "pad": s.pad, "unk": s.unk, "cls": s.cls,
                   "sep": s.sep, "mask": s.mask})
        }
    };
    let manifest = json!({
        "format": MANIFEST_FORMAT,
        "version": 1,
        "blob": "weight.bin",
        "metadata": model.metadata,
        "vocab": vocab,
        "tensors": entries,
    });
    let text = serde_json::to_string_pretty(&manifest)
        .map_err(|e| Error::new(ErrorKind::Internal, format!("manifest JSON: {e}")))?;
    // Each file atomically; the manifest last, so that a folder with a
    // manifest has the blob it describes.
    write_file_atomically(&dir.join("weight.bin"), &w.finish())?;
    write_file_atomically(&dir.join("manifest.json"), text.as_bytes())
}

fn write_file_atomically(path: &Path, bytes: &[u8]) -> Result<()> {
    crate::atomic_write::atomic_write(path, |w| {
        w.write_all(bytes).map_err(|e| Error::io(path.display(), e))
    })
}

fn manifest_err(detail: impl Into<String>) -> Error {
    Error::new(
        ErrorKind::Format,
        format!("manifest.json: {}", detail.into()),
    )
}

/// Reads a directory written by [`write_dir`] (or any `weight.bin` with a
/// manifest in that schema).
pub fn read_dir(dir: &Path, opts: ReadOptions) -> Result<ModelFile> {
    let mpath = dir.join("manifest.json");
    let text = std::fs::read_to_string(&mpath).map_err(|e| Error::io(mpath.display(), e))?;
    let manifest: Value =
        serde_json::from_str(&text).map_err(|e| manifest_err(format!("invalid JSON: {e}")))?;
    let blob_name = manifest
        .get("blob")
        .and_then(Value::as_str)
        .unwrap_or("weight.bin");
    if blob_name.contains('/') || blob_name.contains('\\') || blob_name == ".." {
        return Err(manifest_err(
            "'blob' must be a file name in the same directory",
        ));
    }
    let bpath = dir.join(blob_name);
    let backing = Arc::new(Backing::map(&bpath)?);
    from_parts(backing, &manifest, opts).map_err(|e| e.context(dir.display()))
}

/// Builds a [`ModelFile`] from `weight.bin` bytes and a parsed manifest.
pub fn from_parts(
    backing: Arc<Backing>,
    manifest: &Value,
    _opts: ReadOptions,
) -> Result<ModelFile> {
    if manifest.get("format").and_then(Value::as_str) != Some(MANIFEST_FORMAT) {
        return Err(manifest_err(format!("'format' is not '{MANIFEST_FORMAT}'")));
    }
    match manifest.get("version").and_then(Value::as_u64) {
        Some(1) => {}
        v => {
            return Err(Error::unsupported(format!(
                "manifest version {v:?} (only 1)"
            )))
        }
    }
    let b = backing.bytes();
    let count = read_header(b)?;
    let mut metadata = BTreeMap::new();
    if let Some(m) = manifest.get("metadata").and_then(Value::as_object) {
        for (k, v) in m {
            let s = match v {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            metadata.insert(k.clone(), s);
        }
    }
    let vocab = match manifest.get("vocab") {
        None | Some(Value::Null) => None,
        Some(v) => Some(parse_vocab(v)?),
    };
    let list = manifest
        .get("tensors")
        .and_then(Value::as_array)
        .ok_or_else(|| manifest_err("'tensors' is missing or not a list"))?;
    let mut tensors = Vec::with_capacity(list.len());
    for (i, e) in list.iter().enumerate() {
        let name = e
            .get("name")
            .and_then(Value::as_str)
            .ok_or_else(|| manifest_err(format!("tensor {i} has no name")))?;
        let dname = e.get("dtype").and_then(Value::as_str).unwrap_or("");
        let dt = BlobDType::from_name(dname)
            .ok_or_else(|| manifest_err(format!("tensor '{name}': unknown dtype '{dname}'")))?;
        let shape: Vec<usize> = e
            .get("shape")
            .and_then(Value::as_array)
            .ok_or_else(|| manifest_err(format!("tensor '{name}' has no shape")))?
            .iter()
            .map(|d| d.as_u64().and_then(|d| usize::try_from(d).ok()))
            .collect::<Option<_>>()
            .ok_or_else(|| manifest_err(format!("tensor '{name}': bad shape")))?;
        let numel = bytes::product(&shape, name)?;
        let offset = e.get("offset").and_then(Value::as_u64);
        let Some(offset) = offset else {
            if numel != 0 {
                return Err(manifest_err(format!("tensor '{name}' has no blob offset")));
            }
            tensors.push(TensorEntry::owned_bytes(name, dt.read_dtype(), shape, &[]));
            continue;
        };
        let info = blob_at(b, offset).map_err(|err| err.context(format!("tensor '{name}'")))?;
        if info.dtype != dt {
            return Err(manifest_err(format!(
                "tensor '{name}': manifest says {}, blob holds {}",
                dt.name(),
                info.dtype.name()
            )));
        }
        let n = info.element_count()?;
        if n != numel as u64 {
            return Err(manifest_err(format!(
                "tensor '{name}': shape {shape:?} has {numel} elements, blob holds {n}"
            )));
        }
        let start = info.data_offset as usize;
        let len = info.size as usize;
        let data = &b[start..start + len];
        let entry = match dt {
            BlobDType::Int4
            | BlobDType::UInt1
            | BlobDType::UInt2
            | BlobDType::UInt3
            | BlobDType::UInt4
            | BlobDType::UInt6 => {
                let vals = unpack_bits(data, dt.bits(), numel, dt == BlobDType::Int4);
                let raw: Vec<u8> = vals.iter().map(|&v| v as i8 as u8).collect();
                TensorEntry::owned_bytes(name, dt.read_dtype(), shape, &raw)
            }
            BlobDType::Float8E4M3FN | BlobDType::Float8E5M2 => {
                let vals: Vec<f32> = data
                    .iter()
                    .map(|&x| {
                        if dt == BlobDType::Float8E4M3FN {
                            f8e4m3fn_to_f32(x)
                        } else {
                            f8e5m2_to_f32(x)
                        }
                    })
                    .collect();
                TensorEntry::owned_f32(name, shape, &vals)
            }
            _ => TensorEntry {
                name: name.to_string(),
                dtype: dt.read_dtype(),
                shape,
                data: TensorData::Mapped { start, len },
                file_offset: info.data_offset,
            },
        };
        tensors.push(entry);
    }
    let mut m = ModelFile::new(FormatKind::CoremlBlob, backing, metadata, vocab, tensors)?;
    m.details
        .push(("blob count".to_string(), count.to_string()));
    Ok(m)
}

fn parse_vocab(v: &Value) -> Result<Vocab> {
    let tokens: Vec<String> = v
        .get("tokens")
        .and_then(Value::as_array)
        .ok_or_else(|| manifest_err("vocab.tokens is missing"))?
        .iter()
        .map(|t| t.as_str().map(str::to_string))
        .collect::<Option<_>>()
        .ok_or_else(|| manifest_err("vocab.tokens holds a non-string"))?;
    let id = |k: &str| -> Result<u32> {
        v.get(k)
            .and_then(Value::as_u64)
            .and_then(|x| u32::try_from(x).ok())
            .ok_or_else(|| manifest_err(format!("vocab.{k} is missing")))
    };
    let specials = SpecialIds {
        pad: id("pad")?,
        unk: id("unk")?,
        cls: id("cls")?,
        sep: id("sep")?,
        mask: id("mask")?,
    };
    Vocab::new(tokens, specials)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_coremltools_bytes() {
        // The research note's verified output of coremltools 9.0 _BlobStorageWriter.
        let mut w = BlobWriter::new();
        let f: Vec<u8> = [1f32, 2.0, 3.0]
            .iter()
            .flat_map(|x| x.to_le_bytes())
            .collect();
        assert_eq!(w.add_raw(BlobDType::Float32, &f, 0).unwrap(), 64);
        assert_eq!(
            w.add_packed(BlobDType::Int4, &[-8, -2, 0, 2, 7]).unwrap(),
            192
        );
        assert_eq!(w.add_packed(BlobDType::UInt6, &[1, 63, 5]).unwrap(), 320);
        assert_eq!(
            w.add_raw(BlobDType::Float16, &[0x00, 0x3c], 0).unwrap(),
            448
        );
        assert_eq!(
            w.add_packed(BlobDType::UInt3, &[1, 2, 3, 4, 5, 6, 7])
                .unwrap(),
            576
        );
        let b = w.finish();
        assert_eq!(b.len(), 643);
        assert_eq!(&b[..8], &[5, 0, 0, 0, 2, 0, 0, 0]);
        assert_eq!(&b[256..259], &[0xe8, 0x20, 0x07]);
        assert_eq!(&b[384..387], &[0xc1, 0x5f, 0x00]);
        assert_eq!(&b[640..643], &[0xd1, 0x58, 0x1f]);
        let blobs = list_blobs(&b).unwrap();
        assert_eq!(blobs.len(), 5);
        assert_eq!(blobs[1].padding_bits, 4);
        assert_eq!(blobs[4].element_count().unwrap(), 7);
        assert_eq!(unpack_bits(&b[256..259], 4, 5, true), vec![-8, -2, 0, 2, 7]);
        assert_eq!(
            unpack_bits(&b[640..643], 3, 7, false),
            vec![1, 2, 3, 4, 5, 6, 7]
        );
    }

    #[test]
    fn fp8() {
        assert_eq!(f8e4m3fn_to_f32(0x38), 1.0);
        assert_eq!(f8e4m3fn_to_f32(0x7e), 448.0);
        assert!(f8e4m3fn_to_f32(0x7f).is_nan());
        assert_eq!(f8e4m3fn_to_f32(0x01), 2f32.powi(-9));
        assert_eq!(f8e5m2_to_f32(0x3c), 1.0);
        assert_eq!(f8e5m2_to_f32(0xc0), -2.0);
    }

    #[test]
    fn rejects_bad_padding() {
        let mut w = BlobWriter::new();
        w.add_raw(BlobDType::UInt2, &[0xff], 0).unwrap();
        let mut b = w.finish();
        b[64 + 24] = 1; // 1 padding bit is not a multiple of 2
        assert!(list_blobs(&b).is_err());
        b[64 + 24] = 8;
        assert!(list_blobs(&b).is_err());
    }
}
