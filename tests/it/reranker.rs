//! Cross-encoders against sentence-transformers' `CrossEncoder`
//! (`shared/reference/families/minilm-reranker_*`): the converter's metadata,
//! pair token ids and types on every line, scores and logits on every line,
//! the rank file's order; the reduced precisions; misuse.

use embedder::formats::{ModelFile, ReadOptions};
use embedder::ModelConfig;

use crate::common;

/// CrossEncoder's `max_length` the reference was made with.
pub const MINILM_MAX_LENGTH: usize = 256;

/// One line of `*_reference.jsonl`.
pub struct PairLine {
    pub query: String,
    pub passage: String,
    pub ids: Vec<u32>,
    pub types: Option<Vec<u32>>,
    pub logit: f32,
    pub score: f32,
    /// The CrossEncoder prompt (an LLM reranker's instruction), if any.
    pub prompt: Option<String>,
}

/// `shared/reference/families/<name>`, `encoders/<name>`, or
/// `architectures/<name>`.
fn reference_file(name: &str) -> std::path::PathBuf {
    for sub in ["reference/families", "reference/encoders"] {
        let p = common::shared_dir().join(sub).join(name);
        if p.is_file() {
            return p;
        }
    }
    common::shared_dir()
        .join("reference/architectures")
        .join(name)
}

pub fn pair_lines(name: &str) -> Vec<PairLine> {
    let path = reference_file(name);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    let ints = |v: &serde_json::Value| -> Vec<u32> {
        v.as_array()
            .expect("an array")
            .iter()
            .map(|x| x.as_u64().expect("an integer") as u32)
            .collect()
    };
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).expect("a JSON line");
            PairLine {
                query: v["query"].as_str().expect("query").to_string(),
                passage: v["passage"].as_str().expect("passage").to_string(),
                ids: ints(&v["input_ids"]),
                types: v.get("token_type_ids").map(ints),
                logit: v["logit"].as_f64().expect("logit") as f32,
                score: v["score"].as_f64().expect("score") as f32,
                prompt: v.get("prompt").and_then(|p| p.as_str()).map(str::to_string),
            }
        })
        .collect()
}

/// The rank file: query, documents, reference `(corpus_id, score)` best first.
pub fn rank_file(name: &str) -> (String, Vec<String>, Vec<(usize, f32)>) {
    let path = reference_file(name);
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).expect("rank file")).unwrap();
    let docs = v["documents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d.as_str().unwrap().to_string())
        .collect();
    let ranking = v["ranking"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["corpus_id"].as_u64().unwrap() as usize,
                r["score"].as_f64().unwrap() as f32,
            )
        })
        .collect();
    (v["query"].as_str().unwrap().to_string(), docs, ranking)
}

/// `models/minilm-reranker.weights` (scripts/fetch_reranker.sh).
pub fn minilm_reranker(test: &str) -> Option<std::path::PathBuf> {
    common::model_path("models/minilm-reranker.weights", test)
}

#[test]
fn minilm_reranker_metadata_from_the_hf_folder() {
    let Some(path) = minilm_reranker("reranker_metadata") else {
        return;
    };
    let m = ModelFile::open(&path, ReadOptions::default()).unwrap();
    let md = &m.metadata;
    let get = |k: &str| md.get(k).map(String::as_str);
    assert_eq!(get("task"), Some("classification"));
    assert_eq!(get("classifier_head"), Some("bert"));
    assert_eq!(get("num_labels"), Some("1"));
    assert_eq!(get("id2label"), Some(r#"{"0":"LABEL_0"}"#));
    // No activation saved in the folder: sigmoid for one label.
    assert_eq!(get("activation"), Some("sigmoid"));
    for t in [
        "pooler.dense.weight",
        "pooler.dense.bias",
        "classifier.weight",
        "classifier.bias",
    ] {
        assert!(m.tensor(t).is_some(), "{t} missing");
    }
}

#[test]
fn minilm_reranker_pair_ids_and_types_match_reference_on_every_line() {
    let Some(path) = minilm_reranker("reranker_pair_ids") else {
        return;
    };
    let mut m = ModelFile::open(&path, ReadOptions::default()).unwrap();
    let cfg = ModelConfig::from_metadata(&m.metadata).unwrap();
    let tok = cfg.tokenizer(m.vocab.take().unwrap());
    let lines = pair_lines("minilm-reranker_reference.jsonl");
    assert_eq!(lines.len(), 151);
    let mut truncated = 0;
    for (i, l) in lines.iter().enumerate() {
        let (ids, types) = tok.encode_pair(&l.query, &l.passage, Some(MINILM_MAX_LENGTH));
        assert_eq!(ids, l.ids, "line {}: ids", i + 1);
        assert_eq!(Some(&types), l.types.as_ref(), "line {}: types", i + 1);
        let full = tok.encode_pair(&l.query, &l.passage, None).0;
        truncated += usize::from(full.len() > ids.len());
    }
    // The reference has pairs that need the cut.
    assert!(truncated >= 1);
}

fn open_minilm(test: &str, precision: Option<embedder::Precision>) -> Option<embedder::Reranker> {
    let path = minilm_reranker(test)?;
    let mut opts = embedder::Options::new();
    opts.max_seq_length = Some(MINILM_MAX_LENGTH);
    opts.precision = precision;
    Some(embedder::Reranker::open(&path, &opts).unwrap())
}

/// Worst |score - reference| and |logit - reference| over all lines.
pub fn worst(scores: &[f32], logits: &[f32], lines: &[PairLine]) -> (f32, f32) {
    let mut w = (0.0f32, 0.0f32);
    for ((s, l), line) in scores.iter().zip(logits).zip(lines) {
        w.0 = w.0.max((s - line.score).abs());
        w.1 = w.1.max((l - line.logit).abs());
    }
    w
}

pub fn scores_and_logits(r: &embedder::Reranker, lines: &[PairLine]) -> (Vec<f32>, Vec<f32>) {
    let pairs: Vec<(&str, &str)> = lines
        .iter()
        .map(|l| (l.query.as_str(), l.passage.as_str()))
        .collect();
    let mut s = vec![0.0; pairs.len()];
    let mut l = vec![0.0; pairs.len()];
    r.predict_into(&pairs, Some(&mut s), Some(&mut l), None)
        .unwrap();
    (s, l)
}

#[test]
fn minilm_reranker_scores_and_logits_match_reference_on_every_line() {
    let Some(r) = open_minilm("reranker_scores", None) else {
        return;
    };
    assert_eq!(r.num_labels(), 1);
    assert_eq!(r.max_seq_length(), MINILM_MAX_LENGTH);
    let lines = pair_lines("minilm-reranker_reference.jsonl");
    let (s, l) = scores_and_logits(&r, &lines);
    let (ws, wl) = worst(&s, &l, &lines);
    eprintln!("minilm-reranker f32: max |score diff| {ws:.3e}, max |logit diff| {wl:.3e}");
    assert!(ws <= 1e-5, "score diff {ws}");
    assert!(wl <= 1e-4, "logit diff {wl}");
    // Each pair alone gets the numbers it gets in the batch (bit for bit),
    // and score() / logits() agree with predict_into.
    for (i, line) in lines.iter().enumerate().step_by(15) {
        let one = r
            .score(&[(line.query.as_str(), line.passage.as_str())])
            .unwrap();
        assert_eq!(one[0].to_bits(), s[i].to_bits(), "line {}", i + 1);
        let lo = r
            .logits(&[(line.query.as_str(), line.passage.as_str())])
            .unwrap();
        assert_eq!(lo[0].to_bits(), l[i].to_bits(), "line {}", i + 1);
    }
}

#[test]
fn minilm_reranker_threads_do_not_change_scores() {
    let Some(path) = minilm_reranker("reranker_threads") else {
        return;
    };
    let lines = pair_lines("minilm-reranker_reference.jsonl");
    let mut all = Vec::new();
    for t in [1, 2, 3] {
        let mut opts = embedder::Options::new().threads(t);
        opts.max_seq_length = Some(MINILM_MAX_LENGTH);
        let r = embedder::Reranker::open(&path, &opts).unwrap();
        all.push(scores_and_logits(&r, &lines).1);
    }
    for v in &all[1..] {
        assert!(v
            .iter()
            .zip(&all[0])
            .all(|(a, b)| a.to_bits() == b.to_bits()));
    }
}

#[test]
fn minilm_reranker_rank_gives_reference_order() {
    let Some(r) = open_minilm("reranker_rank", None) else {
        return;
    };
    let (query, docs, want) = rank_file("minilm-reranker_rank.json");
    assert_eq!(docs.len(), 40);
    let got = r.rank(&query, &docs, None).unwrap();
    let ids: Vec<usize> = got.iter().map(|g| g.0).collect();
    let want_ids: Vec<usize> = want.iter().map(|w| w.0).collect();
    assert_eq!(ids, want_ids);
    for (g, w) in got.iter().zip(&want) {
        assert!((g.1 - w.1).abs() <= 1e-5, "{g:?} vs {w:?}");
    }
    let top = r.rank(&query, &docs, Some(10)).unwrap();
    assert_eq!(top, got[..10]);
    // By logit: the same order here (sigmoid is monotone; ties stay by index).
    let raw = r.rank_ex(&query, &docs, Some(5), true, None).unwrap();
    assert_eq!(
        raw.iter().map(|x| x.index).collect::<Vec<_>>(),
        want_ids[..5]
    );
    assert!(raw.iter().all(|x| x.logit > 0.0 || x.score <= 0.5));
}

/// Worst score and logit differences of `r` against `name`'s reference over
/// every line, and whether the rank file's top `k` (all with `None`) is kept.
pub fn measure(r: &embedder::Reranker, name: &str, k: Option<usize>) -> (f32, f32, bool) {
    let lines = pair_lines(&format!("{name}_reference.jsonl"));
    let (s, l) = scores_and_logits(r, &lines);
    let (ws, wl) = worst(&s, &l, &lines);
    let (query, docs, want) = rank_file(&format!("{name}_rank.json"));
    let k = k.unwrap_or(want.len());
    let top: Vec<usize> = r
        .rank(&query, &docs, Some(k))
        .unwrap()
        .iter()
        .map(|x| x.0)
        .collect();
    let want_k: Vec<usize> = want[..k].iter().map(|w| w.0).collect();
    (ws, wl, top == want_k)
}

/// [`measure`] of the MiniLM reranker at a reduced precision.
fn reduced(p: embedder::Precision, k: usize) -> Option<(f32, f32, bool)> {
    let r = open_minilm("reranker_precision", Some(p))?;
    assert_eq!(r.precision(), p);
    let m = measure(&r, "minilm-reranker", Some(k));
    eprintln!(
        "minilm-reranker {}: max |score diff| {:.3e}, max |logit diff| {:.3e}",
        p.name(),
        m.0,
        m.1
    );
    Some(m)
}

/// The reduced precisions on the trained encoder, as far as they hold today:
/// int8 keeps the rank file's top-10; bf16 its top-9 (its 10th and 11th
/// documents are 0.0015 apart in the reference). Score errors (measured:
/// int8 8.8e-2, bf16 1.06e-2) are bounded to catch regressions; the targets
/// are the ignored test below.
#[test]
fn minilm_reranker_reduced_precisions() {
    let Some((ws, _, top10)) = reduced(embedder::Precision::Int8, 10) else {
        return;
    };
    assert!(top10, "int8: the top-10 order changed");
    assert!(ws <= 0.12, "int8: score diff {ws}");
    let Some((ws, _, top9)) = reduced(embedder::Precision::Bf16, 9) else {
        return;
    };
    assert!(top9, "bf16: the top-9 order changed");
    assert!(ws <= 0.02, "bf16: score diff {ws}");
}

/// The targets: scores within 0.01 (int8) / 0.001 (bf16) of the
/// reference on every line and the top-10 kept. Not met; choosing which
/// products or layers run reduced does not reach them (measured on 200 corpus
/// pairs against our f32): one product kind in bf16 in every layer
/// (the rest f32) gives 3.7e-3 to 5.1e-3, one layer alone in bf16 (layer 0, 3
/// or 4) 3.5e-3 to 4.0e-3; one product kind in int8 2.2e-2 to 4.7e-2, one
/// layer alone in int8 2.3e-2 to 4.9e-2. A relative error r of the first
/// token's final state becomes a logit error of about 13r to 15r through this
/// head. Run with --ignored.
#[test]
#[ignore = "precision targets not reachable with reduced products: int8 8.8e-2, bf16 1.06e-2"]
fn minilm_reranker_reduced_precisions_issue_targets() {
    for (p, limit) in [
        (embedder::Precision::Bf16, 1e-3f32),
        (embedder::Precision::Int8, 1e-2f32),
    ] {
        let Some((ws, _, top10)) = reduced(p, 10) else {
            return;
        };
        assert!(
            ws <= limit && top10,
            "{}: score diff {ws}, top-10 kept {top10}",
            p.name()
        );
    }
}

#[test]
fn reranker_bad_input_gets_clear_errors() {
    use embedder::ErrorKind;
    let Some(r) = open_minilm("reranker_bad_input", None) else {
        return;
    };
    let docs = ["a passage", "another passage"];
    let kind = |e: embedder::Error| (e.kind(), e.message().to_string());
    let (k, m) = kind(r.rank("", &docs, None).unwrap_err());
    assert_eq!(k, ErrorKind::InvalidArgument);
    assert!(m.contains("query is empty"), "{m}");
    assert!(r.rank(" \t", &docs, None).is_err());
    let none: [&str; 0] = [];
    let (k, m) = kind(r.rank("q", &none, None).unwrap_err());
    assert_eq!(k, ErrorKind::InvalidArgument);
    assert!(m.contains("no documents"), "{m}");
    let (k, m) = kind(r.rank("q", &docs, Some(0)).unwrap_err());
    assert_eq!(k, ErrorKind::InvalidArgument);
    assert!(m.contains("top_k is 0"), "{m}");
    let (k, m) = kind(r.rank("q", &docs, Some(3)).unwrap_err());
    assert_eq!(k, ErrorKind::InvalidArgument);
    assert!(m.contains("more than the 2 documents"), "{m}");
    // Too many documents: refused before any work.
    let many = vec![""; embedder::MAX_BATCH + 1];
    assert_eq!(
        r.rank("q", &many, None).unwrap_err().kind(),
        ErrorKind::LimitExceeded
    );
    // A NUL is text, cleaned away as a control character (as HF's BertNormalizer).
    let a = r.score(&[("q\0", "a pas\0sage")]).unwrap();
    let b = r.score(&[("q", "a passage")]).unwrap();
    assert_eq!(a, b);
    // Short buffers.
    let mut small = [0.0f32; 1];
    let e = r
        .predict_into(&[("a", "b"), ("c", "d")], Some(&mut small), None, None)
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::BufferTooSmall);
    // No pairs: nothing to do.
    let empty: [(&str, &str); 0] = [];
    assert!(r.score(&empty).unwrap().is_empty());
}

#[test]
fn classifier_and_embedder_refuse_each_other_by_name() {
    let Some(rr) = minilm_reranker("reranker_refusals") else {
        return;
    };
    let Some(emb) = common::minilm_weights("reranker_refusals") else {
        return;
    };
    let o = embedder::Options::new();
    let e = embedder::Engine::open(&rr, &o).unwrap_err();
    assert_eq!(e.kind(), embedder::ErrorKind::Model);
    assert!(e.message().contains("Reranker"), "{e}");
    let e = embedder::Embedder::open(&rr, &o).unwrap_err();
    assert!(e.message().contains("Reranker"), "{e}");
    let e = embedder::Reranker::open(&emb, &o).unwrap_err();
    assert_eq!(e.kind(), embedder::ErrorKind::Model);
    assert!(e.message().contains("open it as an embedder"), "{e}");
    // An embedding option on a reranker.
    let e = embedder::Reranker::open(&rr, &embedder::Options::new().normalize(false)).unwrap_err();
    assert_eq!(e.kind(), embedder::ErrorKind::InvalidArgument);
    // verify knows both.
    let v = embedder::Engine::verify(&rr).unwrap();
    assert!(v.to_string().contains("cross-encoder"), "{v}");
}

/// `models/xlmr-reranker-tiny.weights` (scripts/fetch_reranker.sh converts
/// the shared folder).
pub fn xlmr_reranker(test: &str) -> Option<std::path::PathBuf> {
    common::model_path("models/xlmr-reranker-tiny.weights", test)
}

/// `embd rerank` on the model file `path` against the reference of `name`:
/// `--query` gives the rank file's top 10 (indexes and scores within 1e-5);
/// `--jsonl` every reference line's score (1e-5) and logit (1e-4), in input
/// order. `max_length`: the reference's `CrossEncoder(max_length=...)`, if any.
pub fn cli_matches_reference(path: &std::path::Path, name: &str, max_length: Option<&str>) {
    let dir = common::TempDir::new(&format!("rerank-cli-{name}"));
    let (query, docs, want) = rank_file(&format!("{name}_rank.json"));
    // Documents one per line, or as {"text"} lines when one holds a line break.
    let docs_file = dir.path().join("docs.txt");
    let jsonl = docs.iter().any(|d| d.contains(['\n', '\r']));
    let body: String = if jsonl {
        docs.iter()
            .map(|d| serde_json::json!({ "text": d }).to_string() + "\n")
            .collect()
    } else {
        docs.join("\n") + "\n"
    };
    std::fs::write(&docs_file, body).unwrap();
    let max: Vec<&str> = max_length.map_or(vec![], |m| vec!["--max-length", m]);
    let out = std::process::Command::new(common::embd_bin())
        .args(["rerank", "-m"])
        .arg(path)
        .args(&max)
        .args(["--query", &query, "--input"])
        .arg(&docs_file)
        .args(["--top-k", "10"])
        .args(jsonl.then_some("--jsonl"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let got: Vec<serde_json::Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(got.len(), 10);
    for (g, w) in got.iter().zip(&want) {
        // A repeated document may take its twin's place (identical scores
        // here, ties by index; rounding noise in the reference's batches).
        let i = g["index"].as_u64().unwrap() as usize;
        assert_eq!(docs[i], docs[w.0], "{name}: document {i} for {}", w.0);
        assert!((g["score"].as_f64().unwrap() as f32 - w.1).abs() <= 1e-5);
    }
    // --jsonl: every reference line, input order (lines with a prompt
    // through --prompt, one call per prompt).
    let all = pair_lines(&format!("{name}_reference.jsonl"));
    let mut prompts: Vec<Option<String>> = Vec::new();
    for l in &all {
        if !prompts.contains(&l.prompt) {
            prompts.push(l.prompt.clone());
        }
    }
    let (mut ws, mut wl) = (0.0f32, 0.0f32);
    for prompt in &prompts {
        let lines: Vec<&PairLine> = all.iter().filter(|l| &l.prompt == prompt).collect();
        let pairs_file = dir.path().join("pairs.jsonl");
        let body: String = lines
            .iter()
            .map(|l| serde_json::json!({"query": l.query, "passage": l.passage}).to_string() + "\n")
            .collect();
        std::fs::write(&pairs_file, body).unwrap();
        let p: Vec<&str> = prompt.as_deref().map_or(vec![], |p| vec!["--prompt", p]);
        let out = std::process::Command::new(common::embd_bin())
            .args(["rerank", "--jsonl", "-m"])
            .arg(path)
            .args(&max)
            .args(&p)
            .arg("--input")
            .arg(&pairs_file)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = String::from_utf8(out.stdout).unwrap();
        let got: Vec<serde_json::Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(got.len(), lines.len());
        for (g, l) in got.iter().zip(&lines) {
            ws = ws.max((g["score"].as_f64().unwrap() as f32 - l.score).abs());
            wl = wl.max((g["logit"].as_f64().unwrap() as f32 - l.logit).abs());
        }
    }
    let lines = all;
    eprintln!(
        "{name} CLI: {} lines, max |score diff| {ws:.3e}, max |logit diff| {wl:.3e}",
        lines.len()
    );
    assert!(ws <= 1e-5 && wl <= 1e-4, "{name}: score {ws}, logit {wl}");
    // Misuse: a clear message, exit 1.
    let out = std::process::Command::new(common::embd_bin())
        .args(["rerank", "-m"])
        .arg(path)
        .args(["--query", "q", "--top-k", "0", "--input"])
        .arg(&docs_file)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("top_k is 0"));
}

#[test]
fn cli_rerank_ranks_and_scores() {
    let Some(path) = minilm_reranker("reranker_cli") else {
        return;
    };
    cli_matches_reference(&path, "minilm-reranker", Some("256"));
}

/// `models/modernbert-reranker-tiny.weights` (scripts/fetch_reranker.sh
/// converts the shared folder).
pub fn modernbert_reranker(test: &str) -> Option<std::path::PathBuf> {
    common::model_path("models/modernbert-reranker-tiny.weights", test)
}

/// The converted ModernBERT cross-encoder (byte-level BPE, `classifier_pooling`
/// mean, the `ModernBertPredictionHead`) through the CLI at its own maximum
/// length (256, as its reference): scores, logits and the rank file; its
/// pairs' ids on every line through the API, and the same bits in every
/// precision for any batch and thread count.
#[test]
fn modernbert_reranker_tiny() {
    let Some(path) = modernbert_reranker("reranker_modernbert") else {
        return;
    };
    cli_matches_reference(&path, "modernbert-reranker-tiny", None);
    let lines = pair_lines("modernbert-reranker-tiny_reference.jsonl");
    assert_eq!(lines.len(), 213);
    let r = embedder::Reranker::open(&path, &embedder::Options::new().threads(1)).unwrap();
    for (i, l) in lines.iter().enumerate() {
        let enc = r.tokenize_pair(&l.query, &l.passage);
        assert_eq!(enc.ids, l.ids, "line {}", i + 1);
        assert!(enc.type_ids.iter().all(|&t| t == 0), "line {}", i + 1);
    }
    let pairs: Vec<(&str, &str)> = lines
        .iter()
        .map(|l| (l.query.as_str(), l.passage.as_str()))
        .collect();
    let want: Vec<f32> = lines.iter().map(|l| l.logit).collect();
    precisions_are_bit_invariant(
        &path,
        &pairs,
        &want,
        "modernbert-reranker-tiny",
        pairs.len(),
    );
}

/// In every precision: the logits of `pairs` in one call, pair by pair (the
/// first `alone` of them) and on two threads have the same bits; the largest
/// difference to `want` is printed.
fn precisions_are_bit_invariant(
    path: &std::path::Path,
    pairs: &[(&str, &str)],
    want: &[f32],
    name: &str,
    alone: usize,
) {
    for p in embedder::Precision::ALL {
        let one = embedder::Reranker::open(path, &embedder::Options::new().threads(1).precision(p))
            .unwrap();
        let two = embedder::Reranker::open(path, &embedder::Options::new().threads(2).precision(p))
            .unwrap();
        let all = one.logits(pairs).unwrap();
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        let each: Vec<f32> = pairs
            .iter()
            .take(alone)
            .flat_map(|q| one.logits(std::slice::from_ref(q)).unwrap())
            .collect();
        assert_eq!(
            bits(&all[..alone]),
            bits(&each),
            "{name} {p}: one call vs one pair at a time"
        );
        assert_eq!(
            bits(&all),
            bits(&two.logits(pairs).unwrap()),
            "{name} {p}: threads"
        );
        let worst = all
            .iter()
            .zip(want)
            .map(|(g, l)| (g - l).abs())
            .fold(0.0f32, f32::max);
        eprintln!("{name} {p}: max |logit diff| {worst:.3e}");
    }
}

/// `models/qwen3-reranker-tiny.weights` (scripts/fetch_reranker.sh converts
/// the shared folder).
pub fn qwen3_reranker(test: &str) -> Option<std::path::PathBuf> {
    common::model_path("models/qwen3-reranker-tiny.weights", test)
}

/// The converted Qwen3-Reranker (sentence-transformers 6.2 CrossEncoder with
/// LogitScore: the chat template, the last token's yes/no logits) through
/// the CLI (scores, logits, the rank file; the last 30 lines under a custom
/// instruction with `--prompt`), its pairs' ids on every line through the
/// API (the 400 `x ` pair cut inside with the template's tail restored), the
/// instruction per call and at open, the refusal of a prompt by a classic
/// cross-encoder, and the same bits in every precision for any batch and
/// thread count.
#[test]
fn qwen3_reranker_tiny() {
    let Some(path) = qwen3_reranker("reranker_qwen3") else {
        return;
    };
    cli_matches_reference(&path, "qwen3-reranker-tiny", None);
    let lines = pair_lines("qwen3-reranker-tiny_reference.jsonl");
    assert_eq!(lines.len(), 243);
    assert_eq!(lines.iter().filter(|l| l.prompt.is_some()).count(), 30);
    let r = embedder::Reranker::open(&path, &embedder::Options::new().threads(1)).unwrap();
    assert!(r.takes_prompt());
    assert_eq!(r.max_seq_length(), 512);
    let mut cut = 0;
    for (i, l) in lines.iter().enumerate() {
        let enc = r
            .tokenize_pair_prompted(&l.query, &l.passage, l.prompt.as_deref())
            .unwrap();
        assert_eq!(enc.ids, l.ids, "line {}", i + 1);
        cut += usize::from(enc.truncated);
    }
    assert!(cut >= 1, "the long pairs are cut");
    // The instruction per call, and the same at open.
    let prompted: Vec<&PairLine> = lines.iter().filter(|l| l.prompt.is_some()).collect();
    let instr = prompted[0].prompt.clone().unwrap();
    let pairs: Vec<(&str, &str)> = prompted
        .iter()
        .map(|l| (l.query.as_str(), l.passage.as_str()))
        .collect();
    let mut per_call = vec![0.0f32; pairs.len()];
    r.predict_prompted(&pairs, Some(&instr), None, Some(&mut per_call), None)
        .unwrap();
    let at_open = embedder::Reranker::open(
        &path,
        &embedder::Options::new().threads(1).prompt(instr.as_str()),
    )
    .unwrap();
    assert_eq!(at_open.default_prompt(), Some(instr.as_str()));
    let opened = at_open.logits(&pairs).unwrap();
    for ((a, b), l) in per_call.iter().zip(&opened).zip(&prompted) {
        assert_eq!(a.to_bits(), b.to_bits());
        assert!((a - l.logit).abs() <= 1e-4, "{a} vs {}", l.logit);
    }
    // The default instruction scores differently (the prompt is applied).
    let plain = r.logits(&pairs).unwrap();
    assert!(plain
        .iter()
        .zip(&per_call)
        .any(|(a, b)| (a - b).abs() > 1e-3));
    // A classic cross-encoder takes no prompt.
    if let Some(mb) = modernbert_reranker("reranker_qwen3_prompt_refused") {
        let m = embedder::Reranker::open(&mb, &embedder::Options::new()).unwrap();
        assert!(!m.takes_prompt());
        let e = m.rank_prompted("q", &["d"], None, false, Some("x"), None);
        assert!(e.unwrap_err().to_string().contains("takes no prompt"));
        let e = embedder::Reranker::open(&mb, &embedder::Options::new().prompt("x"));
        assert!(e.unwrap_err().to_string().contains("takes no prompt"));
    }
    let pairs: Vec<(&str, &str)> = lines
        .iter()
        .filter(|l| l.prompt.is_none())
        .map(|l| (l.query.as_str(), l.passage.as_str()))
        .collect();
    let want: Vec<f32> = lines
        .iter()
        .filter(|l| l.prompt.is_none())
        .map(|l| l.logit)
        .collect();
    precisions_are_bit_invariant(&path, &pairs, &want, "qwen3-reranker-tiny", 40);
}

/// The converted XLM-R cross-encoder (Unigram, RoBERTa head) through the CLI,
/// at the model's own maximum length (128, as its reference).
#[test]
fn cli_rerank_xlmr_reranker_tiny() {
    let Some(path) = xlmr_reranker("reranker_cli_xlmr") else {
        return;
    };
    cli_matches_reference(&path, "xlmr-reranker-tiny", None);
}

#[test]
fn reranker_progress_and_cancel() {
    use std::ops::ControlFlow;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    let Some(path) = minilm_reranker("reranker_cancel") else {
        return;
    };
    let lines = pair_lines("minilm-reranker_reference.jsonl");
    let pairs: Vec<(&str, &str)> = lines
        .iter()
        .map(|l| (l.query.as_str(), l.passage.as_str()))
        .collect();
    let calls = Arc::new(AtomicUsize::new(0));
    let last = Arc::new(AtomicUsize::new(0));
    let (c, l) = (calls.clone(), last.clone());
    let opts = embedder::Options::new()
        .threads(2)
        .max_seq_length(MINILM_MAX_LENGTH)
        .progress(move |done, total| {
            assert_eq!(total, 151);
            c.fetch_add(1, Ordering::Relaxed);
            l.store(done, Ordering::Relaxed);
            if done >= 40 {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            }
        });
    let r = embedder::Reranker::open(&path, &opts).unwrap();
    let mut s = vec![f32::NAN; pairs.len()];
    let e = r
        .predict_into(&pairs, Some(&mut s), None, None)
        .unwrap_err();
    assert_eq!(e.kind(), embedder::ErrorKind::Cancelled);
    let done = last.load(Ordering::Relaxed);
    assert!(
        calls.load(Ordering::Relaxed) >= 1 && (40..151).contains(&done),
        "{done}"
    );
    // The rows the callback counted are complete and right.
    for (i, line) in lines.iter().enumerate().take(done) {
        assert!((s[i] - line.score).abs() <= 1e-5, "line {}", i + 1);
    }
}

/// The tiny random XLM-R cross-encoder (Unigram tokenizer, `<s> q </s></s> p
/// </s>`, the RoBERTa head), opened straight from its HF folder: ids on every
/// line, scores within 1e-5 and logits within 1e-4, the rank file's order;
/// the reduced precisions' errors are printed (random weights; no bound).
#[test]
fn xlmr_reranker_tiny_matches_reference() {
    let dir = common::shared_dir().join("reference/families/xlmr-reranker-tiny");
    let r = embedder::Reranker::open(&dir, &embedder::Options::new()).unwrap();
    assert_eq!(r.num_labels(), 1);
    assert_eq!(r.max_seq_length(), 128);
    let lines = pair_lines("xlmr-reranker-tiny_reference.jsonl");
    assert_eq!(lines.len(), 260);
    let mut bad = 0;
    for (i, l) in lines.iter().enumerate() {
        let p = r.tokenize_pair(&l.query, &l.passage);
        if p.ids != l.ids {
            bad += 1;
            eprintln!("line {}: ids differ", i + 1);
        }
        assert!(p.type_ids.iter().all(|&t| t == 0));
    }
    assert_eq!(bad, 0, "{bad} lines with other ids");
    let (s, l) = scores_and_logits(&r, &lines);
    let (ws, wl) = worst(&s, &l, &lines);
    eprintln!("xlmr-reranker-tiny f32: max |score diff| {ws:.3e}, max |logit diff| {wl:.3e}");
    assert!(ws <= 1e-5 && wl <= 1e-4, "score {ws}, logit {wl}");
    let (query, docs, want) = rank_file("xlmr-reranker-tiny_rank.json");
    let got: Vec<usize> = r
        .rank(&query, &docs, None)
        .unwrap()
        .iter()
        .map(|g| g.0)
        .collect();
    assert_eq!(got, want.iter().map(|w| w.0).collect::<Vec<_>>());
    for p in [embedder::Precision::Bf16, embedder::Precision::Int8] {
        let r = embedder::Reranker::open(&dir, &embedder::Options::new().precision(p)).unwrap();
        let (s, l) = scores_and_logits(&r, &lines);
        let (ws, wl) = worst(&s, &l, &lines);
        let top: Vec<usize> = r
            .rank(&query, &docs, Some(10))
            .unwrap()
            .iter()
            .map(|g| g.0)
            .collect();
        eprintln!(
            "xlmr-reranker-tiny {}: max |score diff| {ws:.3e}, max |logit diff| {wl:.3e}, top-10 kept {}",
            p.name(),
            top == want[..10].iter().map(|w| w.0).collect::<Vec<_>>()
        );
    }
}

/// `embd bench` times a cross-encoder on query-passage pairs, as `embd
/// rerank` scores them: `{"query", "passage"}` JSONL lines, or `--query`
/// with one passage per line; the report counts the pairs and their tokens
/// (the reference tokenizer's, on pairs it did not cut) and takes
/// `--precision` and `--threads`; a plain corpus without `--query`,
/// `--query` on an embedding model and `--emit` on a cross-encoder are
/// refused by name.
#[test]
fn embd_bench_times_cross_encoders() {
    let Some(path) = minilm_reranker("reranker_bench") else {
        return;
    };
    let dir = common::TempDir::new("rerank-bench");
    let lines: Vec<PairLine> = pair_lines("minilm-reranker_reference.jsonl")
        .into_iter()
        .filter(|l| l.ids.len() < MINILM_MAX_LENGTH)
        .take(40)
        .collect();
    assert_eq!(lines.len(), 40);
    let pairs = dir.path().join("pairs.jsonl");
    let body: String = lines
        .iter()
        .map(|l| serde_json::json!({ "query": l.query, "passage": l.passage }).to_string() + "\n")
        .collect();
    std::fs::write(&pairs, body).unwrap();
    let bench = |extra: &[&str]| {
        std::process::Command::new(common::embd_bin())
            .args(["bench", "-m"])
            .arg(&path)
            .args(["--rounds", "2", "--warmup", "4", "--latency-runs", "3"])
            .args(["--batch-size", "16"])
            .args(extra)
            .output()
            .unwrap()
    };
    let report = |o: &std::process::Output| -> serde_json::Value {
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        serde_json::from_slice(&o.stdout)
            .unwrap_or_else(|e| panic!("bench JSON: {e}: {}", String::from_utf8_lossy(&o.stdout)))
    };
    let tokens: usize = lines.iter().map(|l| l.ids.len()).sum();
    for (threads, precision) in [("1", "f32"), ("2", "int8")] {
        let input = pairs.to_str().unwrap();
        let v = report(&bench(&[
            "--input",
            input,
            "--threads",
            threads,
            "--precision",
            precision,
        ]));
        assert_eq!(v["engine"], "embedder", "{v}");
        assert_eq!(v["threads"], threads.parse::<u64>().unwrap(), "{v}");
        assert_eq!(v["precision"], precision, "{v}");
        assert_eq!(v["batch_size"], 16, "{v}");
        assert_eq!(v["pairs"], lines.len(), "{v}");
        assert_eq!(v["tokens"], tokens, "{v}");
        assert_eq!(v["rounds_s"].as_array().map(Vec::len), Some(2), "{v}");
        assert!(v["pairs_per_s"].as_f64().is_some_and(|x| x > 0.0), "{v}");
        assert!(v["open_first_ms"].as_f64().is_some_and(|x| x > 0.0), "{v}");
        assert_eq!(v["latency"]["runs"], 3, "{v}");
        assert!(
            v["latency"]["median_ms"].as_f64().is_some_and(|x| x > 0.0),
            "{v}"
        );
        // The latency pair is one of the corpus's, with its tokens.
        let l = lines
            .iter()
            .find(|l| v["latency"]["query"] == l.query && v["latency"]["passage"] == l.passage)
            .unwrap_or_else(|| panic!("latency pair not from the corpus: {v}"));
        assert_eq!(v["latency"]["tokens"], l.ids.len(), "{v}");
    }

    // --query: every line a passage of that query.
    let query = &lines[0].query;
    let same: Vec<&PairLine> = lines.iter().filter(|l| &l.query == query).collect();
    let passages = dir.path().join("passages.txt");
    let text: Vec<&str> = same.iter().map(|l| l.passage.as_str()).collect();
    assert!(text.iter().all(|p| !p.contains(['\n', '\r'])));
    std::fs::write(&passages, text.join("\n") + "\n").unwrap();
    let input = passages.to_str().unwrap();
    let v = report(&bench(&["--input", input, "--query", query]));
    assert_eq!(v["pairs"], same.len(), "{v}");
    let want: usize = same.iter().map(|l| l.ids.len()).sum();
    assert_eq!(v["tokens"], want, "{v}");
    assert_eq!(v["latency"]["query"], query.as_str(), "{v}");

    let refused = |o: std::process::Output, what: &str| {
        assert!(!o.status.success(), "{what}: accepted");
        let e = String::from_utf8_lossy(&o.stderr);
        assert!(e.contains(what), "{what}: {e}");
    };
    refused(bench(&["--input", input]), "give --query TEXT");
    refused(
        bench(&["--input", input, "--query", query, "--emit", "dense"]),
        "a cross-encoder scores pairs",
    );
    let embedding = common::model_path("models/all-MiniLM-L6-v2.weights", "reranker_bench");
    if let Some(m) = embedding {
        let o = std::process::Command::new(common::embd_bin())
            .args(["bench", "-m"])
            .arg(m)
            .args(["--input", input, "--query", query])
            .output()
            .unwrap();
        refused(o, "is an embedding model");
    }
}
