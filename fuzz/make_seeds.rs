//! The seed corpus of every fuzz target: small valid files made by our own
//! writers (no model files). Included with `#[path]` by
//! `tests/it/fuzz_regressions.rs`; regenerate `fuzz/corpus/` with
//!
//! ```text
//! cargo test --test it fuzz_regressions::write_fuzz_seeds -- --ignored
//! ```

use embedder::formats::{
    amb, coreml_blob, embd, finalfusion as ff, legacy, lwt, DType, ModelFile, ReadOptions,
    TensorEntry, CONTAINERS,
};
use embedder::testutil::{model_file as model, TinyBert};

/// A deterministic xorshift PRNG (no dependency).
pub struct Rng(pub u64);

impl Rng {
    /// Next 64 random bits.
    pub fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    /// Uniform in `0..n` (n > 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    /// Uniform in [-1, 1).
    pub fn f32(&mut self) -> f32 {
        (self.next() >> 40) as f32 / (1u64 << 23) as f32 - 1.0
    }
}

fn values(n: usize, seed: u64) -> Vec<f32> {
    let mut r = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    (0..n).map(|_| r.f32()).collect()
}

/// A tiny BERT encoder (HF names, EMBD metadata, a 13-token vocabulary):
/// [`TinyBert`] with 8 positions and [`values`].
pub fn tiny_bert(hidden: usize, layers: usize, inter: usize) -> ModelFile {
    let mut seed = 100;
    TinyBert::new(hidden, layers, inter, 8).build(|_, shape| {
        seed += 1;
        values(shape.iter().product(), seed)
    })
}

/// A few tensors of every dtype (EMBD can store them all).
fn mixed_dtypes() -> ModelFile {
    let base = tiny_bert(4, 1, 8);
    let mut ts = Vec::new();
    for (i, d) in DType::ALL.iter().enumerate() {
        let shape = vec![2, 3];
        let bytes: Vec<u8> = (0..6 * d.size()).map(|k| (k * 7 + i) as u8).collect();
        ts.push(TensorEntry::owned_bytes(
            format!("t.{}", d.name()),
            *d,
            shape,
            &bytes,
        ));
    }
    model(base.metadata.clone(), base.vocab.clone(), ts)
}

fn embd_bytes(m: &ModelFile, checksums: bool) -> Vec<u8> {
    embd::to_bytes(m, &embd::WriteOptions { checksums }).expect("EMBD writer")
}

fn legacy_bytes(m: &ModelFile) -> Vec<u8> {
    let mut b = Vec::new();
    legacy::write_legacy(m, &mut b).expect("legacy writer");
    b
}

fn small_fifu(sub: ff::Subwords, quant: bool) -> Vec<u8> {
    let w: Vec<String> = ["ab", "cd", "éf"].iter().map(|s| s.to_string()).collect();
    let rows = 3 + sub.rows().expect("rows") as usize;
    let storage = if quant {
        ff::Storage::Quantized {
            projection: Some(values(16, 1)),
            quantized_len: 2,
            reconstructed_len: 4,
            n_centroids: 2,
            centroids: values(8, 2),
            norms: Some(vec![1.5; rows]),
            codes: (0..rows * 2).map(|i| (i % 2) as u8).collect(),
        }
    } else {
        ff::Storage::Array {
            rows,
            dims: 2,
            data: values(rows * 2, 3),
        }
    };
    let e = ff::Embeddings::from_parts(
        Some("a=1".into()),
        w,
        sub,
        storage,
        Some(vec![1.0, 2.0, 3.0]),
    )
    .expect("fifu parts");
    let mut b = Vec::new();
    e.write(&mut b).expect("fifu writer");
    b
}

fn fifu_seeds() -> Vec<Vec<u8>> {
    vec![
        small_fifu(
            ff::Subwords::Bucket {
                min_n: 2,
                max_n: 3,
                exp: 2,
            },
            true,
        ),
        small_fifu(
            ff::Subwords::FastText {
                min_n: 2,
                max_n: 3,
                buckets: 3,
            },
            false,
        ),
        small_fifu(
            ff::Subwords::Explicit {
                min_n: 2,
                max_n: 2,
                ngrams: vec![("<a".into(), 0), ("ab".into(), 1)],
            },
            false,
        ),
        small_fifu(ff::Subwords::None, false),
    ]
}

/// `u16 manifest length | manifest JSON | weight.bin`, the coreml_blob target's input.
pub fn coreml_input(manifest: &[u8], blob: &[u8]) -> Vec<u8> {
    let n = u16::try_from(manifest.len()).expect("manifest under 64 KiB");
    let mut out = n.to_le_bytes().to_vec();
    out.extend_from_slice(manifest);
    out.extend_from_slice(blob);
    out
}

fn coreml_seeds() -> Vec<Vec<u8>> {
    let m = tiny_bert(4, 1, 8);
    let small = model(m.metadata.clone(), m.vocab.clone(), m.tensors[..5].to_vec());
    // One folder per thread: tests call `seeds()` concurrently.
    let dir = std::env::temp_dir().join(format!(
        "embd-seeds-coreml-{}-{:?}",
        std::process::id(),
        std::thread::current().id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    coreml_blob::write_dir(&small, &dir).expect("coreml writer");
    let blob = std::fs::read(dir.join("weight.bin")).expect("weight.bin");
    let manifest = std::fs::read(dir.join("manifest.json")).expect("manifest.json");
    let _ = std::fs::remove_dir_all(&dir);
    // Sub-byte blobs with a hand-written manifest.
    let mut w = coreml_blob::BlobWriter::new();
    let a = w
        .add_packed(coreml_blob::BlobDType::UInt3, &[1, 2, 3, 4, 5])
        .expect("uint3");
    let b = w
        .add_packed(coreml_blob::BlobDType::Int4, &[-1, 2, 3])
        .expect("int4");
    let extra = w.finish();
    let man = serde_json::json!({
        "format": coreml_blob::MANIFEST_FORMAT, "version": 1, "metadata": {"architecture": "bert"},
        "tensors": [
            {"name": "u3", "dtype": "uint3", "shape": [5], "offset": a},
            {"name": "i4", "dtype": "int4", "shape": [3], "offset": b},
            {"name": "empty", "dtype": "fp32", "shape": [0, 4]}
        ]
    });
    vec![
        coreml_input(&manifest, &blob),
        coreml_input(man.to_string().as_bytes(), &extra),
    ]
}

fn amb_seeds() -> Vec<Vec<u8>> {
    let m = tiny_bert(8, 1, 8);
    let small = model(
        m.metadata.clone(),
        m.vocab.clone(),
        vec![
            m.tensors[3].clone(),
            m.tensor("encoder.layer.0.attention.self.query.weight")
                .expect("query")
                .clone(),
        ],
    );
    use amb::{Quant, ScaleType};
    let quants = [
        Quant::None,
        Quant::Int4Block {
            block: 8,
            scale: ScaleType::F16,
        },
        Quant::Int5Block {
            block: 16,
            scale: ScaleType::F32,
        },
        Quant::Adaptive {
            bits: 5,
            block: 8,
            scale: ScaleType::F16,
            fp16_fraction: 0.5,
        },
    ];
    quants
        .iter()
        .enumerate()
        .map(|(i, &quant)| {
            let mut b = Vec::new();
            amb::write(
                &small,
                &mut b,
                &amb::WriteOptions {
                    quant,
                    checksum: i % 2 == 0,
                },
            )
            .expect("amb writer");
            b
        })
        .collect()
}

fn tiny_gpt2() -> ModelFile {
    let cfg = lwt::Gpt2Config {
        n_layer: 1,
        n_head: 2,
        n_embd: 4,
        vocab_size: 5,
        n_positions: 3,
        n_inner: 8,
        layer_norm_epsilon: 1e-5,
    };
    let ts = cfg
        .expected()
        .into_iter()
        .enumerate()
        .map(|(i, (name, shape))| {
            let n = shape.iter().product();
            TensorEntry::owned_f32(name, shape, &values(n, 900 + i as u64))
        })
        .collect();
    model(cfg.metadata(), None, ts)
}

fn lwt_bytes() -> Vec<u8> {
    let mut b = Vec::new();
    lwt::write(&tiny_gpt2(), &mut b).expect("lwt writer");
    b
}

fn safetensors_seeds() -> Vec<Vec<u8>> {
    use safetensors::tensor::TensorView;
    use safetensors::Dtype;
    let f32s: Vec<u8> = values(6, 5).iter().flat_map(|v| v.to_le_bytes()).collect();
    let f16s: Vec<u8> = (0..8u8).collect();
    let i64s: Vec<u8> = (0..16u8).collect();
    let views = vec![
        (
            "bert.embeddings.word_embeddings.weight".to_string(),
            TensorView::new(Dtype::F32, vec![2, 3], &f32s).expect("view"),
        ),
        (
            "bert.encoder.layer.0.output.LayerNorm.gamma".to_string(),
            TensorView::new(Dtype::F16, vec![4], &f16s).expect("view"),
        ),
        (
            "embeddings.position_ids".to_string(),
            TensorView::new(Dtype::I64, vec![2], &i64s).expect("view"),
        ),
    ];
    let mut md = std::collections::HashMap::new();
    md.insert("format".to_string(), "pt".to_string());
    let a = safetensors::serialize(views.clone(), Some(md)).expect("safetensors");
    let b = safetensors::serialize(views[..2].to_vec(), None).expect("safetensors");
    vec![a, b]
}

fn tokenizer_seeds() -> Vec<Vec<u8>> {
    let texts: [(u8, &str); 8] = [
        (0x00, "Hello, world! [SEP] café"),
        (0x31, "ΟΔΟΣ ab abc xyz 中文字 $+ [MASK]"),
        (0x52, "\u{0}\t\r\n control \u{200b} zero-width \u{fffd}"),
        (0x03, "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"),
        (0x84, "The quick brown fox jumps over the lazy dog. Ünïcödé, 日本語, emoji 🙂."),
        (0x05, "[CLS][SEP][PAD][UNK][MASK] [CL S]"),
        (0x06, "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nhi\n##x\n\n##\u{0}hi hix [CLS]"),
        (0x2e, "a\nb\n##b\n\u{0}ab abb b a"),
    ];
    texts
        .iter()
        .map(|(m, t)| {
            let mut v = vec![*m];
            v.extend_from_slice(t.as_bytes());
            v
        })
        .collect()
}

/// `bpe` inputs (`mode | options | A \0 B \0 text`, see fuzz/bpe_harness.rs).
fn bpe_seeds() -> Vec<Vec<u8>> {
    let vocab = r###"{"a": 0, "b": 1, "c": 2, "ab": 3, "abc": 4, "\u0120": 5, "\u0120a": 6, "<unk>": 7, "##b": 8, "a##b": 9, "<0x61>": 10}"###;
    let model = r#"{"type": "BPE", "dropout": null, "unk_token": "<unk>", "continuing_subword_prefix": null, "end_of_word_suffix": null, "fuse_unk": true, "byte_fallback": true, "ignore_merges": false, "vocab": {"a": 0, "b": 1, "ab": 2, "<unk>": 3, "<0x63>": 4}, "merges": [["a", "b"]]}"#;
    let inputs: [(u8, u8, String); 6] = [
        (
            0,
            0x00,
            format!("{vocab}\0#version: 0.2\na b\nab c\n\u{120} a\0abc ab a  cab"),
        ),
        (0, 0x13, format!("{vocab}\0a ##b\0ab abc xyz")),
        (1, 0x00, format!("{model}\0\0ab abc cx ab")),
        (
            1,
            0x40,
            r#"{"vocab": {"a": 0, "b": 1, "ab": 2}, "merges": ["a b"]}"#.to_string() + "\0\0ab",
        ),
        (
            2,
            0x00,
            "hello\n world\n's\n 12\n日本\0\0Hello world, it's 2024!  \t\n日本語 🙂".into(),
        ),
        (
            2,
            0xcc,
            "aaaa\naa\n\0\0aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa aaaa".into(),
        ),
    ];
    inputs
        .into_iter()
        .map(|(m, o, s)| {
            let mut v = vec![m, o];
            v.extend_from_slice(s.as_bytes());
            v
        })
        .collect()
}

/// One `hf_dir` record: `u8 file selector | u16 LE length | bytes` (selectors
/// index `HF_FILES` in fuzz/harness.rs).
fn hf_record(out: &mut Vec<u8>, sel: u8, b: &[u8]) {
    out.push(sel);
    out.extend_from_slice(&u16::try_from(b.len()).expect("small file").to_le_bytes());
    out.extend_from_slice(b);
}

/// A safetensors file of f32 tensors `(name, shape, little-endian bytes)`.
fn f32_safetensors(data: &[(String, Vec<usize>, Vec<u8>)]) -> Vec<u8> {
    use safetensors::tensor::TensorView;
    let views: Vec<(String, TensorView<'_>)> = data
        .iter()
        .map(|(n, s, b)| {
            (
                n.clone(),
                TensorView::new(safetensors::Dtype::F32, s.clone(), b).expect("view"),
            )
        })
        .collect();
    safetensors::serialize(views, None).expect("safetensors")
}

fn hf_dir_seeds() -> Vec<Vec<u8>> {
    let m = tiny_bert(4, 1, 8);
    let v = m.vocab.as_ref().expect("vocab");
    let config = serde_json::json!({
        "model_type": "bert", "architectures": ["Encoder"], "hidden_size": 4,
        "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 8,
        "max_position_embeddings": 8, "type_vocab_size": 2, "layer_norm_eps": 1e-12,
        "hidden_act": "gelu", "position_embedding_type": "absolute"
    });
    let tok_cfg = serde_json::json!({"do_lower_case": true, "model_max_length": 8,
        "cls_token": "[CLS]", "sep_token": {"content": "[SEP]"}});
    let modules = serde_json::json!([
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
        {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"}
    ]);
    let pooling = serde_json::json!({"word_embedding_dimension": 4,
        "pooling_mode_mean_tokens": true, "pooling_mode_cls_token": false});
    let st_cfg = serde_json::json!({"max_seq_length": 6, "do_lower_case": false});
    let data: Vec<(String, Vec<usize>, Vec<u8>)> = m
        .tensors
        .iter()
        .map(|t| {
            (
                format!("bert.{}", t.name),
                t.shape.clone(),
                m.tensor_bytes(t).to_vec(),
            )
        })
        .collect();
    let st = f32_safetensors(&data);
    let vocab_txt: String = v.tokens().iter().map(|t| format!("{t}\n")).collect();
    let tok_json = serde_json::json!({"normalizer": {"type": "BertNormalizer", "lowercase": true},
        "model": {"type": "WordPiece", "vocab": v.tokens().iter().enumerate()
            .map(|(i, t)| (t.clone(), serde_json::json!(i))).collect::<serde_json::Map<_, _>>()}});
    let mut full = Vec::new();
    hf_record(&mut full, 0, config.to_string().as_bytes());
    hf_record(&mut full, 1, tok_cfg.to_string().as_bytes());
    hf_record(&mut full, 3, vocab_txt.as_bytes());
    hf_record(&mut full, 4, st_cfg.to_string().as_bytes());
    hf_record(&mut full, 5, modules.to_string().as_bytes());
    hf_record(&mut full, 6, pooling.to_string().as_bytes());
    hf_record(&mut full, 7, &st);
    let mut minimal = Vec::new();
    hf_record(&mut minimal, 0, config.to_string().as_bytes());
    hf_record(&mut minimal, 2, tok_json.to_string().as_bytes());
    hf_record(&mut minimal, 7, &st);
    let mut out = vec![full, minimal];
    out.extend(modernbert_seeds());
    out.extend(encoder_family_seeds(&tok_json));
    out
}

/// NomicBERT (the hub's remote-code keys and transformers 5's native ones),
/// DistilBERT (its own keys) and a model2vec static folder, over the tiny
/// BERT's WordPiece `tokenizer.json`: the families' config-alias steps and
/// the static importer.
fn encoder_family_seeds(tok_json: &serde_json::Value) -> Vec<Vec<u8>> {
    let vocab = tok_json["model"]["vocab"].as_object().expect("vocab").len();
    let (h, heads, inter) = (4usize, 2usize, 8usize);
    let tensors = |arch: &str, extra: &[(&str, String)]| -> Vec<u8> {
        let mut md: std::collections::BTreeMap<String, String> = [
            ("architecture", arch.to_string()),
            ("hidden_size", h.to_string()),
            ("embedding_dim", h.to_string()),
            ("num_layers", "1".to_string()),
            ("num_attention_heads", heads.to_string()),
            ("intermediate_size", inter.to_string()),
            ("max_position_emb", "8".to_string()),
            ("vocab_size", vocab.to_string()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        for (k, v) in extra {
            md.insert(k.to_string(), v.clone());
        }
        let cfg = embedder::ModelConfig::from_metadata(&md).expect("a family config");
        let data: Vec<(String, Vec<usize>, Vec<u8>)> =
            embedder::model::encoder::required_tensors(&cfg)
                .into_iter()
                .enumerate()
                .map(|(i, (name, shape))| {
                    let n: usize = shape.iter().product();
                    let b = values(n, i as u64)
                        .iter()
                        .flat_map(|x| x.to_le_bytes())
                        .collect();
                    (name, shape, b)
                })
                .collect();
        f32_safetensors(&data)
    };
    let nomic_st = tensors("nomic_bert", &[("type_vocab_size", "2".into())]);
    let nomic_hub = serde_json::json!({
        "model_type": "nomic_bert", "architectures": ["NomicBertModel"], "n_embd": h,
        "n_layer": 1, "n_head": heads, "n_inner": inter, "n_positions": 8,
        "rotary_emb_base": 1000, "rotary_emb_fraction": 1.0, "rotary_emb_interleaved": false,
        "activation_function": "swiglu", "qkv_proj_bias": false, "mlp_fc1_bias": false,
        "mlp_fc2_bias": false, "prenorm": false, "layer_norm_epsilon": 1e-12,
        "type_vocab_size": 2, "vocab_size": vocab
    });
    let nomic_native = serde_json::json!({
        "model_type": "nomic_bert", "hidden_size": h, "num_hidden_layers": 1,
        "num_attention_heads": heads, "intermediate_size": inter, "max_position_embeddings": 8,
        "hidden_act": "silu", "rope_parameters": {"rope_type": "default", "rope_theta": 1000.0},
        "type_vocab_size": 2
    });
    let distil_st = tensors("distilbert", &[]);
    let distil = serde_json::json!({
        "model_type": "distilbert", "dim": h, "n_layers": 1, "n_heads": heads,
        "hidden_dim": inter, "max_position_embeddings": 8, "activation": "gelu",
        "sinusoidal_pos_embds": false
    });
    let m2v = serde_json::json!({"model_type": "model2vec", "normalize": true, "max_length": 4});
    let emb: Vec<u8> = values(vocab * h, 7)
        .iter()
        .flat_map(|x| x.to_le_bytes())
        .collect();
    let m2v_st = f32_safetensors(&[("embeddings".to_string(), vec![vocab, h], emb)]);
    let st_modules = serde_json::json!([
        {"idx": 0, "name": "0", "path": ".", "type": "sentence_transformers.models.StaticEmbedding"},
        {"idx": 1, "name": "1", "path": "1_Normalize", "type": "sentence_transformers.models.Normalize"}
    ]);
    let mut out = Vec::new();
    for (config, st, modules) in [
        (&nomic_hub, &nomic_st, None),
        (&nomic_native, &nomic_st, None),
        (&distil, &distil_st, None),
        (&m2v, &m2v_st, None),
        (&m2v, &m2v_st, Some(&st_modules)),
    ] {
        let mut f = Vec::new();
        hf_record(&mut f, 0, config.to_string().as_bytes());
        hf_record(&mut f, 2, tok_json.to_string().as_bytes());
        if let Some(m) = modules {
            hf_record(&mut f, 5, m.to_string().as_bytes());
        }
        hf_record(&mut f, 7, st);
        out.push(f);
    }
    out
}

/// ModernBERT folders (the config parser of `model::arch::modernbert` in
/// both key layouts, a byte-level BPE tokenizer with its template, the
/// tensors `required_tensors` names).
fn modernbert_seeds() -> Vec<Vec<u8>> {
    let tokens = [
        "[UNK]", "[CLS]", "[SEP]", "[PAD]", "[MASK]", "a", "b", "\u{120}", "ab", "\u{120}a",
    ];
    let vocab: serde_json::Map<String, serde_json::Value> = tokens
        .iter()
        .enumerate()
        .map(|(i, t)| (t.to_string(), serde_json::json!(i)))
        .collect();
    let special = |id: &str, t: u32| serde_json::json!({"SpecialToken": {"id": id, "type_id": t}});
    let seq = |id: &str, t: u32| serde_json::json!({"Sequence": {"id": id, "type_id": t}});
    let added: Vec<serde_json::Value> = (0..5)
        .map(|i| {
            serde_json::json!({"id": i, "content": tokens[i], "single_word": false,
                "lstrip": i == 4, "rstrip": false, "normalized": false, "special": true})
        })
        .collect();
    let tok_json = serde_json::json!({
        "added_tokens": added,
        "normalizer": {"type": "NFC"},
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true},
        "post_processor": {"type": "TemplateProcessing",
            "single": [special("[CLS]", 0), seq("A", 0), special("[SEP]", 0)],
            "pair": [special("[CLS]", 0), seq("A", 0), special("[SEP]", 0), seq("B", 1), special("[SEP]", 1)],
            "special_tokens": {"[CLS]": {"id": "[CLS]", "ids": [1], "tokens": ["[CLS]"]},
                               "[SEP]": {"id": "[SEP]", "ids": [2], "tokens": ["[SEP]"]}}},
        "decoder": {"type": "ByteLevel"},
        "model": {"type": "BPE", "dropout": null, "unk_token": null, "continuing_subword_prefix": "",
            "end_of_word_suffix": "", "fuse_unk": false, "byte_fallback": false, "ignore_merges": false,
            "vocab": vocab, "merges": [["a", "b"], ["\u{120}", "a"]]}
    });
    let (h, layers, heads, inter) = (4usize, 3usize, 2usize, 4usize);
    let v4 = serde_json::json!({
        "model_type": "modernbert", "architectures": ["ModernBertModel"], "hidden_size": h,
        "num_hidden_layers": layers, "num_attention_heads": heads, "intermediate_size": inter,
        "max_position_embeddings": 64, "vocab_size": tokens.len(), "norm_eps": 1e-5, "norm_bias": false,
        "global_attn_every_n_layers": 3, "local_attention": 4, "global_rope_theta": 160000.0,
        "local_rope_theta": 10000.0, "hidden_activation": "gelu"
    });
    let v5 = serde_json::json!({
        "model_type": "modernbert", "architectures": ["ModernBertModel"], "hidden_size": h,
        "num_hidden_layers": layers, "num_attention_heads": heads, "intermediate_size": inter,
        "max_position_embeddings": 64, "vocab_size": tokens.len(),
        "layer_types": ["full_attention", "sliding_attention", "sliding_attention"],
        "local_attention": 4, "rope_parameters": {
            "full_attention": {"rope_type": "default", "rope_theta": 160000.0},
            "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}}
    });
    let md: std::collections::BTreeMap<String, String> = [
        ("architecture", "modernbert".to_string()),
        ("hidden_size", h.to_string()),
        ("embedding_dim", h.to_string()),
        ("num_layers", layers.to_string()),
        ("num_attention_heads", heads.to_string()),
        ("intermediate_size", inter.to_string()),
        ("max_position_emb", "64".to_string()),
        ("vocab_size", tokens.len().to_string()),
        ("type_vocab_size", "0".to_string()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    let cfg = embedder::ModelConfig::from_metadata(&md).expect("a ModernBERT config");
    let data: Vec<(String, Vec<usize>, Vec<u8>)> = embedder::model::encoder::required_tensors(&cfg)
        .into_iter()
        .enumerate()
        .map(|(i, (name, shape))| {
            let n: usize = shape.iter().product();
            let b = values(n, i as u64)
                .iter()
                .flat_map(|x| x.to_le_bytes())
                .collect();
            (name, shape, b)
        })
        .collect();
    let st = f32_safetensors(&data);
    [v4, v5]
        .into_iter()
        .map(|config| {
            let mut f = Vec::new();
            hf_record(&mut f, 0, config.to_string().as_bytes());
            hf_record(&mut f, 2, tok_json.to_string().as_bytes());
            hf_record(&mut f, 7, &st);
            f
        })
        .collect()
}

/// `unigram_spec` seeds: a small Unigram tokenizer in the classic and the
/// transformers 5 layouts (settings, `piece<TAB>score` lines, a text), with and
/// without truncation.
fn unigram_spec_seeds() -> Vec<Vec<u8>> {
    use embedder::tokenizer::spec::{Layout, TokenizerSpec};
    let j = serde_json::json!({
        "added_tokens": [
            {"id": 0, "content": "<s>", "special": true, "normalized": false},
            {"id": 1, "content": "<pad>", "special": true, "normalized": false},
            {"id": 2, "content": "</s>", "special": true, "normalized": false},
            {"id": 3, "content": "<unk>", "special": true, "normalized": false},
            {"id": 9, "content": "<mask>", "special": true, "normalized": false, "lstrip": true}],
        "normalizer": {"type": "Sequence", "normalizers": [
            {"type": "NFKC"}, {"type": "Replace", "pattern": {"Regex": " {2,}"}, "content": " "}]},
        "pre_tokenizer": {"type": "Metaspace", "replacement": "\u{2581}", "prepend_scheme": "always", "split": true},
        "post_processor": {"type": "RobertaProcessing", "sep": ["</s>", 2], "cls": ["<s>", 0]},
        "decoder": {"type": "Metaspace", "replacement": "\u{2581}", "prepend_scheme": "always", "split": true},
        "model": {"type": "Unigram", "unk_id": 3, "byte_fallback": true, "vocab": [
            ["<s>", 0.0], ["<pad>", 0.0], ["</s>", 0.0], ["<unk>", 0.0], ["\u{2581}", -2.0],
            ["\u{2581}a", -1.0], ["b", -1.5], ["<0x41>", -9.0], ["\u{e9}", -3.0], ["<mask>", 0.0]]}
    });
    let cfg = serde_json::json!({"tokenizer_class": "XLMRobertaTokenizer"});
    let mut out = Vec::new();
    for (layout, mode) in [(Layout::AsWritten, 0u8), (Layout::AsTransformers, 0x35)] {
        let spec = TokenizerSpec::from_hf_json(&j, Some(&cfg), layout).expect("seed spec");
        let mut b = vec![mode];
        b.extend_from_slice(spec.settings_string().as_bytes());
        b.push(1);
        let n = spec.vocab_size();
        let lines: Vec<String> = spec
            .pieces
            .iter()
            .take(n)
            .zip(spec.scores.iter())
            .map(|(p, s)| format!("{p}\t{s}"))
            .chain(spec.pieces.iter().skip(n).map(str::to_string))
            .collect();
        b.extend_from_slice(lines.join("\n").as_bytes());
        b.push(1);
        b.extend_from_slice("a b  <mask>\u{e9}A\u{2581}x <s>b".as_bytes());
        out.push(b);
    }
    out
}

/// Qwen2/Qwen3's `Split` pattern.
const QWEN2_PATTERN: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";

/// `hf_tokenizer` seeds: small `tokenizer.json` files in the layouts of
/// ModernBERT (NFC, ByteLevel, whitespace and placeholder added tokens,
/// `[MASK]` with lstrip, `[CLS] $A [SEP]`), Qwen2/Qwen3 (NFC, `Split` with
/// Qwen's regex then ByteLevel without regex, `Sequence[ByteLevel,
/// TemplateProcessing($A <|endoftext|>)]`) and Gemma (`Replace(" ", "▁")`,
/// `Split(" ", MergedWithPrevious)`, byte-fallback BPE with `fuse_unk`,
/// `<bos> $A <eos>`), each with a text.
fn hf_tokenizer_seeds() -> Vec<Vec<u8>> {
    use embedder::tokenizer::byte_level::BYTE_CHAR;
    use serde_json::{json, Map, Value};
    let tok = |id: usize, content: &str, special: bool, normalized: bool, lstrip: bool| {
        json!({"id": id, "content": content, "single_word": false, "lstrip": lstrip,
               "rstrip": false, "normalized": normalized, "special": special})
    };
    let sp = |n: &str| json!({"SpecialToken": {"id": n, "type_id": 0}});
    let seq = |n: &str| json!({"Sequence": {"id": n, "type_id": 0}});
    let special = |n: &str, id: usize| json!({"id": n, "ids": [id], "tokens": [n]});
    // Byte-level: the 256 byte characters and a few merges.
    let mut bl: Vec<String> = BYTE_CHAR.iter().map(|c| c.to_string()).collect();
    let bl_merges = [
        ("h", "e"),
        ("l", "l"),
        ("he", "ll"),
        ("\u{120}", "w"),
        ("o", "r"),
    ];
    for (a, b) in bl_merges {
        bl.push(format!("{a}{b}"));
    }
    let vocab = |pieces: &[String]| -> Value {
        Value::Object(
            pieces
                .iter()
                .enumerate()
                .map(|(i, p)| (p.clone(), json!(i)))
                .collect::<Map<_, _>>(),
        )
    };
    let merges = |m: &[(&str, &str)]| -> Value {
        Value::Array(m.iter().map(|(a, b)| json!([a, b])).collect())
    };
    let n = bl.len();
    let modernbert = json!({
        "added_tokens": [tok(n, "<|endoftext|>", true, false, false),
            tok(n + 1, "   ", false, true, false), tok(n + 2, "  ", false, true, false),
            tok(n + 3, "|||IP_ADDRESS|||", false, true, false), tok(n + 4, "[UNK]", true, false, false),
            tok(n + 5, "[CLS]", true, false, false), tok(n + 6, "[SEP]", true, false, false),
            tok(n + 7, "[PAD]", true, false, false), tok(n + 8, "[MASK]", true, false, true)],
        "normalizer": {"type": "NFC"},
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true},
        "post_processor": {"type": "TemplateProcessing",
            "single": [sp("[CLS]"), seq("A"), sp("[SEP]")],
            "pair": [sp("[CLS]"), seq("A"), sp("[SEP]"), seq("B"), sp("[SEP]")],
            "special_tokens": {"[CLS]": special("[CLS]", n + 5), "[SEP]": special("[SEP]", n + 6)}},
        "decoder": {"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true, "use_regex": true},
        "model": {"type": "BPE", "dropout": null, "unk_token": null, "fuse_unk": false,
                  "byte_fallback": false, "ignore_merges": false,
                  "vocab": vocab(&bl), "merges": merges(&bl_merges)}
    });
    let modernbert_cfg = json!({"tokenizer_class": "PreTrainedTokenizerFast", "cls_token": "[CLS]",
        "sep_token": "[SEP]", "pad_token": "[PAD]", "unk_token": "[UNK]", "mask_token": "[MASK]"});
    let qwen = json!({
        "added_tokens": [tok(n, "<|endoftext|>", true, false, false),
            tok(n + 1, "<|im_start|>", true, false, false), tok(n + 2, "<|im_end|>", true, false, false),
            tok(n + 3, "<think>", false, false, false)],
        "normalizer": {"type": "NFC"},
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": QWEN2_PATTERN}, "behavior": "Isolated", "invert": false},
            {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": false}]},
        "post_processor": {"type": "Sequence", "processors": [
            {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false},
            {"type": "TemplateProcessing", "single": [seq("A"), sp("<|endoftext|>")],
             "pair": [seq("A"), seq("B"), sp("<|endoftext|>")],
             "special_tokens": {"<|endoftext|>": special("<|endoftext|>", n)}}]},
        "decoder": {"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true, "use_regex": true},
        "model": {"type": "BPE", "dropout": null, "unk_token": null, "continuing_subword_prefix": "",
                  "end_of_word_suffix": "", "fuse_unk": false, "byte_fallback": false,
                  "ignore_merges": false, "vocab": vocab(&bl), "merges": merges(&bl_merges)}
    });
    let qwen_cfg = json!({"tokenizer_class": "Qwen2Tokenizer", "eos_token": "<|im_end|>",
        "pad_token": "<|endoftext|>", "unk_token": null, "bos_token": null});
    let mut gp: Vec<String> = ["<pad>", "<eos>", "<bos>", "<unk>", "<mask>"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    gp.extend((0..=255u8).map(|b| format!("<0x{b:02X}>")));
    let g_merges = [("\u{2581}", "a"), ("b", "c"), ("\u{2581}a", "bc")];
    for p in ["\u{2581}", "a", "b", "c", "\u{e9}"] {
        gp.push(p.to_string());
    }
    for (a, b) in g_merges {
        gp.push(format!("{a}{b}"));
    }
    let gemma = json!({
        "added_tokens": [tok(0, "<pad>", true, false, false), tok(1, "<eos>", true, false, false),
            tok(2, "<bos>", true, false, false), tok(3, "<unk>", true, false, false),
            tok(4, "<mask>", true, false, false)],
        "normalizer": {"type": "Replace", "pattern": {"String": " "}, "content": "\u{2581}"},
        "pre_tokenizer": {"type": "Split", "pattern": {"String": " "}, "behavior": "MergedWithPrevious", "invert": false},
        "post_processor": {"type": "TemplateProcessing",
            "single": [sp("<bos>"), seq("A"), sp("<eos>")],
            "pair": [sp("<bos>"), seq("A"), sp("<eos>"), sp("<bos>"), seq("B"), sp("<eos>")],
            "special_tokens": {"<bos>": special("<bos>", 2), "<eos>": special("<eos>", 1)}},
        "decoder": {"type": "Sequence", "decoders": [
            {"type": "Replace", "pattern": {"String": "\u{2581}"}, "content": " "},
            {"type": "ByteFallback"}, {"type": "Fuse"}]},
        "model": {"type": "BPE", "dropout": null, "unk_token": "<unk>", "continuing_subword_prefix": null,
                  "end_of_word_suffix": null, "fuse_unk": true, "byte_fallback": true,
                  "ignore_merges": false, "vocab": vocab(&gp), "merges": merges(&g_merges)}
    });
    let gemma_cfg = json!({"tokenizer_class": "GemmaTokenizer", "bos_token": "<bos>", "eos_token": "<eos>",
        "pad_token": "<pad>", "unk_token": "<unk>", "mask_token": "<mask>"});
    let mut out = Vec::new();
    for (mode, j, cfg, text) in [
        (
            0u8,
            &modernbert,
            &modernbert_cfg,
            "hello   world |||IP_ADDRESS||| [MASK] caf\u{e9}\u{301}",
        ),
        (
            0x31,
            &qwen,
            &qwen_cfg,
            "Hello world's  test\n\n  x 123 <|im_start|><think>",
        ),
        (0x01, &gemma, &gemma_cfg, "a bc  abc \u{e9}\u{4e2d}<bos>x"),
    ] {
        let mut b = vec![mode];
        b.extend_from_slice(j.to_string().as_bytes());
        b.push(1);
        b.extend_from_slice(cfg.to_string().as_bytes());
        b.push(1);
        b.extend_from_slice(text.as_bytes());
        out.push(b);
    }
    out
}

/// `split` seeds: Qwen2's, cl100k's and GPT-2's patterns, Gemma's string and
/// a few constructs (look-ahead, counted and lazy repetition, case folding,
/// bracket classes), over texts with contractions, whitespace runs, digits.
fn split_seeds() -> Vec<Vec<u8>> {
    let text = "Hello world's TEST'S  x\n\n  y 12345 \u{3000}caf\u{e9}! \u{17f}";
    let mut out = Vec::new();
    for (mode, pattern) in [
        (1u8, QWEN2_PATTERN),
        (
            1,
            r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
        ),
        (
            1,
            r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+",
        ),
        (2 | 16, " "),
        (4 | 8, r"(?i)[a-c]+?x{1,2}|\x41|[^\S\n]+(?=\p{N})|."),
    ] {
        let mut b = vec![mode];
        b.extend_from_slice(pattern.as_bytes());
        b.push(1);
        b.extend_from_slice(text.as_bytes());
        out.push(b);
    }
    out
}

/// `pair_template` seeds: Qwen3-Reranker's chat template, one with `{#`
/// comments and single quotes, a stored template, and a refused loop.
fn pair_template_seeds() -> Vec<Vec<u8>> {
    let qwen = concat!(
        "{%- set instruction = messages | selectattr(\"role\", \"eq\", \"system\") | map(attribute=\"content\") | first | default(\"Given a web search query, retrieve relevant passages that answer the query\") -%}\n",
        "{%- set query = messages | selectattr(\"role\", \"eq\", \"query\") | map(attribute=\"content\") | first -%}\n",
        "{%- set document = messages | selectattr(\"role\", \"eq\", \"document\") | map(attribute=\"content\") | first -%}\n",
        "<|im_start|>system\nJudge whether the Document meets the requirements.<|im_end|>\n<|im_start|>user\n",
        "<Instruct>: {{ instruction }}\n<Query>: {{ query }}\n<Document>: {{ document }}<|im_end|>\n",
        "<|im_start|>assistant\n<think>\n\n</think>{{ \"\\n\\n\" }}\n",
    );
    let other = concat!(
        "{# a comment #}{% set q = messages | selectattr('role', 'equalto', 'query') | map(attribute='content') | first %}\n",
        "{% set d = messages | selectattr('role', 'eq', 'document') | map(attribute='content') | first %}\n",
        "  Q: {{- q -}} D: {{ d }}{{ '\\t' }}",
    );
    vec![
        qwen.as_bytes().to_vec(),
        other.as_bytes().to_vec(),
        br#"{"pieces":[{"text":"Q: "},{"slot":"query"},{"text":" D: "},{"slot":"document"}],"default_instruction":""}"#.to_vec(),
        b"{% for m in messages %}{{ m.content }}{% endfor %}".to_vec(),
    ]
}

/// `hub_answers` seeds: a model-info answer as the hub gives it (with
/// `?blobs=true` sizes and LFS hashes), a gated one, etags and hub ids.
fn hub_answers_seeds() -> Vec<Vec<u8>> {
    vec![
        br#"{"_id":"x","id":"sentence-transformers/all-MiniLM-L6-v2","sha":"c9745ed1d9f207416be6d2e6f8de32d1f16199bf","private":false,"gated":false,"siblings":[{"rfilename":".gitattributes","size":1229},{"rfilename":"1_Pooling/config.json","size":190},{"rfilename":"config.json","size":612},{"rfilename":"model.safetensors","size":90868376,"lfs":{"sha256":"53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db","size":90868376,"pointerSize":135}},{"rfilename":"onnx/model.onnx"},{"rfilename":"tokenizer.json"}]}"#.to_vec(),
        br#"{"id":"o/gated","sha":"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa","gated":"manual","siblings":[{"rfilename":"config.json"},{"rfilename":"model-00001-of-00002.safetensors"},{"rfilename":"2_Dense/model.safetensors"}]}"#.to_vec(),
        b"W/\"53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db\"".to_vec(),
        b"BAAI/bge-small-en-v1.5@refs/pr/3".to_vec(),
    ]
}

/// Every seed: `(target, file name, bytes)`.
pub fn seeds() -> Vec<(&'static str, String, Vec<u8>)> {
    let mut out: Vec<(&'static str, String, Vec<u8>)> = Vec::new();
    let bert = tiny_bert(4, 1, 8);
    let embd_files = [
        ("tiny_bert", embd_bytes(&bert, true)),
        ("tiny_bert_nocrc", embd_bytes(&bert, false)),
        ("mixed_dtypes", embd_bytes(&mixed_dtypes(), true)),
    ];
    let legacy_file = legacy_bytes(&bert);
    let fifu = fifu_seeds();
    let amb_files = amb_seeds();
    let lwt_file = lwt_bytes();
    for (n, b) in &embd_files {
        if n.starts_with("tiny_bert") {
            out.push(("embedder", format!("{n}.embd"), b.clone()));
        }
        out.push(("embd", format!("{n}.embd"), b.clone()));
        out.push(("model_file", format!("{n}.embd"), b.clone()));
    }
    // Weights packed in the kernels' run layout (`model::packed`).
    for (n, target) in [
        (
            "tiny_bert_packed_bf16",
            embedder::convert::TargetDType::BF16,
        ),
        (
            "tiny_bert_packed_int8",
            embedder::convert::TargetDType::Int8,
        ),
    ] {
        let converted = embedder::convert::convert_dtype(&bert, target).expect("convert");
        let packed = embedder::convert::pack_for_run(converted, target).expect("pack");
        out.push(("embedder", format!("{n}.embd"), embd_bytes(&packed, true)));
    }
    out.push(("legacy", "tiny_bert.legacy".into(), legacy_file.clone()));
    out.push(("model_file", "tiny_bert.legacy".into(), legacy_file.clone()));
    out.push(("embedder", "tiny_bert.legacy".into(), legacy_file));
    for (i, b) in fifu.iter().enumerate() {
        out.push(("finalfusion", format!("small_{i}.fifu"), b.clone()));
    }
    out.push(("model_file", "small_0.fifu".into(), fifu[0].clone()));
    for (i, b) in coreml_seeds().into_iter().enumerate() {
        out.push(("coreml_blob", format!("blob_{i}.bin"), b));
    }
    for (i, b) in amb_files.iter().enumerate() {
        out.push(("amb", format!("small_{i}.amb"), b.clone()));
    }
    out.push(("model_file", "small_1.amb".into(), amb_files[1].clone()));
    out.push(("lwt", "tiny_gpt2.lwt".into(), lwt_file.clone()));
    out.push(("model_file", "tiny_gpt2.lwt".into(), lwt_file));
    for (i, b) in safetensors_seeds().into_iter().enumerate() {
        out.push(("safetensors", format!("small_{i}.safetensors"), b));
    }
    for (i, b) in hf_dir_seeds().into_iter().enumerate() {
        out.push(("hf_dir", format!("folder_{i}.bin"), b));
    }
    for (i, b) in tokenizer_seeds().into_iter().enumerate() {
        out.push(("tokenizer", format!("text_{i}.txt"), b));
    }
    for (i, b) in bpe_seeds().into_iter().enumerate() {
        out.push(("bpe", format!("model_{i}.bin"), b));
    }
    for (i, b) in unigram_spec_seeds().into_iter().enumerate() {
        out.push(("unigram_spec", format!("spec_{i}.bin"), b));
    }
    for (i, b) in hf_tokenizer_seeds().into_iter().enumerate() {
        out.push(("hf_tokenizer", format!("tokenizer_{i}.bin"), b));
    }
    for (i, b) in split_seeds().into_iter().enumerate() {
        out.push(("split", format!("pattern_{i}.bin"), b));
    }
    for (n, b) in torch_pt_seeds() {
        out.push(("torch_pt", n, b));
    }
    for (i, b) in pair_template_seeds().into_iter().enumerate() {
        out.push(("pair_template", format!("template_{i}.bin"), b));
    }
    for (i, b) in hub_answers_seeds().into_iter().enumerate() {
        out.push(("hub_answers", format!("answer_{i}.bin"), b));
    }
    // The `container` target: every file seed of `model_file`, prefixed with
    // the index of its row among the containers that read from bytes.
    let rows: Vec<_> = CONTAINERS.iter().filter(|c| c.read.is_some()).collect();
    let files: Vec<(String, Vec<u8>)> = out
        .iter()
        .filter(|(t, _, _)| *t == "model_file")
        .map(|(_, n, b)| (n.clone(), b.clone()))
        .collect();
    for (n, b) in files {
        let i = rows
            .iter()
            .position(|c| (c.sniff)(&b))
            .expect("a seed file some container sniffs");
        let mut v = vec![i as u8];
        v.extend_from_slice(&b);
        out.push(("container", n, v));
    }
    // Every seed must parse as its writer meant (else it seeds nothing useful).
    for (t, n, b) in &out {
        let ok = match *t {
            "embd" | "legacy" | "model_file" | "amb" | "lwt" | "finalfusion" => {
                ModelFile::from_bytes(b, ReadOptions::default()).is_ok()
            }
            "torch_pt" if n.ends_with(".pt") => {
                embedder::formats::torch_pt::read_state_dict(b).is_ok_and(|t| !t.is_empty())
            }
            _ => true,
        };
        assert!(ok, "seed {t}/{n} does not parse");
    }
    out
}

#[path = "pt_writer.rs"]
mod pt_writer;

/// `torch_pt` seeds: archives as torch lays them out (`.pt`), and bare
/// pickles (`.pkl`, which the target also wraps into an archive whose
/// storages are `0` (16 bytes), `1` (4) and `2` (64)).
fn torch_pt_seeds() -> Vec<(String, Vec<u8>)> {
    use pt_writer::{state_dict, torch_zip, Pickle};
    let head = state_dict(&[
        ("weight", "FloatStorage", "0", 4, 0, &[1, 4], &[4, 1]),
        ("bias", "FloatStorage", "1", 1, 0, &[1], &[1]),
    ]);
    let mut nested = Pickle::new();
    nested.raw(b"}").mark();
    nested
        .str("t")
        .tensor("HalfStorage", "0", 8, 0, &[2, 4], &[1, 2]);
    nested.str("inner").raw(b"}").mark();
    nested
        .str("b")
        .tensor("BFloat16Storage", "2", 32, 2, &[3, 2], &[2, 1]);
    nested.str("l").tensor("CharStorage", "1", 4, 1, &[2], &[2]);
    nested.str("n").int(7).raw(b"u").raw(b"u");
    let nested = nested.finish();
    let storages = vec![
        ("0", (0u8..16).collect::<Vec<u8>>()),
        ("1", vec![0, 0, 0x80, 0x3f]),
        ("2", (0u8..64).collect()),
    ];
    vec![
        ("head.pt".into(), torch_zip("head", &head, &storages[..2])),
        ("nested.pt".into(), torch_zip("nested", &nested, &storages)),
        ("head.pkl".into(), head),
        ("nested.pkl".into(), nested),
    ]
}
