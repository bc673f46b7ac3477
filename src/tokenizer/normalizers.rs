//! The normalizers of HF `tokenizers` found in SentencePiece-style `tokenizer.json`
//! files: `Precompiled`, `Replace`, `Strip`, `StripAccents`, `NFC`/`NFD`/`NFKC`/
//! `NFKD`, `Lowercase`, `Prepend` and `Sequence` of them.
//!
//! Exactness notes:
//! - NFC/NFD/NFKC/NFKD come from `unicode-normalization-alignments` (HF's own
//!   tables); `Lowercase` is per character `char::to_lowercase`, as HF;
//! - `Strip` trims `char::is_whitespace`; `StripAccents` drops combining marks;
//! - `Replace` with a `String` pattern replaces every non-overlapping occurrence
//!   left to right; with a `Regex` pattern it uses the `regex` crate where HF uses
//!   Oniguruma: the same matches for the patterns real files carry (`" {2,}"`), and
//!   a pattern the `regex` crate cannot compile (look-around, possessive
//!   quantifiers) is refused by name instead of run differently.
//!
//! Each normalizer also reports whether the first output character still comes
//! from the first input character (HF's alignment of the normalized string):
//! `Metaspace` with `prepend_scheme: "first"` needs it.

use serde_json::Value;
use unicode_normalization_alignments::char::is_combining_mark;
use unicode_normalization_alignments::UnicodeNormalization;

use super::precompiled::CharsMap;
use crate::error::{Error, Result};

/// One normalizer (a `Sequence` is flattened at construction).
#[derive(Debug, Clone)]
pub enum Normalizer {
    /// The SentencePiece char map.
    Precompiled(Box<CharsMap>),
    /// Replace every match of `pattern` by `content`.
    Replace {
        /// The compiled pattern (a literal is escaped).
        regex: regex::Regex,
        /// The replacement.
        content: String,
    },
    /// Trim whitespace on the left and/or right.
    Strip {
        /// Trim the start.
        left: bool,
        /// Trim the end.
        right: bool,
    },
    /// Drop combining marks.
    StripAccents,
    /// Unicode NFC.
    Nfc,
    /// Unicode NFD.
    Nfd,
    /// Unicode NFKC.
    Nfkc,
    /// Unicode NFKD.
    Nfkd,
    /// Per-character lowercase.
    Lowercase,
    /// Prepend a string to a non-empty text.
    Prepend(String),
    /// Each in turn (never nested, never empty).
    Sequence(Vec<Normalizer>),
}

/// Regex size limit: bounds the time and memory a hostile pattern can cost.
const REGEX_SIZE_LIMIT: usize = 1 << 20;

/// Compiles a `Replace` pattern.
pub(crate) fn compile_pattern(pattern: &Value, path: &str) -> Result<regex::Regex> {
    let bad = |d: String| Error::model(format!("{path}.pattern: {d}"));
    let obj = pattern
        .as_object()
        .ok_or_else(|| bad("not an object with a String or Regex field".into()))?;
    let src = if let Some(s) = obj.get("String") {
        regex::escape(
            s.as_str()
                .ok_or_else(|| bad("String is not a string".into()))?,
        )
    } else if let Some(s) = obj.get("Regex") {
        s.as_str()
            .ok_or_else(|| bad("Regex is not a string".into()))?
            .to_string()
    } else {
        return Err(bad("neither a String nor a Regex pattern".into()));
    };
    regex::RegexBuilder::new(&src)
        .size_limit(REGEX_SIZE_LIMIT)
        .dfa_size_limit(REGEX_SIZE_LIMIT)
        .build()
        .map_err(|e| {
            let first = e.to_string();
            let first = first.lines().last().unwrap_or("").trim().to_string();
            bad(format!("unsupported regex {src:?} ({first})"))
        })
}

pub(crate) fn get_bool(v: &Value, key: &str, default: bool, path: &str) -> Result<bool> {
    match v.get(key) {
        None | Some(Value::Null) => Ok(default),
        Some(Value::Bool(b)) => Ok(*b),
        Some(_) => Err(Error::model(format!("{path}.{key}: not a boolean"))),
    }
}

pub(crate) fn get_str<'a>(v: &'a Value, key: &str, path: &str) -> Result<&'a str> {
    v.get(key)
        .and_then(Value::as_str)
        .ok_or_else(|| Error::model(format!("{path}.{key}: missing or not a string")))
}

impl Normalizer {
    /// Builds a normalizer from its HF JSON (`path` names it in errors). A
    /// `Precompiled` uses `charsmap` (the raw map; its own `precompiled_charsmap`
    /// field, if any, is ignored: the caller has extracted it). `None` for an
    /// empty `Sequence`.
    ///
    /// # Errors
    /// [`crate::ErrorKind::Model`] naming the field for an unknown type, a bad
    /// field, an uncompilable pattern or a `Precompiled` without a char map.
    pub fn from_json(v: &Value, charsmap: Option<&[u8]>, path: &str) -> Result<Option<Normalizer>> {
        let mut flat = Vec::new();
        Self::collect(v, charsmap, path, &mut flat, 0)?;
        Ok(match flat.len() {
            0 => None,
            1 => flat.pop(),
            _ => Some(Normalizer::Sequence(flat)),
        })
    }

    fn collect(
        v: &Value,
        charsmap: Option<&[u8]>,
        path: &str,
        out: &mut Vec<Normalizer>,
        depth: usize,
    ) -> Result<()> {
        if depth > 8 {
            return Err(Error::model(format!("{path}: sequences nested too deeply")));
        }
        let ty = get_str(v, "type", path)?;
        let n = match ty {
            "Sequence" => {
                let list = v
                    .get("normalizers")
                    .and_then(Value::as_array)
                    .ok_or_else(|| Error::model(format!("{path}.normalizers: not a list")))?;
                for (i, item) in list.iter().enumerate() {
                    Self::collect(
                        item,
                        charsmap,
                        &format!("{path}.normalizers[{i}]"),
                        out,
                        depth + 1,
                    )?;
                }
                return Ok(());
            }
            "Precompiled" => {
                let bytes = charsmap.ok_or_else(|| {
                    Error::model(format!("{path}: Precompiled without a char map"))
                })?;
                Normalizer::Precompiled(Box::new(CharsMap::parse(bytes)?))
            }
            "Replace" => {
                let pattern = v
                    .get("pattern")
                    .ok_or_else(|| Error::model(format!("{path}.pattern: missing")))?;
                Normalizer::Replace {
                    regex: compile_pattern(pattern, path)?,
                    content: get_str(v, "content", path)?.to_string(),
                }
            }
            "Strip" => Normalizer::Strip {
                left: get_bool(v, "strip_left", false, path)?,
                right: get_bool(v, "strip_right", false, path)?,
            },
            "StripAccents" => Normalizer::StripAccents,
            "NFC" => Normalizer::Nfc,
            "NFD" => Normalizer::Nfd,
            "NFKC" => Normalizer::Nfkc,
            "NFKD" => Normalizer::Nfkd,
            "Lowercase" => Normalizer::Lowercase,
            "Prepend" => Normalizer::Prepend(get_str(v, "prepend", path)?.to_string()),
            other => {
                return Err(Error::unsupported(format!(
                    "{path}: normalizer type {other:?} is not supported"
                )))
            }
        };
        out.push(n);
        Ok(())
    }

    /// Normalizes `text` into `out` (cleared first); `tmp` is a reusable buffer.
    /// Returns whether the first output character comes from the first input
    /// character (see the module notes).
    pub fn normalize(&self, text: &str, out: &mut String, tmp: &mut String) -> bool {
        out.clear();
        match self {
            Normalizer::Sequence(list) => {
                let Some((first, rest)) = list.split_first() else {
                    out.push_str(text);
                    return true;
                };
                let mut origin = first.apply(text, out);
                for n in rest {
                    tmp.clear();
                    origin &= n.apply(out, tmp);
                    std::mem::swap(out, tmp);
                }
                origin
            }
            n => n.apply(text, out),
        }
    }

    /// One (non-sequence) step: appends the normalization of `text` to `out`.
    fn apply(&self, text: &str, out: &mut String) -> bool {
        match self {
            Normalizer::Sequence(_) => unreachable_sequence(text, out),
            Normalizer::Precompiled(map) => map.normalize(text, out),
            Normalizer::Replace { regex, content } => {
                let mut last = 0;
                let mut origin = true;
                for m in regex.find_iter(text) {
                    if m.start() == 0 && !m.is_empty() && content.is_empty() {
                        origin = false;
                    }
                    out.push_str(&text[last..m.start()]);
                    out.push_str(content);
                    last = m.end();
                }
                out.push_str(&text[last..]);
                origin
            }
            Normalizer::Strip { left, right } => {
                let mut s = text;
                let mut origin = true;
                if *left {
                    let t = s.trim_start_matches(char::is_whitespace);
                    origin = t.len() == s.len();
                    s = t;
                }
                if *right {
                    s = s.trim_end_matches(char::is_whitespace);
                }
                out.push_str(s);
                origin || s.is_empty()
            }
            Normalizer::StripAccents => {
                let mut origin = true;
                let mut first = true;
                for c in text.chars() {
                    if is_combining_mark(c) {
                        if first {
                            origin = false;
                        }
                    } else {
                        out.push(c);
                    }
                    first = false;
                }
                origin
            }
            Normalizer::Nfc | Normalizer::Nfd | Normalizer::Nfkc | Normalizer::Nfkd => {
                if text.is_ascii() {
                    out.push_str(text);
                    return true;
                }
                match self {
                    Normalizer::Nfc => out.extend(text.nfc().map(|(c, _)| c)),
                    Normalizer::Nfd => out.extend(text.nfd().map(|(c, _)| c)),
                    Normalizer::Nfkc => out.extend(text.nfkc().map(|(c, _)| c)),
                    _ => out.extend(text.nfkd().map(|(c, _)| c)),
                }
                true
            }
            Normalizer::Lowercase => {
                if text.is_ascii() {
                    out.extend(text.bytes().map(|b| b.to_ascii_lowercase() as char));
                } else {
                    for c in text.chars() {
                        out.extend(c.to_lowercase());
                    }
                }
                true
            }
            Normalizer::Prepend(p) => {
                if !text.is_empty() {
                    out.push_str(p);
                }
                out.push_str(text);
                true
            }
        }
    }

    /// Bytes held beyond the struct (for memory reports).
    pub fn heap_bytes(&self) -> usize {
        match self {
            Normalizer::Precompiled(m) => m.heap_bytes(),
            Normalizer::Sequence(l) => l.iter().map(Normalizer::heap_bytes).sum(),
            Normalizer::Replace { content, .. } => content.len() + 1024,
            Normalizer::Prepend(p) => p.len(),
            _ => 0,
        }
    }

    /// Whether a cut of the input just before an ASCII space that sits between
    /// two ASCII alphanumerics normalizes to a prefix of the whole text's
    /// normalization (used to bound the work on long texts).
    pub(crate) fn cut_safe(&self) -> bool {
        match self {
            Normalizer::Sequence(l) => l.iter().all(Normalizer::cut_safe),
            // A pattern could match across the cut (it may contain a space and
            // letters); only patterns made of spaces alone are known safe.
            Normalizer::Replace { regex, .. } => {
                let s = regex.as_str();
                s == " {2,}" || s == " +" || s == "  +" || s == r"\ \ +"
            }
            // Removes a space at the end of the prefix only if the text ends
            // there; the prefix ends with an alphanumeric.
            _ => true,
        }
    }
}

#[cold]
fn unreachable_sequence(text: &str, out: &mut String) -> bool {
    // Sequences are flattened at construction; keep the text unchanged if one
    // ever gets here rather than panicking.
    out.push_str(text);
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn norm(v: Value, text: &str) -> (String, bool) {
        let n = Normalizer::from_json(&v, None, "normalizer")
            .unwrap()
            .unwrap();
        let (mut out, mut tmp) = (String::new(), String::new());
        let origin = n.normalize(text, &mut out, &mut tmp);
        (out, origin)
    }

    #[test]
    fn replace_string_and_regex() {
        let r = json!({"type": "Replace", "pattern": {"Regex": " {2,}"}, "content": " "});
        assert_eq!(norm(r.clone(), "a  b   c d").0, "a b c d");
        assert_eq!(norm(r, "  x").0, " x");
        let s = json!({"type": "Replace", "pattern": {"String": "a.b"}, "content": "X"});
        assert_eq!(norm(s, "a.b axb a.ba.b").0, "X axb XX");
        let e = json!({"type": "Replace", "pattern": {"Regex": "^x"}, "content": ""});
        assert_eq!(norm(e, "xy"), ("y".to_string(), false));
        let bad = json!({"type": "Replace", "pattern": {"Regex": "(?<=a)b"}, "content": ""});
        let err = Normalizer::from_json(&bad, None, "normalizer").unwrap_err();
        assert!(err.message().contains("normalizer.pattern"), "{err}");
    }

    #[test]
    fn strip_and_accents() {
        let both = json!({"type": "Strip", "strip_left": true, "strip_right": true});
        assert_eq!(norm(both, " \t a b \u{3000}"), ("a b".to_string(), false));
        let right = json!({"type": "Strip", "strip_left": false, "strip_right": true});
        assert_eq!(norm(right, " a "), (" a".to_string(), true));
        let acc = json!({"type": "StripAccents"});
        assert_eq!(norm(acc, "e\u{301}a\u{300}").0, "ea");
    }

    #[test]
    fn unicode_forms_and_lowercase() {
        assert_eq!(norm(json!({"type": "NFC"}), "e\u{301}").0, "é");
        assert_eq!(norm(json!({"type": "NFD"}), "é").0, "e\u{301}");
        assert_eq!(norm(json!({"type": "NFKC"}), "ﬁ Ａ ①").0, "fi A 1");
        assert_eq!(norm(json!({"type": "NFKD"}), "ﬁé").0, "fie\u{301}");
        assert_eq!(
            norm(json!({"type": "Lowercase"}), "ÀB İ Σ").0,
            "àb i\u{307} σ"
        );
        assert_eq!(
            norm(json!({"type": "Prepend", "prepend": "▁"}), "ab").0,
            "▁ab"
        );
        assert_eq!(norm(json!({"type": "Prepend", "prepend": "▁"}), "").0, "");
    }

    #[test]
    fn sequences_apply_in_order_and_flatten() {
        let seq = json!({"type": "Sequence", "normalizers": [
            {"type": "NFKC"},
            {"type": "Sequence", "normalizers": [{"type": "Lowercase"}]},
            {"type": "Replace", "pattern": {"String": "fi"}, "content": "F"},
        ]});
        assert_eq!(norm(seq.clone(), "ﬁ FI").0, "F F");
        let n = Normalizer::from_json(&seq, None, "n").unwrap().unwrap();
        assert!(matches!(&n, Normalizer::Sequence(l) if l.len() == 3));
        // Two and four steps end in the right buffer too.
        let two =
            json!({"type": "Sequence", "normalizers": [{"type": "Lowercase"}, {"type": "NFKC"}]});
        assert_eq!(norm(two, "ＡB").0, "ab");
        let four = json!({"type": "Sequence", "normalizers": [
            {"type": "Lowercase"}, {"type": "NFKC"},
            {"type": "Prepend", "prepend": "<"}, {"type": "Prepend", "prepend": ">"}]});
        assert_eq!(norm(four, "ＡB").0, "><ab");
        let empty = json!({"type": "Sequence", "normalizers": []});
        assert!(Normalizer::from_json(&empty, None, "n").unwrap().is_none());
    }

    #[test]
    fn unknown_and_malformed_are_named() {
        for (v, what) in [
            (json!({"type": "Nope"}), "\"Nope\""),
            (json!({"type": "Replace", "content": ""}), "n.pattern"),
            (json!({"type": "Precompiled"}), "char map"),
            (json!({"type": "Strip", "strip_left": 3}), "n.strip_left"),
            (json!({"no": 1}), "n.type"),
        ] {
            let e = Normalizer::from_json(&v, None, "n").unwrap_err();
            assert!(e.message().contains(what), "{e}");
        }
    }
}
