//! `BertPreTokenizer` of HF `tokenizers`: split on whitespace (removed), then isolate
//! every punctuation character as a word of its own.

use unicode_categories::UnicodeCategories;

/// BERT punctuation: any ASCII punctuation (0x21–0x2F, 0x3A–0x40, 0x5B–0x60,
/// 0x7B–0x7E, so also the symbols `$`, `+`, `<`, `=`, `>`, `^`, `` ` ``, `|`, `~`) or
/// Unicode 8 category `Pc Pd Ps Pe Pi Pf Po`.
#[inline]
pub fn is_punctuation(c: char) -> bool {
    if c.is_ascii() {
        c.is_ascii_punctuation()
    } else {
        c.is_punctuation()
    }
}

/// Calls `f` with each word of `text`, in order: maximal runs of characters that are
/// neither whitespace (`char::is_whitespace`) nor punctuation, and each punctuation
/// character alone.
#[inline]
pub fn for_each_word(text: &str, mut f: impl FnMut(&str)) {
    let bytes = text.as_bytes();
    let mut start = 0usize; // start of the current word
    let mut i = 0usize;
    while i < bytes.len() {
        let b = bytes[i];
        let (c, len) = if b < 0x80 {
            (b as char, 1)
        } else {
            // `i` is a char boundary: we only ever advance by whole characters.
            match text[i..].chars().next() {
                Some(c) => (c, c.len_utf8()),
                None => break,
            }
        };
        if c.is_whitespace() {
            if start < i {
                f(&text[start..i]);
            }
            start = i + len;
        } else if is_punctuation(c) {
            if start < i {
                f(&text[start..i]);
            }
            f(&text[i..i + len]);
            start = i + len;
        }
        i += len;
    }
    if start < bytes.len() {
        f(&text[start..]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(s: &str) -> Vec<String> {
        let mut v = Vec::new();
        for_each_word(s, |w| v.push(w.to_string()));
        v
    }

    /// Straightforward oracle: split on whitespace, then isolate punctuation.
    fn oracle(s: &str) -> Vec<String> {
        let mut v = Vec::new();
        for w in s.split(char::is_whitespace) {
            let mut cur = String::new();
            for c in w.chars() {
                if is_punctuation(c) {
                    if !cur.is_empty() {
                        v.push(std::mem::take(&mut cur));
                    }
                    v.push(c.to_string());
                } else {
                    cur.push(c);
                }
            }
            if !cur.is_empty() {
                v.push(cur);
            }
        }
        v
    }

    #[test]
    fn splits_whitespace_and_punctuation() {
        assert_eq!(
            words("  hello,  world!! "),
            ["hello", ",", "world", "!", "!"]
        );
        assert_eq!(words(""), Vec::<String>::new());
        assert_eq!(words(" \t\n "), Vec::<String>::new());
        assert_eq!(words("a\u{3000}b\u{85}c"), ["a", "b", "c"]);
    }

    #[test]
    fn ascii_symbols_are_punctuation() {
        assert_eq!(
            words("a$b+c<d=e>f^g`h|i~j"),
            [
                "a", "$", "b", "+", "c", "<", "d", "=", "e", ">", "f", "^", "g", "`", "h", "|",
                "i", "~", "j"
            ]
        );
        for b in 0u8..128 {
            let c = b as char;
            let expect = matches!(b, 0x21..=0x2F | 0x3A..=0x40 | 0x5B..=0x60 | 0x7B..=0x7E);
            assert_eq!(is_punctuation(c), expect, "{b:#x}");
        }
    }

    #[test]
    fn unicode_punctuation_tables_are_unicode_8() {
        assert!(is_punctuation('\u{2E42}'));
        assert!(!is_punctuation('\u{2E44}'));
        assert!(is_punctuation('«'));
        assert!(is_punctuation('—'));
        assert!(is_punctuation('。'));
        // Symbols outside ASCII are not punctuation.
        assert!(!is_punctuation('€'));
        assert!(!is_punctuation('©'));
    }

    #[test]
    fn matches_oracle() {
        for s in [
            "Hello, world! It's 3.14 — «quoted» text…",
            "a\u{2028}b  c\u{A0}d\u{2E42}e",
            "中 文 ,x",
            "((a))",
        ] {
            assert_eq!(words(s), oracle(s), "{s:?}");
        }
    }
}
