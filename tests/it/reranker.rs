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
}

pub fn pair_lines(name: &str) -> Vec<PairLine> {
    let path = common::shared_dir().join("reference/families").join(name);
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
            }
        })
        .collect()
}

/// The rank file: query, documents, reference `(corpus_id, score)` best first.
pub fn rank_file(name: &str) -> (String, Vec<String>, Vec<(usize, f32)>) {
    let path = common::shared_dir().join("reference/families").join(name);
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
        let p = tok.encode_pair(&l.query, &l.passage, Some(MINILM_MAX_LENGTH));
        assert_eq!(p.ids, l.ids, "line {}: ids", i + 1);
        assert_eq!(Some(&p.type_ids), l.types.as_ref(), "line {}: types", i + 1);
        truncated += usize::from(p.truncated);
    }
    // The reference has pairs that need the cut.
    assert!(truncated >= 1);
}
