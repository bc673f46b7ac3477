//! Strings that know, for each of their bytes, which bytes of the input they
//! come from: HF `tokenizers`' `NormalizedString` alignments, for the byte
//! offsets of the pipeline tokenizers ([`super::pipeline::Pipeline`]).
//!
//! Every normalizer and pre-tokenizer step is expressed as HF expresses it:
//! a list of `(char, change)` transformations applied by HF's `transform`
//! (a change of 0 replaces one character and takes its alignment, a positive
//! change inserts a character aligned to the byte before, a negative one also
//! removes the next `-change` characters), or HF's `replace`, `prepend`,
//! `filter`, `slice` and `split`. So the offsets follow HF's choices, quirks
//! included (a `Precompiled` deletion at the very start shifts alignments, a
//! composed character keeps only its first part's alignment). This path is
//! separate from `encode_raw`, which never pays for it.

use std::ops::Range;

use unicode_normalization_alignments::char::is_combining_mark;
use unicode_normalization_alignments::UnicodeNormalization;
use unicode_segmentation::UnicodeSegmentation;

use super::byte_level::{bytes_to_unicode, for_each_split};
use super::normalizers::Normalizer;
use super::pre_tokenizers::{PreTokenizer, PrependScheme, WHITESPACE_RE};
use super::precompiled::CharsMap;

/// GPT-2's byte-to-character table.
static BYTE_CHAR: [char; 256] = bytes_to_unicode();

/// A string with the input byte range `[start, end)` of each of its bytes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Aligned {
    /// The text.
    pub s: String,
    /// One input range per byte of `s`.
    pub al: Vec<(usize, usize)>,
    /// Where this string starts in the input (HF's `original_shift`): what
    /// `(0, 0)` alignments mean, and what `prepend_scheme: first` checks.
    pub base: usize,
}

impl Aligned {
    /// `text`, found at byte `base` of the input: each byte aligned to its
    /// character.
    pub fn new(text: &str, base: usize) -> Aligned {
        let mut al = Vec::with_capacity(text.len());
        for (i, c) in text.char_indices() {
            let r = (base + i, base + i + c.len_utf8());
            al.extend(std::iter::repeat_n(r, c.len_utf8()));
        }
        Aligned {
            s: text.to_string(),
            al,
            base,
        }
    }

    /// The input range of the bytes `r` of `s` (HF's `convert_offsets`: the
    /// smallest start and largest end of their alignments); `None` if empty.
    pub fn span(&self, r: Range<usize>) -> Option<(usize, usize)> {
        let a = self.al.get(r)?;
        let start = a.iter().map(|x| x.0).min()?;
        let end = a.iter().map(|x| x.1).max()?;
        Some((start, end))
    }

    /// HF's `slice` of the bytes `r`: its base is where they start in the input.
    pub fn slice(&self, r: Range<usize>) -> Aligned {
        let base = self.span(r.clone()).map_or(self.base, |x| x.0);
        Aligned {
            s: self.s[r.clone()].to_string(),
            al: self.al[r].to_vec(),
            base,
        }
    }

    /// The alignment of byte `i` (the string's start if out of range, where HF
    /// would fail).
    fn at(&self, i: usize) -> (usize, usize) {
        self.al.get(i).copied().unwrap_or((self.base, self.base))
    }

    /// HF's `NormalizedString::transform` over the whole string, skipping
    /// `initial_offset` characters first.
    pub fn transform(
        &self,
        dest: impl IntoIterator<Item = (char, isize)>,
        initial_offset: usize,
    ) -> Aligned {
        let mut old = self.s.chars();
        let mut offset: usize = (&mut old).take(initial_offset).map(char::len_utf8).sum();
        let mut out = Aligned {
            s: String::with_capacity(self.s.len()),
            al: Vec::with_capacity(self.al.len()),
            base: self.base,
        };
        for (c, change) in dest {
            let align = if change > 0 {
                if offset < 1 {
                    (self.base, self.base)
                } else {
                    self.at(offset - 1)
                }
            } else {
                self.at(offset)
            };
            if change <= 0 {
                offset += old.next().map_or(0, char::len_utf8);
            }
            if change < 0 {
                offset += (&mut old)
                    .take(change.unsigned_abs())
                    .map(char::len_utf8)
                    .sum::<usize>();
            }
            out.push(c, align);
        }
        out
    }

    fn push(&mut self, c: char, align: (usize, usize)) {
        self.s.push(c);
        self.al.extend(std::iter::repeat_n(align, c.len_utf8()));
    }

    fn push_slice(&mut self, from: &Aligned, r: Range<usize>) {
        self.s.push_str(&from.s[r.clone()]);
        self.al.extend_from_slice(&from.al[r]);
    }

    /// HF's `replace` of every match of `matches` (byte ranges, in order) by
    /// `content`: each of its characters is aligned to the last byte of the
    /// match.
    fn replace(&self, matches: impl Iterator<Item = Range<usize>>, content: &str) -> Aligned {
        let mut out = Aligned {
            base: self.base,
            ..Aligned::default()
        };
        let mut last = 0;
        for m in matches {
            out.push_slice(self, last..m.start);
            let align = if m.end < 1 {
                (self.base, self.base)
            } else {
                self.at(m.end - 1)
            };
            for c in content.chars() {
                out.push(c, align);
            }
            last = m.end;
        }
        out.push_slice(self, last..self.s.len());
        out
    }

    /// HF's `prepend`: `p`'s characters take the first character's alignment
    /// (nothing happens to an empty string).
    fn prepend(&self, p: &str) -> Aligned {
        let Some(first) = self.s.chars().next() else {
            return self.clone();
        };
        let align = self.at(0);
        let mut out = Aligned {
            base: self.base,
            ..Aligned::default()
        };
        for c in p.chars() {
            out.push(c, align);
        }
        // The first character, re-inserted, keeps its own (last byte's) alignment.
        let n = first.len_utf8();
        out.push(first, self.at(n - 1));
        out.push_slice(self, n..self.s.len());
        out
    }
}

/// HF `Precompiled`'s transformations: each grapheme cluster shorter than 6
/// bytes is looked up whole, else each of its characters.
fn precompiled(map: &CharsMap, a: &Aligned) -> Aligned {
    /// HF's `replace` helper of the Precompiled normalizer.
    fn replace(t: &mut Vec<(char, isize)>, old: &str, new: &str) {
        let diff = new.chars().count() as isize - old.chars().count() as isize;
        t.extend(new.chars().map(|c| (c, 0)));
        if diff > 0 {
            for x in t.iter_mut().rev().take(diff as usize) {
                x.1 = 1;
            }
        } else if diff < 0 {
            if let Some(x) = t.last_mut() {
                x.1 += diff;
            }
        }
    }
    let mut t = Vec::with_capacity(a.s.len());
    let mut modified = false;
    for g in a.s.graphemes(true) {
        if g.len() < 6 {
            if let Some(n) = map.transform(g) {
                modified = true;
                replace(&mut t, g, n);
                continue;
            }
        }
        for (i, c) in g.char_indices() {
            let part = &g[i..i + c.len_utf8()];
            match map.transform(part) {
                Some(n) => {
                    modified = true;
                    replace(&mut t, part, n);
                }
                None => t.push((c, 0)),
            }
        }
    }
    if modified {
        a.transform(t, 0)
    } else {
        a.clone()
    }
}

/// One normalizer step on an aligned string, as HF runs it.
pub(crate) fn normalize(n: &Normalizer, a: &Aligned) -> Aligned {
    match n {
        Normalizer::Sequence(l) => {
            let mut cur = a.clone();
            for step in l {
                cur = normalize(step, &cur);
            }
            cur
        }
        Normalizer::Precompiled(map) => precompiled(map, a),
        Normalizer::Replace { regex, content } => {
            a.replace(regex.find_iter(&a.s).map(|m| m.range()), content)
        }
        Normalizer::Strip { left, right } => {
            let mut r = 0..a.s.len();
            if *left {
                r.start = a.s.len() - a.s.trim_start_matches(char::is_whitespace).len();
            }
            if *right {
                r.end = a.s.trim_end_matches(char::is_whitespace).len().max(r.start);
            }
            let mut out = Aligned {
                base: a.base,
                ..Aligned::default()
            };
            out.push_slice(a, r);
            out
        }
        Normalizer::StripAccents => {
            let mut out = Aligned {
                base: a.base,
                ..Aligned::default()
            };
            for (i, c) in a.s.char_indices() {
                if !is_combining_mark(c) {
                    out.push_slice(a, i..i + c.len_utf8());
                }
            }
            out
        }
        Normalizer::Nfc => a.transform(a.s.nfc(), 0),
        Normalizer::Nfd => a.transform(a.s.nfd(), 0),
        Normalizer::Nfkc => a.transform(a.s.nfkc(), 0),
        Normalizer::Nfkd => a.transform(a.s.nfkd(), 0),
        Normalizer::Lowercase => a.transform(
            a.s.chars().flat_map(|c| {
                c.to_lowercase()
                    .enumerate()
                    .map(|(i, l)| (l, isize::from(i > 0)))
            }),
            0,
        ),
        Normalizer::Prepend(p) => a.prepend(p),
    }
}

/// The words of `a` (never empty) after the pre-tokenizer `p`, as HF splits
/// them (each a slice or a transformation of `a`, with its alignments).
pub(crate) fn words(p: Option<&PreTokenizer>, a: Aligned, out: &mut Vec<Aligned>) {
    let steps: &[PreTokenizer] = match p {
        None => &[],
        Some(PreTokenizer::Sequence(l)) => l,
        Some(one) => std::slice::from_ref(one),
    };
    let mut cur = vec![a];
    for step in steps {
        let mut next = Vec::new();
        for piece in &cur {
            split_one(step, piece, &mut next);
        }
        cur = next;
    }
    out.extend(cur.into_iter().filter(|w| !w.s.is_empty()));
}

/// One pre-tokenizer step on one piece.
fn split_one(p: &PreTokenizer, a: &Aligned, out: &mut Vec<Aligned>) {
    match p {
        PreTokenizer::Sequence(l) => {
            let mut cur = vec![a.clone()];
            for step in l {
                let mut next = Vec::new();
                for piece in &cur {
                    split_one(step, piece, &mut next);
                }
                cur = next;
            }
            out.extend(cur);
        }
        PreTokenizer::Split(s) => s.for_each_piece(&a.s, |r| out.push(a.slice(r))),
        PreTokenizer::WhitespaceSplit => {
            let mut start = None;
            for (i, c) in a.s.char_indices() {
                if c.is_whitespace() {
                    if let Some(s) = start.take() {
                        out.push(a.slice(s..i));
                    }
                } else if start.is_none() {
                    start = Some(i);
                }
            }
            if let Some(s) = start {
                out.push(a.slice(s..a.s.len()));
            }
        }
        PreTokenizer::Whitespace => {
            if let Some(re) = WHITESPACE_RE.as_ref() {
                for m in re.find_iter(&a.s) {
                    out.push(a.slice(m.range()));
                }
            }
        }
        PreTokenizer::Metaspace {
            replacement,
            prepend_scheme,
            split,
        } => {
            let rep = *replacement;
            let mut rb = [0u8; 4];
            let rs: &str = rep.encode_utf8(&mut rb);
            let spaces = a.s.match_indices(' ').map(|(i, _)| i..i + 1);
            let mut n = a.replace(spaces, rs);
            let prepend = !n.s.starts_with(rep)
                && match prepend_scheme {
                    PrependScheme::Always => true,
                    PrependScheme::First => n.base == 0,
                    PrependScheme::Never => false,
                };
            if prepend {
                n = n.prepend(rs);
            }
            if !*split {
                out.push(n);
                return;
            }
            // Cut before every replacement character (merged with the next).
            let mut start = 0;
            for (i, _) in n.s.match_indices(rep) {
                if i > start {
                    out.push(n.slice(start..i));
                }
                start = i;
            }
            if start < n.s.len() {
                out.push(n.slice(start..n.s.len()));
            }
        }
        PreTokenizer::ByteLevel(b) => {
            let n = if b.add_prefix_space && !a.s.starts_with(' ') {
                a.prepend(" ")
            } else {
                a.clone()
            };
            let mut ranges = Vec::new();
            if b.use_regex {
                let base = n.s.as_ptr() as usize;
                for_each_split(&n.s, |w| {
                    let at = w.as_ptr() as usize - base;
                    ranges.push(at..at + w.len());
                });
            } else {
                ranges.push(0..n.s.len());
            }
            for r in ranges {
                let piece = n.slice(r);
                // Every byte of a character becomes a character aligned to it.
                let t = piece.s.chars().flat_map(|c| {
                    let mut buf = [0u8; 4];
                    let bytes: Vec<u8> = c.encode_utf8(&mut buf).as_bytes().to_vec();
                    bytes
                        .into_iter()
                        .enumerate()
                        .map(|(i, b)| (BYTE_CHAR[b as usize], isize::from(i > 0)))
                });
                out.push(piece.transform(t.collect::<Vec<_>>(), 0));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transform_follows_hf() {
        // "ab": replace "a" by "xy" (x takes a's alignment, y inserted after it).
        let a = Aligned::new("ab", 10);
        let t = a.transform([('x', 0), ('y', 1), ('b', 0)], 0);
        assert_eq!(t.s, "xyb");
        assert_eq!(t.al, [(10, 11), (10, 11), (11, 12)]);
        // Removing: "abc" -> "a" absorbing "b" and "c".
        let a = Aligned::new("abc", 0);
        let t = a.transform([('a', -2)], 0);
        assert_eq!((t.s.as_str(), t.span(0..1)), ("a", Some((0, 1))));
        // Initial offset: skip "a".
        let t = a.transform([('b', 0), ('c', 0)], 1);
        assert_eq!(t.al, [(1, 2), (2, 3)]);
    }

    #[test]
    fn replace_and_prepend() {
        let a = Aligned::new("a  b", 0);
        let r = a.replace(std::iter::once(1..3), "▁");
        assert_eq!(r.s, "a▁b");
        assert_eq!(r.span(1..4), Some((2, 3)));
        let p = Aligned::new("éb", 5).prepend("▁");
        assert_eq!(p.s, "▁éb");
        assert_eq!(p.span(0..3), Some((5, 7)));
        assert_eq!(p.span(5..6), Some((7, 8)));
    }

    #[test]
    fn metaspace_words_and_bases() {
        let p = PreTokenizer::Sequence(vec![
            PreTokenizer::WhitespaceSplit,
            PreTokenizer::Metaspace {
                replacement: '▁',
                prepend_scheme: PrependScheme::First,
                split: true,
            },
        ]);
        let mut w = Vec::new();
        words(Some(&p), Aligned::new("ab  cd", 0), &mut w);
        let got: Vec<_> = w
            .iter()
            .map(|x| (x.s.as_str(), x.base, x.span(0..x.s.len())))
            .collect();
        // Only the word at the input's start gets a "▁".
        assert_eq!(got, [("▁ab", 0, Some((0, 2))), ("cd", 4, Some((4, 6)))]);
    }
}
