//! A real-size XLM-R vocabulary (250,002 pieces, synthetic) stored in an EMBD
//! file: what its tokenizer costs to open and to hold.
//!
//! The file is `families/xlmr-tiny` (its char map, settings and added tokens)
//! with the pieces and scores replaced by 250,002 generated ones that look like
//! XLM-R's: mixed scripts, about half with the `▁` prefix, 1 to 16 characters.
//!
//! - [`open_250k_report`] (ignored; `bench/tokenizer_open.sh` runs it alone in
//!   release) prints the best-of-N time of [`embedder::model::tokenizer::open`]
//!   on the file (in the page cache) and the heap it holds, counted by this
//!   binary's allocator (live bytes after the open minus before).
//! - [`open_250k_holds_little_beyond_its_pieces`] bounds the heap the opened
//!   tokenizer reports ([`embedder::tokenizer::Tokenizer::heap_bytes`]).

use std::alloc::{GlobalAlloc, Layout, System};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use embedder::formats::embd::{write_file, WriteOptions};
use embedder::formats::{ModelFile, TensorEntry};
use embedder::import::hf::HfOptions;
use embedder::model::tokenizer::{self, SCORES, SETTINGS_KEY};
use embedder::{SpecialIds, Vocab};

use crate::common::{shared_dir, TempDir};

/// The system allocator, counting the bytes live.
pub struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call forwards to `System` with the same arguments; the counter
// is only arithmetic on the sizes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        LIVE.fetch_add(l.size(), Ordering::Relaxed);
        // SAFETY: the caller's contract is `System`'s.
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        LIVE.fetch_sub(l.size(), Ordering::Relaxed);
        // SAFETY: as above.
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        LIVE.fetch_add(l.size(), Ordering::Relaxed);
        // SAFETY: as above.
        unsafe { System.alloc_zeroed(l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        LIVE.fetch_add(new, Ordering::Relaxed);
        LIVE.fetch_sub(l.size(), Ordering::Relaxed);
        // SAFETY: as above.
        unsafe { System.realloc(p, l, new) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

/// Number of pieces (XLM-R's).
const PIECES: usize = 250_002;

/// 250,002 pieces: XLM-R's four specials, 249,997 distinct generated pieces,
/// `<mask>` last; and their scores (specials 0, others from -2 down to about
/// -17, roughly sorted as SentencePiece stores them).
fn synthetic_pieces() -> (Vec<String>, Vec<f32>) {
    // (first code point, how many) of each script's letters.
    const SCRIPTS: [(u32, u32); 10] = [
        (0x61, 26),     // Latin
        (0xE0, 30),     // Latin-1 letters (à..ÿ)
        (0x430, 32),    // Cyrillic
        (0x3B1, 25),    // Greek
        (0x627, 26),    // Arabic
        (0x915, 37),    // Devanagari
        (0xE01, 46),    // Thai
        (0x4E00, 3000), // CJK
        (0xAC00, 2000), // Hangul
        (0x5D0, 27),    // Hebrew
    ];
    let mut x = 0x2545_F491_4F6C_DD1Du64;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut seen = std::collections::HashSet::new();
    let mut pieces: Vec<String> = ["<s>", "<pad>", "</s>", "<unk>"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    while pieces.len() < PIECES - 1 {
        // Latin and CJK are the most frequent scripts of the vocabulary.
        let r = next() as usize % 16;
        let (base, count) = SCRIPTS[if r < 6 {
            0
        } else if r < 8 {
            7
        } else {
            r - 6
        }];
        // 1 to 16 characters, short ones most often (CJK: 1 to 4).
        let max = if base >= 0x4E00 { 4 } else { 16 };
        let len = 1 + (next() as usize % max).min(next() as usize % max);
        let mut s = String::new();
        if next() % 2 == 0 {
            s.push('▁');
        }
        for _ in 0..len {
            let c = char::from_u32(base + (next() % u64::from(count)) as u32).unwrap_or('x');
            s.push(c);
        }
        if seen.insert(s.clone()) {
            pieces.push(s);
        }
    }
    pieces.push("<mask>".into());
    let n = pieces.len();
    let mut scores: Vec<f32> = (0..n)
        .map(|i| -2.0 - 15.0 * (i as f32 / n as f32) - (next() % 1000) as f32 / 10_000.0)
        .collect();
    for s in [0, 1, 2, 3, n - 1] {
        scores[s] = 0.0;
    }
    (pieces, scores)
}

/// Writes the synthetic 250,002-piece model file into `dir`; returns its path
/// and the bytes of its piece strings.
fn write_250k_file(dir: &Path) -> (PathBuf, usize) {
    let src = shared_dir().join("reference/families/xlmr-tiny");
    let mut file =
        ModelFile::open_hf_dir(&src, &HfOptions::default()).expect("xlmr-tiny reads as a model");
    let (pieces, scores) = synthetic_pieces();
    let n = pieces.len();
    let piece_bytes = pieces.iter().map(String::len).sum();
    let mut settings: serde_json::Value =
        serde_json::from_str(&file.metadata[SETTINGS_KEY]).expect("settings are JSON");
    settings["model"]["vocab_size"] = n.into();
    for t in settings["added_tokens"]
        .as_array_mut()
        .expect("added tokens")
    {
        let content = t["content"].as_str().expect("content").to_string();
        let id = pieces
            .iter()
            .position(|p| *p == content)
            .expect("special piece");
        t["id"] = id.into();
    }
    file.metadata
        .insert(SETTINGS_KEY.into(), settings.to_string());
    file.metadata.insert("vocab_size".into(), n.to_string());
    let specials = SpecialIds {
        pad: 1,
        unk: 3,
        cls: 0,
        sep: 2,
        mask: (n - 1) as u32,
    };
    file.vocab = Some(Vocab::new(pieces, specials).expect("vocabulary"));
    let scores = TensorEntry::owned_f32(SCORES, vec![n], &scores);
    let tensors: Vec<TensorEntry> = file
        .tensors
        .iter()
        .map(|t| {
            if t.name == SCORES {
                scores.clone()
            } else {
                t.clone()
            }
        })
        .collect();
    let file = ModelFile::new(
        file.format,
        file.backing().clone(),
        file.metadata.clone(),
        file.vocab.clone(),
        tensors,
    )
    .expect("model file");
    let path = dir.join("xlmr-250k.weights");
    write_file(&file, &path, &WriteOptions::default(), &mut |_, _| {}).expect("file writes");
    (path, piece_bytes)
}

/// Open time (best of N, page cache warm) and heap of the 250,002-piece
/// tokenizer. Run alone, in release:
/// `cargo test --release --test it vocab_250k::open_250k_report -- --ignored --nocapture --test-threads=1`
/// (`bench/tokenizer_open.sh`). `EMBD_OPEN_ROUNDS` sets N (default 20).
#[test]
#[ignore = "timing report; run by hand in release (bench/tokenizer_open.sh)"]
fn open_250k_report() {
    let dir = TempDir::new("vocab-250k");
    let (path, piece_bytes) = write_250k_file(dir.path());
    let rounds: usize = std::env::var("EMBD_OPEN_ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20);
    let file_bytes = std::fs::metadata(&path).expect("file").len();
    // Warm the page cache.
    drop(tokenizer::open(&path).expect("tokenizer opens"));
    let mut times = Vec::new();
    let mut held = 0;
    let mut kept = None;
    for _ in 0..rounds {
        drop(kept.take());
        let before = LIVE.load(Ordering::Relaxed);
        let t0 = Instant::now();
        let tok = tokenizer::open(&path).expect("tokenizer opens");
        times.push(t0.elapsed().as_secs_f64() * 1e3);
        held = LIVE.load(Ordering::Relaxed) - before;
        kept = Some(tok);
    }
    times.sort_by(f64::total_cmp);
    let tok = kept.expect("opened");
    let mut ids = Vec::new();
    tok.encode_raw("Hello world, привет мир, 你好世界", &mut ids);
    assert!(!ids.is_empty());
    let pieces_min = piece_bytes + 4 * (PIECES + 1);
    eprintln!(
        "250,002 pieces ({piece_bytes} bytes of text; file {:.1} MB): open best {:.1} ms, \
         median {:.1} ms (of {rounds})",
        file_bytes as f64 / 1e6,
        times[0],
        times[times.len() / 2]
    );
    eprintln!(
        "heap held (counted by the allocator): {held} bytes = pieces with offsets \
         {pieces_min} + {} beyond them ({:.1} bytes a piece); heap_bytes() says {}",
        held as i64 - pieces_min as i64,
        (held as f64 - pieces_min as f64) / PIECES as f64,
        tok.heap_bytes()
    );
}

/// The opened tokenizer holds its pieces once (text + a u32 offset each) and
/// a bounded amount per piece beyond them: 20 bytes a piece (the trie; the
/// scores stay in the mapped file) plus 1 MB (char map, tables). A second
/// copy of the pieces (4 MB) or of the scores (1 MB) breaks it.
#[test]
fn open_250k_holds_little_beyond_its_pieces() {
    let dir = TempDir::new("vocab-250k-heap");
    let (path, piece_bytes) = write_250k_file(dir.path());
    let tok = tokenizer::open(&path).expect("tokenizer opens");
    let mut ids = Vec::new();
    tok.encode_raw("▁a <mask> 的一是", &mut ids);
    assert!(ids.contains(&(PIECES as u32 - 1)), "{ids:?}");
    let held = tok.heap_bytes();
    let bound = piece_bytes + 4 * (PIECES + 1) + 20 * PIECES + (1 << 20);
    assert!(
        held <= bound,
        "the 250,002-piece tokenizer holds {held} bytes of heap, over {bound} \
         ({piece_bytes} bytes of piece text)"
    );
}
