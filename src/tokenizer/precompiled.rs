//! The SentencePiece `precompiled_charsmap` normalizer (HF `Precompiled`), e.g.
//! `nmt_nfkc`.
//!
//! The char map is `[u32 LE trie_size][trie: trie_size / 4 u32 units][strings]`:
//! a darts-clone double-array trie over UTF-8 bytes whose leaf values are byte
//! offsets into `strings`, a blob of NUL-terminated replacement strings.
//!
//! Exactness notes (HF `tokenizers` with its `spm_precompiled` crate, which
//! is the reference rather than sentencepiece itself):
//! - the text is cut into extended grapheme clusters (`unicode-segmentation`,
//!   the crate HF uses); a cluster shorter than 6 bytes is looked up whole,
//!   else (or when the whole cluster has no entry) each of its characters is
//!   looked up alone and kept unchanged when it has none;
//! - a lookup takes the SHORTEST key that is a prefix of the chunk (the first
//!   leaf met while walking the trie), and replaces the whole chunk with it: so
//!   `Ａ` + U+0301 becomes `A` (the mark is dropped), `\r\n` becomes one space;
//! - the walk stops at a NUL byte (a NUL is never mapped).
//!
//! Where HF would panic (a trie index or string offset out of range in a corrupt
//! map) the lookup here finds nothing instead.

use unicode_segmentation::UnicodeSegmentation;

use crate::error::{Error, Result};

/// A parsed char map. Immutable; lookups allocate nothing.
#[derive(Clone)]
pub struct CharsMap {
    /// The double-array units.
    units: Box<[u32]>,
    /// The replacement strings, NUL-separated (valid UTF-8).
    strings: Box<str>,
    /// `ascii[b]`: the replacement of the one-byte chunk `b` (`(start, len)` in
    /// `strings`), precomputed because almost every chunk of most texts is one.
    ascii: [Option<(u32, u32)>; 128],
}

impl std::fmt::Debug for CharsMap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CharsMap")
            .field("units", &self.units.len())
            .field("strings_bytes", &self.strings.len())
            .finish()
    }
}

#[inline]
fn has_leaf(u: u32) -> bool {
    (u >> 8) & 1 == 1
}

#[inline]
fn value(u: u32) -> u32 {
    u & ((1u32 << 31) - 1)
}

#[inline]
fn label(u: u32) -> u32 {
    u & ((1u32 << 31) | 0xFF)
}

#[inline]
fn offset(u: u32) -> usize {
    ((u >> 10) as usize) << ((u & (1u32 << 9)) >> 6)
}

impl CharsMap {
    /// Parses the raw char map (after base64).
    ///
    /// # Errors
    /// [`crate::ErrorKind::Model`] naming `precompiled_charsmap` when the map is
    /// shorter than its header, its trie runs past the end or is empty, or its
    /// strings are not UTF-8.
    pub fn parse(bytes: &[u8]) -> Result<CharsMap> {
        let err = |d: String| Error::model(format!("precompiled_charsmap: {d}"));
        if bytes.len() < 4 {
            return Err(err(format!(
                "{} bytes, shorter than its 4-byte header",
                bytes.len()
            )));
        }
        let trie_size = u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]) as usize;
        let n_units = trie_size / 4;
        let body = &bytes[4..];
        if n_units == 0 {
            return Err(err("the trie is empty".into()));
        }
        if n_units > body.len() / 4 {
            return Err(err(format!(
                "the trie ({n_units} units) runs past the end ({} bytes)",
                bytes.len()
            )));
        }
        let units: Box<[u32]> = body[..n_units * 4]
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        let strings = std::str::from_utf8(&body[n_units * 4..])
            .map_err(|e| {
                err(format!(
                    "the normalized strings are not UTF-8 (byte {})",
                    e.valid_up_to()
                ))
            })?
            .into();
        let mut map = CharsMap {
            units,
            strings,
            ascii: [None; 128],
        };
        for b in 0u8..128 {
            map.ascii[b as usize] = map.lookup(&[b]);
        }
        Ok(map)
    }

    /// The raw size in bytes (for memory reports).
    pub fn heap_bytes(&self) -> usize {
        self.units.len() * 4 + self.strings.len()
    }

    /// The first leaf value met walking `key` (HF's `common_prefix_search(..)[0]`).
    fn first_leaf(&self, key: &[u8]) -> Option<u32> {
        let units = &self.units;
        let mut pos = offset(units[0]);
        for &c in key {
            if c == 0 {
                return None;
            }
            pos ^= c as usize;
            let unit = *units.get(pos)?;
            if label(unit) != c as u32 {
                return None;
            }
            pos ^= offset(unit);
            if has_leaf(unit) {
                return Some(value(*units.get(pos)?));
            }
        }
        None
    }

    /// The replacement of `key` as `(start, len)` in the strings blob.
    fn lookup(&self, key: &[u8]) -> Option<(u32, u32)> {
        let start = self.first_leaf(key)? as usize;
        let rest = self.strings.as_bytes().get(start..)?;
        let len = rest.iter().position(|&b| b == 0).unwrap_or(rest.len());
        // A start inside a character would make HF panic: treat as no entry.
        self.strings.get(start..start + len)?;
        Some((start as u32, len as u32))
    }

    #[inline]
    fn string(&self, (start, len): (u32, u32)) -> &str {
        &self.strings[start as usize..(start + len) as usize]
    }

    /// The replacement of `chunk`, if the map has one.
    pub fn transform(&self, chunk: &str) -> Option<&str> {
        let b = chunk.as_bytes();
        if b.len() == 1 && b[0] < 128 {
            return self.ascii[b[0] as usize].map(|r| self.string(r));
        }
        self.lookup(b).map(|r| self.string(r))
    }

    /// Appends the normalization of `text` to `out`. Returns whether the first
    /// character written comes from the first character of `text` (always true
    /// here: HF aligns the first replacement to the start even when a leading
    /// cluster maps to nothing).
    pub fn normalize(&self, text: &str, out: &mut String) -> bool {
        out.reserve(text.len());
        if text.is_ascii() {
            self.normalize_ascii(text, out);
        } else {
            for g in text.graphemes(true) {
                self.normalize_cluster(g, out);
            }
        }
        true
    }

    fn normalize_ascii(&self, text: &str, out: &mut String) {
        let b = text.as_bytes();
        let mut i = 0;
        let mut run = 0; // start of the pending unchanged run
        while i < b.len() {
            // "\r\n" is one grapheme cluster: looked up whole first.
            if b[i] == b'\r' && b.get(i + 1) == Some(&b'\n') {
                out.push_str(&text[run..i]);
                self.normalize_cluster(&text[i..i + 2], out);
                i += 2;
                run = i;
                continue;
            }
            if let Some(r) = self.ascii[b[i] as usize] {
                out.push_str(&text[run..i]);
                out.push_str(self.string(r));
                run = i + 1;
            }
            i += 1;
        }
        out.push_str(&text[run..]);
    }

    #[inline]
    fn normalize_cluster(&self, g: &str, out: &mut String) {
        if g.len() < 6 {
            if let Some(r) = self.transform(g) {
                out.push_str(r);
                return;
            }
        }
        for (i, c) in g.char_indices() {
            let part = &g[i..i + c.len_utf8()];
            match self.transform(part) {
                Some(r) => out.push_str(r),
                None => out.push(c),
            }
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Builds a char map by hand: a double array over the keys, laid out the
    /// simple way (each node's children at `base ^ label`), with the given
    /// replacement strings. Used by the unit tests of this module and of the
    /// normalizers. Only keys of up to a few bytes; panics if the layout fails.
    pub(crate) fn build_map(entries: &[(&str, &str)]) -> Vec<u8> {
        // Replacement strings blob.
        let mut strings = Vec::new();
        let mut values = Vec::new();
        for (_, v) in entries {
            values.push(strings.len() as u32);
            strings.extend_from_slice(v.as_bytes());
            strings.push(0);
        }
        // Trie of keys: node = (children: Vec<(byte, node)>, leaf value).
        #[derive(Default)]
        struct N {
            kids: Vec<(u8, usize)>,
            leaf: Option<u32>,
        }
        let mut nodes = vec![N::default()];
        for (k, (key, _)) in entries.iter().enumerate() {
            let mut n = 0;
            for &c in key.as_bytes() {
                n = match nodes[n].kids.iter().find(|x| x.0 == c) {
                    Some(&(_, m)) => m,
                    None => {
                        nodes.push(N::default());
                        let m = nodes.len() - 1;
                        nodes[n].kids.push((c, m));
                        m
                    }
                };
            }
            nodes[n].leaf = Some(values[k]);
        }
        // Layout: every node gets a block of 512 units; a node at position p with
        // offset o has children at p ^ o ^ label and its leaf value at p ^ o.
        // Offsets are multiples of 512 below 2^22 (encoded unshifted: bit 9 clear).
        let mut units = vec![0u32; 512 * (nodes.len() + 2)];
        let mut pos = vec![0usize; nodes.len()];
        let mut next_block = 1usize;
        let mut stack = vec![0usize];
        while let Some(n) = stack.pop() {
            let p = pos[n];
            let base = next_block * 512;
            next_block += 1;
            let off = base ^ p;
            // offset(u) = (u >> 10) << 0 when bit 9 is clear: store off << 10.
            assert!(off < (1 << 21));
            let keep = units[p] & 0x3FF; // label/leaf bits set by the parent
            units[p] = ((off as u32) << 10) | keep;
            let node_base = p ^ off; // == base
            if let Some(v) = nodes[n].leaf {
                units[node_base] = v; // value unit: label bits irrelevant
                units[p] |= 1 << 8;
            }
            for &(c, m) in &nodes[n].kids {
                let q = node_base ^ c as usize;
                units[q] = c as u32;
                pos[m] = q;
                stack.push(m);
            }
        }
        let mut out = Vec::new();
        out.extend_from_slice(&((units.len() * 4) as u32).to_le_bytes());
        for u in &units {
            out.extend_from_slice(&u.to_le_bytes());
        }
        out.extend_from_slice(&strings);
        out
    }

    #[test]
    fn hand_built_map_lookups() {
        let map = CharsMap::parse(&build_map(&[
            ("\t", " "),
            ("\r", " "),
            ("Ａ", "A"),
            ("e\u{301}", "é"),
            ("\u{200B}", ""),
            ("ﬁ", "fi"),
        ]))
        .unwrap();
        assert_eq!(map.transform("\t"), Some(" "));
        assert_eq!(map.transform("a"), None);
        assert_eq!(map.transform("Ａ"), Some("A"));
        assert_eq!(map.transform("e\u{301}"), Some("é"));
        assert_eq!(map.transform("e"), None);
        assert_eq!(map.transform("\u{200B}"), Some(""));
        let norm = |s: &str| {
            let mut o = String::new();
            map.normalize(s, &mut o);
            o
        };
        assert_eq!(norm("a\tb"), "a b");
        // "\r\n" is one cluster: its shortest prefix "\r" replaces both bytes.
        assert_eq!(norm("a\r\nb"), "a b");
        assert_eq!(norm("a\n\rb"), "a\n b");
        // A cluster whose first character has an entry loses its mark.
        assert_eq!(norm("Ａ\u{301}x"), "Ax");
        // Decomposed e + acute (one cluster) is composed.
        assert_eq!(norm("cafe\u{301}"), "café");
        assert_eq!(norm("x\u{200B}y ﬁ"), "xy fi");
        // A cluster of 6 bytes or more goes character by character.
        assert_eq!(norm("Ａ\u{301}\u{301}"), "A\u{301}\u{301}");
        // NUL stops a walk: never mapped.
        assert_eq!(norm("\0\t"), "\0 ");
    }

    #[test]
    fn corrupt_maps_are_refused_or_harmless() {
        assert!(CharsMap::parse(&[]).is_err());
        assert!(CharsMap::parse(&[4, 0, 0]).is_err());
        assert!(CharsMap::parse(&[0, 0, 0, 0]).is_err());
        assert!(CharsMap::parse(&[8, 0, 0, 0, 1, 2, 3, 4]).is_err());
        let e = CharsMap::parse(&[4, 0, 0, 0, 0, 0, 0, 0, 0xFF]).unwrap_err();
        assert!(e.message().contains("precompiled_charsmap"), "{e}");
        // Units pointing anywhere: lookups find nothing, never panic.
        let mut bytes = vec![16, 0, 0, 0];
        for u in [0xFFFF_FFFFu32, 0x1234_5678, 0xFFFF_FF00, 7] {
            bytes.extend_from_slice(&u.to_le_bytes());
        }
        bytes.extend_from_slice(b"ab\0");
        let map = CharsMap::parse(&bytes).unwrap();
        let mut o = String::new();
        map.normalize("héllo\r\n wörld ﬁ", &mut o);
        assert!(!o.is_empty());
    }
}
