//! The WordPiece vocabulary: id <-> token, plus the five special ids.

use std::sync::{Arc, OnceLock};

use crate::error::{Error, Result};

/// Ids of the special tokens, in the EMBD order (pad, unk, cls, sep, mask).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SpecialIds {
    /// `[PAD]`.
    pub pad: u32,
    /// `[UNK]`.
    pub unk: u32,
    /// `[CLS]`.
    pub cls: u32,
    /// `[SEP]`.
    pub sep: u32,
    /// `[MASK]`.
    pub mask: u32,
}

impl SpecialIds {
    /// The five ids in EMBD order.
    pub fn as_array(&self) -> [u32; 5] {
        [self.pad, self.unk, self.cls, self.sep, self.mask]
    }
}

/// Token strings by id in one shared buffer: all of them concatenated, with
/// an offset table (two allocations whatever the size). Clones share the
/// buffer, so a [`Vocab`], a tokenizer spec and the tokenizer built from them
/// hold the strings once.
#[derive(Clone)]
pub struct Pieces {
    inner: Arc<PieceText>,
}

struct PieceText {
    /// Every token, concatenated.
    text: Box<str>,
    /// `offsets[i]..offsets[i + 1]` is token `i` in `text` (`len + 1` entries).
    offsets: Box<[u32]>,
}

impl Pieces {
    /// The strings `text[offsets[i]..offsets[i + 1]]`: `offsets` has one entry
    /// more than there are strings, starts at 0, never decreases, ends at
    /// `text.len()` and falls on char boundaries.
    ///
    /// # Errors
    /// [`crate::ErrorKind::Model`] if the offsets do not cut `text` that way or
    /// there are more than `u32::MAX` strings.
    pub fn from_parts(text: String, offsets: Vec<u32>) -> Result<Pieces> {
        let n = offsets.len().saturating_sub(1);
        u32::try_from(n).map_err(|_| too_large(n, text.len()))?;
        let ok = offsets.first() == Some(&0)
            && offsets.last().map(|&e| e as usize) == Some(text.len())
            && offsets.windows(2).all(|w| w[0] <= w[1])
            && offsets.iter().all(|&o| text.is_char_boundary(o as usize));
        if !ok {
            return Err(Error::model(
                "vocabulary offsets do not cut the token text into tokens",
            ));
        }
        Ok(Pieces {
            inner: Arc::new(PieceText {
                text: text.into_boxed_str(),
                offsets: offsets.into_boxed_slice(),
            }),
        })
    }

    /// The strings of `tokens`, in one buffer.
    ///
    /// # Errors
    /// [`crate::ErrorKind::Model`] if they take more than `u32::MAX` bytes or
    /// strings.
    pub fn new<S: AsRef<str>>(tokens: &[S]) -> Result<Pieces> {
        let bytes: usize = tokens.iter().map(|t| t.as_ref().len()).sum();
        let mut text = String::with_capacity(bytes);
        let mut offsets = Vec::with_capacity(tokens.len() + 1);
        offsets.push(0u32);
        for t in tokens {
            text.push_str(t.as_ref());
            offsets.push(u32::try_from(text.len()).map_err(|_| too_large(tokens.len(), bytes))?);
        }
        Pieces::from_parts(text, offsets)
    }

    /// Number of strings.
    #[inline]
    pub fn len(&self) -> usize {
        self.inner.offsets.len() - 1
    }

    /// True if there are none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// String `i`, if in range.
    #[inline]
    pub fn get(&self, i: usize) -> Option<&str> {
        let o = &self.inner.offsets;
        if i + 1 >= o.len() {
            return None;
        }
        self.inner.text.get(o[i] as usize..o[i + 1] as usize)
    }

    /// The bytes of string `i` (empty if out of range).
    #[inline]
    pub(crate) fn bytes(&self, i: usize) -> &[u8] {
        self.get(i).map_or(&[], str::as_bytes)
    }

    /// All strings, by id, without allocating.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = &str> + '_ {
        let text = &self.inner.text;
        self.inner
            .offsets
            .windows(2)
            .map(move |w| &text[w[0] as usize..w[1] as usize])
    }

    /// The strings as owned `String`s (allocates each).
    pub fn to_vec(&self) -> Vec<String> {
        self.iter().map(str::to_string).collect()
    }

    /// The first `n` strings (all if fewer) as a new buffer.
    pub fn prefix(&self, n: usize) -> Pieces {
        let n = n.min(self.len());
        if n == self.len() {
            return self.clone();
        }
        let o = &self.inner.offsets[..=n];
        let end = o[n] as usize;
        Pieces {
            inner: Arc::new(PieceText {
                text: self.inner.text[..end].into(),
                offsets: o.into(),
            }),
        }
    }

    /// Total bytes of the strings.
    pub fn text_len(&self) -> usize {
        self.inner.text.len()
    }

    /// Heap bytes of the buffer (text and offsets).
    pub fn heap_bytes(&self) -> usize {
        self.inner.text.len() + self.inner.offsets.len() * 4
    }

    /// True if `other` is the same buffer (not a copy).
    pub fn same_buffer(&self, other: &Pieces) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }
}

impl std::ops::Index<usize> for Pieces {
    type Output = str;
    fn index(&self, i: usize) -> &str {
        match self.get(i) {
            Some(s) => s,
            None => panic!("piece {i} is out of range ({} pieces)", self.len()),
        }
    }
}

impl PartialEq for Pieces {
    fn eq(&self, other: &Pieces) -> bool {
        self.same_buffer(other)
            || (self.inner.offsets == other.inner.offsets && self.inner.text == other.inner.text)
    }
}

impl<S: AsRef<str>> PartialEq<Vec<S>> for Pieces {
    fn eq(&self, other: &Vec<S>) -> bool {
        self.len() == other.len() && self.iter().zip(other).all(|(a, b)| a == b.as_ref())
    }
}

impl std::fmt::Debug for Pieces {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pieces")
            .field("len", &self.len())
            .field("bytes", &self.text_len())
            .finish()
    }
}

impl From<Vec<String>> for Pieces {
    /// # Panics
    /// If the strings take more than 4 GiB (use [`Pieces::new`] to get an error).
    fn from(v: Vec<String>) -> Pieces {
        match Pieces::new(&v) {
            Ok(p) => p,
            Err(e) => panic!("{e}"),
        }
    }
}

/// A vocabulary: tokens indexed by id ([`Pieces`]), and the five special ids.
///
/// The token -> id table for [`Vocab::id`] is built on the first call (the
/// tokenizer has its own tables), and so is the `Vec<String>` of
/// [`Vocab::tokens`]. Clones share all of it.
#[derive(Clone)]
pub struct Vocab {
    inner: Arc<Inner>,
    specials: SpecialIds,
}

struct Inner {
    pieces: Pieces,
    ids: OnceLock<TokenTable>,
    strings: OnceLock<Vec<String>>,
}

impl std::fmt::Debug for Vocab {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Vocab")
            .field("len", &self.len())
            .field("bytes", &self.inner.pieces.text_len())
            .field("specials", &self.specials)
            .finish()
    }
}

impl Vocab {
    /// Builds a vocabulary. Fails if a special id is out of range or the vocab is
    /// larger than `u32::MAX` entries or bytes. When a token string repeats, the
    /// first id wins for token -> id lookups (as in HF `vocab.txt` loading, where
    /// the last wins; real BERT vocabularies have no duplicates).
    pub fn new(tokens: Vec<String>, specials: SpecialIds) -> Result<Vocab> {
        Vocab::with_pieces(Pieces::new(&tokens)?, specials)
    }

    /// Builds a vocabulary from all token strings concatenated in `text` and the
    /// `offsets` that cut it (see [`Pieces::from_parts`]).
    ///
    /// # Errors
    /// [`crate::ErrorKind::Model`] if the offsets do not cut `text` that way, or
    /// as [`Vocab::new`].
    pub fn from_parts(text: String, offsets: Vec<u32>, specials: SpecialIds) -> Result<Vocab> {
        Vocab::with_pieces(Pieces::from_parts(text, offsets)?, specials)
    }

    /// A vocabulary over `pieces` (shared, not copied).
    ///
    /// # Errors
    /// [`crate::ErrorKind::Model`] if a special id is not below `pieces.len()`.
    pub fn with_pieces(pieces: Pieces, specials: SpecialIds) -> Result<Vocab> {
        let n = pieces.len() as u64;
        for (name, id) in ["pad", "unk", "cls", "sep", "mask"]
            .iter()
            .zip(specials.as_array())
        {
            if u64::from(id) >= n {
                return Err(Error::model(format!(
                    "special token id {name}={id} is not below the vocabulary size {n}"
                )));
            }
        }
        Ok(Vocab {
            inner: Arc::new(Inner {
                pieces,
                ids: OnceLock::new(),
                strings: OnceLock::new(),
            }),
            specials,
        })
    }

    /// The token strings (shared: cloning them does not copy).
    pub fn pieces(&self) -> &Pieces {
        &self.inner.pieces
    }

    /// Builds a vocabulary from tokens, finding `[PAD] [UNK] [CLS] [SEP] [MASK]` by name.
    pub fn from_tokens_bert(tokens: Vec<String>) -> Result<Vocab> {
        let find = |s: &str| {
            tokens
                .iter()
                .position(|t| t == s)
                .map(|i| i as u32)
                .ok_or_else(|| Error::model(format!("vocabulary has no {s} token")))
        };
        let specials = SpecialIds {
            pad: find("[PAD]")?,
            unk: find("[UNK]")?,
            cls: find("[CLS]")?,
            sep: find("[SEP]")?,
            mask: find("[MASK]")?,
        };
        Vocab::new(tokens, specials)
    }

    /// Reads a BERT `vocab.txt` (one token a line, UTF-8; only the line ending
    /// `\n` and a `\r` before it are removed) and finds the special tokens by name
    /// as [`Vocab::from_tokens_bert`].
    ///
    /// # Errors
    /// [`crate::ErrorKind::Io`]/[`crate::ErrorKind::NotFound`] if the file cannot be
    /// read, [`crate::ErrorKind::Model`] if it is not UTF-8 or lacks a special token.
    pub fn from_vocab_txt(path: impl AsRef<std::path::Path>) -> Result<Vocab> {
        let path = path.as_ref();
        let bytes = std::fs::read(path).map_err(|e| Error::io(path.display(), e))?;
        let text = String::from_utf8(bytes).map_err(|e| {
            Error::model(format!(
                "{}: vocabulary is not UTF-8 (byte {})",
                path.display(),
                e.utf8_error().valid_up_to()
            ))
        })?;
        Vocab::from_vocab_text(&text).map_err(|e| e.context(path.display()))
    }

    /// As [`Vocab::from_vocab_txt`], from the file's text.
    ///
    /// # Errors
    /// [`crate::ErrorKind::Model`] if a special token is missing.
    pub fn from_vocab_text(text: &str) -> Result<Vocab> {
        let body = text.strip_suffix('\n').unwrap_or(text);
        let tokens = if body.is_empty() {
            Vec::new()
        } else {
            body.split('\n')
                .map(|l| l.strip_suffix('\r').unwrap_or(l).to_string())
                .collect()
        };
        Vocab::from_tokens_bert(tokens)
    }

    /// Number of tokens.
    pub fn len(&self) -> usize {
        self.inner.pieces.len()
    }

    /// True if there are no tokens.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The id of `token`, if present.
    pub fn id(&self, token: &str) -> Option<u32> {
        self.inner
            .ids
            .get_or_init(|| TokenTable::build(&self.inner.pieces, ""))
            .get(&self.inner.pieces, token.as_bytes())
    }

    /// The token for `id`, if in range.
    #[inline]
    pub fn token(&self, id: u32) -> Option<&str> {
        self.inner.pieces.get(id as usize)
    }

    /// All tokens, by id, without allocating.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = &str> + '_ {
        self.inner.pieces.iter()
    }

    /// All tokens, by id, as owned strings (built on the first call and kept;
    /// prefer [`Vocab::iter`]).
    pub fn tokens(&self) -> &[String] {
        self.inner
            .strings
            .get_or_init(|| self.iter().map(str::to_string).collect())
    }

    /// Heap bytes held: the token text, its offsets, and the lookup tables
    /// built so far (for memory reports).
    pub fn heap_bytes(&self) -> usize {
        let i = &self.inner;
        i.pieces.heap_bytes()
            + i.ids.get().map_or(0, TokenTable::heap_bytes)
            + i.strings
                .get()
                .map_or(0, |v| v.iter().map(|s| s.capacity() + 24).sum())
    }

    /// The special ids.
    pub fn specials(&self) -> SpecialIds {
        self.specials
    }
}

fn too_large(n: usize, bytes: usize) -> Error {
    Error::model(format!(
        "vocabulary of {n} tokens ({bytes} bytes) is too large"
    ))
}

/// A token -> id table over a [`Vocab`]'s strings: open addressing with linear
/// probing, one `u64` slot per entry (`hash tag << 32 | id`), keys compared
/// against the vocabulary's own bytes. Built with one allocation, whatever the
/// vocabulary size.
///
/// A table built with a `prefix` holds only tokens starting with it, keyed by
/// the rest of the token (`##ing` -> `ing`).
#[derive(Clone)]
pub(crate) struct TokenTable {
    slots: Box<[u64]>,
    /// `slots.len() - 1` (a power of two minus one).
    mask: usize,
    /// `64 - log2(slots.len())`: the home slot is the hash's top bits.
    shift: u32,
    /// Length of the prefix stripped from every key.
    skip: usize,
    /// Longest key, in bytes.
    max_key: usize,
}

const EMPTY: u64 = u64::MAX;

impl std::fmt::Debug for TokenTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenTable")
            .field("slots", &self.slots.len())
            .field("max_key", &self.max_key)
            .finish()
    }
}

impl TokenTable {
    /// The table of every token of `vocab` starting with `prefix`, keyed by the
    /// rest. When a key repeats, the first id wins.
    pub(crate) fn build(vocab: &Pieces, prefix: &str) -> TokenTable {
        TokenTable::build_first(vocab, vocab.len(), prefix)
    }

    /// As [`TokenTable::build`], over the first `n` tokens only.
    pub(crate) fn build_first(vocab: &Pieces, n: usize, prefix: &str) -> TokenTable {
        let prefix = prefix.as_bytes();
        let n = n.min(vocab.len());
        let keys = if prefix.is_empty() {
            n
        } else {
            vocab
                .iter()
                .take(n)
                .filter(|t| strip(t.as_bytes(), prefix).is_some())
                .count()
        };
        // Load factor at most 1/2.
        let size = (2 * keys).next_power_of_two().max(16);
        let mut t = TokenTable {
            slots: vec![EMPTY; size].into_boxed_slice(),
            mask: size - 1,
            shift: 64 - size.trailing_zeros(),
            skip: prefix.len(),
            max_key: 0,
        };
        for (id, tok) in vocab.iter().take(n).enumerate() {
            let Some(key) = strip(tok.as_bytes(), prefix) else {
                continue;
            };
            let (tag, mut i) = t.home(key);
            let id = id as u32;
            loop {
                let s = t.slots[i];
                if s == EMPTY {
                    t.slots[i] = (u64::from(tag) << 32) | u64::from(id);
                    t.max_key = t.max_key.max(key.len());
                    break;
                }
                if (s >> 32) as u32 == tag && same(t.key(vocab, s as u32), key) {
                    break; // first id wins
                }
                i = (i + 1) & t.mask;
            }
        }
        t
    }

    /// Heap bytes of the table.
    pub(crate) fn heap_bytes(&self) -> usize {
        self.slots.len() * 8
    }

    /// Longest key in bytes (no lookup of a longer string can succeed).
    #[inline]
    pub(crate) fn max_key(&self) -> usize {
        self.max_key
    }

    #[inline]
    fn key<'v>(&self, vocab: &'v Pieces, id: u32) -> &'v [u8] {
        vocab.bytes(id as usize).get(self.skip..).unwrap_or(&[])
    }

    /// Tag and home slot of `key`.
    #[inline]
    fn home(&self, key: &[u8]) -> (u32, usize) {
        let h = hash_bytes(key);
        ((h as u32) ^ ((h >> 32) as u32), (h >> self.shift) as usize)
    }

    /// The id of `key` (`vocab` must be the vocabulary the table was built from).
    #[inline]
    pub(crate) fn get(&self, vocab: &Pieces, key: &[u8]) -> Option<u32> {
        let (tag, mut i) = self.home(key);
        loop {
            let s = self.slots[i];
            if s == EMPTY {
                return None;
            }
            if (s >> 32) as u32 == tag && same(self.key(vocab, s as u32), key) {
                return Some(s as u32);
            }
            i = (i + 1) & self.mask;
        }
    }
}

/// `b` without `prefix`, if it starts with it. A plain loop: for the short
/// strings of a vocabulary, a `memcmp` call costs more than the comparison.
#[inline]
fn strip<'a>(b: &'a [u8], prefix: &[u8]) -> Option<&'a [u8]> {
    if b.len() < prefix.len() {
        return None;
    }
    let (head, rest) = b.split_at(prefix.len());
    same(head, prefix).then_some(rest)
}

/// `a == b`, without a `memcmp` call (see [`strip`]).
#[inline]
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x == y)
}

/// FxHash-style hash of a byte string (8 bytes at a time). The vocabulary is
/// trusted data, so hash flooding is not a concern.
#[inline]
fn hash_bytes(bytes: &[u8]) -> u64 {
    const SEED: u64 = 0x51_7c_c1_b7_27_22_0a_95;
    let add = |h: u64, w: u64| (h.rotate_left(5) ^ w).wrapping_mul(SEED);
    let mut h = 0u64;
    let mut chunks = bytes.chunks_exact(8);
    for c in &mut chunks {
        let mut a = [0u8; 8];
        a.copy_from_slice(c);
        h = add(h, u64::from_le_bytes(a));
    }
    let rest = chunks.remainder();
    let mut a = [0u8; 8];
    a[..rest.len()].copy_from_slice(rest);
    // The length goes into the last word, so "a" and "a\0" differ.
    add(h, u64::from_le_bytes(a) ^ ((bytes.len() as u64) << 56))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn toks(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn finds_specials_by_name() {
        let v = Vocab::from_tokens_bert(toks(&["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a"]))
            .unwrap();
        assert_eq!(v.specials().as_array(), [0, 1, 2, 3, 4]);
        assert_eq!(v.id("a"), Some(5));
        assert_eq!(v.token(5), Some("a"));
        assert_eq!(v.token(6), None);
    }

    #[test]
    fn vocab_text_lines() {
        let v = Vocab::from_vocab_text("[PAD]\n[UNK]\r\n[CLS]\n[SEP]\n[MASK]\n a \n##b\n").unwrap();
        assert_eq!(v.len(), 7);
        assert_eq!(v.id(" a "), Some(5));
        assert_eq!(v.id("##b"), Some(6));
        assert_eq!(v.specials().unk, 1);
        assert!(Vocab::from_vocab_text("").is_err());
    }

    #[test]
    fn from_parts_checks_the_offsets() {
        let s = SpecialIds {
            pad: 0,
            unk: 0,
            cls: 1,
            sep: 1,
            mask: 2,
        };
        let v = Vocab::from_parts("abéc".into(), vec![0, 1, 4, 5], s).unwrap();
        assert_eq!(v.iter().collect::<Vec<_>>(), ["a", "bé", "c"]);
        assert_eq!(v.tokens(), ["a", "bé", "c"]);
        assert_eq!(v.id("bé"), Some(1));
        assert_eq!(v.token(3), None);
        for bad in [
            vec![0, 1, 3, 5], // inside "é"
            vec![1, 2, 4, 5], // does not start at 0
            vec![0, 1, 4, 4], // does not end at the text's end
            vec![0, 4, 1, 5], // decreasing
            vec![],
        ] {
            assert!(
                Vocab::from_parts("abéc".into(), bad.clone(), s).is_err(),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn repeated_token_first_id_wins_and_empty_tokens_work() {
        let v = Vocab::from_tokens_bert(toks(&[
            "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "x", "", "x", "##x", "##x",
        ]))
        .unwrap();
        assert_eq!(v.id("x"), Some(5));
        assert_eq!(v.id(""), Some(6));
        assert_eq!(v.id("##x"), Some(8));
        assert_eq!(v.id("y"), None);
        let t = TokenTable::build(v.pieces(), "##");
        assert_eq!(t.get(v.pieces(), b"x"), Some(8));
        assert_eq!(t.get(v.pieces(), b"##x"), None);
        assert_eq!(t.max_key(), 1);
    }

    #[test]
    fn table_finds_every_token_of_a_large_vocabulary() {
        let mut t = toks(&["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]);
        t.extend((0..5000).map(|i| format!("w{i}")));
        t.extend((0..5000).map(|i| format!("##{i}")));
        let v = Vocab::from_tokens_bert(t).unwrap();
        for (i, tok) in v.iter().enumerate() {
            assert_eq!(v.id(tok), Some(i as u32), "{tok}");
        }
        let cont = TokenTable::build(v.pieces(), "##");
        for i in 0..5000 {
            assert_eq!(
                cont.get(v.pieces(), i.to_string().as_bytes()),
                Some(5005 + i)
            );
        }
        assert_eq!(v.id("w5000"), None);
    }

    #[test]
    fn special_out_of_range_is_error() {
        let s = SpecialIds {
            pad: 0,
            unk: 9,
            cls: 0,
            sep: 0,
            mask: 0,
        };
        assert!(Vocab::new(toks(&["a"]), s).is_err());
    }
}
