//! The SentencePiece Unigram model: Viterbi over piece log-probabilities, exactly
//! as HF `tokenizers` `Unigram::encode` (its "optimized" path) and `tokenize`.
//!
//! Exactness notes:
//! - at each character start, every piece that is a prefix of the rest of the
//!   word is a candidate ending there with score `best[start] + score`; a
//!   candidate replaces the best path at its end only if strictly better (so
//!   ties keep the earliest start, then the shortest piece);
//! - when no piece covers exactly the character at a start, an unknown node
//!   (`unk_id`, score `min score - 10`) covers it;
//! - on the best path, consecutive nodes with id `unk_id` are fused into one
//!   string (HF always fuses for Unigram), which is then looked up as a piece;
//!   if it is none, with `byte_fallback` every byte becomes its `<0xXX>` piece
//!   (if all exist), else the whole string is `unk_id`;
//! - duplicate pieces: the last id wins (HF's string -> id map);
//! - scores are summed in f64 (stored as f32: sentencepiece's own precision).
//!
//! The piece trie is a compressed (radix) trie built once from the sorted
//! pieces, breadth first, so that the children of a node are contiguous: flat
//! arrays (13 bytes a node, fewer than two nodes a piece, plus the edge label
//! bytes) and a 256-entry root table; no allocation per character or per word
//! (the Viterbi buffers are the caller's scratch).

use std::sync::Arc;

use super::vocab::Pieces;
use crate::error::{Error, Result};

const NONE: u32 = u32::MAX;

/// A compressed (radix) byte trie over the pieces: a chain of single-child
/// nodes without a piece is one edge labelled with a byte string.
///
/// Nodes are numbered breadth first, so the children of a node are
/// contiguous; per node: its first child, the first byte of the edge into it,
/// where the rest of that edge's label starts in `tail` (the labels are
/// stored in node order, so node `n`'s is `tail[tail_at[n]..tail_at[n + 1]]`)
/// and the piece ending there. 13 bytes a node plus the label bytes; a node
/// either ends a piece or branches, so there are fewer than twice as many
/// nodes as pieces.
#[derive(Debug, Clone, Default)]
pub(crate) struct Trie {
    /// Child of the root for each first byte (0: none).
    root: Box<[u32]>,
    /// Children of node `n` are `first_child[n]..first_child[n + 1]`.
    first_child: Box<[u32]>,
    /// First byte of the edge into node `n` (sorted among siblings).
    first: Box<[u8]>,
    /// The rest of the edge into node `n` is `tail[tail_at[n]..tail_at[n + 1]]`.
    tail_at: Box<[u32]>,
    tail: Box<[u8]>,
    /// Piece id ending at node `n`, or `NONE`.
    values: Box<[u32]>,
}

impl Trie {
    /// Builds the trie of the `n` strings `key(0..n)` (the last id wins for
    /// equal strings).
    ///
    /// Cache-friendly: the strings are sorted by an 8-byte big-endian prefix
    /// (full comparison only on ties), copied once into one buffer in sorted
    /// order, and the breadth-first pass reads that buffer: the keys under a
    /// node are a range of it, and the edge into a child runs to the longest
    /// common prefix of the first and last key of its range.
    pub(crate) fn build<'a>(n: usize, key: impl Fn(usize) -> &'a [u8]) -> Trie {
        let prefix = |s: &[u8]| {
            let mut k = [0u8; 8];
            let m = s.len().min(8);
            k[..m].copy_from_slice(&s[..m]);
            u64::from_be_bytes(k)
        };
        let mut order: Vec<(u64, u32)> = (0..n).map(|i| (prefix(key(i)), i as u32)).collect();
        let full = |i: u32| key(i as usize);
        order.sort_unstable_by(|a, b| {
            a.0.cmp(&b.0)
                .then_with(|| full(a.1).cmp(full(b.1)))
                .then(a.1.cmp(&b.1))
        });
        // Sorted copy, equal strings deduplicated (keeping the last id).
        let total: usize = (0..n).map(|i| key(i).len()).sum();
        let mut blob: Vec<u8> = Vec::with_capacity(total);
        let mut offs: Vec<u32> = Vec::with_capacity(n + 1);
        offs.push(0);
        let mut ids: Vec<u32> = Vec::with_capacity(n);
        for r in 0..order.len() {
            let id = order[r].1;
            if r + 1 < order.len()
                && order[r + 1].0 == order[r].0
                && full(order[r + 1].1) == full(id)
            {
                continue;
            }
            blob.extend_from_slice(full(id));
            offs.push(blob.len() as u32);
            ids.push(id);
        }
        drop(order);
        let key = |k: u32| &blob[offs[k as usize] as usize..offs[k as usize + 1] as usize];
        let lcp = |a: &[u8], b: &[u8]| a.iter().zip(b).take_while(|(x, y)| x == y).count();

        // At most 2 nodes a key (one ending it, one branching above it).
        let cap = 2 * ids.len() + 1;
        let mut first = Vec::with_capacity(cap);
        let mut values = Vec::with_capacity(cap);
        let mut tail_at = Vec::with_capacity(cap + 1);
        let mut tail: Vec<u8> = Vec::new();
        let mut first_child = Vec::with_capacity(cap + 1);
        // ranges[n] = (lo, hi, depth): the sorted keys under node n, which all
        // start with the node's string of `depth` bytes.
        let mut ranges: Vec<(u32, u32, u32)> = Vec::with_capacity(cap);
        ranges.push((0, ids.len() as u32, 0));
        first.push(0u8);
        values.push(NONE);
        // The root's (empty) edge: node n's runs from tail_at[n] to tail_at[n + 1].
        tail_at.extend([0u32, 0]);
        let mut node = 0;
        while node < ranges.len() {
            let (mut lo, hi, depth) = ranges[node];
            first_child.push(first.len() as u32);
            let d = depth as usize;
            if lo < hi && key(lo).len() == d {
                values[node] = ids[lo as usize];
                lo += 1;
            }
            let mut i = lo;
            while i < hi {
                let b = key(i)[d];
                let mut j = i + 1;
                while j < hi && key(j)[d] == b {
                    j += 1;
                }
                // Sorted: the keys of i..j share their common prefix with the
                // first and the last; it ends at the shortest (the first) at most.
                let end = if j - i == 1 {
                    key(i).len()
                } else {
                    lcp(key(i), key(j - 1))
                };
                first.push(b);
                values.push(NONE);
                tail.extend_from_slice(&key(i)[d + 1..end]);
                tail_at.push(tail.len() as u32);
                ranges.push((i, j, end as u32));
                i = j;
            }
            node += 1;
        }
        first_child.push(first.len() as u32);
        let mut root = vec![0u32; 256];
        for c in first_child[0]..first_child[1] {
            root[first[c as usize] as usize] = c;
        }
        Trie {
            root: root.into(),
            first_child: first_child.into(),
            first: first.into(),
            tail_at: tail_at.into(),
            tail: tail.into(),
            values: values.into(),
        }
    }

    #[inline]
    fn child(&self, node: u32, b: u8) -> u32 {
        let lo = self.first_child[node as usize] as usize;
        let hi = self.first_child[node as usize + 1] as usize;
        let firsts = &self.first[lo..hi];
        if firsts.len() <= 8 {
            for (k, &l) in firsts.iter().enumerate() {
                if l == b {
                    return (lo + k) as u32;
                }
                if l > b {
                    return 0;
                }
            }
            0
        } else {
            match firsts.binary_search(&b) {
                Ok(k) => (lo + k) as u32,
                Err(_) => 0,
            }
        }
    }

    /// The rest of the edge into `node`.
    #[inline]
    fn tail(&self, node: u32) -> &[u8] {
        let n = node as usize;
        &self.tail[self.tail_at[n] as usize..self.tail_at[n + 1] as usize]
    }

    /// The id of the piece equal to `s`.
    pub(crate) fn get(&self, s: &[u8]) -> Option<u32> {
        let mut v = None;
        self.prefixes(s, |len, id| {
            if len == s.len() {
                v = Some(id);
            }
        });
        v
    }

    /// Calls `f(len, id)` for every piece that is a prefix of `s`, shortest first.
    #[inline]
    fn prefixes(&self, s: &[u8], mut f: impl FnMut(usize, u32)) {
        let Some(&b0) = s.first() else { return };
        let mut node = self.root[b0 as usize];
        let mut d = 1;
        while node != 0 {
            let t = self.tail(node);
            if !t.is_empty() {
                // A plain loop: edges are short, a `memcmp` call costs more.
                match s.get(d..d + t.len()) {
                    Some(x) if x.iter().zip(t).all(|(a, b)| a == b) => d += t.len(),
                    _ => return,
                }
            }
            let v = self.values[node as usize];
            if v != NONE {
                f(d, v);
            }
            if d >= s.len() {
                return;
            }
            node = self.child(node, s[d]);
            d += 1;
        }
    }

    pub(crate) fn heap_bytes(&self) -> usize {
        self.root.len() * 4
            + self.first_child.len() * 4
            + self.first.len()
            + self.tail_at.len() * 4
            + self.tail.len()
            + self.values.len() * 4
    }

    pub(crate) fn nodes(&self) -> usize {
        self.first.len()
    }
}

/// Unigram scores (one `f32` log-probability a piece): owned, or borrowed from
/// bytes someone else keeps alive (a model file's mapped `tokenizer.scores`
/// tensor), so that opening a model does not copy them. Clones share them.
#[derive(Clone)]
pub struct Scores(ScoresRepr);

#[derive(Clone)]
enum ScoresRepr {
    Owned(Arc<[f32]>),
    Borrowed {
        owner: Arc<dyn AsRef<[u8]> + Send + Sync>,
        start: usize,
        len: usize,
    },
}

impl Scores {
    /// The `len` little-endian `f32`s at byte `start` of `owner`'s bytes,
    /// without a copy when they are 4-byte aligned on a little-endian machine;
    /// copied otherwise. `None` if they are not all inside the bytes.
    pub fn borrow(
        owner: Arc<dyn AsRef<[u8]> + Send + Sync>,
        start: usize,
        len: usize,
    ) -> Option<Scores> {
        let bytes = (*owner)
            .as_ref()
            .get(start..start.checked_add(len.checked_mul(4)?)?)?;
        if cfg!(target_endian = "little") && bytes.as_ptr().cast::<f32>().is_aligned() {
            return Some(Scores(ScoresRepr::Borrowed { owner, start, len }));
        }
        let v: Vec<f32> = bytes
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        Some(Scores::from(v))
    }

    /// The scores.
    #[inline]
    pub fn as_slice(&self) -> &[f32] {
        match &self.0 {
            ScoresRepr::Owned(v) => v,
            ScoresRepr::Borrowed { owner, start, len } => {
                let bytes = &(**owner).as_ref()[*start..*start + 4 * *len];
                // SAFETY: `borrow` checked that these `4 * len` bytes are inside
                // the owner's (immutable) bytes, 4-byte aligned, and that the
                // machine is little-endian like the stored values; every bit
                // pattern is a valid `f32`; `owner` keeps them alive as long as
                // `self`.
                unsafe { std::slice::from_raw_parts(bytes.as_ptr().cast::<f32>(), *len) }
            }
        }
    }

    /// Heap bytes these scores hold themselves (0 when borrowed).
    pub fn heap_bytes(&self) -> usize {
        match &self.0 {
            ScoresRepr::Owned(v) => v.len() * 4,
            ScoresRepr::Borrowed { .. } => 0,
        }
    }

    /// True if the scores are borrowed, not copied.
    pub fn is_borrowed(&self) -> bool {
        matches!(self.0, ScoresRepr::Borrowed { .. })
    }
}

impl std::ops::Deref for Scores {
    type Target = [f32];
    #[inline]
    fn deref(&self) -> &[f32] {
        self.as_slice()
    }
}

impl From<Vec<f32>> for Scores {
    fn from(v: Vec<f32>) -> Scores {
        Scores(ScoresRepr::Owned(v.into()))
    }
}

impl Default for Scores {
    fn default() -> Scores {
        Scores::from(Vec::new())
    }
}

impl PartialEq for Scores {
    fn eq(&self, other: &Scores) -> bool {
        self.as_slice() == other.as_slice()
    }
}

impl std::fmt::Debug for Scores {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scores")
            .field("len", &self.len())
            .field("borrowed", &self.is_borrowed())
            .finish()
    }
}

/// Reusable Viterbi buffers.
#[derive(Debug, Default)]
pub struct UnigramScratch {
    best: Vec<Best>,
    path: Vec<(u32, u32, u32)>,
}

impl UnigramScratch {
    pub(crate) fn trim(&mut self, keep: usize) {
        if self.best.capacity() > keep {
            self.best = Vec::new();
        }
        if self.path.capacity() > keep {
            self.path = Vec::new();
        }
    }
}

#[derive(Debug, Clone, Copy)]
struct Best {
    score: f64,
    start: u32,
    id: u32,
}

/// A Unigram model.
#[derive(Debug, Clone)]
pub struct Unigram {
    trie: Trie,
    scores: Scores,
    unk_id: u32,
    unk_score: f64,
    /// `<0xXX>` piece ids (`NONE` where absent), with `byte_fallback`.
    byte_ids: Option<Box<[u32; 256]>>,
}

/// Byte length of the UTF-8 character starting with `b`.
#[inline]
fn utf8_len(b: u8) -> usize {
    match b {
        0..=0x7F => 1,
        0xC0..=0xDF => 2,
        0xE0..=0xEF => 3,
        _ => 4,
    }
}

impl Unigram {
    /// Builds the model over `pieces` (the model's pieces: ids `0..pieces.len()`)
    /// and their `scores`.
    ///
    /// # Errors
    /// [`crate::ErrorKind::Model`] if the lengths differ, the vocabulary is
    /// empty, `unk_id` is out of range or a score is not finite.
    pub fn new<S: AsRef<str>>(
        pieces: &[S],
        scores: &[f32],
        unk_id: u32,
        byte_fallback: bool,
    ) -> Result<Unigram> {
        Unigram::build(
            pieces.len(),
            |i| pieces[i].as_ref().as_bytes(),
            Scores::from(scores.to_vec()),
            unk_id,
            byte_fallback,
        )
    }

    /// As [`Unigram::new`], over the first `n` of `pieces` (the model's pieces;
    /// added tokens may follow them), keeping `scores` as they are (shared or
    /// borrowed, not copied).
    ///
    /// # Errors
    /// As [`Unigram::new`]; also if `n` is past the pieces.
    pub fn from_pieces(
        pieces: &Pieces,
        n: usize,
        scores: Scores,
        unk_id: u32,
        byte_fallback: bool,
    ) -> Result<Unigram> {
        if n > pieces.len() {
            return Err(Error::model(format!(
                "unigram: {n} model pieces but only {} tokens",
                pieces.len()
            )));
        }
        Unigram::build(n, |i| pieces.bytes(i), scores, unk_id, byte_fallback)
    }

    fn build<'a>(
        n: usize,
        key: impl Fn(usize) -> &'a [u8],
        scores: Scores,
        unk_id: u32,
        byte_fallback: bool,
    ) -> Result<Unigram> {
        if n != scores.len() {
            return Err(Error::model(format!(
                "unigram: {n} pieces but {} scores",
                scores.len()
            )));
        }
        if n == 0 {
            return Err(Error::model("unigram: the vocabulary is empty"));
        }
        if unk_id as usize >= n {
            return Err(Error::model(format!(
                "model.unk_id: {unk_id} is outside the {n} pieces"
            )));
        }
        let mut min = f64::INFINITY;
        for (i, &s) in scores.iter().enumerate() {
            if !s.is_finite() {
                return Err(Error::model(format!("unigram: score of piece {i} is {s}")));
            }
            min = min.min(s as f64);
        }
        let trie = Trie::build(n, key);
        let byte_ids = byte_fallback.then(|| {
            let mut t = Box::new([NONE; 256]);
            for (b, slot) in t.iter_mut().enumerate() {
                *slot = trie.get(format!("<0x{b:02X}>").as_bytes()).unwrap_or(NONE);
            }
            t
        });
        Ok(Unigram {
            trie,
            scores,
            unk_id,
            unk_score: min - 10.0,
            byte_ids,
        })
    }

    /// The unknown id.
    pub fn unk_id(&self) -> u32 {
        self.unk_id
    }

    /// Number of pieces.
    pub fn len(&self) -> usize {
        self.scores.len()
    }

    /// Never true (the model has at least one piece).
    pub fn is_empty(&self) -> bool {
        self.scores.is_empty()
    }

    /// Bytes held beyond the pieces themselves (trie, scores, byte table).
    pub fn heap_bytes(&self) -> usize {
        self.trie.heap_bytes()
            + self.scores.heap_bytes()
            + self.byte_ids.as_ref().map_or(0, |_| 1024)
    }

    /// Trie nodes (for reports).
    pub fn trie_nodes(&self) -> usize {
        self.trie.nodes()
    }

    /// Appends the ids of `word` to `out`.
    pub fn tokenize_word(&self, word: &str, out: &mut Vec<u32>, scratch: &mut UnigramScratch) {
        let s = word.as_bytes();
        if s.is_empty() {
            return;
        }
        self.viterbi(s, scratch);
        let path = &scratch.path;
        // `path` runs backwards; fuse runs of unk ids.
        let mut k = path.len();
        while k > 0 {
            k -= 1;
            let (start, mut stop, id) = path[k];
            if id != self.unk_id {
                out.push(id);
                continue;
            }
            while k > 0 && path[k - 1].2 == self.unk_id {
                k -= 1;
                stop = path[k].1;
            }
            let piece = &s[start as usize..stop as usize];
            self.push_unknown(piece, out);
        }
    }

    /// As [`Unigram::tokenize_word`], each id with the bytes `[start, end)` of
    /// `word` it stands for, as HF's `Unigram::tokenize` gives them: a fused
    /// unknown covers its whole string, and so does each of its byte-fallback
    /// pieces.
    pub fn tokenize_word_spans(
        &self,
        word: &str,
        out: &mut Vec<(u32, usize, usize)>,
        scratch: &mut UnigramScratch,
    ) {
        let s = word.as_bytes();
        if s.is_empty() {
            return;
        }
        self.viterbi(s, scratch);
        let path = &scratch.path;
        let mut ids = Vec::new();
        let mut k = path.len();
        while k > 0 {
            k -= 1;
            let (start, mut stop, id) = path[k];
            if id != self.unk_id {
                out.push((id, start as usize, stop as usize));
                continue;
            }
            while k > 0 && path[k - 1].2 == self.unk_id {
                k -= 1;
                stop = path[k].1;
            }
            ids.clear();
            self.push_unknown(&s[start as usize..stop as usize], &mut ids);
            out.extend(ids.iter().map(|&id| (id, start as usize, stop as usize)));
        }
    }

    /// The best segmentation of `s` (not empty) into `scratch.path`, last
    /// piece first: `(start, stop, id)`.
    #[inline]
    fn viterbi(&self, s: &[u8], scratch: &mut UnigramScratch) {
        let n = s.len();
        let scores = self.scores.as_slice();
        let best = &mut scratch.best;
        best.clear();
        best.resize(
            n + 1,
            Best {
                score: 0.0,
                start: NONE,
                id: 0,
            },
        );
        let mut i = 0;
        while i < n {
            let base = best[i].score;
            let mblen = utf8_len(s[i]).min(n - i);
            let mut single = false;
            self.trie.prefixes(&s[i..], |len, id| {
                let cand = base + scores[id as usize] as f64;
                let t = &mut best[i + len];
                if t.start == NONE || cand > t.score {
                    *t = Best {
                        score: cand,
                        start: i as u32,
                        id,
                    };
                }
                if len == mblen {
                    single = true;
                }
            });
            if !single {
                let cand = base + self.unk_score;
                let t = &mut best[i + mblen];
                if t.start == NONE || cand > t.score {
                    *t = Best {
                        score: cand,
                        start: i as u32,
                        id: self.unk_id,
                    };
                }
            }
            i += mblen;
        }
        let path = &mut scratch.path;
        path.clear();
        let mut end = n;
        while end > 0 {
            let b = best[end];
            let start = if b.start == NONE { 0 } else { b.start as usize };
            path.push((start as u32, end as u32, b.id));
            end = start;
        }
    }

    #[inline]
    fn push_unknown(&self, piece: &[u8], out: &mut Vec<u32>) {
        if let Some(id) = self.trie.get(piece) {
            out.push(id);
            return;
        }
        if let Some(bytes) = &self.byte_ids {
            if piece.iter().all(|&b| bytes[b as usize] != NONE) {
                out.extend(piece.iter().map(|&b| bytes[b as usize]));
                return;
            }
        }
        out.push(self.unk_id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn model(pieces: &[(&str, f32)], unk: u32, fallback: bool) -> Unigram {
        let p: Vec<&str> = pieces.iter().map(|x| x.0).collect();
        let s: Vec<f32> = pieces.iter().map(|x| x.1).collect();
        Unigram::new(&p, &s, unk, fallback).unwrap()
    }

    fn ids(m: &Unigram, w: &str) -> Vec<u32> {
        let mut out = Vec::new();
        m.tokenize_word(w, &mut out, &mut UnigramScratch::default());
        out
    }

    #[test]
    fn viterbi_picks_the_best_sum() {
        // "abc": a+b+c = -3, ab+c = -2.5, a+bc = -2.2 (best), abc absent.
        let m = model(
            &[
                ("<unk>", 0.0),
                ("a", -1.0),
                ("b", -1.0),
                ("c", -1.0),
                ("ab", -1.5),
                ("bc", -1.2),
            ],
            0,
            false,
        );
        assert_eq!(ids(&m, "abc"), [1, 5]);
        assert_eq!(ids(&m, "ab"), [4]);
        assert_eq!(ids(&m, ""), Vec::<u32>::new());
    }

    #[test]
    fn ties_keep_the_first_candidate() {
        // "ab" = a+b = -2 = ab. Candidates for the end: "ab" from start 0 is
        // seen first, "b" from start 1 (equal, not better) does not replace it.
        let m = model(
            &[("<unk>", 0.0), ("a", -1.0), ("b", -1.0), ("ab", -2.0)],
            0,
            false,
        );
        assert_eq!(ids(&m, "ab"), [3]);
    }

    #[test]
    fn unknowns_fuse_and_score_min_minus_ten() {
        // min score -4, unk -14. "xay": x and y unknown.
        let m = model(&[("<unk>", 0.0), ("a", -4.0)], 0, false);
        assert_eq!(ids(&m, "xay"), [0, 1, 0]);
        // Consecutive unknowns become one unk.
        assert_eq!(ids(&m, "xyz"), [0]);
        assert_eq!(ids(&m, "é☃a"), [0, 1]);
        // min -17, unk -27: "xa" (-17) beats unk + a (-31).
        let m2 = model(&[("<unk>", 0.0), ("a", -4.0), ("xa", -17.0)], 0, false);
        assert_eq!(ids(&m2, "xa"), [2]);
        // With positive scores an unknown can win over a piece: "a" = 20,
        // "xa" = -1, min -1, unk -11: unk + a = 9 > -1.
        let m3 = model(&[("<unk>", 0.0), ("a", 20.0), ("xa", -1.0)], 0, false);
        assert_eq!(ids(&m3, "xa"), [0, 1]);
    }

    #[test]
    fn byte_fallback_pieces() {
        let m = model(
            &[
                ("<unk>", 0.0),
                ("a", -1.0),
                ("<0xC3>", -5.0),
                ("<0xA9>", -5.0),
                ("<0x78>", -5.0),
            ],
            0,
            true,
        );
        // "é" = C3 A9: both byte pieces exist.
        assert_eq!(ids(&m, "aé"), [1, 2, 3]);
        // "éx" fused as one unknown: C3 A9 78.
        assert_eq!(ids(&m, "éx"), [2, 3, 4]);
        // "ü" = C3 BC: BC missing, so the whole unknown is unk.
        assert_eq!(ids(&m, "üa"), [0, 1]);
        // Without byte_fallback the same model gives unk.
        let m = model(
            &[
                ("<unk>", 0.0),
                ("a", -1.0),
                ("<0xC3>", -5.0),
                ("<0xA9>", -5.0),
            ],
            0,
            false,
        );
        assert_eq!(ids(&m, "aé"), [1, 0]);
    }

    #[test]
    fn duplicates_take_the_last_id_and_trie_lookups() {
        let m = model(
            &[("<unk>", 0.0), ("ab", -1.0), ("a", -3.0), ("ab", -1.0)],
            0,
            false,
        );
        assert_eq!(ids(&m, "ab"), [3]);
        assert_eq!(m.trie.get(b"a"), Some(2));
        assert_eq!(m.trie.get(b"abc"), None);
        assert_eq!(m.trie.get(b""), None);
        // Many siblings: binary search path.
        let many: Vec<String> = (0..200u8)
            .map(|i| format!("z{}", char::from(b'0' + i % 75)))
            .collect();
        let t = Trie::build(many.len(), |i| many[i].as_bytes());
        assert_eq!(
            t.get("z5".as_bytes()),
            Some(many.iter().rposition(|p| p == "z5").unwrap() as u32)
        );
    }

    #[test]
    fn scores_borrowed_or_copied_read_the_same() {
        let vals = [1.5f32, -2.25, 3.0];
        let mut bytes = vec![0u8; 3];
        for v in vals {
            bytes.extend_from_slice(&v.to_le_bytes());
        }
        bytes.extend_from_slice(&[0; 3]);
        let owner: Arc<dyn AsRef<[u8]> + Send + Sync> = Arc::new(bytes);
        // One of the starts 0..4 of the values' copy is 4-byte aligned.
        let mut kinds = Vec::new();
        for pad in 0..4 {
            let mut b = vec![0u8; pad];
            for v in vals {
                b.extend_from_slice(&v.to_le_bytes());
            }
            let o: Arc<dyn AsRef<[u8]> + Send + Sync> = Arc::new(b);
            let s = Scores::borrow(o, pad, 3).unwrap();
            assert_eq!(s.as_slice(), vals);
            kinds.push(s.is_borrowed());
        }
        assert!(kinds.contains(&true) || cfg!(target_endian = "big"));
        assert!(Scores::borrow(owner.clone(), 3, 3).is_some());
        assert!(Scores::borrow(owner.clone(), 4, 3).is_some());
        assert!(Scores::borrow(owner.clone(), 7, 3).is_none());
        assert!(Scores::borrow(owner, usize::MAX, 2).is_none());
    }

    #[test]
    fn bad_models_are_refused() {
        assert!(Unigram::new::<&str>(&[], &[], 0, false).is_err());
        assert!(Unigram::new(&["a"], &[0.0, 1.0], 0, false).is_err());
        assert!(Unigram::new(&["a"], &[0.0], 1, false)
            .unwrap_err()
            .message()
            .contains("model.unk_id"));
        assert!(Unigram::new(&["a"], &[f32::NAN], 0, false).is_err());
    }
}
