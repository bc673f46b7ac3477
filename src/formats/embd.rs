//! EMBD `.weights` reader and writer.
//!
//! The format is `shared/seeds/weights-format.md` with the resolutions of
//! `shared/specs/weights-format-notes.md`: a 64-byte header, a metadata section
//! (key/value strings), a vocabulary section (tokens plus the five special ids),
//! a table of 32-byte tensor descriptors followed by the tensor names, 64-byte
//! aligned tensor data, and a 16-byte footer with two CRC32s and the end magic
//! `"DBME"`.
//!
//! # Reading
//!
//! [`read`] validates every field before using it and never panics, whatever the
//! bytes: every offset and size is checked against the file with checked
//! arithmetic, every count is bounded by the bytes that could hold it before
//! anything is allocated, and every error names the field and its byte offset.
//! Tensor data stays in the backing (zero-copy, [`TensorData::Mapped`]).
//!
//! Checks run in this order: magic, major version (any minor is accepted),
//! header CRC (always), flags, `total_file_size`, end magic, section bounds,
//! metadata, vocabulary, tensor descriptors, and last the footer CRCs, so that a
//! structural defect is reported as such rather than as a checksum mismatch.
//!
//! Points the seed leaves open, decided here:
//! * The header `reserved` word and the footer `reserved` word are ignored
//!   (written as 0), so that a later minor version may use them.
//! * When flag bit 2 (CHECKSUM_ENABLED) is clear, the footer's `data_checksum`
//!   and `file_checksum` are ignored whatever their value (the writer writes 0).
//!   When it is set, both are verified unless [`ReadOptions::verify_checksums`]
//!   is false (an explicit start-up speed option, never the default).
//! * When flag bit 0 (VOCAB_EMBEDDED) is clear, the vocab section fields are
//!   ignored and [`ModelFile::vocab`] is `None`.
//! * When flag bit 1 (TENSORS_ALIGNED) is clear, tensor offsets need no alignment.
//! * The four sections (metadata, vocab, descriptors + names, tensor data) must lie
//!   between the header and the footer and must not overlap one another. Gaps
//!   between them are allowed.
//! * The vocab's special-id block must lie inside the vocab section and must not
//!   overlap the vocab header or the token entries (which start right after the
//!   12-byte vocab header).
//! * Tensor names must be non-empty; dimensions below `ndim` must be non-zero.
//!
//! # Writing
//!
//! [`write_to`] writes exactly the layout of the notes (see there), streaming the
//! tensor data and computing both CRCs on the way. [`write_file`] writes through a
//! temporary file in the destination directory that is renamed into place only
//! once complete.

use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::path::Path;
use std::sync::Arc;

use super::bytes::{self, Cursor};
use super::{
    Backing, ChecksumStatus, DType, FormatKind, ModelFile, ReadHint, ReadOptions, ReadReport,
    TensorData, TensorEntry,
};
use crate::error::{Error, ErrorKind, Result};
use crate::tokenizer::vocab::Vocab;

/// Start magic, `"EMBD"`.
pub const MAGIC: [u8; 4] = *b"EMBD";
/// End magic in the footer, `"DBME"`.
pub const END_MAGIC: [u8; 4] = *b"DBME";
/// The only major version this library reads and writes.
pub const VERSION_MAJOR: u16 = 1;
/// The minor version written.
pub const VERSION_MINOR: u16 = 0;
/// Header size in bytes.
pub const HEADER_SIZE: usize = 64;
/// Footer size in bytes.
pub const FOOTER_SIZE: usize = 16;
/// Size of one tensor descriptor.
pub const DESCRIPTOR_SIZE: usize = 32;
/// Alignment of tensor data when TENSORS_ALIGNED is set.
pub const ALIGNMENT: u64 = 64;
/// Flag bit 0: the vocabulary is embedded.
pub const FLAG_VOCAB_EMBEDDED: u32 = 1 << 0;
/// Flag bit 1: every tensor starts at a 64-byte aligned file offset.
pub const FLAG_TENSORS_ALIGNED: u32 = 1 << 1;
/// Flag bit 2: the footer carries data and file CRC32s.
pub const FLAG_CHECKSUM_ENABLED: u32 = 1 << 2;
/// Flag bit 3: compressed tensor data (reserved by the seed; refused).
pub const FLAG_COMPRESSED: u32 = 1 << 3;
/// Flag bit 4: the file carries a tokenizer other than WordPiece, described by
/// the metadata keys `tokenizer.kind` / `tokenizer.settings` and the
/// `tokenizer.*` tensors (docs/formats/tokenizers.md). Set exactly when
/// `tokenizer.kind` is present; a reader that predates the bit refuses the
/// file as a reserved-bit file instead of tokenizing it as WordPiece.
pub const FLAG_TOKENIZER: u32 = 1 << 4;
/// Flag bits 5-31: reserved (refused).
pub const FLAG_RESERVED_MASK: u32 = !0x1F;
/// The metadata key naming a non-WordPiece tokenizer (see [`FLAG_TOKENIZER`]).
pub const TOKENIZER_KIND_KEY: &str = "tokenizer.kind";
/// The ten metadata keys every EMBD file carries.
pub const REQUIRED_KEYS: [&str; 10] = [
    "model_name",
    "model_version",
    "embedding_dim",
    "vocab_size",
    "num_layers",
    "num_attention_heads",
    "hidden_size",
    "intermediate_size",
    "max_position_emb",
    "created_at",
];

const SPECIAL_NAMES: [&str; 5] = ["pad_id", "unk_id", "cls_id", "sep_id", "mask_id"];

/// The 64-byte header, as read.
#[derive(Debug, Clone, Copy)]
struct Header {
    version_major: u16,
    version_minor: u16,
    flags: u32,
    metadata_offset: u32,
    metadata_size: u32,
    vocab_offset: u32,
    vocab_size: u32,
    tensor_index_offset: u32,
    tensor_index_count: u32,
    tensor_data_offset: u32,
    tensor_data_size: u64,
    total_file_size: u64,
    header_checksum: u32,
}

/// Decodes the flags for messages and `inspect`.
pub fn describe_flags(flags: u32) -> String {
    let mut names = Vec::new();
    for (bit, name) in [
        (FLAG_VOCAB_EMBEDDED, "VOCAB_EMBEDDED"),
        (FLAG_TENSORS_ALIGNED, "TENSORS_ALIGNED"),
        (FLAG_CHECKSUM_ENABLED, "CHECKSUM_ENABLED"),
        (FLAG_COMPRESSED, "COMPRESSED"),
        (FLAG_TOKENIZER, "TOKENIZER"),
    ] {
        if flags & bit != 0 {
            names.push(name.to_string());
        }
    }
    if flags & FLAG_RESERVED_MASK != 0 {
        names.push(format!("reserved {:#010x}", flags & FLAG_RESERVED_MASK));
    }
    if names.is_empty() {
        format!("{flags:#010x} (none)")
    } else {
        format!("{flags:#010x} ({})", names.join(" | "))
    }
}

fn parse_header(b: &[u8]) -> Result<Header> {
    if b.len() < HEADER_SIZE {
        return Err(Error::truncated(
            "header",
            0,
            HEADER_SIZE as u64,
            b.len() as u64,
        ));
    }
    let mut c = Cursor::new(b, 0);
    let magic: [u8; 4] = c.array("header.magic")?;
    if magic != MAGIC {
        return Err(Error::new(
            ErrorKind::UnknownFormat,
            format!(
                "header.magic at offset 0: expected \"EMBD\" (45 4d 42 44), found {magic:02x?}"
            ),
        ));
    }
    let version_major = c.u16("header.version_major")?;
    let version_minor = c.u16("header.version_minor")?;
    if version_major != VERSION_MAJOR {
        return Err(Error::unsupported(format!(
            "header.version_major at offset 4: unsupported format version {version_major}.{version_minor} (this library reads major version {VERSION_MAJOR})"
        )));
    }
    let h = Header {
        version_major,
        version_minor,
        flags: c.u32("header.flags")?,
        metadata_offset: c.u32("header.metadata_offset")?,
        metadata_size: c.u32("header.metadata_size")?,
        vocab_offset: c.u32("header.vocab_offset")?,
        vocab_size: c.u32("header.vocab_size")?,
        tensor_index_offset: c.u32("header.tensor_index_offset")?,
        tensor_index_count: c.u32("header.tensor_index_count")?,
        tensor_data_offset: c.u32("header.tensor_data_offset")?,
        tensor_data_size: c.u64("header.tensor_data_size")?,
        total_file_size: c.u64("header.total_file_size")?,
        header_checksum: c.u32("header.header_checksum")?,
    };
    let computed = bytes::crc32(bytes::slice(b, 0, 56, "header")?);
    if computed != h.header_checksum {
        return Err(Error::checksum(
            "header (header.header_checksum at offset 56, over bytes 0..56)",
            h.header_checksum,
            computed,
        ));
    }
    if h.flags & FLAG_COMPRESSED != 0 {
        return Err(Error::unsupported(
            "header.flags at offset 8: unsupported feature: COMPRESSED (bit 3) tensor data",
        ));
    }
    if h.flags & FLAG_RESERVED_MASK != 0 {
        return Err(Error::unsupported(format!(
            "header.flags at offset 8: unsupported feature: reserved flag bits {:#010x} are set",
            h.flags & FLAG_RESERVED_MASK
        )));
    }
    Ok(h)
}

/// A half-open byte range `[start, end)` of the file.
#[derive(Debug, Clone, Copy)]
struct Range {
    name: &'static str,
    start: u64,
    end: u64,
}

/// Checks that `[start, start + size)` lies between the header and the footer.
fn section(
    name: &'static str,
    field: &str,
    field_offset: u64,
    start: u64,
    size: u64,
    footer: u64,
) -> Result<Range> {
    let end = start.checked_add(size).ok_or_else(|| {
        Error::format(
            field,
            field_offset,
            format!("{name} section {start} + {size} overflows"),
        )
    })?;
    if start < HEADER_SIZE as u64 || end > footer {
        return Err(Error::format(
            field,
            field_offset,
            format!(
                "{name} section [{start}, {end}) is outside the file body [{HEADER_SIZE}, {footer}) between header and footer"
            ),
        ));
    }
    Ok(Range { name, start, end })
}

fn usize_of(v: u64, what: &str) -> Result<usize> {
    bytes::to_usize(v, what)
}

/// Everything parsed from the bytes, before the [`ModelFile`] is assembled.
struct Parsed {
    metadata: BTreeMap<String, String>,
    vocab: Option<Vocab>,
    tensors: Vec<TensorEntry>,
    details: Vec<(String, String)>,
    checksums: ChecksumStatus,
}

/// Reads an EMBD file from `backing`.
///
/// # Errors
/// * [`ErrorKind::UnknownFormat`]: the magic is not `"EMBD"`.
/// * [`ErrorKind::Unsupported`]: major version other than 1, COMPRESSED or a
///   reserved flag bit set.
/// * [`ErrorKind::Checksum`]: header CRC (always checked), or data/file CRC
///   (checked when the file has CHECKSUM_ENABLED and `opts.verify_checksums`).
/// * [`ErrorKind::Format`]: any other malformed field, named with its offset.
pub fn read(backing: Arc<Backing>, opts: ReadOptions) -> Result<ModelFile> {
    read_hinted(backing, opts, &ReadHint::default())
}

/// [`read`], checking the data of the tensors `hint.read_first` names last
/// in the one pass over the data CRC, so that they are in cache after it.
///
/// # Errors
/// As [`read`].
pub fn read_hinted(backing: Arc<Backing>, opts: ReadOptions, hint: &ReadHint) -> Result<ModelFile> {
    let parsed = parse(&backing, opts, hint)?;
    let mut mf = ModelFile::new(
        FormatKind::Embd,
        backing,
        parsed.metadata,
        parsed.vocab,
        parsed.tensors,
    )?;
    mf.details = parsed.details;
    mf.report = ReadReport {
        checksums: parsed.checksums,
    };
    Ok(mf)
}

fn parse(backing: &Backing, opts: ReadOptions, hint: &ReadHint) -> Result<Parsed> {
    let b = backing.bytes();
    let h = parse_header(b)?;
    let len = b.len() as u64;
    if h.total_file_size != len {
        let hint = if h.total_file_size > len {
            " (truncated file?)"
        } else {
            " (trailing bytes?)"
        };
        return Err(Error::format(
            "header.total_file_size",
            48,
            format!(
                "{} does not match the file length {len}{hint}",
                h.total_file_size
            ),
        ));
    }
    let min = (HEADER_SIZE + FOOTER_SIZE) as u64;
    if len < min {
        return Err(Error::format(
            "header.total_file_size",
            48,
            format!("{len} is smaller than header + footer ({min} bytes)"),
        ));
    }
    let footer = len - FOOTER_SIZE as u64;
    let footer_us = usize_of(footer, "footer")?;
    let mut fc = Cursor::new(b, footer_us);
    let data_checksum = fc.u32("footer.data_checksum")?;
    let file_checksum = fc.u32("footer.file_checksum")?;
    let end_magic: [u8; 4] = fc.array("footer.magic_end")?;
    if end_magic != END_MAGIC {
        return Err(Error::format(
            "footer.magic_end",
            footer + 8,
            format!("expected \"DBME\" (44 42 4d 45), found {end_magic:02x?}"),
        ));
    }

    let vocab_embedded = h.flags & FLAG_VOCAB_EMBEDDED != 0;
    let aligned = h.flags & FLAG_TENSORS_ALIGNED != 0;
    let checksummed = h.flags & FLAG_CHECKSUM_ENABLED != 0;

    // Section bounds.
    let meta = section(
        "metadata",
        "header.metadata_offset/metadata_size",
        12,
        u64::from(h.metadata_offset),
        u64::from(h.metadata_size),
        footer,
    )?;
    let vocab_range = if vocab_embedded {
        Some(section(
            "vocab",
            "header.vocab_offset/vocab_size",
            20,
            u64::from(h.vocab_offset),
            u64::from(h.vocab_size),
            footer,
        )?)
    } else {
        None
    };
    let count = u64::from(h.tensor_index_count);
    let desc_bytes = count * DESCRIPTOR_SIZE as u64; // < 2^37: cannot overflow
    let desc = section(
        "tensor index",
        "header.tensor_index_offset/tensor_index_count",
        28,
        u64::from(h.tensor_index_offset),
        desc_bytes,
        footer,
    )?;
    let data = section(
        "tensor data",
        "header.tensor_data_offset/tensor_data_size",
        36,
        u64::from(h.tensor_data_offset),
        h.tensor_data_size,
        footer,
    )?;

    check_overlaps(&[Some(meta), vocab_range, Some(desc), Some(data)])?;

    // Metadata.
    let metadata = parse_metadata(b, meta)?;
    for k in REQUIRED_KEYS {
        if !metadata.contains_key(k) {
            return Err(Error::format(
                "metadata section",
                meta.start,
                format!("required key '{k}' is missing"),
            ));
        }
    }

    // The tokenizer flag and its metadata key go together.
    let has_kind = metadata.contains_key(TOKENIZER_KIND_KEY);
    if (h.flags & FLAG_TOKENIZER != 0) != has_kind {
        return Err(Error::format(
            "header.flags",
            8,
            if has_kind {
                format!("metadata key '{TOKENIZER_KIND_KEY}' is present but flag bit 4 (TOKENIZER) is clear")
            } else {
                format!("flag bit 4 (TOKENIZER) is set but metadata key '{TOKENIZER_KIND_KEY}' is absent")
            },
        ));
    }

    // Vocabulary.
    let vocab = match vocab_range {
        Some(r) => Some(parse_vocab(b, r)?),
        None => None,
    };
    if let Some(v) = &vocab {
        let raw = metadata.get("vocab_size").map_or("", |s| s.as_str());
        let n: u64 = raw.trim().parse().map_err(|_| {
            Error::format(
                "metadata key 'vocab_size'",
                meta.start,
                format!("value '{raw}' is not a non-negative integer"),
            )
        })?;
        if n != v.len() as u64 {
            return Err(Error::format(
                "metadata key 'vocab_size'",
                meta.start,
                format!(
                    "{n} does not match the vocab section's token_count {}",
                    v.len()
                ),
            ));
        }
    }

    // Tensor descriptors and names.
    let (tensors, names_range) = parse_tensors(b, &h, desc, data, aligned, footer)?;

    // No two sections may overlap (the name table now included).
    check_overlaps(&[Some(meta), vocab_range, Some(names_range), Some(data)])?;

    // Footer CRCs, last, so structural defects are reported as such.
    let checksum_status = if !checksummed {
        ChecksumStatus::Absent
    } else if !opts.verify_checksums {
        ChecksumStatus::NotVerified
    } else {
        let ds_start = usize_of(data.start, "tensor data")?;
        let ds = bytes::slice(
            b,
            ds_start,
            usize_of(data.end - data.start, "tensor data")?,
            "tensor data",
        )?;
        // One pass over the data: the file CRC is the data CRC combined with
        // those of the bytes before and after it.
        let prefault = |c: &[u8]| {
            let at = c.as_ptr() as usize - b.as_ptr() as usize;
            backing.populate(at..at + c.len());
        };
        // The tensors the caller reads first are checked last (from the
        // first such tensor to the end of the data, backwards), so that they
        // are in cache right after opening.
        let read_first = hint.read_first.unwrap_or(|_| false);
        let last = tensors
            .iter()
            .filter(|t| read_first(&t.name))
            .filter_map(|t| match t.data {
                TensorData::Mapped { start, .. } => start.checked_sub(ds_start),
                TensorData::Owned { .. } => None,
            })
            .min()
            .map_or(0..0, |start| start..ds.len());
        let data_crc = bytes::crc32_parallel(ds, last, &prefault);
        let computed = data_crc.clone().finalize();
        if computed != data_checksum {
            return Err(Error::checksum(
                format!(
                    "tensor data (footer.data_checksum at offset {footer}, over bytes {}..{})",
                    data.start, data.end
                ),
                data_checksum,
                computed,
            ));
        }
        let mut file_crc = crc32fast::Hasher::new();
        file_crc.update(bytes::slice(b, 0, ds_start, "file")?);
        file_crc.combine(&data_crc);
        let rest = ds_start + ds.len();
        file_crc.update(bytes::slice(b, rest, footer_us - rest, "file")?);
        let computed = file_crc.finalize();
        if computed != file_checksum {
            return Err(Error::checksum(
                format!(
                    "file (footer.file_checksum at offset {}, over bytes 0..{footer})",
                    footer + 4
                ),
                file_checksum,
                computed,
            ));
        }
        ChecksumStatus::Verified
    };

    // Header fields for `embd inspect`, in header order.
    let offsets_and_sizes: [(&str, u64); 10] = [
        ("metadata_offset", h.metadata_offset.into()),
        ("metadata_size", h.metadata_size.into()),
        ("vocab_offset", h.vocab_offset.into()),
        ("vocab_size", h.vocab_size.into()),
        ("tensor_index_offset", h.tensor_index_offset.into()),
        ("tensor_index_count", h.tensor_index_count.into()),
        ("tensor_data_offset", h.tensor_data_offset.into()),
        ("tensor_data_size", h.tensor_data_size),
        ("footer_offset", footer),
        ("total_file_size", h.total_file_size),
    ];
    let mut details: Vec<(String, String)> = vec![
        ("format".into(), "EMBD .weights".into()),
        (
            "version".into(),
            format!("{}.{}", h.version_major, h.version_minor),
        ),
        ("flags".into(), describe_flags(h.flags)),
    ];
    for (k, v) in offsets_and_sizes {
        details.push((k.to_string(), v.to_string()));
    }
    for (k, v) in [
        (
            "header_checksum",
            format!("{:#010x} (verified)", h.header_checksum),
        ),
        ("data_checksum", format!("{data_checksum:#010x}")),
        ("file_checksum", format!("{file_checksum:#010x}")),
        ("checksums", checksum_status.describe().to_string()),
    ] {
        details.push((k.to_string(), v));
    }

    Ok(Parsed {
        metadata,
        vocab,
        tensors,
        details,
        checksums: checksum_status,
    })
}

/// Fails if two non-empty ranges overlap.
fn check_overlaps(ranges: &[Option<Range>]) -> Result<()> {
    let ranges: Vec<Range> = ranges.iter().flatten().copied().collect();
    for (i, x) in ranges.iter().enumerate() {
        for y in &ranges[i + 1..] {
            if x.start < x.end && y.start < y.end && x.start < y.end && y.start < x.end {
                return Err(Error::format(
                    format!("{} section", y.name),
                    y.start,
                    format!(
                        "[{}, {}) overlaps the {} section [{}, {})",
                        y.start, y.end, x.name, x.start, x.end
                    ),
                ));
            }
        }
    }
    Ok(())
}

fn parse_metadata(b: &[u8], r: Range) -> Result<BTreeMap<String, String>> {
    let end = usize_of(r.end, "metadata section")?;
    let start = usize_of(r.start, "metadata section")?;
    let sect = bytes::slice(b, 0, end, "metadata section")?;
    let mut c = Cursor::new(sect, start);
    let entry_count = c.u32("metadata.entry_count")?;
    let total_size = c.u32("metadata.total_size")?;
    let expected = u64::from(total_size) + 8;
    if expected != r.end - r.start {
        return Err(Error::format(
            "metadata.total_size",
            r.start + 4,
            format!(
                "8 + total_size {total_size} = {expected} does not match header.metadata_size {}",
                r.end - r.start
            ),
        ));
    }
    // Each entry takes at least its 4-byte length header.
    if u64::from(entry_count) * 4 > u64::from(total_size) {
        return Err(Error::format(
            "metadata.entry_count",
            r.start,
            format!("{entry_count} entries cannot fit in total_size {total_size} bytes"),
        ));
    }
    let mut md = BTreeMap::new();
    for i in 0..entry_count {
        let at = c.pos() as u64;
        let key_len = c.u16(&format!("metadata entry {i} key_length"))?;
        let value_len = c.u16(&format!("metadata entry {i} value_length"))?;
        let key = c.str(usize::from(key_len), &format!("metadata entry {i} key"))?;
        let value = c.str(
            usize::from(value_len),
            &format!("metadata entry {i} ('{key}') value"),
        )?;
        if md.insert(key.to_string(), value.to_string()).is_some() {
            return Err(Error::format(
                format!("metadata entry {i} key"),
                at + 4,
                format!("duplicate key '{key}'"),
            ));
        }
    }
    if c.pos() != end {
        return Err(Error::format(
            "metadata.total_size",
            r.start + 4,
            format!(
                "the {entry_count} entries end at offset {} but total_size {total_size} says the section ends at {end}",
                c.pos()
            ),
        ));
    }
    Ok(md)
}

fn parse_vocab(b: &[u8], r: Range) -> Result<Vocab> {
    let start = usize_of(r.start, "vocab section")?;
    let end = usize_of(r.end, "vocab section")?;
    let sect = bytes::slice(b, 0, end, "vocab section")?;
    let mut c = Cursor::new(sect, start);
    let token_count = c.u32("vocab.token_count")?;
    let total_size = c.u32("vocab.total_size")?;
    let special = c.u32("vocab.special_tokens")?;
    let tokens_start = r.start + 12;
    let tokens_end = tokens_start + u64::from(total_size);
    if tokens_end > r.end {
        return Err(Error::format(
            "vocab.total_size",
            r.start + 4,
            format!(
                "token entries [{tokens_start}, {tokens_end}) run past the end of the vocab section at {}",
                r.end
            ),
        ));
    }
    // Each token takes at least its 2-byte length.
    if u64::from(token_count) * 2 > u64::from(total_size) {
        return Err(Error::format(
            "vocab.token_count",
            r.start,
            format!("{token_count} tokens cannot fit in total_size {total_size} bytes"),
        ));
    }
    let sp = u64::from(special);
    let sp_end = sp + 20;
    if sp < tokens_end || sp_end > r.end {
        return Err(Error::format(
            "vocab.special_tokens",
            r.start + 8,
            format!(
                "special id block [{sp}, {sp_end}) is not inside the vocab section after the token entries [{tokens_end}, {})",
                r.end
            ),
        ));
    }
    let mut sc = Cursor::new(sect, usize_of(sp, "vocab.special_tokens")?);
    let mut ids = [0u32; 5];
    for (k, id) in ids.iter_mut().enumerate() {
        let at = sc.pos() as u64;
        let what = format!("vocab.special_tokens.{}", SPECIAL_NAMES[k]);
        *id = sc.u32(&what)?;
        if *id >= token_count {
            return Err(Error::format(
                what,
                at,
                format!("id {} is not below token_count {token_count}", *id),
            ));
        }
    }
    let tokens_end_us = usize_of(tokens_end, "vocab token entries")?;
    let tokens_start_us = usize_of(tokens_start, "vocab token entries")?;
    let tsect = bytes::slice(sect, 0, tokens_end_us, "vocab token entries")?;
    let specials = super::special_ids(&ids);
    // Fast path: no allocation or message per token. Any defect (or a count
    // mismatch) is reported by the checked walk below, with the same errors.
    if let Some((text, offsets)) = vocab_tokens_fast(tsect, tokens_start_us, token_count) {
        return Vocab::from_parts(text, offsets, specials);
    }
    let mut tc = Cursor::new(tsect, tokens_start_us);
    for i in 0..token_count {
        let n = tc.u16(&format!("vocab token {i} token_length"))?;
        tc.str(usize::from(n), &format!("vocab token {i}"))?;
    }
    Err(Error::format(
        "vocab.total_size",
        r.start + 4,
        format!(
            "the {token_count} token entries end at offset {} but total_size {total_size} says they end at {tokens_end}",
            tc.pos()
        ),
    ))
}

/// Reads `count` token entries (u16 length + UTF-8 bytes) from `b[start..]`,
/// which must end exactly at `b.len()`, into one string and its offsets (see
/// [`Vocab::from_parts`]). `None` on any defect; the caller then walks the
/// entries again with checked reads to name it.
fn vocab_tokens_fast(b: &[u8], start: usize, count: u32) -> Option<(String, Vec<u32>)> {
    let entries = b.get(start..)?;
    // Lengths take 2 bytes each, so the text is at most this long.
    let cap = entries.len().checked_sub(2 * count as usize)?;
    let mut text: Vec<u8> = Vec::with_capacity(cap);
    let mut offsets: Vec<u32> = Vec::with_capacity(count as usize + 1);
    offsets.push(0);
    let mut at = 0usize;
    for _ in 0..count {
        let len = entries.get(at..at + 2)?;
        let n = usize::from(u16::from_le_bytes([len[0], len[1]]));
        text.extend_from_slice(entries.get(at + 2..at + 2 + n)?);
        offsets.push(u32::try_from(text.len()).ok()?);
        at += 2 + n;
    }
    if at != entries.len() {
        return None;
    }
    // Each token is valid UTF-8 exactly when the concatenation is and every
    // token boundary is a char boundary.
    let text = String::from_utf8(text).ok()?;
    offsets
        .iter()
        .all(|&o| text.is_char_boundary(o as usize))
        .then_some((text, offsets))
}

/// A raw 32-byte descriptor.
struct RawDesc {
    at: u64,
    name_hash: u32,
    dtype: u8,
    ndim: u8,
    name_length: u16,
    shape: [u32; 4],
    data_offset: u64,
}

fn parse_tensors(
    b: &[u8],
    h: &Header,
    desc: Range,
    data: Range,
    aligned: bool,
    footer: u64,
) -> Result<(Vec<TensorEntry>, Range)> {
    let count = h.tensor_index_count as usize;
    let mut c = Cursor::new(b, usize_of(desc.start, "tensor index")?);
    // `desc` was checked to lie inside the file, so `count` is bounded by its size.
    let mut raws = Vec::with_capacity(count);
    let mut names_total: u64 = 0;
    for i in 0..count {
        let at = c.pos() as u64;
        let what = |f: &str| format!("tensor index entry {i} {f}");
        let name_hash = c.u32(&what("name_hash"))?;
        let dtype = c.u8(&what("dtype"))?;
        let ndim = c.u8(&what("ndim"))?;
        let name_length = c.u16(&what("name_length"))?;
        let mut shape = [0u32; 4];
        for (k, s) in shape.iter_mut().enumerate() {
            *s = c.u32(&what(&format!("shape[{k}]")))?;
        }
        let data_offset = c.u64(&what("data_offset"))?;
        names_total += u64::from(name_length);
        raws.push(RawDesc {
            at,
            name_hash,
            dtype,
            ndim,
            name_length,
            shape,
            data_offset,
        });
    }
    let names = section(
        "tensor index",
        "tensor name table",
        desc.end,
        desc.start,
        desc.end - desc.start + names_total,
        footer,
    )?;

    let mut tensors = Vec::with_capacity(count);
    let mut by_hash: HashMap<u32, Vec<usize>> = HashMap::with_capacity(count);
    let mut name_at = desc.end;
    for (i, r) in raws.iter().enumerate() {
        let nat = usize_of(name_at, "tensor name")?;
        let nb = bytes::slice(
            b,
            nat,
            usize::from(r.name_length),
            &format!("tensor index entry {i} name"),
        )?;
        let name = bytes::utf8(nb, &format!("tensor index entry {i} name"), nat)?;
        if name.is_empty() {
            return Err(Error::format(
                format!("tensor index entry {i} name_length"),
                r.at + 6,
                "tensor name is empty",
            ));
        }
        let what = |f: &str| format!("tensor index entry {i} ({name}) {f}");
        let hash = bytes::fnv1a32(nb);
        if hash != r.name_hash {
            return Err(Error::format(
                what("name_hash"),
                r.at,
                format!(
                    "stored {:#010x} but the FNV-1a hash of the name is {hash:#010x}",
                    r.name_hash
                ),
            ));
        }
        let dtype = DType::from_code(r.dtype).ok_or_else(|| {
            Error::format(
                what("dtype"),
                r.at + 4,
                format!("unknown dtype code {} (valid codes are 0..=8)", r.dtype),
            )
        })?;
        if !(1..=4).contains(&r.ndim) {
            return Err(Error::format(
                what("ndim"),
                r.at + 5,
                format!("{} is not in 1..=4", r.ndim),
            ));
        }
        let ndim = usize::from(r.ndim);
        let mut numel: u64 = 1;
        for (k, &s) in r.shape.iter().enumerate() {
            let at = r.at + 8 + 4 * k as u64;
            if k < ndim {
                if s == 0 {
                    return Err(Error::format(what(&format!("shape[{k}]")), at, "is 0"));
                }
                numel = numel.checked_mul(u64::from(s)).ok_or_else(|| {
                    Error::format(
                        what("shape"),
                        r.at + 8,
                        format!("element count of {:?} overflows", &r.shape[..ndim]),
                    )
                })?;
            } else if s != 0 {
                return Err(Error::format(
                    what(&format!("shape[{k}]")),
                    at,
                    format!("is {s} but ndim is {ndim}, so it must be 0"),
                ));
            }
        }
        let size = numel.checked_mul(dtype.size() as u64).ok_or_else(|| {
            Error::format(
                what("shape"),
                r.at + 8,
                format!(
                    "byte size of {:?} x {} bytes overflows",
                    &r.shape[..ndim],
                    dtype.size()
                ),
            )
        })?;
        let tds = data.end - data.start;
        let rel_end = r.data_offset.checked_add(size).filter(|&e| e <= tds);
        if rel_end.is_none() {
            return Err(Error::format(
                what("data_offset"),
                r.at + 24,
                format!(
                    "data_offset {} + {size} bytes ends beyond the tensor data section (size {tds})",
                    r.data_offset
                ),
            ));
        }
        // data_offset + size <= tds, so this cannot overflow.
        let abs = data.start + r.data_offset;
        if aligned && !abs.is_multiple_of(ALIGNMENT) {
            return Err(Error::format(
                what("data_offset"),
                r.at + 24,
                format!(
                    "tensor starts at file offset {abs}, not a multiple of {ALIGNMENT} although TENSORS_ALIGNED is set"
                ),
            ));
        }
        let slot = by_hash.entry(hash).or_default();
        if let Some(&j) = slot.iter().find(|&&j| tensors_name(&tensors, j) == name) {
            return Err(Error::format(
                what("name"),
                name_at,
                format!("duplicate tensor name (also tensor index entry {j})"),
            ));
        }
        slot.push(i);
        let shape = r.shape[..ndim]
            .iter()
            .map(|&s| s as usize)
            .collect::<Vec<usize>>();
        tensors.push(TensorEntry {
            name: name.to_string(),
            dtype,
            shape,
            data: TensorData::Mapped {
                start: usize_of(abs, "tensor data")?,
                len: usize_of(size, "tensor data")?,
            },
            file_offset: abs,
        });
        name_at += u64::from(r.name_length);
    }
    Ok((tensors, names))
}

fn tensors_name(t: &[TensorEntry], j: usize) -> &str {
    t.get(j).map_or("", |t| t.name.as_str())
}

// ---------------------------------------------------------------------------
// Writer
// ---------------------------------------------------------------------------

/// Options for [`write_to`] / [`write_file`].
#[derive(Debug, Clone, Copy)]
pub struct WriteOptions {
    /// Set CHECKSUM_ENABLED and write the data and file CRC32s (default true).
    /// When false the flag is clear and both footer CRCs are written as 0.
    pub checksums: bool,
}

impl Default for WriteOptions {
    fn default() -> Self {
        WriteOptions { checksums: true }
    }
}

fn bad(detail: impl Into<String>) -> Error {
    Error::invalid_argument(format!("cannot write EMBD: {}", detail.into()))
}

fn fit_u32(v: u64, what: &str) -> Result<u32> {
    u32::try_from(v).map_err(|_| bad(format!("{what} {v} does not fit in a u32 field")))
}

fn fit_u16(v: usize, what: &str) -> Result<u16> {
    u16::try_from(v).map_err(|_| {
        bad(format!(
            "{what} is {v} bytes, more than the u16 limit 65535"
        ))
    })
}

fn align_up(x: u64) -> Result<u64> {
    x.checked_add(ALIGNMENT - 1)
        .map(|v| v & !(ALIGNMENT - 1))
        .ok_or_else(|| bad("file size overflows"))
}

/// The sections before the tensor data, fully built, and the data layout.
struct Plan {
    header: [u8; HEADER_SIZE],
    pre_data: Vec<u8>,
    tensor_data_offset: u64,
    offsets: Vec<u64>,
    tensor_data_size: u64,
    total: u64,
}

fn plan(model: &ModelFile, opts: &WriteOptions) -> Result<Plan> {
    let vocab = model
        .vocab
        .as_ref()
        .ok_or_else(|| bad("the model has no vocabulary (VOCAB_EMBEDDED is always written)"))?;
    for k in REQUIRED_KEYS {
        if !model.metadata.contains_key(k) {
            return Err(bad(format!("required metadata key '{k}' is missing")));
        }
    }
    let vs = model.metadata.get("vocab_size").map_or("", |s| s.trim());
    if vs.parse::<u64>().ok() != Some(vocab.len() as u64) {
        return Err(bad(format!(
            "metadata vocab_size '{vs}' does not match the vocabulary's {} tokens",
            vocab.len()
        )));
    }

    // Metadata section.
    let mut entries = Vec::new();
    for (k, v) in &model.metadata {
        let kl = fit_u16(k.len(), &format!("metadata key '{k}'"))?;
        let vl = fit_u16(v.len(), &format!("metadata value of '{k}'"))?;
        entries.extend_from_slice(&kl.to_le_bytes());
        entries.extend_from_slice(&vl.to_le_bytes());
        entries.extend_from_slice(k.as_bytes());
        entries.extend_from_slice(v.as_bytes());
    }
    let metadata_offset = HEADER_SIZE as u64;
    let metadata_size = 8 + entries.len() as u64;
    let mut pre = Vec::with_capacity(entries.len() + 8);
    pre.extend_from_slice(
        &fit_u32(model.metadata.len() as u64, "metadata entry count")?.to_le_bytes(),
    );
    pre.extend_from_slice(&fit_u32(entries.len() as u64, "metadata total_size")?.to_le_bytes());
    pre.extend_from_slice(&entries);

    // Vocab section.
    let vocab_offset = metadata_offset + metadata_size;
    let mut toks = Vec::new();
    for (i, t) in vocab.iter().enumerate() {
        let n = fit_u16(t.len(), &format!("vocab token {i}"))?;
        toks.extend_from_slice(&n.to_le_bytes());
        toks.extend_from_slice(t.as_bytes());
    }
    let special_abs = vocab_offset + 12 + toks.len() as u64;
    let vocab_size = 12 + toks.len() as u64 + 20;
    pre.extend_from_slice(&fit_u32(vocab.len() as u64, "vocab token_count")?.to_le_bytes());
    pre.extend_from_slice(&fit_u32(toks.len() as u64, "vocab total_size")?.to_le_bytes());
    pre.extend_from_slice(&fit_u32(special_abs, "vocab special_tokens offset")?.to_le_bytes());
    pre.extend_from_slice(&toks);
    for id in vocab.specials().as_array() {
        pre.extend_from_slice(&id.to_le_bytes());
    }

    // Tensor layout.
    let tensor_index_offset = vocab_offset + vocab_size;
    let count = model.tensors.len() as u64;
    let names_len: u64 = model.tensors.iter().map(|t| t.name.len() as u64).sum();
    let index_end = tensor_index_offset + count * DESCRIPTOR_SIZE as u64 + names_len;
    let tensor_data_offset = align_up(index_end)?;
    let mut offsets = Vec::with_capacity(model.tensors.len());
    let mut cursor: u64 = 0;
    let mut tensor_data_size: u64 = 0;
    for t in &model.tensors {
        let rel = align_up(cursor)?;
        offsets.push(rel);
        let len = t.byte_len() as u64;
        tensor_data_size = rel
            .checked_add(len)
            .ok_or_else(|| bad("tensor data size overflows"))?;
        cursor = tensor_data_size;
    }
    for (t, &rel) in model.tensors.iter().zip(&offsets) {
        let name = &t.name;
        if name.is_empty() {
            return Err(bad("a tensor has an empty name"));
        }
        let nl = fit_u16(name.len(), &format!("tensor name '{name}'"))?;
        if !(1..=4).contains(&t.shape.len()) {
            return Err(bad(format!(
                "tensor '{name}' has {} dimensions (1..=4 allowed)",
                t.shape.len()
            )));
        }
        let mut shape = [0u32; 4];
        for (k, &d) in t.shape.iter().enumerate() {
            if d == 0 {
                return Err(bad(format!("tensor '{name}' has a zero dimension")));
            }
            shape[k] = fit_u32(d as u64, &format!("tensor '{name}' dimension {k}"))?;
        }
        let expect = t
            .shape
            .iter()
            .try_fold(t.dtype.size(), |a, &d| a.checked_mul(d));
        if expect != Some(t.byte_len()) {
            return Err(bad(format!(
                "tensor '{name}' has {} bytes, its shape {:?} of {} needs {expect:?}",
                t.byte_len(),
                t.shape,
                t.dtype
            )));
        }
        pre.extend_from_slice(&bytes::fnv1a32(name.as_bytes()).to_le_bytes());
        pre.push(t.dtype.code());
        pre.push(t.shape.len() as u8);
        pre.extend_from_slice(&nl.to_le_bytes());
        for s in shape {
            pre.extend_from_slice(&s.to_le_bytes());
        }
        pre.extend_from_slice(&rel.to_le_bytes());
    }
    for t in &model.tensors {
        pre.extend_from_slice(t.name.as_bytes());
    }
    pre.resize(
        usize_of(
            tensor_data_offset - HEADER_SIZE as u64,
            "tensor data offset",
        )?,
        0,
    );

    let footer = tensor_data_offset
        .checked_add(tensor_data_size)
        .ok_or_else(|| bad("file size overflows"))?;
    let total = footer + FOOTER_SIZE as u64;
    let tokenizer = model.metadata.contains_key(TOKENIZER_KIND_KEY);
    let flags = FLAG_VOCAB_EMBEDDED
        | FLAG_TENSORS_ALIGNED
        | if opts.checksums {
            FLAG_CHECKSUM_ENABLED
        } else {
            0
        }
        | if tokenizer { FLAG_TOKENIZER } else { 0 };
    let mut hd = Vec::with_capacity(HEADER_SIZE);
    hd.extend_from_slice(&MAGIC);
    hd.extend_from_slice(&VERSION_MAJOR.to_le_bytes());
    // Minor 1 marks the tokenizer extension; other files stay minor 0.
    let minor = if tokenizer { 1 } else { VERSION_MINOR };
    hd.extend_from_slice(&minor.to_le_bytes());
    hd.extend_from_slice(&flags.to_le_bytes());
    for (v, what) in [
        (metadata_offset, "metadata_offset"),
        (metadata_size, "metadata_size"),
        (vocab_offset, "vocab_offset"),
        (vocab_size, "vocab_size"),
        (tensor_index_offset, "tensor_index_offset"),
        (count, "tensor_index_count"),
        (tensor_data_offset, "tensor_data_offset"),
    ] {
        hd.extend_from_slice(&fit_u32(v, what)?.to_le_bytes());
    }
    hd.extend_from_slice(&tensor_data_size.to_le_bytes());
    hd.extend_from_slice(&total.to_le_bytes());
    let crc = bytes::crc32(&hd);
    hd.extend_from_slice(&crc.to_le_bytes());
    hd.extend_from_slice(&0u32.to_le_bytes());
    let mut header = [0u8; HEADER_SIZE];
    header.copy_from_slice(&hd);
    Ok(Plan {
        header,
        pre_data: pre,
        tensor_data_offset,
        offsets,
        tensor_data_size,
        total,
    })
}

/// A writer that counts and CRCs what passes through.
struct Sink<'w, W: Write> {
    w: &'w mut W,
    file_crc: crc32fast::Hasher,
    written: u64,
}

impl<W: Write> Sink<'_, W> {
    fn put(&mut self, b: &[u8]) -> Result<()> {
        self.w
            .write_all(b)
            .map_err(|e| Error::io("writing EMBD output", e))?;
        self.file_crc.update(b);
        self.written += b.len() as u64;
        Ok(())
    }
}

const PROGRESS_CHUNK: usize = 1 << 20;

/// Writes `model` as an EMBD file to `w`, returning the number of bytes written.
///
/// The layout is exactly the one of the format notes; metadata is written in
/// key order, tensors in `model.tensors` order. `progress(done, total)` is
/// called with tensor-data bytes written so far (at the start, after every
/// chunk of at most 1 MiB, and at the end).
///
/// # Errors
/// [`ErrorKind::InvalidArgument`] when the model cannot be represented (no
/// vocabulary, a required metadata key missing, metadata `vocab_size` not the
/// vocabulary size, a string longer than 65535 bytes, a shape with 0 or more
/// than 4 dimensions or a zero dimension, bytes not matching the shape, a
/// section offset beyond 4 GiB); [`ErrorKind::Io`] on write failure.
pub fn write_to<W: Write>(
    model: &ModelFile,
    w: &mut W,
    opts: &WriteOptions,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<u64> {
    let p = plan(model, opts)?;
    let mut s = Sink {
        w,
        file_crc: crc32fast::Hasher::new(),
        written: 0,
    };
    s.put(&p.header)?;
    s.put(&p.pre_data)?;
    if s.written != p.tensor_data_offset {
        return Err(Error::new(
            ErrorKind::Internal,
            "EMBD writer: sections before the tensor data do not end at tensor_data_offset",
        ));
    }
    let mut data_crc = crc32fast::Hasher::new();
    let total = p.tensor_data_size;
    let mut done: u64 = 0;
    progress(0, total);
    let zeros = [0u8; ALIGNMENT as usize];
    for (t, &rel) in model.tensors.iter().zip(&p.offsets) {
        let pad = usize_of(rel - done, "padding")?;
        if pad > 0 {
            let z = zeros.get(..pad).ok_or_else(|| {
                Error::new(ErrorKind::Internal, "EMBD writer: padding larger than 64")
            })?;
            s.put(z)?;
            data_crc.update(z);
            done += pad as u64;
        }
        for chunk in model.tensor_bytes(t).chunks(PROGRESS_CHUNK) {
            s.put(chunk)?;
            data_crc.update(chunk);
            done += chunk.len() as u64;
            progress(done, total);
        }
    }
    let (dc, fc) = if opts.checksums {
        (data_crc.finalize(), s.file_crc.clone().finalize())
    } else {
        (0, 0)
    };
    let mut footer = [0u8; FOOTER_SIZE];
    footer[0..4].copy_from_slice(&dc.to_le_bytes());
    footer[4..8].copy_from_slice(&fc.to_le_bytes());
    footer[8..12].copy_from_slice(&END_MAGIC);
    s.put(&footer)?;
    progress(total, total);
    if s.written != p.total {
        return Err(Error::new(
            ErrorKind::Internal,
            format!("EMBD writer wrote {} bytes, planned {}", s.written, p.total),
        ));
    }
    Ok(s.written)
}

/// Writes `model` to `path` atomically ([`crate::atomic_write::atomic_write`]):
/// through a temporary file in the same directory that is renamed over `path`
/// once complete and synced; on any failure the temporary file is removed and
/// `path` is left untouched.
///
/// # Errors
/// As [`write_to`], plus [`ErrorKind::Io`] for file system failures.
pub fn write_file(
    model: &ModelFile,
    path: &Path,
    opts: &WriteOptions,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<()> {
    crate::atomic_write::atomic_write(path, |w| write_to(model, w, opts, progress).map(|_| ()))
}

/// Writes `model` into memory (tests, small models).
///
/// # Errors
/// As [`write_to`].
pub fn to_bytes(model: &ModelFile, opts: &WriteOptions) -> Result<Vec<u8>> {
    let mut v = Vec::new();
    write_to(model, &mut v, opts, &mut |_, _| {})?;
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vocab() -> Vocab {
        let toks = [
            "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hello", "##lo", "é",
        ];
        Vocab::from_tokens_bert(toks.iter().map(|s| s.to_string()).collect()).unwrap()
    }

    fn metadata() -> BTreeMap<String, String> {
        [
            ("model_name", "test-model"),
            ("model_version", "1"),
            ("embedding_dim", "4"),
            ("vocab_size", "8"),
            ("num_layers", "1"),
            ("num_attention_heads", "1"),
            ("hidden_size", "4"),
            ("intermediate_size", "8"),
            ("max_position_emb", "16"),
            ("created_at", "2025-01-16T12:00:00Z"),
            ("x_a", "1"),
            ("x_b", "2"),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
    }

    fn seq(n: usize, mul: u8) -> Vec<u8> {
        (0..n)
            .map(|i| (i as u8).wrapping_mul(mul).wrapping_add(1))
            .collect()
    }

    fn model() -> ModelFile {
        let tensors = vec![
            TensorEntry::owned_f32("t_a", vec![3], &[1.0, -2.5, 3.25]),
            TensorEntry::owned_bytes("t_b", DType::F16, vec![2, 3], &seq(12, 7)),
            TensorEntry::owned_bytes("four.d", DType::U8, vec![2, 2, 2, 2], &seq(16, 3)),
            TensorEntry::owned_bytes("ints", DType::I32, vec![5], &seq(20, 11)),
        ];
        ModelFile::new(
            FormatKind::Embd,
            Arc::new(Backing::from_bytes(&[])),
            metadata(),
            Some(vocab()),
            tensors,
        )
        .unwrap()
    }

    fn good() -> Vec<u8> {
        to_bytes(&model(), &WriteOptions::default()).unwrap()
    }

    fn rd(b: &[u8]) -> Result<ModelFile> {
        read(Arc::new(Backing::from_bytes(b)), ReadOptions::default())
    }

    fn get32(b: &[u8], at: usize) -> u32 {
        u32::from_le_bytes(b[at..at + 4].try_into().unwrap())
    }
    fn put16(b: &mut [u8], at: usize, v: u16) {
        b[at..at + 2].copy_from_slice(&v.to_le_bytes());
    }
    fn put32(b: &mut [u8], at: usize, v: u32) {
        b[at..at + 4].copy_from_slice(&v.to_le_bytes());
    }
    fn put64(b: &mut [u8], at: usize, v: u64) {
        b[at..at + 8].copy_from_slice(&v.to_le_bytes());
    }
    fn fix_crc(b: &mut [u8]) {
        let c = bytes::crc32(&b[..56]);
        put32(b, 56, c);
    }
    fn find(b: &[u8], pat: &[u8]) -> usize {
        b.windows(pat.len()).position(|w| w == pat).unwrap()
    }
    fn expect(b: &[u8], kind: ErrorKind, needles: &[&str]) {
        let e = rd(b).unwrap_err();
        assert_eq!(e.kind(), kind, "{e}");
        for n in needles {
            assert!(e.to_string().contains(n), "'{n}' not in: {e}");
        }
    }
    /// Applies `f` to a fresh valid file, re-fixes the header CRC and expects an error.
    fn defect(f: impl FnOnce(&mut Vec<u8>), kind: ErrorKind, needles: &[&str]) {
        let mut b = good();
        f(&mut b);
        fix_crc(&mut b);
        expect(&b, kind, needles);
    }
    const VOCAB_OFF: usize = 20;
    const IDX_OFF: usize = 28;
    const TDO: usize = 36;
    fn desc(b: &[u8], i: usize) -> usize {
        get32(b, IDX_OFF) as usize + 32 * i
    }

    #[test]
    fn round_trip_small() {
        for checksums in [true, false] {
            let m = model();
            let b = to_bytes(&m, &WriteOptions { checksums }).unwrap();
            let r = rd(&b).unwrap();
            assert_eq!(r.format, FormatKind::Embd);
            assert_eq!(r.metadata, m.metadata);
            assert_eq!(r.vocab.as_ref().unwrap().tokens(), vocab().tokens());
            assert_eq!(r.vocab.as_ref().unwrap().specials(), vocab().specials());
            assert_eq!(r.tensors.len(), m.tensors.len());
            for (a, t) in m.tensors.iter().zip(&r.tensors) {
                assert_eq!(a.name, t.name);
                assert_eq!(a.dtype, t.dtype);
                assert_eq!(a.shape, t.shape);
                assert_eq!(m.tensor_bytes(a), r.tensor_bytes(t));
                assert!(matches!(t.data, TensorData::Mapped { .. }));
                assert_eq!(t.file_offset % 64, 0);
            }
            let flags = get32(&b, 8);
            assert_eq!(flags, if checksums { 7 } else { 3 });
            let status = &r.details.iter().find(|(k, _)| k == "checksums").unwrap().1;
            assert_eq!(
                status,
                if checksums {
                    "verified"
                } else {
                    "absent (flag clear)"
                }
            );
            if !checksums {
                assert_eq!(&b[b.len() - 16..b.len() - 8], &[0u8; 8]);
            }
            // Writing what was read gives the same bytes.
            assert_eq!(to_bytes(&r, &WriteOptions { checksums }).unwrap(), b);
        }
    }

    #[test]
    fn layout_matches_the_notes() {
        let b = good();
        let len = b.len() as u64;
        assert_eq!(get32(&b, 12), 64);
        let meta_size = get32(&b, 16);
        assert_eq!(meta_size, 8 + get32(&b, 64 + 4));
        let vo = get32(&b, VOCAB_OFF);
        assert_eq!(vo, 64 + meta_size);
        let vs = get32(&b, 24);
        let vtotal = get32(&b, vo as usize + 4);
        assert_eq!(vs, 12 + vtotal + 20);
        assert_eq!(get32(&b, vo as usize + 8), vo + 12 + vtotal);
        assert_eq!(get32(&b, IDX_OFF), vo + vs);
        let tdo = get32(&b, TDO) as u64;
        assert_eq!(tdo % 64, 0);
        let tds = u64::from_le_bytes(b[40..48].try_into().unwrap());
        assert_eq!(tdo + tds + 16, len);
        assert_eq!(u64::from_le_bytes(b[48..56].try_into().unwrap()), len);
        assert_eq!(&b[b.len() - 8..b.len() - 4], b"DBME");
        assert_eq!(get32(&b, 60), 0);
        assert_eq!(get32(&b, b.len() - 4), 0);
    }

    #[test]
    fn verify_checksums_option_skips_footer_crcs() {
        let mut b = good();
        let tdo = get32(&b, TDO) as usize;
        b[tdo] ^= 0xFF;
        expect(&b, ErrorKind::Checksum, &["data"]);
        let r = read(
            Arc::new(Backing::from_bytes(&b)),
            ReadOptions {
                verify_checksums: false,
            },
        )
        .unwrap();
        let status = &r.details.iter().find(|(k, _)| k == "checksums").unwrap().1;
        assert_eq!(status, "not verified (disabled by option)");
    }

    #[test]
    fn footer_crcs_ignored_when_flag_clear() {
        let mut b = to_bytes(&model(), &WriteOptions { checksums: false }).unwrap();
        let n = b.len();
        put32(&mut b, n - 16, 0xDEAD_BEEF);
        put32(&mut b, n - 12, 0x1234_5678);
        assert!(rd(&b).is_ok());
    }

    #[test]
    fn any_minor_version_is_accepted() {
        let mut b = good();
        put16(&mut b, 6, 7);
        fix_crc(&mut b);
        // The file CRC covers the header too.
        let r = read(
            Arc::new(Backing::from_bytes(&b)),
            ReadOptions {
                verify_checksums: false,
            },
        )
        .unwrap();
        assert!(r.details.iter().any(|(k, v)| k == "version" && v == "1.7"));
    }

    #[test]
    fn writer_refuses_unrepresentable_models() {
        let mut m = model();
        m.vocab = None;
        assert_eq!(
            to_bytes(&m, &WriteOptions::default()).unwrap_err().kind(),
            ErrorKind::InvalidArgument
        );
        let mut m = model();
        m.metadata.remove("created_at");
        let e = to_bytes(&m, &WriteOptions::default()).unwrap_err();
        assert!(e.to_string().contains("created_at"), "{e}");
        let mut m = model();
        m.metadata.insert("long".into(), "x".repeat(70_000));
        let e = to_bytes(&m, &WriteOptions::default()).unwrap_err();
        assert!(e.to_string().contains("65535"), "{e}");
        let mut m = model();
        m.metadata.insert("vocab_size".into(), "9".into());
        assert!(to_bytes(&m, &WriteOptions::default()).is_err());
    }

    #[test]
    fn zero_tensors_round_trip() {
        let m = model();
        let m = ModelFile::new(
            FormatKind::Embd,
            Arc::new(Backing::from_bytes(&[])),
            m.metadata.clone(),
            m.vocab.clone(),
            Vec::new(),
        )
        .unwrap();
        let b = to_bytes(&m, &WriteOptions::default()).unwrap();
        let r = rd(&b).unwrap();
        assert!(r.tensors.is_empty());
        assert_eq!(r.metadata, m.metadata);
    }

    #[test]
    fn vocab_flag_clear_means_no_vocab() {
        let mut b = to_bytes(&model(), &WriteOptions { checksums: false }).unwrap();
        put32(&mut b, 8, FLAG_TENSORS_ALIGNED);
        // The vocab fields are not read at all.
        put32(&mut b, VOCAB_OFF, u32::MAX);
        fix_crc(&mut b);
        let r = rd(&b).unwrap();
        assert!(r.vocab.is_none());
        assert_eq!(r.tensors.len(), 4);
        assert!(r
            .details
            .iter()
            .any(|(k, v)| k == "flags" && v.contains("TENSORS_ALIGNED") && !v.contains("VOCAB")));
    }

    #[test]
    fn name_table_overlapping_data_is_refused() {
        defect(
            |b| {
                // Start the data section inside the name table (alignment
                // off so that this is the check that fires).
                put32(b, 8, FLAG_VOCAB_EMBEDDED | FLAG_CHECKSUM_ENABLED);
                let names = desc(b, 4) as u32;
                put32(b, TDO, names + 1);
            },
            ErrorKind::Format,
            &["overlaps"],
        );
    }

    // ---- damaged-file matrix: one defect per test ----

    #[test]
    fn bad_magic() {
        defect(|b| b[0] = b'X', ErrorKind::UnknownFormat, &["header.magic"]);
    }

    #[test]
    fn major_version_2() {
        defect(
            |b| put16(b, 4, 2),
            ErrorKind::Unsupported,
            &["version_major", "2.0"],
        );
    }

    #[test]
    fn compressed_flag() {
        defect(
            |b| put32(b, 8, 7 | FLAG_COMPRESSED),
            ErrorKind::Unsupported,
            &["header.flags", "unsupported feature", "COMPRESSED"],
        );
    }

    #[test]
    fn reserved_flag() {
        defect(
            |b| put32(b, 8, 7 | (1 << 5)),
            ErrorKind::Unsupported,
            &["header.flags", "unsupported feature", "reserved"],
        );
    }

    #[test]
    fn tokenizer_flag_without_its_metadata_key() {
        // Bit 4 says a non-WordPiece tokenizer is described in the metadata;
        // a file that sets it without `tokenizer.kind` is refused by name.
        defect(
            |b| put32(b, 8, 7 | FLAG_TOKENIZER),
            ErrorKind::Format,
            &["flag bit 4 (TOKENIZER)", "tokenizer.kind"],
        );
    }

    #[test]
    fn header_crc() {
        let mut b = good();
        b[56] ^= 1;
        expect(&b, ErrorKind::Checksum, &["header_checksum"]);
    }

    #[test]
    fn total_file_size_mismatch() {
        defect(
            |b| {
                let n = b.len() as u64;
                put64(b, 48, n + 1)
            },
            ErrorKind::Format,
            &["header.total_file_size", "does not match"],
        );
    }

    #[test]
    fn truncated_file() {
        let mut b = good();
        b.pop();
        expect(
            &b,
            ErrorKind::Format,
            &["header.total_file_size", "truncated"],
        );
        expect(&b[..40], ErrorKind::Format, &["header", "truncated"]);
    }

    #[test]
    fn metadata_offset_out_of_bounds() {
        defect(
            |b| {
                let n = b.len() as u32;
                put32(b, 12, n + 100)
            },
            ErrorKind::Format,
            &["header.metadata_offset", "outside"],
        );
    }

    #[test]
    fn metadata_entry_length_overflow() {
        defect(
            |b| put16(b, 72, 0xFFFF),
            ErrorKind::Format,
            &["metadata entry 0 key", "truncated"],
        );
    }

    #[test]
    fn metadata_total_size_inconsistent() {
        defect(
            |b| {
                let t = get32(b, 68);
                put32(b, 68, t - 1)
            },
            ErrorKind::Format,
            &["metadata.total_size"],
        );
    }

    #[test]
    fn metadata_entry_count_too_large() {
        defect(
            |b| put32(b, 64, u32::MAX),
            ErrorKind::Format,
            &["metadata.entry_count", "cannot fit"],
        );
        defect(
            |b| {
                let n = get32(b, 64);
                put32(b, 64, n + 1)
            },
            ErrorKind::Format,
            &["metadata entry 12"],
        );
    }

    #[test]
    fn invalid_utf8_key() {
        defect(
            |b| b[76] = 0xFF,
            ErrorKind::Format,
            &["metadata entry 0 key", "UTF-8"],
        );
    }

    #[test]
    fn duplicate_key() {
        defect(
            |b| {
                let at = find(b, b"x_b");
                b[at + 2] = b'a';
            },
            ErrorKind::Format,
            &["metadata entry", "duplicate key 'x_a'"],
        );
    }

    #[test]
    fn missing_required_key() {
        defect(
            |b| {
                let at = find(b, b"model_version");
                b[at + 12] = b'X';
            },
            ErrorKind::Format,
            &["required key 'model_version'"],
        );
    }

    #[test]
    fn metadata_vocab_size_mismatch() {
        defect(
            |b| {
                let at = find(b, b"vocab_size8");
                b[at + 10] = b'9';
            },
            ErrorKind::Format,
            &["vocab_size", "token_count"],
        );
    }

    #[test]
    fn vocab_special_offset_outside_section() {
        defect(
            |b| {
                let vo = get32(b, VOCAB_OFF);
                let vs = get32(b, 24);
                put32(b, vo as usize + 8, vo + vs - 10);
            },
            ErrorKind::Format,
            &["vocab.special_tokens", "not inside"],
        );
        defect(
            |b| {
                let vo = get32(b, VOCAB_OFF);
                put32(b, vo as usize + 8, vo);
            },
            ErrorKind::Format,
            &["vocab.special_tokens"],
        );
    }

    #[test]
    fn special_id_not_below_token_count() {
        defect(
            |b| {
                let vo = get32(b, VOCAB_OFF) as usize;
                let sp = get32(b, vo + 8) as usize;
                put32(b, sp + 4, 8);
            },
            ErrorKind::Format,
            &["vocab.special_tokens.unk_id", "token_count 8"],
        );
    }

    #[test]
    fn token_count_too_large() {
        defect(
            |b| {
                let vo = get32(b, VOCAB_OFF) as usize;
                put32(b, vo, u32::MAX);
            },
            ErrorKind::Format,
            &["vocab.token_count", "cannot fit"],
        );
    }

    #[test]
    fn token_utf8() {
        defect(
            |b| {
                let vo = get32(b, VOCAB_OFF) as usize;
                b[vo + 14] = 0xFF;
            },
            ErrorKind::Format,
            &["vocab token 0", "UTF-8"],
        );
    }

    #[test]
    fn token_split_inside_a_char() {
        // "##lo" takes the first byte of "é": the token bytes as a whole are
        // still valid UTF-8, but neither token is.
        defect(
            |b| {
                let at = find(b, b"\x04\x00##lo\x02\x00\xc3\xa9");
                put16(b, at, 5);
                b[at + 6] = 0xC3;
                b[at + 7] = 1;
                b[at + 8] = 0;
            },
            ErrorKind::Format,
            &["vocab token 6", "UTF-8"],
        );
    }

    #[test]
    fn token_entries_shorter_than_total_size() {
        defect(
            |b| {
                let at = find(b, b"\x04\x00##lo\x02\x00\xc3\xa9");
                put16(b, at + 6, 0);
            },
            ErrorKind::Format,
            &["vocab.total_size", "token entries end at offset"],
        );
    }

    #[test]
    fn dtype_code_9() {
        defect(
            |b| {
                let d = desc(b, 1);
                b[d + 4] = 9;
            },
            ErrorKind::Format,
            &["tensor index entry 1 (t_b) dtype", "code 9"],
        );
    }

    #[test]
    fn ndim_0_and_5() {
        for n in [0u8, 5] {
            defect(
                |b| {
                    let d = desc(b, 0);
                    b[d + 5] = n;
                },
                ErrorKind::Format,
                &["tensor index entry 0 (t_a) ndim"],
            );
        }
    }

    #[test]
    fn nonzero_shape_beyond_ndim() {
        defect(
            |b| {
                let d = desc(b, 0);
                put32(b, d + 12, 3);
            },
            ErrorKind::Format,
            &["tensor index entry 0 (t_a) shape[1]", "must be 0"],
        );
    }

    #[test]
    fn zero_dim_within_ndim() {
        defect(
            |b| {
                let d = desc(b, 0);
                put32(b, d + 8, 0);
            },
            ErrorKind::Format,
            &["(t_a) shape[0]", "is 0"],
        );
    }

    #[test]
    fn size_overflow() {
        defect(
            |b| {
                let d = desc(b, 2);
                for k in 0..4 {
                    put32(b, d + 8 + 4 * k, u32::MAX);
                }
            },
            ErrorKind::Format,
            &["tensor index entry 2 (four.d) shape", "overflows"],
        );
    }

    #[test]
    fn tensor_out_of_data_section() {
        defect(
            |b| {
                let d = desc(b, 3);
                put64(b, d + 24, 9000);
            },
            ErrorKind::Format,
            &[
                "tensor index entry 3 (ints) data_offset",
                "9000",
                "beyond the tensor data section",
            ],
        );
        defect(
            |b| {
                let d = desc(b, 3);
                put64(b, d + 24, u64::MAX - 3);
            },
            ErrorKind::Format,
            &["(ints) data_offset"],
        );
    }

    #[test]
    fn misaligned_tensor() {
        defect(
            |b| {
                let d = desc(b, 0);
                put64(b, d + 24, 4);
            },
            ErrorKind::Format,
            &["(t_a) data_offset", "not a multiple of 64"],
        );
    }

    #[test]
    fn name_hash_mismatch() {
        defect(
            |b| {
                let d = desc(b, 2);
                b[d] ^= 1;
            },
            ErrorKind::Format,
            &["tensor index entry 2 (four.d) name_hash"],
        );
    }

    #[test]
    fn duplicate_tensor_name() {
        defect(
            |b| {
                let names = desc(b, 4);
                let at = names + find(&b[names..], b"t_b");
                b[at + 2] = b'a';
                let d = desc(b, 1);
                put32(b, d, bytes::fnv1a32(b"t_a"));
            },
            ErrorKind::Format,
            &["tensor index entry 1 (t_a) name", "duplicate tensor name"],
        );
    }

    #[test]
    fn tensor_count_too_large() {
        defect(
            |b| put32(b, 32, u32::MAX),
            ErrorKind::Format,
            &["header.tensor_index_offset/tensor_index_count", "outside"],
        );
    }

    #[test]
    fn sections_overlap() {
        defect(
            |b| {
                put32(b, VOCAB_OFF, 64);
            },
            ErrorKind::Format,
            &["overlaps"],
        );
    }

    #[test]
    fn bad_end_magic() {
        defect(
            |b| {
                let n = b.len();
                b[n - 8] = b'X';
            },
            ErrorKind::Format,
            &["footer.magic_end"],
        );
    }

    #[test]
    fn data_crc() {
        defect(
            |b| {
                let tdo = get32(b, TDO) as usize;
                b[tdo + 1] ^= 0x40;
            },
            ErrorKind::Checksum,
            &["footer.data_checksum"],
        );
    }

    #[test]
    fn file_crc() {
        defect(
            |b| {
                let at = find(b, b"test-model");
                b[at] = b'b';
            },
            ErrorKind::Checksum,
            &["footer.file_checksum"],
        );
    }

    #[test]
    fn every_truncation_is_an_error() {
        let b = good();
        for n in 0..b.len() {
            assert!(rd(&b[..n]).is_err(), "truncated to {n} was accepted");
            let _ = ModelFile::from_bytes(&b[..n], ReadOptions::default());
        }
    }

    #[test]
    fn every_byte_flip_never_panics() {
        let b = good();
        for opts in [
            ReadOptions::default(),
            ReadOptions {
                verify_checksums: false,
            },
        ] {
            for i in 0..b.len() {
                // The footer's reserved word (last 4 bytes) is ignored by design.
                let covered = i < b.len() - 4;
                for x in [0xFFu8, 0x01, 0x80] {
                    let mut c = b.clone();
                    c[i] ^= x;
                    let r = ModelFile::from_bytes(&c, opts);
                    if opts.verify_checksums && covered {
                        // Every other byte is covered by some CRC or check.
                        assert!(r.is_err(), "flip {x:#x} at {i} accepted");
                    }
                    // Also with the header CRC repaired, to reach deeper checks.
                    fix_crc(&mut c);
                    let _ = ModelFile::from_bytes(&c, opts);
                }
            }
        }
    }
}
