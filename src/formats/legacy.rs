//! The layout the real `cpp_embedder` converter writes ("simplified format").
//!
//! All integers are u32 little-endian, with no padding anywhere:
//!
//! ```text
//! "EMBD"  version=1  num_tensors
//! num_tensors x { name_len, name, ndim (1..=4), dims[ndim], f32 data[prod(dims)] }
//! vocab_count  vocab_count x { token_len, token }
//! ```
//!
//! Bytes after the vocabulary are ignored, as the `cpp_embedder` loader does
//! (their count is reported in [`ModelFile::details`]).
//!
//! # Telling it apart from the EMBD spec format
//!
//! Both layouts start with `45 4D 42 44 01 00 00 00` (the spec's u16 major 1 and
//! u16 minor 0 are byte-identical to the legacy u32 version 1). [`looks_legacy`]
//! answers true only when **all** of these hold:
//!
//! 1. the file starts with `"EMBD"` and the u32 at offset 4 is 1;
//! 2. it is **not** a spec header: the u32 at offset 56 is not the CRC32 of bytes
//!    0..56 (a spec writer always stores it; for a legacy file the chance that
//!    those bytes happen to match is 2^-32);
//! 3. it does **not** end like a spec file: not both `"DBME"` at `len - 8` and the
//!    u64 at offset 48 equal to the file length;
//! 4. the u32 at offset 8 (num_tensors) is in 1..=1,000,000;
//! 5. the u32 at offset 12 (the first name's length) is in 1..=1024 and the
//!    bytes that follow are that many bytes of UTF-8 without control characters.
//!
//! A spec file whose header CRC is damaged therefore still goes to the spec
//! reader (which reports the CRC mismatch): its bytes 16.. are binary header
//! fields full of zero bytes, which fail rule 5.
//!
//! # Transposition
//!
//! Linear weights are stored transposed, `[in, out]`, because the C++ computes
//! `x @ W`. Every 2-D tensor whose name contains `.weight`, except the embedding
//! tables (names containing `embeddings.`) and LayerNorm parameters, is
//! transposed back to the HuggingFace `[out, in]` layout on reading (an owned
//! f32 copy; see [`is_transposed`]). Other tensors stay zero-copy when their
//! data is 4-byte aligned in the file and are copied otherwise.
//!
//! # Synthesized metadata
//!
//! Legacy files carry no metadata; [`read`] derives the EMBD keys from shapes:
//! `hidden_size` and `embedding_dim` = columns of
//! `embeddings.word_embeddings.weight`, `vocab_size` = its rows (must equal the
//! vocabulary's token count), `max_position_emb` = rows of
//! `embeddings.position_embeddings.weight`, `num_layers` = number of distinct
//! `N` in `encoder.layer.N.` prefixes, `intermediate_size` = rows of
//! `encoder.layer.0.intermediate.dense.weight` (after transposition back),
//! `type_vocab_size` = rows of `embeddings.token_type_embeddings.weight` when
//! present. `num_attention_heads` is **a guess**: the shapes do not record it;
//! `cpp_embedder` hard-codes a head size of 32, so it is `hidden / 32` when 32
//! divides `hidden` (12 for all-MiniLM-L6-v2's 384), else 1. `max_seq_length` is
//! `cpp_embedder`'s default 256 (capped at `max_position_emb`).
//! `model_name` = `cpp_embedder-legacy`, `model_version` = `1`,
//! `created_at` = `unknown`. The special tokens are found by name
//! (`[PAD]`, `[UNK]`, `[CLS]`, `[SEP]`, `[MASK]`).

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::sync::Arc;

use super::bytes::{self, Cursor};
use super::{Backing, DType, FormatKind, ModelFile, ReadOptions, TensorData, TensorEntry};
use crate::error::{Error, ErrorKind, Result};
use crate::tokenizer::vocab::Vocab;

/// The value of the version word.
pub const VERSION: u32 = 1;
/// Largest first-name length [`looks_legacy`] accepts.
const DETECT_MAX_NAME: u32 = 1024;
/// Largest tensor count [`looks_legacy`] accepts.
const DETECT_MAX_TENSORS: u32 = 1_000_000;
/// Head size `cpp_embedder` hard-codes; used to guess the head count.
const GUESSED_HEAD_DIM: usize = 32;
/// `cpp_embedder`'s default max_seq_length.
const CPP_MAX_SEQ: usize = 256;

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    let s = b.get(at..at.checked_add(4)?)?;
    Some(u32::from_le_bytes([s[0], s[1], s[2], s[3]]))
}

fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    let s = b.get(at..at.checked_add(8)?)?;
    let mut a = [0u8; 8];
    a.copy_from_slice(s);
    Some(u64::from_le_bytes(a))
}

/// True if `b` is in the legacy `cpp_embedder` layout rather than the EMBD spec
/// layout; see the module documentation for the exact rule. Never panics.
pub fn looks_legacy(b: &[u8]) -> bool {
    if !b.starts_with(b"EMBD") || u32_at(b, 4) != Some(VERSION) {
        return false;
    }
    // Rule 2: a valid spec header CRC means spec.
    if let (Some(head), Some(stored)) = (b.get(..56), u32_at(b, 56)) {
        if bytes::crc32(head) == stored {
            return false;
        }
    }
    // Rule 3: a spec footer and matching total_file_size means spec.
    let len = b.len();
    if len >= 80
        && b.get(len - 8..len - 4) == Some(b"DBME".as_slice())
        && u64_at(b, 48) == Some(len as u64)
    {
        return false;
    }
    // Rules 4 and 5.
    let Some(n) = u32_at(b, 8) else {
        return false;
    };
    if !(1..=DETECT_MAX_TENSORS).contains(&n) {
        return false;
    }
    let Some(name_len) = u32_at(b, 12) else {
        return false;
    };
    if !(1..=DETECT_MAX_NAME).contains(&name_len) {
        return false;
    }
    let Some(name) = b.get(16..16 + name_len as usize) else {
        return false;
    };
    std::str::from_utf8(name).is_ok_and(|s| !s.chars().any(char::is_control))
}

/// True for the tensors the legacy layout stores transposed (`[in, out]`):
/// 2-D, name containing `.weight`, not an embedding table (`embeddings.`) and
/// not a LayerNorm parameter.
pub fn is_transposed(name: &str, shape: &[usize]) -> bool {
    shape.len() == 2
        && name.contains(".weight")
        && !name.contains("embeddings.")
        && !name.contains("LayerNorm")
}

/// `src` is `rows x cols` row-major; returns the `cols x rows` transpose.
fn transpose(src: &[f32], rows: usize, cols: usize) -> Vec<f32> {
    let mut out = vec![0f32; src.len()];
    for (r, row) in src.chunks_exact(cols.max(1)).enumerate().take(rows) {
        for (c, &v) in row.iter().enumerate() {
            if let Some(o) = out.get_mut(c * rows + r) {
                *o = v;
            }
        }
    }
    out
}

/// Reads a legacy `cpp_embedder` file, synthesizing metadata (see the module docs).
/// `_opts` has no effect: the layout carries no checksums.
///
/// # Errors
/// [`ErrorKind::Format`] for malformed or truncated bytes (naming the field and
/// offset), [`ErrorKind::Unsupported`] for a version other than 1,
/// [`ErrorKind::Model`] when metadata cannot be synthesized or the vocabulary
/// lacks a special token.
pub fn read(backing: Arc<Backing>, _opts: ReadOptions) -> Result<ModelFile> {
    let (tensors, tokens, trailing) = parse(backing.bytes())?;
    let vocab = Vocab::from_tokens_bert(tokens)?;
    let metadata = synthesize(&tensors, vocab.len())?;
    let n = tensors.len();
    let transposed = tensors
        .iter()
        .filter(|t| matches!(t.data, TensorData::Owned { .. }) && is_transposed(&t.name, &t.shape))
        .count();
    let vlen = vocab.len();
    let mut mf = ModelFile::new(
        FormatKind::EmbdLegacy,
        backing,
        metadata,
        Some(vocab),
        tensors,
    )?;
    mf.details = vec![
        (
            "format".to_string(),
            "EMBD legacy (cpp_embedder simplified layout)".to_string(),
        ),
        ("version".to_string(), VERSION.to_string()),
        ("num_tensors".to_string(), n.to_string()),
        (
            "transposed_tensors".to_string(),
            format!("{transposed} (stored [in, out], returned as [out, in])"),
        ),
        ("vocab_count".to_string(), vlen.to_string()),
        ("trailing_bytes".to_string(), trailing.to_string()),
        (
            "metadata".to_string(),
            "synthesized from tensor shapes (num_attention_heads guessed as hidden/32)".to_string(),
        ),
        ("checksums".to_string(), "none in this format".to_string()),
    ];
    Ok(mf)
}

type Parsed = (Vec<TensorEntry>, Vec<String>, usize);

fn parse(b: &[u8]) -> Result<Parsed> {
    let mut c = Cursor::new(b, 0);
    let magic: [u8; 4] = c.array("legacy magic")?;
    if &magic != b"EMBD" {
        return Err(Error::new(
            ErrorKind::UnknownFormat,
            format!("legacy magic at offset 0: expected \"EMBD\", found {magic:02x?}"),
        ));
    }
    let version = c.u32("legacy version")?;
    if version != VERSION {
        return Err(Error::unsupported(format!(
            "legacy version at offset 4: unsupported version {version} (expected 1)"
        )));
    }
    let n = c.u32("legacy num_tensors")?;
    // The smallest tensor: name_len + 1-byte name + ndim + one dim + one f32.
    if u64::from(n) * 17 > c.remaining() as u64 {
        return Err(Error::format(
            "legacy num_tensors",
            8,
            format!(
                "{n} tensors cannot fit in the remaining {} bytes (truncated file?)",
                c.remaining()
            ),
        ));
    }
    let mut tensors = Vec::with_capacity(n as usize);
    for i in 0..n {
        let at = c.pos() as u64;
        let name_len = c.u32(&format!("legacy tensor {i} name_len"))?;
        if name_len == 0 {
            return Err(Error::format(
                format!("legacy tensor {i} name_len"),
                at,
                "tensor name is empty",
            ));
        }
        let name = c
            .str(
                bytes::to_usize(u64::from(name_len), "legacy name_len")?,
                &format!("legacy tensor {i} name"),
            )?
            .to_string();
        let what = |f: &str| format!("legacy tensor {i} ({name}) {f}");
        let nd_at = c.pos() as u64;
        let ndim = c.u32(&what("ndim"))?;
        if !(1..=4).contains(&ndim) {
            return Err(Error::format(
                what("ndim"),
                nd_at,
                format!("{ndim} is not in 1..=4"),
            ));
        }
        let mut dims = Vec::with_capacity(4);
        for k in 0..ndim {
            let d_at = c.pos() as u64;
            let d = c.u32(&what(&format!("dims[{k}]")))?;
            if d == 0 {
                return Err(Error::format(what(&format!("dims[{k}]")), d_at, "is 0"));
            }
            dims.push(bytes::to_usize(u64::from(d), "legacy dim")?);
        }
        let numel = bytes::product(&dims, &what("dims"))?;
        let nbytes = numel
            .checked_mul(4)
            .ok_or_else(|| Error::format(what("dims"), nd_at, format!("{dims:?} overflows")))?;
        let start = c.pos();
        let data = c.bytes(nbytes, &what("data"))?;
        let entry = if is_transposed(&name, &dims) {
            let vals: Vec<f32> = data
                .chunks_exact(4)
                .map(|q| f32::from_le_bytes([q[0], q[1], q[2], q[3]]))
                .collect();
            let (rows, cols) = (dims[0], dims[1]);
            let mut e =
                TensorEntry::owned_f32(name, vec![cols, rows], &transpose(&vals, rows, cols));
            e.file_offset = start as u64;
            e
        } else if start.is_multiple_of(4) {
            TensorEntry {
                name,
                dtype: DType::F32,
                shape: dims,
                data: TensorData::Mapped { start, len: nbytes },
                file_offset: start as u64,
            }
        } else {
            let mut e = TensorEntry::owned_bytes(name, DType::F32, dims, data);
            e.file_offset = start as u64;
            e
        };
        tensors.push(entry);
    }
    let vc_at = c.pos() as u64;
    let vocab_count = c.u32("legacy vocab_count")?;
    if u64::from(vocab_count) * 4 > c.remaining() as u64 {
        return Err(Error::format(
            "legacy vocab_count",
            vc_at,
            format!(
                "{vocab_count} tokens cannot fit in the remaining {} bytes (truncated file?)",
                c.remaining()
            ),
        ));
    }
    let mut tokens = Vec::with_capacity(vocab_count as usize);
    for i in 0..vocab_count {
        let len = c.u32(&format!("legacy token {i} token_len"))?;
        let t = c.str(
            bytes::to_usize(u64::from(len), "legacy token_len")?,
            &format!("legacy token {i}"),
        )?;
        tokens.push(t.to_string());
    }
    Ok((tensors, tokens, c.remaining()))
}

fn synthesize(tensors: &[TensorEntry], vocab_len: usize) -> Result<BTreeMap<String, String>> {
    let find2 = |name: &str| -> Result<(usize, usize)> {
        let t = tensors.iter().find(|t| t.name == name).ok_or_else(|| {
            Error::model(format!(
                "legacy file has no '{name}' tensor; cannot synthesize its metadata"
            ))
        })?;
        match t.shape.as_slice() {
            &[r, c] => Ok((r, c)),
            s => Err(Error::model(format!(
                "legacy tensor '{name}' has shape {s:?}, expected 2 dimensions"
            ))),
        }
    };
    // cpp_embedder wrote BERT's (HF) tensor names.
    let names = &crate::model::names::BERT;
    let weight = |module: &str| format!("{module}.weight");
    let (vocab_rows, hidden) = find2(&weight(names.word))?;
    if vocab_rows != vocab_len {
        return Err(Error::format(
            "legacy vocab_count",
            0,
            format!(
                "{vocab_len} tokens but {}.weight has {vocab_rows} rows",
                names.word
            ),
        ));
    }
    let (max_pos, _) = find2(&weight(names.position))?;
    let layers: BTreeSet<&str> = tensors
        .iter()
        .filter_map(|t| {
            let rest = t.name.strip_prefix(crate::model::names::LAYER_PREFIX)?;
            let (n, _) = rest.split_once('.')?;
            (!n.is_empty() && n.bytes().all(|c| c.is_ascii_digit())).then_some(n)
        })
        .collect();
    let (intermediate, _) = find2(&format!(
        "{}0.{}.weight",
        crate::model::names::LAYER_PREFIX,
        names.ffn_up
    ))?;
    let heads = if hidden % GUESSED_HEAD_DIM == 0 {
        hidden / GUESSED_HEAD_DIM
    } else {
        1
    };
    let mut md = BTreeMap::new();
    let mut put = |k: &str, v: String| {
        md.insert(k.to_string(), v);
    };
    put("model_name", "cpp_embedder-legacy".to_string());
    put("model_version", "1".to_string());
    put("embedding_dim", hidden.to_string());
    put("hidden_size", hidden.to_string());
    put("vocab_size", vocab_rows.to_string());
    put("num_layers", layers.len().to_string());
    put("num_attention_heads", heads.to_string());
    put("intermediate_size", intermediate.to_string());
    put("max_position_emb", max_pos.to_string());
    put("max_seq_length", CPP_MAX_SEQ.min(max_pos).to_string());
    put("created_at", "unknown".to_string());
    if let Ok((types, _)) = find2(&weight(names.token_type)) {
        put("type_vocab_size", types.to_string());
    }
    Ok(md)
}

fn io(e: std::io::Error) -> Error {
    Error::io("writing legacy EMBD output", e)
}

/// Writes `model` in the exact legacy `cpp_embedder` layout (the tensors of
/// [`is_transposed`] stored transposed, `[in, out]`), so tests and tools can
/// produce legacy files.
///
/// # Errors
/// [`ErrorKind::InvalidArgument`] if the model has no vocabulary, a tensor is
/// not FLOAT32, has 0 or more than 4 dimensions, or a count/length exceeds
/// u32; [`ErrorKind::Io`] on write failure.
pub fn write_legacy<W: Write>(model: &ModelFile, w: &mut W) -> Result<()> {
    let bad = |d: String| Error::invalid_argument(format!("cannot write legacy EMBD: {d}"));
    let fit = |v: usize, what: &str| {
        u32::try_from(v).map_err(|_| bad(format!("{what} {v} does not fit in a u32")))
    };
    let vocab = model
        .vocab
        .as_ref()
        .ok_or_else(|| bad("the model has no vocabulary".to_string()))?;
    w.write_all(b"EMBD").map_err(io)?;
    w.write_all(&VERSION.to_le_bytes()).map_err(io)?;
    w.write_all(&fit(model.tensors.len(), "tensor count")?.to_le_bytes())
        .map_err(io)?;
    for t in &model.tensors {
        if t.dtype != DType::F32 {
            return Err(bad(format!(
                "tensor '{}' is {}; the legacy layout stores only f32",
                t.name, t.dtype
            )));
        }
        if !(1..=4).contains(&t.shape.len()) {
            return Err(bad(format!(
                "tensor '{}' has {} dimensions (1..=4 allowed)",
                t.name,
                t.shape.len()
            )));
        }
        w.write_all(&fit(t.name.len(), "name length")?.to_le_bytes())
            .map_err(io)?;
        w.write_all(t.name.as_bytes()).map_err(io)?;
        w.write_all(&fit(t.shape.len(), "ndim")?.to_le_bytes())
            .map_err(io)?;
        let raw = model.tensor_bytes(t);
        if raw.len() != t.numel() * 4 {
            return Err(bad(format!(
                "tensor '{}' has {} bytes for shape {:?}",
                t.name,
                raw.len(),
                t.shape
            )));
        }
        if is_transposed(&t.name, &t.shape) {
            let (rows, cols) = (t.shape[0], t.shape[1]);
            for d in [cols, rows] {
                w.write_all(&fit(d, "dimension")?.to_le_bytes())
                    .map_err(io)?;
            }
            let vals = super::convert_to_f32(DType::F32, raw);
            let tr = transpose(&vals, rows, cols);
            let mut buf = Vec::with_capacity(tr.len() * 4);
            for v in tr {
                buf.extend_from_slice(&v.to_le_bytes());
            }
            w.write_all(&buf).map_err(io)?;
        } else {
            for &d in &t.shape {
                w.write_all(&fit(d, "dimension")?.to_le_bytes())
                    .map_err(io)?;
            }
            w.write_all(raw).map_err(io)?;
        }
    }
    w.write_all(&fit(vocab.len(), "vocab count")?.to_le_bytes())
        .map_err(io)?;
    for t in vocab.tokens() {
        w.write_all(&fit(t.len(), "token length")?.to_le_bytes())
            .map_err(io)?;
        w.write_all(t.as_bytes()).map_err(io)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::formats::embd;

    fn vals(n: usize, seed: f32) -> Vec<f32> {
        (0..n).map(|i| seed + i as f32 * 0.25).collect()
    }

    /// A BERT-shaped model in HF layout, `hidden` wide, `layers` deep, no
    /// metadata (the reader synthesizes it).
    pub(crate) fn bert_model(hidden: usize, inter: usize, layers: usize) -> ModelFile {
        let tiny = crate::testutil::TinyBert {
            words: ["a", "##b", "ü"].iter().map(|s| s.to_string()).collect(),
            ..crate::testutil::TinyBert::new(hidden, layers, inter, 16)
        };
        let mut seed = 0;
        let tensors = tiny.tensors(|_, shape| {
            seed += 1;
            vals(shape.iter().product(), (seed - 1) as f32)
        });
        crate::testutil::model_file(BTreeMap::new(), Some(tiny.vocab()), tensors)
    }

    fn legacy_bytes(m: &ModelFile) -> Vec<u8> {
        let mut v = Vec::new();
        write_legacy(m, &mut v).unwrap();
        v
    }

    #[test]
    fn round_trip_undoes_transposition() {
        let m = bert_model(64, 96, 2);
        let b = legacy_bytes(&m);
        assert!(looks_legacy(&b));
        let r = ModelFile::from_bytes(&b, ReadOptions::default()).unwrap();
        assert_eq!(r.format, FormatKind::EmbdLegacy);
        assert_eq!(r.tensors.len(), m.tensors.len());
        for a in &m.tensors {
            let t = r.tensor(&a.name).unwrap();
            assert_eq!(t.shape, a.shape, "{}", a.name);
            assert_eq!(r.tensor_to_f32(t), m.tensor_to_f32(a), "{}", a.name);
        }
        let md = &r.metadata;
        for (k, v) in [
            ("hidden_size", "64"),
            ("embedding_dim", "64"),
            ("vocab_size", "8"),
            ("num_layers", "2"),
            ("num_attention_heads", "2"),
            ("intermediate_size", "96"),
            ("max_position_emb", "16"),
            ("max_seq_length", "16"),
            ("type_vocab_size", "2"),
            ("model_name", "cpp_embedder-legacy"),
            ("model_version", "1"),
            ("created_at", "unknown"),
        ] {
            assert_eq!(md.get(k).map(String::as_str), Some(v), "{k}");
        }
        for k in embd::REQUIRED_KEYS {
            assert!(md.contains_key(k), "{k}");
        }
        assert_eq!(
            r.vocab.as_ref().unwrap().specials().as_array(),
            [0, 1, 2, 3, 4]
        );
        // The stored layout really is [in, out] for the intermediate weight.
        let name = b"encoder.layer.0.intermediate.dense.weight";
        let at = b.windows(name.len()).position(|w| w == name).unwrap() + name.len();
        let dims: Vec<u32> = (0..3)
            .map(|k| u32::from_le_bytes(b[at + 4 * k..at + 4 * k + 4].try_into().unwrap()))
            .collect();
        assert_eq!(dims, vec![2, 64, 96]);
        // And it converts to a valid EMBD file.
        let e = embd::to_bytes(&r, &embd::WriteOptions::default()).unwrap();
        assert!(!looks_legacy(&e));
        let back = ModelFile::from_bytes(&e, ReadOptions::default()).unwrap();
        assert_eq!(back.format, FormatKind::Embd);
    }

    #[test]
    fn transposition_rule() {
        assert!(is_transposed(
            "encoder.layer.0.attention.self.query.weight",
            &[4, 4]
        ));
        assert!(is_transposed("pooler.dense.weight", &[4, 4]));
        assert!(!is_transposed("embeddings.word_embeddings.weight", &[8, 4]));
        assert!(!is_transposed(
            "encoder.layer.0.output.LayerNorm.weight",
            &[4]
        ));
        assert!(!is_transposed("encoder.layer.0.output.dense.bias", &[4]));
        assert_eq!(
            transpose(&[1., 2., 3., 4., 5., 6.], 2, 3),
            vec![1., 4., 2., 5., 3., 6.]
        );
    }

    #[test]
    fn detection_never_confuses_the_two() {
        let m = bert_model(32, 64, 1);
        let l = legacy_bytes(&m);
        assert!(looks_legacy(&l));
        let mut md = BTreeMap::new();
        for k in embd::REQUIRED_KEYS {
            md.insert(k.to_string(), "1".to_string());
        }
        md.insert("vocab_size".into(), "8".into());
        let mut m2 = bert_model(32, 64, 1);
        m2.metadata = md;
        for checksums in [true, false] {
            let mut s = embd::to_bytes(&m2, &embd::WriteOptions { checksums }).unwrap();
            assert!(!looks_legacy(&s));
            // A damaged header CRC still reads as a (broken) spec file.
            s[56] ^= 0xFF;
            assert!(!looks_legacy(&s));
            let e = ModelFile::from_bytes(&s, ReadOptions::default()).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::Checksum, "{e}");
        }
        assert!(!looks_legacy(b"EMBD"));
        assert!(!looks_legacy(b""));
        assert!(!looks_legacy(&l[..17]));
    }

    #[test]
    fn truncated_legacy_files_error() {
        let b = legacy_bytes(&bert_model(4, 8, 1));
        for n in 0..b.len() {
            let r = ModelFile::from_bytes(&b[..n], ReadOptions::default());
            assert!(r.is_err(), "truncated to {n} was accepted");
            // Detection needs the first name (16 + 33 bytes).
            if n >= 49 {
                assert!(looks_legacy(&b[..n]), "{n}");
                let e = r.unwrap_err();
                assert!(e.to_string().contains("legacy"), "{e}");
            }
        }
    }

    #[test]
    fn byte_flips_never_panic() {
        let b = legacy_bytes(&bert_model(4, 8, 1));
        for i in 0..b.len() {
            for x in [0xFFu8, 0x01, 0x80] {
                let mut c = b.clone();
                c[i] ^= x;
                let _ = ModelFile::from_bytes(&c, ReadOptions::default());
            }
        }
    }

    #[test]
    fn semantic_errors_name_the_field() {
        let b = legacy_bytes(&bert_model(4, 8, 1));
        let mut c = b.clone();
        // ndim of the first tensor (after the 33-byte name).
        c[16 + 33] = 7;
        let e = ModelFile::from_bytes(&c, ReadOptions::default()).unwrap_err();
        assert!(
            e.to_string()
                .contains("legacy tensor 0 (embeddings.word_embeddings.weight) ndim"),
            "{e}"
        );
        let mut c = b.clone();
        c[8..12].copy_from_slice(&1_000_000u32.to_le_bytes());
        let e = ModelFile::from_bytes(&c, ReadOptions::default()).unwrap_err();
        assert!(e.to_string().contains("num_tensors"), "{e}");
        let mut c = b.clone();
        c[4] = 2;
        assert!(!looks_legacy(&c));
    }

    #[test]
    fn writer_refuses_non_f32() {
        let mut m = bert_model(4, 8, 1);
        m.tensors
            .push(TensorEntry::owned_bytes("x", DType::U8, vec![1], &[1]));
        assert!(write_legacy(&m, &mut Vec::new()).is_err());
    }
}
