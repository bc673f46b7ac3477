//! Engine tests: parity with sentence-transformers on the real model, batch and
//! thread invariance, pooling variants and weight dtypes on a random model
//! checked against the scalar reference forward, and error cases.

use std::collections::BTreeMap;
use std::sync::Arc;

use embedder::formats::{Backing, TensorEntry};
use embedder::import::hf::HfOptions;
use embedder::model::names::{BERT, LAYER_PREFIX};
use embedder::model::reference;
use embedder::testutil::TinyBert;
use embedder::{
    DType, Embedder, ErrorKind, FormatKind, ModelConfig, ModelFile, Options, Pooling, Precision,
};

use crate::common;

/// The real model read from its HF folder (`model.safetensors` mapped in place).
fn load_hf() -> Option<ModelFile> {
    let dir = common::minilm_hf_dir("engine")?;
    let hf = HfOptions {
        name: Some("all-MiniLM-L6-v2".into()),
        ..HfOptions::default()
    };
    Some(ModelFile::open_hf_dir(dir, &hf).unwrap())
}

struct RefLine {
    text: String,
    ids: Vec<u32>,
    embedding: Vec<f32>,
}

fn reference_lines() -> Vec<RefLine> {
    common::read_reference("minilm_reference.jsonl")
        .into_iter()
        .map(|c| RefLine {
            text: c.text,
            ids: c.input_ids,
            embedding: c.embedding.expect("reference line without embedding"),
        })
        .collect()
}

fn embed_all(e: &Embedder, seqs: &[&[u32]], batch: usize) -> Vec<f32> {
    let dim = e.dim();
    let mut out = vec![0.0f32; seqs.len() * dim];
    for (s, o) in seqs.chunks(batch).zip(out.chunks_mut(batch * dim)) {
        e.embed_ids(s, o).unwrap();
    }
    out
}

fn same_bits(a: &[f32], b: &[f32]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits())
}

#[test]
fn embedder_is_send_and_sync() {
    fn check<T: Send + Sync>() {}
    check::<Embedder>();
}

#[test]
fn real_model_parity_batch_and_thread_invariance() {
    let Some(file) = load_hf() else { return };
    let lines = reference_lines();
    assert_eq!(lines.len(), 327);
    let e = Embedder::from_model_file(file, &Options::new().threads(2)).unwrap();
    assert_eq!(e.dim(), 384);
    assert_eq!(e.max_seq_length(), 256);
    let info = e.info();
    assert_eq!(
        (info.num_layers, info.num_heads, info.hidden_size),
        (6, 12, 384)
    );
    assert_eq!(info.pooling, Pooling::Mean);
    assert!(info.normalize);

    let seqs: Vec<&[u32]> = lines.iter().map(|l| l.ids.as_slice()).collect();
    let all = embed_all(&e, &seqs, seqs.len());

    // (a) parity on every line.
    let (mut worst_cos, mut worst_cos_i) = (1.0f32, 0);
    let (mut worst_abs, mut worst_abs_i) = (0.0f32, 0);
    for (i, (l, got)) in lines.iter().zip(all.chunks(384)).enumerate() {
        let cos = embedder::cosine_similarity(got, &l.embedding);
        let abs = got
            .iter()
            .zip(&l.embedding)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0f32, f32::max);
        if cos < worst_cos {
            (worst_cos, worst_cos_i) = (cos, i);
        }
        if abs > worst_abs {
            (worst_abs, worst_abs_i) = (abs, i);
        }
    }
    eprintln!(
        "parity over {} lines: worst cosine {worst_cos:.9} (line {worst_cos_i}), worst max abs diff {worst_abs:.3e} (line {worst_abs_i})",
        lines.len()
    );
    assert!(
        worst_cos >= 0.99999,
        "worst cosine {worst_cos} on line {worst_cos_i}"
    );
    assert!(
        worst_abs <= 1e-4,
        "worst abs diff {worst_abs} on line {worst_abs_i}"
    );

    // (b) batch invariance, bit for bit.
    for batch in [1usize, 7, 64] {
        let got = embed_all(&e, &seqs, batch);
        assert!(
            same_bits(&got, &all),
            "batch size {batch} changes the vectors"
        );
    }
    // Reversed order: each text lands elsewhere in the packed chunk.
    let rev: Vec<&[u32]> = seqs.iter().rev().copied().collect();
    let got = embed_all(&e, &rev, 64);
    for (i, v) in got.chunks(384).enumerate() {
        assert!(
            same_bits(v, &all[(seqs.len() - 1 - i) * 384..][..384]),
            "reversed {i}"
        );
    }

    // (c) one thread gives the very same bits as two.
    let e1 = Embedder::from_model_file(load_hf().unwrap(), &Options::new().threads(1)).unwrap();
    for batch in [1usize, 64, 327] {
        let got = embed_all(&e1, &seqs, batch);
        assert!(
            same_bits(&got, &all),
            "1 thread, batch {batch}: differs from 2 threads"
        );
    }
    eprintln!("batch sizes 1/7/64/327 and 1 vs 2 threads: bit-identical");

    // (d) weights never packed, or all packed: the same bits (`all` itself may
    // have run while the background packer was half way).
    let opts = Options::new().threads(2).prepack_weights(false);
    let e0 = Embedder::from_model_file(load_hf().unwrap(), &opts).unwrap();
    assert!(same_bits(&embed_all(&e0, &seqs, 64), &all), "unpacked");
    assert_eq!(e0.packed_layers().0, 0);
    e0.prepack();
    let (layers, bytes) = e0.packed_layers();
    assert_eq!(layers, 6);
    assert!(bytes >= 6 * 4 * (4 * 384 * 384 + 2 * 384 * 1536), "{bytes}");
    for batch in [1usize, 327] {
        let got = embed_all(&e0, &seqs, batch);
        assert!(same_bits(&got, &all), "packed, batch {batch}");
    }

    // Texts end to end (tokenizer + engine): the same vectors as from the ids.
    let texts: Vec<&str> = lines.iter().map(|l| l.text.as_str()).collect();
    let from_text = e.embed(&texts).unwrap();
    for (i, l) in lines.iter().enumerate() {
        assert_eq!(e.tokenize(&l.text), l.ids, "token ids of line {i}");
    }
    assert!(
        same_bits(&from_text, &all),
        "embed(texts) differs from embed_ids"
    );
}

#[test]
fn real_model_errors_and_limits() {
    let Some(file) = load_hf() else { return };
    let e = Embedder::from_model_file(file, &Options::new().threads(1)).unwrap();
    let mut out = vec![0.0f32; 384];
    let err = e.embed_ids(&[&[101, 30522, 102]], &mut out).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);
    assert!(err.to_string().contains("30522"), "{err}");
    let long = vec![1000u32; 257];
    let err = e.embed_ids(&[&long], &mut out).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);
    assert!(err.to_string().contains("257"), "{err}");
    let err = e.embed_ids(&[&[101]], &mut out).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);
    let err = e
        .embed_ids(&[&[101, 102], &[101, 102]], &mut out)
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::BufferTooSmall);
    let err = e.embed_into(&["a", "b"], &mut out).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::BufferTooSmall);
    e.embed_ids(&[], &mut []).unwrap();
    let v = e.embed_one("hello world").unwrap();
    assert_eq!(v.len(), 384);
    assert!((v.iter().map(|x| x * x).sum::<f32>() - 1.0).abs() < 1e-5);

    // Overrides.
    for bad in [0usize, 1, 513] {
        let err =
            Embedder::from_model_file(load_hf().unwrap(), &Options::new().max_seq_length(bad))
                .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{bad}");
    }
    let e = Embedder::from_model_file(
        load_hf().unwrap(),
        &Options::new()
            .max_seq_length(512)
            .normalize(false)
            .threads(1),
    )
    .unwrap();
    assert_eq!(e.max_seq_length(), 512);
    assert!(!e.info().normalize);
    let long = vec![1000u32; 512];
    e.embed_ids(&[&long], &mut out).unwrap();
}

// ---------------------------------------------------------------------------
// A small random model, checked against the scalar reference forward.

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> f32 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((self.0 >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
    }
    fn vec(&mut self, n: usize, scale: f32, offset: f32) -> Vec<f32> {
        (0..n).map(|_| self.next() * scale + offset).collect()
    }
}

const TINY: (usize, usize, usize, usize, usize, usize) = (16, 2, 2, 24, 50, 40); // hidden, heads, layers, inter, vocab, max_pos

#[derive(Clone, Copy, PartialEq)]
enum WeightType {
    F32,
    F16,
    Int8,
}

fn tiny_bert() -> TinyBert {
    let (h, heads, layers, inter, vocab, max_pos) = TINY;
    TinyBert {
        heads,
        words: (5..vocab).map(|i| format!("w{i}")).collect(),
        ..TinyBert::new(h, layers, inter, max_pos)
    }
}

/// Scale and offset of a tensor's random values: LayerNorm gains near 1,
/// small biases, a narrower feed-forward down projection.
fn tiny_scale(name: &str) -> (f32, f32) {
    let n = &BERT;
    let (path, kind) = name.rsplit_once('.').expect("module.kind");
    let module = path
        .strip_prefix(LAYER_PREFIX)
        .and_then(|r| r.split_once('.'))
        .map_or(path, |(_, m)| m);
    if module == n.word {
        (1.0, 0.0)
    } else if module == n.position || module == n.token_type {
        (0.5, 0.0)
    } else if kind == "bias" {
        (0.1, 0.0)
    } else if [n.emb_ln, n.attn_ln, n.ffn_ln].contains(&module) {
        (0.2, 1.0)
    } else if module == n.ffn_down {
        (0.3, 0.0)
    } else {
        (0.4, 0.0)
    }
}

fn tiny_specs() -> Vec<(String, Vec<usize>, f32, f32)> {
    tiny_bert()
        .shapes()
        .into_iter()
        .map(|(name, shape)| {
            let (sc, off) = tiny_scale(&name);
            (name, shape, sc, off)
        })
        .collect()
}

fn tiny_model(pooling: &str, normalize: bool, wt: WeightType) -> ModelFile {
    tiny_model_with(pooling, normalize, wt, |_| {})
}

fn tiny_model_with(
    pooling: &str,
    normalize: bool,
    wt: WeightType,
    edit: impl FnOnce(&mut Vec<TensorEntry>),
) -> ModelFile {
    let (h, heads, layers, inter, vocab, max_pos) = TINY;
    let mut rng = Rng(42);
    let mut tensors = Vec::new();
    for (name, shape, sc, off) in tiny_specs() {
        let v = rng.vec(shape.iter().product(), sc, off);
        let is_matrix = shape.len() == 2 && name.starts_with("encoder");
        match wt {
            WeightType::F16 if is_matrix => {
                let bytes: Vec<u8> = v
                    .iter()
                    .flat_map(|x| half::f16::from_f32(*x).to_le_bytes())
                    .collect();
                tensors.push(TensorEntry::owned_bytes(name, DType::F16, shape, &bytes));
            }
            WeightType::Int8 if is_matrix => {
                let cols = shape[1];
                let mut q = Vec::new();
                let mut scales = Vec::new();
                for row in v.chunks(cols) {
                    let m = row.iter().fold(0.0f32, |a, x| a.max(x.abs())).max(1e-8);
                    let s = m / 127.0;
                    scales.push(s);
                    q.extend(row.iter().map(|x| (x / s).round() as i8 as u8));
                }
                let rows = shape[0];
                tensors.push(TensorEntry::owned_bytes(name.clone(), DType::I8, shape, &q));
                tensors.push(TensorEntry::owned_f32(
                    format!("{name}_scale"),
                    vec![rows],
                    &scales,
                ));
            }
            _ => tensors.push(TensorEntry::owned_f32(name, shape, &v)),
        }
    }
    edit(&mut tensors);
    let vocab_v = tiny_bert().vocab();
    let mut md: BTreeMap<String, String> = [
        ("model_name", "tiny-random".to_string()),
        ("model_version", "0".into()),
        ("embedding_dim", h.to_string()),
        ("hidden_size", h.to_string()),
        ("vocab_size", vocab.to_string()),
        ("num_layers", layers.to_string()),
        ("num_attention_heads", heads.to_string()),
        ("intermediate_size", inter.to_string()),
        ("max_position_emb", max_pos.to_string()),
        ("pooling", pooling.to_string()),
        ("normalize", normalize.to_string()),
        ("layer_norm_eps", "1e-5".into()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    if wt == WeightType::Int8 {
        md.insert("quantization".into(), "int8_per_row".into());
    }
    ModelFile::new(
        FormatKind::Embd,
        Arc::new(Backing::from_bytes(&[])),
        md,
        Some(vocab_v),
        tensors,
    )
    .unwrap()
}

fn tiny_inputs() -> Vec<Vec<u32>> {
    let mut r = Rng(7);
    let mut v = Vec::new();
    for len in [2usize, 3, 5, 9, 17, 33, 40, 1 + 1] {
        let mut s = vec![2u32];
        s.extend((0..len - 2).map(|_| 5 + ((r.next() + 1.0) * 22.0) as u32 % 45));
        s.push(3);
        v.push(s);
    }
    v
}

#[test]
fn random_model_matches_reference_forward_for_every_pooling() {
    let inputs = tiny_inputs();
    let seqs: Vec<&[u32]> = inputs.iter().map(Vec::as_slice).collect();
    for wt in [WeightType::F32, WeightType::F16, WeightType::Int8] {
        for pooling in ["mean", "cls", "max"] {
            for normalize in [true, false] {
                for threads in [1usize, 3] {
                    let file = tiny_model(pooling, normalize, wt);
                    let oracle = tiny_model(pooling, normalize, wt);
                    let cfg = ModelConfig::from_metadata(&oracle.metadata).unwrap();
                    // The oracle is the f32 forward (int8 weights dequantized),
                    // so the int8 file runs its f32 products here; int8
                    // arithmetic is checked in `precision.rs`.
                    let opts = Options::new().threads(threads).precision(Precision::F32);
                    let e = Embedder::from_model_file(file, &opts).unwrap();
                    assert_eq!(e.dim(), 16);
                    assert_eq!(e.max_seq_length(), 40);
                    let mut out = vec![0.0f32; seqs.len() * 16];
                    e.embed_ids(&seqs, &mut out).unwrap();
                    let mut worst = 0.0f32;
                    for (s, got) in seqs.iter().zip(out.chunks(16)) {
                        let hidden = reference::bert_forward(&oracle, &cfg, s);
                        let want = reference::pool(
                            &hidden,
                            16,
                            Pooling::from_name(pooling).unwrap(),
                            normalize,
                        );
                        for (a, b) in got.iter().zip(&want) {
                            worst = worst.max((a - b).abs());
                        }
                    }
                    assert!(
                        worst < 2e-5,
                        "{pooling} normalize={normalize} threads={threads}: max abs diff {worst}"
                    );
                    // Alone vs in the batch: same bits.
                    let mut one = vec![0.0f32; 16];
                    e.embed_ids(&seqs[4..5], &mut one).unwrap();
                    assert!(same_bits(&one, &out[4 * 16..5 * 16]));
                }
            }
        }
    }
}

#[test]
fn loader_names_the_bad_tensor() {
    let file = tiny_model_with("mean", true, WeightType::F32, |t| {
        t.retain(|x| x.name != "encoder.layer.1.intermediate.dense.bias")
    });
    let err = Embedder::from_model_file(file, &Options::new()).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Model);
    assert!(
        err.to_string()
            .contains("encoder.layer.1.intermediate.dense.bias"),
        "{err}"
    );
    assert!(err.to_string().contains("missing"), "{err}");

    let file = tiny_model_with("mean", true, WeightType::F32, |t| {
        for x in t.iter_mut() {
            if x.name == "encoder.layer.0.attention.self.key.weight" {
                *x = TensorEntry::owned_f32(x.name.clone(), vec![16, 15], &[0.0; 240]);
            }
        }
    });
    let err = Embedder::from_model_file(file, &Options::new()).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Model);
    let msg = err.to_string();
    assert!(
        msg.contains("encoder.layer.0.attention.self.key.weight"),
        "{msg}"
    );
    assert!(
        msg.contains("[16, 15]") && msg.contains("[16, 16]"),
        "{msg}"
    );

    let file = tiny_model_with("mean", true, WeightType::F32, |t| {
        for x in t.iter_mut() {
            if x.name == "embeddings.LayerNorm.bias" {
                *x = TensorEntry::owned_bytes(x.name.clone(), DType::I32, vec![16], &[0; 64]);
            }
        }
    });
    let err = Embedder::from_model_file(file, &Options::new()).unwrap_err();
    assert!(
        err.to_string().contains("embeddings.LayerNorm.bias"),
        "{err}"
    );
    assert!(err.to_string().contains("i32"), "{err}");

    // int8 weight without its scale.
    let file = tiny_model_with("mean", true, WeightType::Int8, |t| {
        t.retain(|x| x.name != "encoder.layer.0.output.dense.weight_scale")
    });
    let err = Embedder::from_model_file(file, &Options::new()).unwrap_err();
    assert!(
        err.to_string()
            .contains("encoder.layer.0.output.dense.weight_scale"),
        "{err}"
    );
}

#[test]
fn tiny_model_input_errors() {
    let e = Embedder::from_model_file(tiny_model("mean", true, WeightType::F32), &Options::new())
        .unwrap();
    let mut out = vec![0.0f32; 32];
    let err = e.embed_ids(&[&[2, 3], &[2, 50, 3]], &mut out).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);
    assert!(err.to_string().contains("input 1"), "{err}");
    let long = vec![7u32; 41];
    assert_eq!(
        e.embed_ids(&[&long], &mut out).unwrap_err().kind(),
        ErrorKind::InvalidArgument
    );
    assert_eq!(
        e.embed_ids(&[&[2, 3]], &mut out[..15]).unwrap_err().kind(),
        ErrorKind::BufferTooSmall
    );
    // Texts longer than max_seq_length are truncated, never refused.
    let text = "w5 ".repeat(100);
    assert_eq!(e.tokenize(&text).len(), 40);
    assert_eq!(e.embed_one(&text).unwrap().len(), 16);
}

/// Throughput, latency and open time on the shared benchmark corpus with the
/// converted `.weights` file (release build, tokenization included):
/// `cargo test --release --test it engine::throughput -- --ignored --nocapture`
/// `EMBD_BENCH_ROUNDS` (default 3) rounds; the best round is reported.
/// `EMBD_BENCH_ONLY=t1,t2,b1,lat,open` restricts the parts that run,
/// `EMBD_BENCH_LIMIT` the number of corpus lines. The machine is shared, so the
/// process CPU time is printed too (for one thread it is less sensitive to load).
#[test]
#[ignore]
fn throughput() {
    let Some(path) = common::minilm_weights("throughput") else {
        return;
    };
    let corpus_path = common::shared_dir().join("bench/corpus.txt");
    let corpus = std::fs::read_to_string(&corpus_path).unwrap();
    let limit: usize = std::env::var("EMBD_BENCH_LIMIT")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(usize::MAX);
    let texts: Vec<&str> = corpus
        .lines()
        .filter(|l| !l.is_empty())
        .take(limit)
        .collect();
    let rounds: usize = std::env::var("EMBD_BENCH_ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3);
    let only = std::env::var("EMBD_BENCH_ONLY").unwrap_or_default();
    let want = |part: &str| only.is_empty() || only.split(',').any(|p| p == part);
    let load = || std::fs::read_to_string("/proc/loadavg").unwrap_or_default();

    // Open + first embedding (file in the page cache after the first open).
    if want("open") {
        for verify in [true, false] {
            let mut best = f64::INFINITY;
            let mut best_open = f64::INFINITY;
            for _ in 0..rounds.max(5) {
                let t = std::time::Instant::now();
                let e = Embedder::open(&path, &Options::new().threads(2).verify_checksums(verify))
                    .unwrap();
                let t_open = t.elapsed().as_secs_f64();
                let v = e.embed_one("The cat sits outside").unwrap();
                let dt = t.elapsed().as_secs_f64();
                assert_eq!(v.len(), 384);
                best = best.min(dt);
                best_open = best_open.min(t_open);
            }
            eprintln!(
                "open (verify_checksums={verify}): open {:.2} ms, open + first embedding {:.2} ms (load {})",
                best_open * 1e3,
                best * 1e3,
                load().trim()
            );
        }
    }

    let e1 = Embedder::open(&path, &Options::new().threads(1)).unwrap();
    let e2 = Embedder::open(&path, &Options::new().threads(2)).unwrap();
    let tokens: usize = texts.iter().map(|t| e1.tokenize(t).len()).sum();
    // 2·M·N·K over the linear layers: 6 layers x (4·h·h + 2·h·i) per token.
    let flops = 2.0 * tokens as f64 * 6.0 * (4.0 * 384.0 * 384.0 + 2.0 * 384.0 * 1536.0);
    let mut out = vec![0.0f32; texts.len() * 384];
    let cpu = || {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: `ts` is a valid, writable timespec.
        unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) };
        ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
    };
    let report = |label: &str, dt: f64, cpu_dt: f64| {
        eprintln!(
            "{label}: {:.1} texts/s, {:.0} tokens/s, {:.1} GFLOP/s ({} texts, {tokens} tokens, {:.3} s, cpu {cpu_dt:.3} s; load {})",
            texts.len() as f64 / dt,
            tokens as f64 / dt,
            flops / dt / 1e9,
            texts.len(),
            dt,
            load().trim()
        );
    };
    let mut run = |label: &str, e: &Embedder, batch: usize| {
        let (mut best, mut best_cpu) = (f64::INFINITY, f64::INFINITY);
        for _ in 0..rounds {
            let t = std::time::Instant::now();
            let c0 = cpu();
            for (s, o) in texts.chunks(batch).zip(out.chunks_mut(batch * 384)) {
                e.embed_into(s, o).unwrap();
            }
            best = best.min(t.elapsed().as_secs_f64());
            best_cpu = best_cpu.min(cpu() - c0);
        }
        report(label, best, best_cpu);
    };
    if want("b1") {
        run("1 thread, one text per call", &e1, 1);
    }
    if want("t1") {
        run("1 thread, whole corpus per call", &e1, texts.len());
    }
    if want("t2") {
        run("2 threads, whole corpus per call", &e2, texts.len());
    }
    if want("lat") {
        // A typical sentence of about 20 tokens.
        let text =
            "The quick brown fox jumps over the lazy dog while the children watch from the porch.";
        let n_tok = e2.tokenize(text).len();
        for (label, e) in [("2 threads", &e2), ("1 thread", &e1)] {
            let mut best_median = f64::INFINITY;
            for _ in 0..rounds {
                let mut times: Vec<f64> = (0..200)
                    .map(|_| {
                        let t = std::time::Instant::now();
                        e.embed_one(text).unwrap();
                        t.elapsed().as_secs_f64()
                    })
                    .collect();
                times.sort_by(f64::total_cmp);
                best_median = best_median.min(times[times.len() / 2]);
            }
            eprintln!(
                "single text ({n_tok} tokens), {label}: median {:.3} ms (load {})",
                best_median * 1e3,
                load().trim()
            );
        }
    }
}

/// The end-to-end path users take: the converted `.weights` file, raw texts in,
/// vectors out; within tolerance of sentence-transformers on every reference line,
/// and bitwise identical across batch sizes 1, 7 and 64.
#[test]
fn weights_file_texts_match_reference_in_every_batch_size() {
    let Some(path) = common::minilm_weights("weights_file_texts_match_reference") else {
        return;
    };
    let e = Embedder::open(&path, &Options::new()).unwrap();
    assert_eq!(e.dim(), 384);
    assert_eq!(e.max_seq_length(), 256);
    let lines = reference_lines();
    let texts: Vec<&str> = lines.iter().map(|l| l.text.as_str()).collect();
    let dim = e.dim();
    let mut runs = Vec::new();
    for batch in [1usize, 7, 64] {
        let mut out = vec![0.0f32; texts.len() * dim];
        for (t, o) in texts.chunks(batch).zip(out.chunks_mut(batch * dim)) {
            e.embed_into(t, o).unwrap();
        }
        runs.push(out);
    }
    assert!(same_bits(&runs[0], &runs[1]), "batch 1 vs 7 differ");
    assert!(same_bits(&runs[0], &runs[2]), "batch 1 vs 64 differ");
    let (mut worst_cos, mut worst_abs) = (1.0f64, 0.0f32);
    for (i, l) in lines.iter().enumerate() {
        let got = &runs[0][i * dim..(i + 1) * dim];
        assert_eq!(e.tokenize(&l.text), l.ids, "line {}: ids", i + 1);
        let (mut dot, mut na, mut nb) = (0f64, 0f64, 0f64);
        for (a, b) in got.iter().zip(&l.embedding) {
            dot += f64::from(*a) * f64::from(*b);
            na += f64::from(*a) * f64::from(*a);
            nb += f64::from(*b) * f64::from(*b);
            worst_abs = worst_abs.max((a - b).abs());
        }
        let cos = dot / (na.sqrt() * nb.sqrt());
        worst_cos = worst_cos.min(cos);
        assert!(cos >= 0.99999, "line {}: cosine {cos}", i + 1);
    }
    eprintln!(
        "weights file, texts: worst cosine {worst_cos:.9}, worst max abs diff {worst_abs:.3e}"
    );
    assert!(worst_abs <= 1e-4, "worst max abs diff {worst_abs}");
}

/// The model of the manual race check (`c_tests/race/run.sh`): the tiny
/// random BERT of this file, hidden 32, 2 heads, 2 layers, intermediate 64,
/// 128 positions (the kernels of one call split over the workers from 96
/// tokens), a 235-token WordPiece vocabulary, mean pooling + normalize,
/// written as EMBD to `$EMBD_RACE_MODEL`.
#[test]
#[ignore = "writes $EMBD_RACE_MODEL for c_tests/race/run.sh"]
fn write_race_model() {
    let path = std::env::var_os("EMBD_RACE_MODEL").expect("EMBD_RACE_MODEL is not set");
    const WORDS: &str = "the a an is are was of to and in on at for with by from as it this that
        cat cats sits sitting outside inside man men woman is playing plays guitar piano
        i love like you do pasta pizza new movie film so great awesome good bad classic
        mailbox return true false if object frame dog dogs run runs running fast slow
        red blue green big small house car tree sky sun moon water fire book read write
        code rust thread threads race data model vector vectors text texts one two three
        four five six seven eight nine ten hello world quick brown fox jumps over lazy
        what when where why how who not no yes all some many few more most very";
    let mut words: Vec<String> = Vec::new();
    let chars = "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~0123456789abcdefghijklmnopqrstuvwxyz";
    words.extend(chars.chars().map(String::from));
    words.extend(('a'..='z').chain('0'..='9').map(|c| format!("##{c}")));
    words.extend(["##s", "##ing", "##ed", "##er", "##ly"].map(String::from));
    words.extend(WORDS.split_whitespace().map(String::from));
    let mut seen = std::collections::HashSet::new();
    words.retain(|w| seen.insert(w.clone()));
    let tiny = TinyBert {
        words,
        ..TinyBert::new(32, 2, 64, 128)
    };
    let mut rng = Rng(20240605);
    let m = tiny.build(|name, shape| {
        let (sc, off) = tiny_scale(name);
        rng.vec(shape.iter().product(), sc, off)
    });
    embedder::formats::embd::write_file(
        &m,
        std::path::Path::new(&path),
        &Default::default(),
        &mut |_, _| {},
    )
    .unwrap();
}
