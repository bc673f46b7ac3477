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

// Also loaded by `fuzz_regressions` (privately): a second copy here keeps the
// two test modules independent.
#[allow(clippy::duplicate_mod)]
#[path = "../../fuzz/harness.rs"]
mod fuzz_harness;

/// The `unigram_spec` fuzz entry point on deterministic mutations of its seeds
/// (cargo-fuzz is not run in CI): no panic, no hang.
#[test]
fn fuzz_unigram_spec_mutations() {
    let seeds: Vec<Vec<u8>> = ["spec_0.bin", "spec_1.bin"]
        .iter()
        .map(|n| {
            let p = crate::common::repo()
                .join("fuzz/corpus/unigram_spec")
                .join(n);
            std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
        })
        .collect();
    let rounds: usize = std::env::var("EMBD_UNIGRAM_FUZZ_ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3000);
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    const TOKENS: &[&[u8]] = &[
        b"\x01",
        b"\n",
        b"\t",
        b" ",
        b"  ",
        b"\xe2\x96\x81",
        b"<s>",
        b"<mask>",
        b"\"",
        b"{",
        b"}",
        b"[",
        b"]",
        b"0",
        b"-1e9",
        b"nan",
        b"\xff",
        b"\xcc\x81",
        b"\x00",
        b"\"Sequence\"",
        b"\"first\"",
        b"\"never\"",
        b"true",
        b"false",
        b"null",
        b"99999999999",
    ];
    for r in 0..rounds {
        let mut d = seeds[r % seeds.len()].clone();
        for _ in 0..1 + next() % 4 {
            let at = (next() as usize) % (d.len() + 1);
            match next() % 5 {
                0 if !d.is_empty() => {
                    let i = at.min(d.len() - 1);
                    d[i] = next() as u8;
                }
                1 if at < d.len() => {
                    let n = (next() as usize % 8).min(d.len() - at);
                    d.drain(at..at + n);
                }
                2 => {
                    let t = TOKENS[next() as usize % TOKENS.len()];
                    d.splice(at..at, t.iter().copied());
                }
                3 if d.len() > 1 => {
                    let n = next() as usize % 64;
                    let from = next() as usize % d.len();
                    let piece: Vec<u8> = d[from..(from + n).min(d.len())].to_vec();
                    d.splice(at..at, piece);
                }
                _ => d.insert(at, next() as u8),
            }
        }
        fuzz_harness::fuzz_unigram_spec(&d);
    }
}

/// Speed and memory of the pipeline (run by hand, release):
/// `cargo test --release --test it unigram::speed_report -- --ignored --nocapture`.
/// A synthetic 250,002-piece vocabulary (XLM-R's size) with the reference char
/// map: `from_parts` + `build` time and the memory held; single-thread
/// tokens/s on `shared/bench/corpus.txt`.
#[test]
#[ignore = "timing report; run by hand in release"]
fn speed_report() {
    use std::time::Instant;
    let real = spec("tokenizer-unigram-v5", Layout::AsTransformers);
    // Synthetic pieces: specials, 250,000 distinct strings over several scripts
    // (half with the ▁ prefix), <mask>.
    let alphabets: [&[char]; 4] = [
        &[
            'a', 'b', 'c', 'd', 'e', 'f', 'g', 'h', 'i', 'k', 'l', 'm', 'n', 'o', 'p', 'r', 's',
            't', 'u', 'v',
        ],
        &[
            'а', 'б', 'в', 'г', 'д', 'е', 'ж', 'з', 'и', 'к', 'л', 'м', 'н', 'о', 'п', 'р',
        ],
        &[
            '的', '一', '是', '不', '了', '人', '我', '在', '有', '他', '这', '中', '大', '来',
        ],
        &[
            'क', 'ख', 'ग', 'घ', 'च', 'ज', 'ट', 'ड', 'त', 'द', 'न', 'प', 'म', 'य', 'र', 'ल',
        ],
    ];
    let mut x = 0x2545_F491_4F6C_DD1Du64;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut seen = std::collections::HashSet::new();
    let mut pieces: Vec<String> = ["<s>", "<pad>", "</s>", "<unk>"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    while pieces.len() < 250_001 {
        let a = alphabets[next() as usize % 4];
        let len = 1 + next() as usize % 8;
        let mut s = String::new();
        if next() % 2 == 0 {
            s.push('▁');
        }
        for _ in 0..len {
            s.push(a[next() as usize % a.len()]);
        }
        if seen.insert(s.clone()) {
            pieces.push(s);
        }
    }
    pieces.push("<mask>".into());
    let n = pieces.len();
    let mut scores: Vec<f32> = (0..n).map(|i| -1.0 - (i as f32) / 20_000.0).collect();
    for s in [0, 1, 2, 3, n - 1] {
        scores[s] = 0.0;
    }
    let mut settings = real.settings.clone();
    settings["model"]["vocab_size"] = serde_json::json!(n);
    for t in settings["added_tokens"].as_array_mut().unwrap() {
        if t["content"] == "<mask>" {
            t["id"] = serde_json::json!(n - 1);
        }
    }
    let settings = settings.to_string();
    let piece_bytes: usize = pieces.iter().map(String::len).sum();
    let mut best = f64::MAX;
    let mut built = None;
    for _ in 0..3 {
        let (p, s, c) = (pieces.clone(), scores.clone(), real.charsmap.clone());
        let t0 = Instant::now();
        let p = embedder::tokenizer::vocab::Pieces::new(&p).unwrap();
        let spec = TokenizerSpec::from_parts(real.kind, p, s, vec![], c, &settings).unwrap();
        let t1 = Instant::now();
        let pipe = spec.build().unwrap();
        let t2 = Instant::now();
        let total = (t2 - t0).as_secs_f64() * 1e3;
        eprintln!(
            "250,002 pieces: from_parts {:.1} ms, build {:.1} ms, total {total:.1} ms",
            (t1 - t0).as_secs_f64() * 1e3,
            (t2 - t1).as_secs_f64() * 1e3
        );
        best = best.min(total);
        built = Some(pipe);
    }
    let big = built.unwrap();
    let embedder::tokenizer::pipeline::Model::Unigram(u) = &big.model else {
        panic!("a Unigram spec builds a Unigram model");
    };
    eprintln!(
        "best {best:.1} ms; pieces: {piece_bytes} bytes of text ({} bytes with offsets, one \
         buffer shared with the spec); held beyond the pieces: {} bytes (trie {} nodes, scores, \
         char map)",
        big.heap_bytes_pieces(),
        big.heap_bytes_beyond_pieces(),
        u.trie_nodes()
    );
    let corpus = std::fs::read_to_string(shared_dir().join("bench/corpus.txt")).unwrap();
    let texts: Vec<&str> = corpus.lines().collect();
    let bytes: usize = texts.iter().map(|t| t.len()).sum();
    for (name, p) in [
        (
            "tokenizer-unigram (8,001 pieces, as transformers)",
            pipeline("tokenizer-unigram", Layout::AsTransformers),
        ),
        (
            "tokenizer-unigram (as written)",
            pipeline("tokenizer-unigram", Layout::AsWritten),
        ),
        ("synthetic 250,002 pieces", big.clone()),
    ] {
        let mut ids = Vec::new();
        let mut tokens = 0usize;
        let mut rounds = 0;
        let t0 = Instant::now();
        while t0.elapsed().as_secs_f64() < 3.0 {
            for t in &texts {
                ids.clear();
                p.encode_raw(t, &mut ids);
                tokens += ids.len();
            }
            rounds += 1;
        }
        let s = t0.elapsed().as_secs_f64();
        eprintln!(
            "{name}: {:.2} M tokens/s, {:.1} MB/s single thread ({} texts x {rounds}, {:.1} tokens/text)",
            tokens as f64 / s / 1e6,
            (bytes * rounds) as f64 / s / 1e6,
            texts.len(),
            tokens as f64 / (texts.len() * rounds) as f64
        );
    }
}
