//! Per-call options ([`CallOptions`], [`Embedder::embed_with`]) on the real
//! model: each against an independent surface (a handle opened with the same
//! option, the reference file, the raw-id path), never against numbers the
//! same path computed.

use embedder::{CallOptions, Embedder, ErrorKind, Options, Truncation};

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

fn same(a: &[f32], b: &[f32]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits())
}

fn embed_with(e: &Embedder, texts: &[&str], o: &CallOptions) -> embedder::Result<Vec<f32>> {
    let dim = e.plan(o)?.dim();
    let mut out = vec![0.0; texts.len() * dim];
    e.embed_with(texts, o, &mut out, None)?;
    Ok(out)
}

/// A text of `n` distinct-looking words, so that its first and last tokens differ.
fn long_text(n: usize) -> String {
    const W: [&str; 7] = [
        "river", "stone", "quiet", "lamp", "north", "garden", "violin",
    ];
    (0..n)
        .map(|i| W[(i * 5 + i / 7) % 7])
        .collect::<Vec<_>>()
        .join(" ")
}

#[test]
fn default_and_equivalent_options_are_bit_identical_and_match_the_reference() {
    let Some(e) = open("call_default", Options::new()) else {
        return;
    };
    let plain = e.embed(&TEXTS).unwrap();
    assert!(same(
        &embed_with(&e, &TEXTS, &CallOptions::default()).unwrap(),
        &plain
    ));
    // Options equal to the model's own take the planned path, and agree to the bit.
    let explicit = CallOptions {
        normalize: Some(true),
        dimensions: Some(384),
        prompt: Some(String::new()),
        ..CallOptions::default()
    };
    assert!(same(&embed_with(&e, &TEXTS, &explicit).unwrap(), &plain));
    // And with the reference vectors of sentence-transformers.
    let cases = common::read_reference("minilm_reference.jsonl");
    let texts: Vec<&str> = cases.iter().take(40).map(|c| c.text.as_str()).collect();
    let got = embed_with(&e, &texts, &explicit).unwrap();
    for (c, v) in cases.iter().zip(got.chunks_exact(384)) {
        let want = c.embedding.as_ref().unwrap();
        let cos = embedder::cosine_similarity(v, want);
        assert!(cos > 0.9999, "{:?}: cosine {cos}", c.text);
    }
}

#[test]
fn normalize_and_dimensions_per_call_match_handles_opened_with_them() {
    let Some(e) = open("call_norm", Options::new()) else {
        return;
    };
    let raw = open("call_norm", Options::new().normalize(false)).unwrap();
    let o = CallOptions {
        normalize: Some(false),
        ..CallOptions::default()
    };
    assert!(same(
        &embed_with(&e, &TEXTS, &o).unwrap(),
        &raw.embed(&TEXTS).unwrap()
    ));
    for k in [1, 64, 256] {
        let cut = open("call_dims", Options::new().dimensions(k)).unwrap();
        let o = CallOptions {
            dimensions: Some(k),
            ..CallOptions::default()
        };
        assert_eq!(e.plan(&o).unwrap().dim(), k);
        assert!(same(
            &embed_with(&e, &TEXTS, &o).unwrap(),
            &cut.embed(&TEXTS).unwrap()
        ));
        let raw_cut = open("call_dims", Options::new().dimensions(k).normalize(false)).unwrap();
        let o = CallOptions {
            dimensions: Some(k),
            normalize: Some(false),
            ..CallOptions::default()
        };
        assert!(same(
            &embed_with(&e, &TEXTS, &o).unwrap(),
            &raw_cut.embed(&TEXTS).unwrap()
        ));
    }
    // A handle opened with a cut still answers the full size per call.
    let cut = open("call_dims", Options::new().dimensions(64)).unwrap();
    let o = CallOptions {
        dimensions: Some(384),
        ..CallOptions::default()
    };
    assert!(same(
        &embed_with(&cut, &TEXTS, &o).unwrap(),
        &e.embed(&TEXTS).unwrap()
    ));
    for bad in [0, 385] {
        let o = CallOptions {
            dimensions: Some(bad),
            ..CallOptions::default()
        };
        let err = e.plan(&o).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidArgument);
        assert!(err.to_string().contains("1..=384"), "{err}");
    }
}

#[test]
fn prompts_per_call_match_handles_opened_with_them() {
    let Some(e) = open("call_prompt", Options::new()) else {
        return;
    };
    let opened = open("call_prompt", Options::new().prompt("query: ")).unwrap();
    let o = CallOptions {
        prompt: Some("query: ".into()),
        ..CallOptions::default()
    };
    assert!(same(
        &embed_with(&e, &TEXTS, &o).unwrap(),
        &opened.embed(&TEXTS).unwrap()
    ));
    // The opened prompt turned off for one call.
    let off = CallOptions {
        prompt: Some(String::new()),
        normalize: Some(true),
        ..CallOptions::default()
    };
    assert!(same(
        &embed_with(&opened, &TEXTS, &off).unwrap(),
        &e.embed(&TEXTS).unwrap()
    ));
    // The model stores no prompts: a name is refused, naming that.
    let o = CallOptions {
        prompt_name: Some("query".into()),
        ..CallOptions::default()
    };
    let err = e.plan(&o).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);
    assert!(err.to_string().contains("stores none"), "{err}");
    let both = CallOptions {
        prompt: Some("a".into()),
        prompt_name: Some("b".into()),
        ..CallOptions::default()
    };
    assert_eq!(
        e.plan(&both).unwrap_err().kind(),
        ErrorKind::InvalidArgument
    );
}

#[test]
fn truncation_keeps_either_end_or_refuses() {
    let Some(e) = open("call_trunc", Options::new()) else {
        return;
    };
    let long = long_text(700);
    let texts = [TEXTS[0], long.as_str()];
    let full = e.tokenize_full(&long);
    let max = e.max_seq_length();
    assert_eq!(max, 256);
    assert!(full.len() > max, "{}", full.len());
    // Right: what the model does by default.
    let right = CallOptions {
        truncation: Truncation::Right,
        normalize: Some(true),
        ..CallOptions::default()
    };
    let mut info = [embedder::TextInfo::default(); 2];
    let mut out = vec![0.0; 2 * 384];
    e.embed_with(&texts, &right, &mut out, Some(&mut info))
        .unwrap();
    assert!(same(&out, &e.embed(&texts).unwrap()));
    assert_eq!((info[1].tokens, info[1].truncated), (max, true));
    assert!(!info[0].truncated);
    // Left: [CLS], the last max - 2 ids of the text, [SEP], as the raw-id path embeds them.
    let left = CallOptions {
        truncation: Truncation::Left,
        ..CallOptions::default()
    };
    e.embed_with(&texts, &left, &mut out, Some(&mut info))
        .unwrap();
    let mut kept = vec![full[0]];
    kept.extend_from_slice(&full[full.len() - 1 - (max - 2)..full.len() - 1]);
    kept.push(*full.last().unwrap());
    assert_eq!(kept.len(), max);
    let mut want = vec![0.0; 384];
    e.embed_ids(&[&kept], &mut want).unwrap();
    assert!(same(&out[384..], &want));
    assert!(same(&out[..384], &e.embed(&[TEXTS[0]]).unwrap()));
    assert_eq!((info[1].tokens, info[1].truncated), (max, true));
    let right_vec = e.embed(&[long.as_str()]).unwrap();
    assert!(!same(&right_vec, &want), "left and right truncation differ");
    // Refuse: a clear error naming the text and its length.
    let refuse = CallOptions {
        truncation: Truncation::Refuse,
        ..CallOptions::default()
    };
    let err = e.embed_with(&texts, &refuse, &mut out, None).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::LimitExceeded);
    let msg = err.to_string();
    assert!(
        msg.contains("text 1") && msg.contains(&full.len().to_string()),
        "{msg}"
    );
    // A text that fits passes under every mode.
    e.embed_with(&texts[..1], &refuse, &mut out, None).unwrap();
    assert!(same(&out[..384], &e.embed(&[TEXTS[0]]).unwrap()));
}

#[test]
fn raw_ids_and_planned_batches() {
    let Some(e) = open("call_ids", Options::new()) else {
        return;
    };
    let plan = e.plan(&CallOptions::default()).unwrap();
    // Token ids of the reference (without [CLS]/[SEP]) embed as the text does.
    let cases = common::read_reference("minilm_reference.jsonl");
    let mut seqs = Vec::new();
    for c in cases.iter().take(12) {
        let raw = &c.input_ids[1..c.input_ids.len() - 1];
        let (ids, info) = e.wrap_ids(raw, Truncation::Right).unwrap();
        assert_eq!(ids, c.input_ids);
        assert_eq!(info.tokens, ids.len());
        let (t, _) = e.tokenize_planned(&c.text, &plan).unwrap();
        assert_eq!(t, c.input_ids, "{:?}", c.text);
        seqs.push(ids);
    }
    // One planned call over all of them is bit-identical to lone calls.
    let refs: Vec<&[u32]> = seqs.iter().map(Vec::as_slice).collect();
    let mut all = vec![0.0; refs.len() * 384];
    e.embed_planned(&refs, &plan, &mut all).unwrap();
    for (s, v) in refs.iter().zip(all.chunks_exact(384)) {
        let mut one = vec![0.0; 384];
        e.embed_planned(&[s], &plan, &mut one).unwrap();
        assert!(same(v, &one));
    }
    // Ids out of range are refused, naming the id.
    let err = e.wrap_ids(&[7, 30522], Truncation::Right).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);
    assert!(err.to_string().contains("30522"), "{err}");
    let err = e
        .wrap_ids(&vec![1000; 600], Truncation::Refuse)
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::LimitExceeded);
    let (ids, info) = e.wrap_ids(&vec![1000; 600], Truncation::Left).unwrap();
    assert_eq!((ids.len(), info.truncated), (256, true));
}

/// `embd serve` runs the `embd-serve` next to `embd` with the same arguments,
/// and says how to build it when it is missing.
/// Mean of `rows` vectors of `dim` floats, L2-normalized, in f64.
fn mean_normalized(v: &[f32], dim: usize) -> Vec<f32> {
    let rows = v.len() / dim;
    let mut m = vec![0.0f64; dim];
    for r in v.chunks_exact(dim) {
        for (a, &x) in m.iter_mut().zip(r) {
            *a += f64::from(x);
        }
    }
    let norm = m.iter().map(|x| x * x).sum::<f64>().sqrt();
    m.iter()
        .map(|x| (x / rows as f64 / (norm / rows as f64)) as f32)
        .collect()
}

#[test]
fn token_vectors_pool_to_the_reference_and_are_batch_invariant() {
    let Some(e) = open("call_tokens", Options::new()) else {
        return;
    };
    // all-MiniLM-L6-v2 mean-pools every token ([CLS] and [SEP] included) and
    // normalizes: the mean of the un-pooled vectors must give the
    // sentence-transformers reference, with one vector per reference id.
    let cases = common::read_reference("minilm_reference.jsonl");
    let cases: Vec<_> = cases.iter().take(60).collect();
    let texts: Vec<&str> = cases.iter().map(|c| c.text.as_str()).collect();
    let mut info = vec![embedder::TextInfo::default(); texts.len()];
    let tv = e
        .embed_tokens_with(&texts, &CallOptions::default(), Some(&mut info))
        .unwrap();
    let mut worst = 0.0f32;
    for ((c, v), i) in cases.iter().zip(&tv).zip(&info) {
        assert_eq!(v.len(), c.input_ids.len() * 384, "{:?}", c.text);
        assert_eq!(i.tokens, c.input_ids.len());
        let want = c.embedding.as_ref().unwrap();
        let got = mean_normalized(v, 384);
        for (a, b) in got.iter().zip(want) {
            worst = worst.max((a - b).abs());
        }
    }
    assert!(worst <= 1e-5, "max abs diff {worst} to the reference");
    // Not normalized by default (the Normalize module is for sentences).
    let first = &tv[0][..384];
    let norm: f32 = first.iter().map(|x| x * x).sum::<f32>().sqrt();
    assert!(
        (norm - 1.0).abs() > 1e-3,
        "token vectors came out normalized"
    );
    // Each text's vectors are those it gets alone, in any batch and order.
    for k in [0usize, 7, 33] {
        let alone = e
            .embed_tokens_with(&[texts[k]], &CallOptions::default(), None)
            .unwrap();
        assert!(same(&alone[0], &tv[k]), "text {k} differs alone");
    }
    // The planned path (the server's) gives the same vectors, concatenated.
    let plan = e.plan_tokens(&CallOptions::default()).unwrap();
    assert!(plan.token_vectors());
    let seqs: Vec<Vec<u32>> = texts[..5]
        .iter()
        .map(|t| e.tokenize_planned(t, &plan).unwrap().0)
        .collect();
    let refs: Vec<&[u32]> = seqs.iter().map(Vec::as_slice).collect();
    let mut flat = vec![0.0f32; plan.rows(&refs) * plan.dim()];
    e.embed_planned(&refs, &plan, &mut flat).unwrap();
    assert!(same(&flat, &tv[..5].concat()));
    let err = e.embed_planned(&refs, &plan, &mut flat[..10]).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::BufferTooSmall);
}

#[test]
fn token_vectors_take_dimensions_normalize_and_prompts() {
    let Some(e) = open("call_tokens_opts", Options::new()) else {
        return;
    };
    let full = e
        .embed_tokens_with(&TEXTS, &CallOptions::default(), None)
        .unwrap();
    let cut = CallOptions {
        dimensions: Some(64),
        normalize: Some(true),
        ..CallOptions::default()
    };
    let short = e.embed_tokens_with(&TEXTS, &cut, None).unwrap();
    for (f, s) in full.iter().zip(&short) {
        assert_eq!(s.len() / 64, f.len() / 384);
        for (fr, sr) in f.chunks_exact(384).zip(s.chunks_exact(64)) {
            let n: f64 = fr[..64]
                .iter()
                .map(|&x| f64::from(x).powi(2))
                .sum::<f64>()
                .sqrt();
            for (a, b) in fr[..64].iter().zip(sr) {
                assert!((f64::from(*a) / n - f64::from(*b)).abs() < 1e-6);
            }
        }
    }
    // A prompt's tokens are token vectors too: its ids come first.
    let p = CallOptions {
        prompt: Some("query: ".into()),
        ..CallOptions::default()
    };
    let with = e.embed_tokens_with(&TEXTS[..1], &p, None).unwrap();
    let ids = e
        .tokenize_planned(TEXTS[0], &e.plan_tokens(&p).unwrap())
        .unwrap()
        .0;
    assert_eq!(with[0].len(), ids.len() * 384);
    assert_eq!(ids.len(), e.tokenize(&format!("query: {}", TEXTS[0])).len());
    // Refusals are named.
    let bad = CallOptions {
        dimensions: Some(0),
        ..CallOptions::default()
    };
    assert_eq!(
        e.embed_tokens_with(&TEXTS, &bad, None).unwrap_err().kind(),
        ErrorKind::InvalidArgument
    );
    let w = open("call_tokens_windows", Options::new().window_overlap(16)).unwrap();
    let err = w
        .embed_tokens_with(&TEXTS, &CallOptions::default(), None)
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unsupported);
    assert!(err.message().contains("window"), "{err}");
}

#[test]
fn cli_serve_execs_the_sibling_server_binary() {
    use std::os::unix::fs::PermissionsExt;
    let dir = common::TempDir::new("serve-cli");
    let embd = dir.path().join("embd");
    std::fs::copy(env!("CARGO_BIN_EXE_embd"), &embd).unwrap();
    let out = std::process::Command::new(&embd)
        .args(["serve", "-m", "model.weights", "--port", "0"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("embd-serve") && err.contains("cargo build --release -p embd-server"),
        "{err}"
    );
    // A stand-in server that prints its arguments: they arrive unchanged.
    let fake = dir.path().join("embd-serve");
    std::fs::write(&fake, "#!/bin/sh\nprintf '%s|' \"$@\"\nexit 7\n").unwrap();
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = std::process::Command::new(&embd)
        .args(["serve", "-m", "a=x y.weights", "--help", "--port", "0"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(7));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "-m|a=x y.weights|--help|--port|0|"
    );
}

#[test]
fn cli_encode_token_vectors() {
    let Some(path) = common::minilm_weights("cli_token_vectors") else {
        return;
    };
    let cases = common::read_reference("minilm_reference.jsonl");
    let cases: Vec<_> = cases
        .iter()
        .filter(|c| !c.text.contains(['\n', '\r']))
        .take(12)
        .collect();
    let dir = common::TempDir::new("cli-token-vectors");
    let input = dir.path().join("texts.jsonl");
    let lines: Vec<String> = cases
        .iter()
        .map(|c| serde_json::json!({"text": c.text}).to_string())
        .collect();
    std::fs::write(&input, lines.join("\n") + "\n").unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_embd"))
        .args([
            "encode",
            "--token-vectors",
            "--jsonl",
            "--threads",
            "2",
            "-m",
        ])
        .arg(&path)
        .arg("--input")
        .arg(&input)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let rows: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(rows.len(), cases.len());
    for (r, c) in rows.iter().zip(&cases) {
        let tv: Vec<f32> = r["token_embeddings"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|v| {
                v.as_array()
                    .unwrap()
                    .iter()
                    .map(|x| x.as_f64().unwrap() as f32)
            })
            .collect();
        assert_eq!(r["tokens"], c.input_ids.len());
        assert_eq!(tv.len(), c.input_ids.len() * 384);
        let got = mean_normalized(&tv, 384);
        for (a, b) in got.iter().zip(c.embedding.as_ref().unwrap()) {
            assert!((a - b).abs() <= 1e-5, "{:?}", c.text);
        }
    }
    // Ragged output has no npy form: refused by name.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_embd"))
        .args(["encode", "--token-vectors", "--format", "npy", "-m"])
        .arg(&path)
        .arg("--input")
        .arg(&input)
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--format npy"));
}
