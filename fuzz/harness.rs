//! The fuzz entry points, one per reader, shared by the cargo-fuzz targets in
//! `fuzz/fuzz_targets/` and by the ordinary test `tests/it/fuzz_regressions.rs`
//! (which replays the seed corpora and every crash input on stable Rust).
//!
//! Each function takes arbitrary bytes, runs them through one reader, and
//! panics only when an invariant is broken: a reader must return `Ok` or `Err`
//! for any input, and what it returns as `Ok` must be internally consistent
//! (tensor data inside the backing, byte length = elements x dtype size, ...).
//!
//! This file is included with `#[path]`, so it only uses the public API of the
//! `embedder` crate.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};

use embedder::formats::{
    amb, coreml_blob, embd, finalfusion, legacy, lwt, torch_pt, Backing, Container, ModelFile,
    ReadHint, ReadOptions, TensorData, TensorEntry, WriteSettings, Writer, CONTAINERS,
};
use embedder::import::hf;
use embedder::tokenizer::pipeline::Pipeline;
use embedder::tokenizer::spec::{TokenizerKind, TokenizerSpec};
use embedder::tokenizer::{Tokenizer, TokenizerConfig};
use embedder::{ModelConfig, SpecialIds, Vocab};

#[path = "bpe_harness.rs"]
mod bpe_harness;
pub use bpe_harness::fuzz_bpe;
#[path = "pt_writer.rs"]
pub mod pt_writer;

/// A fuzz entry point.
pub type Target = fn(&[u8]);

/// Every target: `(name, entry point)`. The name is the cargo-fuzz target name,
/// the folder of its seed corpus (`fuzz/corpus/<name>/`) and of its crash
/// inputs (`tests/data/fuzz/<name>/`).
pub const TARGETS: &[(&str, Target)] = &[
    ("embd", fuzz_embd),
    ("legacy", fuzz_legacy),
    ("finalfusion", fuzz_finalfusion),
    ("coreml_blob", fuzz_coreml_blob),
    ("amb", fuzz_amb),
    ("lwt", fuzz_lwt),
    ("safetensors", fuzz_safetensors),
    ("tokenizer", fuzz_tokenizer),
    ("unigram_spec", fuzz_unigram_spec),
    ("model_file", fuzz_model_file),
    ("hf_dir", fuzz_hf_dir),
    ("embedder", fuzz_embedder),
    ("container", fuzz_container),
    ("bpe", fuzz_bpe),
    ("hf_tokenizer", fuzz_hf_tokenizer),
    ("split", fuzz_split),
    ("torch_pt", fuzz_torch_pt),
    ("pair_template", fuzz_pair_template),
    ("hub_answers", fuzz_hub_answers),
];

/// Both checksum settings: with verification a corrupt file stops at the CRC,
/// without it the fuzzer reaches the structure behind it.
const OPTS: [ReadOptions; 2] = [
    ReadOptions {
        verify_checksums: true,
    },
    ReadOptions {
        verify_checksums: false,
    },
];

fn backing(data: &[u8]) -> Arc<Backing> {
    Arc::new(Backing::from_bytes(data))
}

/// The invariants of a successfully parsed [`ModelFile`], and a tour of what a
/// consumer does with it (config, tokenizer), none of which may panic.
pub fn check_model(m: &ModelFile) {
    let total = m.backing().bytes().len();
    for t in &m.tensors {
        if let TensorData::Mapped { start, len } = t.data {
            let end = start.checked_add(len);
            assert!(
                end.is_some_and(|e| e <= total),
                "tensor '{}' maps [{start}, +{len}) outside the {total}-byte backing",
                t.name
            );
        }
        check_tensor(m, t);
        assert!(
            m.tensor(&t.name).is_some(),
            "tensor '{}' not in the index",
            t.name
        );
    }
    if let Ok(cfg) = ModelConfig::from_metadata(&m.metadata) {
        let _ = cfg.validate();
    }
    if let Some(v) = &m.vocab {
        check_vocab(v);
        let tok = Tokenizer::new(v.clone(), TokenizerConfig::bert_uncased());
        check_encode(&tok, "Hello [SEP] wörld 中文 ##x", Some(8));
    }
}

fn check_tensor(m: &ModelFile, t: &TensorEntry) {
    let b = m.tensor_bytes(t);
    assert_eq!(b.len(), t.byte_len(), "tensor '{}' byte_len", t.name);
    // Element count consistent with the bytes (checked: the shape came from the file).
    let numel = t
        .shape
        .iter()
        .try_fold(1usize, |a, &d| a.checked_mul(d))
        .unwrap_or_else(|| panic!("tensor '{}' shape {:?} overflows", t.name, t.shape));
    assert_eq!(
        numel.checked_mul(t.dtype.size()),
        Some(b.len()),
        "tensor '{}' ({} {:?}) has {} bytes",
        t.name,
        t.dtype,
        t.shape,
        b.len()
    );
    if b.len() <= 1 << 16 {
        assert_eq!(m.tensor_to_f32(t).len(), numel);
    }
    let _ = m.tensor_f32(t);
}

fn check_vocab(v: &Vocab) {
    let n = v.len();
    for id in v.specials().as_array() {
        assert!((id as usize) < n, "special id {id} >= vocab size {n}");
    }
}

/// Encodes `text` and checks the tokenizer's invariants.
pub fn check_encode(tok: &Tokenizer, text: &str, max_len: Option<usize>) {
    let sp = tok.vocab().specials();
    let n = tok.vocab().len();
    let ids = tok.encode(text, max_len);
    assert!(ids.len() >= 2, "encode gave {ids:?}");
    assert_eq!(ids.first(), Some(&sp.cls), "[CLS] first");
    assert_eq!(ids.last(), Some(&sp.sep), "[SEP] last");
    if let Some(m) = max_len {
        assert!(ids.len() <= m.max(2), "{} ids for max_len {m}", ids.len());
    }
    for &id in &ids {
        assert!((id as usize) < n, "id {id} >= vocab size {n}");
    }
    assert_eq!(tok.count_tokens(text, max_len), ids.len(), "count_tokens");
    let mut again = vec![7u32; 3];
    tok.encode_into(text, max_len, &mut again);
    assert_eq!(again, ids, "encode_into");
    let _ = tok.decode(&ids, true);
    let _ = tok.decode(&ids, false);
}

/// Makes an EMBD prefix self-consistent so the fuzzer gets past the header
/// CRC: `total_file_size` := the length, `header_checksum` := CRC32 of 0..56.
fn fix_embd_header(data: &[u8]) -> Option<Vec<u8>> {
    if data.len() < 64 || !data.starts_with(b"EMBD") {
        return None;
    }
    let mut b = data.to_vec();
    let len = b.len() as u64;
    b[48..56].copy_from_slice(&len.to_le_bytes());
    let crc = crc32(&b[..56]);
    b[56..60].copy_from_slice(&crc.to_le_bytes());
    Some(b)
}

/// CRC32 (IEEE), bitwise: the harness does not depend on crc32fast.
fn crc32(b: &[u8]) -> u32 {
    let mut c = !0u32;
    for &x in b {
        c ^= u32::from(x);
        for _ in 0..8 {
            c = if c & 1 != 0 {
                (c >> 1) ^ 0xEDB8_8320
            } else {
                c >> 1
            };
        }
    }
    !c
}

/// EMBD spec layout: the bytes as given (checksums verified, as `open` does),
/// and with the header made consistent and checksums off, so mutations reach
/// the body. An accepted body is written back and must read back identically.
pub fn fuzz_embd(data: &[u8]) {
    if let Ok(m) = embd::read(backing(data), OPTS[0]) {
        check_model(&m);
    }
    let Some(fixed) = fix_embd_header(data) else {
        return;
    };
    let Ok(m) = embd::read(backing(&fixed), OPTS[1]) else {
        return;
    };
    check_model(&m);
    // A file we accept, we can write back and read again identically.
    if let Ok(out) = embd::to_bytes(&m, &embd::WriteOptions::default()) {
        let back = embd::read(backing(&out), ReadOptions::default())
            .unwrap_or_else(|e| panic!("re-read of a re-written file: {e}"));
        assert_eq!(back.tensors.len(), m.tensors.len());
        assert_eq!(back.metadata, m.metadata);
        for t in &m.tensors {
            let u = back.tensor(&t.name).expect("tensor survives a rewrite");
            assert_eq!(back.tensor_bytes(u), m.tensor_bytes(t), "{}", t.name);
        }
    }
}

/// The rows of [`CONTAINERS`] that read from bytes, in table order: the
/// `container` target's first byte picks one (modulo their count).
pub fn byte_containers() -> Vec<&'static Container> {
    CONTAINERS.iter().filter(|c| c.read.is_some()).collect()
}

/// Every container of [`CONTAINERS`] that reads from bytes, through its table
/// row: byte 0 picks the row (see [`byte_containers`]), the rest is the file.
/// What a reader accepts must hold the [`check_model`] invariants, and what a
/// file writer writes from it must read back with the same tensors. A new
/// container is fuzzed here without a target of its own.
pub fn fuzz_container(data: &[u8]) {
    let rows = byte_containers();
    let Some((&sel, file)) = data.split_first() else {
        return;
    };
    let c = rows[usize::from(sel) % rows.len()];
    let Some(read) = c.read else {
        return;
    };
    for opts in OPTS {
        let Ok(m) = read(backing(file), opts, &ReadHint::default()) else {
            continue;
        };
        check_model(&m);
        let Some(Writer::File(write)) = c.write else {
            continue;
        };
        let mut out = Vec::new();
        let mut settings = WriteSettings {
            checksums: true,
            quant: amb::Quant::None,
            progress: &mut |_, _| {},
        };
        if write(&m, &mut out, &mut settings).is_ok() {
            let back = read(backing(&out), ReadOptions::default(), &ReadHint::default())
                .unwrap_or_else(|e| panic!("{}: re-read of a re-written file: {e}", c.name));
            check_model(&back);
            assert_eq!(
                back.tensors.len(),
                m.tensors.len(),
                "{}: tensor count",
                c.name
            );
        }
    }
}

/// The legacy `cpp_embedder` layout (detection and reader).
pub fn fuzz_legacy(data: &[u8]) {
    let _ = legacy::looks_legacy(data);
    if let Ok(m) = legacy::read(backing(data), ReadOptions::default()) {
        check_model(&m);
    }
}

/// finalfusion `.fifu`: the container and the embeddings view with lookups.
pub fn fuzz_finalfusion(data: &[u8]) {
    let m = match finalfusion::read(backing(data), ReadOptions::default()) {
        Ok(m) => m,
        Err(_) => return,
    };
    check_model(&m);
    if let Ok(e) = finalfusion::Embeddings::from_model_file(m) {
        for w in ["ab", "zz", "éfx", "", "<a>", "hello world"] {
            let _ = e.lookup(w);
            let _ = e.subword_indices(w);
        }
        let _ = e.embed_text("ab cd éf", true);
        for i in [0, 1, e.rows().saturating_sub(1), e.rows()] {
            let _ = e.row(i);
        }
        let mut out = Vec::new();
        let _ = e.write(&mut out);
    }
}

/// Splits the input into a manifest (length-prefixed by a little-endian u16)
/// and a blob. An unparsable manifest is replaced by a minimal valid one that
/// lists every blob in the file, so the blob reader is always exercised.
fn split_coreml(data: &[u8]) -> (Option<serde_json::Value>, &[u8]) {
    if data.len() < 2 {
        return (None, data);
    }
    let n = usize::from(u16::from_le_bytes([data[0], data[1]])).min(data.len() - 2);
    let manifest = serde_json::from_slice(&data[2..2 + n]).ok();
    (manifest, &data[2 + n..])
}

/// Core ML weight blob + JSON manifest.
pub fn fuzz_coreml_blob(data: &[u8]) {
    let (manifest, blob) = split_coreml(data);
    if let Ok(list) = coreml_blob::list_blobs(blob) {
        for i in &list {
            let start = usize::try_from(i.data_offset).expect("offset fits");
            let len = usize::try_from(i.size).expect("size fits");
            let d = blob
                .get(start..start.checked_add(len).expect("no overflow"))
                .expect("list_blobs returns in-bounds blobs");
            // The reader unpacks only the sub-byte types (Int4, UInt1..UInt6).
            if let (true, Ok(n)) = (i.dtype.bits() < 8, i.element_count()) {
                let vals = coreml_blob::unpack_bits(d, i.dtype.bits(), n as usize, true);
                assert!(vals.len() <= n as usize);
            }
        }
    }
    if let Ok(h) = coreml_blob::read_header(blob) {
        let _ = h;
        for off in [64u64, 128, 192] {
            let _ = coreml_blob::blob_at(blob, off);
        }
    }
    if let Some(man) = manifest {
        if let Ok(m) = coreml_blob::from_parts(backing(blob), &man, ReadOptions::default()) {
            check_model(&m);
        }
    }
}

/// embee.cpp AMB.
pub fn fuzz_amb(data: &[u8]) {
    for opts in OPTS {
        if let Ok(m) = amb::read(backing(data), opts) {
            check_model(&m);
        }
    }
    // The block dequantizer on its own: first byte dtype, then the payload.
    if let Some((&dt, rest)) = data.split_first() {
        if let Some((&n, payload)) = rest.split_first() {
            let numel = usize::from(n) * 8;
            if let Ok(v) = amb::dequantize(dt, payload, numel, 0) {
                assert_eq!(v.len(), numel, "dequantize length");
            }
        }
    }
}

/// LightwatchAI2 `.lwt`.
pub fn fuzz_lwt(data: &[u8]) {
    for opts in OPTS {
        if let Ok(m) = lwt::read(backing(data), opts) {
            check_model(&m);
            let _ = lwt::Gpt2Config::from_metadata(&m.metadata);
        }
    }
}

/// safetensors, through the entry the converter uses.
pub fn fuzz_safetensors(data: &[u8]) {
    let b = backing(data);
    if let Ok(entries) = hf::safetensors_entries(&b, "fuzz") {
        let total = b.bytes().len();
        for t in &entries {
            if let TensorData::Mapped { start, len } = t.data {
                assert!(
                    start.checked_add(len).is_some_and(|e| e <= total),
                    "safetensors entry '{}' outside the buffer",
                    t.name
                );
            }
        }
        // The converter then assembles a ModelFile from them.
        if let Ok(m) = ModelFile::new(
            embedder::FormatKind::HfSafetensors,
            b,
            BTreeMap::new(),
            None,
            entries,
        ) {
            check_model(&m);
        }
    }
}

const SMALL_TOKENS: &[&str] = &[
    "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hi", "there", "ο", "##δ", "##ο", "##σ", "a",
    "b", "c", "ab", "x", "y", "##a", "##b", "##c", "cafe", "##fe", "ca", "中", "文", "$", "+", ",",
    "!", "café", "[", "]", "##", "#",
];

fn small_tokenizer(cfg: TokenizerConfig) -> Tokenizer {
    let tokens = SMALL_TOKENS.iter().map(|s| s.to_string()).collect();
    let vocab = Vocab::from_tokens_bert(tokens).expect("small vocab is valid");
    Tokenizer::new(vocab, cfg)
}

/// The real all-MiniLM-L6-v2 vocabulary, when `models/` has it (set
/// `EMBD_FUZZ_VOCAB` to use another `vocab.txt`).
fn real_vocab() -> Option<&'static Tokenizer> {
    static REAL: OnceLock<Option<Tokenizer>> = OnceLock::new();
    REAL.get_or_init(|| {
        let path = std::env::var_os("EMBD_FUZZ_VOCAB")
            .map(std::path::PathBuf::from)
            .unwrap_or_else(|| {
                std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                    .join("..")
                    .join("models/all-MiniLM-L6-v2-hf/vocab.txt")
            });
        let path = if path.exists() {
            path
        } else {
            // The test binary's manifest dir is the repository root.
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("models/all-MiniLM-L6-v2-hf/vocab.txt")
        };
        let v = Vocab::from_vocab_txt(&path).ok()?;
        Some(Tokenizer::new(v, TokenizerConfig::bert_uncased()))
    })
    .as_ref()
}

fn small_tokenizers() -> &'static [Tokenizer; 4] {
    static SMALL: OnceLock<[Tokenizer; 4]> = OnceLock::new();
    SMALL.get_or_init(|| {
        let base = TokenizerConfig::bert_uncased();
        let cased = TokenizerConfig {
            lowercase: false,
            strip_accents: false,
            ..base.clone()
        };
        let raw = TokenizerConfig {
            clean_text: false,
            handle_chinese_chars: false,
            max_input_chars_per_word: 5,
            ..base.clone()
        };
        let odd = TokenizerConfig {
            continuation_prefix: String::new(),
            max_input_chars_per_word: 0,
            ..base.clone()
        };
        [
            small_tokenizer(base),
            small_tokenizer(cased),
            small_tokenizer(raw),
            small_tokenizer(odd),
        ]
    })
}

/// Arbitrary text through the tokenizer. Byte 0 picks the mode and `max_len`;
/// the rest is the text (lossily decoded if it is not UTF-8). In the
/// hostile-vocabulary mode the text up to the first NUL is a vocabulary
/// (`\n`-separated, special ids taken from byte 1).
pub fn fuzz_tokenizer(data: &[u8]) {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let max_len = match mode >> 4 {
        0 => None,
        k => Some(usize::from(k) * usize::from(k) - 1), // 0, 3, 8, ..., 224
    };
    let text = String::from_utf8_lossy(rest);
    match mode & 0x7 {
        0..=3 => check_encode(&small_tokenizers()[usize::from(mode & 3)], &text, max_len),
        4 | 5 => {
            if let Some(t) = real_vocab() {
                check_encode(t, &text, max_len);
            } else {
                check_encode(&small_tokenizers()[0], &text, max_len);
            }
        }
        _ => {
            // Hostile vocabulary: empty tokens, duplicates, specials anywhere.
            let (voc, text) = text.split_once('\0').unwrap_or((&text, "hi [CLS]x"));
            let tokens: Vec<String> = voc.split('\n').map(str::to_string).collect();
            let n = tokens.len() as u32;
            let s = u32::from(rest.first().copied().unwrap_or(0));
            let specials = SpecialIds {
                pad: s % n,
                unk: (s / 2) % n,
                cls: (s / 3) % n,
                sep: (s / 5) % n,
                mask: (s / 7) % n,
            };
            let Ok(v) = Vocab::new(tokens, specials) else {
                return;
            };
            let cfg = TokenizerConfig {
                continuation_prefix: if mode & 8 != 0 { "##" } else { "" }.to_string(),
                ..TokenizerConfig::bert_uncased()
            };
            check_encode(&Tokenizer::new(v, cfg), text, max_len);
        }
    }
}

/// A stored SentencePiece-Unigram tokenizer (`TokenizerSpec::from_parts`) and
/// encoding through it. The input, after a mode byte (max_len, text choice),
/// is UTF-8 (lossy) cut at U+0001 into: the settings JSON; the pieces, one per
/// line as `piece<TAB>score`; the text; the char map's bytes. A corrupt part
/// must be an error; a built pipeline must encode any text within its bounds.
pub fn fuzz_unigram_spec(data: &[u8]) {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let max_len = match mode >> 4 {
        0 => None,
        k => Some(usize::from(k) * usize::from(k) - 1),
    };
    let s = String::from_utf8_lossy(rest);
    let mut parts = s.splitn(4, '\u{1}');
    let settings = parts.next().unwrap_or("");
    let vocab = parts.next().unwrap_or("");
    let text = parts.next().unwrap_or("hello world");
    let charsmap = parts
        .next()
        .map(|c| c.as_bytes().to_vec())
        .unwrap_or_default();
    let mut pieces = Vec::new();
    let mut scores = Vec::new();
    for line in vocab.split('\n') {
        let (p, sc) = line.rsplit_once('\t').unwrap_or((line, "-1"));
        pieces.push(p.to_string());
        scores.push(sc.parse::<f32>().unwrap_or(-1.0));
    }
    // Scores cover the model pieces only: follow the settings' count when it
    // is readable, so that the fuzzer gets past that check.
    if let Some(n) = serde_json::from_str::<serde_json::Value>(settings)
        .ok()
        .and_then(|v| v["model"]["vocab_size"].as_u64())
    {
        scores.truncate(n as usize);
    }
    let Ok(pieces) = embedder::tokenizer::vocab::Pieces::new(&pieces) else {
        return;
    };
    let Ok(spec) = TokenizerSpec::from_parts(
        TokenizerKind::Unigram,
        pieces,
        scores,
        vec![],
        charsmap,
        settings,
    ) else {
        return;
    };
    let Ok(p) = spec.build() else {
        return;
    };
    check_pipeline(&p, text, max_len);
}

/// The invariants of a built pipeline on any text: ids in range, within
/// `max_len`, counted right; the offsets path gives the same ids with
/// offsets on character boundaries; a bounded encoding is a prefix; pairs
/// fit; decoding does not panic.
pub fn check_pipeline(p: &Pipeline, text: &str, max_len: Option<usize>) {
    let n = p.vocab_len();
    let added = p.template.added(false);
    let ids = p.encode(text, max_len);
    if let Some(m) = max_len {
        assert!(
            ids.len() <= m.max(added),
            "{} ids for max_len {m}",
            ids.len()
        );
    }
    assert!(ids.iter().all(|&i| (i as usize) < n), "id out of range");
    assert_eq!(p.count_tokens(text, max_len), ids.len(), "count_tokens");
    let mut raw = Vec::new();
    p.encode_raw(text, &mut raw);
    // The offsets path gives the same ids, each with whole characters of the text.
    let spans = p.encode_raw_with_offsets(text);
    assert_eq!(
        spans.iter().map(|s| s.id).collect::<Vec<_>>(),
        raw,
        "offsets path ids"
    );
    for s in &spans {
        if let Some((a, b)) = s.offsets {
            assert!(
                a <= b && b <= text.len() && text.is_char_boundary(a) && text.is_char_boundary(b),
                "offsets {a}..{b} in a text of {} bytes",
                text.len()
            );
        }
    }
    let mut bounded = Vec::new();
    p.encode_raw_bounded(text, 3, &mut bounded);
    assert!(
        raw.starts_with(&bounded),
        "bounded encoding is not a prefix"
    );
    let (a, b) = text.split_at(
        text.char_indices()
            .nth(text.chars().count() / 2)
            .map_or(0, |x| x.0),
    );
    let (pair, types) = p.encode_pair(a, b, max_len);
    assert_eq!(pair.len(), types.len());
    if let Some(m) = max_len {
        assert!(pair.len() <= m.max(p.template.added(true)), "pair too long");
    }
    let _ = p.decode(&ids, true);
    let _ = p.decode(&pair, false);
}

/// A HF `tokenizer.json` (any model, normalizer, pre-tokenizer, post-processor
/// this crate reads: ModernBERT's, Qwen2's `Split` regex, Gemma's
/// `Replace`/`Split`/byte-fallback BPE, ...) through `TokenizerSpec::from_hf_json`,
/// its stored form and the pipeline. Input: a mode byte (bit 0: the
/// transformers layout; high nibble: max_len as in `fuzz_unigram_spec`), then
/// lossy UTF-8 cut at U+0001 into `tokenizer.json`, `tokenizer_config.json`
/// (empty: none) and the text. A file that reads must store and read back
/// equal, and build to a pipeline that encodes any text as the original does.
pub fn fuzz_hf_tokenizer(data: &[u8]) {
    use embedder::tokenizer::spec::Layout;
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let max_len = match mode >> 4 {
        0 => None,
        k => Some(usize::from(k) * usize::from(k) - 1),
    };
    let layout = if mode & 1 == 0 {
        Layout::AsWritten
    } else {
        Layout::AsTransformers
    };
    let s = String::from_utf8_lossy(rest);
    let mut parts = s.splitn(3, '\u{1}');
    let Ok(json) = serde_json::from_str::<serde_json::Value>(parts.next().unwrap_or("")) else {
        return;
    };
    let cfg = serde_json::from_str::<serde_json::Value>(parts.next().unwrap_or("")).ok();
    let text = parts.next().unwrap_or("hello world");
    let Ok(spec) = TokenizerSpec::from_hf_json(&json, cfg.as_ref(), layout) else {
        return;
    };
    let again = TokenizerSpec::from_parts(
        spec.kind,
        spec.pieces.clone(),
        spec.scores.clone(),
        spec.merges.clone(),
        spec.charsmap.clone(),
        &spec.settings_string(),
    )
    .expect("a spec read from tokenizer.json reads back from its stored form");
    assert_eq!(again, spec, "stored spec differs");
    let built = spec.build();
    let Ok(p) = built else {
        return;
    };
    let q = again.build().expect("the stored spec builds");
    assert_eq!(
        p.encode(text, max_len),
        q.encode(text, max_len),
        "stored spec ids"
    );
    check_pipeline(&p, text, max_len);
    // The same file as a `Tokenizer` (special ids declared or stood in for).
    if let Ok(t) = Tokenizer::from_hf_json(&json, cfg.as_ref(), layout) {
        assert_eq!(
            t.encode(text, max_len),
            p.encode(text, max_len),
            "Tokenizer ids"
        );
    }
}

/// HF's `Split` pre-tokenizer on its own. Input: a mode byte (`% 5`: the
/// behavior; bit 3: invert; bit 4: a `String` pattern, else `Regex`), then
/// lossy UTF-8 `pattern U+0001 text`. A pattern must compile or be refused;
/// the pieces must be non-empty, in order, non-overlapping, on character
/// boundaries, and (Isolated, not inverted) cover the text.
pub fn fuzz_split(data: &[u8]) {
    use embedder::tokenizer::split::{Behavior, Split};
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let behavior = [
        Behavior::Removed,
        Behavior::Isolated,
        Behavior::MergedWithPrevious,
        Behavior::MergedWithNext,
        Behavior::Contiguous,
    ][usize::from(mode % 5)];
    let invert = mode & 8 != 0;
    let regex = mode & 16 == 0;
    let s = String::from_utf8_lossy(rest);
    let (pattern, text) = s.split_once('\u{1}').unwrap_or((&*s, "a b  c\n's 12"));
    let Ok(split) = Split::new(pattern, regex, behavior, invert) else {
        return;
    };
    let mut end = 0;
    let mut covered = 0;
    split.for_each_piece(text, |r| {
        assert!(r.start < r.end, "empty piece");
        assert!(r.start >= end, "pieces overlap or go back");
        assert!(r.end <= text.len(), "piece past the text");
        assert!(
            text.is_char_boundary(r.start) && text.is_char_boundary(r.end),
            "piece not on character boundaries"
        );
        covered += r.len();
        end = r.end;
    });
    if behavior == Behavior::Isolated && !invert {
        assert_eq!(covered, text.len(), "isolated pieces do not cover the text");
    }
    let mut last = 0;
    split.for_each_match(text, |a, b| {
        assert!(
            a <= b && a >= last && b <= text.len(),
            "match {a}..{b} out of order"
        );
        assert!(text.is_char_boundary(a) && text.is_char_boundary(b));
        last = b;
    });
    let again = Split::from_json(&split.to_json(), "split").expect("to_json reads back");
    assert!(again == split, "to_json round trip");
}

/// Any bytes through the dispatcher, as `Embedder::open` / `embd_open` read a file.
pub fn fuzz_model_file(data: &[u8]) {
    for opts in OPTS {
        // Verified first; when that accepts, skipping verification changes nothing.
        if let Ok(m) = ModelFile::from_bytes(data, opts) {
            check_model(&m);
            break;
        }
    }
    // The EMBD path again with a consistent header, to reach the body.
    if let Some(fixed) = fix_embd_header(data) {
        if let Ok(m) = ModelFile::from_bytes(&fixed, OPTS[1]) {
            check_model(&m);
        }
    }
}

/// The files of a HF folder the `hf_dir` target can write.
const HF_FILES: &[&str] = &[
    "config.json",
    "tokenizer_config.json",
    "tokenizer.json",
    "vocab.txt",
    "sentence_bert_config.json",
    "modules.json",
    "1_Pooling/config.json",
    "model.safetensors",
];

/// A HF folder (config JSON, tokenizer files, modules, safetensors) through
/// [`hf::read_dir`], the converter's reader. The input is a sequence of
/// records `u8 file selector | u16 LE length | bytes`; each is written to a
/// scratch folder (under `$EMBD_FUZZ_TMP`, else the temp dir) that is emptied first.
pub fn fuzz_hf_dir(data: &[u8]) {
    let _ = hf_dir_reads(data);
}

/// [`fuzz_hf_dir`]; true when the folder was read.
pub fn hf_dir_reads(data: &[u8]) -> bool {
    static DIR: OnceLock<std::path::PathBuf> = OnceLock::new();
    let dir = DIR.get_or_init(|| {
        let base = std::env::var_os("EMBD_FUZZ_TMP")
            .map(std::path::PathBuf::from)
            .unwrap_or_else(std::env::temp_dir);
        let d = base.join(format!(
            "embd-fuzz-hf-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        std::fs::create_dir_all(d.join("1_Pooling")).expect("scratch folder");
        d
    });
    for f in HF_FILES {
        let _ = std::fs::remove_file(dir.join(f));
    }
    let mut rest = data;
    while rest.len() >= 3 {
        let sel = usize::from(rest[0]) % HF_FILES.len();
        let n = usize::from(u16::from_le_bytes([rest[1], rest[2]])).min(rest.len() - 3);
        std::fs::write(dir.join(HF_FILES[sel]), &rest[3..3 + n]).expect("scratch write");
        rest = &rest[3 + n..];
    }
    match hf::read_dir(dir, &hf::HfOptions::default()) {
        Ok(m) => {
            check_model(&m);
            true
        }
        Err(_) => false,
    }
}

/// Any bytes through the whole open path a C caller takes (`embd_open`):
/// the dispatcher, `Embedder::from_model_file` (config and tensor-shape
/// validation) and, for a model that loads, one small embedding call. Engine
/// code, so crashes here are reported to the engine owners.
pub fn fuzz_embedder(data: &[u8]) {
    let fixed = fix_embd_header(data);
    let bytes = fixed.as_deref().unwrap_or(data);
    let Ok(m) = ModelFile::from_bytes(bytes, OPTS[1]) else {
        return;
    };
    let opts = embedder::Options::new().threads(1);
    let Ok(e) = embedder::Embedder::from_model_file(m, &opts) else {
        return;
    };
    let dim = e.dim();
    let _ = e.count_tokens("hello world");
    if let Ok(v) = e.embed(&["hello world", "", "über [SEP] the cats"]) {
        assert_eq!(v.len(), 3 * dim, "embedding size");
    }
}

/// The storages every pickle of [`fuzz_torch_pt`]'s second pass can name:
/// `data/0` 16 bytes, `data/1` 4 bytes, `data/2` 64 bytes.
fn pt_storages() -> [(&'static str, Vec<u8>); 3] {
    [
        ("0", (0u8..16).collect()),
        ("1", vec![0, 0, 0x80, 0x3f]),
        ("2", (0u8..64).collect()),
    ]
}

/// `torch.save` archives (`formats::torch_pt`): the bytes as a whole file
/// (both checksum settings), then as the `data.pkl` of an archive with the
/// storages of [`pt_storages`], so that mutations reach the unpickler
/// directly. What is accepted must be consistent: data bytes = elements x
/// element size, one stride per dimension, `to_f32` one value per element,
/// names unique.
pub fn fuzz_torch_pt(data: &[u8]) {
    let _ = torch_pt::zip_entries(data);
    for opts in OPTS {
        if let Ok(ts) = torch_pt::read_state_dict_with(data, opts) {
            check_pt(&ts);
        }
    }
    let file = pt_writer::torch_zip("f", data, &pt_storages());
    if let Ok(ts) = torch_pt::read_state_dict(&file) {
        check_pt(&ts);
    }
}

fn check_pt(ts: &[torch_pt::PtTensor<'_>]) {
    let mut names = std::collections::HashSet::new();
    for t in ts {
        assert!(names.insert(t.name.as_str()), "duplicate name '{}'", t.name);
        assert_eq!(t.shape.len(), t.strides.len(), "'{}' strides", t.name);
        let numel = t
            .shape
            .iter()
            .try_fold(1usize, |a, &d| a.checked_mul(d))
            .unwrap_or_else(|| panic!("'{}' shape {:?} overflows", t.name, t.shape));
        assert_eq!(
            numel.checked_mul(t.dtype.size()),
            Some(t.data.len()),
            "'{}' ({} {:?}) has {} bytes",
            t.name,
            t.dtype,
            t.shape,
            t.data.len()
        );
        assert_eq!(t.numel(), numel);
        assert_eq!(t.to_f32().len(), numel, "'{}' to_f32", t.name);
    }
}

/// An LLM reranker's chat template (`model::pair_template`): the bytes as
/// Jinja source; whatever parses renders, and reads back from its stored
/// JSON unchanged. The stored form itself is fed too (a corrupt model file's
/// metadata).
pub fn fuzz_pair_template(data: &[u8]) {
    use embedder::model::pair_template::PairTemplate;
    let s = String::from_utf8_lossy(data);
    if let Ok(t) = PairTemplate::from_jinja(&s) {
        let (head, tail) = t.render(Some("instr"), "q");
        assert!(head.len() + tail.len() < 1 << 24);
        let back = PairTemplate::from_json(&t.to_json()).expect("a stored template reads back");
        assert_eq!(back, t, "stored template changed");
    }
    let _ = PairTemplate::from_json(&s);
}

/// The hub's answers and names (`embedder::hub`): a model-info JSON answer
/// (its commit and files, the files a conversion fetches), an `ETag`
/// header, a hub id. Whatever parses keeps the promises the downloader
/// relies on: a 40-hex commit, file names that stay inside the repo, a
/// fetch list drawn from the answer, an etag that names a file, an id that
/// prints back to itself.
pub fn fuzz_hub_answers(data: &[u8]) {
    use embedder::hub::{api, cache, HubId};
    if let Ok(info) = api::parse_repo_info(data) {
        assert_eq!(info.commit.len(), 40);
        for f in &info.files {
            cache::check_repo_file(&f.name).expect("a listed file stays inside the repo");
        }
        if let Ok(fetch) = api::files_to_fetch("o/n", &info) {
            assert!(fetch.iter().all(|f| info.files.contains(f)));
        }
    }
    let s = String::from_utf8_lossy(data);
    if let Ok(e) = api::normalize_etag(&s) {
        assert!(!e.is_empty() && !e.contains('/') && !e.contains('.'));
    }
    if let Ok(id) = HubId::parse(&s) {
        assert_eq!(HubId::parse(&id.to_string()).expect("prints back"), id);
        assert!(!id.cache_folder().contains('/'));
    }
}
