//! HF `tokenizers`' `BPE` model: a word becomes its characters' tokens, then the
//! merges are applied by rank exactly as `BPE::merge_word` / `Word::merge_all` do
//! (a min-heap of `(rank, position)`; an entry whose pair has changed since it
//! was queued is applied only if the pair now there merges into the same
//! token). Also the readers of the BPE parts of `tokenizer.json` and of the
//! slow-tokenizer files `vocab.json` + `merges.txt`.
//!
//! Words are cached (up to about [`CACHE_WORDS`] words shorter than 256 bytes,
//! as HF), in shards behind their own locks so that threads rarely meet.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::hash::{BuildHasher, Hasher};
use std::sync::Mutex;

use serde_json::Value;

use super::vocab::{Pieces, TokenTable};
use crate::error::{Error, Result};

/// Words this long or longer (in bytes) are not cached (HF's `MAX_LENGTH`).
const CACHE_MAX_WORD: usize = 256;
/// Words cached at most, over all shards (HF: 10,000).
pub const CACHE_WORDS: usize = 10_240;
/// Number of cache shards (a power of two).
const SHARDS: usize = 32;

/// The options of HF's `BPE` model (dropout is refused when parsing).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BpeOptions {
    /// The token for a character that is not in the vocabulary (else such a
    /// character is dropped, as HF does).
    pub unk_token: Option<String>,
    /// Put in front of every character but a word's first before the lookup.
    pub continuing_subword_prefix: String,
    /// Put after a word's last character before the lookup.
    pub end_of_word_suffix: String,
    /// Consecutive unknown characters become one `unk_token`.
    pub fuse_unk: bool,
    /// An unknown character becomes its bytes' `<0xXX>` tokens when all exist.
    pub byte_fallback: bool,
    /// A word that is a token is that token, merges or not.
    pub ignore_merges: bool,
}

/// The BPE parts of a tokenizer file: tokens by id (`""` for an id no token
/// has), merges by rank as token ids, and the model's options.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BpeParts {
    /// Tokens by id (`""`: no token has the id).
    pub pieces: Vec<String>,
    /// Merges by rank: the ids of the left and right token.
    pub merges: Vec<(u32, u32)>,
    /// The model's options.
    pub options: BpeOptions,
}

/// The rustc hash (rotate, xor, multiply), with a final rotation so that the
/// low bits (hash table buckets) depend on every input bit.
#[derive(Debug, Clone, Copy, Default)]
struct FxBuild;

struct FxHasher(u64);

impl FxHasher {
    #[inline]
    fn add(&mut self, w: u64) {
        self.0 = (self.0.rotate_left(5) ^ w).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}

impl Hasher for FxHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            let mut w = [0u8; 8];
            w.copy_from_slice(c);
            self.add(u64::from_le_bytes(w));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut w = [0u8; 8];
            w[..rest.len()].copy_from_slice(rest);
            self.add(u64::from_le_bytes(w) ^ ((rest.len() as u64) << 59));
        }
    }
    #[inline]
    fn write_u8(&mut self, i: u8) {
        self.add(u64::from(i));
    }
    #[inline]
    fn write_u32(&mut self, i: u32) {
        self.add(u64::from(i));
    }
    #[inline]
    fn write_u64(&mut self, i: u64) {
        self.add(i);
    }
    #[inline]
    fn write_usize(&mut self, i: usize) {
        self.add(i as u64);
    }
    #[inline]
    fn finish(&self) -> u64 {
        self.0.rotate_left(26)
    }
}

impl BuildHasher for FxBuild {
    type Hasher = FxHasher;
    #[inline]
    fn build_hasher(&self) -> FxHasher {
        FxHasher(0)
    }
}

type FxMap<K, V> = HashMap<K, V, FxBuild>;

/// One cache shard: word -> ids.
type Shard = Mutex<FxMap<Box<str>, Box<[u32]>>>;

/// A bounded word -> ids cache in [`SHARDS`] locked shards; a full shard is
/// emptied (the words of a text repeat within the text, so recent words are
/// what counts).
struct Cache {
    shards: Vec<Shard>,
    per_shard: usize,
}

impl Cache {
    fn new(capacity: usize) -> Cache {
        Cache {
            shards: (0..SHARDS).map(|_| Mutex::new(FxMap::default())).collect(),
            per_shard: capacity.div_ceil(SHARDS),
        }
    }

    #[inline]
    fn shard(&self, word: &str) -> &Shard {
        &self.shards[(FxBuild.hash_one(word) >> 40) as usize & (SHARDS - 1)]
    }

    /// Appends the cached ids of `word` to `out`; false if not cached.
    #[inline]
    fn get(&self, word: &str, out: &mut Vec<u32>) -> bool {
        let map = self.shard(word).lock().unwrap_or_else(|e| e.into_inner());
        match map.get(word) {
            Some(ids) => {
                out.extend_from_slice(ids);
                true
            }
            None => false,
        }
    }

    fn insert(&self, word: &str, ids: &[u32]) {
        let mut map = self.shard(word).lock().unwrap_or_else(|e| e.into_inner());
        if map.len() >= self.per_shard {
            map.clear();
        }
        map.insert(word.into(), ids.into());
    }

    fn clear(&self) {
        for s in &self.shards {
            s.lock().unwrap_or_else(|e| e.into_inner()).clear();
        }
    }
}

impl std::fmt::Debug for Cache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cache")
            .field("per_shard", &self.per_shard)
            .finish()
    }
}

/// No token (in the initial-symbol tables).
const NONE: u32 = u32::MAX;
/// Characters below this have their initial token precomputed (the byte-level
/// alphabet is U+0021..=U+0143).
const FAST_CHARS: usize = 0x144;

/// One symbol of a word being merged (HF's `Symbol`; `len` 0 marks a symbol
/// merged into its left neighbour).
#[derive(Debug, Clone, Copy)]
struct Symbol {
    id: u32,
    prev: i32,
    next: i32,
    len: u32,
}

/// Per-thread buffers for [`Bpe::merge_word`].
#[derive(Default)]
struct Scratch {
    symbols: Vec<Symbol>,
    heap: BinaryHeap<Reverse<u64>>,
    text: String,
}

thread_local! {
    static SCRATCH: std::cell::RefCell<Scratch> = std::cell::RefCell::new(Scratch::default());
}

/// A byte-pair-encoding model. Immutable but for its cache; `Send + Sync`.
#[derive(Debug)]
pub struct Bpe {
    /// The tokens by id: the pipeline's (and vocabulary's) buffer, shared;
    /// the model's are the first `len` (`""`: no token).
    pieces: Pieces,
    len: usize,
    /// Token -> id over `pieces[..len]`.
    vocab: TokenTable,
    /// `(left << 32 | right)` -> rank.
    merges: FxMap<u64, u32>,
    /// The token each rank merges into.
    merged: Vec<u32>,
    options: BpeOptions,
    unk: Option<u32>,
    /// `<0xXX>` token of each byte (only with `byte_fallback`).
    byte_tokens: Option<Box<[u32; 256]>>,
    /// `initial[v][c]`: the token of character `c < FAST_CHARS` with the prefix
    /// when `v & 1` (not the first character) and the suffix when `v & 2` (the
    /// last), or [`NONE`].
    initial: Box<[[u32; FAST_CHARS]; 4]>,
    cache: Cache,
}

impl Clone for Bpe {
    fn clone(&self) -> Bpe {
        Bpe {
            pieces: self.pieces.clone(),
            len: self.len,
            vocab: self.vocab.clone(),
            merges: self.merges.clone(),
            merged: self.merged.clone(),
            options: self.options.clone(),
            unk: self.unk,
            byte_tokens: self.byte_tokens.clone(),
            initial: self.initial.clone(),
            cache: Cache::new(CACHE_WORDS),
        }
    }
}

impl Bpe {
    /// Builds the model from the tokens by id (`""`: no token), the merges by
    /// rank (as token ids; where a pair occurs twice the later rank counts, as in
    /// HF) and the options. A merge whose tokens or result are not in the
    /// vocabulary, or an `unk_token` that is not, is refused by name.
    pub fn new(pieces: Vec<String>, merges: &[(u32, u32)], options: BpeOptions) -> Result<Bpe> {
        let n = pieces.len();
        Bpe::with_pieces(Pieces::new(&pieces)?, n, merges, options)
    }

    /// As [`Bpe::new`], over the first `n` of `pieces` (shared, not copied;
    /// added tokens may follow the model's).
    ///
    /// # Errors
    /// As [`Bpe::new`]; also if `n` is past the pieces.
    pub fn with_pieces(
        pieces: Pieces,
        n: usize,
        merges: &[(u32, u32)],
        options: BpeOptions,
    ) -> Result<Bpe> {
        if n > pieces.len() {
            return Err(Error::model(format!(
                "bpe: {n} model tokens but only {} tokens",
                pieces.len()
            )));
        }
        let table = TokenTable::build_first(&pieces, n, "");
        // "" is no token: never found.
        let vocab = |s: &str| {
            (!s.is_empty())
                .then(|| table.get(&pieces, s.as_bytes()))
                .flatten()
        };
        let name = |id: u32| -> Result<&str> {
            match pieces.get(id as usize).filter(|_| (id as usize) < n) {
                Some(p) if !p.is_empty() => Ok(p),
                _ => Err(Error::model(format!(
                    "bpe merge names token id {id}, which is not in the vocabulary"
                ))),
            }
        };
        let prefix_len = options.continuing_subword_prefix.len();
        let mut map: FxMap<u64, u32> = FxMap::default();
        map.reserve(merges.len());
        let mut merged = Vec::with_capacity(merges.len());
        let mut joined = String::new();
        for (rank, &(a, b)) in merges.iter().enumerate() {
            let (sa, sb) = (name(a)?, name(b)?);
            let tail = sb.get(prefix_len..).ok_or_else(|| {
                Error::model(format!(
                    "bpe merge {rank} ('{sa}' '{sb}'): the right token is shorter than the \
                     continuing-subword prefix '{}'",
                    options.continuing_subword_prefix
                ))
            })?;
            joined.clear();
            joined.push_str(sa);
            joined.push_str(tail);
            let id = vocab(joined.as_str()).ok_or_else(|| {
                Error::model(format!(
                    "bpe merge {rank} ('{sa}' '{sb}'): the merged token '{joined}' is not in \
                     the vocabulary"
                ))
            })?;
            let rank = u32::try_from(rank)
                .map_err(|_| Error::model("bpe model has more than 2^32 merges"))?;
            map.insert(u64::from(a) << 32 | u64::from(b), rank);
            merged.push(id);
        }
        let unk = match &options.unk_token {
            None => None,
            Some(t) => Some(vocab(t.as_str()).ok_or_else(|| {
                Error::model(format!("bpe unk_token '{t}' is not in the vocabulary"))
            })?),
        };
        let byte_tokens = if options.byte_fallback {
            let mut t = Box::new([NONE; 256]);
            for (b, slot) in t.iter_mut().enumerate() {
                if let Some(id) = vocab(format!("<0x{b:02X}>").as_str()) {
                    *slot = id;
                }
            }
            Some(t)
        } else {
            None
        };
        let mut initial = Box::new([[NONE; FAST_CHARS]; 4]);
        let mut s = String::new();
        for (v, row) in initial.iter_mut().enumerate() {
            for (cp, slot) in row.iter_mut().enumerate() {
                let Some(c) = char::from_u32(cp as u32) else {
                    continue;
                };
                s.clear();
                if v & 1 != 0 {
                    s.push_str(&options.continuing_subword_prefix);
                }
                s.push(c);
                if v & 2 != 0 {
                    s.push_str(&options.end_of_word_suffix);
                }
                if let Some(id) = vocab(s.as_str()) {
                    *slot = id;
                }
            }
        }
        Ok(Bpe {
            pieces,
            len: n,
            vocab: table,
            merges: map,
            merged,
            options,
            unk,
            byte_tokens,
            initial,
            cache: Cache::new(CACHE_WORDS),
        })
    }

    /// The options.
    pub fn options(&self) -> &BpeOptions {
        &self.options
    }

    /// Number of model tokens (ids `0..len`; some may be `""`, no token).
    pub fn len(&self) -> usize {
        self.len
    }

    /// True if the model has no tokens.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The token of `id`, if there is one.
    pub fn token(&self, id: u32) -> Option<&str> {
        self.pieces
            .get(id as usize)
            .filter(|s| !s.is_empty() && (id as usize) < self.len)
    }

    /// The id of `token`, if it is in the vocabulary.
    #[inline]
    pub fn token_id(&self, token: &str) -> Option<u32> {
        if token.is_empty() {
            return None;
        }
        self.vocab.get(&self.pieces, token.as_bytes())
    }

    /// Heap bytes of the lookup tables (vocabulary map, merges, initial
    /// tables), not counting the cache.
    pub fn heap_bytes(&self) -> usize {
        self.vocab.heap_bytes()
            + self.merges.capacity() * 13
            + self.merged.capacity() * 4
            + 4 * FAST_CHARS * 4
    }

    /// Number of merges.
    pub fn merge_count(&self) -> usize {
        self.merged.len()
    }

    /// Empties the word cache (for measuring without it).
    pub fn clear_cache(&self) {
        self.cache.clear();
    }

    /// Appends the ids of `word` (a pre-tokenized word, e.g. byte-level mapped)
    /// to `out`, exactly as HF's `BPE::tokenize` with no dropout.
    pub fn tokenize_word(&self, word: &str, out: &mut Vec<u32>) {
        if word.is_empty() {
            return;
        }
        if self.options.ignore_merges {
            if let Some(id) = self.token_id(word) {
                out.push(id);
                return;
            }
        }
        let cacheable = word.len() < CACHE_MAX_WORD;
        if cacheable && self.cache.get(word, out) {
            return;
        }
        let start = out.len();
        SCRATCH.with(|s| match s.try_borrow_mut() {
            Ok(mut s) => self.merge_word(word, &mut s, out),
            // Re-entered on this thread (not done by this module): own buffers.
            Err(_) => self.merge_word(word, &mut Scratch::default(), out),
        });
        if cacheable {
            self.cache.insert(word, &out[start..]);
        }
    }

    /// Like [`Bpe::tokenize_word`] without the cache (for tests and measuring).
    pub fn tokenize_word_uncached(&self, word: &str, out: &mut Vec<u32>) {
        if word.is_empty() {
            return;
        }
        if self.options.ignore_merges {
            if let Some(id) = self.token_id(word) {
                out.push(id);
                return;
            }
        }
        self.merge_word(word, &mut Scratch::default(), out);
    }

    /// The token of `c` (the `i`-th character of the word, `last` if the last)
    /// with the prefix and suffix that apply; the looked-up text is left in
    /// `text`.
    #[inline]
    fn char_token(&self, c: char, first: bool, last: bool, text: &mut String) -> Option<u32> {
        let v = usize::from(!first) | usize::from(last) << 1;
        if (c as usize) < FAST_CHARS {
            let id = self.initial[v][c as usize];
            if id != NONE {
                return Some(id);
            }
        }
        text.clear();
        if !first {
            text.push_str(&self.options.continuing_subword_prefix);
        }
        text.push(c);
        if last {
            text.push_str(&self.options.end_of_word_suffix);
        }
        self.token_id(text)
    }

    /// As [`Bpe::tokenize_word_uncached`], each id with the bytes `[start, end)`
    /// of `word` it stands for (HF's token offsets within the word).
    pub fn tokenize_word_spans(&self, word: &str, out: &mut Vec<(u32, usize, usize)>) {
        if word.is_empty() {
            return;
        }
        if self.options.ignore_merges {
            if let Some(id) = self.token_id(word) {
                out.push((id, 0, word.len()));
                return;
            }
        }
        let mut s = Scratch::default();
        self.merge_symbols(word, &mut s);
        let mut at = 0usize;
        for sym in s.symbols.iter().filter(|x| x.len != 0) {
            let end = at + sym.len as usize;
            out.push((sym.id, at, end));
            at = end;
        }
    }

    /// HF's `merge_word` then `merge_all`, appending the result to `out`.
    fn merge_word(&self, word: &str, s: &mut Scratch, out: &mut Vec<u32>) {
        self.merge_symbols(word, s);
        out.extend(s.symbols.iter().filter(|s| s.len != 0).map(|s| s.id));
    }

    /// HF's `merge_word` then `merge_all`: the merged symbols in `s.symbols`
    /// (those of `len` 0 were merged into their left neighbour).
    #[inline]
    fn merge_symbols(&self, word: &str, s: &mut Scratch) {
        let Scratch {
            symbols,
            heap,
            text,
        } = s;
        symbols.clear();
        heap.clear();
        let push = |symbols: &mut Vec<Symbol>, id: u32, len: u32| {
            let n = symbols.len() as i32;
            symbols.push(Symbol {
                id,
                prev: n - 1,
                next: n + 1,
                len,
            });
        };
        // A pending unknown: (id, byte length).
        let mut unk: Option<(u32, u32)> = None;
        let mut chars = word.char_indices().peekable();
        while let Some((i, c)) = chars.next() {
            let last = chars.peek().is_none();
            let len = c.len_utf8() as u32;
            if let Some(id) = self.char_token(c, i == 0, last, text) {
                if let Some((u, ulen)) = unk.take() {
                    push(symbols, u, ulen);
                }
                push(symbols, id, len);
                continue;
            }
            if let Some(bytes) = &self.byte_tokens {
                // The looked-up text (prefix and suffix included) as bytes.
                if (c as usize) < FAST_CHARS {
                    // `char_token` returned early with `text` untouched.
                    text.clear();
                    if i != 0 {
                        text.push_str(&self.options.continuing_subword_prefix);
                    }
                    text.push(c);
                    if last {
                        text.push_str(&self.options.end_of_word_suffix);
                    }
                }
                if text.bytes().all(|b| bytes[b as usize] != NONE) {
                    for b in text.bytes() {
                        push(symbols, bytes[b as usize], 1);
                    }
                    continue;
                }
            }
            if let Some(u) = self.unk {
                unk = match unk {
                    Some((u0, l0)) if self.options.fuse_unk => Some((u0, l0 + len)),
                    Some((u0, l0)) => {
                        push(symbols, u0, l0);
                        Some((u, len))
                    }
                    None => Some((u, len)),
                };
            }
        }
        if let Some((u, ulen)) = unk {
            push(symbols, u, ulen);
        }
        if let Some(l) = symbols.last_mut() {
            l.next = -1;
        }
        self.merge_all(symbols, heap);
    }

    /// The rank of the pair `(a, b)`, if it merges.
    #[inline]
    fn rank(&self, a: u32, b: u32) -> Option<u32> {
        self.merges
            .get(&(u64::from(a) << 32 | u64::from(b)))
            .copied()
    }

    /// HF's `Word::merge_all` without dropout: pop the lowest `(rank, pos)`;
    /// skip it if the symbol is gone, is last, or its pair no longer merges into
    /// the same token; else merge and queue the two pairs the new symbol forms.
    fn merge_all(&self, symbols: &mut [Symbol], heap: &mut BinaryHeap<Reverse<u64>>) {
        let key = |rank: u32, pos: usize| Reverse(u64::from(rank) << 32 | pos as u64);
        for pos in 0..symbols.len().saturating_sub(1) {
            if let Some(r) = self.rank(symbols[pos].id, symbols[pos + 1].id) {
                heap.push(key(r, pos));
            }
        }
        while let Some(Reverse(top)) = heap.pop() {
            let rank = (top >> 32) as u32;
            let pos = (top & 0xffff_ffff) as usize;
            let new_id = self.merged[rank as usize];
            let cur = symbols[pos];
            if cur.len == 0 || cur.next < 0 {
                continue;
            }
            let next_pos = cur.next as usize;
            let right = symbols[next_pos];
            match self.rank(cur.id, right.id) {
                Some(r) if self.merged[r as usize] == new_id => {}
                _ => continue,
            }
            symbols[pos].id = new_id;
            symbols[pos].len += right.len;
            symbols[pos].next = right.next;
            symbols[next_pos].len = 0;
            if right.next >= 0 && (right.next as usize) < symbols.len() {
                symbols[right.next as usize].prev = pos as i32;
            }
            let cur = symbols[pos];
            if cur.prev >= 0 {
                let prev = cur.prev as usize;
                if let Some(r) = self.rank(symbols[prev].id, cur.id) {
                    heap.push(key(r, prev));
                }
            }
            if cur.next >= 0 && (cur.next as usize) < symbols.len() {
                if let Some(r) = self.rank(cur.id, symbols[cur.next as usize].id) {
                    heap.push(key(r, pos));
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------
// Readers

/// Tokens by id from `(token, id)` entries: refused if two tokens share an id
/// or more ids are missing than there are tokens; missing ids become `""`.
pub fn pieces_from_entries(entries: Vec<(String, u32)>, what: &str) -> Result<Vec<String>> {
    let count = entries.len();
    let Some(max) = entries.iter().map(|e| e.1 as usize).max() else {
        return Ok(Vec::new());
    };
    if max >= 2 * count + 256 {
        return Err(Error::model(format!(
            "{what}: token id {max} is far beyond the {count} tokens of the vocabulary"
        )));
    }
    let mut pieces = vec![String::new(); max + 1];
    let mut seen = vec![false; max + 1];
    for (t, id) in entries {
        let i = id as usize;
        if seen[i] {
            return Err(Error::model(format!(
                "{what}: tokens '{}' and '{t}' both have id {id}",
                pieces[i]
            )));
        }
        seen[i] = true;
        pieces[i] = t;
    }
    Ok(pieces)
}

/// Token -> id of a JSON object (`model.vocab`, `vocab.json`).
fn vocab_entries(v: &Value, what: &str) -> Result<Vec<(String, u32)>> {
    let obj = v
        .as_object()
        .ok_or_else(|| Error::model(format!("{what} is not a JSON object of token -> id")))?;
    obj.iter()
        .map(|(t, id)| {
            let id = id
                .as_u64()
                .and_then(|i| u32::try_from(i).ok())
                .ok_or_else(|| {
                    Error::model(format!("{what}: the id of token '{t}' is not a 32-bit id"))
                })?;
            Ok((t.clone(), id))
        })
        .collect()
}

/// The merge pairs as token strings from one merge line `"a b"` (HF: exactly two
/// parts split at single spaces), `None` for a `#version` line (HF skips them).
fn merge_line(line: &str, n: usize, what: &str) -> Result<Option<(String, String)>> {
    if line.starts_with("#version") {
        return Ok(None);
    }
    let mut parts = line.split(' ');
    match (parts.next(), parts.next(), parts.next()) {
        (Some(a), Some(b), None) => Ok(Some((a.to_string(), b.to_string()))),
        _ => Err(Error::model(format!(
            "{what}: merge {n} '{line}' is not two tokens separated by one space"
        ))),
    }
}

/// Merges by id from merges by string.
pub(crate) fn merges_by_id(
    pairs: Vec<(String, String)>,
    pieces: &[String],
    what: &str,
) -> Result<Vec<(u32, u32)>> {
    let mut ids: FxMap<&str, u32> = FxMap::default();
    for (i, p) in pieces.iter().enumerate() {
        if !p.is_empty() {
            ids.insert(p.as_str(), i as u32);
        }
    }
    pairs
        .iter()
        .enumerate()
        .map(|(n, (a, b))| {
            let id = |t: &str| {
                ids.get(t).copied().ok_or_else(|| {
                    Error::model(format!(
                        "{what}: merge {n} ('{a}' '{b}') names '{t}', which is not in the \
                         vocabulary"
                    ))
                })
            };
            Ok((id(a)?, id(b)?))
        })
        .collect()
}

/// The merges of `model.merges`: all `"a b"` strings or all `["a", "b"]` pairs.
pub(crate) fn json_merges(v: Option<&Value>) -> Result<Vec<(String, String)>> {
    const WHAT: &str = "tokenizer.json model.merges";
    let Some(v) = v else {
        return Ok(Vec::new());
    };
    let arr = v
        .as_array()
        .ok_or_else(|| Error::model(format!("{WHAT} is not an array")))?;
    let tuples: Option<Vec<(String, String)>> = arr
        .iter()
        .map(|m| match m.as_array().map(Vec::as_slice) {
            Some([Value::String(a), Value::String(b)]) => Some((a.clone(), b.clone())),
            _ => None,
        })
        .collect();
    if let Some(t) = tuples {
        return Ok(t);
    }
    let mut out = Vec::with_capacity(arr.len());
    for (n, m) in arr.iter().enumerate() {
        let s = m.as_str().ok_or_else(|| {
            Error::model(format!(
                "{WHAT}: merge {n} is neither a string \"a b\" nor a pair [\"a\", \"b\"] (all \
                 merges must have the same form)"
            ))
        })?;
        if let Some(p) = merge_line(s, n, WHAT)? {
            out.push(p);
        }
    }
    Ok(out)
}

/// An optional string field (`null` = absent).
fn opt_str(model: &Value, key: &str) -> Result<Option<String>> {
    match model.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(Error::model(format!(
            "tokenizer.json model.{key} is not a string"
        ))),
    }
}

/// An optional boolean field (`null` = false).
fn opt_bool(model: &Value, key: &str) -> Result<bool> {
    match model.get(key) {
        None | Some(Value::Null) => Ok(false),
        Some(Value::Bool(b)) => Ok(*b),
        Some(_) => Err(Error::model(format!(
            "tokenizer.json model.{key} is not a boolean"
        ))),
    }
}

/// The options of a `tokenizer.json` `model` object (or of the stored
/// settings' `model`). Dropout other than null or 0 is refused (it makes
/// tokenization random).
pub fn options_from_json(model: &Value) -> Result<BpeOptions> {
    match model.get("type").and_then(Value::as_str) {
        Some("BPE") | None => {}
        Some(t) => {
            return Err(Error::model(format!(
                "tokenizer.json model.type is '{t}', not 'BPE'"
            )))
        }
    }
    match model.get("dropout") {
        None | Some(Value::Null) => {}
        Some(d) if d.as_f64() == Some(0.0) => {}
        Some(d) => {
            return Err(Error::unsupported(format!(
                "tokenizer.json model.dropout is {d}: BPE dropout makes tokenization random \
                 and is not supported"
            )))
        }
    }
    Ok(BpeOptions {
        unk_token: opt_str(model, "unk_token")?,
        continuing_subword_prefix: opt_str(model, "continuing_subword_prefix")?.unwrap_or_default(),
        end_of_word_suffix: opt_str(model, "end_of_word_suffix")?.unwrap_or_default(),
        fuse_unk: opt_bool(model, "fuse_unk")?,
        byte_fallback: opt_bool(model, "byte_fallback")?,
        ignore_merges: opt_bool(model, "ignore_merges")?,
    })
}

/// The BPE parts of a `tokenizer.json` `model` object (`"type": "BPE"`); see
/// [`options_from_json`].
pub fn parse_hf_model(model: &Value) -> Result<BpeParts> {
    let options = options_from_json(model)?;
    let vocab = model
        .get("vocab")
        .ok_or_else(|| Error::model("tokenizer.json model has no vocab"))?;
    let pieces = pieces_from_entries(
        vocab_entries(vocab, "tokenizer.json model.vocab")?,
        "tokenizer.json model.vocab",
    )?;
    let merges = merges_by_id(
        json_merges(model.get("merges"))?,
        &pieces,
        "tokenizer.json model.merges",
    )?;
    Ok(BpeParts {
        pieces,
        merges,
        options,
    })
}

/// Tokens by id and merges by rank (as token ids).
pub type PiecesAndMerges = (Vec<String>, Vec<(u32, u32)>);

/// The tokens by id and merges by id of the slow-tokenizer files `vocab.json`
/// (token -> id) and `merges.txt` (one `a b` per line; `#version` lines skipped).
pub fn parse_vocab_merges(vocab_json: &str, merges_txt: &str) -> Result<PiecesAndMerges> {
    let v: Value = serde_json::from_str(vocab_json)
        .map_err(|e| Error::model(format!("vocab.json is not valid JSON: {e}")))?;
    let pieces = pieces_from_entries(vocab_entries(&v, "vocab.json")?, "vocab.json")?;
    let mut pairs = Vec::new();
    for (n, line) in merges_txt.lines().enumerate() {
        if let Some(p) = merge_line(line, n + 1, "merges.txt line")? {
            pairs.push(p);
        }
    }
    let merges = merges_by_id(pairs, &pieces, "merges.txt")?;
    Ok((pieces, merges))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn model(vocab: &[&str], merges: &[(&str, &str)], options: BpeOptions) -> Bpe {
        let pieces: Vec<String> = vocab.iter().map(|s| s.to_string()).collect();
        let id = |t: &str| vocab.iter().position(|v| *v == t).unwrap() as u32;
        let m: Vec<(u32, u32)> = merges.iter().map(|(a, b)| (id(a), id(b))).collect();
        Bpe::new(pieces, &m, options).unwrap()
    }

    fn toks(b: &Bpe, w: &str) -> Vec<String> {
        let mut ids = Vec::new();
        b.tokenize_word(w, &mut ids);
        let mut again = Vec::new();
        b.tokenize_word_uncached(w, &mut again);
        assert_eq!(ids, again);
        ids.iter()
            .map(|&i| b.token(i).unwrap().to_string())
            .collect()
    }

    #[test]
    fn merges_lowest_rank_first_then_leftmost() {
        let b = model(
            &["a", "b", "c", "ab", "bc", "abc"],
            &[("b", "c"), ("a", "b"), ("a", "bc")],
            BpeOptions::default(),
        );
        // (b,c) has rank 0: "a" + "bc", then (a, bc).
        assert_eq!(toks(&b, "abc"), ["abc"]);
        assert_eq!(toks(&b, "ab"), ["ab"]);
        // "abab": (a,b) rank 1 at 0 and 2: both merge; no (ab, ab).
        assert_eq!(toks(&b, "abab"), ["ab", "ab"]);
        // "bcbc": rank 0 twice.
        assert_eq!(toks(&b, "bcbc"), ["bc", "bc"]);
        // Equal ranks: leftmost first. "aaa" with (a,a): "aa" + "a".
        let b = model(&["a", "aa"], &[("a", "a")], BpeOptions::default());
        assert_eq!(toks(&b, "aaa"), ["aa", "a"]);
        assert_eq!(toks(&b, "aaaa"), ["aa", "aa"]);
    }

    #[test]
    fn stale_queue_entries_are_skipped() {
        // "abcd": (b,c) rank 0 first -> a, bc, d. The queued (a,b) rank 1 is
        // stale (the pair is now (a, bc)) and (c,d) rank 2 has lost its left
        // symbol: both skipped. Then (a, bc) rank 3 -> abc; (abc, d) never merges.
        let v = ["a", "b", "c", "d", "bc", "ab", "abc", "cd"];
        let m = [("b", "c"), ("a", "b"), ("c", "d"), ("a", "bc")];
        let b = model(&v, &m, BpeOptions::default());
        assert_eq!(toks(&b, "abcd"), ["abc", "d"]);
        // Without (b,c): (a,b) rank 1 at 0, then (c,d) rank 2 at 2.
        let b = model(&v, &m[1..], BpeOptions::default());
        assert_eq!(toks(&b, "abcd"), ["ab", "cd"]);
    }

    #[test]
    fn unknowns_dropped_or_unk_fused_or_bytes() {
        let v = [
            "a", "b", "ab", "<unk>", "<0x78>", "<0x79>", "<0xC3>", "<0xA9>",
        ];
        let b = model(&v, &[("a", "b")], BpeOptions::default());
        // No unk token: unknown characters vanish (HF), so "a" and "b" become
        // neighbours and merge.
        assert_eq!(toks(&b, "axxb"), ["ab"]);
        assert_eq!(toks(&b, "xx"), Vec::<String>::new());
        let unk = BpeOptions {
            unk_token: Some("<unk>".into()),
            ..BpeOptions::default()
        };
        let b = model(&v, &[("a", "b")], unk.clone());
        assert_eq!(toks(&b, "axxb"), ["a", "<unk>", "<unk>", "b"]);
        let fused = BpeOptions {
            fuse_unk: true,
            ..unk.clone()
        };
        let b = model(&v, &[("a", "b")], fused);
        assert_eq!(toks(&b, "axxbz"), ["a", "<unk>", "b", "<unk>"]);
        let bytes = BpeOptions {
            byte_fallback: true,
            ..unk
        };
        let b = model(&v, &[("a", "b")], bytes);
        assert_eq!(toks(&b, "axé"), ["a", "<0x78>", "<0xC3>", "<0xA9>"]);
        // 'z' (0x7A) has no byte token: unk.
        assert_eq!(toks(&b, "zab"), ["<unk>", "ab"]);
    }

    #[test]
    fn prefix_and_suffix() {
        let o = BpeOptions {
            continuing_subword_prefix: "##".into(),
            end_of_word_suffix: "</w>".into(),
            ..BpeOptions::default()
        };
        let v = ["a", "##b", "##c</w>", "a##b", "ab", "c</w>", "abc</w>"];
        // Merged token = left + right without the prefix.
        let b = model(&v, &[("a", "##b"), ("ab", "##c</w>")], o);
        assert_eq!(toks(&b, "abc"), ["abc</w>"]);
        assert_eq!(toks(&b, "ab"), ["a"]); // "##b</w>" is unknown, dropped
        let e = Bpe::new(
            v.iter().map(|s| s.to_string()).collect(),
            &[(0, 4)],
            BpeOptions {
                continuing_subword_prefix: "###".into(),
                ..BpeOptions::default()
            },
        )
        .unwrap_err();
        assert!(e
            .message()
            .contains("shorter than the continuing-subword prefix"));
    }

    #[test]
    fn ignore_merges_takes_whole_words() {
        let v = ["a", "b", "c", "ab", "abc", "bc"];
        let m = [("b", "c"), ("a", "b")];
        let plain = model(&v, &m, BpeOptions::default());
        // (b,c) first, then nothing merges "a"+"bc".
        assert_eq!(toks(&plain, "abc"), ["a", "bc"]);
        let ign = model(
            &v,
            &m,
            BpeOptions {
                ignore_merges: true,
                ..BpeOptions::default()
            },
        );
        assert_eq!(toks(&ign, "abc"), ["abc"]);
    }

    #[test]
    fn duplicate_merge_later_rank_counts() {
        let v = ["a", "b", "c", "ab", "bc"];
        // (a,b) at rank 0 and again at rank 2: HF keeps rank 2, so (b,c) at rank
        // 1 wins on "abc".
        let b = model(
            &v,
            &[("a", "b"), ("b", "c"), ("a", "b")],
            BpeOptions::default(),
        );
        assert_eq!(toks(&b, "abc"), ["a", "bc"]);
    }

    #[test]
    fn refused_models() {
        let p = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let e = Bpe::new(p(&["a", "b"]), &[(0, 1)], BpeOptions::default()).unwrap_err();
        assert!(
            e.message()
                .contains("merged token 'ab' is not in the vocabulary"),
            "{e}"
        );
        let e = Bpe::new(p(&["a", "b"]), &[(0, 7)], BpeOptions::default()).unwrap_err();
        assert!(e.message().contains("token id 7"), "{e}");
        let e = Bpe::new(
            p(&["a"]),
            &[],
            BpeOptions {
                unk_token: Some("<unk>".into()),
                ..BpeOptions::default()
            },
        )
        .unwrap_err();
        assert!(e.message().contains("unk_token '<unk>'"), "{e}");
    }

    #[test]
    fn parse_both_merge_forms_and_slow_files() {
        let strings: Value = serde_json::json!({
            "type": "BPE", "dropout": null, "unk_token": null,
            "continuing_subword_prefix": "", "end_of_word_suffix": "", "fuse_unk": false,
            "byte_fallback": false, "ignore_merges": false,
            "vocab": {"a": 0, "b": 1, "ab": 2, "Ġ": 3, "Ġab": 4},
            "merges": ["a b", "Ġ ab"]
        });
        let parts = parse_hf_model(&strings).unwrap();
        assert_eq!(parts.pieces, ["a", "b", "ab", "Ġ", "Ġab"]);
        assert_eq!(parts.merges, [(0, 1), (3, 2)]);
        let mut pairs = strings.clone();
        pairs["merges"] = serde_json::json!([["a", "b"], ["Ġ", "ab"]]);
        assert_eq!(parse_hf_model(&pairs).unwrap(), parts);
        // A token with a space only fits the pair form.
        let mut spaced = pairs.clone();
        spaced["vocab"]["a b"] = 5.into();
        spaced["vocab"]["a bc"] = 6.into();
        spaced["merges"] = serde_json::json!([["a b", "c"]]);
        let e = parse_hf_model(&spaced).unwrap_err();
        assert!(
            e.message().contains("'c', which is not in the vocabulary"),
            "{e}"
        );
        let mut mixed = strings.clone();
        mixed["merges"] = serde_json::json!(["a b", ["Ġ", "ab"]]);
        assert!(parse_hf_model(&mixed)
            .unwrap_err()
            .message()
            .contains("same form"));
        let mut bad = strings.clone();
        bad["merges"] = serde_json::json!(["a  b"]);
        assert!(parse_hf_model(&bad)
            .unwrap_err()
            .message()
            .contains("one space"));
        let mut drop = strings.clone();
        drop["dropout"] = 0.1.into();
        assert!(parse_hf_model(&drop)
            .unwrap_err()
            .message()
            .contains("dropout"));
        drop["dropout"] = 0.0.into();
        assert!(parse_hf_model(&drop).is_ok());
        let mut dup = strings.clone();
        dup["vocab"]["b2"] = 1.into();
        assert!(parse_hf_model(&dup)
            .unwrap_err()
            .message()
            .contains("both have id 1"));
        let mut far = strings.clone();
        far["vocab"]["x"] = 1_000_000.into();
        assert!(parse_hf_model(&far)
            .unwrap_err()
            .message()
            .contains("far beyond"));

        let (p, m) = parse_vocab_merges(
            r#"{"a": 0, "b": 1, "ab": 2, "Ġ": 3, "Ġab": 4}"#,
            "#version: 0.2\na b\nĠ ab\n",
        )
        .unwrap();
        assert_eq!((p, m), (parts.pieces.clone(), parts.merges.clone()));
        let e = parse_vocab_merges(r#"{"a": 0}"#, "#version: 0.2\na\n").unwrap_err();
        assert!(e.message().contains("merges.txt line: merge 2 'a'"), "{e}");
        assert!(parse_vocab_merges("[1]", "").is_err());
    }

    /// A tiny RoBERTa-style `tokenizer.json` through the shared pipeline.
    fn tiny_roberta(dropout: Value) -> Result<super::super::pipeline::Pipeline> {
        use super::super::spec::{Layout, TokenizerSpec};
        let special = |id: u32, c: &str, lstrip: bool| {
            serde_json::json!({"id": id, "content": c, "single_word": false, "lstrip": lstrip,
                               "rstrip": false, "normalized": false, "special": true})
        };
        let j = serde_json::json!({
            "added_tokens": [special(0, "<s>", false), special(1, "<pad>", false),
                             special(2, "</s>", false), special(3, "<unk>", false),
                             special(10, "<mask>", true)],
            "normalizer": null,
            "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false,
                              "trim_offsets": true, "use_regex": true},
            "post_processor": {"type": "RobertaProcessing", "sep": ["</s>", 2], "cls": ["<s>", 0],
                               "trim_offsets": true, "add_prefix_space": false},
            "decoder": {"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true,
                        "use_regex": true},
            "model": {"type": "BPE", "dropout": dropout, "unk_token": null,
                      "continuing_subword_prefix": "", "end_of_word_suffix": "",
                      "fuse_unk": false, "byte_fallback": false, "ignore_merges": false,
                      "vocab": {"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3, "a": 4, "b": 5,
                                "Ġ": 6, "Ġa": 7, "ab": 8, "Ġab": 9, "<mask>": 10},
                      "merges": ["Ġ a", "a b", "Ġa b"]}
        });
        TokenizerSpec::from_hf_json(&j, None, Layout::AsWritten)?.build()
    }

    #[test]
    fn through_the_pipeline() {
        let p = tiny_roberta(Value::Null).unwrap();
        // "ab" -> (a,b); "Ġab" -> (Ġ,a) rank 0, then (Ġa,b) rank 2.
        assert_eq!(p.encode("ab ab", None), [0, 8, 9, 2]);
        // <mask> takes the space before it.
        assert_eq!(p.encode("a <mask>", None), [0, 4, 10, 2]);
        // 'c' is no token and there is no unk token: dropped.
        assert_eq!(p.encode("c", None), [0, 2]);
        // RoBERTa pairs: <s> A </s></s> B </s>.
        assert_eq!(p.encode_pair("a", "b", None).0, [0, 4, 2, 2, 5, 2]);
        assert_eq!(p.decode(&[0, 8, 9, 2], true), "ab ab");
        assert_eq!(p.decode(&[0, 8, 9, 2], false), "<s>ab ab</s>");
        assert_eq!(p.count_tokens("ab ab", None), 4);
        let e = tiny_roberta(0.25.into()).unwrap_err();
        assert!(e.message().contains("dropout"), "{e}");
        assert!(tiny_roberta(0.0.into()).is_ok());
    }

    #[test]
    fn send_sync() {
        fn check<T: Send + Sync>() {}
        check::<Bpe>();
    }
}
