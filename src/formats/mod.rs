//! Model containers and the tensor-store abstraction they share.
//!
//! Every container reader (EMBD `.weights`, the legacy `cpp_embedder` layout, and
//! the other seed formats) parses its file into one [`ModelFile`]: metadata as
//! string key/values, an optional vocabulary, and a table of tensors whose bytes
//! live in the memory-mapped file (zero-copy) or, where a format needs a
//! transformation (a transposed legacy matrix), in owned memory.
//!
//! [`CONTAINERS`] lists every container (detection, reader, writer);
//! [`ModelFile::open`] detects the container by its magic and dispatches.

pub mod amb;
pub mod bytes;
pub mod coreml_blob;
pub mod embd;
pub mod finalfusion;
pub mod legacy;
pub mod lwt;
pub mod torch_pt;

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::io::Write;
use std::path::Path;
use std::sync::Arc;

use crate::error::{Error, ErrorKind, Result};
use crate::tokenizer::vocab::{SpecialIds, Vocab};

/// Element type of a tensor. Codes are those of the EMBD format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum DType {
    /// IEEE 754 binary32.
    F32 = 0,
    /// IEEE 754 binary16.
    F16 = 1,
    /// bfloat16.
    BF16 = 2,
    /// Signed 32-bit integer.
    I32 = 3,
    /// Signed 16-bit integer.
    I16 = 4,
    /// Signed 8-bit integer.
    I8 = 5,
    /// Unsigned 32-bit integer.
    U32 = 6,
    /// Unsigned 16-bit integer.
    U16 = 7,
    /// Unsigned 8-bit integer.
    U8 = 8,
}

impl DType {
    /// All types, in code order.
    pub const ALL: [DType; 9] = [
        DType::F32,
        DType::F16,
        DType::BF16,
        DType::I32,
        DType::I16,
        DType::I8,
        DType::U32,
        DType::U16,
        DType::U8,
    ];

    /// The type for an EMBD dtype code.
    pub fn from_code(code: u8) -> Option<DType> {
        DType::ALL.get(usize::from(code)).copied()
    }

    /// The EMBD dtype code.
    pub fn code(self) -> u8 {
        self as u8
    }

    /// Bytes per element.
    pub fn size(self) -> usize {
        match self {
            DType::F32 | DType::I32 | DType::U32 => 4,
            DType::F16 | DType::BF16 | DType::I16 | DType::U16 => 2,
            DType::I8 | DType::U8 => 1,
        }
    }

    /// Lower-case name (`f32`, `f16`, `bf16`, `i32`, ...).
    pub fn name(self) -> &'static str {
        match self {
            DType::F32 => "f32",
            DType::F16 => "f16",
            DType::BF16 => "bf16",
            DType::I32 => "i32",
            DType::I16 => "i16",
            DType::I8 => "i8",
            DType::U32 => "u32",
            DType::U16 => "u16",
            DType::U8 => "u8",
        }
    }

    /// Parses a name as printed by [`DType::name`].
    pub fn from_name(s: &str) -> Option<DType> {
        DType::ALL.iter().copied().find(|d| d.name() == s)
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Which container a [`ModelFile`] came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum FormatKind {
    /// EMBD `.weights` as specified (64-byte header, footer CRCs).
    Embd,
    /// The layout the real `cpp_embedder` converter writes ("simplified format").
    EmbdLegacy,
    /// A HuggingFace folder with `model.safetensors` (converter input).
    HfSafetensors,
    /// finalfusion `.fifu` word embeddings (static; `architecture` = `static`).
    Finalfusion,
    /// A Core ML weight blob (`weight.bin`, storage v2) with our JSON manifest.
    CoremlBlob,
    /// embee.cpp AMB (`.amb`, magic "AMBEE"), as resolved in docs/formats/amb.md.
    Amb,
    /// LightwatchAI2 `.lwt` (magic "LWATCHV1"), as resolved in docs/formats/lwt.md.
    Lwt,
}

impl FormatKind {
    /// A short name for messages and `embd inspect`.
    pub fn name(self) -> &'static str {
        match self {
            FormatKind::Embd => "embd",
            FormatKind::EmbdLegacy => "embd-legacy",
            FormatKind::HfSafetensors => "hf-safetensors",
            FormatKind::Finalfusion => "finalfusion",
            FormatKind::CoremlBlob => "coreml-blob",
            FormatKind::Amb => "amb",
            FormatKind::Lwt => "lwt",
        }
    }
}

/// A container reader over bytes (the whole file): see [`Container::read`].
pub type ReadFn = fn(Arc<Backing>, ReadOptions, &ReadHint) -> Result<ModelFile>;

/// A container stored as a folder: how to recognise one and read it.
#[derive(Debug, Clone, Copy)]
pub struct FolderReader {
    /// True when `path` is a folder of this container.
    pub detect: fn(&Path) -> bool,
    /// Reads the folder.
    pub read: fn(&Path, ReadOptions) -> Result<ModelFile>,
}

/// How a container is written.
#[derive(Debug, Clone, Copy)]
pub enum Writer {
    /// One file, streamed into a writer ([`Container::write_path`] makes it
    /// atomic).
    File(fn(&ModelFile, &mut dyn Write, &mut WriteSettings<'_>) -> Result<()>),
    /// A folder of files at the path.
    Folder(fn(&ModelFile, &Path, &mut WriteSettings<'_>) -> Result<()>),
}

/// What a writer may be asked for; each container uses the settings it has.
pub struct WriteSettings<'a> {
    /// Store checksums where the container can (default true).
    pub checksums: bool,
    /// Block quantization of the encoder's Linear weights (AMB only).
    pub quant: amb::Quant,
    /// Progress callback `(bytes done, bytes total)` (EMBD only).
    pub progress: &'a mut dyn FnMut(u64, u64),
}

impl fmt::Debug for WriteSettings<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WriteSettings")
            .field("checksums", &self.checksums)
            .field("quant", &self.quant)
            .finish_non_exhaustive()
    }
}

/// One row of [`CONTAINERS`]: everything the library, the CLI (`--to`) and the
/// fuzz harness need to know about a container.
#[derive(Debug, Clone, Copy)]
pub struct Container {
    /// The kind its reader reports.
    pub kind: FormatKind,
    /// The name `embd convert --to` takes.
    pub name: &'static str,
    /// One line for `embd convert --help`.
    pub help: &'static str,
    /// Usual file extensions (informational; detection is by content).
    pub extensions: &'static [&'static str],
    /// True when the first bytes of a file are this container's (never for
    /// folder containers).
    pub sniff: fn(&[u8]) -> bool,
    /// The reader over the whole file, if the container is a file.
    pub read: Option<ReadFn>,
    /// The reader of a folder container.
    pub folder: Option<FolderReader>,
    /// The writer, if the library writes this container.
    pub write: Option<Writer>,
}

impl Container {
    /// The row whose `--to` name is `name`.
    pub fn by_name(name: &str) -> Option<&'static Container> {
        CONTAINERS.iter().find(|c| c.name == name)
    }

    /// The row of a kind.
    pub fn by_kind(kind: FormatKind) -> Option<&'static Container> {
        CONTAINERS.iter().find(|c| c.kind == kind)
    }

    /// Writes `model` at `path`: a file container atomically
    /// ([`crate::atomic_write::atomic_write`]), a folder container into the
    /// folder (created if missing).
    ///
    /// # Errors
    /// [`ErrorKind::Unsupported`] when the container has no writer; else the
    /// writer's errors.
    pub fn write_path(
        &self,
        model: &ModelFile,
        path: &Path,
        settings: &mut WriteSettings<'_>,
    ) -> Result<()> {
        match self.write {
            Some(Writer::File(write)) => {
                crate::atomic_write::atomic_write(path, |w| write(model, w, settings))
            }
            Some(Writer::Folder(write)) => write(model, path, settings),
            None => Err(Error::unsupported(format!(
                "the library does not write {} files",
                self.kind.name()
            ))),
        }
    }
}

fn no_sniff(_: &[u8]) -> bool {
    false
}

/// Every container: detection (file magic or folder), reader and writer. A new
/// container is its module plus one row here (and a [`FormatKind`]); opening,
/// `embd convert --to` and the fuzz harness's `container` target read this
/// table. Magics are disjoint, so the order is that of `--help` only; add rows
/// at the end, since the `container` fuzz seeds pick a row by its index.
pub const CONTAINERS: &[Container] = &[
    Container {
        kind: FormatKind::Embd,
        name: "embd",
        help: "EMBD `.weights` as specified",
        extensions: &["weights"],
        sniff: |b| b.starts_with(b"EMBD") && !legacy::looks_legacy(b),
        read: Some(embd::read_hinted),
        folder: None,
        write: Some(Writer::File(|m, mut w, s| {
            let opts = embd::WriteOptions {
                checksums: s.checksums,
            };
            embd::write_to(m, &mut w, &opts, s.progress).map(|_| ())
        })),
    },
    Container {
        kind: FormatKind::EmbdLegacy,
        name: "legacy",
        help: "The layout the original cpp_embedder converter writes",
        extensions: &["weights"],
        sniff: legacy::looks_legacy,
        read: Some(|b, o, _| legacy::read(b, o)),
        folder: None,
        write: Some(Writer::File(|m, mut w, _| legacy::write_legacy(m, &mut w))),
    },
    Container {
        kind: FormatKind::CoremlBlob,
        name: "coreml-blob",
        help: "A Core ML weight blob folder (`weight.bin` + `manifest.json`); OUTPUT is a folder",
        extensions: &[],
        sniff: no_sniff,
        read: None,
        folder: Some(FolderReader {
            detect: coreml_blob::is_blob_dir,
            read: coreml_blob::read_dir,
        }),
        write: Some(Writer::Folder(|m, p, _| coreml_blob::write_dir(m, p))),
    },
    Container {
        kind: FormatKind::Amb,
        name: "amb",
        help: "AMB (`.amb`, \"AMBEE\")",
        extensions: &["amb"],
        sniff: |b| b.starts_with(amb::MAGIC),
        read: Some(|b, o, _| amb::read(b, o)),
        folder: None,
        write: Some(Writer::File(|m, mut w, s| {
            let opts = amb::WriteOptions {
                quant: s.quant,
                checksum: s.checksums,
            };
            amb::write(m, &mut w, &opts)
        })),
    },
    Container {
        kind: FormatKind::Lwt,
        name: "lwt",
        help: "LWT (`.lwt`, \"LWATCHV1\")",
        extensions: &["lwt"],
        sniff: |b| b.starts_with(lwt::MAGIC),
        read: Some(|b, o, _| lwt::read(b, o)),
        folder: None,
        write: Some(Writer::File(|m, mut w, _| lwt::write(m, &mut w))),
    },
    Container {
        kind: FormatKind::Finalfusion,
        name: "fifu",
        help: "finalfusion (`.fifu`); only for static word-embedding models",
        extensions: &["fifu"],
        sniff: |b| b.starts_with(finalfusion::MAGIC),
        read: Some(|b, o, _| finalfusion::read(b, o)),
        folder: None,
        write: Some(Writer::File(|m, mut w, _| {
            finalfusion::write_model(m, &mut w)
        })),
    },
];

/// How a reader dealt with the checksums a file stores.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum ChecksumStatus {
    /// Every stored checksum was verified.
    Verified,
    /// The file stores checksums; verifying them was turned off
    /// ([`ReadOptions::verify_checksums`]).
    NotVerified,
    /// The file stores none (EMBD: CHECKSUM_ENABLED clear).
    Absent,
    /// The reader reports no status (containers without checksums, or whose
    /// readers verify them without reporting here).
    #[default]
    Unreported,
}

impl ChecksumStatus {
    /// The phrase `embd inspect` and `embd verify` print.
    pub fn describe(self) -> &'static str {
        match self {
            ChecksumStatus::Verified => "verified",
            ChecksumStatus::NotVerified => "not verified (disabled by option)",
            ChecksumStatus::Absent => "absent (flag clear)",
            ChecksumStatus::Unreported => "verified where the format stores them",
        }
    }
}

/// What a reader found besides the model, typed (the free-form
/// [`ModelFile::details`] are for display only).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ReadReport {
    /// The checksum status.
    pub checksums: ChecksumStatus,
}

/// A caller's hint to a reader about what it reads right after opening; it
/// changes only the order of work, never the result.
#[derive(Debug, Clone, Copy, Default)]
pub struct ReadHint {
    /// Tensors (by name) the caller reads first. A reader that checks the
    /// tensor data in one pass checks these last, so that they are still in
    /// cache when the caller starts (EMBD).
    pub read_first: Option<fn(&str) -> bool>,
}

/// The bytes a [`ModelFile`] reads from: a read-only memory map or owned memory.
pub enum Backing {
    /// A read-only memory map of the whole file.
    Mmap(memmap2::Mmap),
    /// Owned bytes (tests, in-memory conversions). Stored as `u64` words so the
    /// start is 8-byte aligned like a page-aligned map.
    Owned {
        /// The bytes, packed into aligned words.
        words: Vec<u64>,
        /// Length in bytes.
        len: usize,
    },
}

impl Backing {
    /// Maps `path` read-only.
    pub fn map(path: &Path) -> Result<Backing> {
        let file = std::fs::File::open(path).map_err(|e| Error::io(path.display(), e))?;
        let meta = file.metadata().map_err(|e| Error::io(path.display(), e))?;
        if !meta.is_file() {
            return Err(Error::new(
                ErrorKind::Io,
                format!("{}: not a regular file", path.display()),
            ));
        }
        if meta.len() == 0 {
            return Err(Error::format(path.display(), 0, "file is empty"));
        }
        // SAFETY: the map is read-only and private to this process. The file may be
        // changed by another process while mapped; like every mmap-based loader we
        // document that model files must not be modified while in use. All reads go
        // through bounds-checked slices, so a shrinking file cannot make us read
        // outside the mapping's length as recorded here.
        let map = unsafe { memmap2::Mmap::map(&file) }.map_err(|e| Error::io(path.display(), e))?;
        // When the file is not yet in the page cache, huge-page-sized readahead
        // fills it with 2 MiB folios that later maps (this one included) can map
        // with one page-table entry each instead of 512 page faults. No effect on
        // pages already cached; a hint only, so its failure is ignored.
        #[cfg(target_os = "linux")]
        let _ = map.advise(memmap2::Advice::HugePage);
        Ok(Backing::Mmap(map))
    }

    /// Copies `bytes` into an aligned owned buffer.
    pub fn from_bytes(bytes: &[u8]) -> Backing {
        let mut words = vec![0u64; bytes.len().div_ceil(8)];
        let len = bytes.len();
        {
            let dst = words_as_bytes_mut(&mut words);
            dst[..len].copy_from_slice(bytes);
        }
        Backing::Owned { words, len }
    }

    /// The bytes.
    pub fn bytes(&self) -> &[u8] {
        match self {
            Backing::Mmap(m) => m,
            Backing::Owned { words, len } => &words_as_bytes(words)[..*len],
        }
    }

    /// The whole pages of a map that lie entirely inside `range` (clamped to the
    /// file), as (offset, length) for `madvise`; `None` for owned bytes or when
    /// no whole page fits.
    fn whole_pages(&self, range: std::ops::Range<usize>) -> Option<(&memmap2::Mmap, usize, usize)> {
        let Backing::Mmap(m) = self else {
            return None;
        };
        let page = page_size();
        let end = range.end.min(m.len());
        let start = range.start.checked_next_multiple_of(page)?;
        // The map starts on a page boundary; its last page may be partial, and
        // the kernel treats a partial last page as whole.
        let end = if end == m.len() {
            end
        } else {
            end - end % page
        };
        (start < end).then(|| (m, start, end - start))
    }

    /// Maps the pages of `range` into this process now (Linux
    /// `MADV_POPULATE_READ`), so that later reads take no page faults. Best effort:
    /// a no-op for owned bytes, other systems and kernels before 5.14.
    pub fn populate(&self, range: std::ops::Range<usize>) {
        #[cfg(target_os = "linux")]
        if let Some((m, off, len)) = self.whole_pages(range) {
            let _ = m.advise_range(memmap2::Advice::PopulateRead, off, len);
        }
        #[cfg(not(target_os = "linux"))]
        let _ = range;
    }

    /// Drops the whole pages inside `range` from this process's resident set
    /// (`madvise(MADV_DONTNEED)`); see [`ModelFile::release_pages`].
    pub fn release_pages(&self, range: std::ops::Range<usize>) {
        #[cfg(unix)]
        if let Some((m, off, len)) = self.whole_pages(range) {
            // Pages touched again later come back 4 KiB at a time: with huge
            // folios in the page cache, one touched row would otherwise map
            // (and count) its whole 2 MiB folio again. A hint only.
            #[cfg(target_os = "linux")]
            let _ = m.advise_range(memmap2::Advice::NoHugePage, off, len);
            // SAFETY: `off..off + len` lies inside the live map `m` and `off` is
            // page-aligned, so only pages of this range are affected. The map is
            // a read-only file mapping: its pages are never dirty, so dropping
            // them loses nothing, and a page touched again is read back from the
            // file (through the page cache) with the same bytes; `&[u8]` views
            // of it stay valid (as long as the file is not modified, which
            // `Backing::map` already requires).
            let _ =
                unsafe { m.unchecked_advise_range(memmap2::UncheckedAdvice::DontNeed, off, len) };
        }
        #[cfg(not(unix))]
        let _ = range;
    }
}

/// The virtual memory page size (4096 when it cannot be read).
fn page_size() -> usize {
    #[cfg(unix)]
    {
        // SAFETY: sysconf has no preconditions.
        let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        if let Ok(p) = usize::try_from(p) {
            if p.is_power_of_two() {
                return p;
            }
        }
    }
    4096
}

fn words_as_bytes(w: &[u64]) -> &[u8] {
    // SAFETY: u64 has no padding and every byte pattern is a valid u8; the length
    // in bytes is exactly 8 * w.len() and the lifetime is tied to `w`.
    unsafe { std::slice::from_raw_parts(w.as_ptr().cast::<u8>(), w.len() * 8) }
}

fn words_as_bytes_mut(w: &mut [u64]) -> &mut [u8] {
    // SAFETY: as in `words_as_bytes`; the exclusive borrow of `w` is carried over.
    unsafe { std::slice::from_raw_parts_mut(w.as_mut_ptr().cast::<u8>(), w.len() * 8) }
}

/// Where a tensor's bytes are.
#[derive(Debug, Clone)]
pub enum TensorData {
    /// `backing[start..start + len]`.
    Mapped {
        /// Absolute start in the backing.
        start: usize,
        /// Length in bytes.
        len: usize,
    },
    /// Owned bytes, stored as `u32` words so f32 views are aligned.
    Owned {
        /// The bytes, packed into aligned words.
        words: Vec<u32>,
        /// Length in bytes.
        len: usize,
    },
}

/// One tensor of a [`ModelFile`].
#[derive(Debug, Clone)]
pub struct TensorEntry {
    /// Name (HF BERT naming for BERT models).
    pub name: String,
    /// Element type.
    pub dtype: DType,
    /// Shape, row-major.
    pub shape: Vec<usize>,
    /// Where the bytes are.
    pub data: TensorData,
    /// Offset of the data in the file, for `inspect` (absolute; 0 for owned data).
    pub file_offset: u64,
}

impl TensorEntry {
    /// Number of elements.
    pub fn numel(&self) -> usize {
        self.shape.iter().product()
    }

    /// Size of the data in bytes.
    pub fn byte_len(&self) -> usize {
        match &self.data {
            TensorData::Mapped { len, .. } | TensorData::Owned { len, .. } => *len,
        }
    }

    /// An owned tensor from raw little-endian bytes of `dtype`.
    pub fn owned_bytes(
        name: impl Into<String>,
        dtype: DType,
        shape: Vec<usize>,
        bytes: &[u8],
    ) -> Self {
        let mut words = vec![0u32; bytes.len().div_ceil(4)];
        for (w, c) in words.iter_mut().zip(bytes.chunks(4)) {
            let mut a = [0u8; 4];
            a[..c.len()].copy_from_slice(c);
            *w = u32::from_ne_bytes(a);
        }
        TensorEntry {
            name: name.into(),
            dtype,
            shape,
            data: TensorData::Owned {
                words,
                len: bytes.len(),
            },
            file_offset: 0,
        }
    }

    /// An owned tensor from f32 values (used by readers that must transform data).
    pub fn owned_f32(name: impl Into<String>, shape: Vec<usize>, values: &[f32]) -> Self {
        // Native-endian bits: the bytes read back through `tensor_bytes` are then
        // little-endian on the little-endian targets this crate supports.
        let words: Vec<u32> = values.iter().map(|v| v.to_bits()).collect();
        let len = words.len() * 4;
        TensorEntry {
            name: name.into(),
            dtype: DType::F32,
            shape,
            data: TensorData::Owned { words, len },
            file_offset: 0,
        }
    }
}

/// A parsed model container: metadata, vocabulary, tensors.
///
/// Cheap to share: wrap it in an [`Arc`]; tensors are read through
/// [`ModelFile::tensor_bytes`] and friends without copying.
pub struct ModelFile {
    /// The container kind.
    pub format: FormatKind,
    backing: Arc<Backing>,
    /// Metadata key/values (EMBD keys; other formats map theirs onto these).
    pub metadata: BTreeMap<String, String>,
    /// The vocabulary, if the file carries one.
    pub vocab: Option<Vocab>,
    /// Tensors in file order.
    pub tensors: Vec<TensorEntry>,
    index: HashMap<String, usize>,
    /// Free-form facts for `embd inspect` (header fields, flags, checksum
    /// status), for display; code reads [`ModelFile::report`].
    pub details: Vec<(String, String)>,
    /// What the reader found, typed (checksum status).
    pub report: ReadReport,
}

impl fmt::Debug for ModelFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ModelFile")
            .field("format", &self.format)
            .field("metadata", &self.metadata)
            .field("tensors", &self.tensors.len())
            .finish()
    }
}

/// Options for reading a container.
#[derive(Debug, Clone, Copy)]
pub struct ReadOptions {
    /// Verify data and whole-file CRCs when the file carries them (default true).
    /// The EMBD header CRC is always verified.
    pub verify_checksums: bool,
}

impl Default for ReadOptions {
    fn default() -> Self {
        ReadOptions {
            verify_checksums: true,
        }
    }
}

impl ModelFile {
    /// Assembles a model file; fails on duplicate tensor names.
    pub fn new(
        format: FormatKind,
        backing: Arc<Backing>,
        metadata: BTreeMap<String, String>,
        vocab: Option<Vocab>,
        tensors: Vec<TensorEntry>,
    ) -> Result<ModelFile> {
        let mut index = HashMap::with_capacity(tensors.len());
        for (i, t) in tensors.iter().enumerate() {
            if let TensorData::Mapped { start, len } = t.data {
                let end = start.checked_add(len);
                if end.is_none_or(|e| e > backing.bytes().len()) {
                    return Err(Error::format(
                        format!("tensor '{}'", t.name),
                        start as u64,
                        "data outside the file",
                    ));
                }
            }
            if index.insert(t.name.clone(), i).is_some() {
                return Err(Error::new(
                    ErrorKind::Format,
                    format!("duplicate tensor name '{}'", t.name),
                ));
            }
        }
        Ok(ModelFile {
            format,
            backing,
            metadata,
            vocab,
            tensors,
            index,
            details: Vec::new(),
            report: ReadReport::default(),
        })
    }

    /// Opens a container at `path`: a folder container (a Core ML blob folder
    /// with `manifest.json`), else a file, its container detected from its
    /// first bytes. HF folders are not containers: [`ModelFile::open`]
    /// (defined in [`crate::import`]) reads those too.
    pub fn open_container(
        path: impl AsRef<Path>,
        opts: ReadOptions,
        hint: &ReadHint,
    ) -> Result<ModelFile> {
        let path = path.as_ref();
        for f in CONTAINERS.iter().filter_map(|c| c.folder) {
            if (f.detect)(path) {
                return (f.read)(path, opts);
            }
        }
        let backing = Arc::new(Backing::map(path)?);
        Self::from_backing_hinted(backing, opts, hint).map_err(|e| e.context(path.display()))
    }

    /// Whether `path` is a folder container ([`ModelFile::open_container`]
    /// reads it as one).
    pub(crate) fn is_folder_container(path: &Path) -> bool {
        CONTAINERS
            .iter()
            .filter_map(|c| c.folder)
            .any(|f| (f.detect)(path))
    }

    /// Parses bytes already in memory (copied into an aligned buffer).
    pub fn from_bytes(bytes: &[u8], opts: ReadOptions) -> Result<ModelFile> {
        Self::from_backing(Arc::new(Backing::from_bytes(bytes)), opts)
    }

    /// Parses a backing, detecting the container.
    pub fn from_backing(backing: Arc<Backing>, opts: ReadOptions) -> Result<ModelFile> {
        Self::from_backing_hinted(backing, opts, &ReadHint::default())
    }

    /// [`ModelFile::from_backing`] with a hint about what the caller reads first.
    pub fn from_backing_hinted(
        backing: Arc<Backing>,
        opts: ReadOptions,
        hint: &ReadHint,
    ) -> Result<ModelFile> {
        let b = backing.bytes();
        for c in CONTAINERS {
            if let (Some(read), true) = (c.read, (c.sniff)(b)) {
                return read(backing, opts, hint);
            }
        }
        let shown: Vec<String> = b.iter().take(8).map(|x| format!("{x:02x}")).collect();
        Err(Error::new(
            ErrorKind::UnknownFormat,
            format!(
                "unknown model container: first bytes {} match no supported format",
                shown.join(" ")
            ),
        ))
    }

    /// The whole backing byte buffer.
    pub fn backing(&self) -> &Arc<Backing> {
        &self.backing
    }

    /// The tensor named `name`.
    pub fn tensor(&self, name: &str) -> Option<&TensorEntry> {
        self.index.get(name).map(|&i| &self.tensors[i])
    }

    /// Drops the memory pages that lie entirely inside `byte_range` of the file
    /// from this process's resident set (`madvise(MADV_DONTNEED)` on a memory
    /// map). The bytes stay readable: a page read again is mapped back from the
    /// file through the page cache. Use it after copying or repacking tensors
    /// (see [`ModelFile::tensor_file_range`]) so that the raw pages stop counting
    /// in RSS. A no-op for owned (not memory-mapped) data, for empty ranges and
    /// for partial pages at either end; a range beyond the file is clamped.
    pub fn release_pages(&self, byte_range: std::ops::Range<usize>) {
        self.backing.release_pages(byte_range);
    }

    /// Maps the pages of `byte_range` of the file in now, so that reading them
    /// later takes no page faults (Linux `MADV_POPULATE_READ`; best effort, a
    /// no-op elsewhere and for owned data).
    pub fn populate_pages(&self, byte_range: std::ops::Range<usize>) {
        self.backing.populate(byte_range);
    }

    /// Where a tensor's bytes are in the file (the backing), or `None` when the
    /// reader converted them into owned memory: the range to pass to
    /// [`ModelFile::release_pages`] or [`ModelFile::populate_pages`].
    pub fn tensor_file_range(&self, t: &TensorEntry) -> Option<std::ops::Range<usize>> {
        match t.data {
            TensorData::Mapped { start, len } => Some(start..start + len),
            TensorData::Owned { .. } => None,
        }
    }

    /// The raw bytes of a tensor.
    pub fn tensor_bytes<'a>(&'a self, t: &'a TensorEntry) -> &'a [u8] {
        match &t.data {
            // Bounds were checked in `ModelFile::new`.
            TensorData::Mapped { start, len } => &self.backing.bytes()[*start..*start + *len],
            TensorData::Owned { words, len } => {
                // SAFETY: u32 words reinterpreted as bytes; no padding, any bit
                // pattern is a valid u8; `len <= 4 * words.len()` by construction.
                let all = unsafe {
                    std::slice::from_raw_parts(words.as_ptr().cast::<u8>(), words.len() * 4)
                };
                &all[..*len]
            }
        }
    }

    /// A FLOAT32 tensor viewed in place as `&[f32]`, when its bytes are 4-aligned
    /// (always for EMBD files with TENSORS_ALIGNED). `None` for other dtypes or
    /// misaligned data; use [`ModelFile::tensor_to_f32`] then.
    pub fn tensor_f32<'a>(&'a self, t: &'a TensorEntry) -> Option<&'a [f32]> {
        if t.dtype != DType::F32 {
            return None;
        }
        let b = self.tensor_bytes(t);
        if cfg!(target_endian = "big") {
            return None;
        }
        // SAFETY: every 4-byte pattern is a valid f32; align_to only yields a
        // middle slice that is correctly aligned and in bounds.
        let (pre, mid, post) = unsafe { b.align_to::<f32>() };
        (pre.is_empty() && post.is_empty()).then_some(mid)
    }

    /// Any numeric tensor converted to f32 values (a copy). Integer types are
    /// converted by value (no scale applied).
    pub fn tensor_to_f32(&self, t: &TensorEntry) -> Vec<f32> {
        let b = self.tensor_bytes(t);
        convert_to_f32(t.dtype, b)
    }
}

/// Special token ids from five stored in the order pad, unk, cls, sep, mask
/// ([`SpecialIds::as_array`]'s order).
pub(crate) fn special_ids(ids: &[u32; 5]) -> SpecialIds {
    SpecialIds {
        pad: ids[0],
        unk: ids[1],
        cls: ids[2],
        sep: ids[3],
        mask: ids[4],
    }
}

/// Converts little-endian bytes of `dtype` to f32 values.
pub fn convert_to_f32(dtype: DType, b: &[u8]) -> Vec<f32> {
    match dtype {
        DType::F32 => b
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect(),
        DType::F16 => b
            .chunks_exact(2)
            .map(|c| half::f16::from_le_bytes([c[0], c[1]]).to_f32())
            .collect(),
        DType::BF16 => b
            .chunks_exact(2)
            .map(|c| half::bf16::from_le_bytes([c[0], c[1]]).to_f32())
            .collect(),
        DType::I32 => b
            .chunks_exact(4)
            .map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]]) as f32)
            .collect(),
        DType::U32 => b
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]) as f32)
            .collect(),
        DType::I16 => b
            .chunks_exact(2)
            .map(|c| f32::from(i16::from_le_bytes([c[0], c[1]])))
            .collect(),
        DType::U16 => b
            .chunks_exact(2)
            .map(|c| f32::from(u16::from_le_bytes([c[0], c[1]])))
            .collect(),
        DType::I8 => b.iter().map(|&x| f32::from(x as i8)).collect(),
        DType::U8 => b.iter().map(|&x| f32::from(x)).collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dtype_codes_round_trip() {
        for d in DType::ALL {
            assert_eq!(DType::from_code(d.code()), Some(d));
            assert_eq!(DType::from_name(d.name()), Some(d));
        }
        assert_eq!(DType::from_code(9), None);
    }

    #[test]
    fn unknown_magic_is_unknown_format() {
        let e = ModelFile::from_bytes(b"NOPE....", ReadOptions::default()).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::UnknownFormat);
    }

    /// RSS of this process in KiB (Linux), for the release test.
    #[cfg(target_os = "linux")]
    fn rss_kib() -> usize {
        let s = std::fs::read_to_string("/proc/self/statm").unwrap();
        let pages: usize = s.split_whitespace().nth(1).unwrap().parse().unwrap();
        pages * page_size() / 1024
    }

    #[test]
    fn release_pages_keeps_the_bytes() {
        let dir = std::env::temp_dir().join(format!("embd-release-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("t.bin");
        let data: Vec<u8> = (0..(4usize << 20) + 123)
            .map(|i| (i * 31 % 251) as u8)
            .collect();
        std::fs::write(&path, &data).unwrap();
        let b = Backing::map(&path).unwrap();
        assert_eq!(b.bytes(), &data[..]);
        #[cfg(target_os = "linux")]
        let before = rss_kib();
        // A range with partial pages at both ends, then the whole file, then
        // empty and out-of-range ones.
        b.release_pages(1000..(3 << 20) + 7);
        assert_eq!(b.bytes(), &data[..]);
        b.release_pages(0..data.len());
        #[cfg(target_os = "linux")]
        assert!(rss_kib() + 2048 < before, "{} -> {}", before, rss_kib());
        assert_eq!(b.bytes(), &data[..]);
        b.release_pages(5..5);
        b.release_pages(data.len() + 10..usize::MAX);
        b.populate(0..data.len());
        assert_eq!(b.bytes(), &data[..]);
        // Owned bytes: a no-op.
        let o = Backing::from_bytes(&data);
        o.release_pages(0..data.len());
        assert_eq!(o.bytes(), &data[..]);
        drop(b);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn tensor_file_range_and_release_through_model_file() {
        let dir = std::env::temp_dir().join(format!("embd-release-mf-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("m.weights");
        let values: Vec<f32> = (0..300_000).map(|i| i as f32 * 0.5).collect();
        let mut md = BTreeMap::new();
        for (k, v) in [
            ("model_name", "t"),
            ("model_version", "1"),
            ("embedding_dim", "4"),
            ("vocab_size", "5"),
            ("num_layers", "1"),
            ("num_attention_heads", "1"),
            ("hidden_size", "4"),
            ("intermediate_size", "8"),
            ("max_position_emb", "16"),
            ("created_at", "2025-01-01T00:00:00Z"),
        ] {
            md.insert(k.to_string(), v.to_string());
        }
        let vocab = Vocab::from_tokens_bert(
            ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
                .iter()
                .map(|s| s.to_string())
                .collect(),
        )
        .unwrap();
        let m = ModelFile::new(
            FormatKind::Embd,
            Arc::new(Backing::from_bytes(&[])),
            md,
            Some(vocab),
            vec![TensorEntry::owned_f32("big", vec![values.len()], &values)],
        )
        .unwrap();
        assert_eq!(m.tensor_file_range(m.tensor("big").unwrap()), None);
        embd::write_file(&m, &path, &embd::WriteOptions::default(), &mut |_, _| {}).unwrap();
        let f = ModelFile::open(&path, ReadOptions::default()).unwrap();
        let t = f.tensor("big").unwrap();
        let r = f.tensor_file_range(t).unwrap();
        assert_eq!(r.start as u64, t.file_offset);
        assert_eq!(r.len(), values.len() * 4);
        f.release_pages(r.clone());
        assert_eq!(f.tensor_f32(t).unwrap(), &values[..]);
        f.release_pages(0..usize::MAX);
        assert_eq!(f.tensor_f32(t).unwrap(), &values[..]);
        drop(f);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn convert_half_types() {
        let one_f16 = half::f16::from_f32(1.5).to_le_bytes();
        assert_eq!(convert_to_f32(DType::F16, &one_f16), vec![1.5]);
        let one_bf16 = half::bf16::from_f32(-2.0).to_le_bytes();
        assert_eq!(convert_to_f32(DType::BF16, &one_bf16), vec![-2.0]);
        assert_eq!(convert_to_f32(DType::I8, &[0xFF]), vec![-1.0]);
    }
}
