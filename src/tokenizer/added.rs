//! Added (and special) tokens matched in the text, as HF `AddedVocabulary`.
//!
//! Tokens with `normalized: false` are matched in the RAW text before
//! normalization; each remaining segment is then normalized and the tokens with
//! `normalized: true` are matched in it (their patterns are their contents run
//! through the same normalizer). Matching is leftmost-longest and
//! non-overlapping; then, per match:
//! - `single_word`: the match is dropped (left as text) when the character
//!   before or after it is a word character (`\w`);
//! - `lstrip`: the whitespace (`\s`) before it joins the token (but never text
//!   already taken by the previous token);
//! - `rstrip`: the whitespace after it joins the token.

use std::sync::LazyLock;

use super::normalizers::Normalizer;
use crate::error::{Error, Result};

/// One added token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AddedToken {
    /// Its id.
    pub id: u32,
    /// Its text.
    pub content: String,
    /// Only match as a whole word.
    pub single_word: bool,
    /// Swallow the whitespace on its left.
    pub lstrip: bool,
    /// Swallow the whitespace on its right.
    pub rstrip: bool,
    /// Match in the normalized text (its content normalized too).
    pub normalized: bool,
    /// A special token (skipped by `decode(.., skip_special)`).
    pub special: bool,
}

/// A piece of a text after splitting on added tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Split<'a> {
    /// Plain text starting at byte `start` of the text given to the split.
    Text(&'a str, usize),
    /// An added token's id, and the bytes `[start, stop)` of the text it
    /// takes (its string, and the whitespace `lstrip`/`rstrip` take).
    Token(u32, usize, usize),
}

/// Leftmost-longest matcher over a few strings.
#[derive(Debug, Clone, Default)]
struct Matcher {
    /// `(pattern, token index)`, sorted by first byte then longest first.
    pats: Vec<(Box<str>, u32)>,
    /// `pats[start[b] as usize..start[b + 1] as usize]` begin with byte `b`.
    start: Vec<u32>,
}

impl Matcher {
    fn new(mut pats: Vec<(Box<str>, u32)>) -> Matcher {
        pats.retain(|(p, _)| !p.is_empty());
        // Equal patterns: keep one (the last given, as HF's content map does).
        pats.reverse();
        let mut seen = std::collections::HashSet::new();
        pats.retain(|(p, _)| seen.insert(p.clone()));
        pats.sort_by(|a, b| {
            a.0.as_bytes()[0]
                .cmp(&b.0.as_bytes()[0])
                .then(b.0.len().cmp(&a.0.len()))
        });
        let mut start = vec![0u32; 257];
        for (p, _) in &pats {
            start[p.as_bytes()[0] as usize + 1] += 1;
        }
        for b in 0..256 {
            start[b + 1] += start[b];
        }
        Matcher { pats, start }
    }

    fn is_empty(&self) -> bool {
        self.pats.is_empty()
    }

    /// The leftmost-longest match at or after `from`: `(start, end, token)`.
    #[inline]
    fn find(&self, text: &str, from: usize) -> Option<(usize, usize, u32)> {
        let bytes = text.as_bytes();
        for i in from..bytes.len() {
            let b = bytes[i] as usize;
            let (lo, hi) = (self.start[b] as usize, self.start[b + 1] as usize);
            if lo == hi {
                continue;
            }
            let rest = &bytes[i..];
            for (p, t) in &self.pats[lo..hi] {
                if rest.starts_with(p.as_bytes()) {
                    return Some((i, i + p.len(), *t));
                }
            }
        }
        None
    }
}

static STARTS_WITH_WORD: LazyLock<Option<regex::Regex>> =
    LazyLock::new(|| regex::Regex::new(r"^\w").ok());
static ENDS_WITH_WORD: LazyLock<Option<regex::Regex>> =
    LazyLock::new(|| regex::Regex::new(r"\w$").ok());

fn starts_with_word(s: &str) -> bool {
    STARTS_WITH_WORD.as_ref().is_some_and(|r| r.is_match(s))
}

fn ends_with_word(s: &str) -> bool {
    // Only the last character matters.
    let last = s.char_indices().next_back().map_or(s.len(), |(i, _)| i);
    ENDS_WITH_WORD
        .as_ref()
        .is_some_and(|r| r.is_match(&s[last..]))
}

/// The added tokens of a tokenizer, ready to split texts.
#[derive(Debug, Clone, Default)]
pub struct AddedVocab {
    tokens: Vec<AddedToken>,
    raw: Matcher,
    normalized: Matcher,
    has_whitespace: bool,
}

impl AddedVocab {
    /// Builds the matchers. The patterns of `normalized` tokens are their
    /// contents run through `normalizer`.
    ///
    /// # Errors
    /// [`crate::ErrorKind::Model`] if two tokens share an id.
    pub fn new(tokens: Vec<AddedToken>, normalizer: Option<&Normalizer>) -> Result<AddedVocab> {
        let mut ids: Vec<u32> = tokens.iter().map(|t| t.id).collect();
        ids.sort_unstable();
        if let Some(w) = ids.windows(2).find(|w| w[0] == w[1]) {
            return Err(Error::model(format!(
                "added_tokens: id {} is given twice",
                w[0]
            )));
        }
        let mut raw = Vec::new();
        let mut norm = Vec::new();
        let (mut a, mut b) = (String::new(), String::new());
        for (i, t) in tokens.iter().enumerate() {
            if t.normalized {
                let p = match normalizer {
                    Some(n) => {
                        n.normalize(&t.content, &mut a, &mut b);
                        a.clone()
                    }
                    None => t.content.clone(),
                };
                norm.push((p.into_boxed_str(), i as u32));
            } else {
                raw.push((t.content.clone().into_boxed_str(), i as u32));
            }
        }
        let raw = Matcher::new(raw);
        let normalized = Matcher::new(norm);
        let has_whitespace = raw
            .pats
            .iter()
            .chain(&normalized.pats)
            .any(|(p, _)| p.chars().any(char::is_whitespace));
        Ok(AddedVocab {
            tokens,
            raw,
            normalized,
            has_whitespace,
        })
    }

    /// The tokens.
    pub fn tokens(&self) -> &[AddedToken] {
        &self.tokens
    }

    /// Whether some pattern contains whitespace.
    pub(crate) fn has_whitespace(&self) -> bool {
        self.has_whitespace
    }

    /// Whether some token is matched in the normalized text.
    pub(crate) fn has_normalized(&self) -> bool {
        !self.normalized.is_empty()
    }

    /// The token with this id, if it is an added token.
    pub fn get(&self, id: u32) -> Option<&AddedToken> {
        self.tokens.iter().find(|t| t.id == id)
    }

    /// Splits the raw `text` on the `normalized: false` tokens.
    pub fn split_raw<'a>(&self, text: &'a str, f: impl FnMut(Split<'a>)) {
        self.split(&self.raw, text, f)
    }

    /// Splits a normalized segment on the `normalized: true` tokens.
    pub fn split_normalized<'a>(&self, text: &'a str, f: impl FnMut(Split<'a>)) {
        self.split(&self.normalized, text, f)
    }

    fn split<'a>(&self, m: &Matcher, text: &'a str, mut f: impl FnMut(Split<'a>)) {
        if m.is_empty() {
            if !text.is_empty() {
                f(Split::Text(text, 0));
            }
            return;
        }
        let mut taken = 0usize; // end of the last emitted piece
        let mut from = 0usize; // where the matcher resumes
        while let Some((s, e, t)) = m.find(text, from) {
            from = e;
            let tok = &self.tokens[t as usize];
            if tok.single_word {
                let start_space = s == 0 || !ends_with_word(&text[..s]);
                let stop_space = e == text.len() || !starts_with_word(&text[e..]);
                if !start_space || !stop_space {
                    continue;
                }
            }
            let mut start = s;
            let mut stop = e;
            if tok.lstrip {
                let trimmed = text[..s].trim_end_matches(char::is_whitespace).len();
                start = trimmed.max(taken);
            }
            if tok.rstrip {
                stop += text[e..].len() - text[e..].trim_start_matches(char::is_whitespace).len();
            }
            // A token that starts inside the whitespace swallowed by the previous
            // one's rstrip: keep the pieces disjoint (HF would overlap them).
            start = start.max(taken);
            stop = stop.max(start);
            if taken < start {
                f(Split::Text(&text[taken..start], taken));
            }
            f(Split::Token(tok.id, start, stop));
            taken = stop;
            from = from.max(stop);
        }
        if taken < text.len() {
            f(Split::Text(&text[taken..], taken));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tok(id: u32, content: &str) -> AddedToken {
        AddedToken {
            id,
            content: content.into(),
            single_word: false,
            lstrip: false,
            rstrip: false,
            normalized: false,
            special: true,
        }
    }

    fn pieces(v: &AddedVocab, text: &str) -> Vec<String> {
        let mut out = Vec::new();
        v.split_raw(text, |s| match s {
            Split::Text(t, at) => out.push(format!("{t:?}@{at}")),
            Split::Token(id, _, _) => out.push(format!("#{id}")),
        });
        out
    }

    #[test]
    fn leftmost_longest_and_literal_specials() {
        let v = AddedVocab::new(vec![tok(0, "<s>"), tok(2, "</s>"), tok(5, "<s>x")], None).unwrap();
        assert_eq!(pieces(&v, "a<s>b</s>"), ["\"a\"@0", "#0", "\"b\"@4", "#2"]);
        assert_eq!(pieces(&v, "<s>xy"), ["#5", "\"y\"@4"]);
        assert_eq!(pieces(&v, "<s<s>"), ["\"<s\"@0", "#0"]);
        assert_eq!(pieces(&v, ""), Vec::<String>::new());
    }

    #[test]
    fn lstrip_rstrip() {
        let mut m = tok(9, "<mask>");
        m.lstrip = true;
        let v = AddedVocab::new(vec![m.clone()], None).unwrap();
        assert_eq!(pieces(&v, "a \t<mask> b"), ["\"a\"@0", "#9", "\" b\"@9"]);
        assert_eq!(pieces(&v, "  <mask>"), ["#9"]);
        // Two tokens: the second's lstrip cannot take what the first took.
        let mut r = tok(7, "<r>");
        r.rstrip = true;
        let v = AddedVocab::new(vec![m, r], None).unwrap();
        assert_eq!(pieces(&v, "<r>  <mask>x"), ["#7", "#9", "\"x\"@11"]);
        assert_eq!(pieces(&v, "x<r> \u{3000}y"), ["\"x\"@0", "#7", "\"y\"@8"]);
    }

    #[test]
    fn single_word() {
        let mut w = tok(4, "ab");
        w.single_word = true;
        let v = AddedVocab::new(vec![w], None).unwrap();
        assert_eq!(
            pieces(&v, "ab cab ab_ ab."),
            ["#4", "\" cab ab_ \"@2", "#4", "\".\"@13"]
        );
        assert_eq!(pieces(&v, "éab"), ["\"éab\"@0"]);
    }

    #[test]
    fn normalized_tokens_use_the_normalizer() {
        let n = Normalizer::Lowercase;
        let mut t = tok(3, "YES");
        t.normalized = true;
        let v = AddedVocab::new(vec![t], Some(&n)).unwrap();
        assert!(v.has_normalized());
        let mut out = Vec::new();
        v.split_normalized("say yes!", |s| out.push(s));
        assert_eq!(
            out,
            [
                Split::Text("say ", 0),
                Split::Token(3, 4, 7),
                Split::Text("!", 7)
            ]
        );
        // Not matched in the raw text.
        assert_eq!(pieces(&v, "yes"), ["\"yes\"@0"]);
    }

    #[test]
    fn duplicate_ids_are_refused() {
        let e = AddedVocab::new(vec![tok(1, "a"), tok(1, "b")], None).unwrap_err();
        assert!(e.message().contains("added_tokens"), "{e}");
    }
}
