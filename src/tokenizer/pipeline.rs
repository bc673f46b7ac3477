//! The HF-`tokenizers`-style pipeline (Unigram and BPE models):
//! added tokens (raw) -> normalizer -> added tokens (normalized) ->
//! pre-tokenizer -> model per word -> template + truncation.
//!
//! Built by [`super::spec::TokenizerSpec::build`]. Immutable, `Send + Sync`; the
//! per-call buffers are thread-local.

use std::cell::RefCell;

use serde_json::Value;

use super::added::{AddedVocab, Split};
use super::aligned::{self, Aligned};
use super::bpe::Bpe;
use super::normalizers::Normalizer;
use super::pre_tokenizers::{metaspace_decode, PreScratch, PreTokenizer, PrependScheme};
use super::template::Template;
use super::unigram::{Unigram, UnigramScratch};
use super::vocab::Pieces;
use super::TokenSpan;

/// The model.
#[derive(Debug, Clone)]
pub enum Model {
    /// SentencePiece Unigram.
    Unigram(Unigram),
    /// Byte-pair encoding (byte-level for RoBERTa/GPT-2).
    Bpe(Bpe),
}

/// How ids turn back into text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decoder {
    /// Tokens concatenated.
    Concat,
    /// HF `Metaspace` decoder.
    Metaspace(char, PrependScheme),
    /// HF `ByteLevel` decoder: the bytes the characters stand for, as UTF-8.
    ByteLevel,
    /// SentencePiece-style BPE (Gemma, Llama): HF's `Sequence[Replace("▁",
    /// " "), ByteFallback, Fuse]` and optionally `Strip(" ", n, 0)`: `▁` becomes
    /// a space, runs of `<0xXX>` tokens become their bytes as UTF-8 (each byte
    /// of an invalid run a U+FFFD), and `n` leading spaces are dropped.
    SentencePiece {
        /// Leading spaces removed (`Strip`'s `start`).
        strip: usize,
    },
}

impl Decoder {
    /// From the HF JSON of a decoder (anything but `Metaspace` and `ByteLevel`
    /// concatenates).
    pub fn from_json(v: &Value) -> Decoder {
        if let Some(d) = Self::sentence_piece(v) {
            return d;
        }
        if v.get("type").and_then(Value::as_str) == Some("ByteLevel") {
            return Decoder::ByteLevel;
        }
        if v.get("type").and_then(Value::as_str) == Some("Metaspace") {
            if let Ok(Some(PreTokenizer::Metaspace {
                replacement,
                prepend_scheme,
                ..
            })) = PreTokenizer::from_json(v, "decoder")
            {
                return Decoder::Metaspace(replacement, prepend_scheme);
            }
        }
        Decoder::Concat
    }
}

impl Decoder {
    /// The SentencePiece-style sequence, if `v` is one.
    fn sentence_piece(v: &Value) -> Option<Decoder> {
        let list = v.get("decoders")?.as_array()?;
        if v.get("type")?.as_str()? != "Sequence" || !(3..=4).contains(&list.len()) {
            return None;
        }
        let ty = |i: usize| list[i].get("type").and_then(Value::as_str);
        let replace = ty(0) == Some("Replace")
            && list[0]["pattern"]["String"].as_str() == Some("\u{2581}")
            && list[0]["content"].as_str() == Some(" ");
        if !replace || ty(1) != Some("ByteFallback") || ty(2) != Some("Fuse") {
            return None;
        }
        let strip = match list.get(3) {
            None => 0,
            Some(s) => {
                if ty(3) != Some("Strip")
                    || s["content"].as_str() != Some(" ")
                    || s["stop"].as_u64() != Some(0)
                {
                    return None;
                }
                usize::try_from(s["start"].as_u64()?).ok()?
            }
        };
        Some(Decoder::SentencePiece { strip })
    }
}

/// The byte of a `<0xXX>` token.
fn byte_token(t: &str) -> Option<u8> {
    let hex = t.strip_prefix("<0x")?.strip_suffix('>')?;
    if hex.len() != 2 {
        return None;
    }
    u8::from_str_radix(hex, 16).ok()
}

/// [`Decoder::SentencePiece`] of `tokens`.
fn sentence_piece_decode(tokens: &[&str], strip: usize) -> String {
    let mut s = String::new();
    let mut bytes: Vec<u8> = Vec::new();
    let flush = |bytes: &mut Vec<u8>, s: &mut String| {
        match std::str::from_utf8(bytes) {
            Ok(t) => s.push_str(t),
            Err(_) => s.extend(std::iter::repeat_n('\u{FFFD}', bytes.len())),
        }
        bytes.clear();
    };
    for t in tokens {
        if let Some(b) = byte_token(t) {
            bytes.push(b);
            continue;
        }
        flush(&mut bytes, &mut s);
        s.push_str(&t.replace('\u{2581}', " "));
    }
    flush(&mut bytes, &mut s);
    let lead = s.chars().take(strip).take_while(|&c| c == ' ').count();
    s.split_off(lead)
}

#[derive(Default)]
struct Scratch {
    norm: String,
    tmp: String,
    pre: PreScratch,
    uni: UnigramScratch,
}

impl Scratch {
    fn trim(&mut self) {
        const KEEP: usize = 1 << 20;
        for b in [&mut self.norm, &mut self.tmp] {
            if b.capacity() > KEEP {
                *b = String::new();
            }
        }
        self.pre.trim(KEEP);
        self.uni.trim(KEEP / 16);
    }
}

thread_local! {
    static SCRATCH: RefCell<Scratch> = RefCell::new(Scratch::default());
}

/// A tokenizer pipeline.
#[derive(Debug, Clone)]
pub struct Pipeline {
    /// Added and special tokens.
    pub added: AddedVocab,
    /// The normalizer, if any.
    pub normalizer: Option<Normalizer>,
    /// The pre-tokenizer, if any.
    pub pre_tokenizer: Option<PreTokenizer>,
    /// The model.
    pub model: Model,
    /// Post-processing.
    pub template: Template,
    decoder: Decoder,
    /// Every token (for decode): the spec's buffer, shared with the vocabulary.
    pieces: Pieces,
    /// Long texts may be cut before a space (see [`Pipeline::encode_raw_bounded`]).
    cut_safe: bool,
    /// The pre-tokenizer needs to know what is at the start of the input.
    track_origin: bool,
}

impl Pipeline {
    pub(crate) fn new(
        added: AddedVocab,
        normalizer: Option<Normalizer>,
        pre_tokenizer: Option<PreTokenizer>,
        model: Model,
        template: Template,
        decoder: Decoder,
        pieces: Pieces,
    ) -> Pipeline {
        let space_kept = match &normalizer {
            None => true,
            Some(n) => n.cut_safe() && precompiled_keeps_space(n),
        };
        let cut_safe = space_kept
            && pre_tokenizer.as_ref().is_some_and(PreTokenizer::cut_safe)
            && !added.has_whitespace();
        let track_origin = pre_tokenizer
            .as_ref()
            .is_some_and(PreTokenizer::needs_origin);
        Pipeline {
            added,
            normalizer,
            pre_tokenizer,
            model,
            template,
            decoder,
            pieces,
            cut_safe,
            track_origin,
        }
    }

    /// The token of `id`.
    pub fn token(&self, id: u32) -> Option<&str> {
        self.pieces.get(id as usize)
    }

    /// Every token (model pieces and added tokens), by id.
    pub fn pieces(&self) -> &Pieces {
        &self.pieces
    }

    /// Number of tokens (model pieces and added tokens).
    pub fn vocab_len(&self) -> usize {
        self.pieces.len()
    }

    /// Bytes held beyond the token strings themselves (which take
    /// [`Pieces::heap_bytes`], shared with the vocabulary).
    pub fn heap_bytes_beyond_pieces(&self) -> usize {
        let model = match &self.model {
            Model::Unigram(u) => u.heap_bytes(),
            Model::Bpe(b) => b.heap_bytes(),
        };
        model + self.normalizer.as_ref().map_or(0, Normalizer::heap_bytes)
    }

    /// Heap bytes held (pieces, model, normalizer).
    pub fn heap_bytes(&self) -> usize {
        self.heap_bytes_pieces() + self.heap_bytes_beyond_pieces()
    }

    /// Bytes of the token strings and their offsets.
    pub fn heap_bytes_pieces(&self) -> usize {
        self.pieces.heap_bytes()
    }

    /// Appends the ids of `text` to `out`: no special tokens, no truncation.
    pub fn encode_raw(&self, text: &str, out: &mut Vec<u32>) {
        SCRATCH.with(|cell| match cell.try_borrow_mut() {
            Ok(mut s) => {
                self.encode_raw_with(text, out, &mut s);
                s.trim();
            }
            Err(_) => self.encode_raw_with(text, out, &mut Scratch::default()),
        });
    }

    fn encode_raw_with(&self, text: &str, out: &mut Vec<u32>, scratch: &mut Scratch) {
        self.added.split_raw(text, |s| match s {
            Split::Token(id, _, _) => out.push(id),
            Split::Text(seg, start) => self.encode_segment(seg, start == 0, out, scratch),
        });
    }

    fn encode_segment(&self, seg: &str, at_start: bool, out: &mut Vec<u32>, scratch: &mut Scratch) {
        let Scratch {
            norm,
            tmp,
            pre,
            uni,
        } = scratch;
        let first_char = || seg.chars().next().map_or(0, char::len_utf8);
        let (text, origin): (&str, usize) = match &self.normalizer {
            Some(n) if self.track_origin && at_start => {
                let o = n.normalize_tracking(seg, norm, tmp);
                (norm.as_str(), o)
            }
            Some(n) => {
                n.normalize(seg, norm, tmp);
                (norm.as_str(), 0)
            }
            None => (seg, if at_start { first_char() } else { 0 }),
        };
        if text.is_empty() {
            return;
        }
        if self.added.has_normalized() {
            self.added.split_normalized(text, |s| match s {
                Split::Token(id, _, _) => out.push(id),
                Split::Text(t, start) => self.words(t, origin.saturating_sub(start), pre, uni, out),
            });
        } else {
            self.words(text, origin, pre, uni, out);
        }
    }

    #[inline]
    fn words(
        &self,
        text: &str,
        origin: usize,
        pre: &mut PreScratch,
        uni: &mut UnigramScratch,
        out: &mut Vec<u32>,
    ) {
        match &self.pre_tokenizer {
            None => self.model_word(text, uni, out),
            Some(p) => p.for_each_word(text, origin, pre, &mut |w| self.model_word(w, uni, out)),
        }
    }

    #[inline]
    fn model_word(&self, word: &str, uni: &mut UnigramScratch, out: &mut Vec<u32>) {
        match &self.model {
            Model::Unigram(u) => u.tokenize_word(word, out, uni),
            Model::Bpe(b) => b.tokenize_word(word, out),
        }
    }

    /// The ids of [`Pipeline::encode_raw`]`(text)`, each with the bytes of
    /// `text` HF `tokenizers` gives as its offsets: the alignments of its
    /// normalized bytes followed through every normalizer and pre-tokenizer
    /// step as HF's `NormalizedString` does, then the post-processor's
    /// `trim_offsets` (byte-level BPE). An added token written in the text
    /// covers its string and the whitespace its `lstrip`/`rstrip` take. A
    /// separate path: `encode_raw` does not pay for it.
    pub fn encode_raw_with_offsets(&self, text: &str) -> Vec<TokenSpan> {
        let mut out = Vec::new();
        // HF's token string of each added token: the text it matched.
        let mut values: Vec<(usize, String)> = Vec::new();
        let mut uni = UnigramScratch::default();
        let mut words = Vec::new();
        let mut spans = Vec::new();
        let mut word_spans = |piece: Aligned, out: &mut Vec<TokenSpan>| {
            words.clear();
            aligned::words(self.pre_tokenizer.as_ref(), piece, &mut words);
            for w in &words {
                spans.clear();
                match &self.model {
                    Model::Unigram(u) => u.tokenize_word_spans(&w.s, &mut spans, &mut uni),
                    Model::Bpe(b) => b.tokenize_word_spans(&w.s, &mut spans),
                }
                out.extend(spans.iter().map(|&(id, a, b)| TokenSpan {
                    id,
                    offsets: w.span(a..b),
                }));
            }
        };
        self.added.split_raw(text, |s| match s {
            Split::Token(id, a, b) => {
                values.push((out.len(), text[a..b].to_string()));
                out.push(TokenSpan {
                    id,
                    offsets: Some((a, b)),
                });
            }
            Split::Text(seg, start) => {
                let raw = Aligned::new(seg, start);
                let n = match &self.normalizer {
                    Some(n) => aligned::normalize(n, &raw),
                    None => raw,
                };
                if n.s.is_empty() {
                    return;
                }
                if !self.added.has_normalized() {
                    word_spans(n, &mut out);
                    return;
                }
                let mut parts = Vec::new();
                self.added.split_normalized(&n.s, |s| match s {
                    Split::Token(id, a, b) => parts.push(Err((
                        TokenSpan {
                            id,
                            offsets: n.span(a..b),
                        },
                        n.s[a..b].to_string(),
                    ))),
                    Split::Text(t, at) => parts.push(Ok(n.slice(at..at + t.len()))),
                });
                for p in parts {
                    match p {
                        Ok(piece) => word_spans(piece, &mut out),
                        Err((span, value)) => {
                            values.push((out.len(), value));
                            out.push(span);
                        }
                    }
                }
            }
        });
        if !self.template.offset_trims.is_empty() {
            // The token strings HF trims: the vocabulary's, an added token's match.
            let mut strings: Vec<&str> =
                out.iter().map(|s| self.token(s.id).unwrap_or("")).collect();
            for (i, v) in &values {
                strings[*i] = v;
            }
            for &aps in &self.template.offset_trims {
                trim_offsets(text, &strings, aps, &mut out);
            }
        }
        out
    }

    /// Appends at least the first `want` ids of `encode_raw(text)` (all of them
    /// when there are fewer), tokenizing growing prefixes of a long text.
    ///
    /// A prefix is cut just before an ASCII space that sits between two ASCII
    /// alphanumerics, and only when that cut is exact: the normalizer keeps such
    /// a space and works per grapheme cluster or per character (a Replace
    /// pattern only of the known space-run kind), the pre-tokenizer ends a word
    /// at every space (`WhitespaceSplit`, `Whitespace` or a splitting
    /// `Metaspace`), and no added token contains whitespace. Then the words of
    /// the prefix are the first words of the text, the last one included (it
    /// ends with the alphanumeric before the space). Otherwise the whole text
    /// is tokenized. Prefixes start at 16 KiB and double.
    pub fn encode_raw_bounded(&self, text: &str, want: usize, out: &mut Vec<u32>) {
        const FIRST_PREFIX: usize = 16 << 10;
        let start = out.len();
        if !self.cut_safe || text.len() <= FIRST_PREFIX {
            self.encode_raw(text, out);
            return;
        }
        let b = text.as_bytes();
        let mut target = FIRST_PREFIX;
        while target < text.len() {
            let found = (target.max(1)..b.len().saturating_sub(1)).find(|&p| {
                b[p] == b' ' && b[p - 1].is_ascii_alphanumeric() && b[p + 1].is_ascii_alphanumeric()
            });
            let Some(cut) = found else { break };
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

    /// The template around `text`, the text's ids truncated from the right so
    /// that the whole has at most `max_len` ids (HF `truncation=True,
    /// max_length`; a `max_len` below the template's own ids keeps none of the
    /// text's).
    pub fn encode(&self, text: &str, max_len: Option<usize>) -> Vec<u32> {
        let mut out = Vec::new();
        self.encode_into(text, max_len, &mut out);
        out
    }

    /// As [`Pipeline::encode`], into `out` (cleared first).
    pub fn encode_into(&self, text: &str, max_len: Option<usize>, out: &mut Vec<u32>) {
        let t = &self.template;
        out.clear();
        out.extend_from_slice(&t.single_prefix.ids);
        let at = out.len();
        match max_len {
            Some(m) => {
                let want = m.saturating_sub(t.added(false));
                self.encode_raw_bounded(text, want, out);
                out.truncate(at + want);
            }
            None => self.encode_raw(text, out),
        }
        out.extend_from_slice(&t.single_suffix.ids);
    }

    /// The type ids of [`Pipeline::encode`]'s result of `len` ids.
    pub fn type_ids(&self, len: usize) -> Vec<u32> {
        let t = &self.template;
        let mut v = t.single_prefix.types.clone();
        let body = len.saturating_sub(t.added(false));
        v.extend(std::iter::repeat_n(t.single_type, body));
        v.extend_from_slice(&t.single_suffix.types);
        v
    }

    /// A pair as a cross-encoder sees it: the pair template, with HF's
    /// `longest_first` truncation to `max_len` ids in all. Returns the ids and
    /// the type ids. Both texts are tokenized whole: which one is longer
    /// decides who gets the odd id, so a bounded prefix would not be exact.
    pub fn encode_pair(&self, a: &str, b: &str, max_len: Option<usize>) -> (Vec<u32>, Vec<u32>) {
        let t = &self.template;
        let (mut ia, mut ib) = (Vec::new(), Vec::new());
        self.encode_raw(a, &mut ia);
        self.encode_raw(b, &mut ib);
        if let Some(m) = max_len {
            let room = m.saturating_sub(t.added(true));
            let (ka, kb) = Template::longest_first(ia.len(), ib.len(), room);
            ia.truncate(ka);
            ib.truncate(kb);
        }
        let mut ids = Vec::with_capacity(ia.len() + ib.len() + t.added(true));
        let mut types = Vec::with_capacity(ids.capacity());
        ids.extend_from_slice(&t.pair_prefix.ids);
        types.extend_from_slice(&t.pair_prefix.types);
        ids.extend_from_slice(&ia);
        types.extend(std::iter::repeat_n(t.pair_type_a, ia.len()));
        ids.extend_from_slice(&t.pair_middle.ids);
        types.extend_from_slice(&t.pair_middle.types);
        ids.extend_from_slice(&ib);
        types.extend(std::iter::repeat_n(t.pair_type_b, ib.len()));
        ids.extend_from_slice(&t.pair_suffix.ids);
        types.extend_from_slice(&t.pair_suffix.types);
        (ids, types)
    }

    /// The length of [`Pipeline::encode`]`(text, max_len)`.
    pub fn count_tokens(&self, text: &str, max_len: Option<usize>) -> usize {
        let added = self.template.added(false);
        let mut ids = Vec::new();
        match max_len {
            Some(m) => {
                let want = m.saturating_sub(added);
                self.encode_raw_bounded(text, want, &mut ids);
                ids.len().min(want) + added
            }
            None => {
                self.encode_raw(text, &mut ids);
                ids.len() + added
            }
        }
    }

    /// Ids back to text with the file's decoder (`Metaspace`: `▁` becomes a space,
    /// the first token's dropped unless the scheme is `never`; otherwise the
    /// tokens concatenated). Unknown ids are skipped; with `skip_special`, so
    /// are special added tokens.
    pub fn decode(&self, ids: &[u32], skip_special: bool) -> String {
        let tokens: Vec<&str> = ids
            .iter()
            .filter(|&&id| !(skip_special && self.added.get(id).is_some_and(|t| t.special)))
            .filter_map(|&id| self.token(id))
            .collect();
        match self.decoder {
            Decoder::Metaspace(rep, scheme) => metaspace_decode(&tokens, rep, scheme),
            Decoder::ByteLevel => {
                let mut s = String::new();
                super::byte_level::decode(tokens.iter().copied(), &mut s);
                s
            }
            Decoder::SentencePiece { strip } => sentence_piece_decode(&tokens, strip),
            Decoder::Concat => tokens.concat(),
        }
    }
}

/// HF's `process_offsets` (byte-level `trim_offsets`): a token's leading
/// and trailing `Ġ` (or whitespace) characters leave its offsets, except
/// the single leading one of the first token with `add_prefix_space`.
/// Counted in characters of `text`, as HF counts them. `strings`: each
/// token's string (an added token's is the text it matched, whitespace
/// taken by `lstrip`/`rstrip` included).
fn trim_offsets(text: &str, strings: &[&str], add_prefix_space: bool, spans: &mut [TokenSpan]) {
    let space = |c: char| c == 'Ġ' || c.is_whitespace();
    for (i, s) in spans.iter_mut().enumerate() {
        let Some((a, b)) = s.offsets else {
            continue;
        };
        let tok = strings[i];
        let mut lead = tok.chars().take_while(|&c| space(c)).count();
        let trail = tok.chars().rev().take_while(|&c| space(c)).count();
        let (mut a, mut b) = (a, b);
        if lead > 0 {
            let first = i == 0 || a == 0;
            if first && add_prefix_space && lead == 1 {
                lead = 0;
            }
            // `lead` characters forward, but not past the end.
            let moved = text
                .get(a..)
                .and_then(|t| t.char_indices().nth(lead).map(|(k, _)| a + k))
                .unwrap_or(text.len());
            a = moved.min(b);
        }
        if trail > 0 {
            let before = text.get(..b).unwrap_or("");
            if before.chars().count() >= trail {
                let back = before
                    .char_indices()
                    .rev()
                    .nth(trail - 1)
                    .map_or(0, |(k, _)| k);
                b = back.max(a);
            }
        }
        s.offsets = Some((a, b));
    }
}

/// A `Precompiled` step must leave an ASCII space unchanged for cuts before a
/// space to be exact.
fn precompiled_keeps_space(n: &Normalizer) -> bool {
    match n {
        Normalizer::Precompiled(m) => m.transform(" ").is_none(),
        Normalizer::Sequence(l) => l.iter().all(precompiled_keeps_space),
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::super::spec::{Layout, TokenizerSpec};
    use super::*;
    use serde_json::json;

    /// A tiny XLM-R-like tokenizer (classic layout, no char map).
    fn tiny(layout: Layout, config: Option<&Value>) -> Pipeline {
        let j = json!({
            "added_tokens": [
                {"id": 0, "content": "<s>", "special": true, "normalized": false},
                {"id": 1, "content": "<pad>", "special": true, "normalized": false},
                {"id": 2, "content": "</s>", "special": true, "normalized": false},
                {"id": 3, "content": "<unk>", "special": true, "normalized": false},
                {"id": 9, "content": "<mask>", "special": true, "normalized": false, "lstrip": true}
            ],
            "normalizer": {"type": "Replace", "pattern": {"Regex": " {2,}"}, "content": " "},
            "pre_tokenizer": {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "always", "split": true},
            "post_processor": {"type": "TemplateProcessing",
                "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                           {"SpecialToken": {"id": "</s>", "type_id": 0}}],
                "pair": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                         {"SpecialToken": {"id": "</s>", "type_id": 0}}, {"SpecialToken": {"id": "</s>", "type_id": 0}},
                         {"Sequence": {"id": "B", "type_id": 0}}, {"SpecialToken": {"id": "</s>", "type_id": 0}}],
                "special_tokens": {"</s>": {"id": "</s>", "ids": [2], "tokens": ["</s>"]},
                                   "<s>": {"id": "<s>", "ids": [0], "tokens": ["<s>"]}}},
            "decoder": {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "always", "split": true},
            "model": {"type": "Unigram", "unk_id": 3, "byte_fallback": false,
                "vocab": [["<s>", 0.0], ["<pad>", 0.0], ["</s>", 0.0], ["<unk>", 0.0],
                          ["▁", -2.0], ["▁a", -1.0], ["b", -1.5], ["▁b", -1.0], ["c", -3.0], ["<mask>", 0.0]]}
        });
        TokenizerSpec::from_hf_json(&j, config, layout)
            .unwrap()
            .build()
            .unwrap()
    }

    #[test]
    fn classic_layout_as_written() {
        let p = tiny(Layout::AsWritten, None);
        // "a  b": Replace -> "a b" -> "▁a", "▁b".
        assert_eq!(p.encode("a  b", None), [0, 5, 7, 2]);
        // Trailing space: "▁a", "▁".
        assert_eq!(p.encode("a ", None), [0, 5, 4, 2]);
        // lstrip <mask> swallows the space before it; "b" after it gets "▁".
        assert_eq!(p.encode("a <mask>b", None), [0, 5, 9, 7, 2]);
        // A literal special token is its id; the space after it is "▁".
        assert_eq!(p.encode("<s> a", None), [0, 0, 5, 2]);
        assert_eq!(p.encode("", None), [0, 2]);
        assert_eq!(p.encode(" ", None), [0, 4, 2]);
    }

    #[test]
    fn offsets_by_hand() {
        let p = tiny(Layout::AsWritten, None);
        let spans = |t: &str| -> Vec<(u32, Option<(usize, usize)>)> {
            let got = p.encode_raw_with_offsets(t);
            let mut ids = Vec::new();
            p.encode_raw(t, &mut ids);
            assert_eq!(got.iter().map(|s| s.id).collect::<Vec<_>>(), ids, "{t:?}");
            got.iter().map(|s| (s.id, s.offsets)).collect()
        };
        // "a  b": the run becomes one space aligned to its last byte, and that
        // space's "▁" starts "▁b"; the prepended "▁" takes "a"'s place.
        assert_eq!(spans("a  b"), [(5, Some((0, 1))), (7, Some((2, 4)))]);
        // A trailing space is a "▁" of its own.
        assert_eq!(spans("a "), [(5, Some((0, 1))), (4, Some((1, 2)))]);
        // <mask> with lstrip covers the space it takes; "b" after it gets a "▁"
        // aligned to itself.
        assert_eq!(
            spans("a <mask>b"),
            [(5, Some((0, 1))), (9, Some((1, 8))), (7, Some((8, 9)))]
        );
        // "é" (2 bytes) is unknown: one unk over "▁é".
        assert_eq!(spans("é"), [(4, Some((0, 2))), (3, Some((0, 2)))]);
        assert_eq!(spans(""), []);
    }

    #[test]
    fn transformers_rebuild_of_the_same_file() {
        let cfg = json!({"tokenizer_class": "XLMRobertaTokenizer"});
        let p = tiny(Layout::AsTransformers, Some(&cfg));
        // WhitespaceSplit first: no lone "▁" for runs, ends or specials' spaces.
        assert_eq!(p.encode("a  b", None), [0, 5, 7, 2]);
        assert_eq!(p.encode("a ", None), [0, 5, 2]);
        assert_eq!(p.encode("<s> a", None), [0, 0, 5, 2]);
        assert_eq!(p.encode(" \t", None), [0, 2]);
        // "abc": "▁a", "b", "c".
        assert_eq!(p.encode("abc", None), [0, 5, 6, 8, 2]);
    }

    #[test]
    fn truncation_and_counts() {
        let p = tiny(Layout::AsWritten, None);
        assert_eq!(p.encode("a b a b", Some(4)), [0, 5, 7, 2]);
        assert_eq!(p.encode("a b a b", Some(2)), [0, 2]);
        assert_eq!(p.encode("a b a b", Some(1)), [0, 2]);
        for m in [None, Some(0), Some(3), Some(5), Some(6), Some(7)] {
            assert_eq!(
                p.count_tokens("a b a b", m),
                p.encode("a b a b", m).len(),
                "{m:?}"
            );
        }
        assert_eq!(p.type_ids(4), [0, 0, 0, 0]);
    }

    #[test]
    fn pair_template_and_longest_first() {
        let p = tiny(Layout::AsWritten, None);
        let (ids, types) = p.encode_pair("a b", "b", None);
        assert_eq!(ids, [0, 5, 7, 2, 2, 7, 2]);
        assert_eq!(types, [0; 7]);
        // max 8: room 4 for 5 + 2 ids: a = max(2, 4 - 2) -> (2, 2).
        let (ids, _) = p.encode_pair("a b a b a", "b b", Some(8));
        assert_eq!(ids, [0, 5, 7, 2, 2, 7, 7, 2]);
        // max 7: room 3 for 5 + 2: swapped (2, 5) -> (2, 2) -> over: (1, 2),
        // swapped back: the longer A keeps 2, B keeps 1.
        let (ids, _) = p.encode_pair("a b a b a", "b b", Some(7));
        assert_eq!(ids, [0, 5, 7, 2, 2, 7, 2]);
    }

    #[test]
    fn decode_metaspace() {
        let p = tiny(Layout::AsWritten, None);
        let ids = p.encode("a b <mask>", None);
        assert_eq!(p.decode(&ids, true), "a b");
        assert_eq!(p.decode(&ids, false), "<s> a b<mask></s>");
        assert_eq!(p.decode(&[5, 99, 7], false), "a b");
    }

    #[test]
    fn bounded_encoding_matches_the_whole_text() {
        let p = tiny(Layout::AsWritten, None);
        let long = "a b ab  c ".repeat(5000);
        let mut whole = Vec::new();
        p.encode_raw(&long, &mut whole);
        for want in [0, 1, 100, 4000, 20000, whole.len() + 5] {
            let mut some = Vec::new();
            p.encode_raw_bounded(&long, want, &mut some);
            assert!(some.len() >= want.min(whole.len()), "{want}");
            assert_eq!(some[..], whole[..some.len()], "{want}");
        }
        let mut expect = vec![0];
        expect.extend_from_slice(&whole[..48]);
        expect.push(2);
        assert_eq!(p.encode(&long, Some(50)), expect);
    }

    #[test]
    fn send_sync() {
        fn check<T: Send + Sync>() {}
        check::<Pipeline>();
    }
}
