//! PyTorch `torch.save` archives holding tensor state dicts (`.pt`, `.pth`,
//! `.bin`), read without Python or torch: BGE-M3's `sparse_linear.pt` and
//! `colbert_linear.pt` heads, `pytorch_model.bin`.
//!
//! A `torch.save` file (torch 1.6 and later) is a zip archive of stored
//! entries under one folder `<name>/`: `data.pkl` (the pickled object),
//! `data/<key>` (one entry per storage: the raw element bytes), `byteorder`
//! (`little`; absent in older files) and a few version records. Two parts are
//! read here by hand:
//!
//! - a minimal zip reader ([`zip_entries`]): the central directory (zip64
//!   records included, which torch always writes), stored entries only (torch
//!   never compresses; a deflated entry is refused by name), CRC32 checked on
//!   every entry used unless [`ReadOptions::verify_checksums`] is off;
//! - a restricted unpickler: the pickle opcodes that build data (protocols 2
//!   to 5: ints, floats, strings, bytes, tuples, lists, dicts, memo) plus
//!   `GLOBAL` / `STACK_GLOBAL` for an allowlist of names, `REDUCE` of those
//!   names only, `BUILD` (ignored: it sets `OrderedDict._metadata`) and
//!   `BINPERSID` for storage references. Anything else (another global such as
//!   `os.system`, `INST`, `OBJ`, `NEWOBJ`, text-protocol opcodes, ...) is
//!   refused with an error naming it. Nothing is ever executed: an allowed
//!   name maps to a fixed Rust action (make an empty dict, record a tensor).
//!
//! Every size read from the file is checked before use (bounds, overflow);
//! the memo is a map (its indices come from the file), the unpickler is a loop
//! (no recursion) and the walk of nested dicts has a depth and a visit budget.
//! Tensors with a contiguous layout borrow their bytes from the input;
//! other layouts (transposed views, broadcast strides) are gathered into owned
//! row-major bytes, at most as many bytes in total as the input has.
//!
//! `docs/formats/torch_pt.md` lists what is accepted and what is refused.
//!
//! # Panics
//! Never, for any input.

use std::borrow::Cow;
use std::collections::HashMap;
use std::path::Path;
use std::rc::Rc;

use super::bytes::{self, Cursor};
use super::{convert_to_f32, DType, ReadOptions};
use crate::error::{Error, ErrorKind, Result};

/// Most dimensions of a tensor.
pub const MAX_NDIM: usize = 32;

/// Deepest nesting of dicts (and lists) in a state dict.
pub const MAX_DEPTH: usize = 32;

/// Longest tensor name (key path), in bytes.
pub const MAX_NAME: usize = 4096;

/// Longest module or name of a pickle `GLOBAL`, in bytes.
const MAX_GLOBAL_LEN: usize = 256;

/// Element type of a torch storage.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PtDType {
    /// `torch.float64` (`DoubleStorage`).
    F64,
    /// `torch.float32` (`FloatStorage`).
    F32,
    /// `torch.float16` (`HalfStorage`).
    F16,
    /// `torch.bfloat16` (`BFloat16Storage`).
    BF16,
    /// `torch.int64` (`LongStorage`).
    I64,
    /// `torch.int32` (`IntStorage`).
    I32,
    /// `torch.int16` (`ShortStorage`).
    I16,
    /// `torch.int8` (`CharStorage`).
    I8,
    /// `torch.uint8` (`ByteStorage`).
    U8,
    /// `torch.bool` (`BoolStorage`), one byte per element.
    Bool,
}

impl PtDType {
    /// Every storage type: `(torch name, dtype)`.
    const STORAGES: [(&'static str, PtDType); 10] = [
        ("DoubleStorage", PtDType::F64),
        ("FloatStorage", PtDType::F32),
        ("HalfStorage", PtDType::F16),
        ("BFloat16Storage", PtDType::BF16),
        ("LongStorage", PtDType::I64),
        ("IntStorage", PtDType::I32),
        ("ShortStorage", PtDType::I16),
        ("CharStorage", PtDType::I8),
        ("ByteStorage", PtDType::U8),
        ("BoolStorage", PtDType::Bool),
    ];

    /// Bytes per element.
    pub fn size(self) -> usize {
        match self {
            PtDType::F64 | PtDType::I64 => 8,
            PtDType::F32 | PtDType::I32 => 4,
            PtDType::F16 | PtDType::BF16 | PtDType::I16 => 2,
            PtDType::I8 | PtDType::U8 | PtDType::Bool => 1,
        }
    }

    /// The storage class name torch pickles (`FloatStorage`, ...).
    pub fn storage_name(self) -> &'static str {
        Self::STORAGES
            .iter()
            .find(|(_, d)| *d == self)
            .map_or("?", |(n, _)| n)
    }

    /// Lower-case name (`f64`, `f32`, `f16`, `bf16`, `i64`, ..., `bool`).
    pub fn name(self) -> &'static str {
        match self {
            PtDType::F64 => "f64",
            PtDType::BF16 => "bf16",
            PtDType::I64 => "i64",
            PtDType::Bool => "bool",
            other => other.to_dtype().map_or("?", DType::name),
        }
    }

    /// The crate's [`DType`] of the same layout, if it has one (not for
    /// `f64`, `i64`, `bool`).
    pub fn to_dtype(self) -> Option<DType> {
        Some(match self {
            PtDType::F32 => DType::F32,
            PtDType::F16 => DType::F16,
            PtDType::BF16 => DType::BF16,
            PtDType::I32 => DType::I32,
            PtDType::I16 => DType::I16,
            PtDType::I8 => DType::I8,
            PtDType::U8 => DType::U8,
            PtDType::F64 | PtDType::I64 | PtDType::Bool => return None,
        })
    }
}

impl std::fmt::Display for PtDType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// One tensor of a state dict.
#[derive(Debug, Clone, PartialEq)]
pub struct PtTensor<'a> {
    /// The key path in the state dict, nested keys joined with `.` (list
    /// items by their index).
    pub name: String,
    /// Element type.
    pub dtype: PtDType,
    /// Shape (row-major).
    pub shape: Vec<usize>,
    /// Strides in elements, as stored (the layout of the storage, not of
    /// [`PtTensor::data`]).
    pub strides: Vec<usize>,
    /// The storage key (`data/<key>` in the archive); tensors that share a
    /// storage have the same key.
    pub storage: String,
    /// Offset of the first element in the storage, in elements.
    pub storage_offset: usize,
    /// The elements in row-major order as little-endian bytes
    /// (`numel * dtype.size()` bytes): borrowed from the input when the
    /// stored layout is contiguous, gathered otherwise.
    pub data: Cow<'a, [u8]>,
}

impl PtTensor<'_> {
    /// Number of elements.
    pub fn numel(&self) -> usize {
        self.shape.iter().product()
    }

    /// True when the stored layout was row-major contiguous (the data is then
    /// borrowed from the input).
    pub fn is_contiguous(&self) -> bool {
        is_contiguous(&self.shape, &self.strides)
    }

    /// The values as f32 (`f64` and `i64` rounded, `bool` as 0 or 1).
    pub fn to_f32(&self) -> Vec<f32> {
        let b: &[u8] = &self.data;
        match self.dtype {
            PtDType::F64 => b
                .chunks_exact(8)
                .map(|c| f64::from_le_bytes(c.try_into().unwrap_or([0; 8])) as f32)
                .collect(),
            PtDType::I64 => b
                .chunks_exact(8)
                .map(|c| i64::from_le_bytes(c.try_into().unwrap_or([0; 8])) as f32)
                .collect(),
            PtDType::Bool => b.iter().map(|&x| f32::from(u8::from(x != 0))).collect(),
            other => match other.to_dtype() {
                Some(d) => convert_to_f32(d, b),
                None => Vec::new(),
            },
        }
    }

    /// The same tensor owning its bytes.
    pub fn into_owned(self) -> PtTensor<'static> {
        PtTensor {
            name: self.name,
            dtype: self.dtype,
            shape: self.shape,
            strides: self.strides,
            storage: self.storage,
            storage_offset: self.storage_offset,
            data: Cow::Owned(self.data.into_owned()),
        }
    }
}

/// Reads the tensors of a `torch.save`d state dict, in the dict's order,
/// checking CRC32s. See [`read_state_dict_with`].
///
/// # Errors
/// As [`read_state_dict_with`].
pub fn read_state_dict(bytes: &[u8]) -> Result<Vec<PtTensor<'_>>> {
    read_state_dict_with(bytes, ReadOptions::default())
}

/// Reads the tensors of a `torch.save`d state dict (a dict, possibly nested,
/// of tensors; other values such as ints or strings are skipped), in the
/// dict's order. Nested keys are joined with `.`.
///
/// # Errors
/// [`ErrorKind::UnknownFormat`] when `bytes` is not a zip archive (the pre-1.6
/// `torch.save` layout included); [`ErrorKind::Unsupported`] for a pickle
/// global or opcode outside the allowlist (named), a deflated or encrypted
/// entry, big-endian data; [`ErrorKind::Checksum`] for a CRC32 mismatch; else
/// [`ErrorKind::Format`] naming what is wrong (truncation, bad sizes, a
/// storage of the wrong length, strides outside the storage, ...).
pub fn read_state_dict_with(bytes: &[u8], opts: ReadOptions) -> Result<Vec<PtTensor<'_>>> {
    let archive = Archive::open(bytes, opts)?;
    let pkl = archive.entry(&format!("{}data.pkl", archive.prefix))?;
    let mut up = Unpickler::new(pkl, &archive);
    let root = up.run()?;
    up.flatten(root, bytes.len())
}

/// Reads the state dict of the file at `path`; the tensors own their bytes.
///
/// # Errors
/// [`ErrorKind::NotFound`] / [`ErrorKind::Io`] when the file cannot be read;
/// else as [`read_state_dict_with`] (with checksums verified), prefixed by the
/// path.
pub fn read_state_dict_path(path: &Path) -> Result<Vec<PtTensor<'static>>> {
    let data = std::fs::read(path).map_err(|e| Error::io(path.display(), e))?;
    let tensors = read_state_dict(&data).map_err(|e| e.context(path.display()))?;
    // Tensors sharing a storage would each copy it: bound the total.
    let total = tensors
        .iter()
        .try_fold(0usize, |a, t| a.checked_add(t.data.len()))
        .unwrap_or(usize::MAX);
    if total > data.len().saturating_mul(4) {
        return Err(Error::format(
            path.display(),
            0,
            format!(
                "the tensors of this state dict need {total} bytes when copied out of a {}-byte file (storages shared many times); read it with read_state_dict",
                data.len()
            ),
        ));
    }
    Ok(tensors.into_iter().map(PtTensor::into_owned).collect())
}

/// True for a zip archive with a `<name>/data.pkl` entry: a `torch.save` file
/// as far as its first bytes tell (a zip local header).
pub fn looks_like_torch_zip(b: &[u8]) -> bool {
    b.starts_with(b"PK\x03\x04")
}

// ---------------------------------------------------------------------------
// Zip

/// One entry of a zip central directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ZipEntry {
    /// The entry's name (UTF-8 or as given, lossily).
    pub name: String,
    /// Compression method (0 = stored, 8 = deflated).
    pub method: u16,
    /// General-purpose flags.
    pub flags: u16,
    /// CRC32 of the uncompressed data, as stored.
    pub crc32: u32,
    /// Compressed size.
    pub compressed_size: u64,
    /// Uncompressed size.
    pub size: u64,
    /// Offset of the local header.
    pub local_header: u64,
}

const SIG_LOCAL: u32 = 0x0403_4b50;
const SIG_CENTRAL: u32 = 0x0201_4b50;
const SIG_EOCD: u32 = 0x0605_4b50;
const SIG_EOCD64: u32 = 0x0606_4b50;
const SIG_EOCD64_LOCATOR: u32 = 0x0706_4b50;

/// The central directory of a zip archive (zip64 records followed), checked
/// to lie inside `data`.
///
/// # Errors
/// [`ErrorKind::UnknownFormat`] when there is no end-of-central-directory
/// record; [`ErrorKind::Format`] for a malformed or truncated directory;
/// [`ErrorKind::Unsupported`] for multi-disk archives.
pub fn zip_entries(data: &[u8]) -> Result<Vec<ZipEntry>> {
    if data.len() < 22 {
        return Err(not_zip(data));
    }
    // The end record is the last 22 bytes plus a comment of up to 65,535.
    let lowest = data.len().saturating_sub(22 + 0xFFFF);
    let mut eocd = None;
    let mut pos = data.len() - 22;
    loop {
        if data[pos..pos + 4] == SIG_EOCD.to_le_bytes() {
            let comment = usize::from(u16::from_le_bytes([data[pos + 20], data[pos + 21]]));
            if pos + 22 + comment <= data.len() {
                eocd = Some(pos);
                break;
            }
        }
        if pos == lowest {
            break;
        }
        pos -= 1;
    }
    let Some(eocd) = eocd else {
        return Err(not_zip(data));
    };
    let mut c = Cursor::new(data, eocd + 4);
    let disk = c.u16("zip end record: disk")?;
    let cd_disk = c.u16("zip end record: directory disk")?;
    let _on_disk = c.u16("zip end record: entries on disk")?;
    let mut count = u64::from(c.u16("zip end record: entries")?);
    let mut cd_size = u64::from(c.u32("zip end record: directory size")?);
    let mut cd_offset = u64::from(c.u32("zip end record: directory offset")?);
    if disk != 0 || cd_disk != 0 {
        return Err(Error::unsupported(
            "multi-disk zip archives are not supported",
        ));
    }
    // Zip64: the locator sits right before the end record.
    if eocd >= 20 {
        let mut l = Cursor::new(data, eocd - 20);
        if l.u32("zip64 locator")? == SIG_EOCD64_LOCATOR {
            let _disk = l.u32("zip64 locator: disk")?;
            let at = l.u64("zip64 locator: end record offset")?;
            let at = bytes::to_usize(at, "zip64 end record offset")?;
            let mut z = Cursor::new(data, at);
            if z.u32("zip64 end record")? != SIG_EOCD64 {
                return Err(Error::format(
                    "zip64 end record",
                    at as u64,
                    "bad signature",
                ));
            }
            let _size = z.u64("zip64 end record: size")?;
            let _made = z.u16("zip64 end record: version made by")?;
            let _need = z.u16("zip64 end record: version needed")?;
            let disk = z.u32("zip64 end record: disk")?;
            let cd_disk = z.u32("zip64 end record: directory disk")?;
            let _on_disk = z.u64("zip64 end record: entries on disk")?;
            count = z.u64("zip64 end record: entries")?;
            cd_size = z.u64("zip64 end record: directory size")?;
            cd_offset = z.u64("zip64 end record: directory offset")?;
            if disk != 0 || cd_disk != 0 {
                return Err(Error::unsupported(
                    "multi-disk zip archives are not supported",
                ));
            }
        }
    }
    let start = bytes::to_usize(cd_offset, "zip central directory offset")?;
    let size = bytes::to_usize(cd_size, "zip central directory size")?;
    let dir = bytes::slice(data, start, size, "zip central directory")?;
    // Each record has at least 46 bytes: the count cannot exceed that.
    if count > (size / 46) as u64 {
        return Err(Error::format(
            "zip central directory",
            cd_offset,
            format!("{count} entries do not fit in {size} bytes"),
        ));
    }
    let mut out = Vec::with_capacity(count as usize);
    let mut c = Cursor::new(dir, 0);
    for i in 0..count {
        let at = start + c.pos();
        let what = |f: &str| format!("zip central directory entry {i}: {f}");
        if c.u32(&what("signature"))? != SIG_CENTRAL {
            return Err(Error::format(
                what("signature"),
                at as u64,
                "not a central directory record",
            ));
        }
        let _made = c.u16(&what("version made by"))?;
        let _need = c.u16(&what("version needed"))?;
        let flags = c.u16(&what("flags"))?;
        let method = c.u16(&what("method"))?;
        let _time = c.u32(&what("time"))?;
        let crc32 = c.u32(&what("crc32"))?;
        let mut compressed_size = u64::from(c.u32(&what("compressed size"))?);
        let mut size = u64::from(c.u32(&what("size"))?);
        let name_len = usize::from(c.u16(&what("name length"))?);
        let extra_len = usize::from(c.u16(&what("extra length"))?);
        let comment_len = usize::from(c.u16(&what("comment length"))?);
        let _disk = c.u16(&what("disk"))?;
        let _iattr = c.u16(&what("internal attributes"))?;
        let _eattr = c.u32(&what("external attributes"))?;
        let mut local_header = u64::from(c.u32(&what("local header offset"))?);
        let name = String::from_utf8_lossy(c.bytes(name_len, &what("name"))?).into_owned();
        let extra = c.bytes(extra_len, &what("extra field"))?;
        c.bytes(comment_len, &what("comment"))?;
        // The zip64 extra field (id 1) holds, in this order, the fields whose
        // 32-bit value is 0xFFFFFFFF.
        let mut e = Cursor::new(extra, 0);
        while e.remaining() >= 4 {
            let id = e.u16(&what("extra id"))?;
            let n = usize::from(e.u16(&what("extra size"))?);
            let body = e.bytes(n, &what("extra body"))?;
            if id == 1 {
                let mut z = Cursor::new(body, 0);
                if size == 0xFFFF_FFFF {
                    size = z.u64(&what("zip64 size"))?;
                }
                if compressed_size == 0xFFFF_FFFF {
                    compressed_size = z.u64(&what("zip64 compressed size"))?;
                }
                if local_header == 0xFFFF_FFFF {
                    local_header = z.u64(&what("zip64 local header offset"))?;
                }
            }
        }
        out.push(ZipEntry {
            name,
            method,
            flags,
            crc32,
            compressed_size,
            size,
            local_header,
        });
    }
    Ok(out)
}

fn not_zip(data: &[u8]) -> Error {
    // The pre-1.6 torch.save layout is a bare pickle stream (protocol 2).
    if data.first() == Some(&0x80) {
        Error::new(
            ErrorKind::UnknownFormat,
            "not a zip archive: a bare pickle stream (the legacy torch.save layout before torch 1.6 is not supported; re-save with a current torch)",
        )
    } else {
        Error::new(
            ErrorKind::UnknownFormat,
            "not a zip archive (no end-of-central-directory record): not a torch.save file",
        )
    }
}

/// A `torch.save` archive: its entries by name and the folder prefix.
struct Archive<'a> {
    data: &'a [u8],
    entries: HashMap<String, ZipEntry>,
    prefix: String,
    verify: bool,
}

impl<'a> Archive<'a> {
    fn open(data: &'a [u8], opts: ReadOptions) -> Result<Archive<'a>> {
        let list = zip_entries(data)?;
        let mut entries = HashMap::with_capacity(list.len());
        let mut prefixes = Vec::new();
        for e in list {
            if let Some(p) = e.name.strip_suffix("data.pkl") {
                if p.is_empty() || (p.ends_with('/') && p.matches('/').count() == 1) {
                    prefixes.push(p.to_string());
                }
            }
            let name = e.name.clone();
            if entries.insert(name.clone(), e).is_some() {
                return Err(Error::format(
                    "zip central directory",
                    0,
                    format!("duplicate entry '{name}'"),
                ));
            }
        }
        let prefix = match prefixes.len() {
            1 => prefixes.remove(0),
            0 => {
                return Err(Error::format(
                    "torch archive",
                    0,
                    "no '<name>/data.pkl' entry: not a torch.save archive",
                ))
            }
            _ => {
                return Err(Error::format(
                    "torch archive",
                    0,
                    format!("several data.pkl entries ({})", prefixes.join(", ")),
                ))
            }
        };
        let a = Archive {
            data,
            entries,
            prefix,
            verify: opts.verify_checksums,
        };
        let bo = format!("{}byteorder", a.prefix);
        if a.entries.contains_key(&bo) {
            match a.entry(&bo)? {
                b"little" => {}
                b"big" => {
                    return Err(Error::unsupported(
                        "torch archive: big-endian storages (byteorder 'big') are not supported",
                    ))
                }
                other => {
                    return Err(Error::format(
                        &bo,
                        0,
                        format!("unknown byte order {:?}", String::from_utf8_lossy(other)),
                    ))
                }
            }
        }
        Ok(a)
    }

    /// The bytes of the stored entry `name`.
    fn entry(&self, name: &str) -> Result<&'a [u8]> {
        let e = self
            .entries
            .get(name)
            .ok_or_else(|| Error::format("torch archive", 0, format!("no entry '{name}'")))?;
        if e.flags & 1 != 0 {
            return Err(Error::unsupported(format!(
                "zip entry '{name}' is encrypted"
            )));
        }
        match e.method {
            0 => {}
            8 => {
                return Err(Error::unsupported(format!(
                    "zip entry '{name}' is deflated; torch.save stores entries uncompressed (was the archive re-zipped?)"
                )))
            }
            m => {
                return Err(Error::unsupported(format!(
                    "zip entry '{name}' uses compression method {m}"
                )))
            }
        }
        if e.compressed_size != e.size {
            return Err(Error::format(
                format!("zip entry '{name}'"),
                e.local_header,
                format!(
                    "stored entry with compressed size {} != size {}",
                    e.compressed_size, e.size
                ),
            ));
        }
        let at = bytes::to_usize(e.local_header, "zip local header offset")?;
        let what = |f: &str| format!("zip local header of '{name}': {f}");
        let mut c = Cursor::new(self.data, at);
        if c.u32(&what("signature"))? != SIG_LOCAL {
            return Err(Error::format(what("signature"), at as u64, "bad signature"));
        }
        c.bytes(22, &what("fields"))?;
        let name_len = usize::from(c.u16(&what("name length"))?);
        let extra_len = usize::from(c.u16(&what("extra length"))?);
        let local_name = c.bytes(name_len, &what("name"))?;
        if local_name != name.as_bytes() {
            return Err(Error::format(
                what("name"),
                at as u64,
                format!(
                    "'{}' differs from the central directory",
                    String::from_utf8_lossy(local_name)
                ),
            ));
        }
        c.bytes(extra_len, &what("extra field"))?;
        let len = bytes::to_usize(e.size, "zip entry size")?;
        let start = c.pos();
        let body = c.bytes(len, &format!("zip entry '{name}' data"))?;
        if self.verify {
            let crc = bytes::crc32(body);
            if crc != e.crc32 {
                return Err(Error::checksum(
                    format!("zip entry '{name}' (offset {start})"),
                    e.crc32,
                    crc,
                ));
            }
        }
        Ok(body)
    }
}

// ---------------------------------------------------------------------------
// Restricted unpickler

/// The globals a state dict uses; any other name is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Global {
    OrderedDict,
    RebuildTensorV2,
    RebuildTensor,
    RebuildParameter,
    RebuildParameterWithState,
    Storage(PtDType),
}

impl Global {
    fn lookup(module: &str, name: &str) -> Option<Global> {
        Some(match (module, name) {
            ("collections", "OrderedDict") => Global::OrderedDict,
            ("torch._utils", "_rebuild_tensor_v2") => Global::RebuildTensorV2,
            ("torch._utils", "_rebuild_tensor") => Global::RebuildTensor,
            ("torch._utils", "_rebuild_parameter") => Global::RebuildParameter,
            ("torch._utils", "_rebuild_parameter_with_state") => Global::RebuildParameterWithState,
            ("torch", n) => {
                let (_, d) = PtDType::STORAGES.iter().find(|(s, _)| *s == n)?;
                Global::Storage(*d)
            }
            _ => return None,
        })
    }

    fn name(self) -> String {
        match self {
            Global::OrderedDict => "collections.OrderedDict".into(),
            Global::RebuildTensorV2 => "torch._utils._rebuild_tensor_v2".into(),
            Global::RebuildTensor => "torch._utils._rebuild_tensor".into(),
            Global::RebuildParameter => "torch._utils._rebuild_parameter".into(),
            Global::RebuildParameterWithState => {
                "torch._utils._rebuild_parameter_with_state".into()
            }
            Global::Storage(d) => format!("torch.{}", d.storage_name()),
        }
    }
}

/// A storage named by a persistent id, its bytes checked.
#[derive(Debug)]
struct Storage<'a> {
    dtype: PtDType,
    key: String,
    numel: usize,
    bytes: &'a [u8],
}

/// A tensor as `_rebuild_tensor_v2` describes it (checked against its storage).
#[derive(Debug)]
struct TensorRec<'a> {
    storage: Rc<Storage<'a>>,
    offset: usize,
    shape: Vec<usize>,
    strides: Vec<usize>,
}

#[derive(Debug, Clone)]
enum Value<'a> {
    None,
    Bool,
    Int(i64),
    /// An integer wider than 64 bits (kept only as a marker).
    BigInt,
    Float,
    Str(Rc<str>),
    Bytes,
    Tuple(Rc<[Value<'a>]>),
    /// Index into `Unpickler::lists`.
    List(usize),
    /// Index into `Unpickler::dicts`.
    Dict(usize),
    Global(Global),
    Storage(Rc<Storage<'a>>),
    /// Index into `Unpickler::tensors`.
    Tensor(usize),
}

impl Value<'_> {
    fn kind(&self) -> &'static str {
        match self {
            Value::None => "None",
            Value::Bool => "bool",
            Value::Int(_) | Value::BigInt => "int",
            Value::Float => "float",
            Value::Str(_) => "str",
            Value::Bytes => "bytes",
            Value::Tuple(_) => "tuple",
            Value::List(_) => "list",
            Value::Dict(_) => "dict",
            Value::Global(_) => "global",
            Value::Storage(_) => "storage",
            Value::Tensor(_) => "tensor",
        }
    }
}

struct Unpickler<'a, 'z> {
    c: Cursor<'a>,
    archive: &'z Archive<'a>,
    stack: Vec<Value<'a>>,
    marks: Vec<usize>,
    memo: HashMap<u32, Value<'a>>,
    lists: Vec<Vec<Value<'a>>>,
    dicts: Vec<Vec<(Value<'a>, Value<'a>)>>,
    tensors: Vec<TensorRec<'a>>,
    storages: HashMap<String, Rc<Storage<'a>>>,
    /// Offset of the opcode being run (for messages).
    op_at: usize,
}

/// The name of a pickle opcode, for messages.
fn opcode_name(op: u8) -> &'static str {
    match op {
        b'(' => "MARK",
        b'.' => "STOP",
        b'0' => "POP",
        b'1' => "POP_MARK",
        b'2' => "DUP",
        b'F' => "FLOAT",
        b'I' => "INT",
        b'J' => "BININT",
        b'K' => "BININT1",
        b'L' => "LONG",
        b'M' => "BININT2",
        b'N' => "NONE",
        b'P' => "PERSID",
        b'Q' => "BINPERSID",
        b'R' => "REDUCE",
        b'S' => "STRING",
        b'T' => "BINSTRING",
        b'U' => "SHORT_BINSTRING",
        b'V' => "UNICODE",
        b'X' => "BINUNICODE",
        b'a' => "APPEND",
        b'b' => "BUILD",
        b'c' => "GLOBAL",
        b'd' => "DICT",
        b'}' => "EMPTY_DICT",
        b'e' => "APPENDS",
        b'g' => "GET",
        b'h' => "BINGET",
        b'i' => "INST",
        b'j' => "LONG_BINGET",
        b'l' => "LIST",
        b']' => "EMPTY_LIST",
        b'o' => "OBJ",
        b'p' => "PUT",
        b'q' => "BINPUT",
        b'r' => "LONG_BINPUT",
        b's' => "SETITEM",
        b't' => "TUPLE",
        b')' => "EMPTY_TUPLE",
        b'u' => "SETITEMS",
        b'G' => "BINFLOAT",
        b'B' => "BINBYTES",
        b'C' => "SHORT_BINBYTES",
        0x80 => "PROTO",
        0x81 => "NEWOBJ",
        0x82 => "EXT1",
        0x83 => "EXT2",
        0x84 => "EXT4",
        0x85 => "TUPLE1",
        0x86 => "TUPLE2",
        0x87 => "TUPLE3",
        0x88 => "NEWTRUE",
        0x89 => "NEWFALSE",
        0x8a => "LONG1",
        0x8b => "LONG4",
        0x8c => "SHORT_BINUNICODE",
        0x8d => "BINUNICODE8",
        0x8e => "BINBYTES8",
        0x8f => "EMPTY_SET",
        0x90 => "ADDITEMS",
        0x91 => "FROZENSET",
        0x92 => "NEWOBJ_EX",
        0x93 => "STACK_GLOBAL",
        0x94 => "MEMOIZE",
        0x95 => "FRAME",
        0x96 => "BYTEARRAY8",
        0x97 => "NEXT_BUFFER",
        0x98 => "READONLY_BUFFER",
        _ => "unknown",
    }
}

impl<'a, 'z> Unpickler<'a, 'z> {
    fn new(pkl: &'a [u8], archive: &'z Archive<'a>) -> Self {
        Unpickler {
            c: Cursor::new(pkl, 0),
            archive,
            stack: Vec::new(),
            marks: Vec::new(),
            memo: HashMap::new(),
            lists: Vec::new(),
            dicts: Vec::new(),
            tensors: Vec::new(),
            storages: HashMap::new(),
            op_at: 0,
        }
    }

    fn err(&self, detail: impl std::fmt::Display) -> Error {
        Error::format("data.pkl", self.op_at as u64, detail)
    }

    fn refused(&self, detail: impl std::fmt::Display) -> Error {
        Error::unsupported(format!(
            "data.pkl at offset {}: {detail} (a tensor state dict needs only dicts, tensors and their storages)",
            self.op_at
        ))
    }

    fn pop(&mut self) -> Result<Value<'a>> {
        let floor = self.marks.last().copied().unwrap_or(0);
        if self.stack.len() <= floor {
            return Err(self.err("pop from an empty stack"));
        }
        self.stack
            .pop()
            .ok_or_else(|| self.err("pop from an empty stack"))
    }

    fn top(&self) -> Result<&Value<'a>> {
        let floor = self.marks.last().copied().unwrap_or(0);
        if self.stack.len() <= floor {
            return Err(self.err("empty stack"));
        }
        self.stack.last().ok_or_else(|| self.err("empty stack"))
    }

    /// Pops everything above the last mark, and the mark.
    fn pop_mark(&mut self) -> Result<Vec<Value<'a>>> {
        let m = self
            .marks
            .pop()
            .ok_or_else(|| self.err("no MARK on the stack"))?;
        Ok(self.stack.split_off(m))
    }

    fn str_arg(&mut self, n: usize, what: &str) -> Result<Value<'a>> {
        let s = self.c.str(n, what)?;
        Ok(Value::Str(Rc::from(s)))
    }

    fn line(&mut self, what: &str) -> Result<&'a str> {
        let at = self.c.pos();
        let rest = self.c.bytes(self.c.remaining(), what)?;
        let n = rest
            .iter()
            .take(MAX_GLOBAL_LEN + 1)
            .position(|&b| b == b'\n')
            .ok_or_else(|| Error::format(what, at as u64, "no newline within 256 bytes"))?;
        self.c.seek(at + n + 1);
        bytes::utf8(&rest[..n], what, at)
    }

    fn global(&mut self, module: &str, name: &str) -> Result<Value<'a>> {
        match Global::lookup(module, name) {
            Some(g) => Ok(Value::Global(g)),
            None => Err(self.refused(format!("pickle global '{module}.{name}' is not allowed"))),
        }
    }

    fn memo_get(&self, i: u32) -> Result<Value<'a>> {
        self.memo
            .get(&i)
            .cloned()
            .ok_or_else(|| self.err(format!("memo entry {i} was never stored")))
    }

    fn memo_put(&mut self, i: u32) -> Result<()> {
        let v = self.top()?.clone();
        self.memo.insert(i, v);
        Ok(())
    }

    fn dict_of(&self, v: &Value<'a>, op: &str) -> Result<usize> {
        match v {
            Value::Dict(d) => Ok(*d),
            other => Err(self.err(format!("{op} on a {}", other.kind()))),
        }
    }

    /// Runs the pickle to STOP; returns the object it built.
    fn run(&mut self) -> Result<Value<'a>> {
        loop {
            self.op_at = self.c.pos();
            let op = self.c.u8("pickle opcode (no STOP before the end)")?;
            match op {
                0x80 => {
                    let p = self.c.u8("PROTO version")?;
                    if !(2..=5).contains(&p) {
                        return Err(self.refused(format!("pickle protocol {p}")));
                    }
                }
                0x95 => {
                    self.c.u64("FRAME length")?;
                }
                b'.' => return self.pop(),
                b'(' => self.marks.push(self.stack.len()),
                b'0' => {
                    self.pop()?;
                }
                b'1' => {
                    self.pop_mark()?;
                }
                b'2' => {
                    let v = self.top()?.clone();
                    self.stack.push(v);
                }
                b'N' => self.stack.push(Value::None),
                0x88 => self.stack.push(Value::Bool),
                0x89 => self.stack.push(Value::Bool),
                b'J' => {
                    let v = self.c.i32("BININT")?;
                    self.stack.push(Value::Int(i64::from(v)));
                }
                b'K' => {
                    let v = self.c.u8("BININT1")?;
                    self.stack.push(Value::Int(i64::from(v)));
                }
                b'M' => {
                    let v = self.c.u16("BININT2")?;
                    self.stack.push(Value::Int(i64::from(v)));
                }
                0x8a => {
                    let n = usize::from(self.c.u8("LONG1 length")?);
                    let b = self.c.bytes(n, "LONG1")?;
                    self.stack.push(long(b));
                }
                b'G' => {
                    self.c.bytes(8, "BINFLOAT")?;
                    self.stack.push(Value::Float);
                }
                b'X' => {
                    let n = self.c.u32("BINUNICODE length")? as usize;
                    let v = self.str_arg(n, "BINUNICODE")?;
                    self.stack.push(v);
                }
                0x8c => {
                    let n = usize::from(self.c.u8("SHORT_BINUNICODE length")?);
                    let v = self.str_arg(n, "SHORT_BINUNICODE")?;
                    self.stack.push(v);
                }
                0x8d => {
                    let n = self.c.u64("BINUNICODE8 length")?;
                    let n = bytes::to_usize(n, "BINUNICODE8 length")?;
                    let v = self.str_arg(n, "BINUNICODE8")?;
                    self.stack.push(v);
                }
                b'C' => {
                    let n = usize::from(self.c.u8("SHORT_BINBYTES length")?);
                    self.c.bytes(n, "SHORT_BINBYTES")?;
                    self.stack.push(Value::Bytes);
                }
                b'B' => {
                    let n = self.c.u32("BINBYTES length")? as usize;
                    self.c.bytes(n, "BINBYTES")?;
                    self.stack.push(Value::Bytes);
                }
                0x8e => {
                    let n = self.c.u64("BINBYTES8 length")?;
                    let n = bytes::to_usize(n, "BINBYTES8 length")?;
                    self.c.bytes(n, "BINBYTES8")?;
                    self.stack.push(Value::Bytes);
                }
                b')' => self.stack.push(Value::Tuple(Rc::from(Vec::new()))),
                b't' => {
                    let items = self.pop_mark()?;
                    self.stack.push(Value::Tuple(Rc::from(items)));
                }
                0x85..=0x87 => {
                    let n = usize::from(op - 0x84);
                    let mut items = Vec::with_capacity(n);
                    for _ in 0..n {
                        items.push(self.pop()?);
                    }
                    items.reverse();
                    self.stack.push(Value::Tuple(Rc::from(items)));
                }
                b']' => {
                    self.lists.push(Vec::new());
                    self.stack.push(Value::List(self.lists.len() - 1));
                }
                b'l' => {
                    let items = self.pop_mark()?;
                    self.lists.push(items);
                    self.stack.push(Value::List(self.lists.len() - 1));
                }
                b'a' | b'e' => {
                    let items = if op == b'a' {
                        vec![self.pop()?]
                    } else {
                        self.pop_mark()?
                    };
                    let l = match self.top()? {
                        Value::List(l) => *l,
                        other => {
                            return Err(self.err(format!(
                                "{} on a {}",
                                opcode_name(op),
                                other.kind()
                            )))
                        }
                    };
                    self.lists[l].extend(items);
                }
                b'}' => {
                    self.dicts.push(Vec::new());
                    self.stack.push(Value::Dict(self.dicts.len() - 1));
                }
                b'd' => {
                    let items = self.pop_mark()?;
                    let pairs = pairs(items).ok_or_else(|| self.err("DICT of an odd count"))?;
                    self.dicts.push(pairs);
                    self.stack.push(Value::Dict(self.dicts.len() - 1));
                }
                b's' => {
                    let v = self.pop()?;
                    let k = self.pop()?;
                    let d = self.dict_of(self.top()?, "SETITEM")?;
                    self.dicts[d].push((k, v));
                }
                b'u' => {
                    let items = self.pop_mark()?;
                    let d = self.dict_of(self.top()?, "SETITEMS")?;
                    let p = pairs(items).ok_or_else(|| self.err("SETITEMS of an odd count"))?;
                    self.dicts[d].extend(p);
                }
                b'h' => {
                    let i = self.c.u8("BINGET index")?;
                    let v = self.memo_get(u32::from(i))?;
                    self.stack.push(v);
                }
                b'j' => {
                    let i = self.c.u32("LONG_BINGET index")?;
                    let v = self.memo_get(i)?;
                    self.stack.push(v);
                }
                b'q' => {
                    let i = self.c.u8("BINPUT index")?;
                    self.memo_put(u32::from(i))?;
                }
                b'r' => {
                    let i = self.c.u32("LONG_BINPUT index")?;
                    self.memo_put(i)?;
                }
                0x94 => {
                    let i =
                        u32::try_from(self.memo.len()).map_err(|_| self.err("memo overflow"))?;
                    self.memo_put(i)?;
                }
                b'c' => {
                    let module = self.line("GLOBAL module")?;
                    let name = self.line("GLOBAL name")?;
                    let g = self.global(module, name)?;
                    self.stack.push(g);
                }
                0x93 => {
                    let name = self.pop()?;
                    let module = self.pop()?;
                    let (Value::Str(module), Value::Str(name)) = (module, name) else {
                        return Err(self.err("STACK_GLOBAL of non-strings"));
                    };
                    let g = self.global(&module, &name)?;
                    self.stack.push(g);
                }
                b'Q' => {
                    let pid = self.pop()?;
                    let s = self.persistent(pid)?;
                    self.stack.push(Value::Storage(s));
                }
                b'R' => {
                    let args = self.pop()?;
                    let f = self.pop()?;
                    let v = self.reduce(f, args)?;
                    self.stack.push(v);
                }
                b'b' => {
                    let _state = self.pop()?;
                    match self.top()? {
                        // OrderedDict._metadata, a Parameter's state: not needed.
                        Value::Dict(_) | Value::Tensor(_) => {}
                        other => {
                            let k = other.kind();
                            return Err(self.refused(format!("BUILD on a {k}")));
                        }
                    }
                }
                other => {
                    return Err(self.refused(format!(
                        "pickle opcode {} (0x{other:02x}) is not allowed",
                        opcode_name(other)
                    )))
                }
            }
        }
    }

    /// A storage from a persistent id `('storage', torch.XStorage, key,
    /// location, numel)`, its archive entry checked against its size.
    fn persistent(&mut self, pid: Value<'a>) -> Result<Rc<Storage<'a>>> {
        let Value::Tuple(t) = pid else {
            return Err(self.err(format!("persistent id is a {}, not a tuple", pid.kind())));
        };
        let [Value::Str(tag), ty, Value::Str(key), Value::Str(_location), numel] = &t[..] else {
            return Err(self.err("persistent id is not ('storage', type, key, location, numel)"));
        };
        if &**tag != "storage" {
            return Err(self.refused(format!("persistent id kind '{tag}'")));
        }
        let dtype = match ty {
            Value::Global(Global::Storage(d)) => *d,
            Value::Global(g) => {
                return Err(self.err(format!("persistent id type {} is not a storage", g.name())))
            }
            other => return Err(self.err(format!("persistent id type is a {}", other.kind()))),
        };
        let numel = self.usize_of(numel, "storage numel")?;
        if let Some(s) = self.storages.get(&**key) {
            if s.dtype != dtype || s.numel != numel {
                return Err(self.err(format!(
                    "storage '{key}' is referenced as {numel} x {dtype} and as {} x {}",
                    s.numel, s.dtype
                )));
            }
            return Ok(Rc::clone(s));
        }
        let name = format!("{}data/{key}", self.archive.prefix);
        let bytes = self.archive.entry(&name)?;
        let need = numel.checked_mul(dtype.size());
        if need != Some(bytes.len()) {
            return Err(self.err(format!(
                "storage '{key}' declares {numel} x {dtype} elements but its entry has {} bytes",
                bytes.len()
            )));
        }
        let s = Rc::new(Storage {
            dtype,
            key: key.to_string(),
            numel,
            bytes,
        });
        self.storages.insert(key.to_string(), Rc::clone(&s));
        Ok(s)
    }

    fn usize_of(&self, v: &Value<'a>, what: &str) -> Result<usize> {
        match v {
            Value::Int(i) => usize::try_from(*i)
                .map_err(|_| self.err(format!("{what} {i} is negative or too large"))),
            other => Err(self.err(format!("{what} is a {}, not an int", other.kind()))),
        }
    }

    fn dims(&self, v: &Value<'a>, what: &str) -> Result<Vec<usize>> {
        let Value::Tuple(t) = v else {
            return Err(self.err(format!("{what} is a {}, not a tuple", v.kind())));
        };
        if t.len() > MAX_NDIM {
            return Err(self.err(format!(
                "{what} has {} dimensions (at most {MAX_NDIM})",
                t.len()
            )));
        }
        t.iter().map(|d| self.usize_of(d, what)).collect()
    }

    fn reduce(&mut self, f: Value<'a>, args: Value<'a>) -> Result<Value<'a>> {
        let Value::Global(g) = f else {
            return Err(self.refused(format!("REDUCE of a {} (not a callable)", f.kind())));
        };
        let Value::Tuple(args) = args else {
            return Err(self.err(format!("REDUCE arguments are a {}", args.kind())));
        };
        match g {
            Global::OrderedDict => {
                if !args.is_empty() {
                    return Err(self.refused("collections.OrderedDict with arguments"));
                }
                self.dicts.push(Vec::new());
                Ok(Value::Dict(self.dicts.len() - 1))
            }
            Global::RebuildTensorV2 | Global::RebuildTensor => {
                let ok = match g {
                    Global::RebuildTensorV2 => (6..=7).contains(&args.len()),
                    _ => args.len() == 4,
                };
                if !ok {
                    return Err(self.err(format!("{} with {} arguments", g.name(), args.len())));
                }
                let Value::Storage(storage) = &args[0] else {
                    return Err(self.err(format!("{}: storage is a {}", g.name(), args[0].kind())));
                };
                let offset = self.usize_of(&args[1], "storage offset")?;
                let shape = self.dims(&args[2], "size")?;
                let strides = self.dims(&args[3], "stride")?;
                if shape.len() != strides.len() {
                    return Err(self.err(format!(
                        "size {shape:?} and stride {strides:?} differ in length"
                    )));
                }
                let rec = TensorRec {
                    storage: Rc::clone(storage),
                    offset,
                    shape,
                    strides,
                };
                check_bounds(&rec).map_err(|d| self.err(d))?;
                self.tensors.push(rec);
                Ok(Value::Tensor(self.tensors.len() - 1))
            }
            Global::RebuildParameter | Global::RebuildParameterWithState => {
                let n = if g == Global::RebuildParameter { 3 } else { 4 };
                if args.len() != n {
                    return Err(self.err(format!("{} with {} arguments", g.name(), args.len())));
                }
                match &args[0] {
                    t @ Value::Tensor(_) => Ok(t.clone()),
                    other => Err(self.err(format!("{}: data is a {}", g.name(), other.kind()))),
                }
            }
            Global::Storage(_) => Err(self.refused(format!("REDUCE of {}", g.name()))),
        }
    }

    /// The tensors of `root` (a dict, nested dicts and lists followed), in
    /// order, later duplicate keys replacing earlier ones in place.
    fn flatten(mut self, root: Value<'a>, budget: usize) -> Result<Vec<PtTensor<'a>>> {
        if !matches!(root, Value::Dict(_)) {
            return Err(Error::format(
                "data.pkl",
                0,
                format!("the pickled object is a {}, not a state dict", root.kind()),
            ));
        }
        let mut out: Vec<PtTensor<'a>> = Vec::new();
        let mut index: HashMap<String, usize> = HashMap::new();
        let mut owned = 0usize;
        // Visits are bounded so that dicts shared many times cannot explode.
        let mut visits = 0usize;
        let max_visits = self.c.pos().max(64);
        // Explicit stack of (name prefix, value, depth).
        let mut todo: Vec<(String, Value<'a>, usize)> = vec![(String::new(), root, 0)];
        while let Some((name, v, depth)) = todo.pop() {
            let children: Vec<(String, Value<'a>)> = match v {
                Value::Tensor(i) => {
                    let t = self.tensor(i, name.clone(), &mut owned, budget)?;
                    match index.get(&name) {
                        Some(&j) => out[j] = t,
                        None => {
                            index.insert(name, out.len());
                            out.push(t);
                        }
                    }
                    continue;
                }
                Value::Dict(d) => {
                    let items = std::mem::take(&mut self.dicts[d]);
                    let mut kids = Vec::with_capacity(items.len());
                    for (k, v) in &items {
                        let key = match k {
                            Value::Str(s) => s.to_string(),
                            Value::Int(i) => i.to_string(),
                            other => {
                                return Err(Error::format(
                                    "data.pkl",
                                    0,
                                    format!("state dict key '{name}' has a {} key", other.kind()),
                                ))
                            }
                        };
                        kids.push((join(&name, &key)?, v.clone()));
                    }
                    self.dicts[d] = items;
                    kids
                }
                Value::List(l) => self.lists[l]
                    .iter()
                    .enumerate()
                    .map(|(i, v)| Ok((join(&name, &i.to_string())?, v.clone())))
                    .collect::<Result<Vec<_>>>()?,
                // Other values (ints, strings, None, ...) are not tensors.
                _ => continue,
            };
            if depth >= MAX_DEPTH && !children.is_empty() {
                return Err(Error::format(
                    "data.pkl",
                    0,
                    format!("'{name}' nests deeper than {MAX_DEPTH} levels"),
                ));
            }
            // Every child counts, before it is queued: a dict shared many
            // times cannot queue more than one entry per pickle byte.
            visits = visits.saturating_add(children.len());
            if visits > max_visits {
                return Err(Error::format(
                    "data.pkl",
                    0,
                    "the state dict refers to the same dicts too many times",
                ));
            }
            // Reverse so that the first child is visited first.
            for (n, v) in children.into_iter().rev() {
                if matches!(v, Value::Tensor(_) | Value::Dict(_) | Value::List(_)) {
                    todo.push((n, v, depth + 1));
                }
            }
        }
        Ok(out)
    }

    /// The tensor `i` named `name`, its bytes borrowed or gathered.
    fn tensor(
        &self,
        i: usize,
        name: String,
        owned: &mut usize,
        budget: usize,
    ) -> Result<PtTensor<'a>> {
        let r = &self.tensors[i];
        let s = &r.storage;
        let es = s.dtype.size();
        let numel = bytes::product(&r.shape, "tensor shape")?;
        let data = if numel == 0 {
            Cow::Borrowed(&s.bytes[..0])
        } else if is_contiguous(&r.shape, &r.strides) {
            // check_bounds proved offset + numel <= storage numel.
            Cow::Borrowed(&s.bytes[r.offset * es..(r.offset + numel) * es])
        } else {
            let n = numel.saturating_mul(es);
            *owned = owned.saturating_add(n);
            if *owned > budget {
                return Err(Error::format(
                    "data.pkl",
                    0,
                    format!(
                        "tensor '{name}': its strided views would need more bytes than the file has ({budget})"
                    ),
                ));
            }
            Cow::Owned(gather(r, numel))
        };
        Ok(PtTensor {
            name,
            dtype: s.dtype,
            shape: r.shape.clone(),
            strides: r.strides.clone(),
            storage: s.key.clone(),
            storage_offset: r.offset,
            data,
        })
    }
}

fn join(prefix: &str, key: &str) -> Result<String> {
    if prefix.len().saturating_add(key.len()) >= MAX_NAME {
        return Err(Error::format(
            "data.pkl",
            0,
            format!(
                "a key path longer than {MAX_NAME} bytes under '{}'",
                truncate(prefix)
            ),
        ));
    }
    Ok(if prefix.is_empty() {
        key.to_string()
    } else {
        format!("{prefix}.{key}")
    })
}

/// At most the first 64 bytes of `s` (on a character boundary), for messages.
fn truncate(s: &str) -> &str {
    let mut n = s.len().min(64);
    while !s.is_char_boundary(n) {
        n -= 1;
    }
    &s[..n]
}

/// Pairs `[k0, v0, k1, v1, ...]`; `None` for an odd count.
fn pairs<'a>(items: Vec<Value<'a>>) -> Option<Vec<(Value<'a>, Value<'a>)>> {
    if !items.len().is_multiple_of(2) {
        return None;
    }
    let mut out = Vec::with_capacity(items.len() / 2);
    let mut it = items.into_iter();
    while let (Some(k), Some(v)) = (it.next(), it.next()) {
        out.push((k, v));
    }
    Some(out)
}

/// A LONG1 integer: little-endian two's complement.
fn long<'a>(b: &[u8]) -> Value<'a> {
    if b.is_empty() {
        return Value::Int(0);
    }
    if b.len() > 8 {
        return Value::BigInt;
    }
    let fill = if b[b.len() - 1] & 0x80 != 0 { 0xFF } else { 0 };
    let mut a = [fill; 8];
    a[..b.len()].copy_from_slice(b);
    Value::Int(i64::from_le_bytes(a))
}

/// Row-major contiguous: each stride is the product of the later sizes
/// (dimensions of size 1 may have any stride).
fn is_contiguous(shape: &[usize], strides: &[usize]) -> bool {
    let mut expect = 1usize;
    for (&n, &s) in shape.iter().zip(strides).rev() {
        if n != 1 && s != expect {
            return false;
        }
        expect = expect.saturating_mul(n);
    }
    true
}

/// Every element of the tensor lies inside its storage.
fn check_bounds(r: &TensorRec<'_>) -> std::result::Result<(), String> {
    let numel = r
        .shape
        .iter()
        .try_fold(1usize, |a, &d| a.checked_mul(d))
        .ok_or_else(|| format!("size {:?} overflows", r.shape))?;
    if numel == 0 {
        return Ok(());
    }
    // The last element: offset + sum((size - 1) * stride).
    let last = r
        .shape
        .iter()
        .zip(&r.strides)
        .try_fold(r.offset, |a, (&n, &s)| {
            (n - 1).checked_mul(s)?.checked_add(a)
        })
        .ok_or_else(|| format!("size {:?} with stride {:?} overflows", r.shape, r.strides))?;
    let mut end = last.checked_add(1);
    if is_contiguous(&r.shape, &r.strides) {
        end = r.offset.checked_add(numel);
    }
    match end {
        Some(e) if e <= r.storage.numel => Ok(()),
        _ => Err(format!(
            "a tensor of size {:?}, stride {:?}, offset {} reaches past storage '{}' of {} elements",
            r.shape, r.strides, r.offset, r.storage.key, r.storage.numel
        )),
    }
}

/// The elements of a strided tensor in row-major order (bounds checked by
/// [`check_bounds`]).
fn gather(r: &TensorRec<'_>, numel: usize) -> Vec<u8> {
    let es = r.storage.dtype.size();
    let src = r.storage.bytes;
    let mut out = Vec::with_capacity(numel * es);
    let nd = r.shape.len();
    let mut idx = vec![0usize; nd];
    let mut at = r.offset;
    for _ in 0..numel {
        let b = at.wrapping_mul(es);
        out.extend_from_slice(src.get(b..b.wrapping_add(es)).unwrap_or(&[]));
        // Next multi-index, last dimension fastest. Wrapping: a dimension of
        // size 1 may carry any stride; the positions visited are in bounds.
        for d in (0..nd).rev() {
            idx[d] += 1;
            at = at.wrapping_add(r.strides[d]);
            if idx[d] < r.shape[d] {
                break;
            }
            at = at.wrapping_sub(r.strides[d].wrapping_mul(r.shape[d]));
            idx[d] = 0;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn contiguity() {
        assert!(is_contiguous(&[2, 3], &[3, 1]));
        assert!(!is_contiguous(&[2, 3], &[1, 2]));
        assert!(is_contiguous(&[1, 3], &[99, 1]));
        assert!(is_contiguous(&[], &[]));
    }

    #[test]
    fn long1_sign() {
        assert!(matches!(long(&[0xff]), Value::Int(-1)));
        assert!(matches!(long(&[0x00, 0x01]), Value::Int(256)));
        assert!(matches!(long(&[1; 9]), Value::BigInt));
    }
}
