//! finalfusion (`.fifu`) word embeddings, format version 0.
//!
//! Byte layout as the real implementations write it (crate `finalfusion` 0.18,
//! PyPI `finalfusion` 0.7.1), not as the seed document describes it: see
//! `docs/formats/README.md` and the research notes. In short:
//!
//! - header: `"FiFu"`, `u32` version 0, `u32 n_chunks`, `u32` chunk ids;
//! - each chunk: `u32 id`, `u64 len`, `len` bytes; ids 1 SimpleVocab, 2 NdArray,
//!   3 BucketSubwordVocab, 4 QuantizedArray, 5 Metadata (TOML), 6 NdNorms,
//!   7 FastTextSubwordVocab, 8 ExplicitSubwordVocab (9 floret is refused);
//! - f32 arrays are preceded by `4 - (abs_pos % 4)` zero bytes (1..=4, never 0).
//!
//! [`Embeddings`] is the typed API; its lookups (equal to the real library's:
//! a known word gives its stored row, an unknown word the L2-normalized sum of
//! its subword rows) are in [`crate::model::static_words`]. [`Embeddings::model_file`] / [`Embeddings::from_model_file`]
//! map it onto the generic [`ModelFile`] tensor store (metadata `architecture` =
//! `static`), so that inspect, verify and convert treat it like any container.
//!
//! # ModelFile mapping
//! | tensor | dtype | shape | content |
//! |---|---|---|---|
//! | `embeddings` | f32 | `[rows, dims]` | NdArray storage (zero-copy) |
//! | `quantized.projection` | f32 | `[R, R]` | QuantizedArray projection (optional) |
//! | `quantized.centroids` | f32 | `[Q, C, R/Q]` | subquantizer centroids |
//! | `quantized.norms` | f32 | `[rows]` | per-row norms (optional) |
//! | `quantized.codes` | u8 | `[rows, Q]` | codes |
//! | `norms` | f32 | `[words]` | NdNorms (optional) |
//! | `vocab.words` | u8 | `[bytes]` | words as `u32 len` + UTF-8, in index order |
//! | `vocab.ngrams` | u8 | `[bytes]` | explicit n-grams as `u32 len` + UTF-8 + `u64 index` |
//!
//! Metadata keys: `architecture` = `static`, `embedding_dim`, `vocab_size`
//! (storage rows), `fifu.words`, `fifu.vocab` (`simple`, `bucket`, `fasttext`,
//! `explicit`), `fifu.min_n`, `fifu.max_n`, `fifu.buckets` (exponent for
//! `bucket`, count for `fasttext`), `fifu.storage` (`array`, `quantized`),
//! `fifu.metadata` (the Metadata chunk's TOML text, verbatim).

use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::path::Path;
use std::sync::Arc;

use super::bytes::{self, Cursor};
use super::{Backing, DType, FormatKind, ModelFile, ReadOptions, TensorData, TensorEntry};
use crate::error::{Error, ErrorKind, Result};
/// The file magic.
pub const MAGIC: &[u8; 4] = b"FiFu";

const ID_SIMPLE_VOCAB: u32 = 1;
const ID_NDARRAY: u32 = 2;
const ID_BUCKET_VOCAB: u32 = 3;
const ID_QUANTIZED: u32 = 4;
const ID_METADATA: u32 = 5;
const ID_NDNORMS: u32 = 6;
const ID_FASTTEXT_VOCAB: u32 = 7;
const ID_EXPLICIT_VOCAB: u32 = 8;
const ID_FLORET_VOCAB: u32 = 9;

const TYPE_U8: u32 = 1;
const TYPE_F32: u32 = 10;

/// `4 - (pos % 4)`: the padding before an f32 array (1..=4 bytes, never 0).
pub fn padding(pos: u64) -> u64 {
    4 - (pos % 4)
}

/// How unknown words are mapped to subword rows.
#[derive(Debug, Clone, PartialEq)]
pub enum Subwords {
    /// SimpleVocab: no subwords; unknown words have no embedding.
    None,
    /// BucketSubwordVocab: finalfusion FNV-1a-64 hashing into `2^exp` buckets.
    Bucket {
        /// Minimum n-gram length in chars.
        min_n: u32,
        /// Maximum n-gram length in chars.
        max_n: u32,
        /// Bucket exponent (`2^exp` rows), at most 64.
        exp: u32,
    },
    /// FastTextSubwordVocab: fastText's FNV-1a-32 (sign-extended bytes) modulo `buckets`.
    FastText {
        /// Minimum n-gram length in chars.
        min_n: u32,
        /// Maximum n-gram length in chars.
        max_n: u32,
        /// Number of buckets.
        buckets: u32,
    },
    /// ExplicitSubwordVocab: a table n-gram -> subword row.
    Explicit {
        /// Minimum n-gram length in chars.
        min_n: u32,
        /// Maximum n-gram length in chars.
        max_n: u32,
        /// N-grams with their (renumbered, dense from 0) indices, in file order.
        ngrams: Vec<(String, u64)>,
    },
}

impl Subwords {
    fn name(&self) -> &'static str {
        match self {
            Subwords::None => "simple",
            Subwords::Bucket { .. } => "bucket",
            Subwords::FastText { .. } => "fasttext",
            Subwords::Explicit { .. } => "explicit",
        }
    }

    /// Number of subword rows after the word rows.
    pub fn rows(&self) -> Result<u64> {
        Ok(match self {
            Subwords::None => 0,
            Subwords::Bucket { exp, .. } => {
                if *exp >= 64 {
                    return Err(Error::unsupported(format!(
                        "bucket exponent {exp} gives more rows than can be stored"
                    )));
                }
                1u64 << exp
            }
            Subwords::FastText { buckets, .. } => u64::from(*buckets),
            Subwords::Explicit { ngrams, .. } => {
                let mut seen = std::collections::HashSet::new();
                for (_, i) in ngrams {
                    seen.insert(*i);
                }
                seen.len() as u64
            }
        })
    }
}

/// The embedding matrix, dense or product-quantized.
#[derive(Debug, Clone, PartialEq)]
pub enum Storage {
    /// Dense row-major f32 matrix `[rows, dims]`.
    Array {
        /// Rows.
        rows: usize,
        /// Columns.
        dims: usize,
        /// `rows * dims` values.
        data: Vec<f32>,
    },
    /// Product quantization (see [`Storage::Quantized`] field docs).
    Quantized {
        /// Optional `[R, R]` projection matrix (row-major).
        projection: Option<Vec<f32>>,
        /// Number of subquantizers (code bytes per row).
        quantized_len: usize,
        /// Reconstructed dimensionality R.
        reconstructed_len: usize,
        /// Centroids per subquantizer (at most 256).
        n_centroids: usize,
        /// `[Q, C, R/Q]` centroids.
        centroids: Vec<f32>,
        /// Optional per-row norms.
        norms: Option<Vec<f32>>,
        /// `[rows, Q]` codes.
        codes: Vec<u8>,
    },
}

/// Parsed finalfusion embeddings backed by a [`ModelFile`] (zero-copy for a
/// memory-mapped NdArray). The lookups (`lookup`, `embed_text`, ...) are the
/// static-embedding runtime in [`crate::model::static_words`].
#[derive(Debug)]
pub struct Embeddings {
    pub(crate) model: ModelFile,
    pub(crate) words: Vec<String>,
    pub(crate) index: HashMap<String, usize>,
    pub(crate) subwords: Subwords,
    pub(crate) explicit: HashMap<String, u64>,
    pub(crate) rows: usize,
    pub(crate) dims: usize,
    pub(crate) quant: Option<QuantInfo>,
    pub(crate) norms: Option<Vec<f32>>,
    pub(crate) metadata: Option<String>,
}

#[derive(Debug, Clone)]
pub(crate) struct QuantInfo {
    pub(crate) q: usize,
    pub(crate) r: usize,
    pub(crate) c: usize,
    pub(crate) projection: Option<Vec<f32>>,
    pub(crate) centroids: Vec<f32>,
    pub(crate) norms: Option<Vec<f32>>,
}

/// Parts of a file, in the order they were found.
struct Parsed {
    metadata: Option<String>,
    words: Vec<String>,
    subwords: Subwords,
    tensors: Vec<TensorEntry>,
    rows: usize,
    dims: usize,
    storage_kind: &'static str,
    details: Vec<(String, String)>,
}

fn fmt_err(what: &str, at: usize, detail: impl std::fmt::Display) -> Error {
    Error::format(what, at as u64, detail)
}

fn read_words(c: &mut Cursor<'_>, n: u64, what: &str) -> Result<Vec<String>> {
    // Each word takes at least 4 bytes: bound the allocation by what the file holds.
    let cap = bytes::to_usize(n, what)?.min(c.remaining() / 4);
    let mut words = Vec::with_capacity(cap);
    for _ in 0..n {
        let len = c.u32(what)? as usize;
        words.push(c.str(len, what)?.to_string());
    }
    Ok(words)
}

fn f32_array_entry(
    c: &mut Cursor<'_>,
    name: &str,
    shape: Vec<usize>,
    what: &str,
) -> Result<TensorEntry> {
    let numel = bytes::product(&shape, what)?;
    let len = numel
        .checked_mul(4)
        .ok_or_else(|| fmt_err(what, c.pos(), "size overflows"))?;
    let start = c.pos();
    c.bytes(len, what)?;
    Ok(TensorEntry {
        name: name.to_string(),
        dtype: DType::F32,
        shape,
        data: TensorData::Mapped { start, len },
        file_offset: start as u64,
    })
}

fn skip_padding(c: &mut Cursor<'_>, what: &str) -> Result<()> {
    let pad = padding(c.pos() as u64) as usize;
    c.bytes(pad, what)?;
    Ok(())
}

fn expect_type(c: &mut Cursor<'_>, want: u32, what: &str) -> Result<()> {
    let at = c.pos();
    let t = c.u32(what)?;
    if t != want {
        return Err(fmt_err(
            what,
            at,
            format!("data type id {t}, expected {want}"),
        ));
    }
    Ok(())
}

fn parse(b: &[u8]) -> Result<Parsed> {
    let mut c = Cursor::new(b, 0);
    c.magic(
        MAGIC,
        "finalfusion magic",
        "not a finalfusion file (magic is not FiFu)",
    )?;
    let at = c.pos();
    let version = c.u32("finalfusion version")?;
    if version != 0 {
        return Err(Error::unsupported(format!(
            "finalfusion version {version} at offset {at} is not supported (only 0)"
        )));
    }
    let n_chunks = c.u32("finalfusion n_chunks")?;
    let mut ids = Vec::with_capacity((n_chunks as usize).min(c.remaining() / 4));
    for _ in 0..n_chunks {
        ids.push(c.u32("finalfusion chunk id")?);
    }
    let mut p = Parsed {
        metadata: None,
        words: Vec::new(),
        subwords: Subwords::None,
        tensors: Vec::new(),
        rows: 0,
        dims: 0,
        storage_kind: "",
        details: vec![("chunks".to_string(), format!("{ids:?}"))],
    };
    // Expected order: [Metadata] Vocab Storage [NdNorms].
    let mut stage = 0u8;
    for (k, &listed) in ids.iter().enumerate() {
        let chunk_at = c.pos();
        let id = c.u32("chunk id")?;
        if id != listed {
            return Err(fmt_err(
                "chunk id",
                chunk_at,
                format!("is {id}, but the header lists {listed} as chunk {k}"),
            ));
        }
        let len = c.u64("chunk length")?;
        let body_at = c.pos();
        let what_stage = match id {
            ID_METADATA => 0,
            ID_SIMPLE_VOCAB | ID_BUCKET_VOCAB | ID_FASTTEXT_VOCAB | ID_EXPLICIT_VOCAB => 1,
            ID_NDARRAY | ID_QUANTIZED => 2,
            ID_NDNORMS => 3,
            ID_FLORET_VOCAB => {
                return Err(Error::unsupported(
                    "finalfusion floret subword vocabularies (chunk 9) are not supported",
                ))
            }
            other => {
                return Err(fmt_err(
                    "chunk id",
                    chunk_at,
                    format!("{other} is not a known finalfusion chunk"),
                ))
            }
        };
        if what_stage < stage || (what_stage == stage && k > 0) {
            return Err(fmt_err(
                "chunk id",
                chunk_at,
                format!("chunk {id} is out of order (expected [metadata] vocab storage [norms])"),
            ));
        }
        if what_stage >= 2 && stage < 1 {
            return Err(fmt_err("chunk id", chunk_at, "storage before vocabulary"));
        }
        if what_stage == 3 && stage < 2 {
            return Err(fmt_err("chunk id", chunk_at, "norms before storage"));
        }
        stage = what_stage;
        match id {
            ID_METADATA => {
                let n = bytes::to_usize(len, "metadata length")?;
                p.metadata = Some(c.str(n, "metadata TOML")?.to_string());
            }
            ID_SIMPLE_VOCAB => {
                let n = c.u64("vocab length")?;
                p.words = read_words(&mut c, n, "vocab word")?;
            }
            ID_BUCKET_VOCAB | ID_FASTTEXT_VOCAB => {
                let n = c.u64("vocab length")?;
                let min_n = c.u32("min_n")?;
                let max_n = c.u32("max_n")?;
                let bucket_at = c.pos();
                let buckets = c.u32("buckets")?;
                check_ngram_range(min_n, max_n, body_at)?;
                p.words = read_words(&mut c, n, "vocab word")?;
                p.subwords = if id == ID_BUCKET_VOCAB {
                    if buckets >= 64 {
                        return Err(fmt_err(
                            "bucket exponent",
                            bucket_at,
                            format!("{buckets} is too large"),
                        ));
                    }
                    Subwords::Bucket {
                        min_n,
                        max_n,
                        exp: buckets,
                    }
                } else {
                    if buckets == 0 || buckets > i32::MAX as u32 {
                        return Err(fmt_err(
                            "fastText buckets",
                            bucket_at,
                            format!("{buckets} is not in 1..=2^31-1"),
                        ));
                    }
                    Subwords::FastText {
                        min_n,
                        max_n,
                        buckets,
                    }
                };
            }
            ID_EXPLICIT_VOCAB => {
                // `len` is not trusted here: finalfusion-python 0.7.1 writes it too small.
                let n_words = c.u64("vocab length")?;
                let n_ngrams = c.u64("ngrams length")?;
                let min_n = c.u32("min_n")?;
                let max_n = c.u32("max_n")?;
                check_ngram_range(min_n, max_n, body_at)?;
                p.words = read_words(&mut c, n_words, "vocab word")?;
                let cap = bytes::to_usize(n_ngrams, "ngrams length")?.min(c.remaining() / 12);
                let mut ngrams = Vec::with_capacity(cap);
                let mut renumber: HashMap<u64, u64> = HashMap::new();
                let mut seen = std::collections::HashSet::new();
                for _ in 0..n_ngrams {
                    let at = c.pos();
                    let l = c.u32("ngram length")? as usize;
                    let s = c.str(l, "ngram")?.to_string();
                    let old = c.u64("ngram index")?;
                    let next = renumber.len() as u64;
                    let new = *renumber.entry(old).or_insert(next);
                    if !seen.insert(s.clone()) {
                        return Err(fmt_err("ngram", at, format!("duplicate n-gram '{s}'")));
                    }
                    ngrams.push((s, new));
                }
                p.subwords = Subwords::Explicit {
                    min_n,
                    max_n,
                    ngrams,
                };
            }
            ID_NDARRAY => {
                let rows = c.u64("array rows")?;
                let cols = c.u32("array cols")?;
                expect_type(&mut c, TYPE_F32, "array type")?;
                skip_padding(&mut c, "array padding")?;
                let rows = bytes::to_usize(rows, "array rows")?;
                let cols = cols as usize;
                let t = f32_array_entry(&mut c, "embeddings", vec![rows, cols], "array data")?;
                p.tensors.push(t);
                p.rows = rows;
                p.dims = cols;
                p.storage_kind = "array";
            }
            ID_QUANTIZED => {
                let proj = c.u32("use projection")?;
                let use_norms = c.u32("use norms")?;
                let q_at = c.pos();
                let q = c.u32("quantized_len")? as usize;
                let r = c.u32("reconstructed_len")? as usize;
                let nc = c.u32("n_centroids")? as usize;
                let rows = bytes::to_usize(c.u64("quantized rows")?, "quantized rows")?;
                expect_type(&mut c, TYPE_U8, "quantized type")?;
                expect_type(&mut c, TYPE_F32, "reconstructed type")?;
                if proj > 1 || use_norms > 1 {
                    return Err(fmt_err("quantized flags", body_at, "not 0 or 1"));
                }
                if q == 0 || !r.is_multiple_of(q) || nc == 0 || nc > 256 {
                    return Err(fmt_err(
                        "quantized shape",
                        q_at,
                        format!("quantized_len {q}, reconstructed_len {r}, centroids {nc} are inconsistent"),
                    ));
                }
                skip_padding(&mut c, "quantized padding")?;
                if proj == 1 {
                    let t =
                        f32_array_entry(&mut c, "quantized.projection", vec![r, r], "projection")?;
                    p.tensors.push(t);
                }
                let t = f32_array_entry(
                    &mut c,
                    "quantized.centroids",
                    vec![q, nc, r / q],
                    "centroids",
                )?;
                p.tensors.push(t);
                if use_norms == 1 {
                    let t = f32_array_entry(&mut c, "quantized.norms", vec![rows], "norms")?;
                    p.tensors.push(t);
                }
                let len = rows
                    .checked_mul(q)
                    .ok_or_else(|| fmt_err("codes", c.pos(), "size overflows"))?;
                let start = c.pos();
                let codes = c.bytes(len, "codes")?;
                if let Some(bad) = codes.iter().position(|&x| usize::from(x) >= nc) {
                    return Err(fmt_err(
                        "codes",
                        start + bad,
                        format!("code {} >= {nc} centroids", codes[bad]),
                    ));
                }
                p.tensors.push(TensorEntry {
                    name: "quantized.codes".to_string(),
                    dtype: DType::U8,
                    shape: vec![rows, q],
                    data: TensorData::Mapped { start, len },
                    file_offset: start as u64,
                });
                p.rows = rows;
                p.dims = r;
                p.storage_kind = "quantized";
            }
            ID_NDNORMS => {
                let n = bytes::to_usize(c.u64("norms length")?, "norms length")?;
                expect_type(&mut c, TYPE_F32, "norms type")?;
                skip_padding(&mut c, "norms padding")?;
                if n != p.words.len() {
                    return Err(fmt_err(
                        "norms length",
                        body_at,
                        format!("{n} norms for {} words", p.words.len()),
                    ));
                }
                let t = f32_array_entry(&mut c, "norms", vec![n], "norms data")?;
                p.tensors.push(t);
            }
            _ => {}
        }
        if id != ID_EXPLICIT_VOCAB {
            // `len` is only compared (a lying length is reported, not trusted).
            let end = (body_at as u64).checked_add(len);
            if Some(c.pos() as u64) != end {
                p.details.push((
                    format!("chunk {k} length"),
                    format!("stored {len}, parsed {}", c.pos() - body_at),
                ));
            }
        }
    }
    if stage < 2 {
        return Err(Error::model(
            "finalfusion file has no vocabulary and storage chunks",
        ));
    }
    let expect_rows = (p.words.len() as u64)
        .checked_add(p.subwords.rows()?)
        .ok_or_else(|| Error::model("vocabulary size overflows"))?;
    if expect_rows != p.rows as u64 {
        return Err(Error::model(format!(
            "storage has {} rows but the vocabulary needs {expect_rows}",
            p.rows
        )));
    }
    Ok(p)
}

fn check_ngram_range(min_n: u32, max_n: u32, at: usize) -> Result<()> {
    if min_n == 0 || min_n > max_n {
        return Err(fmt_err(
            "n-gram range",
            at,
            format!("min_n {min_n}, max_n {max_n} is not a valid range"),
        ));
    }
    Ok(())
}

fn encode_words(words: &[String]) -> Vec<u8> {
    let mut out = Vec::new();
    for w in words {
        out.extend_from_slice(&(w.len() as u32).to_le_bytes());
        out.extend_from_slice(w.as_bytes());
    }
    out
}

fn encode_ngrams(ngrams: &[(String, u64)]) -> Vec<u8> {
    let mut out = Vec::new();
    for (s, i) in ngrams {
        out.extend_from_slice(&(s.len() as u32).to_le_bytes());
        out.extend_from_slice(s.as_bytes());
        out.extend_from_slice(&i.to_le_bytes());
    }
    out
}

fn subword_metadata(md: &mut BTreeMap<String, String>, s: &Subwords) {
    md.insert("fifu.vocab".into(), s.name().into());
    let (min_n, max_n, buckets) = match s {
        Subwords::None => return,
        Subwords::Bucket { min_n, max_n, exp } => (*min_n, *max_n, Some(*exp)),
        Subwords::FastText {
            min_n,
            max_n,
            buckets,
        } => (*min_n, *max_n, Some(*buckets)),
        Subwords::Explicit { min_n, max_n, .. } => (*min_n, *max_n, None),
    };
    md.insert("fifu.min_n".into(), min_n.to_string());
    md.insert("fifu.max_n".into(), max_n.to_string());
    if let Some(b) = buckets {
        md.insert("fifu.buckets".into(), b.to_string());
    }
}

/// Reads a `.fifu` file from a backing into a [`ModelFile`] (the generic view).
pub fn read(backing: Arc<Backing>, _opts: ReadOptions) -> Result<ModelFile> {
    let p = parse(backing.bytes())?;
    let mut md = BTreeMap::new();
    md.insert("architecture".into(), "static".into());
    md.insert("embedding_dim".into(), p.dims.to_string());
    md.insert("vocab_size".into(), p.rows.to_string());
    md.insert("fifu.words".into(), p.words.len().to_string());
    md.insert("fifu.storage".into(), p.storage_kind.into());
    subword_metadata(&mut md, &p.subwords);
    if let Some(t) = &p.metadata {
        md.insert("fifu.metadata".into(), t.clone());
    }
    let mut tensors = p.tensors;
    let wb = encode_words(&p.words);
    tensors.push(TensorEntry::owned_bytes(
        "vocab.words",
        DType::U8,
        vec![wb.len()],
        &wb,
    ));
    if let Subwords::Explicit { ngrams, .. } = &p.subwords {
        let nb = encode_ngrams(ngrams);
        tensors.push(TensorEntry::owned_bytes(
            "vocab.ngrams",
            DType::U8,
            vec![nb.len()],
            &nb,
        ));
    }
    let mut m = ModelFile::new(FormatKind::Finalfusion, backing, md, None, tensors)?;
    m.details = p.details;
    Ok(m)
}

fn md_u32(md: &BTreeMap<String, String>, k: &str) -> Result<u32> {
    md.get(k)
        .and_then(|v| v.trim().parse::<u32>().ok())
        .ok_or_else(|| Error::model(format!("metadata '{k}' is missing or not a u32")))
}

fn decode_words(b: &[u8], what: &str) -> Result<Vec<String>> {
    let mut c = Cursor::new(b, 0);
    let mut out = Vec::new();
    while c.remaining() > 0 {
        let n = c.u32(what)? as usize;
        out.push(c.str(n, what)?.to_string());
    }
    Ok(out)
}

fn decode_ngrams(b: &[u8]) -> Result<Vec<(String, u64)>> {
    let mut c = Cursor::new(b, 0);
    let mut out = Vec::new();
    while c.remaining() > 0 {
        let n = c.u32("vocab.ngrams")? as usize;
        let s = c.str(n, "vocab.ngrams")?.to_string();
        out.push((s, c.u64("vocab.ngrams")?));
    }
    Ok(out)
}

fn f32s(model: &ModelFile, name: &str) -> Result<Option<Vec<f32>>> {
    Ok(match model.tensor(name) {
        None => None,
        Some(t) => {
            if t.dtype != DType::F32 {
                return Err(Error::model(format!("tensor '{name}' is not f32")));
            }
            Some(model.tensor_to_f32(t))
        }
    })
}

impl Embeddings {
    /// Reads a `.fifu` file (memory-mapped).
    pub fn open(path: impl AsRef<Path>) -> Result<Embeddings> {
        let path = path.as_ref();
        let backing = Arc::new(Backing::map(path)?);
        let m = read(backing, ReadOptions::default()).map_err(|e| e.context(path.display()))?;
        Embeddings::from_model_file(m)
    }

    /// Parses `.fifu` bytes.
    pub fn from_bytes(b: &[u8]) -> Result<Embeddings> {
        let m = read(Arc::new(Backing::from_bytes(b)), ReadOptions::default())?;
        Embeddings::from_model_file(m)
    }

    /// Interprets a [`ModelFile`] holding the finalfusion mapping (read from a
    /// `.fifu` or from any container it was converted into).
    pub fn from_model_file(model: ModelFile) -> Result<Embeddings> {
        let md = &model.metadata;
        if md.get("architecture").map(String::as_str) != Some("static") {
            return Err(Error::model(
                "not static word embeddings (metadata architecture != static)",
            ));
        }
        let words = match model.tensor("vocab.words") {
            Some(t) => decode_words(model.tensor_bytes(t), "vocab.words")?,
            None => return Err(Error::model("missing tensor 'vocab.words'")),
        };
        let kind = md.get("fifu.vocab").map(String::as_str).unwrap_or("simple");
        let subwords = match kind {
            "simple" => Subwords::None,
            "bucket" => Subwords::Bucket {
                min_n: md_u32(md, "fifu.min_n")?,
                max_n: md_u32(md, "fifu.max_n")?,
                exp: md_u32(md, "fifu.buckets")?,
            },
            "fasttext" => Subwords::FastText {
                min_n: md_u32(md, "fifu.min_n")?,
                max_n: md_u32(md, "fifu.max_n")?,
                buckets: md_u32(md, "fifu.buckets")?,
            },
            "explicit" => Subwords::Explicit {
                min_n: md_u32(md, "fifu.min_n")?,
                max_n: md_u32(md, "fifu.max_n")?,
                ngrams: match model.tensor("vocab.ngrams") {
                    Some(t) => decode_ngrams(model.tensor_bytes(t))?,
                    None => return Err(Error::model("missing tensor 'vocab.ngrams'")),
                },
            },
            other => return Err(Error::model(format!("unknown fifu.vocab '{other}'"))),
        };
        if let Subwords::Bucket { min_n, max_n, .. }
        | Subwords::FastText { min_n, max_n, .. }
        | Subwords::Explicit { min_n, max_n, .. } = &subwords
        {
            check_ngram_range(*min_n, *max_n, 0)?;
        }
        let mut index = HashMap::with_capacity(words.len());
        for (i, w) in words.iter().enumerate() {
            if index.insert(w.clone(), i).is_some() {
                return Err(Error::model(format!("duplicate word '{w}' in vocabulary")));
            }
        }
        let explicit = match &subwords {
            Subwords::Explicit { ngrams, .. } => ngrams.iter().cloned().collect(),
            _ => HashMap::new(),
        };
        let (rows, dims, quant) = if let Some(t) = model.tensor("embeddings") {
            if t.dtype != DType::F32 || t.shape.len() != 2 {
                return Err(Error::model("tensor 'embeddings' is not a f32 matrix"));
            }
            (t.shape[0], t.shape[1], None)
        } else if let Some(codes) = model.tensor("quantized.codes") {
            let cent = model
                .tensor("quantized.centroids")
                .ok_or_else(|| Error::model("missing tensor 'quantized.centroids'"))?;
            if codes.dtype != DType::U8 || codes.shape.len() != 2 || cent.shape.len() != 3 {
                return Err(Error::model("quantized tensors have the wrong shapes"));
            }
            let (rows, q) = (codes.shape[0], codes.shape[1]);
            let (cq, c, sub) = (cent.shape[0], cent.shape[1], cent.shape[2]);
            let r = q
                .checked_mul(sub)
                .ok_or_else(|| Error::model("quantized shape overflows"))?;
            if cq != q || q == 0 || c == 0 {
                return Err(Error::model("quantized tensors have inconsistent shapes"));
            }
            let centroids = f32s(&model, "quantized.centroids")?.unwrap_or_default();
            let projection = f32s(&model, "quantized.projection")?;
            let qnorms = f32s(&model, "quantized.norms")?;
            if projection
                .as_ref()
                .is_some_and(|p| Some(p.len()) != r.checked_mul(r))
                || qnorms.as_ref().is_some_and(|n| n.len() != rows)
            {
                return Err(Error::model("quantized projection/norms have wrong sizes"));
            }
            let codes_b = model.tensor_bytes(codes);
            if let Some(&bad) = codes_b.iter().find(|&&x| usize::from(x) >= c) {
                return Err(Error::model(format!("quantized code {bad} out of range")));
            }
            (
                rows,
                r,
                Some(QuantInfo {
                    q,
                    r,
                    c,
                    projection,
                    centroids,
                    norms: qnorms,
                }),
            )
        } else {
            return Err(Error::model("no 'embeddings' or 'quantized.codes' tensor"));
        };
        let expect = (words.len() as u64).checked_add(subwords.rows()?);
        if expect != Some(rows as u64) {
            return Err(Error::model(format!(
                "storage has {rows} rows, the vocabulary needs {expect:?}"
            )));
        }
        let norms = f32s(&model, "norms")?;
        if norms.as_ref().is_some_and(|n| n.len() != words.len()) {
            return Err(Error::model("norms length differs from the word count"));
        }
        let metadata = md.get("fifu.metadata").cloned();
        Ok(Embeddings {
            model,
            words,
            index,
            subwords,
            explicit,
            rows,
            dims,
            quant,
            norms,
            metadata,
        })
    }

    /// Builds embeddings from parts (for writing).
    pub fn from_parts(
        metadata: Option<String>,
        words: Vec<String>,
        subwords: Subwords,
        storage: Storage,
        norms: Option<Vec<f32>>,
    ) -> Result<Embeddings> {
        let mut md = BTreeMap::new();
        md.insert("architecture".into(), "static".into());
        md.insert("fifu.words".into(), words.len().to_string());
        subword_metadata(&mut md, &subwords);
        if let Some(t) = &metadata {
            md.insert("fifu.metadata".into(), t.clone());
        }
        let mut tensors = Vec::new();
        let (rows, dims) = match &storage {
            Storage::Array { rows, dims, data } => {
                if rows.checked_mul(*dims) != Some(data.len()) {
                    return Err(Error::invalid_argument("array data length != rows * dims"));
                }
                tensors.push(TensorEntry::owned_f32(
                    "embeddings",
                    vec![*rows, *dims],
                    data,
                ));
                md.insert("fifu.storage".into(), "array".into());
                (*rows, *dims)
            }
            Storage::Quantized {
                projection,
                quantized_len,
                reconstructed_len,
                n_centroids,
                centroids,
                norms,
                codes,
            } => {
                let (q, r, c) = (*quantized_len, *reconstructed_len, *n_centroids);
                if q == 0 || r % q != 0 || c == 0 || c > 256 || codes.len() % q != 0 {
                    return Err(Error::invalid_argument("inconsistent quantized shape"));
                }
                let rows = codes.len() / q;
                if centroids.len() != q * c * (r / q) {
                    return Err(Error::invalid_argument("centroids length != Q * C * R/Q"));
                }
                if let Some(p) = projection {
                    if p.len() != r * r {
                        return Err(Error::invalid_argument("projection length != R * R"));
                    }
                    tensors.push(TensorEntry::owned_f32(
                        "quantized.projection",
                        vec![r, r],
                        p,
                    ));
                }
                tensors.push(TensorEntry::owned_f32(
                    "quantized.centroids",
                    vec![q, c, r / q],
                    centroids,
                ));
                if let Some(n) = norms {
                    if n.len() != rows {
                        return Err(Error::invalid_argument("quantized norms length != rows"));
                    }
                    tensors.push(TensorEntry::owned_f32("quantized.norms", vec![rows], n));
                }
                tensors.push(TensorEntry::owned_bytes(
                    "quantized.codes",
                    DType::U8,
                    vec![rows, q],
                    codes,
                ));
                md.insert("fifu.storage".into(), "quantized".into());
                (rows, r)
            }
        };
        md.insert("embedding_dim".into(), dims.to_string());
        md.insert("vocab_size".into(), rows.to_string());
        if let Some(n) = &norms {
            tensors.push(TensorEntry::owned_f32("norms", vec![n.len()], n));
        }
        let wb = encode_words(&words);
        tensors.push(TensorEntry::owned_bytes(
            "vocab.words",
            DType::U8,
            vec![wb.len()],
            &wb,
        ));
        if let Subwords::Explicit { ngrams, .. } = &subwords {
            let nb = encode_ngrams(ngrams);
            tensors.push(TensorEntry::owned_bytes(
                "vocab.ngrams",
                DType::U8,
                vec![nb.len()],
                &nb,
            ));
        }
        let model = ModelFile::new(
            FormatKind::Finalfusion,
            Arc::new(Backing::from_bytes(&[])),
            md,
            None,
            tensors,
        )?;
        Embeddings::from_model_file(model)
    }

    /// The generic tensor-store view.
    pub fn model_file(&self) -> &ModelFile {
        &self.model
    }

    /// Consumes the embeddings, returning the generic view.
    pub fn into_model_file(self) -> ModelFile {
        self.model
    }

    /// The in-vocabulary words, by index.
    pub fn words(&self) -> &[String] {
        &self.words
    }

    /// The subword scheme.
    pub fn subwords(&self) -> &Subwords {
        &self.subwords
    }

    /// Dimensionality of the vectors.
    pub fn dims(&self) -> usize {
        self.dims
    }

    /// Number of storage rows (words + subword rows).
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// The NdNorms chunk (original norms of the word rows), if present.
    pub fn norms(&self) -> Option<&[f32]> {
        self.norms.as_deref()
    }

    /// The Metadata chunk's TOML text, if present.
    pub fn metadata(&self) -> Option<&str> {
        self.metadata.as_deref()
    }

    /// Whether the storage is product-quantized.
    pub fn is_quantized(&self) -> bool {
        self.quant.is_some()
    }

    /// The index of an in-vocabulary word.
    pub fn word_index(&self, word: &str) -> Option<usize> {
        self.index.get(word).copied()
    }

    /// Serializes as a `.fifu` file: `[Metadata] Vocab Storage [NdNorms]`,
    /// byte-identical to what the real writers produce for the same content.
    pub fn write<W: Write>(&self, w: &mut W) -> Result<()> {
        let mut out: Vec<u8> = Vec::new();
        let mut ids = Vec::new();
        if self.metadata.is_some() {
            ids.push(ID_METADATA);
        }
        ids.push(match self.subwords {
            Subwords::None => ID_SIMPLE_VOCAB,
            Subwords::Bucket { .. } => ID_BUCKET_VOCAB,
            Subwords::FastText { .. } => ID_FASTTEXT_VOCAB,
            Subwords::Explicit { .. } => ID_EXPLICIT_VOCAB,
        });
        ids.push(if self.quant.is_some() {
            ID_QUANTIZED
        } else {
            ID_NDARRAY
        });
        if self.norms.is_some() {
            ids.push(ID_NDNORMS);
        }
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&0u32.to_le_bytes());
        out.extend_from_slice(&(ids.len() as u32).to_le_bytes());
        for id in &ids {
            out.extend_from_slice(&id.to_le_bytes());
        }
        if let Some(m) = &self.metadata {
            chunk(&mut out, ID_METADATA, |b| b.extend_from_slice(m.as_bytes()));
        }
        let words = encode_words(&self.words);
        match &self.subwords {
            Subwords::None => chunk(&mut out, ID_SIMPLE_VOCAB, |b| {
                b.extend_from_slice(&(self.words.len() as u64).to_le_bytes());
                b.extend_from_slice(&words);
            }),
            Subwords::Bucket {
                min_n,
                max_n,
                exp: buckets,
            }
            | Subwords::FastText {
                min_n,
                max_n,
                buckets,
            } => {
                let id = if matches!(self.subwords, Subwords::Bucket { .. }) {
                    ID_BUCKET_VOCAB
                } else {
                    ID_FASTTEXT_VOCAB
                };
                chunk(&mut out, id, |b| {
                    b.extend_from_slice(&(self.words.len() as u64).to_le_bytes());
                    b.extend_from_slice(&min_n.to_le_bytes());
                    b.extend_from_slice(&max_n.to_le_bytes());
                    b.extend_from_slice(&buckets.to_le_bytes());
                    b.extend_from_slice(&words);
                })
            }
            Subwords::Explicit {
                min_n,
                max_n,
                ngrams,
            } => chunk(&mut out, ID_EXPLICIT_VOCAB, |b| {
                b.extend_from_slice(&(self.words.len() as u64).to_le_bytes());
                b.extend_from_slice(&(ngrams.len() as u64).to_le_bytes());
                b.extend_from_slice(&min_n.to_le_bytes());
                b.extend_from_slice(&max_n.to_le_bytes());
                b.extend_from_slice(&words);
                b.extend_from_slice(&encode_ngrams(ngrams));
            }),
        }
        match &self.quant {
            None => {
                let t = self
                    .model
                    .tensor("embeddings")
                    .ok_or_else(|| Error::new(ErrorKind::Internal, "embeddings tensor vanished"))?;
                let data = self.model.tensor_bytes(t);
                let (rows, dims) = (self.rows as u64, self.dims as u32);
                chunk(&mut out, ID_NDARRAY, |b| {
                    b.extend_from_slice(&rows.to_le_bytes());
                    b.extend_from_slice(&dims.to_le_bytes());
                    b.extend_from_slice(&TYPE_F32.to_le_bytes());
                    pad(b);
                    b.extend_from_slice(data);
                });
            }
            Some(q) => {
                let codes_t = self
                    .model
                    .tensor("quantized.codes")
                    .ok_or_else(|| Error::new(ErrorKind::Internal, "codes tensor vanished"))?;
                let codes = self.model.tensor_bytes(codes_t);
                chunk(&mut out, ID_QUANTIZED, |b| {
                    b.extend_from_slice(&u32::from(q.projection.is_some()).to_le_bytes());
                    b.extend_from_slice(&u32::from(q.norms.is_some()).to_le_bytes());
                    b.extend_from_slice(&(q.q as u32).to_le_bytes());
                    b.extend_from_slice(&(q.r as u32).to_le_bytes());
                    b.extend_from_slice(&(q.c as u32).to_le_bytes());
                    b.extend_from_slice(&(self.rows as u64).to_le_bytes());
                    b.extend_from_slice(&TYPE_U8.to_le_bytes());
                    b.extend_from_slice(&TYPE_F32.to_le_bytes());
                    pad(b);
                    if let Some(p) = &q.projection {
                        put_f32s(b, p);
                    }
                    put_f32s(b, &q.centroids);
                    if let Some(n) = &q.norms {
                        put_f32s(b, n);
                    }
                    b.extend_from_slice(codes);
                });
            }
        }
        if let Some(n) = &self.norms {
            chunk(&mut out, ID_NDNORMS, |b| {
                b.extend_from_slice(&(n.len() as u64).to_le_bytes());
                b.extend_from_slice(&TYPE_F32.to_le_bytes());
                pad(b);
                put_f32s(b, n);
            });
        }
        w.write_all(&out)
            .map_err(|e| Error::new(ErrorKind::Io, format!("writing finalfusion data: {e}")))
    }

    /// Writes a `.fifu` file at `path`, atomically
    /// ([`crate::atomic_write::atomic_write`]).
    pub fn write_file(&self, path: impl AsRef<Path>) -> Result<()> {
        crate::atomic_write::atomic_write(path.as_ref(), |w| self.write(w))
    }
}

fn put_f32s(b: &mut Vec<u8>, v: &[f32]) {
    for x in v {
        b.extend_from_slice(&x.to_le_bytes());
    }
}

/// Appends `4 - (len % 4)` zeros; the chunk buffer is the whole file so far,
/// so its length is the absolute position.
fn pad(b: &mut Vec<u8>) {
    let n = padding(b.len() as u64) as usize;
    b.resize(b.len() + n, 0);
}

/// Writes `id`, a length placeholder, the body (built on the same buffer so
/// that padding sees absolute positions), then patches the length.
fn chunk(out: &mut Vec<u8>, id: u32, body: impl FnOnce(&mut Vec<u8>)) {
    out.extend_from_slice(&id.to_le_bytes());
    let len_at = out.len();
    out.extend_from_slice(&0u64.to_le_bytes());
    let start = out.len();
    body(out);
    let len = (out.len() - start) as u64;
    out[len_at..len_at + 8].copy_from_slice(&len.to_le_bytes());
}

/// Writes a [`ModelFile`] holding the finalfusion mapping as a `.fifu` file.
pub fn write_model(model: &ModelFile, w: &mut impl Write) -> Result<()> {
    let copy = ModelFile::new(
        model.format,
        model.backing().clone(),
        model.metadata.clone(),
        model.vocab.clone(),
        model.tensors.clone(),
    )?;
    Embeddings::from_model_file(copy)?.write(w)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A small model of each kind (also used by the lookup tests in
    /// [`crate::model::static_words`]).
    pub(crate) fn small(subwords: Subwords, words: &[&str], quant: bool) -> Embeddings {
        let words: Vec<String> = words.iter().map(|s| s.to_string()).collect();
        let rows = words.len() + subwords.rows().unwrap() as usize;
        let dims = 4;
        let data: Vec<f32> = (0..rows * dims).map(|i| (i as f32 * 0.37).sin()).collect();
        let storage = if quant {
            Storage::Quantized {
                projection: Some((0..16).map(|i| (i as f32 * 0.1).cos()).collect()),
                quantized_len: 2,
                reconstructed_len: 4,
                n_centroids: 4,
                centroids: (0..16).map(|i| i as f32 * 0.25 - 2.0).collect(),
                norms: Some((0..rows).map(|i| 1.0 + i as f32).collect()),
                codes: (0..rows * 2).map(|i| (i % 4) as u8).collect(),
            }
        } else {
            Storage::Array { rows, dims, data }
        };
        let norms = Some((0..words.len()).map(|i| 2.0 + i as f32).collect());
        Embeddings::from_parts(Some("a = 1\n".to_string()), words, subwords, storage, norms)
            .unwrap()
    }

    #[test]
    fn padding_is_never_zero() {
        assert_eq!(padding(156), 4);
        assert_eq!(padding(105), 3);
        assert_eq!(padding(194), 2);
    }

    #[test]
    fn round_trip_all_kinds() {
        let kinds = [
            Subwords::None,
            Subwords::Bucket {
                min_n: 3,
                max_n: 6,
                exp: 3,
            },
            Subwords::FastText {
                min_n: 3,
                max_n: 5,
                buckets: 7,
            },
            Subwords::Explicit {
                min_n: 3,
                max_n: 4,
                ngrams: vec![("<ca".into(), 0), ("cat".into(), 1), ("at>".into(), 0)],
            },
        ];
        for quant in [false, true] {
            for k in &kinds {
                let e = small(k.clone(), &["cat", "dog", "fish"], quant);
                let mut b = Vec::new();
                e.write(&mut b).unwrap();
                let back = Embeddings::from_bytes(&b).unwrap();
                assert_eq!(back.words(), e.words());
                assert_eq!(back.subwords(), e.subwords());
                assert_eq!(back.norms(), e.norms());
                assert_eq!(back.metadata(), Some("a = 1\n"));
                for w in ["cat", "dog", "fish", "cats", "zebra", ""] {
                    assert_eq!(back.lookup(w), e.lookup(w), "{w}");
                }
                // Writing again is byte-identical.
                let mut b2 = Vec::new();
                back.write(&mut b2).unwrap();
                assert_eq!(b, b2);
                // Generic view: metadata and through ModelFile::from_bytes.
                let m = ModelFile::from_bytes(&b, ReadOptions::default()).unwrap();
                assert_eq!(m.format, FormatKind::Finalfusion);
                assert_eq!(m.metadata["architecture"], "static");
            }
        }
    }
}
