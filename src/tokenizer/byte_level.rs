//! HF `tokenizers`' `ByteLevel` pre-tokenizer and decoder (GPT-2, RoBERTa).
//!
//! Pre-tokenization of one segment (the text between added tokens):
//! 1. with `add_prefix_space`, a space is put in front unless the segment starts
//!    with one;
//! 2. with `use_regex`, the segment is split by GPT-2's pattern
//!    `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`
//!    (run by a hand-written scanner, [`for_each_split`], over the Unicode 16.0
//!    classes HF's Oniguruma build uses, see `byte_level_tables`); without it the
//!    segment is one word;
//! 3. every byte of a word's UTF-8 becomes one character of [`bytes_to_unicode`].
//!
//! `trim_offsets` changes only offsets, never ids; it is kept as a setting.

use super::byte_level_tables::{STAGE1, STAGE2};

/// A character that is none of the three classes below.
pub(crate) const OTHER: u8 = 0;
/// `\p{L}`: general category L*.
pub(crate) const LETTER: u8 = 1;
/// `\p{N}`: general category N*.
pub(crate) const NUMBER: u8 = 2;
/// `\s`: the White_Space property.
pub(crate) const SPACE: u8 = 3;

/// The split-regex class of an ASCII byte.
const ASCII_CLASS: [u8; 128] = {
    let mut t = [OTHER; 128];
    let mut b = 0;
    while b < 128 {
        let c = b as u8;
        t[b] = if c.is_ascii_alphabetic() {
            LETTER
        } else if c.is_ascii_digit() {
            NUMBER
        } else if matches!(c, b'\t' | b'\n' | 0x0b | 0x0c | b'\r' | b' ') {
            SPACE
        } else {
            OTHER
        };
        b += 1;
    }
    t
};

/// The split-regex class of `c` (one of the four constants above).
#[inline]
pub(crate) fn class_of(c: char) -> u8 {
    let cp = c as u32;
    if cp < 128 {
        return ASCII_CLASS[cp as usize];
    }
    let block = STAGE1[(cp >> 8) as usize] as usize;
    (STAGE2[block][((cp & 0xff) >> 2) as usize] >> ((cp & 3) * 2)) & 3
}

/// The character starting at byte `i` of `s` (a char boundary, `i < s.len()`),
/// with its class and UTF-8 length.
#[inline]
fn char_at(s: &str, i: usize) -> (char, u8, usize) {
    let b = s.as_bytes()[i];
    if b < 0x80 {
        return (b as char, ASCII_CLASS[b as usize], 1);
    }
    // `i` is a char boundary and `s` is not exhausted, so a char follows.
    let c = s[i..].chars().next().unwrap_or('\u{fffd}');
    (c, class_of(c), c.len_utf8())
}

/// The end of the run of characters of class `class` starting at byte `i`.
#[inline]
fn run_end(s: &str, mut i: usize, class: u8) -> usize {
    let bytes = s.as_bytes();
    while i < bytes.len() {
        let b = bytes[i];
        if b < 0x80 {
            if ASCII_CLASS[b as usize] != class {
                break;
            }
            i += 1;
        } else {
            let (_, cl, len) = char_at(s, i);
            if cl != class {
                break;
            }
            i += len;
        }
    }
    i
}

/// The length of a contraction (`'s 't 're 've 'm 'll 'd`, case-sensitive)
/// starting at byte `i` (where a `'` is), or 0.
#[inline]
fn contraction_len(bytes: &[u8], i: usize) -> usize {
    match (bytes.get(i + 1), bytes.get(i + 2)) {
        (Some(b's' | b't' | b'm' | b'd'), _) => 2,
        (Some(b'r' | b'v'), Some(b'e')) | (Some(b'l'), Some(b'l')) => 3,
        _ => 0,
    }
}

/// Calls `f` with each match of GPT-2's split pattern in `text`, in order (the
/// matches cover `text`, so nothing is dropped). As Oniguruma runs it: at each
/// position the first alternative that matches wins, `+` is greedy, and
/// `\s+(?!\S)` gives back the last whitespace character of a run that a
/// non-space follows (that character then starts the next match: a `' '` joins
/// the word after it, any other whitespace is a match of its own).
pub fn for_each_split<'a>(text: &'a str, mut f: impl FnMut(&'a str)) {
    let bytes = text.as_bytes();
    let n = bytes.len();
    let mut i = 0;
    while i < n {
        let (c, class, _) = char_at(text, i);
        if c == '\'' {
            let k = contraction_len(bytes, i);
            if k > 0 {
                f(&text[i..i + k]);
                i += k;
                continue;
            }
        }
        // ` ?\p{L}+`, ` ?\p{N}+`, ` ?[^\s\p{L}\p{N}]+`: the class of the run
        // and where it starts.
        let (run_class, run_start) = if c == ' ' && i + 1 < n {
            let (_, next_class, _) = char_at(text, i + 1);
            (next_class, i + 1)
        } else {
            (class, i)
        };
        if run_class != SPACE {
            let end = run_end(text, run_start, run_class);
            f(&text[i..end]);
            i = end;
            continue;
        }
        // `c` is whitespace and no word follows it directly: `\s+(?!\S)|\s+`.
        let end = run_end(text, i, SPACE);
        if end == n {
            f(&text[i..]);
            i = end;
            continue;
        }
        // A non-space follows the run: leave its last character for the next
        // match unless the run is that one character.
        let last = text[..end].char_indices().next_back().map_or(i, |(k, _)| k);
        let stop = if last > i { last } else { end };
        f(&text[i..stop]);
        i = stop;
    }
}

/// GPT-2's byte-to-character table: the printable bytes `!`..=`~`, `¡`..=`¬`
/// and `®`..=`ÿ` stand for themselves; the other 68 bytes (0x00..=0x20,
/// 0x7f..=0xa0, 0xad), in increasing order, become U+0100, U+0101, ... U+0143.
pub const fn bytes_to_unicode() -> [char; 256] {
    let mut table = ['\0'; 256];
    let mut next = 0x100u32;
    let mut b = 0usize;
    while b < 256 {
        let printable = matches!(b, 0x21..=0x7e | 0xa1..=0xac | 0xae..=0xff);
        let cp = if printable {
            b as u32
        } else {
            next += 1;
            next - 1
        };
        table[b] = match char::from_u32(cp) {
            Some(c) => c,
            None => '\0', // unreachable: cp < 0x144
        };
        b += 1;
    }
    table
}

/// [`bytes_to_unicode`], computed once.
pub static BYTE_CHAR: [char; 256] = bytes_to_unicode();

/// The inverse of [`bytes_to_unicode`] over U+0000..=U+0143 (-1: no byte).
static CHAR_BYTE: [i16; 0x144] = {
    let table = bytes_to_unicode();
    let mut inv = [-1i16; 0x144];
    let mut b = 0;
    while b < 256 {
        inv[table[b] as usize] = b as i16;
        b += 1;
    }
    inv
};

/// The byte a character of [`bytes_to_unicode`] stands for, if it is one.
#[inline]
pub fn char_to_byte(c: char) -> Option<u8> {
    match CHAR_BYTE.get(c as usize) {
        Some(&b) if b >= 0 => Some(b as u8),
        _ => None,
    }
}

/// Appends the [`bytes_to_unicode`] characters of `word`'s UTF-8 bytes to `out`.
#[inline]
pub fn push_mapped(word: &str, out: &mut String) {
    for &b in word.as_bytes() {
        out.push(BYTE_CHAR[b as usize]);
    }
}

/// The settings of HF's `ByteLevel` pre-tokenizer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ByteLevel {
    /// Put a space in front of a segment that does not start with one.
    pub add_prefix_space: bool,
    /// Offsets only; no effect on ids.
    pub trim_offsets: bool,
    /// Split with GPT-2's pattern (else a segment is one word).
    pub use_regex: bool,
}

impl Default for ByteLevel {
    /// HF's defaults: `add_prefix_space`, `trim_offsets` and `use_regex` all true.
    fn default() -> Self {
        ByteLevel {
            add_prefix_space: true,
            trim_offsets: true,
            use_regex: true,
        }
    }
}

impl ByteLevel {
    /// Calls `f` with each word of the segment `text`, already mapped through
    /// [`bytes_to_unicode`] (in `scratch`, overwritten). An empty segment has no
    /// words (HF drops empty segments before pre-tokenization).
    pub fn for_each_word(&self, text: &str, scratch: &mut String, mut f: impl FnMut(&str)) {
        self.for_each_raw_word(text, |w| {
            scratch.clear();
            push_mapped(w, scratch);
            f(scratch);
        });
    }

    /// Calls `f` with each word of the segment `text` before the byte mapping
    /// (the prefix space included where it applies).
    pub fn for_each_raw_word(&self, text: &str, mut f: impl FnMut(&str)) {
        if text.is_empty() {
            return;
        }
        let prefixed;
        let text = if self.add_prefix_space && !text.starts_with(' ') {
            prefixed = format!(" {text}");
            prefixed.as_str()
        } else {
            text
        };
        if self.use_regex {
            for_each_split(text, f);
        } else {
            f(text);
        }
    }
}

/// HF's `ByteLevel` decoder: appends the bytes the characters of `tokens` stand
/// for to a buffer (a token with a character outside the table contributes its
/// own UTF-8 instead), then appends that buffer to `out` as UTF-8 with invalid
/// sequences replaced by U+FFFD.
pub fn decode<'a>(tokens: impl IntoIterator<Item = &'a str>, out: &mut String) {
    let mut bytes: Vec<u8> = Vec::new();
    for t in tokens {
        let start = bytes.len();
        let mut ok = true;
        for c in t.chars() {
            match char_to_byte(c) {
                Some(b) => bytes.push(b),
                None => {
                    ok = false;
                    break;
                }
            }
        }
        if !ok {
            bytes.truncate(start);
            bytes.extend_from_slice(t.as_bytes());
        }
    }
    out.push_str(&String::from_utf8_lossy(&bytes));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn splits(s: &str) -> Vec<&str> {
        let mut v = Vec::new();
        for_each_split(s, |w| v.push(w));
        v
    }

    #[test]
    fn contractions() {
        assert_eq!(splits("I'm"), ["I", "'m"]);
        assert_eq!(
            splits("we're they've you'll he'd it's don't"),
            ["we", "'re", " they", "'ve", " you", "'ll", " he", "'d", " it", "'s", " don", "'t"]
        );
        // Case-sensitive: `'S` is no contraction; `'` then starts a symbol run.
        assert_eq!(splits("IT'S"), ["IT", "'", "S"]);
        // A space before `'` makes it a symbol run ` '`.
        assert_eq!(splits("a 's"), ["a", " '", "s"]);
        // A run of symbols swallows the quote: no contraction inside it.
        assert_eq!(splits("!'s"), ["!'", "s"]);
        assert_eq!(splits("'''s"), ["'''", "s"]);
        // `'r` and `'v` alone are not contractions; `'l` neither.
        assert_eq!(splits("'r 'l"), ["'", "r", " '", "l"]);
        assert_eq!(splits("'"), ["'"]);
    }

    #[test]
    fn whitespace_runs() {
        // `\s+(?!\S)` leaves the last space to the next word.
        assert_eq!(splits("a   b"), ["a", "  ", " b"]);
        assert_eq!(splits("a b"), ["a", " b"]);
        // At the end, the whole run.
        assert_eq!(splits("a   "), ["a", "   "]);
        assert_eq!(splits(" "), [" "]);
        assert_eq!(splits("   "), ["   "]);
        // A newline before a word is a match of its own.
        assert_eq!(splits("a\nb"), ["a", "\n", "b"]);
        assert_eq!(splits("a \n b"), ["a", " \n", " b"]);
        assert_eq!(splits("a \t\nb"), ["a", " \t", "\n", "b"]);
        // No-break space is whitespace but not `' '`: never a word's prefix.
        assert_eq!(splits("a\u{a0}b"), ["a", "\u{a0}", "b"]);
        assert_eq!(splits("a \u{3000}b"), ["a", " ", "\u{3000}", "b"]);
        // Leading runs.
        assert_eq!(splits("  hi"), [" ", " hi"]);
        // Zero-width space (U+200B) is not White_Space: a symbol.
        assert_eq!(splits("a \u{200b}b"), ["a", " \u{200b}", "b"]);
    }

    #[test]
    fn classes_letters_numbers_symbols() {
        assert_eq!(splits("abc123def"), ["abc", "123", "def"]);
        assert_eq!(splits("x 42 !? y"), ["x", " 42", " !?", " y"]);
        // Superscript two and Roman numeral twelve are N; Arabic-Indic digits too.
        assert_eq!(splits("x²Ⅻ٣"), ["x", "²Ⅻ٣"]);
        // Combining marks (Mn) are not letters: é in NFD splits.
        assert_eq!(splits("e\u{301}t"), ["e", "\u{301}", "t"]);
        // CJK ideographs and kana are Lo: one run.
        assert_eq!(splits("日本語のテキスト"), ["日本語のテキスト"]);
        assert_eq!(splits("中文，标点。"), ["中文", "，", "标点", "。"]);
        // Emoji (So) and the joiner (Cf) are symbols.
        assert_eq!(splits("hi 👍🏽 ok"), ["hi", " 👍🏽", " ok"]);
        assert_eq!(splits("👨\u{200d}👩"), ["👨\u{200d}👩"]);
        // Underscore is punctuation.
        assert_eq!(splits("snake_case"), ["snake", "_", "case"]);
        // A NUL is a symbol.
        assert_eq!(splits("\0a"), ["\0", "a"]);
        assert_eq!(splits(""), Vec::<&str>::new());
    }

    #[test]
    fn unicode_16_classes() {
        // Unicode 16.0 letters and digits (newer than Rust's unicode_categories).
        assert_eq!(class_of('\u{1c89}'), LETTER); // Cyrillic capital TJE (16.0)
        assert_eq!(class_of('\u{10d40}'), NUMBER); // Garay digit zero (16.0)
        assert_eq!(class_of('\u{2ebf0}'), LETTER); // CJK extension I (15.1)
                                                   // Unicode 17.0 (CJK extension J) is not yet assigned in HF's tables.
        assert_eq!(class_of('\u{323b0}'), OTHER);
        assert_eq!(class_of('\u{85}'), SPACE);
        assert_eq!(class_of('\u{1680}'), SPACE);
        assert_eq!(class_of('\u{180e}'), OTHER);
        assert_eq!(class_of('\u{feff}'), OTHER);
        assert_eq!(class_of('\u{1c}'), OTHER);
        assert_eq!(class_of('\u{10ffff}'), OTHER);
        // Every White_Space code point, and the ASCII table agrees with the
        // two-stage one.
        for c in (0..=0x10ffffu32).filter_map(char::from_u32) {
            if c.is_whitespace() {
                assert_eq!(class_of(c), SPACE, "{c:?}");
            }
        }
        for b in 0..128u32 {
            let c = char::from_u32(b).unwrap();
            let cp = c as u32;
            let block = STAGE1[(cp >> 8) as usize] as usize;
            let slow = (STAGE2[block][((cp & 0xff) >> 2) as usize] >> ((cp & 3) * 2)) & 3;
            assert_eq!(slow, ASCII_CLASS[b as usize], "{c:?}");
        }
    }

    #[test]
    fn splits_cover_the_text() {
        let s = "Hello, world!  It's 2024\t\n\n ünïcödé 日本 👍  end ";
        assert_eq!(splits(s).concat(), s);
    }

    #[test]
    fn byte_table() {
        let t = bytes_to_unicode();
        assert_eq!(t[b'!' as usize], '!');
        assert_eq!(t[b'~' as usize], '~');
        assert_eq!(t[0xa1], '¡');
        assert_eq!(t[0xac], '¬');
        assert_eq!(t[0xae], '®');
        assert_eq!(t[0xff], 'ÿ');
        assert_eq!(t[0x00], '\u{100}');
        assert_eq!(t[b' ' as usize], 'Ġ'); // U+0120: the 33rd unprintable byte
        assert_eq!(t[b'\n' as usize], 'Ċ'); // U+010A
        assert_eq!(t[0x7f], '\u{121}');
        assert_eq!(t[0xa0], '\u{142}');
        assert_eq!(t[0xad], '\u{143}');
        let mut seen = std::collections::HashSet::new();
        for (b, &c) in t.iter().enumerate() {
            assert!(seen.insert(c));
            assert_eq!(char_to_byte(c), Some(b as u8));
        }
        assert_eq!(char_to_byte('\u{144}'), None);
        assert_eq!(char_to_byte('\u{ad}'), None);
        assert_eq!(char_to_byte(' '), None);
    }

    #[test]
    fn words_are_mapped() {
        let bl = ByteLevel {
            add_prefix_space: false,
            trim_offsets: true,
            use_regex: true,
        };
        let mut scratch = String::new();
        let mut v = Vec::new();
        bl.for_each_word("Hi é\n", &mut scratch, |w| v.push(w.to_string()));
        assert_eq!(v, ["Hi", "ĠÃ©", "Ċ"]);
        let prefixed = ByteLevel {
            add_prefix_space: true,
            ..bl
        };
        v.clear();
        prefixed.for_each_word("Hi", &mut scratch, |w| v.push(w.to_string()));
        assert_eq!(v, ["ĠHi"]);
        v.clear();
        prefixed.for_each_word(" Hi", &mut scratch, |w| v.push(w.to_string()));
        assert_eq!(v, ["ĠHi"]);
        v.clear();
        prefixed.for_each_word("", &mut scratch, |w| v.push(w.to_string()));
        assert!(v.is_empty());
        let no_regex = ByteLevel {
            use_regex: false,
            ..bl
        };
        v.clear();
        no_regex.for_each_word("a b", &mut scratch, |w| v.push(w.to_string()));
        assert_eq!(v, ["aĠb"]);
    }

    #[test]
    fn decoder() {
        let mut s = String::new();
        decode(["ĠHi", "Ġé", "<s>"], &mut s);
        // "Ġé": 'é' is U+00E9, itself a table character (byte 0xE9), which is
        // not valid UTF-8 alone.
        assert_eq!(s, " Hi \u{fffd}<s>");
        let mut s = String::new();
        decode(["ĠÃ©", "日本"], &mut s);
        assert_eq!(s, " é日本");
    }
}
