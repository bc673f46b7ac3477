//! Byte-level BPE (RoBERTa's tokenizer) against the reference ids of HF
//! `tokenizers` / sentence-transformers (`shared/reference/families/`).

use embedder::tokenizer::bpe::{parse_hf_model, parse_vocab_merges, Bpe};
use embedder::tokenizer::byte_level::ByteLevel;

use crate::common::{read_reference, shared_dir};

/// `shared/reference/families/tokenizer-bpe/<name>`.
fn bpe_file(name: &str) -> String {
    let path = shared_dir()
        .join("reference/families/tokenizer-bpe")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The test's own end-to-end harness over the BPE parts (the general pipeline
/// lives elsewhere): the added tokens of `tokenizer.json` matched in the raw
/// text leftmost-longest (with `lstrip`: the whitespace before the match is
/// part of it), each other segment through `ByteLevel` and `Bpe`, framed by
/// RoBERTa's `<s>` ... `</s>`, content truncated to `max_len - 2`.
struct Harness {
    bpe: Bpe,
    pre: ByteLevel,
    /// `(content, id, lstrip, rstrip)`.
    added: Vec<(String, u32, bool, bool)>,
    cls: u32,
    sep: u32,
}

impl Harness {
    fn load() -> Harness {
        let json: serde_json::Value = serde_json::from_str(&bpe_file("tokenizer.json")).unwrap();
        let parts = parse_hf_model(&json["model"]).unwrap();
        let bpe = Bpe::new(parts.pieces, &parts.merges, parts.options).unwrap();
        let p = &json["pre_tokenizer"];
        assert_eq!(p["type"], "ByteLevel");
        let pre = ByteLevel {
            add_prefix_space: p["add_prefix_space"].as_bool().unwrap(),
            trim_offsets: p["trim_offsets"].as_bool().unwrap(),
            use_regex: p["use_regex"].as_bool().unwrap(),
        };
        let added = json["added_tokens"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| {
                assert_eq!(t["normalized"], false);
                assert_eq!(t["single_word"], false);
                (
                    t["content"].as_str().unwrap().to_string(),
                    t["id"].as_u64().unwrap() as u32,
                    t["lstrip"].as_bool().unwrap(),
                    t["rstrip"].as_bool().unwrap(),
                )
            })
            .collect();
        let pp = &json["post_processor"];
        assert_eq!(pp["type"], "RobertaProcessing");
        Harness {
            bpe,
            pre,
            added,
            cls: pp["cls"][1].as_u64().unwrap() as u32,
            sep: pp["sep"][1].as_u64().unwrap() as u32,
        }
    }

    /// Leftmost-longest added token at or after `from`: (start, end, index).
    fn find(&self, text: &str, from: usize) -> Option<(usize, usize, usize)> {
        (from..text.len())
            .filter(|&i| text.is_char_boundary(i))
            .find_map(|i| {
                self.added
                    .iter()
                    .enumerate()
                    .filter(|(_, t)| text[i..].starts_with(t.0.as_str()))
                    .max_by_key(|(_, t)| t.0.len())
                    .map(|(k, t)| (i, i + t.0.len(), k))
            })
    }

    fn encode_raw(&self, text: &str, out: &mut Vec<u32>) {
        let mut scratch = String::new();
        let mut segment = |s: &str, out: &mut Vec<u32>| {
            self.pre
                .for_each_word(s, &mut scratch, |w| self.bpe.tokenize_word(w, out));
        };
        let mut done = 0;
        while let Some((mut start, mut end, k)) = self.find(text, done) {
            let (_, id, lstrip, rstrip) = &self.added[k];
            if *lstrip {
                start = done.max(text[..start].trim_end().len());
            }
            if *rstrip {
                end = text.len() - text[end..].trim_start().len();
            }
            segment(&text[done..start], out);
            out.push(*id);
            done = end;
        }
        segment(&text[done..], out);
    }

    fn encode(&self, text: &str, max_len: Option<usize>) -> Vec<u32> {
        let mut ids = vec![self.cls];
        self.encode_raw(text, &mut ids);
        if let Some(m) = max_len {
            ids.truncate(m - 1);
        }
        ids.push(self.sep);
        ids
    }
}

fn check(h: &Harness, name: &str, max_len: Option<usize>, lines: usize) {
    let cases = read_reference(name);
    assert_eq!(cases.len(), lines, "{name}: line count");
    let mut bad = Vec::new();
    for (i, c) in cases.iter().enumerate() {
        let got = h.encode(&c.text, max_len);
        if got != c.input_ids {
            bad.push(format!(
                "line {}: {:?}\n  expected {:?}\n  got      {:?}",
                i + 1,
                c.text,
                c.input_ids,
                got
            ));
        }
    }
    assert!(
        bad.is_empty(),
        "{name}: {} of {} lines differ; first 10:\n{}",
        bad.len(),
        cases.len(),
        bad[..bad.len().min(10)].join("\n")
    );
}

#[test]
fn bpe_cases_match_reference() {
    check(&Harness::load(), "families/bpe_cases.jsonl", None, 2914);
}

#[test]
fn roberta_reference_ids_match() {
    check(
        &Harness::load(),
        "families/roberta-bpe-tiny_reference.jsonl",
        Some(128),
        353,
    );
}

#[test]
fn slow_files_give_the_same_model() {
    let json: serde_json::Value = serde_json::from_str(&bpe_file("tokenizer.json")).unwrap();
    let parts = parse_hf_model(&json["model"]).unwrap();
    assert_eq!(parts.pieces.len(), 6000);
    assert_eq!(parts.merges.len(), 5739);
    let (pieces, merges) =
        parse_vocab_merges(&bpe_file("vocab.json"), &bpe_file("merges.txt")).unwrap();
    assert_eq!(pieces, parts.pieces);
    assert_eq!(merges, parts.merges);
}

#[test]
fn cache_is_shared_between_threads() {
    let h = Harness::load();
    let cases = read_reference("families/bpe_cases.jsonl");
    std::thread::scope(|s| {
        for t in 0..4 {
            let (h, cases) = (&h, &cases);
            s.spawn(move || {
                for c in cases.iter().skip(t).step_by(2) {
                    assert_eq!(h.encode(&c.text, None), c.input_ids, "{:?}", c.text);
                }
            });
        }
    });
}

#[test]
fn decode_round_trips_byte_level() {
    let h = Harness::load();
    for c in read_reference("families/bpe_cases.jsonl") {
        let mut ids = Vec::new();
        h.pre.for_each_word(&c.text, &mut String::new(), |w| {
            h.bpe.tokenize_word(w, &mut ids)
        });
        let mut text = String::new();
        embedder::tokenizer::byte_level::decode(
            ids.iter().map(|&i| h.bpe.token(i).unwrap()),
            &mut text,
        );
        // Unknown characters cannot occur (every byte is a token), so the bytes
        // come back.
        assert_eq!(text, c.text);
    }
}
