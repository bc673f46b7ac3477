//! Embedding options on the real model: Matryoshka dimensions, token counts
//! and truncation flags (Rust API and CLI).

use embedder::import::hf::HfOptions;
use embedder::{Embedder, Engine, ErrorKind, Options, TextInfo};

use crate::common;

const TEXTS: [&str; 4] = [
    "The cat sits outside",
    "A man is playing guitar",
    "",
    "Matryoshka embeddings keep their meaning when cut short.",
];

fn open(test: &str, opts: Options) -> Option<Embedder> {
    let path = common::minilm_weights(test)?;
    Some(Embedder::open(path, &opts.threads(2)).unwrap())
}

fn norm(v: &[f32]) -> f64 {
    v.iter()
        .map(|&x| f64::from(x) * f64::from(x))
        .sum::<f64>()
        .sqrt()
}

#[test]
fn dimensions_cut_and_renormalize() {
    let Some(full) = open("dimensions", Options::new()) else {
        return;
    };
    let fv = full.embed(&TEXTS).unwrap();
    for k in [1usize, 8, 64, 100, 383] {
        let cut = open("dimensions", Options::new().dimensions(k)).unwrap();
        assert_eq!(cut.dim(), k);
        assert_eq!(cut.info().dim, k);
        let cv = cut.embed(&TEXTS).unwrap();
        assert_eq!(cv.len(), TEXTS.len() * k);
        for (i, row) in cv.chunks(k).enumerate() {
            // The first k components of the full vector, scaled to unit length.
            let src = &fv[i * 384..i * 384 + k];
            let n = norm(src);
            for (a, &b) in row.iter().zip(src) {
                let want = (f64::from(b) / n) as f32;
                assert!((a - want).abs() <= 2e-7, "k {k} text {i}: {a} vs {want}");
            }
            assert!((norm(row) - 1.0).abs() < 1e-6, "k {k} text {i}");
        }
    }
    // All dimensions: the very same vectors.
    let all = open("dimensions", Options::new().dimensions(384)).unwrap();
    let av = all.embed(&TEXTS).unwrap();
    assert!(av.iter().zip(&fv).all(|(a, b)| a.to_bits() == b.to_bits()));
}

#[test]
fn dimensions_without_normalization_are_a_prefix() {
    let Some(full) = open("dimensions_raw", Options::new().normalize(false)) else {
        return;
    };
    let fv = full.embed(&TEXTS).unwrap();
    let cut = open(
        "dimensions_raw",
        Options::new().normalize(false).dimensions(32),
    )
    .unwrap();
    let cv = cut.embed(&TEXTS).unwrap();
    for (i, row) in cv.chunks(32).enumerate() {
        let want = &fv[i * 384..i * 384 + 32];
        assert!(row
            .iter()
            .zip(want)
            .all(|(a, b)| a.to_bits() == b.to_bits()));
    }
    // Batch invariance holds for cut vectors too.
    for (i, t) in TEXTS.iter().enumerate() {
        let one = cut.embed_one(t).unwrap();
        assert!(one
            .iter()
            .zip(&cv[i * 32..(i + 1) * 32])
            .all(|(a, b)| a.to_bits() == b.to_bits()));
    }
}

#[test]
fn dimensions_out_of_range_is_a_clear_error() {
    let Some(path) = common::minilm_weights("dimensions_range") else {
        return;
    };
    for k in [0usize, 385, usize::MAX] {
        let e = Engine::open(&path, &Options::new().dimensions(k)).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{k}: {e}");
        assert!(e.to_string().contains("1..=384"), "{e}");
        assert!(e.to_string().contains(&k.to_string()), "{e}");
    }
}

/// `n` words that each tokenize to one id.
fn words(n: usize) -> String {
    vec!["cat"; n].join(" ")
}

#[test]
fn token_counts_and_truncation_flags() {
    let Some(e) = open("token_counts", Options::new().max_seq_length(16)) else {
        return;
    };
    assert_eq!(e.tokenize(&words(1)).len(), 3);
    // 14 words + [CLS]/[SEP] fill 16 tokens exactly: not truncated; 15 are cut.
    let texts = [words(14), words(15), String::new(), words(200), words(3)];
    let (v, info) = e.embed_with_info(&texts).unwrap();
    let want = [(16, false), (16, true), (2, false), (16, true), (5, false)];
    for (i, (inf, (tokens, truncated))) in info.iter().zip(want).enumerate() {
        assert_eq!(*inf, TextInfo { tokens, truncated }, "text {i}");
        assert_eq!(inf.tokens, e.count_tokens(&texts[i]), "text {i}");
        assert_eq!(
            inf.truncated,
            e.tokenize_full(&texts[i]).len() > 16,
            "text {i}"
        );
    }
    // The vectors do not depend on asking for the counts.
    let plain = e.embed(&texts).unwrap();
    assert!(v
        .iter()
        .zip(&plain)
        .all(|(a, b)| a.to_bits() == b.to_bits()));
    // A too short info slice is refused.
    let mut out = vec![0.0; texts.len() * e.dim()];
    let mut short = vec![TextInfo::default(); 2];
    let err = e
        .embed_into_ex(&texts, &mut out, Some(&mut short))
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::BufferTooSmall);
}

#[test]
fn token_counts_of_long_texts_beyond_the_tokenizer_prefix() {
    // A text far longer than the 16 KiB first prefix of the bounded tokenizer.
    let Some(e) = open("token_counts_long", Options::new()) else {
        return;
    };
    let exact = words(254); // 254 + 2 = 256 = max_seq_length
    let long = words(10_000); // 40 KB of one-token words
    assert!(long.len() > 32 << 10);
    let (_, info) = e.embed_with_info(&[exact.as_str(), long.as_str()]).unwrap();
    assert_eq!(
        info[0],
        TextInfo {
            tokens: 256,
            truncated: false
        }
    );
    assert_eq!(info[1].tokens, 256);
    assert!(info[1].truncated);
}

#[test]
fn cli_encode_dimensions_and_token_fields() {
    let Some(model) = common::minilm_weights("cli_options") else {
        return;
    };
    let dir = common::TempDir::new("cli-options");
    let input = dir.path().join("in.txt");
    std::fs::write(&input, format!("The cat sits outside\n{}\n", words(300))).unwrap();
    let out = std::process::Command::new(common::embd_bin())
        .args(["encode", "--threads", "1", "--dimensions", "16", "-m"])
        .arg(&model)
        .arg("--input")
        .arg(&input)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<serde_json::Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2);
    let e = open("cli_options", Options::new().dimensions(16)).unwrap();
    let want = e.embed(&["The cat sits outside"]).unwrap();
    let got: Vec<f32> = lines[0]["embedding"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap() as f32)
        .collect();
    assert_eq!(got, want);
    assert_eq!(lines[0]["tokens"], 6);
    assert_eq!(lines[0]["truncated"], false);
    assert_eq!(lines[1]["tokens"], 256);
    assert_eq!(lines[1]["truncated"], true);
    // A bad K fails with a message naming the range.
    let out = std::process::Command::new(common::embd_bin())
        .args(["encode", "--dimensions", "500", "-m"])
        .arg(&model)
        .arg("--input")
        .arg(&input)
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("1..=384"));
}

#[test]
fn output_ranges_stored_at_convert_time() {
    use embedder::convert::with_output_ranges;
    use embedder::quantize::RANGES_TENSOR;
    use embedder::{ModelFile, OutputPrecision, OutputRanges, ReadOptions};
    let Some(path) = common::minilm_weights("output_ranges") else {
        return;
    };
    let src = ModelFile::open(&path, ReadOptions::default()).unwrap();
    let calib: Vec<String> = ["a cat", "the stock market fell", "quantum physics", "rain"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let with = with_output_ranges(&src, &calib, 1).unwrap();
    assert_eq!(with.tensor(RANGES_TENSOR).unwrap().shape, [2, 384]);
    assert_eq!(with.metadata["output_ranges_texts"], "4");
    let dir = common::TempDir::new("output-ranges");
    let out = dir.path().join("m.weights");
    embedder::formats::embd::write_file(&with, &out, &Default::default(), &mut |_, _| {}).unwrap();

    // Read back: the ranges are each dimension's min and max over the corpus.
    let e = Engine::open(&out, &Options::new().threads(1)).unwrap();
    let vecs = e.embed(&calib).unwrap();
    let r = e.output_ranges().expect("stored ranges");
    for j in 0..384 {
        let col: Vec<f32> = vecs.chunks(384).map(|v| v[j]).collect();
        assert_eq!(r.min[j], col.iter().copied().fold(f32::INFINITY, f32::min));
        assert_eq!(
            r.max[j],
            col.iter().copied().fold(f32::NEG_INFINITY, f32::max)
        );
    }
    // Each calibration vector lands inside its ranges: no clamping at either end
    // beyond buckets 0 and 255, and every dimension uses both ends.
    let mut q = vec![0u8; calib.len() * 384];
    e.embed_quantized_into(&calib, OutputPrecision::Uint8, &mut q, None)
        .unwrap();
    for j in 0..384 {
        let col: Vec<u8> = q.chunks(384).map(|v| v[j]).collect();
        assert_eq!(*col.iter().min().unwrap(), 0, "dim {j}");
        assert!(*col.iter().max().unwrap() >= 254, "dim {j}");
    }

    // Cut vectors cannot use ranges of full vectors; the caller's work.
    let cut = Engine::open(&out, &Options::new().threads(1).dimensions(8)).unwrap();
    assert!(cut.output_ranges().is_none());
    let mut q8 = vec![0u8; 8];
    let err = cut
        .embed_quantized_into(&["x"], OutputPrecision::Int8, &mut q8, None)
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);
    assert!(err.to_string().contains("ranges"), "{err}");
    let given = OutputRanges::from_rows(
        &[-0.5; 8]
            .iter()
            .chain(&[0.5; 8])
            .copied()
            .collect::<Vec<_>>(),
    )
    .unwrap();
    let cut = Engine::open(
        &out,
        &Options::new()
            .threads(1)
            .dimensions(8)
            .output_ranges(given.clone()),
    )
    .unwrap();
    assert_eq!(cut.output_ranges(), Some(&given));
    cut.embed_quantized_into(&["x"], OutputPrecision::Int8, &mut q8, None)
        .unwrap();
    // Ranges of the wrong width are refused at open.
    let err = Engine::open(&out, &Options::new().output_ranges(given)).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);
    assert!(err.to_string().contains("384"), "{err}");
    // The original model has none: int8/uint8 refused before any work,
    // binary works, float32 is not a quantization.
    let plain = Engine::open(&path, &Options::new().threads(1)).unwrap();
    assert!(plain.output_ranges().is_none());
    let mut qb = vec![0u8; 48];
    plain
        .embed_quantized_into(&["x"], OutputPrecision::Ubinary, &mut qb, None)
        .unwrap();
    let v = plain.embed(&["x"]).unwrap();
    for (k, &b) in qb.iter().enumerate() {
        for bit in 0..8 {
            assert_eq!((b >> (7 - bit)) & 1 == 1, v[k * 8 + bit] > 0.0);
        }
    }
    for p in [OutputPrecision::Uint8, OutputPrecision::Float32] {
        let mut qq = vec![0u8; 384 * 4];
        let err = plain
            .embed_quantized_into(&["x"], p, &mut qq, None)
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{p}");
    }
}

/// A copy of the all-MiniLM-L6-v2 HF folder (files linked) whose
/// `config_sentence_transformers.json` has prompts and whose pooling config
/// says `include_prompt`.
fn prompt_model(dir: &std::path::Path, include_prompt: bool) -> Option<embedder::ModelFile> {
    let src = common::minilm_hf_dir("prompts")?;
    for e in std::fs::read_dir(&src).unwrap() {
        let e = e.unwrap();
        let name = e.file_name();
        if name == "1_Pooling" || name == "config_sentence_transformers.json" {
            continue;
        }
        std::os::unix::fs::symlink(e.path(), dir.join(&name)).unwrap();
    }
    std::fs::create_dir(dir.join("1_Pooling")).unwrap();
    std::fs::write(
        dir.join("1_Pooling/config.json"),
        format!(
            r#"{{"word_embedding_dimension": 384, "pooling_mode_mean_tokens": true,
                "include_prompt": {include_prompt}}}"#
        ),
    )
    .unwrap();
    std::fs::write(
        dir.join("config_sentence_transformers.json"),
        r#"{"prompts": {"query": "query: ", "passage": "passage: ", "none": ""},
            "default_prompt_name": "query"}"#,
    )
    .unwrap();
    Some(open_hf(dir))
}

fn open_hf(dir: &std::path::Path) -> embedder::ModelFile {
    embedder::ModelFile::open_hf_dir(dir, &HfOptions::default()).unwrap()
}

fn same(a: &[f32], b: &[f32]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits())
}

#[test]
fn prompts_are_prepended_as_sentence_transformers_does() {
    let dir = common::TempDir::new("prompts-incl");
    let Some(file) = prompt_model(dir.path(), true) else {
        return;
    };
    assert_eq!(file.metadata["default_prompt_name"], "query");
    assert!(!file.metadata.contains_key("pooling_include_prompt"));
    let plain = open("prompts", Options::new()).unwrap();
    let text = "The cat sits outside";
    let opts = Options::new().threads(2);
    // The default prompt applies without options.
    let e = Embedder::from_model_file(file, &opts).unwrap();
    assert_eq!(e.prompt(), "query: ");
    assert!(same(
        &e.embed(&[text]).unwrap(),
        &plain.embed(&["query: The cat sits outside"]).unwrap()
    ));
    assert_eq!(
        e.tokenize(text),
        plain.tokenize("query: The cat sits outside")
    );
    let (_, info) = e.embed_with_info(&[text]).unwrap();
    assert_eq!(info[0].tokens, 8);
    // Named, given, and turned off.
    let reopen = |o: Options| {
        let f = open_hf(dir.path());
        Embedder::from_model_file(f, &o.threads(2))
    };
    let p = reopen(Options::new().prompt_name("passage")).unwrap();
    assert!(same(
        &p.embed(&[text]).unwrap(),
        &plain.embed(&["passage: The cat sits outside"]).unwrap()
    ));
    let p = reopen(Options::new().prompt("Represent this: ")).unwrap();
    assert!(same(
        &p.embed(&[text]).unwrap(),
        &plain
            .embed(&["Represent this: The cat sits outside"])
            .unwrap()
    ));
    for o in [
        Options::new().prompt(""),
        Options::new().prompt_name("none"),
    ] {
        let p = reopen(o).unwrap();
        assert!(same(
            &p.embed(&[text]).unwrap(),
            &plain.embed(&[text]).unwrap()
        ));
    }
    // Errors name the problem.
    let err = reopen(Options::new().prompt_name("qeury")).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);
    assert!(err.to_string().contains("none, passage, query"), "{err}");
    let err = reopen(Options::new().prompt("a").prompt_name("query")).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);
    let err = Embedder::open(
        common::minilm_weights("prompts").unwrap(),
        &Options::new().prompt_name("query"),
    )
    .unwrap_err();
    assert!(err.to_string().contains("stores none"), "{err}");
}

#[test]
fn prompts_excluded_from_pooling_when_include_prompt_is_false() {
    use embedder::model::reference;
    use embedder::{ModelConfig, Pooling};
    let dir = common::TempDir::new("prompts-excl");
    let Some(file) = prompt_model(dir.path(), false) else {
        return;
    };
    assert_eq!(file.metadata["pooling_include_prompt"], "false");
    let text = "A man is playing guitar";
    let prompted = "query: A man is playing guitar";
    let cfg = ModelConfig::from_metadata(&file.metadata).unwrap();
    let reference_file = open_hf(dir.path());
    let e = Embedder::from_model_file(file, &Options::new().threads(2)).unwrap();
    let ids = e.tokenize(text);
    // sentence-transformers' prompt length: [CLS] + the prompt's 2 ids.
    let prompt_len = e.tokenize("").len() - 1;
    assert_eq!(prompt_len, 3);
    let hidden = reference::bert_forward(&reference_file, &cfg, &ids);
    let want = reference::pool(&hidden[prompt_len * 384..], 384, Pooling::Mean, true);
    let got = e.embed(&[text]).unwrap();
    for (a, b) in got.iter().zip(&want) {
        assert!((a - b).abs() < 1e-5, "{a} vs {b}");
    }
    // Not the vector with the prompt pooled in.
    let plain = open("prompts_excl", Options::new()).unwrap();
    let incl = plain.embed(&[prompted]).unwrap();
    let diff: f32 = got.iter().zip(&incl).map(|(a, b)| (a - b).abs()).sum();
    assert!(diff > 1e-2, "{diff}");
    // Batches and the per-text path agree.
    let batch = e.embed(&[text, "x", text]).unwrap();
    assert!(same(&batch[..384], &got) && same(&batch[768..], &got));
}

#[test]
fn cli_prompt_options() {
    let Some(model) = common::minilm_weights("cli_prompt") else {
        return;
    };
    let dir = common::TempDir::new("cli-prompt");
    let input = dir.path().join("in.txt");
    std::fs::write(&input, "The cat sits outside\n").unwrap();
    let run = |extra: &[&str]| {
        std::process::Command::new(common::embd_bin())
            .args(["encode", "--threads", "1", "-m"])
            .arg(&model)
            .arg("--input")
            .arg(&input)
            .args(extra)
            .output()
            .unwrap()
    };
    let out = run(&["--prompt", "query: "]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value =
        serde_json::from_str(String::from_utf8(out.stdout).unwrap().trim()).unwrap();
    let plain = open("cli_prompt", Options::new()).unwrap();
    let want = plain.embed(&["query: The cat sits outside"]).unwrap();
    let got: Vec<f32> = v["embedding"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap() as f32)
        .collect();
    assert_eq!(got, want);
    assert_eq!(v["tokens"], 8);
    let out = run(&["--prompt-name", "query"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("stores none"));
}

/// Windows of `ids` (with [CLS]/[SEP]) as `embed_windows` cuts them:
/// `body` text tokens each, consecutive windows sharing `overlap`.
fn windows_of(ids: &[u32], body: usize, overlap: usize) -> Vec<Vec<u32>> {
    let (cls, sep, raw) = (ids[0], ids[ids.len() - 1], &ids[1..ids.len() - 1]);
    let mut out = Vec::new();
    let mut start = 0;
    loop {
        let end = (start + body).min(raw.len());
        out.push([&[cls], &raw[start..end], &[sep]].concat());
        if end == raw.len() {
            return out;
        }
        start += body - overlap;
    }
}

#[test]
fn long_text_windows_are_the_token_weighted_mean_of_their_windows() {
    // max_seq_length 32: windows of 30 text tokens.
    let Some(e) = open(
        "windows",
        Options::new().max_seq_length(32).window_overlap(8),
    ) else {
        return;
    };
    let plain = open("windows", Options::new().max_seq_length(32)).unwrap();
    let long: String = (0..95)
        .map(|i| ["cat", "dog", "sun", "rain", "tree"][i % 5])
        .collect::<Vec<_>>()
        .join(" ");
    let short = "The cat sits outside";
    let ids = e.tokenize_full(&long);
    assert_eq!(ids.len(), 97);
    // 95 tokens, windows of 30 advancing by 22: 0..30, 22..52, 44..74, 66..95.
    let wins = windows_of(&ids, 30, 8);
    assert_eq!(
        wins.iter().map(Vec::len).collect::<Vec<_>>(),
        [32, 32, 32, 31]
    );
    // Each window embedded alone, then the token-weighted mean, normalized.
    let mut want = vec![0.0f64; 384];
    let total: usize = wins.iter().map(Vec::len).sum();
    for w in &wins {
        let mut v = vec![0.0f32; 384];
        plain.embed_ids(&[w.as_slice()], &mut v).unwrap();
        for (a, &x) in want.iter_mut().zip(&v) {
            *a += w.len() as f64 * f64::from(x) / total as f64;
        }
    }
    let n = want.iter().map(|x| x * x).sum::<f64>().sqrt();
    let (got, info) = e.embed_with_info(&[long.as_str(), short]).unwrap();
    for (a, b) in got[..384].iter().zip(&want) {
        assert!((f64::from(*a) - b / n).abs() < 1e-6, "{a} vs {}", b / n);
    }
    assert_eq!(
        info[0],
        TextInfo {
            tokens: 97,
            truncated: false
        }
    );
    // A text that fits is one window: exactly its usual vector.
    assert!(same(&got[384..], &plain.embed(&[short]).unwrap()));
    // Batch invariance: the long text alone gives the same vector.
    assert!(same(&e.embed(&[long.as_str()]).unwrap(), &got[..384]));
    // Without windows the text is truncated (a different vector).
    let (t, ti) = plain.embed_with_info(&[long.as_str()]).unwrap();
    assert!(ti[0].truncated && ti[0].tokens == 32);
    assert!(!same(&t, &got[..384]));
    // An overlap that leaves no progress is refused at open.
    let path = common::minilm_weights("windows").unwrap();
    let err =
        Embedder::open(&path, &Options::new().max_seq_length(32).window_overlap(30)).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);
    assert!(err.to_string().contains("less than the 30"), "{err}");
}

#[test]
fn progress_reports_and_cancels_between_chunks() {
    use embedder::{OutputPrecision, OutputRanges};
    use std::ops::ControlFlow;
    use std::sync::{Arc, Mutex};
    let texts: Vec<String> = (0..200)
        .map(|i| {
            format!(
                "sentence number {i} about {}",
                ["cats", "rain", "stocks"][i % 3]
            )
        })
        .collect();
    let Some(plain) = open("progress", Options::new()) else {
        return;
    };
    let want = plain.embed(&texts).unwrap();
    let calls = Arc::new(Mutex::new(Vec::new()));
    let stop_after = Arc::new(Mutex::new(usize::MAX));
    let (c, s) = (calls.clone(), stop_after.clone());
    let thread = std::thread::current().id();
    let e = open(
        "progress",
        Options::new().progress(move |done, total| {
            assert_eq!(
                std::thread::current().id(),
                thread,
                "called on the caller's thread"
            );
            c.lock().unwrap().push((done, total));
            if done >= *s.lock().unwrap() {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            }
        }),
    )
    .unwrap();
    // Not cancelled: increasing counts up to the total, the same vectors.
    let got = e.embed(&texts).unwrap();
    assert!(same(&got, &want));
    let seen = std::mem::take(&mut *calls.lock().unwrap());
    assert!(seen.len() >= 3, "{seen:?}");
    assert!(seen.windows(2).all(|w| w[0].0 < w[1].0), "{seen:?}");
    assert!(seen.iter().all(|&(_, t)| t == 200));
    assert_eq!(seen.last(), Some(&(200, 200)));

    // Cancelled after the first report: the rows it counted are complete.
    *stop_after.lock().unwrap() = 1;
    let mut out = vec![f32::NAN; 200 * 384];
    let err = e.embed_into(&texts, &mut out).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Cancelled, "{err}");
    let seen = std::mem::take(&mut *calls.lock().unwrap());
    assert_eq!(seen.len(), 1);
    let done = seen[0].0;
    assert!(done > 0 && done < 200, "{done}");
    assert!(same(&out[..done * 384], &want[..done * 384]));
    assert!(
        out[done * 384..].iter().all(|x| x.is_nan()),
        "no work after the stop"
    );

    // Quantized output: the complete rows are quantized too.
    let r = OutputRanges::from_rows(&[[-0.2f32; 384], [0.2; 384]].concat()).unwrap();
    let path = common::minilm_weights("progress").unwrap();
    let s2 = stop_after.clone();
    let q = Embedder::open(
        &path,
        &Options::new()
            .threads(2)
            .output_ranges(r.clone())
            .progress(move |done, _| {
                if done >= *s2.lock().unwrap() {
                    ControlFlow::Break(())
                } else {
                    ControlFlow::Continue(())
                }
            }),
    )
    .unwrap();
    let plain_q = open("progress", Options::new().output_ranges(r)).unwrap();
    let mut wantq = vec![0u8; 200 * 384];
    plain_q
        .embed_quantized_into(&texts, OutputPrecision::Uint8, &mut wantq, None)
        .unwrap();
    let mut gotq = vec![7u8; 200 * 384];
    let err = q
        .embed_quantized_into(&texts, OutputPrecision::Uint8, &mut gotq, None)
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Cancelled);
    let done: usize = err
        .to_string()
        .split("after ")
        .nth(1)
        .and_then(|s| s.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap();
    assert!(done > 0 && done < 200);
    assert_eq!(gotq[..done * 384], wantq[..done * 384]);
}
