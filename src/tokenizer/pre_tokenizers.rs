//! The pre-tokenizers of HF `tokenizers` found in real `tokenizer.json` files:
//! `Metaspace` (every form found in real files), `WhitespaceSplit`, `Whitespace`,
//! `ByteLevel`, `Split` (Qwen2/Qwen3's regex, Gemma's `" "`: [`super::split`])
//! and `Sequence` of them.
//!
//! `Metaspace` replaces every `' '` with the replacement character (`▁`),
//! prepends one to the text (`prepend_scheme` `always`; `first`: only when the
//! text starts at the very beginning of the input; `never`) unless the text
//! already starts with it, then, with `split`, cuts the text before every
//! replacement character. Old files say `add_prefix_space: bool` instead of
//! `prepend_scheme` (`false` means `never`); `split` defaults to true.
//!
//! The byte-level BPE pre-tokenizer plugs in as one more variant,
//! `ByteLevel(super::byte_level::ByteLevel)`, with one arm in
//! `PreTokenizer::run_one` calling its `for_each_word` (its words are already
//! in the byte-to-unicode alphabet) and one in [`PreTokenizer::from_json`].

use std::sync::LazyLock;

use serde_json::Value;

use super::byte_level::{push_mapped, ByteLevel};

use super::normalizers::{get_bool, get_str};
use super::split::Split;
use crate::error::{Error, Result};

/// Metaspace's prepend scheme.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PrependScheme {
    /// Always prepend.
    Always,
    /// Only to the text at the start of the input.
    First,
    /// Never.
    Never,
}

/// One pre-tokenizer (a `Sequence` is flattened at construction).
#[derive(Debug, Clone, PartialEq)]
pub enum PreTokenizer {
    /// SentencePiece's meta-space handling.
    Metaspace {
        /// The character that stands for a space (`▁`).
        replacement: char,
        /// When to prepend one.
        prepend_scheme: PrependScheme,
        /// Cut before every replacement character.
        split: bool,
    },
    /// Split on whitespace, dropping it.
    WhitespaceSplit,
    /// `\w+|[^\w\s]+` words, dropping the rest.
    Whitespace,
    /// HF `ByteLevel`: GPT-2's split pattern, then every byte as a character
    /// of GPT-2's byte table.
    ByteLevel(ByteLevel),
    /// HF `Split`: cut at the matches of a pattern (see [`super::split`]).
    Split(Box<Split>),
    /// Each in turn on every piece of the previous one.
    Sequence(Vec<PreTokenizer>),
}

pub(crate) static WHITESPACE_RE: LazyLock<Option<regex::Regex>> =
    LazyLock::new(|| regex::Regex::new(r"\w+|[^\w\s]+").ok());

/// Reusable buffers, one per step of a sequence.
#[derive(Debug, Default)]
pub struct PreScratch {
    bufs: Vec<String>,
}

impl PreScratch {
    pub(crate) fn trim(&mut self, keep: usize) {
        for b in &mut self.bufs {
            if b.capacity() > keep {
                *b = String::new();
            }
        }
    }
}

impl PreTokenizer {
    /// Builds a pre-tokenizer from its HF JSON (`path` names it in errors);
    /// `None` for an empty `Sequence`.
    ///
    /// # Errors
    /// [`crate::ErrorKind::Model`] naming the field for a bad field,
    /// [`crate::ErrorKind::Unsupported`] for a type this pipeline does not run.
    pub fn from_json(v: &Value, path: &str) -> Result<Option<PreTokenizer>> {
        let mut flat = Vec::new();
        Self::collect(v, path, &mut flat, 0)?;
        Ok(match flat.len() {
            0 => None,
            1 => flat.pop(),
            _ => Some(PreTokenizer::Sequence(flat)),
        })
    }

    fn collect(v: &Value, path: &str, out: &mut Vec<PreTokenizer>, depth: usize) -> Result<()> {
        if depth > 8 {
            return Err(Error::model(format!("{path}: sequences nested too deeply")));
        }
        let p = match get_str(v, "type", path)? {
            "Sequence" => {
                let list = v
                    .get("pretokenizers")
                    .and_then(Value::as_array)
                    .ok_or_else(|| Error::model(format!("{path}.pretokenizers: not a list")))?;
                for (i, item) in list.iter().enumerate() {
                    Self::collect(item, &format!("{path}.pretokenizers[{i}]"), out, depth + 1)?;
                }
                return Ok(());
            }
            "Metaspace" => {
                let rep = get_str(v, "replacement", path)?;
                let mut chars = rep.chars();
                let replacement = match (chars.next(), chars.next()) {
                    (Some(c), None) => c,
                    _ => {
                        return Err(Error::model(format!(
                            "{path}.replacement: {rep:?} is not one character"
                        )))
                    }
                };
                let mut prepend_scheme = match v.get("prepend_scheme") {
                    None | Some(Value::Null) => PrependScheme::Always,
                    Some(s) => match s.as_str() {
                        Some("always") => PrependScheme::Always,
                        Some("first") => PrependScheme::First,
                        Some("never") => PrependScheme::Never,
                        _ => {
                            return Err(Error::model(format!(
                            "{path}.prepend_scheme: {s} is not \"always\", \"first\" or \"never\""
                        )))
                        }
                    },
                };
                if !get_bool(v, "add_prefix_space", true, path)? {
                    if prepend_scheme != PrependScheme::Never
                        && v.get("prepend_scheme").is_some_and(|s| !s.is_null())
                    {
                        return Err(Error::model(format!(
                            "{path}: add_prefix_space false contradicts prepend_scheme"
                        )));
                    }
                    prepend_scheme = PrependScheme::Never;
                }
                PreTokenizer::Metaspace {
                    replacement,
                    prepend_scheme,
                    split: get_bool(v, "split", true, path)?,
                }
            }
            "WhitespaceSplit" => PreTokenizer::WhitespaceSplit,
            "Whitespace" => PreTokenizer::Whitespace,
            "Split" => PreTokenizer::Split(Box::new(Split::from_json(v, path)?)),
            "ByteLevel" => PreTokenizer::ByteLevel(ByteLevel {
                add_prefix_space: get_bool(v, "add_prefix_space", true, path)?,
                trim_offsets: get_bool(v, "trim_offsets", true, path)?,
                use_regex: get_bool(v, "use_regex", true, path)?,
            }),
            other => {
                return Err(Error::unsupported(format!(
                    "{path}: pre-tokenizer type {other:?} is not supported"
                )))
            }
        };
        out.push(p);
        Ok(())
    }

    /// The HF JSON of this pre-tokenizer (the effective settings).
    pub fn to_json(&self) -> Value {
        match self {
            PreTokenizer::Metaspace {
                replacement,
                prepend_scheme,
                split,
            } => serde_json::json!({
                "type": "Metaspace",
                "replacement": replacement.to_string(),
                "prepend_scheme": match prepend_scheme {
                    PrependScheme::Always => "always",
                    PrependScheme::First => "first",
                    PrependScheme::Never => "never",
                },
                "split": split,
            }),
            PreTokenizer::WhitespaceSplit => serde_json::json!({"type": "WhitespaceSplit"}),
            PreTokenizer::Whitespace => serde_json::json!({"type": "Whitespace"}),
            PreTokenizer::ByteLevel(b) => serde_json::json!({
                "type": "ByteLevel",
                "add_prefix_space": b.add_prefix_space,
                "trim_offsets": b.trim_offsets,
                "use_regex": b.use_regex,
            }),
            PreTokenizer::Split(s) => s.to_json(),
            PreTokenizer::Sequence(l) => serde_json::json!({
                "type": "Sequence",
                "pretokenizers": l.iter().map(PreTokenizer::to_json).collect::<Vec<_>>(),
            }),
        }
    }

    /// The Metaspace step, if any: `(replacement, prepend_scheme, split)`.
    pub fn metaspace(&self) -> Option<(char, PrependScheme, bool)> {
        match self {
            PreTokenizer::Metaspace {
                replacement,
                prepend_scheme,
                split,
            } => Some((*replacement, *prepend_scheme, *split)),
            PreTokenizer::Sequence(l) => l.iter().find_map(PreTokenizer::metaspace),
            _ => None,
        }
    }

    /// Whether every word ends at an ASCII space (so a text cut just before a
    /// space between two alphanumerics yields a prefix of the words).
    pub(crate) fn cut_safe(&self) -> bool {
        let steps: &[PreTokenizer] = match self {
            PreTokenizer::Sequence(l) => l,
            one => std::slice::from_ref(one),
        };
        steps.iter().any(|p| match p {
            PreTokenizer::WhitespaceSplit | PreTokenizer::Whitespace => true,
            PreTokenizer::Metaspace {
                replacement, split, ..
            } => *split && *replacement != ' ' && !replacement.is_alphanumeric(),
            // GPT-2's pattern ends a letter or digit run at a space, and the space
            // starts the next word.
            PreTokenizer::ByteLevel(b) => b.use_regex,
            PreTokenizer::Split(_) | PreTokenizer::Sequence(_) => false,
        }) && steps.iter().all(|p| match p {
            // A Metaspace whose replacement could glue words back is not safe.
            PreTokenizer::Metaspace { replacement, .. } => !replacement.is_alphanumeric(),
            _ => true,
        })
    }

    /// Calls `f` with every word of `text` (never empty). `origin`: how many
    /// leading bytes of `text` HF aligns to the very start of the input (for
    /// `prepend_scheme: first`; 0 when `text` is elsewhere).
    pub fn for_each_word(
        &self,
        text: &str,
        origin: usize,
        scratch: &mut PreScratch,
        f: &mut dyn FnMut(&str),
    ) {
        let steps: &[PreTokenizer] = match self {
            PreTokenizer::Sequence(l) => l,
            one => std::slice::from_ref(one),
        };
        if scratch.bufs.len() < steps.len() {
            scratch.bufs.resize_with(steps.len(), String::new);
        }
        run_list(steps, text, origin, &mut scratch.bufs, f);
    }

    /// Whether a `Metaspace` step prepends only at the start of the input.
    pub(crate) fn needs_origin(&self) -> bool {
        matches!(self.metaspace(), Some((_, PrependScheme::First, _)))
    }

    /// One step: calls `f(piece, piece_origin)` for each piece of `text`.
    fn run_one(&self, text: &str, origin: usize, buf: &mut String, f: &mut dyn FnMut(&str, usize)) {
        match self {
            PreTokenizer::WhitespaceSplit => {
                let mut start = None;
                for (i, c) in text.char_indices() {
                    if c.is_whitespace() {
                        if let Some(s) = start.take() {
                            f(&text[s..i], origin.saturating_sub(s));
                        }
                    } else if start.is_none() {
                        start = Some(i);
                    }
                }
                if let Some(s) = start {
                    f(&text[s..], origin.saturating_sub(s));
                }
            }
            PreTokenizer::Whitespace => {
                if let Some(re) = WHITESPACE_RE.as_ref() {
                    for m in re.find_iter(text) {
                        f(m.as_str(), origin.saturating_sub(m.start()));
                    }
                }
            }
            PreTokenizer::Metaspace {
                replacement,
                prepend_scheme,
                split,
            } => {
                let rep = *replacement;
                buf.clear();
                // Checked after the spaces are replaced, as HF does.
                let starts = text.starts_with(rep) || text.starts_with(' ');
                let prepend = match prepend_scheme {
                    PrependScheme::Always => !starts,
                    PrependScheme::First => !starts && origin > 0,
                    PrependScheme::Never => false,
                };
                if prepend {
                    buf.push(rep);
                }
                if rep.is_ascii() || !text.contains(' ') {
                    if text.contains(' ') {
                        buf.extend(text.chars().map(|c| if c == ' ' { rep } else { c }));
                    } else {
                        buf.push_str(text);
                    }
                } else {
                    let mut rb = [0u8; 4];
                    let rs: &str = rep.encode_utf8(&mut rb);
                    let mut last = 0;
                    for (i, _) in text.match_indices(' ') {
                        buf.push_str(&text[last..i]);
                        buf.push_str(rs);
                        last = i + 1;
                    }
                    buf.push_str(&text[last..]);
                }
                // The origin in `buf`: the prepended character and the wider
                // replacement of the spaces in it.
                let spaces = text[..origin.min(text.len())].matches(' ').count();
                let origin = if origin == 0 {
                    0
                } else {
                    origin
                        + if prepend { rep.len_utf8() } else { 0 }
                        + spaces * (rep.len_utf8() - 1)
                };
                if !*split {
                    if !buf.is_empty() {
                        f(buf, origin);
                    }
                    return;
                }
                let mut start = 0;
                for (i, _) in buf.match_indices(rep) {
                    if i > start {
                        f(&buf[start..i], origin.saturating_sub(start));
                    }
                    start = i;
                }
                if start < buf.len() {
                    f(&buf[start..], origin.saturating_sub(start));
                }
            }
            PreTokenizer::ByteLevel(b) => {
                // Byte offset of each word in `text` (a prefix space counts).
                let mut at = 0;
                b.for_each_raw_word(text, |w| {
                    buf.clear();
                    push_mapped(w, buf);
                    f(buf, origin.saturating_sub(at));
                    at += w.len();
                });
            }
            PreTokenizer::Split(s) => {
                s.for_each_piece(text, |r| {
                    let at = r.start;
                    f(&text[r], origin.saturating_sub(at));
                });
            }
            PreTokenizer::Sequence(l) => {
                // Flattened at construction; run the steps in turn anyway.
                let mut bufs = vec![String::new(); l.len()];
                run_list(l, text, origin, &mut bufs, &mut |w| f(w, 0));
            }
        }
    }
}

fn run_list(
    steps: &[PreTokenizer],
    text: &str,
    origin: usize,
    bufs: &mut [String],
    f: &mut dyn FnMut(&str),
) {
    match (steps.split_first(), bufs.split_first_mut()) {
        (Some((first, rest)), Some((buf, deeper))) => {
            first.run_one(text, origin, buf, &mut |piece, o| {
                run_list(rest, piece, o, deeper, f);
            });
        }
        _ => {
            if !text.is_empty() {
                f(text);
            }
        }
    }
}

/// HF's Metaspace decoder: the replacement becomes a space, and the first
/// token loses its replacement characters unless the scheme is `never`.
pub fn metaspace_decode(tokens: &[&str], replacement: char, scheme: PrependScheme) -> String {
    let mut s = String::new();
    for (i, t) in tokens.iter().enumerate() {
        for c in t.chars() {
            if c == replacement {
                if !(i == 0 && scheme != PrependScheme::Never) {
                    s.push(' ');
                }
            } else {
                s.push(c);
            }
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn words(v: Value, text: &str, at_start: bool) -> Vec<String> {
        let origin = if at_start {
            text.chars().next().map_or(0, char::len_utf8)
        } else {
            0
        };
        let p = PreTokenizer::from_json(&v, "pre_tokenizer")
            .unwrap()
            .unwrap();
        let mut out = Vec::new();
        p.for_each_word(text, origin, &mut PreScratch::default(), &mut |w| {
            out.push(w.to_string())
        });
        out
    }

    #[test]
    fn metaspace_forms() {
        let new = json!({"type": "Metaspace", "replacement": "▁", "prepend_scheme": "always", "split": true});
        assert_eq!(words(new.clone(), "a  b", true), ["▁a", "▁", "▁b"]);
        assert_eq!(words(new.clone(), "  a", true), ["▁", "▁a"]);
        assert_eq!(words(new.clone(), "a ", true), ["▁a", "▁"]);
        assert_eq!(words(new.clone(), "▁▁x", true), ["▁", "▁x"]);
        assert_eq!(
            words(new.clone(), "hello▁world", false),
            ["▁hello", "▁world"]
        );
        assert_eq!(words(new, "a\tb", false), ["▁a\tb"]);
        // Old files: add_prefix_space (+ the ignored str_rep), split by default.
        let old = json!({"type": "Metaspace", "replacement": "▁", "add_prefix_space": true, "str_rep": "▁"});
        assert_eq!(words(old, "x y", true), ["▁x", "▁y"]);
        let old_no = json!({"type": "Metaspace", "replacement": "▁", "add_prefix_space": false});
        assert_eq!(words(old_no, "x y", true), ["x", "▁y"]);
        let first = json!({"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first", "split": false});
        assert_eq!(words(first.clone(), "x y", true), ["▁x▁y"]);
        assert_eq!(words(first, "x y", false), ["x▁y"]);
        let never = json!({"type": "Metaspace", "replacement": "▁", "prepend_scheme": "never", "split": true});
        assert_eq!(words(never, " x", true), ["▁x"]);
        let bad = json!({"type": "Metaspace", "replacement": "▁", "prepend_scheme": "always", "add_prefix_space": false});
        assert!(PreTokenizer::from_json(&bad, "p").is_err());
        let bad = json!({"type": "Metaspace", "replacement": "ab"});
        assert!(PreTokenizer::from_json(&bad, "p")
            .unwrap_err()
            .message()
            .contains("p.replacement"));
    }

    #[test]
    fn whitespace_split_then_metaspace_as_transformers_5() {
        let v5 = json!({"type": "Sequence", "pretokenizers": [
            {"type": "WhitespaceSplit"},
            {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "always", "split": true}]});
        assert_eq!(words(v5.clone(), " a\t b\n", true), ["▁a", "▁b"]);
        assert_eq!(words(v5.clone(), " \t\u{3000}", true), Vec::<String>::new());
        assert_eq!(words(v5.clone(), "▁", true), ["▁"]);
        assert_eq!(words(v5, "x▁▁y", true), ["▁x", "▁", "▁y"]);
        let first = json!({"type": "Sequence", "pretokenizers": [
            {"type": "WhitespaceSplit"},
            {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first", "split": true}]});
        assert_eq!(words(first.clone(), "ab cd", true), ["▁ab", "cd"]);
        assert_eq!(words(first, "  ab cd", true), ["ab", "cd"]);
    }

    #[test]
    fn whitespace_words() {
        let w = json!({"type": "Whitespace"});
        assert_eq!(
            words(w, "Hi, there!! a_b", true),
            ["Hi", ",", "there", "!!", "a_b"]
        );
    }

    #[test]
    fn decoder() {
        assert_eq!(
            metaspace_decode(&["▁a", "b", "▁c▁"], '▁', PrependScheme::Always),
            "ab c "
        );
        assert_eq!(
            metaspace_decode(&["▁a", "▁c"], '▁', PrependScheme::Never),
            " a c"
        );
    }
}
