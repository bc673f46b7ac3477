//! Tokenizers matching HuggingFace's fast tokenizers (`tokenizers`) id for id,
//! behind one type, [`Tokenizer`]: the model file says which one it carries
//! (`crate::model::tokenizer`), and everything above this module (prompts,
//! truncation, windows, token counts, pairs for cross-encoders) uses the same
//! calls whatever the kind.
//!
//! - **WordPiece** (BERT, MPNet): the BERT pipeline of this file and its
//!   stages (format research notes, section 5.2):
//!   1. split the raw text on the special-token strings (`[PAD] [UNK] [CLS] [SEP]
//!      [MASK]`, case-sensitive, leftmost-longest, before normalization); a match
//!      becomes its id directly;
//!   2. each other segment goes through [`normalizer::Normalizer`] (BertNormalizer),
//!      and is split again on the added special tokens HF matches after
//!      normalization ([`Tokenizer::with_normalized_specials`], MPNet's `<unk>`);
//!   3. [`pre_tokenizer::for_each_word`] (BertPreTokenizer),
//!   4. [`wordpiece::WordPiece`] per word;
//!   5. [`Tokenizer::encode`] adds the vocabulary's cls/sep ids (`[CLS]`/`[SEP]`
//!      for BERT, `<s>`/`</s>` for MPNet) and truncates from the right.
//! - **SentencePiece Unigram** (XLM-R, multilingual BERT) and **BPE**
//!   (byte-level: RoBERTa, ModernBERT, Qwen2/Qwen3; SentencePiece-style with
//!   byte fallback: Gemma): a [`pipeline::Pipeline`] built from a
//!   [`spec::TokenizerSpec`] (added tokens, normalizers, pre-tokenizers, the
//!   model, the post-processor template), as `tokenizer.json` describes it;
//!   [`Tokenizer::from_hf_dir`] builds one from a HuggingFace folder.

pub mod added;
mod aligned;
pub mod bpe;
pub mod byte_level;
mod byte_level_tables;
pub mod normalizer;
pub mod normalizers;
mod offsets;
pub mod pipeline;
pub mod pre_tokenizer;
pub mod pre_tokenizers;
pub mod precompiled;
pub mod spec;
pub mod split;
pub mod template;
pub mod unigram;
pub mod vocab;
pub mod wordpiece;
pub use offsets::TokenSpan;

use std::cell::RefCell;

use crate::error::{Error, Result};
use normalizer::Normalizer;
use pipeline::Pipeline;
use spec::{TokenizerKind, TokenizerSpec};
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

/// The BERT WordPiece pipeline (the stages of the module docs, 1 to 4).
#[derive(Debug, Clone)]
struct Bert {
    normalizer: Normalizer,
    wordpiece: WordPiece,
    specials: SpecialMatcher,
    /// The special tokens matched after normalization (usually none).
    normalized_specials: SpecialMatcher,
    /// A special-token string contains ASCII whitespace, so long texts cannot be
    /// cut at whitespace (see [`Tokenizer::encode_raw_bounded`]).
    specials_have_whitespace: bool,
    /// The vocabulary's cls and sep ids, framing one text.
    cls: [u32; 1],
    sep: [u32; 1],
}

/// Which tokenizer runs.
#[derive(Debug, Clone)]
enum Kind {
    WordPiece(Box<Bert>),
    /// SentencePiece Unigram or byte-level BPE.
    Pipeline(Box<Pipeline>),
}

/// A tokenizer: BERT WordPiece, SentencePiece Unigram or byte-level BPE (see
/// the module docs). Immutable, `Send + Sync`; share it between threads.
#[derive(Debug, Clone)]
pub struct Tokenizer {
    vocab: Vocab,
    config: TokenizerConfig,
    kind: Kind,
}

impl Tokenizer {
    /// Builds a WordPiece tokenizer (the lookup tables are built once, here).
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
        let bert = Bert {
            normalizer,
            wordpiece,
            specials,
            normalized_specials,
            specials_have_whitespace,
            cls: [vocab.specials().cls],
            sep: [vocab.specials().sep],
        };
        Tokenizer {
            vocab,
            config,
            kind: Kind::WordPiece(Box::new(bert)),
        }
    }

    /// Builds the tokenizer a [`TokenizerSpec`] describes over `vocab` (its
    /// pieces, in the same order, with the model's five special ids).
    ///
    /// # Errors
    /// A spec whose pieces differ from the vocabulary's, or that does not
    /// build (named by [`TokenizerSpec::build`]).
    pub fn from_spec(spec: &TokenizerSpec, vocab: Vocab) -> Result<Tokenizer> {
        if spec.pieces.len() != vocab.len() {
            return Err(Error::model(format!(
                "the tokenizer has {} pieces but the vocabulary {} tokens",
                spec.pieces.len(),
                vocab.len()
            )));
        }
        if spec.kind == TokenizerKind::WordPiece {
            return Err(Error::unsupported(
                "a WordPiece tokenizer is described by the BERT options, not a stored spec",
            ));
        }
        // One buffer for the vocabulary and the pipeline: the vocabulary's when
        // the spec's is a copy of it.
        let pipeline = if !spec.pieces.same_buffer(vocab.pieces()) && spec.pieces == *vocab.pieces()
        {
            spec.build_over(vocab.pieces())?
        } else {
            spec.build()?
        };
        Ok(Tokenizer {
            vocab,
            config: TokenizerConfig::bert_uncased(),
            kind: Kind::Pipeline(Box::new(pipeline)),
        })
    }

    /// Builds the tokenizer of a HuggingFace `tokenizer.json` (with the
    /// folder's `tokenizer_config.json`, if any, for the class rebuilds of
    /// [`spec::Layout::AsTransformers`] and the special tokens): ModernBERT's,
    /// Qwen2/Qwen3's, Gemma's, RoBERTa's, XLM-R's and any other Unigram or
    /// BPE file whose stages this module runs. The vocabulary's five special
    /// ids are [`spec::DeclaredSpecials::special_ids`] (declared, or stand-ins
    /// where the folder declares none); the template frames texts.
    ///
    /// # Errors
    /// A stage this module does not run or a malformed file, named (see
    /// [`TokenizerSpec::from_hf_json`]).
    pub fn from_hf_json(
        tokenizer_json: &serde_json::Value,
        tokenizer_config: Option<&serde_json::Value>,
        layout: spec::Layout,
    ) -> Result<Tokenizer> {
        let spec = TokenizerSpec::from_hf_json(tokenizer_json, tokenizer_config, layout)?;
        let specials = spec
            .declared_specials(tokenizer_config)?
            .special_ids(&spec.template()?);
        let vocab = Vocab::with_pieces(spec.pieces.clone(), specials)?;
        Tokenizer::from_spec(&spec, vocab)
    }

    /// [`Tokenizer::from_hf_json`] of `dir/tokenizer.json` and
    /// `dir/tokenizer_config.json` (optional).
    ///
    /// # Errors
    /// As [`Tokenizer::from_hf_json`]; a missing or unreadable
    /// `tokenizer.json`.
    pub fn from_hf_dir(
        dir: impl AsRef<std::path::Path>,
        layout: spec::Layout,
    ) -> Result<Tokenizer> {
        let read = |name: &str| -> Result<Option<serde_json::Value>> {
            let path = dir.as_ref().join(name);
            let text = match std::fs::read_to_string(&path) {
                Ok(t) => t,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
                Err(e) => return Err(Error::io(path.display(), e)),
            };
            serde_json::from_str(&text)
                .map(Some)
                .map_err(|e| Error::model(format!("{}: not JSON ({e})", path.display())))
        };
        let tj = read("tokenizer.json")?.ok_or_else(|| {
            Error::model(format!("{}: no tokenizer.json", dir.as_ref().display()))
        })?;
        let cfg = read("tokenizer_config.json")?;
        Tokenizer::from_hf_json(&tj, cfg.as_ref(), layout)
    }

    /// Also matches the tokens `ids` (of the vocabulary; others are ignored)
    /// as special tokens in the normalized text, like HF added tokens with
    /// `normalized: true` (MPNet's `<unk>`): after the five specials of the
    /// vocabulary are matched in the raw text and each other segment is
    /// normalized, the segment is split on these strings (leftmost-longest).
    /// WordPiece only (a pipeline has its own added tokens); a no-op otherwise.
    pub fn with_normalized_specials(mut self, ids: &[u32]) -> Tokenizer {
        if let Kind::WordPiece(b) = &mut self.kind {
            b.normalized_specials = SpecialMatcher::new(&self.vocab, ids);
            let ws = |t: &(String, u32)| {
                t.0.bytes()
                    .any(|b| matches!(b, b' ' | b'\t' | b'\n' | b'\r'))
            };
            b.specials_have_whitespace |= b.normalized_specials.tokens.iter().any(ws);
        }
        self
    }

    /// Heap bytes the tokenizer holds (its vocabulary, lookup structures,
    /// scores, merges, char map), summed from the sizes of its buffers; the
    /// per-thread scratch buffers and the BPE word cache are not counted.
    pub fn heap_bytes(&self) -> usize {
        self.vocab.heap_bytes()
            + match &self.kind {
                Kind::WordPiece(b) => b.wordpiece.heap_bytes(),
                Kind::Pipeline(p) if p.pieces().same_buffer(self.vocab.pieces()) => {
                    p.heap_bytes_beyond_pieces()
                }
                Kind::Pipeline(p) => p.heap_bytes(),
            }
    }

    /// The vocabulary.
    pub fn vocab(&self) -> &Vocab {
        &self.vocab
    }

    /// The WordPiece options (for other kinds, unused defaults).
    pub fn config(&self) -> &TokenizerConfig {
        &self.config
    }

    /// The tokenizer model.
    pub fn kind(&self) -> TokenizerKind {
        match &self.kind {
            Kind::WordPiece(_) => TokenizerKind::WordPiece,
            Kind::Pipeline(p) => match p.model {
                pipeline::Model::Unigram(_) => TokenizerKind::Unigram,
                pipeline::Model::Bpe(_) => TokenizerKind::Bpe,
            },
        }
    }

    /// Appends the ids of `text` to `out`, without special tokens around it
    /// and without truncation.
    pub fn encode_raw(&self, text: &str, out: &mut Vec<u32>) {
        match &self.kind {
            Kind::WordPiece(b) => SCRATCH.with(|cell| match cell.try_borrow_mut() {
                Ok(mut s) => {
                    b.encode_raw_with(text, out, &mut s);
                    s.trim();
                }
                // Unreachable in practice (no re-entrancy); stay correct anyway.
                Err(_) => b.encode_raw_with(text, out, &mut Scratch::default()),
            }),
            Kind::Pipeline(p) => p.encode_raw(text, out),
        }
    }

    /// The ids before and after one text (`[CLS]` / `[SEP]`, `<s>` / `</s>`).
    fn frame(&self) -> (&[u32], &[u32]) {
        match &self.kind {
            Kind::WordPiece(b) => (&b.cls, &b.sep),
            Kind::Pipeline(p) => (&p.template.single_prefix.ids, &p.template.single_suffix.ids),
        }
    }

    /// The special ids one text is framed with: `(before, after)`.
    pub fn single_frame(&self) -> (Vec<u32>, Vec<u32>) {
        let (a, b) = self.frame();
        (a.to_vec(), b.to_vec())
    }

    /// The prefix + the ids of `text` truncated to `max_len` minus the frame
    /// + the suffix (`[CLS] … [SEP]`, `<s> … </s>`). `None` means no
    ///   truncation; a `max_len` below the frame keeps none of the text.
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
        let (pre, post) = self.frame();
        out.clear();
        out.extend_from_slice(pre);
        match max_len {
            Some(m) => {
                let want = m.saturating_sub(pre.len() + post.len());
                self.encode_raw_bounded(text, want, out);
                out.truncate(pre.len() + want);
            }
            None => self.encode_raw(text, out),
        }
        out.extend_from_slice(post);
    }

    /// As [`Tokenizer::encode_into`] with `Some(max_len)`; returns whether the
    /// text had more ids than fit (and was cut). Tokenizes at most one id
    /// further than `encode_into` to tell.
    pub fn encode_into_checked(&self, text: &str, max_len: usize, out: &mut Vec<u32>) -> bool {
        let (pre, post) = self.frame();
        out.clear();
        out.extend_from_slice(pre);
        let want = max_len.saturating_sub(pre.len() + post.len());
        self.encode_raw_bounded(text, want + 1, out);
        let cut = out.len() - pre.len() > want;
        out.truncate(pre.len() + want);
        out.extend_from_slice(post);
        cut
    }

    /// A pair as a cross-encoder sees it (BERT `[CLS] a [SEP] b [SEP]`,
    /// RoBERTa/XLM-R `<s> a </s></s> b </s>`), with HF's `longest_first`
    /// truncation to `max_len` ids in all: returns the ids and the token type
    /// ids (0 for the first text and its frame, 1 for the second for BERT).
    pub fn encode_pair(&self, a: &str, b: &str, max_len: Option<usize>) -> (Vec<u32>, Vec<u32>) {
        match &self.kind {
            Kind::Pipeline(p) => p.encode_pair(a, b, max_len),
            Kind::WordPiece(_) => {
                let sp = self.vocab.specials();
                let (mut ia, mut ib) = (Vec::new(), Vec::new());
                self.encode_raw(a, &mut ia);
                self.encode_raw(b, &mut ib);
                if let Some(m) = max_len {
                    let (ka, kb) =
                        template::Template::longest_first(ia.len(), ib.len(), m.saturating_sub(3));
                    ia.truncate(ka);
                    ib.truncate(kb);
                }
                let mut ids = Vec::with_capacity(ia.len() + ib.len() + 3);
                ids.push(sp.cls);
                ids.extend_from_slice(&ia);
                ids.push(sp.sep);
                let first = ids.len();
                ids.extend_from_slice(&ib);
                ids.push(sp.sep);
                let mut types = vec![0u32; first];
                types.resize(ids.len(), 1);
                (ids, types)
            }
        }
    }

    /// The length of [`Tokenizer::encode`]`(text, max_len)`.
    pub fn count_tokens(&self, text: &str, max_len: Option<usize>) -> usize {
        let (pre, post) = self.frame();
        let framed = pre.len() + post.len();
        let mut ids = Vec::new();
        match max_len {
            Some(m) => {
                let want = m.saturating_sub(framed);
                self.encode_raw_bounded(text, want, &mut ids);
                ids.len().min(want) + framed
            }
            None => {
                self.encode_raw(text, &mut ids);
                ids.len() + framed
            }
        }
    }

    /// Appends at least the first `want` ids of `encode_raw(text)` (all of them
    /// when the text has fewer), tokenizing growing prefixes of a long text
    /// where a cut is exact.
    ///
    /// WordPiece: a prefix is cut right after an ASCII space, tab, CR or LF.
    /// Such a cut is exact: those characters are never dropped by the
    /// normalizer and always end a word; no special-token string contains them
    /// (checked at construction, else the whole text is used); and
    /// normalization is per character (NFD never moves combining marks across
    /// a whitespace starter). So the ids of the prefix are the first ids of
    /// the whole text. Prefixes start at 16 KiB and double until they yield
    /// `want` ids. A pipeline has its own rule
    /// ([`pipeline::Pipeline::encode_raw_bounded`]).
    pub fn encode_raw_bounded(&self, text: &str, want: usize, out: &mut Vec<u32>) {
        let b = match &self.kind {
            Kind::WordPiece(b) => b,
            Kind::Pipeline(p) => return p.encode_raw_bounded(text, want, out),
        };
        const FIRST_PREFIX: usize = 16 << 10;
        let start = out.len();
        if b.specials_have_whitespace || text.len() <= FIRST_PREFIX {
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

    /// Turns ids back into text. WordPiece, like HF's WordPiece decoder:
    /// tokens joined with spaces, continuation pieces (`##x`) glued to the
    /// previous token (a leading continuation piece keeps its prefix); HF's
    /// `clean_up_tokenization_spaces` is not applied; case, accents and
    /// spacing are not restored. A pipeline uses its file's decoder
    /// (Metaspace, ByteLevel). Ids outside the vocabulary are skipped; with
    /// `skip_special`, so are the special ids.
    pub fn decode(&self, ids: &[u32], skip_special: bool) -> String {
        if let Kind::Pipeline(p) = &self.kind {
            return p.decode(ids, skip_special);
        }
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

impl Bert {
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
    fn send_sync() {
        fn check<T: Send + Sync>() {}
        check::<Tokenizer>();
    }
}
