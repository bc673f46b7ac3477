//! Greedy longest-match-first WordPiece, as HF `tokenizers`' `WordPiece` model.
//!
//! Lookups never allocate: continuation tokens (`##xyz`) are stored in a second table
//! keyed by the text after the prefix, so a candidate is always a slice of the word.

use super::vocab::{TokenTable, Vocab};

/// The WordPiece model: two lookup tables over the vocabulary and the limits.
#[derive(Clone)]
pub struct WordPiece {
    /// The vocabulary the tables index (shared, not copied).
    vocab: Vocab,
    /// Tokens that may start a word (every vocabulary entry, as HF does).
    start: TokenTable,
    /// Continuation tokens keyed by the text after the prefix.
    cont: TokenTable,
    unk: u32,
    max_input_chars_per_word: usize,
}

impl std::fmt::Debug for WordPiece {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WordPiece")
            .field("vocab", &self.vocab)
            .field("unk", &self.unk)
            .field("max_input_chars_per_word", &self.max_input_chars_per_word)
            .finish()
    }
}

impl WordPiece {
    /// Heap bytes of the lookup tables (the vocabulary is shared, not counted).
    pub fn heap_bytes(&self) -> usize {
        self.start.heap_bytes() + self.cont.heap_bytes()
    }

    /// Builds the tables from `vocab`. When a token repeats, the first id wins (as
    /// [`Vocab::id`]).
    pub fn new(vocab: &Vocab, continuation_prefix: &str, max_input_chars_per_word: usize) -> Self {
        WordPiece {
            vocab: vocab.clone(),
            start: TokenTable::build(vocab.pieces(), ""),
            cont: TokenTable::build(vocab.pieces(), continuation_prefix),
            unk: vocab.specials().unk,
            max_input_chars_per_word,
        }
    }

    /// Appends the ids of one pre-tokenized word to `out`: its pieces, or a single
    /// `[UNK]` if it is longer than the limit or some position matches no token.
    pub fn tokenize_word(&self, word: &str, out: &mut Vec<u32>) {
        // A word of at most `limit` bytes has at most `limit` chars.
        if word.len() > self.max_input_chars_per_word
            && word.chars().count() > self.max_input_chars_per_word
        {
            out.push(self.unk);
            return;
        }
        let mark = out.len();
        let mut start = 0usize;
        while start < word.len() {
            let table = if start == 0 { &self.start } else { &self.cont };
            let max_bytes = table.max_key();
            // No key is longer than `max_bytes`: start the search there (on a char
            // boundary), which is equivalent to starting at the end of the word.
            let mut end = word.len().min(start + max_bytes);
            while !word.is_char_boundary(end) {
                end -= 1;
            }
            let mut found = None;
            while end > start {
                if let Some(id) = table.get(self.vocab.pieces(), &word.as_bytes()[start..end]) {
                    found = Some(id);
                    break;
                }
                // Shrink by one character.
                end -= 1;
                while !word.is_char_boundary(end) {
                    end -= 1;
                }
            }
            match found {
                Some(id) => {
                    out.push(id);
                    start = end;
                }
                None => {
                    out.truncate(mark);
                    out.push(self.unk);
                    return;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vocab(extra: &[&str]) -> Vocab {
        let mut v: Vec<String> = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        v.extend(extra.iter().map(|s| s.to_string()));
        Vocab::from_tokens_bert(v).unwrap()
    }

    /// The plain HF algorithm (allocating a candidate string per step), as oracle.
    fn oracle(v: &Vocab, word: &str, max_chars: usize) -> Vec<u32> {
        let unk = v.specials().unk;
        if word.chars().count() > max_chars {
            return vec![unk];
        }
        let mut out = Vec::new();
        let mut start = 0;
        while start < word.len() {
            let mut end = word.len();
            let mut cur = None;
            while start < end {
                let mut sub = word[start..end].to_string();
                if start > 0 {
                    sub = format!("##{sub}");
                }
                if let Some(id) = v.id(&sub) {
                    cur = Some(id);
                    break;
                }
                end -= word[start..end].chars().last().map_or(1, |c| c.len_utf8());
            }
            match cur {
                Some(id) => out.push(id),
                None => return vec![unk],
            }
            start = end;
        }
        out
    }

    fn tok(wp: &WordPiece, w: &str) -> Vec<u32> {
        let mut out = vec![42];
        wp.tokenize_word(w, &mut out);
        assert_eq!(out[0], 42, "existing ids must be kept");
        out.remove(0);
        out
    }

    #[test]
    fn greedy_longest_match() {
        let v = vocab(&[
            "un", "##aff", "##able", "una", "##ff", "ο", "##δ", "##ο", "##σ",
        ]);
        let wp = WordPiece::new(&v, "##", 100);
        // Greedy: "una" (8) beats "un", then "##ff" (9), "##able" (7).
        assert_eq!(tok(&wp, "unaffable"), [8, 9, 7]);
        assert_eq!(tok(&wp, "un"), [5]);
        assert_eq!(tok(&wp, "οδοσ"), [10, 11, 12, 13]);
        // "unaffx": no piece for "x" -> single [UNK]
        assert_eq!(tok(&wp, "unaffx"), [1]);
        assert_eq!(tok(&wp, "x"), [1]);
    }

    #[test]
    fn long_words_are_unk() {
        let v = vocab(&["a", "##a", "é", "##é"]);
        let wp = WordPiece::new(&v, "##", 100);
        assert_eq!(tok(&wp, &"a".repeat(100)).len(), 100);
        assert_eq!(tok(&wp, &"a".repeat(101)), [1]);
        // 100 two-byte chars are 200 bytes but still within the limit.
        assert_eq!(tok(&wp, &"é".repeat(100)).len(), 100);
        assert_eq!(tok(&wp, &"é".repeat(101)), [1]);
    }

    #[test]
    fn matches_oracle() {
        let v = vocab(&[
            "a", "ab", "abc", "##b", "##bc", "##c", "##d", "é", "##é", "中", "##中", "c", "bcd",
        ]);
        let wp = WordPiece::new(&v, "##", 5);
        let alphabet = ['a', 'b', 'c', 'd', 'é', '中'];
        // All words up to length 4 over the alphabet, plus some longer ones.
        let mut words = vec![String::new()];
        for _ in 0..4 {
            let mut next = Vec::new();
            for w in &words {
                for c in alphabet {
                    next.push(format!("{w}{c}"));
                }
            }
            for w in &next {
                assert_eq!(tok(&wp, w), oracle(&v, w, 5), "{w:?}");
            }
            words = next;
        }
        for w in ["abcabc", "ééééé", "éééééé"] {
            assert_eq!(tok(&wp, w), oracle(&v, w, 5), "{w:?}");
        }
    }
}
