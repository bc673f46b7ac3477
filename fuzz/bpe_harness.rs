//! The `bpe` fuzz entry point (included with `#[path]` by `fuzz/harness.rs` and
//! by `tests/it/bpe.rs`; public API of `embedder` only): a BPE model read from
//! arbitrary bytes, then arbitrary text through `ByteLevel` and `Bpe`.
//!
//! Input: `mode | options | A \0 B \0 text` (lossy UTF-8 after the two bytes).
//! - `mode % 3 == 0`: `A` is `vocab.json`, `B` is `merges.txt`;
//! - `mode % 3 == 1`: `A` is a `tokenizer.json` `model` object (its own options);
//! - `mode % 3 == 2`: a model every byte of which is a token, with merges that
//!   build each line of `A` (byte-mapped) left to right: lossless, so the
//!   tokens must spell the words and decode to the text.
//!
//! `options` bits: 1 `<unk>` as unk token, 2 fuse_unk, 4 byte_fallback,
//! 8 ignore_merges, 16 prefix `##`, 32 suffix `</w>` (modes 0 and 1 only),
//! 64 add_prefix_space, 128 no regex.
//!
//! Invariants: a reader returns `Ok` or `Err`; every id has a token; the cached
//! and uncached results agree; the pre-tokenizer's words cover the text; and,
//! in mode 2, the tokens concatenate to the word and decode to the text.

#![allow(dead_code)]

use embedder::tokenizer::bpe::{parse_hf_model, parse_vocab_merges, Bpe, BpeOptions};
use embedder::tokenizer::byte_level::{self, ByteLevel, BYTE_CHAR};

/// The mode-2 model: the 256 byte characters, `<unk>`, the `<0xXX>` tokens,
/// then for each line (at most 64 lines of 48 characters) its prefixes, each
/// made by a merge of the one before and the next character.
fn lossless_model(lines: &str, options: BpeOptions) -> Option<Bpe> {
    let mut pieces: Vec<String> = BYTE_CHAR.iter().map(|c| c.to_string()).collect();
    pieces.push("<unk>".into());
    pieces.extend((0..=255u8).map(|b| format!("<0x{b:02X}>")));
    let mut ids: std::collections::HashMap<String, u32> = pieces
        .iter()
        .enumerate()
        .map(|(i, p)| (p.clone(), i as u32))
        .collect();
    let mut merges = Vec::new();
    for line in lines.split('\n').take(64) {
        let mut mapped = String::new();
        byte_level::push_mapped(line, &mut mapped);
        let mut acc = String::new();
        for c in mapped.chars().take(48) {
            if acc.is_empty() {
                acc.push(c);
                continue;
            }
            let left = ids[&acc];
            let right = ids[&c.to_string()];
            acc.push(c);
            let next = pieces.len() as u32;
            ids.entry(acc.clone()).or_insert_with(|| {
                pieces.push(acc.clone());
                next
            });
            merges.push((left, right));
        }
    }
    Bpe::new(pieces, &merges, options).ok()
}

/// Runs one input; panics only when an invariant is broken.
pub fn fuzz_bpe(data: &[u8]) {
    let [mode, opts, rest @ ..] = data else {
        return;
    };
    let body = String::from_utf8_lossy(rest);
    let mut parts = body.splitn(3, '\0');
    let a = parts.next().unwrap_or("");
    let b = parts.next().unwrap_or("");
    let text = parts.next().unwrap_or("");
    let mut options = BpeOptions {
        unk_token: (opts & 1 != 0).then(|| "<unk>".to_string()),
        fuse_unk: opts & 2 != 0,
        byte_fallback: opts & 4 != 0,
        ignore_merges: opts & 8 != 0,
        continuing_subword_prefix: if opts & 16 != 0 { "##" } else { "" }.into(),
        end_of_word_suffix: if opts & 32 != 0 { "</w>" } else { "" }.into(),
    };
    let pre = ByteLevel {
        add_prefix_space: opts & 64 != 0,
        trim_offsets: true,
        use_regex: opts & 128 == 0,
    };
    let lossless = mode % 3 == 2;
    let bpe = match mode % 3 {
        0 => parse_vocab_merges(a, b).and_then(|(p, m)| Bpe::new(p, &m, options)),
        1 => match serde_json::from_str::<serde_json::Value>(a) {
            Ok(v) => parse_hf_model(&v).and_then(|p| Bpe::new(p.pieces, &p.merges, p.options)),
            Err(_) => return,
        },
        _ => {
            options.continuing_subword_prefix.clear();
            options.end_of_word_suffix.clear();
            match lossless_model(a, options) {
                Some(b) => Ok(b),
                None => panic!("the lossless model of {a:?} is refused"),
            }
        }
    };
    let Ok(bpe) = bpe else {
        return;
    };
    check(&bpe, &pre, text, lossless);
}

/// The invariants of one text.
pub fn check(bpe: &Bpe, pre: &ByteLevel, text: &str, lossless: bool) {
    let mut raw_words = String::new();
    pre.for_each_raw_word(text, |w| {
        assert!(!w.is_empty(), "empty word in {text:?}");
        raw_words.push_str(w);
    });
    let expect = if text.is_empty() {
        String::new()
    } else if pre.add_prefix_space && !text.starts_with(' ') {
        format!(" {text}")
    } else {
        text.to_string()
    };
    assert_eq!(raw_words, expect, "the words do not cover the text");
    let mut all = Vec::new();
    let mut scratch = String::new();
    pre.for_each_word(text, &mut scratch, |w| {
        let mut ids = Vec::new();
        bpe.tokenize_word(w, &mut ids);
        let mut again = Vec::new();
        bpe.tokenize_word_uncached(w, &mut again);
        assert_eq!(ids, again, "cached and uncached differ on {w:?}");
        let mut spans = Vec::new();
        bpe.tokenize_word_spans(w, &mut spans);
        assert_eq!(
            spans.iter().map(|s| s.0).collect::<Vec<_>>(),
            ids,
            "spans and ids differ on {w:?}"
        );
        let mut at = 0;
        for &(_, a, b) in &spans {
            assert!(a == at && a <= b, "spans do not tile {w:?}: {spans:?}");
            at = b;
        }
        let mut spelled = String::new();
        for &id in &ids {
            let t = bpe.token(id);
            assert!(t.is_some(), "id {id} has no token");
            spelled.push_str(t.unwrap_or(""));
        }
        if lossless {
            assert_eq!(spelled, w, "the tokens do not spell the word");
        }
        all.extend(ids);
    });
    if lossless {
        let mut back = String::new();
        byte_level::decode(all.iter().map(|&i| bpe.token(i).unwrap_or("")), &mut back);
        assert_eq!(back, expect, "decode does not give the text back");
    }
}
