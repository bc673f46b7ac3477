//! Byte-level BPE (RoBERTa's tokenizer) against the reference ids of HF
//! `tokenizers` / sentence-transformers (`shared/reference/families/`).

use embedder::tokenizer::bpe::{parse_hf_model, parse_vocab_merges};
use embedder::tokenizer::pipeline::Pipeline;
use embedder::tokenizer::spec::{Layout, TokenizerKind, TokenizerSpec};

use crate::common::{read_reference, shared_dir};

/// `shared/reference/families/tokenizer-bpe/<name>`.
fn bpe_file(name: &str) -> String {
    let path = shared_dir()
        .join("reference/families/tokenizer-bpe")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// `tokenizer.json` + `tokenizer_config.json` through the shared pipeline.
fn pipeline(layout: Layout) -> Pipeline {
    let json: serde_json::Value = serde_json::from_str(&bpe_file("tokenizer.json")).unwrap();
    let cfg: serde_json::Value = serde_json::from_str(&bpe_file("tokenizer_config.json")).unwrap();
    let spec = TokenizerSpec::from_hf_json(&json, Some(&cfg), layout).unwrap();
    assert_eq!(spec.kind, TokenizerKind::Bpe);
    spec.build().unwrap()
}

const LAYOUTS: [Layout; 2] = [Layout::AsTransformers, Layout::AsWritten];

fn check(p: &Pipeline, name: &str, max_len: Option<usize>, lines: usize) {
    let cases = read_reference(name);
    assert_eq!(cases.len(), lines, "{name}: line count");
    let mut bad = Vec::new();
    for (i, c) in cases.iter().enumerate() {
        let got = p.encode(&c.text, max_len);
        assert_eq!(p.count_tokens(&c.text, max_len), got.len(), "{:?}", c.text);
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
    for layout in LAYOUTS {
        check(&pipeline(layout), "families/bpe_cases.jsonl", None, 2914);
    }
}

#[test]
fn roberta_reference_ids_match() {
    for layout in LAYOUTS {
        check(
            &pipeline(layout),
            "families/roberta-bpe-tiny_reference.jsonl",
            Some(128),
            353,
        );
    }
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
    let cfg: serde_json::Value = serde_json::from_str(&bpe_file("tokenizer_config.json")).unwrap();
    let spec = TokenizerSpec::from_hf_json(&json, Some(&cfg), Layout::AsTransformers).unwrap();
    assert_eq!(spec.pieces, parts.pieces);
    assert_eq!(spec.merges, parts.merges);
}

#[test]
fn roberta_pairs_are_framed_with_two_separators() {
    let p = pipeline(Layout::AsTransformers);
    let (a, b) = ("Hello world", "Bonjour le monde <mask>!");
    let (mut ia, mut ib) = (Vec::new(), Vec::new());
    p.encode_raw(a, &mut ia);
    p.encode_raw(b, &mut ib);
    // <s> A </s></s> B </s>, RoBERTa's one type id.
    let mut want = vec![0];
    want.extend_from_slice(&ia);
    want.extend_from_slice(&[2, 2]);
    want.extend_from_slice(&ib);
    want.push(2);
    let (ids, types) = p.encode_pair(a, b, None);
    assert_eq!(ids, want);
    assert_eq!(types, vec![0; want.len()]);
    assert!(ib.contains(&4), "the literal <mask> is its id");
}

#[test]
fn cache_is_shared_between_threads() {
    let p = pipeline(Layout::AsTransformers);
    let cases = read_reference("families/bpe_cases.jsonl");
    std::thread::scope(|s| {
        for t in 0..4 {
            let (p, cases) = (&p, &cases);
            s.spawn(move || {
                for c in cases.iter().skip(t).step_by(2) {
                    assert_eq!(p.encode(&c.text, None), c.input_ids, "{:?}", c.text);
                }
            });
        }
    });
}

#[test]
fn decode_gives_the_text_back() {
    let p = pipeline(Layout::AsTransformers);
    let mut n = 0;
    for c in read_reference("families/bpe_cases.jsonl") {
        // `<mask>` takes the whitespace before it (lstrip): not reversible.
        if c.text.contains("<mask>") {
            continue;
        }
        let mut ids = Vec::new();
        p.encode_raw(&c.text, &mut ids);
        // Every byte is a token, so nothing is lost.
        assert_eq!(p.decode(&ids, false), c.text);
        n += 1;
    }
    assert!(n > 2800, "{n}");
    assert_eq!(p.decode(&p.encode("a <mask> b", None), true), "a b");
}

// Also loaded inside fuzz/harness.rs (tests/it/fuzz_regressions.rs).
#[allow(clippy::duplicate_mod)]
#[path = "../../fuzz/bpe_harness.rs"]
mod bpe_harness;

/// A quick stand-in for the `bpe` fuzzer on stable Rust: the committed seeds
/// of `fuzz/corpus/bpe/`, mutated (bytes flipped, inserted, deleted, chunks
/// repeated or spliced from another seed) by a fixed xorshift generator,
/// through the same entry point. `EMBD_BPE_MUTATIONS` sets the count.
#[test]
fn mutated_inputs_keep_the_invariants() {
    let dir = crate::common::repo().join("fuzz/corpus/bpe");
    let mut seeds: Vec<Vec<u8>> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| std::fs::read(e.unwrap().path()).unwrap())
        .collect();
    seeds.sort();
    assert!(seeds.len() >= 6, "{} seeds", seeds.len());
    let rounds: usize = std::env::var("EMBD_BPE_MUTATIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(4000);
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    for round in 0..rounds {
        let mut b = seeds[next() as usize % seeds.len()].clone();
        for _ in 0..1 + next() % 4 {
            let at = if b.is_empty() {
                0
            } else {
                next() as usize % b.len()
            };
            match next() % 6 {
                0 if !b.is_empty() => b[at] ^= 1 << (next() % 8),
                1 => b.insert(at, next() as u8),
                2 if !b.is_empty() => {
                    b.remove(at);
                }
                3 => {
                    let len = (next() as usize % 16).min(b.len() - at);
                    let chunk = b[at..at + len].to_vec();
                    b.splice(at..at, chunk.iter().copied().cycle().take(len * 4));
                }
                4 => {
                    let other = &seeds[next() as usize % seeds.len()];
                    let from = next() as usize % other.len().max(1);
                    let len = (next() as usize % 32).min(other.len() - from);
                    b.splice(at..at, other[from..from + len].iter().copied());
                }
                _ if b.len() > 2 => b[next() as usize % 2] = next() as u8,
                _ => {}
            }
        }
        if std::panic::catch_unwind(|| bpe_harness::fuzz_bpe(&b)).is_err() {
            panic!("round {round}: input {b:?} breaks an invariant");
        }
    }
}

/// Single-thread throughput on `shared/bench/corpus.txt` (one text a line, as
/// HF's `encode_batch` gets them), best of 5, warm cache and cold cache:
/// `cargo test --release --test it bpe::bench -- --ignored --nocapture`.
#[test]
#[ignore = "a measurement; run by hand"]
fn bench_corpus_tokens_per_second() {
    use embedder::tokenizer::pipeline::Model;
    use std::time::Instant;
    let p = pipeline(Layout::AsTransformers);
    let corpus = std::fs::read_to_string(shared_dir().join("bench/corpus.txt")).unwrap();
    let mut lines: Vec<&str> = corpus.split('\n').collect();
    if lines.last() == Some(&"") {
        lines.pop();
    }
    let Model::Bpe(bpe) = &p.model else {
        panic!("not a BPE model")
    };
    for cold in [false, true] {
        let mut best = f64::MAX;
        let mut n = 0;
        for _ in 0..5 {
            if cold {
                bpe.clear_cache();
            }
            let t = Instant::now();
            n = lines.iter().map(|l| p.encode(l, None).len()).sum::<usize>();
            best = best.min(t.elapsed().as_secs_f64());
        }
        eprintln!(
            "bpe ({} cache): {} texts, {n} tokens, best {:.2} ms, {:.3} M tokens/s",
            if cold { "cold" } else { "warm" },
            lines.len(),
            best * 1e3,
            n as f64 / best / 1e6
        );
    }
}
