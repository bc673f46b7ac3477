//! Token-id parity with the reference outputs of HF `tokenizers` /
//! sentence-transformers (`shared/reference/*.jsonl`), on the real vocabulary.

use std::time::Instant;

use embedder::tokenizer::{Tokenizer, TokenizerConfig};
use embedder::Vocab;

use crate::common::{model_path, read_reference, shared_dir};

/// The real all-MiniLM-L6-v2 tokenizer, or `None` (after printing a skip line) when
/// the model is absent and `EMBD_SKIP_MODEL_TESTS=1`.
fn minilm_tokenizer(test: &str) -> Option<Tokenizer> {
    let path = model_path("models/all-MiniLM-L6-v2-hf/vocab.txt", test)?;
    let vocab = Vocab::from_vocab_txt(&path).expect("vocab.txt loads");
    assert_eq!(vocab.len(), 30522);
    assert_eq!(vocab.specials().as_array(), [0, 100, 101, 102, 103]);
    Some(Tokenizer::new(vocab, TokenizerConfig::bert_uncased()))
}

fn check(tok: &Tokenizer, name: &str, max_len: Option<usize>, expected_lines: usize) {
    let cases = read_reference(name);
    assert_eq!(cases.len(), expected_lines, "{name}: line count");
    let mut mismatches = Vec::new();
    let mut buf = Vec::new();
    for (i, case) in cases.iter().enumerate() {
        let (text, want) = (&case.text, &case.input_ids);
        tok.encode_into(text, max_len, &mut buf);
        assert_eq!(
            tok.count_tokens(text, max_len),
            buf.len(),
            "count_tokens {text:?}"
        );
        if &buf != want {
            mismatches.push(format!(
                "line {}: text {:?}\n  expected {:?}\n  got      {:?}",
                i + 1,
                text,
                want,
                buf
            ));
        }
    }
    assert!(
        mismatches.is_empty(),
        "{name}: {} of {} lines differ; first 10:\n{}",
        mismatches.len(),
        cases.len(),
        mismatches
            .iter()
            .take(10)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    );
}

#[test]
fn wordpiece_cases_match_reference() {
    let Some(tok) = minilm_tokenizer("wordpiece_cases_match_reference") else {
        return;
    };
    check(&tok, "wordpiece_cases.jsonl", None, 4977);
}

#[test]
fn minilm_reference_ids_match_with_truncation_256() {
    let Some(tok) = minilm_tokenizer("minilm_reference_ids_match_with_truncation_256") else {
        return;
    };
    check(&tok, "minilm_reference.jsonl", Some(256), 327);
}

#[test]
fn real_vocab_spot_checks() {
    let Some(tok) = minilm_tokenizer("real_vocab_spot_checks") else {
        return;
    };
    assert_eq!(tok.encode("", Some(256)), [101, 102]);
    assert_eq!(tok.encode("[CLS]", None), [101, 101, 102]);
    assert_eq!(tok.encode("hi [MASK] there", None)[2], 103);
    let ids = tok.encode("Hello, world!", None);
    assert_eq!(tok.decode(&ids, true), "hello , world !");
    let ids = tok.encode("unaffable tokenization", None);
    assert_eq!(tok.decode(&ids, true), "unaffable tokenization");
}

/// Throughput on the benchmark corpus (one text a line). Informational: prints
/// texts/s; run with `cargo test --release --test it tokenizer_speed -- --nocapture`.
#[test]
fn tokenizer_speed() {
    let Some(tok) = minilm_tokenizer("tokenizer_speed") else {
        return;
    };
    let path = shared_dir().join("bench/corpus.txt");
    let Ok(corpus) = std::fs::read_to_string(&path) else {
        eprintln!("skipping tokenizer_speed: {} is absent", path.display());
        return;
    };
    let texts: Vec<&str> = corpus.lines().collect();
    let mut buf = Vec::new();
    let mut total = 0usize;
    // Warm up, then time several passes.
    for t in &texts {
        tok.encode_into(t, Some(256), &mut buf);
    }
    let passes = 5;
    let start = Instant::now();
    for _ in 0..passes {
        for t in &texts {
            tok.encode_into(t, Some(256), &mut buf);
            total += buf.len();
        }
    }
    let secs = start.elapsed().as_secs_f64();
    let n = texts.len() * passes;
    eprintln!(
        "tokenizer_speed: {} texts x {passes} in {:.3} s: {:.0} texts/s, {:.2} ms per pass, {} tokens",
        texts.len(),
        secs,
        n as f64 / secs,
        secs * 1000.0 / passes as f64,
        total / passes
    );
}

/// Truncating tokenization of long texts works on prefixes (bounded work and
/// memory); it must give exactly the ids of tokenizing everything then truncating.
#[test]
fn bounded_prefix_tokenization_is_exact() {
    let Some(tok) = minilm_tokenizer("bounded_prefix_tokenization_is_exact") else {
        return;
    };
    let cases = read_reference("wordpiece_cases.jsonl");
    // Every reference text (accents and their NFD forms, CJK, controls, special
    // tokens, emoji), joined by varied separators, into texts of 20 KiB to ~1 MiB.
    let seps = [
        " ", "\n", "\t", "\r\n", "", "\u{2028}", " \u{301}", "[MASK]",
    ];
    let mut big = String::new();
    for (i, c) in cases.iter().enumerate() {
        big.push_str(&c.text);
        big.push_str(seps[i % seps.len()]);
    }
    for len in [20 << 10, 100 << 10, big.len()] {
        let mut end = len.min(big.len());
        while !big.is_char_boundary(end) {
            end -= 1;
        }
        let text = &big[..end];
        let full = tok.encode(text, None);
        for max_len in [2usize, 3, 10, 256, 512, 40_000, usize::MAX / 2] {
            let want = max_len - 2;
            let mut expect: Vec<u32> = full[1..full.len() - 1].iter().copied().take(want).collect();
            expect.insert(0, full[0]);
            expect.push(*full.last().unwrap());
            assert_eq!(
                tok.encode(text, Some(max_len)),
                expect,
                "len {end}, max_len {max_len}"
            );
            assert_eq!(tok.count_tokens(text, Some(max_len)), expect.len());
        }
    }
}
