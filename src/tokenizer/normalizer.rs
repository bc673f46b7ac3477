//! `BertNormalizer` of HF `tokenizers`: clean text, pad CJK characters with spaces,
//! strip accents (NFD, drop `Mn`), lowercase per character.
//!
//! Exactness notes (see the format research notes, section 5.2):
//! - "control" is the Unicode 8 category `Cc`, `Cf` or `Co` (crate `unicode_categories`
//!   0.1.1, as `tokenizers` uses), never `Cn`/`Cs`; `\t \n \r` are not control.
//! - whitespace is `\t \n \r` or Rust's `char::is_whitespace`.
//! - NFD comes from `unicode-normalization-alignments` 0.1.12 (Unicode 9), `Mn` from
//!   `unicode_categories` (Unicode 8).
//! - lowercasing is per character with `char::to_lowercase` (no Final_Sigma rule).

use unicode_categories::UnicodeCategories;
use unicode_normalization_alignments::UnicodeNormalization;

/// The normalizer options (the fields of HF `BertNormalizer`, with `strip_accents`
/// already resolved).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Normalizer {
    /// Drop control characters, U+0000 and U+FFFD; map whitespace to `' '`.
    pub clean_text: bool,
    /// Put a space before and after every CJK ideograph.
    pub handle_chinese_chars: bool,
    /// NFD, then drop nonspacing marks (`Mn`).
    pub strip_accents: bool,
    /// Per-character full lowercase mapping.
    pub lowercase: bool,
}

/// BERT's "control" test: `Cc`, `Cf` or `Co` (Unicode 8), except `\t \n \r`.
#[inline]
pub fn is_control(c: char) -> bool {
    match c {
        '\t' | '\n' | '\r' => false,
        _ => c.is_other(),
    }
}

/// BERT's whitespace test: `\t \n \r` or `char::is_whitespace`.
#[inline]
pub fn is_whitespace(c: char) -> bool {
    matches!(c, '\t' | '\n' | '\r') || c.is_whitespace()
}

/// The CJK ideograph ranges of the fast tokenizer (note 0x2B920, not 0x2B820).
#[inline]
pub fn is_chinese_char(c: char) -> bool {
    matches!(c as u32,
        0x4E00..=0x9FFF
        | 0x3400..=0x4DBF
        | 0x20000..=0x2A6DF
        | 0x2A700..=0x2B73F
        | 0x2B740..=0x2B81F
        | 0x2B920..=0x2CEAF
        | 0xF900..=0xFAFF
        | 0x2F800..=0x2FA1F)
}

impl Normalizer {
    /// Normalizes `text` into `out` (cleared first). `scratch` is a reusable buffer
    /// for the intermediate string of the non-ASCII path.
    pub fn normalize(&self, text: &str, out: &mut String, scratch: &mut String) {
        out.clear();
        if text.is_ascii() {
            self.normalize_ascii(text, out);
        } else {
            self.normalize_unicode(text, out, scratch);
        }
    }

    /// ASCII-only input: no CJK, NFD is the identity, no `Mn`; exactly equivalent to
    /// the general path.
    fn normalize_ascii(&self, text: &str, out: &mut String) {
        out.reserve(text.len());
        for &b in text.as_bytes() {
            let mut c = b;
            if self.clean_text {
                match b {
                    b'\t' | b'\n' | b'\r' => c = b' ',
                    // NUL and the other C0 controls plus DEL are `Cc`: dropped
                    // (this includes VT and FF, although they are whitespace).
                    0x00..=0x1F | 0x7F => continue,
                    _ => {}
                }
            }
            if self.lowercase {
                c = c.to_ascii_lowercase();
            }
            out.push(c as char);
        }
    }

    fn normalize_unicode(&self, text: &str, out: &mut String, scratch: &mut String) {
        // Stage 1: clean text and CJK padding.
        scratch.clear();
        scratch.reserve(text.len() + 8);
        for c in text.chars() {
            if self.clean_text {
                if c == '\0' || c == '\u{FFFD}' || is_control(c) {
                    continue;
                }
                if is_whitespace(c) {
                    scratch.push(' ');
                    continue;
                }
            }
            if self.handle_chinese_chars && is_chinese_char(c) {
                scratch.push(' ');
                scratch.push(c);
                scratch.push(' ');
            } else {
                scratch.push(c);
            }
        }
        // Stage 2: strip accents, then lowercase.
        out.reserve(scratch.len());
        if self.strip_accents {
            for (c, _) in scratch.chars().nfd() {
                if !c.is_mark_nonspacing() {
                    self.push_lower(c, out);
                }
            }
        } else {
            for c in scratch.chars() {
                self.push_lower(c, out);
            }
        }
    }

    #[inline]
    fn push_lower(&self, c: char, out: &mut String) {
        if !self.lowercase {
            out.push(c);
        } else if c.is_ascii() {
            out.push(c.to_ascii_lowercase());
        } else {
            out.extend(c.to_lowercase());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bert() -> Normalizer {
        Normalizer {
            clean_text: true,
            handle_chinese_chars: true,
            strip_accents: true,
            lowercase: true,
        }
    }

    fn norm(n: &Normalizer, s: &str) -> String {
        let (mut out, mut scratch) = (String::new(), String::new());
        n.normalize(s, &mut out, &mut scratch);
        out
    }

    /// The plain per-character definition, used as an oracle for the ASCII fast path.
    fn oracle(n: &Normalizer, s: &str) -> String {
        let mut out = String::new();
        let mut scratch = String::new();
        n.normalize_unicode(s, &mut out, &mut scratch);
        out
    }

    #[test]
    fn ascii_fast_path_matches_general_path() {
        let all: String = (0u8..=127).map(|b| b as char).collect();
        for n in [
            bert(),
            Normalizer {
                clean_text: false,
                handle_chinese_chars: true,
                strip_accents: false,
                lowercase: false,
            },
            Normalizer {
                clean_text: true,
                handle_chinese_chars: false,
                strip_accents: false,
                lowercase: false,
            },
            Normalizer {
                clean_text: false,
                handle_chinese_chars: false,
                strip_accents: true,
                lowercase: true,
            },
        ] {
            assert_eq!(norm(&n, &all), oracle(&n, &all), "{n:?}");
            for b in 0u8..=127 {
                let s = format!("a{}B", b as char);
                assert_eq!(norm(&n, &s), oracle(&n, &s), "{n:?} byte {b}");
            }
        }
    }

    #[test]
    fn sigma_lowercases_per_char() {
        assert_eq!(norm(&bert(), "ΟΔΟΣ"), "οδοσ");
    }

    #[test]
    fn dotted_capital_i() {
        assert_eq!(norm(&bert(), "İstanbul"), "istanbul");
        // Without accent stripping, the full lowercase mapping expands.
        let n = Normalizer {
            strip_accents: false,
            ..bert()
        };
        assert_eq!(norm(&n, "İ"), "i\u{307}");
    }

    #[test]
    fn controls_and_whitespace() {
        assert_eq!(norm(&bert(), "a\u{000B}b\u{2028}c"), "ab c");
        assert_eq!(norm(&bert(), "a\u{E000}b"), "ab");
        assert_eq!(norm(&bert(), "a\u{E0001}b"), "ab");
        assert_eq!(norm(&bert(), "a\u{0378}b"), "a\u{0378}b");
        assert_eq!(norm(&bert(), "a\u{0}b\u{FFFD}c"), "abc");
        assert_eq!(norm(&bert(), "a\tb\nc\rd"), "a b c d");
        assert_eq!(norm(&bert(), "a\u{200B}b\u{FEFF}c"), "abc");
        assert_eq!(norm(&bert(), "a\u{A0}b\u{3000}c"), "a b c");
    }

    #[test]
    fn accents() {
        assert_eq!(norm(&bert(), "Café"), "cafe");
        assert_eq!(norm(&bert(), "Cafe\u{301}"), "cafe");
        assert_eq!(norm(&bert(), "naïve Ångström"), "naive angstrom");
        let keep = Normalizer {
            strip_accents: false,
            ..bert()
        };
        assert_eq!(norm(&keep, "Café"), "café");
    }

    #[test]
    fn cjk_padding() {
        assert_eq!(norm(&bert(), "ab中文c"), "ab 中  文 c");
        assert_eq!(norm(&bert(), "x\u{2B820}y"), "x\u{2B820}y");
        assert_eq!(norm(&bert(), "x\u{2B920}y"), "x \u{2B920} y");
        // Hiragana is not in the ranges.
        assert_eq!(norm(&bert(), "ひら"), "ひら");
    }
}
