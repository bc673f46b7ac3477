//! The SentencePiece-Unigram pipeline against the reference outputs of
//! sentence-transformers / HF `tokenizers` (`shared/reference/families/`).

use std::path::Path;

use embedder::tokenizer::pipeline::Pipeline;
use embedder::tokenizer::spec::{Layout, TokenizerSpec};
use serde_json::Value;

use crate::common::shared_dir;

fn families() -> std::path::PathBuf {
    shared_dir().join("reference/families")
}

fn read_json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The spec of a HF folder under `families/`.
fn spec(folder: &str, layout: Layout) -> TokenizerSpec {
    let dir = families().join(folder);
    let tj = read_json(&dir.join("tokenizer.json"));
    let cfg_path = dir.join("tokenizer_config.json");
    let cfg = cfg_path.exists().then(|| read_json(&cfg_path));
    TokenizerSpec::from_hf_json(&tj, cfg.as_ref(), layout).expect("tokenizer.json converts")
}

/// The spec through its stored form (what a model file keeps), then built.
fn pipeline(folder: &str, layout: Layout) -> Pipeline {
    let s = spec(folder, layout);
    let back = TokenizerSpec::from_parts(
        s.kind,
        s.pieces.clone(),
        s.scores.clone(),
        s.merges.clone(),
        s.charsmap.clone(),
        &s.settings_string(),
    )
    .expect("stored parts rebuild");
    assert_eq!(back, s);
    back.build().expect("pipeline builds")
}

fn lines(name: &str) -> Vec<Value> {
    let path = families().join(name);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).expect("JSON line"))
        .collect()
}

fn ids(v: &Value) -> Vec<u32> {
    v.as_array()
        .expect("ids list")
        .iter()
        .map(|x| x.as_u64().expect("id") as u32)
        .collect()
}

/// Compares `encode(text, max_len)` with `key` (or `fallback` when a line lacks
/// `key`) on every line; returns the mismatch report.
fn compare(
    p: &Pipeline,
    file: &str,
    key: &str,
    fallback: Option<&str>,
    max_len: Option<usize>,
) -> (usize, usize, Vec<String>) {
    let mut bad = Vec::new();
    let mut checked = 0;
    let all = lines(file);
    for (i, line) in all.iter().enumerate() {
        let want = match (line.get(key), fallback) {
            (Some(w), _) => ids(w),
            (None, Some(f)) => ids(&line[f]),
            (None, None) => continue,
        };
        checked += 1;
        let text = line["text"].as_str().expect("text");
        let got = p.encode(text, max_len);
        assert_eq!(
            p.count_tokens(text, max_len),
            got.len(),
            "count_tokens {text:?}"
        );
        if got != want {
            bad.push(format!(
                "{file} line {}: {text:?}\n  want {want:?}\n  got  {got:?}",
                i + 1
            ));
        }
    }
    (all.len(), checked, bad)
}

fn report(file: &str, (total, checked, bad): (usize, usize, Vec<String>)) {
    eprintln!(
        "{file}: {checked} of {total} lines checked, {} mismatches",
        bad.len()
    );
    for b in bad.iter().take(10) {
        eprintln!("{b}");
    }
    assert!(checked > 0, "{file}: nothing checked");
    assert!(bad.is_empty(), "{file}: {} mismatches", bad.len());
}

#[test]
fn unigram_cases_as_transformers() {
    let p = pipeline("tokenizer-unigram", Layout::AsTransformers);
    report(
        "unigram_cases.jsonl",
        compare(&p, "unigram_cases.jsonl", "input_ids", None, None),
    );
}

#[test]
fn unigram_v5_cases_as_transformers() {
    let p = pipeline("tokenizer-unigram-v5", Layout::AsTransformers);
    report(
        "unigram_v5_cases.jsonl",
        compare(&p, "unigram_v5_cases.jsonl", "input_ids", None, None),
    );
}

#[test]
fn unigram_cases_as_written() {
    // The classic file run as written: `tokenizer_json_ids` where the file says
    // it differs from sentence-transformers, else `input_ids`.
    let p = pipeline("tokenizer-unigram", Layout::AsWritten);
    let r = compare(
        &p,
        "unigram_cases.jsonl",
        "tokenizer_json_ids",
        Some("input_ids"),
        None,
    );
    assert_eq!(r.1, 2914);
    report("unigram_cases.jsonl (as written)", r);
    // The v5 layout is the same both ways.
    let p = pipeline("tokenizer-unigram-v5", Layout::AsWritten);
    report(
        "unigram_v5_cases.jsonl (as written)",
        compare(&p, "unigram_v5_cases.jsonl", "input_ids", None, None),
    );
}

#[test]
fn model_folders_truncated_at_128() {
    for (folder, file) in [
        ("xlmr-tiny", "xlmr-tiny_reference.jsonl"),
        ("bert-unigram-tiny", "bert-unigram-tiny_reference.jsonl"),
    ] {
        let p = pipeline(folder, Layout::AsTransformers);
        let r = compare(&p, file, "input_ids", None, Some(128));
        assert_eq!(r.1, 353);
        report(file, r);
    }
}

#[test]
fn reranker_pairs_longest_first_128() {
    let p = pipeline("xlmr-reranker-tiny", Layout::AsTransformers);
    let all = lines("xlmr-reranker-tiny_reference.jsonl");
    assert_eq!(all.len(), 260);
    let mut bad = Vec::new();
    for (i, line) in all.iter().enumerate() {
        let (q, d) = (
            line["query"].as_str().expect("query"),
            line["passage"].as_str().expect("passage"),
        );
        let (got, types) = p.encode_pair(q, d, Some(128));
        assert_eq!(types.len(), got.len());
        if let Some(t) = line.get("token_type_ids") {
            assert_eq!(types, ids(t), "line {}", i + 1);
        }
        let want = ids(&line["input_ids"]);
        if got != want {
            bad.push(format!(
                "line {}: {q:?} / {d:?}\n  want {want:?}\n  got  {got:?}",
                i + 1
            ));
        }
    }
    report(
        "xlmr-reranker-tiny_reference.jsonl",
        (all.len(), all.len(), bad),
    );
}

#[test]
fn decode_round_trips_plain_text() {
    let p = pipeline("tokenizer-unigram-v5", Layout::AsTransformers);
    for text in ["Hello world", "Save the file as", "x"] {
        let ids = p.encode(text, None);
        assert_eq!(p.decode(&ids, true), text);
    }
}
