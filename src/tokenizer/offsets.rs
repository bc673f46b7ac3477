//! Byte offsets of each token in the input text, for `/tokenize` (TEI's
//! `start`/`stop`) and anyone who needs to map tokens back to text.
//!
//! The text is normalized one character at a time, so that every normalized
//! byte knows the input character it came from; words and WordPiece pieces
//! are then found in the normalized text exactly as [`Tokenizer::encode_raw`]
//! finds them, and each piece maps back to the input characters it covers.
//! Per-character normalization equals the normalization of the whole segment
//! except where NFD reorders a run of combining marks (without
//! `strip_accents`): such a segment is detected (the two normalizations are
//! compared) and its tokens get no offsets rather than wrong ones.

use super::{pre_tokenizer, Bert, Kind, Tokenizer};

/// One token of [`Tokenizer::encode_raw_with_offsets`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TokenSpan {
    /// The token id.
    pub id: u32,
    /// `[start, stop)`: the bytes of the input the token comes from (whole
    /// characters); `None` when they cannot be told exactly.
    pub offsets: Option<(usize, usize)>,
}

impl Tokenizer {
    /// The ids of [`Tokenizer::encode_raw`]`(text)`, each with the byte range
    /// of `text` it comes from. A special token written in the text covers
    /// its string; a word the vocabulary cannot split (`[UNK]`) covers the
    /// whole word; pieces of one character that normalizes to several (`ß`
    /// lower-cased stays one, but `İ` becomes two) share that character's
    /// range. The SentencePiece Unigram and byte-level BPE tokenizers give the
    /// offsets HF `tokenizers` gives (see
    /// [`super::pipeline::Pipeline::encode_raw_with_offsets`]).
    pub fn encode_raw_with_offsets(&self, text: &str) -> Vec<TokenSpan> {
        match &self.kind {
            Kind::WordPiece(b) => b.spans(self, text),
            Kind::Pipeline(p) => p.encode_raw_with_offsets(text),
        }
    }
}

impl Bert {
    fn spans(&self, tok: &Tokenizer, text: &str) -> Vec<TokenSpan> {
        let mut out = Vec::new();
        let mut pos = 0usize;
        while pos < text.len() {
            let (seg_end, next) = match self.specials.find(text, pos) {
                Some((s, e, id)) => (s, Some((s, e, id))),
                None => (text.len(), None),
            };
            if seg_end > pos {
                self.segment_spans(tok, text, pos, seg_end, &mut out);
            }
            match next {
                Some((s, e, id)) => {
                    out.push(TokenSpan {
                        id,
                        offsets: Some((s, e)),
                    });
                    pos = e;
                }
                None => break,
            }
        }
        out
    }

    /// The tokens of `text[from..to]` (a segment without raw specials).
    fn segment_spans(
        &self,
        tok: &Tokenizer,
        text: &str,
        from: usize,
        to: usize,
        out: &mut Vec<TokenSpan>,
    ) {
        let mut norm = String::new();
        // For each byte of `norm`: the input character it came from.
        let mut origin: Vec<(usize, usize)> = Vec::new();
        let (mut one, mut scratch) = (String::new(), String::new());
        for (i, c) in text[from..to].char_indices() {
            let (s, e) = (from + i, from + i + c.len_utf8());
            self.normalizer
                .normalize(&text[s..e], &mut one, &mut scratch);
            norm.push_str(&one);
            origin.extend(std::iter::repeat_n((s, e), one.len()));
        }
        let mut whole = String::new();
        self.normalizer
            .normalize(&text[from..to], &mut whole, &mut scratch);
        let exact = whole == norm;
        if !exact {
            // Tokenize as encode_raw does, without offsets.
            norm = whole;
        }
        let span = |a: usize, b: usize| -> Option<(usize, usize)> {
            (exact && a < b && b <= origin.len()).then(|| (origin[a].0, origin[b - 1].1))
        };
        let mut ids = Vec::new();
        let mut words = |part: &str, base: usize, out: &mut Vec<TokenSpan>| {
            pre_tokenizer::for_each_word(part, |w| {
                // `w` is a slice of `part`, itself of `norm` at `base`.
                let ws = base + (w.as_ptr() as usize - part.as_ptr() as usize);
                ids.clear();
                self.wordpiece.tokenize_word(w, &mut ids);
                let pieces = piece_lengths(tok, &ids);
                match pieces {
                    Some(lens) if lens.iter().sum::<usize>() == w.len() => {
                        let mut at = ws;
                        for (&id, len) in ids.iter().zip(lens) {
                            out.push(TokenSpan {
                                id,
                                offsets: span(at, at + len),
                            });
                            at += len;
                        }
                    }
                    // [UNK] (or pieces that do not spell the word): the whole word.
                    _ => out.extend(ids.iter().map(|&id| TokenSpan {
                        id,
                        offsets: span(ws, ws + w.len()),
                    })),
                }
            });
        };
        if self.normalized_specials.tokens.is_empty() {
            words(&norm, 0, out);
            return;
        }
        let mut pos = 0;
        while pos < norm.len() {
            let (end, next) = match self.normalized_specials.find(&norm, pos) {
                Some((s, e, id)) => (s, Some((s, e, id))),
                None => (norm.len(), None),
            };
            words(&norm[pos..end], pos, out);
            match next {
                Some((s, e, id)) => {
                    out.push(TokenSpan {
                        id,
                        offsets: span(s, e),
                    });
                    pos = e;
                }
                None => break,
            }
        }
    }
}

/// The byte length each id of one word's pieces spells (the continuation
/// prefix left out after the first); `None` for `[UNK]` or an id outside the
/// vocabulary.
fn piece_lengths(tok: &Tokenizer, ids: &[u32]) -> Option<Vec<usize>> {
    let unk = tok.vocab.specials().unk;
    let prefix = tok.config.continuation_prefix.as_str();
    ids.iter()
        .enumerate()
        .map(|(k, &id)| {
            if id == unk {
                return None;
            }
            let t = tok.vocab.token(id)?;
            Some(if k > 0 {
                t.strip_prefix(prefix).unwrap_or(t).len()
            } else {
                t.len()
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tokenizer::vocab::Vocab;
    use crate::tokenizer::TokenizerConfig;

    fn tok(words: &[&str]) -> Tokenizer {
        let mut v: Vec<String> = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        v.extend(words.iter().map(|s| s.to_string()));
        Tokenizer::new(
            Vocab::from_tokens_bert(v).unwrap(),
            TokenizerConfig::bert_uncased(),
        )
    }

    fn spans(t: &Tokenizer, text: &str) -> Vec<(String, Option<(usize, usize)>)> {
        t.encode_raw_with_offsets(text)
            .into_iter()
            .map(|s| (t.vocab().token(s.id).unwrap().to_string(), s.offsets))
            .collect()
    }

    #[test]
    fn offsets_by_hand() {
        let t = tok(&["hello", "world", ",", "!", "play", "##ing", "cafe", "über"]);
        // "Hello, WORLD!  playing" : bytes H0..5 ,5 W7..12 !12 p15..22
        assert_eq!(
            spans(&t, "Hello, WORLD!  playing"),
            vec![
                ("hello".into(), Some((0, 5))),
                (",".into(), Some((5, 6))),
                ("world".into(), Some((7, 12))),
                ("!".into(), Some((12, 13))),
                ("play".into(), Some((15, 19))),
                ("##ing".into(), Some((19, 22))),
            ]
        );
        // Accents are stripped but the offsets cover the input's bytes: "Café"
        // is 5 bytes (é is 2), "Über" 5.
        assert_eq!(
            spans(&t, "Café [SEP] xyz Über"),
            vec![
                ("cafe".into(), Some((0, 5))),
                ("[SEP]".into(), Some((6, 11))),
                ("[UNK]".into(), Some((12, 15))),
                ("[UNK]".into(), Some((16, 21))),
            ]
        );
        // Control characters vanish without moving anything.
        assert_eq!(
            spans(&t, "\u{0}hello\u{200b}"),
            vec![("hello".into(), Some((1, 6)))]
        );
    }

    #[test]
    fn ids_are_those_of_encode_raw() {
        let t = tok(&["a", "b", "##b", "ab", "über", "##s", "s"]);
        for text in [
            "ab abb a b über übers",
            "ÅB  a\tb\nab [CLS]ab[MASK]",
            "e\u{301}\u{316} a\u{316}\u{301} 中文 ab",
            "",
            "   ",
        ] {
            let mut want = Vec::new();
            t.encode_raw(text, &mut want);
            let got: Vec<u32> = t
                .encode_raw_with_offsets(text)
                .iter()
                .map(|s| s.id)
                .collect();
            assert_eq!(got, want, "{text:?}");
            for s in t.encode_raw_with_offsets(text) {
                if let Some((a, b)) = s.offsets {
                    assert!(a < b && b <= text.len() && text.is_char_boundary(a));
                    assert!(text.is_char_boundary(b));
                }
            }
        }
    }
}
