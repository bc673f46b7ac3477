//! The encoder families of `shared/reference/encoders/` beyond what the
//! table of test families runs (`tests/data/families.tsv`, read by
//! `families.rs` and every binding's tests: NomicBERT, GTE, DistilBERT,
//! distiluse, the jina-embeddings-v3 backbone, mmBERT, EuroBERT): their HF
//! folders opened directly, nomic's Matryoshka recipe, the SPLADE DistilBERT
//! document encoder, the model2vec / potion static models in both libraries'
//! behaviours, and the variants of these families without a reference,
//! refused by name at conversion.

use std::path::{Path, PathBuf};

use embedder::model::outputs::{EncodeTask, OutputKind};
use embedder::{Embedder, EncodeRequest, Engine, Matryoshka, Options, Precision};

use crate::common::{families, read_reference, shared_dir, RefCase};
use crate::families::{
    agreement, assert_f32_close, assert_ids, compare, convert, converted, embed_batched, floats_of,
    ids_of, jsonl_field, ref_embeddings, reference, run, same_bits, stderr, work_dir, write_input,
};

/// Whether `name` is a folder of `shared/reference/encoders` without a row
/// in `tests/data/families.tsv` (the dense encoders have rows there, and
/// `families.rs` runs them on every surface and precision).
pub fn is_encoder(name: &str) -> bool {
    name.starts_with("splade-distilbert") || name.starts_with("potion")
}

fn encoders_dir() -> PathBuf {
    shared_dir().join("reference/encoders")
}

/// The HF folder opened directly gives the converted file's bits, for every
/// encoder family of the table.
#[test]
fn encoder_folders_open_like_their_converted_files() {
    for f in families()
        .into_iter()
        .filter(|f| f.folder.starts_with("encoders/"))
    {
        let name = f.name.as_str();
        let texts: Vec<String> = reference(name).into_iter().map(|c| c.text).collect();
        let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
        let file = Embedder::open(converted(name), &Options::new().threads(1)).unwrap();
        let folder = Embedder::open(f.dir(), &Options::new().threads(1)).unwrap();
        assert!(
            same_bits(
                &embed_batched(&file, &texts, 64),
                &embed_batched(&folder, &texts, 64)
            ),
            "{name}: folder vs converted file"
        );
    }
}

/// `(prompt_name, dimensions, text, ids, embedding)` of a prompt or
/// Matryoshka reference file.
type PromptRow = (String, Option<usize>, String, Option<Vec<u32>>, Vec<f32>);

fn prompt_rows(file: &str) -> Vec<PromptRow> {
    let text = std::fs::read_to_string(encoders_dir().join(file)).unwrap();
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            (
                v["prompt_name"].as_str().unwrap().to_string(),
                v["dimensions"].as_u64().map(|d| d as usize),
                v["text"].as_str().unwrap().to_string(),
                v.get("input_ids").map(ids_of),
                floats_of(&v["embedding"]),
            )
        })
        .collect()
}

/// Rows grouped by (prompt, dimensions), in file order.
fn groups(rows: &[PromptRow]) -> Vec<(String, Option<usize>, Vec<&PromptRow>)> {
    let mut out: Vec<(String, Option<usize>, Vec<&PromptRow>)> = Vec::new();
    for r in rows {
        match out.iter_mut().find(|g| g.0 == r.0 && g.1 == r.1) {
            Some(g) => g.2.push(r),
            None => out.push((r.0.clone(), r.1, vec![r])),
        }
    }
    out
}

/// nomic's four task prompts (`query`, `document`, `clustering`) and its
/// v1.5 Matryoshka recipe (layer norm, cut, normalize) through the API and
/// `embd encode`; sentence-transformers' plain truncation is not it.
#[test]
fn nomic_prompts_and_matryoshka_recipe_match_reference() {
    let path = converted("nomic-embed-tiny");
    let model = path.to_str().unwrap();
    let prompts = prompt_rows("nomic-embed-tiny_prompt_reference.jsonl");
    assert_eq!(prompts.len(), 140, "prompt reference lines");
    let matryoshka = prompt_rows("nomic-embed-tiny_matryoshka_reference.jsonl");
    assert_eq!(matryoshka.len(), 160, "Matryoshka reference lines");
    for (prompt, dims, rows) in groups(&prompts).into_iter().chain(groups(&matryoshka)) {
        let texts: Vec<&str> = rows.iter().map(|r| r.2.as_str()).collect();
        let refs: Vec<Vec<f32>> = rows.iter().map(|r| r.4.clone()).collect();
        let mut opts = Options::new().threads(2).prompt_name(prompt.as_str());
        let mut args = vec!["--prompt-name".to_string(), prompt.clone()];
        if let Some(d) = dims {
            opts = opts.dimensions(d).matryoshka(Matryoshka::LayerNorm);
            args.extend(["--dimensions".into(), d.to_string()]);
            args.extend(["--matryoshka".into(), "layer-norm".into()]);
            // Truncation alone gives other vectors: the recipe is applied.
            let plain = Embedder::open(
                &path,
                &Options::new().prompt_name(prompt.as_str()).dimensions(d),
            )
            .unwrap();
            let (worst, _, _) = agreement(&embed_batched(&plain, &texts, 16), &refs);
            assert!(worst < 0.9999, "truncation matches the recipe at {d}");
        }
        let what = format!("nomic {prompt} {dims:?}");
        let e = Embedder::open(&path, &opts).unwrap();
        for r in &rows {
            if let Some(ids) = &r.3 {
                assert_eq!(&e.tokenize(&r.2), ids, "{what}: ids of {:?}", r.2);
            }
        }
        let got = embed_batched(&e, &texts, 16);
        assert_f32_close(&format!("{what} (API)"), &got, &refs, &texts);
        let input = work_dir().join(format!("nomic-{prompt}-{dims:?}.jsonl"));
        write_input(&input, &texts);
        let mut cli = vec![
            "encode",
            "-m",
            model,
            "--jsonl",
            "--input",
            input.to_str().unwrap(),
        ];
        cli.extend(args.iter().map(String::as_str));
        let o = run(&cli);
        let got = jsonl_field(&o, "embedding", floats_of).concat();
        assert_f32_close(&format!("{what} (CLI)"), &got, &refs, &texts);
    }
    // A recipe name the engine does not know is refused by name.
    let o = run(&[
        "encode",
        "-m",
        model,
        "--matryoshka",
        "pca",
        "--input",
        model,
    ]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("pca"), "{}", stderr(&o));
    let err = Matryoshka::from_name("pca").unwrap_err().to_string();
    assert!(err.contains("truncate, layer-norm"), "{err}");
}

fn sparse_of(v: &serde_json::Value) -> embedder::SparseVector {
    crate::outputs::sparse_of(v)
}

/// The OpenSearch-style DistilBERT SPLADE: documents through the
/// DistilBERT MLM head (`vocab_transform`, `vocab_layer_norm`,
/// `vocab_projector`), queries through the static weights.
#[test]
fn splade_distilbert_matches_reference() {
    let name = "splade-distilbert-tiny";
    let text =
        std::fs::read_to_string(encoders_dir().join(format!("{name}_reference.jsonl"))).unwrap();
    let refs: Vec<serde_json::Value> = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(refs.len(), 346);
    let texts: Vec<String> = refs
        .iter()
        .map(|r| r["text"].as_str().unwrap().to_string())
        .collect();
    let path = converted(name);
    let sparse = [OutputKind::Sparse];
    for p in [Precision::F32, Precision::Int8] {
        let e = Embedder::open(&path, &Options::new().threads(2).precision(p)).unwrap();
        let q = e
            .encode(&texts, &EncodeRequest::new(&sparse).task(EncodeTask::Query))
            .unwrap();
        let d = e
            .encode(
                &texts,
                &EncodeRequest::new(&sparse).task(EncodeTask::Document),
            )
            .unwrap();
        let (q, d) = (q.into_sparse(), d.into_sparse());
        for (i, r) in refs.iter().enumerate() {
            crate::outputs::assert_sparse(
                &format!("query {i}"),
                &q[i],
                &sparse_of(&r["query_sparse"]),
            );
            if p == Precision::F32 {
                // The ids exactly, the weights within the f32 bar (1e-5).
                let want = sparse_of(&r["document_sparse"]);
                assert_eq!(d[i].indices, want.indices, "document {i}: ids");
                for (k, (a, b)) in d[i].values.iter().zip(&want.values).enumerate() {
                    assert!(
                        (a - b).abs() <= 1e-5,
                        "document {i}: id {} weight {a} vs {b}",
                        want.indices[k]
                    );
                }
            } else {
                // int8: the weights of the reference's ids mostly kept.
                let want = sparse_of(&r["document_sparse"]);
                let kept = want
                    .indices
                    .iter()
                    .filter(|x| d[i].indices.contains(x))
                    .count();
                assert!(
                    kept * 10 >= want.indices.len() * 8,
                    "document {i} int8: {kept} of {} ids",
                    want.indices.len()
                );
            }
        }
    }
}

/// A static folder's two references: `NAME_reference.jsonl`
/// (sentence-transformers) and `NAME_model2vec_reference.jsonl`.
fn static_reference(name: &str, model2vec: bool) -> Vec<RefCase> {
    let file = if model2vec {
        format!("encoders/{name}_model2vec_reference.jsonl")
    } else {
        format!("encoders/{name}_reference.jsonl")
    };
    let cases = read_reference(&file);
    assert_eq!(cases.len(), 346, "{file}");
    cases
}

/// potion folders (plain and vocabulary-quantized) on the static runtime:
/// sentence-transformers' vectors by default (the folders have a
/// `modules.json`), model2vec's with `--static-behaviour model2vec`, each
/// exact on every line through the API and the CLI, `inspect` naming the
/// behaviour; the two differ where the texts have `[UNK]` or are long.
#[test]
fn static_models_match_both_libraries() {
    for name in ["potion-tiny", "potion-vq-tiny"] {
        for (behaviour, m2v) in [("sentence-transformers", false), ("model2vec", true)] {
            let out = work_dir().join(format!("{name}-{behaviour}.weights"));
            convert(
                &encoders_dir().join(name),
                &out,
                &["--static-behaviour", behaviour],
            );
            let cases = static_reference(name, m2v);
            let refs = ref_embeddings(&cases);
            let texts: Vec<&str> = cases.iter().map(|c| c.text.as_str()).collect();
            let e = Engine::open(&out, &Options::new()).unwrap();
            assert!(e.as_embedder().is_none(), "{name}: not a transformer");
            assert_eq!(e.dim(), 32);
            let ids: Vec<Vec<u32>> = texts.iter().map(|t| e.tokenize(t)).collect();
            assert_ids(&format!("{name} {behaviour} (API)"), &ids, &cases);
            let got = e.embed(&texts).unwrap();
            let dim = e.dim();
            for (i, (g, r)) in got.chunks_exact(dim).zip(&refs).enumerate() {
                if r.iter().all(|x| *x == 0.0) {
                    assert!(g.iter().all(|x| *x == 0.0), "{name} line {}: zero", i + 1);
                    continue;
                }
                let (cos, max_abs) = compare(g, r);
                assert!(
                    cos >= 0.99999 && max_abs <= 1e-5,
                    "{name} {behaviour} line {}: cosine {cos}, max abs {max_abs}",
                    i + 1
                );
            }
            let model = out.to_str().unwrap();
            let input = work_dir().join(format!("{name}-static-input.jsonl"));
            write_input(&input, &texts);
            let o = run(&[
                "encode",
                "-m",
                model,
                "--jsonl",
                "--input",
                input.to_str().unwrap(),
            ]);
            let cli = jsonl_field(&o, "embedding", floats_of).concat();
            assert!(same_bits(&got, &cli), "{name} {behaviour}: CLI vs API");
            let o = run(&["inspect", "--json", model]);
            assert!(o.status.success(), "{}", stderr(&o));
            let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
            assert_eq!(v["metadata"]["static.behaviour"], behaviour, "{name}");
            let o = run(&["verify", model]);
            assert!(o.status.success(), "verify {name}: {}", stderr(&o));
            assert!(
                String::from_utf8_lossy(&o.stdout).contains(behaviour),
                "{}",
                String::from_utf8_lossy(&o.stdout)
            );
        }
        // The default on a folder with a modules.json: sentence-transformers.
        let folder = Engine::open(encoders_dir().join(name), &Options::new()).unwrap();
        let cases = static_reference(name, false);
        let texts: Vec<&str> = cases.iter().map(|c| c.text.as_str()).collect();
        let st = work_dir().join(format!("{name}-sentence-transformers.weights"));
        let conv = Engine::open(&st, &Options::new()).unwrap();
        assert!(same_bits(
            &folder.embed(&texts).unwrap(),
            &conv.embed(&texts).unwrap()
        ));
    }
}

/// `embd bench` times a static model as it times a transformer one: the
/// same JSON report, opened and run as `embd encode` runs it (tokens
/// counted as the API counts them); one thread whatever `--threads` asks
/// (the static runtime has no workers); `--emit` beyond dense refused by
/// name.
#[test]
fn embd_bench_times_static_models() {
    let name = "potion-tiny";
    let out = work_dir().join(format!("{name}-bench.weights"));
    convert(
        &encoders_dir().join(name),
        &out,
        &["--static-behaviour", "model2vec"],
    );
    let cases = static_reference(name, true);
    // One text per line: the texts without line breaks.
    let texts: Vec<&str> = cases
        .iter()
        .map(|c| c.text.as_str())
        .filter(|t| !t.contains(['\n', '\r']))
        .take(40)
        .collect();
    let input = work_dir().join(format!("{name}-bench-input.txt"));
    std::fs::write(&input, texts.join("\n") + "\n").unwrap();
    let e = Engine::open(&out, &Options::new()).unwrap();
    let tokens: usize = texts.iter().map(|t| e.count_tokens(t)).sum();
    let model = out.to_str().unwrap();
    let args = [
        "bench",
        "-m",
        model,
        "--input",
        input.to_str().unwrap(),
        "--rounds",
        "2",
        "--warmup",
        "5",
        "--latency-runs",
        "3",
        "--batch-size",
        "16",
    ];
    for threads in ["1", "2"] {
        let o = run(&[&args[..], &["--threads", threads]].concat());
        assert!(
            o.status.success(),
            "bench --threads {threads}: {}",
            stderr(&o)
        );
        let v: serde_json::Value = serde_json::from_slice(&o.stdout)
            .unwrap_or_else(|e| panic!("bench JSON: {e}: {}", String::from_utf8_lossy(&o.stdout)));
        assert_eq!(v["engine"], "embedder", "{v}");
        assert_eq!(v["threads"], 1, "{v}");
        assert_eq!(v["precision"], "f32", "{v}");
        assert_eq!(v["batch_size"], 16, "{v}");
        assert_eq!(v["texts"], texts.len(), "{v}");
        assert_eq!(v["tokens"], tokens, "{v}");
        assert_eq!(v["rounds_s"].as_array().map(Vec::len), Some(2), "{v}");
        assert!(v["texts_per_s"].as_f64().is_some_and(|x| x > 0.0), "{v}");
        assert!(v["open_first_ms"].as_f64().is_some_and(|x| x > 0.0), "{v}");
        assert_eq!(v["latency"]["runs"], 3, "{v}");
        let lt = v["latency"]["text"].as_str().unwrap();
        assert_eq!(v["latency"]["tokens"], e.count_tokens(lt), "{v}");
        if threads == "2" {
            assert!(stderr(&o).contains("one thread"), "{}", stderr(&o));
        }
    }
    let o = run(&[&args[..], &["--emit", "sparse"]].concat());
    assert!(!o.status.success());
    assert!(stderr(&o).contains("static"), "{}", stderr(&o));
}

/// A copy of reference folder `name` with `edit` applied to its
/// `config.json`.
pub(crate) fn edited(name: &str, tag: &str, edit: impl FnOnce(&mut serde_json::Value)) -> PathBuf {
    let dir = work_dir().join(format!("{name}-{tag}"));
    let _ = std::fs::remove_dir_all(&dir);
    crate::families::copy_tree(&encoders_dir().join(name), &dir);
    let p = dir.join("config.json");
    let mut cfg: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
    edit(&mut cfg);
    std::fs::write(&p, serde_json::to_string_pretty(&cfg).unwrap()).unwrap();
    dir
}

pub(crate) fn refused(dir: &Path, words: &[&str]) {
    let out = dir.with_extension("weights");
    let o = run(&[
        "convert",
        dir.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]);
    assert!(!o.status.success(), "{} converts", dir.display());
    let msg = stderr(&o);
    for w in words {
        assert!(msg.contains(w), "{}: {msg:?} lacks {w:?}", dir.display());
    }
}

/// The variants of these families without a reference, refused by name at
/// conversion: nomic-embed-text-v2-moe's experts, scaled or partial rotary
/// positions, biases and pre-norm in nomic's remote-code layout; GTE's
/// rotary scalings other than NTK / linear; jina-embeddings-v3's task
/// adapters (an XLM-R config with `lora_adaptations`); and the native
/// layouts of NomicBERT and GTE read as their hub twins are.
#[test]
fn unknown_variants_of_known_families_are_refused_by_name() {
    use serde_json::json;
    for (tag, key, value, words) in [
        (
            "moe",
            "moe_every_n_layers",
            json!(2),
            &["mixture-of-experts", "moe_every_n_layers"][..],
        ),
        (
            "experts",
            "num_experts",
            json!(8),
            &["nomic-embed-text-v2-moe"][..],
        ),
        (
            "scaled",
            "rotary_scaling_factor",
            json!(2.0),
            &["rotary_scaling_factor"][..],
        ),
        (
            "fraction",
            "rotary_emb_fraction",
            json!(0.5),
            &["rotary_emb_fraction"][..],
        ),
        (
            "interleaved",
            "rotary_emb_interleaved",
            json!(true),
            &["rotary_emb_interleaved"][..],
        ),
        ("prenorm", "prenorm", json!(true), &["prenorm"][..]),
        ("bias", "qkv_proj_bias", json!(true), &["qkv_proj_bias"][..]),
        (
            "gelu",
            "activation_function",
            json!("gelu"),
            &["activation_function", "gelu"][..],
        ),
    ] {
        let dir = edited("nomic-embed-tiny", tag, |c| c[key] = value);
        refused(&dir, words);
    }
    for (tag, scaling, words) in [
        (
            "dynamic",
            json!({"type": "dynamic", "factor": 2.0}),
            &["dynamic"][..],
        ),
        (
            "yarn",
            json!({"rope_type": "yarn", "factor": 4.0}),
            &["yarn"][..],
        ),
        ("nofactor", json!({"type": "ntk"}), &["ntk", "factor"][..]),
    ] {
        let dir = edited("gte-tiny", tag, |c| c["rope_scaling"] = scaling);
        refused(&dir, words);
    }
    let dir = edited("gte-tiny", "logn", |c| {
        c["logn_attention_scale"] = json!(true)
    });
    refused(&dir, &["logn_attention_scale"]);
    // jina-embeddings-v3 on the hub: XLM-R keys with task LoRA adapters.
    let dir = crate::families::source_dir("xlmr-tiny").join("xlmr-tiny");
    let copy = work_dir().join("xlmr-lora");
    let _ = std::fs::remove_dir_all(&copy);
    crate::families::copy_tree(&dir, &copy);
    let p = copy.join("config.json");
    let mut cfg: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
    cfg["lora_adaptations"] = json!(["retrieval.query", "retrieval.passage"]);
    std::fs::write(&p, cfg.to_string()).unwrap();
    refused(&copy, &["lora_adaptations", "jina-embeddings-v3"]);

    // The native layouts (transformers 5's `nomic_bert` and `gte` keys)
    // give the hub layouts' vectors.
    let native_nomic = edited("nomic-embed-tiny", "native", |c| {
        let keep = |k: &str| c[k].clone();
        *c = json!({
            "model_type": "nomic_bert",
            "architectures": ["NomicBertModel"],
            "hidden_size": keep("n_embd"),
            "num_hidden_layers": keep("n_layer"),
            "num_attention_heads": keep("n_head"),
            "intermediate_size": keep("n_inner"),
            "max_position_embeddings": keep("n_positions"),
            "layer_norm_eps": keep("layer_norm_epsilon"),
            "hidden_act": "silu",
            "rope_parameters": {"rope_type": "default", "rope_theta": keep("rotary_emb_base")},
            "type_vocab_size": 2,
            "vocab_size": keep("vocab_size"),
        });
    });
    let native_gte = edited("gte-tiny", "native", |c| {
        let o = c.as_object_mut().unwrap();
        o.insert("model_type".into(), json!("gte"));
        o.remove("rope_scaling");
        o.remove("rope_theta");
        o.insert(
            "rope_parameters".into(),
            json!({"rope_type": "linear", "factor": 8f64.powf(2.0 / 12.0), "rope_theta": 160000.0}),
        );
    });
    for (name, dir) in [("nomic-embed-tiny", native_nomic), ("gte-tiny", native_gte)] {
        let cases = reference(name);
        let texts: Vec<&str> = cases.iter().take(40).map(|c| c.text.as_str()).collect();
        let refs: Vec<Vec<f32>> = ref_embeddings(&cases)[..40].to_vec();
        let e = Embedder::open(&dir, &Options::new()).unwrap();
        let got = embed_batched(&e, &texts, 40);
        assert_f32_close(&format!("{name} native layout"), &got, &refs, &texts);
    }
}
