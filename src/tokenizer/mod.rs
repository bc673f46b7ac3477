//! BERT tokenization matching HuggingFace's fast tokenizer (`tokenizers`) id for id.
//!
//! Pipeline (format research notes, section 5.2):
//! 1. split the raw text on the special-token strings (`[PAD] [UNK] [CLS] [SEP]
//!    [MASK]`, case-sensitive, leftmost-longest, before normalization); a match
//!    becomes its id directly;
//! 2. each other segment goes through [`normalizer::Normalizer`] (BertNormalizer),
//!    and is split again on the added special tokens HF matches after
//!    normalization ([`Tokenizer::with_normalized_specials`], MPNet's `<unk>`);
//! 3. [`pre_tokenizer::for_each_word`] (BertPreTokenizer),
//! 4. [`wordpiece::WordPiece`] per word;
//! 5. [`Tokenizer::encode`] adds the vocabulary's cls/sep ids (`[CLS]`/`[SEP]`
//!    for BERT, `<s>`/`</s>` for MPNet) and truncates from the right.

pub mod added;
pub mod normalizer;
pub mod normalizers;
pub mod pipeline;
pub mod pre_tokenizer;
pub mod pre_tokenizers;
pub mod precompiled;
pub mod spec;
pub mod template;
pub mod unigram;
pub mod vocab;
pub mod wordpiece;

use std::cell::RefCell;

use normalizer::Normalizer;
use vocab::Vocab;
use wordpiece::WordPiece;

/// Tokenizer options (the fields of HF `BertNormalizer` and `WordPiece`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenizerConfig {
    /// Lowercase every character (`do_lower_case`).
    pub lowercase: bool,
    /// NFD and drop nonspacing marks (already resolved: HF's unset value follows
    /// `lowercase`).
    pub strip_accents: bool,
    /// Put spaces around CJK ideographs (`tokenize_chinese_chars`).
    pub handle_chinese_chars: bool,
    /// Drop control characters and map whitespace to spaces.
    pub clean_text: bool,
    /// Words with more characters than this become `[UNK]` (100).
    pub max_input_chars_per_word: usize,
    /// Prefix of continuation pieces (`"##"`).
    pub continuation_prefix: String,
}

impl TokenizerConfig {
    /// The `bert-base-uncased` / all-MiniLM-L6-v2 settings.
    pub fn bert_uncased() -> Self {
        TokenizerConfig {
            lowercase: true,
            strip_accents: true,
            handle_chinese_chars: true,
            clean_text: true,
            max_input_chars_per_word: 100,
            continuation_prefix: "##".to_string(),
        }
    }
}

/// Special-token strings to match in the raw text.
#[derive(Debug, Clone)]
struct SpecialMatcher {
    /// `(string, id)`, non-empty strings only.
    tokens: Vec<(String, u32)>,
    /// `first[b]` is true if some token starts with byte `b`.
    first: [bool; 256],
}

impl SpecialMatcher {
    fn new(vocab: &Vocab, ids: &[u32]) -> Self {
        let mut tokens: Vec<(String, u32)> = Vec::new();
        for &id in ids {
            if let Some(s) = vocab.token(id) {
                if !s.is_empty() && !tokens.iter().any(|(t, _)| t == s) {
                    tokens.push((s.to_string(), id));
                }
            }
        }
        let mut first = [false; 256];
        for (t, _) in &tokens {
            first[t.as_bytes()[0] as usize] = true;
        }
        SpecialMatcher { tokens, first }
    }

    /// The leftmost-longest match at or after byte `from`: `(start, end, id)`.
    #[inline]
    fn find(&self, text: &str, from: usize) -> Option<(usize, usize, u32)> {
        let bytes = text.as_bytes();
        let mut i = from;
        while i < bytes.len() {
            if self.first[bytes[i] as usize] {
                let rest = &bytes[i..];
                let mut best: Option<(usize, u32)> = None;
                for (t, id) in &self.tokens {
                    if rest.starts_with(t.as_bytes()) {
                        let longer = match best {
                            Some((l, _)) => t.len() > l,
                            None => true,
                        };
                        if longer {
                            best = Some((t.len(), *id));
                        }
                    }
                }
                if let Some((len, id)) = best {
                    return Some((i, i + len, id));
                }
            }
            i += 1;
        }
        None
    }
}

/// Reusable per-thread buffers for normalization.
#[derive(Default)]
struct Scratch {
    normalized: String,
    stage: String,
}

impl Scratch {
    /// Keeps the buffers from pinning memory after one huge text.
    fn trim(&mut self) {
        const KEEP: usize = 1 << 20;
        for b in [&mut self.normalized, &mut self.stage] {
            if b.capacity() > KEEP {
                *b = String::new();
            }
        }
    }
}

thread_local! {
    static SCRATCH: RefCell<Scratch> = RefCell::new(Scratch::default());
}

/// Special ids a BERT pair adds: `[CLS]`, `[SEP]`, `[SEP]`.
const PAIR_SPECIALS: usize = 3;

/// A text pair as the model reads it ([`Tokenizer::encode_pair`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PairEncoding {
    /// The ids, special tokens included.
    pub ids: Vec<u32>,
    /// The token type of each id (0: the first text's part, 1: the second's).
    pub type_ids: Vec<u32>,
    /// Ids of either text were cut to fit.
    pub truncated: bool,
}

/// How many ids of each text of a pair HF's `longest_first` truncation keeps
/// (`tokenizers` >= 0.13, which sentence-transformers' `CrossEncoder` runs):
/// texts of `a` and `b` ids within a `budget` (the maximum length less the
/// special tokens). When they do not fit and the shorter one fits in the
/// budget beside half of it, only the longer is cut; otherwise both are cut to
/// half the budget, the longer one (the second on a tie) keeping the odd id.
pub fn longest_first(a: usize, b: usize, budget: usize) -> (usize, usize) {
    if a + b <= budget {
        return (a, b);
    }
    let swap = a > b;
    let (short, long) = if swap { (b, a) } else { (a, b) };
    let (mut ks, mut kl) = if short > budget {
        (short, short)
    } else {
        (short, long.min(short.max(budget - short)))
    };
    if ks + kl > budget {
        ks = budget / 2;
        kl = ks + budget % 2;
    }
    if swap {
        (kl, ks)
    } else {
        (ks, kl)
    }
}

/// A BERT WordPiece tokenizer. Immutable, `Send + Sync`; share it between threads.
#[derive(Debug, Clone)]
pub struct Tokenizer {
    vocab: Vocab,
    config: TokenizerConfig,
    normalizer: Normalizer,
    wordpiece: WordPiece,
    specials: SpecialMatcher,
    /// The special tokens matched after normalization (usually none).
    normalized_specials: SpecialMatcher,
    /// A special-token string contains ASCII whitespace, so long texts cannot be
    /// cut at whitespace (see [`Tokenizer::encode_raw_bounded`]).
    specials_have_whitespace: bool,
}

impl Tokenizer {
    /// Builds a tokenizer (the lookup tables are built once, here).
    pub fn new(vocab: Vocab, config: TokenizerConfig) -> Tokenizer {
        let normalizer = Normalizer {
            clean_text: config.clean_text,
            handle_chinese_chars: config.handle_chinese_chars,
            strip_accents: config.strip_accents,
            lowercase: config.lowercase,
        };
        let wordpiece = WordPiece::new(
            &vocab,
            &config.continuation_prefix,
            config.max_input_chars_per_word,
        );
        let specials = SpecialMatcher::new(&vocab, &vocab.specials().as_array());
        let normalized_specials = SpecialMatcher::new(&vocab, &[]);
        let specials_have_whitespace = vocab.specials().as_array().iter().any(|&id| {
            vocab
                .token(id)
                .is_some_and(|t| t.bytes().any(|b| matches!(b, b' ' | b'\t' | b'\n' | b'\r')))
        });
        Tokenizer {
            vocab,
            config,
            normalizer,
            wordpiece,
            specials,
            normalized_specials,
            specials_have_whitespace,
        }
    }

    /// Also matches the tokens `ids` (of the vocabulary; others are ignored)
    /// as special tokens in the normalized text, like HF added tokens with
    /// `normalized: true` (MPNet's `<unk>`): after the five specials of the
    /// vocabulary are matched in the raw text and each other segment is
    /// normalized, the segment is split on these strings (leftmost-longest).
    pub fn with_normalized_specials(mut self, ids: &[u32]) -> Tokenizer {
        self.normalized_specials = SpecialMatcher::new(&self.vocab, ids);
        let ws = |t: &(String, u32)| {
            t.0.bytes()
                .any(|b| matches!(b, b' ' | b'\t' | b'\n' | b'\r'))
        };
        self.specials_have_whitespace |= self.normalized_specials.tokens.iter().any(ws);
        self
    }

    /// The vocabulary.
    pub fn vocab(&self) -> &Vocab {
        &self.vocab
    }

    /// The options.
    pub fn config(&self) -> &TokenizerConfig {
        &self.config
    }

    /// Appends the ids of `text` to `out`, without `[CLS]`/`[SEP]` and without
    /// truncation.
    pub fn encode_raw(&self, text: &str, out: &mut Vec<u32>) {
        SCRATCH.with(|cell| match cell.try_borrow_mut() {
            Ok(mut s) => {
                self.encode_raw_with(text, out, &mut s);
                s.trim();
            }
            // Unreachable in practice (no re-entrancy); stay correct anyway.
            Err(_) => self.encode_raw_with(text, out, &mut Scratch::default()),
        });
    }

    fn encode_raw_with(&self, text: &str, out: &mut Vec<u32>, scratch: &mut Scratch) {
        let mut pos = 0usize;
        while pos < text.len() {
            let (seg_end, next) = match self.specials.find(text, pos) {
                Some((s, e, id)) => (s, Some((e, id))),
                None => (text.len(), None),
            };
            if seg_end > pos {
                self.encode_segment(&text[pos..seg_end], out, scratch);
            }
            match next {
                Some((e, id)) => {
                    out.push(id);
                    pos = e;
                }
                None => break,
            }
        }
    }

    fn encode_segment(&self, segment: &str, out: &mut Vec<u32>, scratch: &mut Scratch) {
        let Scratch { normalized, stage } = scratch;
        self.normalizer.normalize(segment, normalized, stage);
        if self.normalized_specials.tokens.is_empty() {
            pre_tokenizer::for_each_word(normalized, |w| self.wordpiece.tokenize_word(w, out));
            return;
        }
        let text = normalized.as_str();
        let mut pos = 0;
        while pos < text.len() {
            let (end, next) = match self.normalized_specials.find(text, pos) {
                Some((s, e, id)) => (s, Some((e, id))),
                None => (text.len(), None),
            };
            pre_tokenizer::for_each_word(&text[pos..end], |w| self.wordpiece.tokenize_word(w, out));
            match next {
                Some((e, id)) => {
                    out.push(id);
                    pos = e;
                }
                None => break,
            }
        }
    }

    /// `[CLS]` + the ids of `text` truncated to `max_len - 2` + `[SEP]`. `None` means
    /// no truncation; `max_len < 2` is treated as 2.
    pub fn encode(&self, text: &str, max_len: Option<usize>) -> Vec<u32> {
        let mut out = Vec::new();
        self.encode_into(text, max_len, &mut out);
        out
    }

    /// As [`Tokenizer::encode`], into `out` (cleared first; its allocation is reused).
    ///
    /// With a `max_len`, a long text is tokenized only as far as needed: see
    /// [`Tokenizer::encode_raw_bounded`]. Work and memory are then bounded by
    /// the part of the text that yields the first `max_len - 2` ids, not by the
    /// text's length.
    pub fn encode_into(&self, text: &str, max_len: Option<usize>, out: &mut Vec<u32>) {
        let sp = self.vocab.specials();
        out.clear();
        out.push(sp.cls);
        match max_len {
            Some(m) => {
                let want = m.max(2) - 2;
                self.encode_raw_bounded(text, want, out);
                out.truncate(want + 1);
            }
            None => self.encode_raw(text, out),
        }
        out.push(sp.sep);
    }

    /// As [`Tokenizer::encode_into`] with `Some(max_len)`; returns whether the
    /// text had more than `max_len - 2` ids (and was cut). Tokenizes at most
    /// one id further than `encode_into` to tell.
    pub fn encode_into_checked(&self, text: &str, max_len: usize, out: &mut Vec<u32>) -> bool {
        let sp = self.vocab.specials();
        out.clear();
        out.push(sp.cls);
        let want = max_len.max(2) - 2;
        self.encode_raw_bounded(text, want + 1, out);
        let cut = out.len() - 1 > want;
        out.truncate(want + 1);
        out.push(sp.sep);
        cut
    }

    /// The length of [`Tokenizer::encode`]`(text, max_len)`.
    pub fn count_tokens(&self, text: &str, max_len: Option<usize>) -> usize {
        let mut ids = Vec::new();
        match max_len {
            Some(m) => {
                let want = m.max(2) - 2;
                self.encode_raw_bounded(text, want, &mut ids);
                ids.len().min(want) + 2
            }
            None => {
                self.encode_raw(text, &mut ids);
                ids.len() + 2
            }
        }
    }

    /// Appends at least the first `want` ids of `encode_raw(text)` (all of them
    /// when the text has fewer), tokenizing growing prefixes of a long text.
    ///
    /// A prefix is cut right after an ASCII space, tab, CR or LF. Such a cut is
    /// exact: those characters are never dropped by the normalizer and always
    /// end a word; no special-token string contains them (checked at
    /// construction, else the whole text is used); and normalization is per
    /// character (NFD never moves combining marks across a whitespace starter).
    /// So the ids of the prefix are the first ids of the whole text. Prefixes
    /// start at 16 KiB and double until they yield `want` ids.
    pub fn encode_raw_bounded(&self, text: &str, want: usize, out: &mut Vec<u32>) {
        const FIRST_PREFIX: usize = 16 << 10;
        let start = out.len();
        if self.specials_have_whitespace || text.len() <= FIRST_PREFIX {
            self.encode_raw(text, out);
            return;
        }
        let bytes = text.as_bytes();
        let mut target = FIRST_PREFIX;
        while target < text.len() {
            // The first cut at or after `target`: just after an ASCII whitespace
            // byte (always a char boundary in UTF-8).
            let Some(off) = bytes[target..]
                .iter()
                .position(|b| matches!(b, b' ' | b'\t' | b'\n' | b'\r'))
            else {
                break;
            };
            let cut = target + off + 1;
            out.truncate(start);
            self.encode_raw(&text[..cut], out);
            if out.len() - start >= want {
                return;
            }
            target = cut.saturating_mul(2);
        }
        out.truncate(start);
        self.encode_raw(text, out);
    }

    /// A text pair as a cross-encoder reads it: `[CLS] a [SEP] b [SEP]`, token
    /// type 0 up to the first `[SEP]` and 1 after, the texts cut to `max_len`
    /// ids in all by [`longest_first`] (as HF's fast tokenizer with
    /// `truncation="longest_first"`; `None`: no cut). Long texts are tokenized
    /// only as far as the cut needs ([`Tokenizer::encode_raw_bounded`]).
    pub fn encode_pair(&self, a: &str, b: &str, max_len: Option<usize>) -> PairEncoding {
        let mut ia = Vec::new();
        let whole = match max_len {
            Some(m) => {
                self.encode_raw_bounded(a, m.saturating_sub(PAIR_SPECIALS) + 1, &mut ia);
                false
            }
            None => {
                self.encode_raw(a, &mut ia);
                true
            }
        };
        self.encode_pair_after(a, &ia, whole, b, max_len)
    }

    /// [`Tokenizer::encode_pair`] when the first text's raw ids are known
    /// (`a_raw`: all of `encode_raw(a)` when `whole`, else at least its first
    /// `max_len - 2` ids; completed here when the cut needs them): a query
    /// paired with many passages is tokenized once.
    pub fn encode_pair_after(
        &self,
        a: &str,
        a_raw: &[u32],
        whole: bool,
        b: &str,
        max_len: Option<usize>,
    ) -> PairEncoding {
        let sp = self.vocab.specials();
        let mut ib = Vec::new();
        let mut a_whole = Vec::new();
        let mut ia = a_raw;
        let budget = max_len.map(|m| m.saturating_sub(PAIR_SPECIALS));
        match budget {
            Some(n) => {
                self.encode_raw_bounded(b, n + 1, &mut ib);
                if ia.len() > n && ib.len() > n {
                    // Both are cut to halves; which one gets the odd id
                    // depends on their whole lengths.
                    if !whole {
                        self.encode_raw(a, &mut a_whole);
                        ia = &a_whole;
                    }
                    ib.clear();
                    self.encode_raw(b, &mut ib);
                }
            }
            None => self.encode_raw(b, &mut ib),
        }
        let (ka, kb) = match budget {
            Some(n) => longest_first(ia.len(), ib.len(), n),
            None => (ia.len(), ib.len()),
        };
        let truncated = ka < ia.len() || kb < ib.len();
        let mut ids = Vec::with_capacity(ka + kb + PAIR_SPECIALS);
        ids.push(sp.cls);
        ids.extend_from_slice(&ia[..ka]);
        ids.push(sp.sep);
        let first = ids.len();
        ids.extend_from_slice(&ib[..kb]);
        ids.push(sp.sep);
        let mut type_ids = vec![0u32; ids.len()];
        type_ids[first..].fill(1);
        PairEncoding {
            ids,
            type_ids,
            truncated,
        }
    }

    /// Turns ids back into text like HF's WordPiece decoder: tokens joined with
    /// spaces, continuation pieces (`##x`) glued to the previous token (a leading
    /// continuation piece keeps its prefix). Ids outside the vocabulary are skipped;
    /// with `skip_special`, the five special ids are skipped too. HF's
    /// `clean_up_tokenization_spaces` (removing the space before `. , ! ?` etc.) is
    /// not applied. Decoding is lossy: case, accents and spacing are not restored.
    pub fn decode(&self, ids: &[u32], skip_special: bool) -> String {
        let specials = self.vocab.specials().as_array();
        let prefix = self.config.continuation_prefix.as_str();
        let mut s = String::new();
        let mut first = true;
        for &id in ids {
            if skip_special && specials.contains(&id) {
                continue;
            }
            let Some(tok) = self.vocab.token(id) else {
                continue;
            };
            if first {
                s.push_str(tok);
                first = false;
            } else if let Some(rest) = tok.strip_prefix(prefix).filter(|_| !prefix.is_empty()) {
                s.push_str(rest);
            } else {
                s.push(' ');
                s.push_str(tok);
            }
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TOKENS: &[&str] = &[
        "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", // 0..=4
        "hi", "there", "ο", "##δ", "##ο", "##σ", // 5..=10
        "a", "b", "c", "ab", "x", "y", "istanbul", // 11..=17
        "cafe", "##fe", "ca", "中", "文", "$", "+", // 18..=24
        "<", "=", ">", "^", "`", "|", "~", "mask", // 25..=32
        "[", "]", ",", "!", "café", // 33..=37
    ];

    fn tokenizer(cfg: TokenizerConfig) -> Tokenizer {
        let v = Vocab::from_tokens_bert(TOKENS.iter().map(|s| s.to_string()).collect()).unwrap();
        Tokenizer::new(v, cfg)
    }

    fn bert() -> Tokenizer {
        tokenizer(TokenizerConfig::bert_uncased())
    }

    fn toks(t: &Tokenizer, s: &str) -> Vec<String> {
        let mut ids = Vec::new();
        t.encode_raw(s, &mut ids);
        ids.iter()
            .map(|&i| t.vocab().token(i).unwrap().to_string())
            .collect()
    }

    #[test]
    fn verified_cases_of_the_notes() {
        let t = bert();
        let cases: &[(&str, &[&str])] = &[
            ("ΟΔΟΣ", &["ο", "##δ", "##ο", "##σ"]),
            ("a\u{2E44}b", &["[UNK]"]),
            ("a\u{2E42}b", &["a", "[UNK]", "b"]),
            ("x\u{2B820}y", &["[UNK]"]),
            ("x\u{2B920}y", &["x", "[UNK]", "y"]),
            ("İstanbul", &["istanbul"]),
            ("a\u{000B}b\u{2028}c", &["ab", "c"]),
            ("hi [MASK] there", &["hi", "[MASK]", "there"]),
            ("a\u{E000}b", &["ab"]),
            ("a\u{E0001}b", &["ab"]),
            ("a\u{0378}b", &["[UNK]"]),
        ];
        for (input, expect) in cases {
            assert_eq!(toks(&t, input), *expect, "{input:?}");
        }
    }

    #[test]
    fn special_tokens_raw_case_sensitive_leftmost_longest() {
        let t = bert();
        assert_eq!(t.encode("hi [MASK] there", None), [2, 5, 4, 6, 3]);
        assert_eq!(toks(&t, "hi[MASK]there"), ["hi", "[MASK]", "there"]);
        assert_eq!(toks(&t, "[mask]"), ["[", "mask", "]"]);
        assert_eq!(toks(&t, "[MASK"), ["[", "mask"]);
        assert_eq!(t.encode("[CLS]", None), [2, 2, 3]);
        assert_eq!(t.encode("[PAD][SEP]", None), [2, 0, 3, 3]);
        assert_eq!(toks(&t, "[[UNK]]"), ["[", "[UNK]", "]"]);
        // Matching is on the raw text: an accented form is not special, and is then
        // normalized like any text.
        assert_eq!(toks(&t, "[MÁSK]"), ["[", "mask", "]"]);
    }

    #[test]
    fn overlapping_specials_prefer_longest() {
        // pad "<p>" and unk "<pp>": two strings with a common start.
        let s = vocab::SpecialIds {
            pad: 0,
            unk: 1,
            cls: 2,
            sep: 3,
            mask: 4,
        };
        let v = Vocab::new(
            ["<p>", "<pp>", "[CLS]", "[SEP]", "[MASK]", "x"]
                .iter()
                .map(|s| s.to_string())
                .collect(),
            s,
        )
        .unwrap();
        let t = Tokenizer::new(v, TokenizerConfig::bert_uncased());
        let mut ids = Vec::new();
        t.encode_raw("x<pp>x<p>", &mut ids);
        assert_eq!(ids, [5, 1, 5, 0]);
    }

    #[test]
    fn normalized_specials_match_after_normalization() {
        // "cafe" (18) as a special matched in the normalized text: its
        // accented, upper-case forms match too; raw specials still win first.
        let t = bert().with_normalized_specials(&[18]);
        assert_eq!(toks(&t, "hi CAFÉ there"), ["hi", "cafe", "there"]);
        assert_eq!(t.encode("xcafey", None), [2, 15, 18, 16, 3]);
        assert_eq!(t.encode("[MASK]cafe", None), [2, 4, 18, 3]);
        // Without it, "xcafey" is one unknown word.
        assert_eq!(bert().encode("xcafey", None), [2, 1, 3]);
    }

    #[test]
    fn long_words_and_unmatched_pieces() {
        let t = bert();
        let hundred = "ab".repeat(50);
        assert_eq!(toks(&t, &hundred), ["[UNK]"]); // no "##ab": unmatched piece
        let with_space = format!("{} x", "x".repeat(100));
        assert_eq!(toks(&t, &with_space), ["[UNK]", "x"]); // 100 chars, no "##x"
        assert_eq!(toks(&t, &"a".repeat(101)), ["[UNK]"]);
        assert_eq!(toks(&t, "cafx"), ["[UNK]"]);
    }

    #[test]
    fn accents() {
        let t = bert();
        assert_eq!(toks(&t, "Café"), ["cafe"]);
        assert_eq!(toks(&t, "Cafe\u{301}"), ["cafe"]);
        assert_eq!(toks(&t, "CAFÉ!"), ["cafe", "!"]);
        let keep = tokenizer(TokenizerConfig {
            strip_accents: false,
            ..TokenizerConfig::bert_uncased()
        });
        assert_eq!(toks(&keep, "Café"), ["café"]);
        // NFD input is not recomposed when accents are kept.
        assert_eq!(toks(&keep, "Cafe\u{301}"), ["[UNK]"]);
    }

    #[test]
    fn cjk_splitting() {
        let t = bert();
        assert_eq!(toks(&t, "中文"), ["中", "文"]);
        assert_eq!(toks(&t, "a中b"), ["a", "中", "b"]);
        let no_cjk = tokenizer(TokenizerConfig {
            handle_chinese_chars: false,
            ..TokenizerConfig::bert_uncased()
        });
        assert_eq!(toks(&no_cjk, "中文"), ["[UNK]"]);
    }

    #[test]
    fn punctuation_incl_ascii_symbols() {
        let t = bert();
        assert_eq!(
            toks(&t, "a$b+c<a=b>c^a`b|c~a"),
            [
                "a", "$", "b", "+", "c", "<", "a", "=", "b", ">", "c", "^", "a", "`", "b", "|",
                "c", "~", "a"
            ]
        );
        assert_eq!(toks(&t, "hi, there!!"), ["hi", ",", "there", "!", "!"]);
    }

    #[test]
    fn empty_and_whitespace_only() {
        let t = bert();
        for s in [
            "",
            " ",
            "\t\n\r ",
            "\u{200B}",
            "\u{FEFF}",
            "\u{3000}\u{2028}",
            "\0",
        ] {
            assert_eq!(t.encode(s, None), [2, 3], "{s:?}");
            assert_eq!(t.encode(s, Some(0)), [2, 3], "{s:?}");
            assert_eq!(t.count_tokens(s, None), 2);
        }
    }

    #[test]
    fn truncation() {
        let t = bert();
        let text = "a b c ab x y";
        assert_eq!(t.encode(text, None), [2, 11, 12, 13, 14, 15, 16, 3]);
        assert_eq!(t.encode(text, Some(5)), [2, 11, 12, 13, 3]);
        assert_eq!(t.encode(text, Some(2)), [2, 3]);
        assert_eq!(t.encode(text, Some(1)), [2, 3]);
        assert_eq!(t.encode(text, Some(100)), t.encode(text, None));
        for m in [None, Some(0), Some(3), Some(5), Some(8), Some(9)] {
            assert_eq!(t.count_tokens(text, m), t.encode(text, m).len());
        }
        let mut buf = vec![99; 50];
        t.encode_into(text, Some(4), &mut buf);
        assert_eq!(buf, [2, 11, 12, 3]);
    }

    #[test]
    fn decode_like_hf() {
        let t = bert();
        let ids = t.encode("ΟΔΟΣ hi, [MASK] there", None);
        assert_eq!(t.decode(&ids, true), "οδοσ hi , there");
        assert_eq!(t.decode(&ids, false), "[CLS] οδοσ hi , [MASK] there [SEP]");
        assert_eq!(t.decode(&[8, 5, 9999], false), "##δ hi");
        assert_eq!(t.decode(&[], false), "");
    }

    #[test]
    fn longest_first_as_hf() {
        // Fits: nothing cut.
        assert_eq!(longest_first(3, 4, 7), (3, 4));
        // Only the longer one is cut (the shorter fits beside it).
        assert_eq!(longest_first(2, 10, 7), (2, 5));
        assert_eq!(longest_first(10, 2, 7), (5, 2));
        // Both long: halves, the longer keeps the odd id; a tie gives it to
        // the second.
        assert_eq!(longest_first(10, 12, 7), (3, 4));
        assert_eq!(longest_first(12, 10, 7), (4, 3));
        assert_eq!(longest_first(9, 9, 7), (3, 4));
        // The shorter one is more than half: both cut to halves.
        assert_eq!(longest_first(5, 6, 8), (4, 4));
        assert_eq!(longest_first(0, 9, 4), (0, 4));
        assert_eq!(longest_first(5, 5, 0), (0, 0));
    }

    #[test]
    fn pairs_with_types_and_truncation() {
        let t = bert();
        let p = t.encode_pair("hi there", "a b c", None);
        assert_eq!(p.ids, [2, 5, 6, 3, 11, 12, 13, 3]);
        assert_eq!(p.type_ids, [0, 0, 0, 0, 1, 1, 1, 1]);
        assert!(!p.truncated);
        let p = t.encode_pair("hi there", "a b c", Some(7));
        assert_eq!(p.ids, [2, 5, 6, 3, 11, 12, 3]);
        assert_eq!(p.type_ids, [0, 0, 0, 0, 1, 1, 1]);
        assert!(p.truncated);
        let p = t.encode_pair("", "", Some(2));
        assert_eq!((p.ids, p.type_ids), (vec![2, 3, 3], vec![0, 0, 1]));
        // Two long texts beyond the bounded prefix: the longer one keeps
        // the odd id, as with the whole texts.
        let long_a = "a ".repeat(20_000);
        let long_b = "b ".repeat(20_001);
        let p = t.encode_pair(&long_a, &long_b, Some(10));
        assert_eq!(p.ids, [2, 11, 11, 11, 3, 12, 12, 12, 12, 3]);
        let p = t.encode_pair(&long_b, &long_a, Some(10));
        assert_eq!(p.ids, [2, 12, 12, 12, 12, 3, 11, 11, 11, 3]);
        // The first text tokenized once, whole, then paired.
        let mut q = Vec::new();
        t.encode_raw(&long_b, &mut q);
        let again = t.encode_pair_after(&long_b, &q, true, &long_a, Some(10));
        assert_eq!(again, p);
    }

    #[test]
    fn send_sync() {
        fn check<T: Send + Sync>() {}
        check::<Tokenizer>();
    }
}
