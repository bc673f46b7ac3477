//! The converter on the real all-MiniLM-L6-v2 folder: bit-identical f32 tensors,
//! every metadata key, reduced precisions, and the CLI's convert/inspect/verify.

use std::process::Command;

use embedder::convert::{convert_dtype, TargetDType};
use embedder::formats::embd::{write_file, WriteOptions};
use embedder::import::hf::HfOptions;
use embedder::{DType, FormatKind, ModelFile, ReadOptions};

use crate::common::{embd_bin, minilm_hf_dir, TempDir};

fn hf_model(test: &str) -> Option<ModelFile> {
    let dir = minilm_hf_dir(test)?;
    let opts = HfOptions {
        name: Some("all-MiniLM-L6-v2".into()),
        ..HfOptions::default()
    };
    Some(ModelFile::open_hf_dir(dir, &opts).expect("HF folder reads"))
}

#[test]
fn f32_conversion_is_bit_identical_to_safetensors() {
    let Some(src) = hf_model("f32_conversion_is_bit_identical_to_safetensors") else {
        return;
    };
    // 101 encoder tensors + the pooler's 2; position_ids is dropped.
    assert_eq!(src.tensors.len(), 103);
    let tmp = TempDir::new("convert-f32");
    let out = tmp.path().join("m.weights");
    let conv = convert_dtype(&src, TargetDType::F32).unwrap();
    write_file(&conv, &out, &WriteOptions::default(), &mut |_, _| {}).unwrap();
    let back = ModelFile::open(&out, ReadOptions::default()).unwrap();
    assert_eq!(back.format, FormatKind::Embd);
    assert_eq!(back.tensors.len(), src.tensors.len());
    for t in &src.tensors {
        let b = back
            .tensor(&t.name)
            .unwrap_or_else(|| panic!("{} missing", t.name));
        assert_eq!(b.dtype, DType::F32, "{}", t.name);
        assert_eq!(b.shape, t.shape, "{}", t.name);
        assert!(
            src.tensor_bytes(t) == back.tensor_bytes(b),
            "{} differs from the safetensors bytes",
            t.name
        );
        // Zero-copy view straight from the map.
        assert!(
            back.tensor_f32(b).is_some(),
            "{} not viewable as &[f32]",
            t.name
        );
    }
    let md = &back.metadata;
    for (k, v) in [
        ("model_name", "all-MiniLM-L6-v2"),
        ("embedding_dim", "384"),
        ("vocab_size", "30522"),
        ("num_layers", "6"),
        ("num_attention_heads", "12"),
        ("hidden_size", "384"),
        ("intermediate_size", "1536"),
        ("max_position_emb", "512"),
        ("architecture", "bert"),
        ("pooling", "mean"),
        ("normalize", "true"),
        ("max_seq_length", "256"),
        ("do_lower_case", "true"),
        ("tokenize_chinese_chars", "true"),
        ("hidden_act", "gelu"),
        ("type_vocab_size", "2"),
    ] {
        assert_eq!(md.get(k).map(String::as_str), Some(v), "metadata {k}");
    }
    assert!(md.contains_key("created_at") && md.contains_key("model_version"));
    assert!(
        !md.contains_key("strip_accents"),
        "strip_accents is null in tokenizer.json"
    );
    let eps: f32 = md["layer_norm_eps"].parse().unwrap();
    assert_eq!(eps, 1e-12);
    let v = back.vocab.as_ref().unwrap();
    assert_eq!(v.len(), 30522);
    assert_eq!(v.specials().as_array(), [0, 100, 101, 102, 103]);
}

#[test]
fn reduced_precisions_round_trip() {
    let Some(src) = hf_model("reduced_precisions_round_trip") else {
        return;
    };
    let tmp = TempDir::new("convert-dtypes");
    for (target, matrix_dtype) in [
        (TargetDType::F16, DType::F16),
        (TargetDType::BF16, DType::BF16),
        (TargetDType::Int8, DType::I8),
    ] {
        let out = tmp.path().join(format!("m-{target}.weights"));
        let conv = convert_dtype(&src, target).unwrap();
        write_file(&conv, &out, &WriteOptions::default(), &mut |_, _| {}).unwrap();
        let back = ModelFile::open(&out, ReadOptions::default()).unwrap();
        let q = back
            .tensor("encoder.layer.0.attention.self.query.weight")
            .unwrap();
        assert_eq!(q.dtype, matrix_dtype, "{target}");
        let bias = back
            .tensor("encoder.layer.0.attention.self.query.bias")
            .unwrap();
        assert_eq!(bias.dtype, DType::F32, "{target}: vectors stay f32");
        // Values stay close to the originals.
        let mut orig = src.tensor_to_f32(src.tensor(&q.name).unwrap());
        let mut vals = back.tensor_to_f32(q);
        if target == TargetDType::Int8 {
            assert_eq!(back.metadata["quantization"], "int8_per_row");
            let s = back.tensor_to_f32(back.tensor(&format!("{}_scale", q.name)).unwrap());
            // Smoothed: the int8 values quantize W / smooth (per column).
            let f = back.tensor_to_f32(back.tensor(&format!("{}_smooth", q.name)).unwrap());
            let cols = q.shape[1];
            for (i, (v, o)) in vals.iter_mut().zip(orig.iter_mut()).enumerate() {
                *o /= f[i % cols];
                let step = s[i / cols];
                *v *= step;
                // Rounding to the nearest step.
                assert!(
                    (*v - *o).abs() <= 0.5 * step * 1.0001,
                    "{target}: element {i}"
                );
            }
        }
        let max_abs = orig.iter().fold(0f32, |m, x| m.max(x.abs()));
        let worst = orig
            .iter()
            .zip(&vals)
            .fold(0f32, |m, (a, b)| m.max((a - b).abs()));
        assert!(worst <= max_abs * 0.01, "{target}: worst error {worst}");
    }
}

#[test]
fn cli_convert_inspect_verify() {
    let Some(dir) = minilm_hf_dir("cli_convert_inspect_verify") else {
        return;
    };
    let tmp = TempDir::new("cli-convert");
    let out = tmp.path().join("m.weights");
    let st = Command::new(embd_bin())
        .args(["convert"])
        .arg(&dir)
        .arg("-o")
        .arg(&out)
        .args(["--name", "all-MiniLM-L6-v2"])
        .status()
        .unwrap();
    assert!(st.success());
    let o = Command::new(embd_bin())
        .args(["inspect", "--json"])
        .arg(&out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["tensor_count"], 103);
    assert_eq!(v["vocab"]["size"], 30522);
    let shape = |name: &str| -> Vec<u64> {
        v["tensors"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == name)
            .unwrap_or_else(|| panic!("{name} not listed"))["shape"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_u64().unwrap())
            .collect()
    };
    assert_eq!(shape("embeddings.word_embeddings.weight"), [30522, 384]);
    assert_eq!(
        shape("encoder.layer.5.intermediate.dense.weight"),
        [1536, 384]
    );
    assert_eq!(shape("encoder.layer.5.output.dense.weight"), [384, 1536]);
    assert_eq!(shape("encoder.layer.0.output.LayerNorm.bias"), [384]);

    let o = Command::new(embd_bin())
        .arg("verify")
        .arg(&out)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "verify failed: {}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );

    // A flipped byte in the tensor data: verify fails with one line naming it.
    let mut bytes = std::fs::read(&out).unwrap();
    let n = bytes.len();
    bytes[n / 2] ^= 0x40;
    let bad = tmp.path().join("bad.weights");
    std::fs::write(&bad, &bytes).unwrap();
    let o = Command::new(embd_bin())
        .arg("verify")
        .arg(&bad)
        .output()
        .unwrap();
    assert!(!o.status.success());
    let msg = String::from_utf8_lossy(&o.stdout);
    assert_eq!(msg.lines().count(), 1, "{msg}");
    assert!(msg.contains("checksum"), "{msg}");
}

/// A folder of `shared/reference/architectures`, imported.
fn arch_model(name: &str) -> ModelFile {
    let dir = crate::common::shared_dir()
        .join("reference/architectures")
        .join(name);
    ModelFile::open_hf_dir(&dir, &HfOptions::default()).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn embed_bits(m: ModelFile, opts: &embedder::Options, texts: &[&str]) -> (Vec<u32>, usize) {
    let e = embedder::Embedder::from_model_file(m, opts).unwrap();
    let v = e.embed(texts).unwrap();
    // f32 layers of a file stored row by row: their packed copy, made now.
    e.prepack();
    (v.iter().map(|x| x.to_bits()).collect(), e.packed_layers().1)
}

/// `embd convert --dtype bf16|int8` (and `--dtype f32 --packed`) stores the
/// layers packed for this CPU's kernels: opening maps them
/// in place (no owned copy of the weights), runs in the file's precision by
/// default and gives the unpacked file's vectors bit for bit; other
/// precisions unpack them to the same values; a damaged packed layer is
/// refused by name.
#[test]
fn packed_files_map_in_place() {
    use embedder::convert::pack_for_run;
    use embedder::{Options, Precision};
    let texts = [
        "The quick brown fox jumps over the lazy dog.",
        "Packed weights are read in place from the mapped file.",
        "short",
    ];
    let tmp = TempDir::new("convert-packed");
    let mut models: Vec<(String, ModelFile)> = [
        "qwen3-embedding-tiny",
        "embeddinggemma-tiny",
        "modernbert-tiny",
    ]
    .iter()
    .map(|n| (n.to_string(), arch_model(n)))
    .collect();
    if let Some(m) = hf_model("packed_files_map_in_place") {
        models.push(("all-MiniLM-L6-v2".into(), m));
    }
    let read = |p: &std::path::Path| ModelFile::open(p, ReadOptions::default()).unwrap();
    for (name, src) in &models {
        for (target, precision) in [
            (TargetDType::BF16, Precision::Bf16),
            (TargetDType::Int8, Precision::Int8),
            (TargetDType::F32, Precision::F32),
        ] {
            let tag = format!("{name} {target}");
            let plain = convert_dtype(src, target).unwrap();
            let packed = pack_for_run(convert_dtype(src, target).unwrap(), target).unwrap();
            assert!(packed.metadata.contains_key("packed_layout"), "{tag}");
            let layers: Vec<&str> = packed
                .tensors
                .iter()
                .filter_map(|t| t.name.strip_suffix("_packed"))
                .collect();
            assert!(!layers.is_empty(), "{tag}");
            for l in &layers {
                assert!(plain.tensor(l).is_some(), "{tag}: {l}");
                assert!(
                    packed.tensor(l).is_none(),
                    "{tag}: {l} replaced by its packed form"
                );
            }
            let (a, b) = (
                tmp.path().join(format!("{name}-{target}.weights")),
                tmp.path().join(format!("{name}-{target}-packed.weights")),
            );
            for (m, p) in [(&plain, &a), (&packed, &b)] {
                write_file(m, p, &WriteOptions::default(), &mut |_, _| {}).unwrap();
            }
            let opts = Options::new().threads(2).prepack_weights(false);
            let (want, copied) = embed_bits(read(&a), &opts.clone().precision(precision), &texts);
            let e = embedder::Embedder::from_model_file(read(&b), &opts).unwrap();
            assert_eq!(
                e.precision(),
                precision,
                "{tag}: the file's precision by default"
            );
            let got: Vec<u32> = e
                .embed(&texts)
                .unwrap()
                .iter()
                .map(|x| x.to_bits())
                .collect();
            assert_eq!(got, want, "{tag}: packed and unpacked files differ");
            let (layers, owned) = e.packed_layers();
            assert!(layers > 0, "{tag}");
            // What stays owned: bf16 panel exponents, int8 scales and sums
            // (f32: nothing).
            assert!(
                owned * 3 < copied,
                "{tag}: {owned} bytes owned with the packed file, {copied} without"
            );
            // Another precision unpacks to the values stored: the same bits
            // as the unpacked file in that precision.
            for other in [Precision::F32, Precision::Bf16, Precision::Int8] {
                let o = opts.clone().precision(other);
                assert_eq!(
                    embed_bits(read(&b), &o, &texts).0,
                    embed_bits(read(&a), &o, &texts).0,
                    "{tag} opened in {other:?}"
                );
            }
            // A packed file is not a conversion source.
            let err = convert_dtype(&read(&b), TargetDType::F32).unwrap_err();
            assert!(err.message().contains("packed_layout"), "{tag}: {err}");
        }
    }

    // Damage, each named: a companion tensor gone, a layout of other sizes,
    // a layout this build does not know, the metadata key gone.
    let src = convert_dtype(&models[0].1, TargetDType::BF16).unwrap();
    let packed = pack_for_run(src, TargetDType::BF16).unwrap();
    let first = packed
        .tensors
        .iter()
        .find(|t| t.name.ends_with("_packed"))
        .unwrap()
        .name
        .clone();
    let rebuild = |md: std::collections::BTreeMap<String, String>, drop: &str| {
        ModelFile::new(
            packed.format,
            packed.backing().clone(),
            md,
            packed.vocab.clone(),
            packed
                .tensors
                .iter()
                .filter(|t| t.name != drop)
                .cloned()
                .collect(),
        )
        .unwrap()
    };
    let open_err =
        |m: ModelFile| match embedder::Embedder::from_model_file(m, &Options::new().threads(1)) {
            Ok(_) => panic!("a damaged packed file opened"),
            Err(e) => e.message().to_string(),
        };
    let e = open_err(rebuild(packed.metadata.clone(), &format!("{first}_exp")));
    assert!(e.contains(&format!("'{first}_exp' is missing")), "{e}");
    let e = open_err(rebuild(packed.metadata.clone(), &format!("{first}_rows")));
    assert!(e.contains(&format!("'{first}_rows' is missing")), "{e}");
    let mut md = packed.metadata.clone();
    md.insert("packed_layout".into(), "bf16-nr8-kc64".into());
    let e = open_err(rebuild(md, ""));
    assert!(
        e.contains(&format!("tensor '{first}")) && e.contains("in layout 'bf16-nr8-kc64'"),
        "{e}"
    );
    let mut md = packed.metadata.clone();
    md.insert("packed_layout".into(), "fp8-nr16".into());
    let e = open_err(rebuild(md, ""));
    assert!(e.contains("'fp8-nr16' is not a layout"), "{e}");
    let mut md = packed.metadata.clone();
    md.remove("packed_layout");
    let e = open_err(rebuild(md, ""));
    assert!(e.contains("metadata 'packed_layout' is missing"), "{e}");
}

/// The CLI: `embd convert --dtype bf16` writes packed layers (`inspect` shows
/// `packed_layout`, `verify` passes, `encode` runs in bf16 by default and
/// gives the `--unpacked` file's bf16 vectors); `--unpacked` writes rows.
#[test]
fn cli_convert_packs_unless_unpacked() {
    let dir = crate::common::shared_dir().join("reference/architectures/qwen3-embedding-tiny");
    let tmp = TempDir::new("cli-packed");
    let run = |args: &[&str]| {
        let o = Command::new(embd_bin()).args(args).output().unwrap();
        assert!(
            o.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        o.stdout
    };
    let (packed, rows) = (tmp.path().join("p.weights"), tmp.path().join("r.weights"));
    let (p, r) = (packed.to_str().unwrap(), rows.to_str().unwrap());
    let d = dir.to_str().unwrap();
    run(&["convert", d, "--dtype", "bf16", "-o", p]);
    run(&["convert", d, "--dtype", "bf16", "--unpacked", "-o", r]);
    let meta = |f: &str| -> serde_json::Value {
        let v: serde_json::Value = serde_json::from_slice(&run(&["inspect", "--json", f])).unwrap();
        v["metadata"].clone()
    };
    assert_eq!(
        meta(p)["packed_layout"]
            .as_str()
            .map(|s| s.starts_with("bf16-nr")),
        Some(true)
    );
    assert!(meta(r).get("packed_layout").is_none());
    run(&["verify", p]);
    let input = tmp.path().join("in.txt");
    std::fs::write(&input, "a packed file\nanother line of text\n").unwrap();
    let i = input.to_str().unwrap();
    let from_packed = run(&["encode", "-m", p, "--input", i]);
    let from_rows = run(&["encode", "-m", r, "--input", i, "--precision", "bf16"]);
    assert_eq!(from_packed, from_rows);
    let from_rows_f32 = run(&["encode", "-m", r, "--input", i]);
    assert_ne!(from_packed, from_rows_f32, "rows run in f32");
    // f32: row by row unless --packed; --packed gives the same vectors.
    let f32p = tmp.path().join("f32p.weights");
    let f = f32p.to_str().unwrap();
    run(&["convert", d, "--dtype", "f32", "--packed", "-o", f]);
    assert_eq!(
        meta(f)["packed_layout"]
            .as_str()
            .map(|s| s.starts_with("f32-nr")),
        Some(true)
    );
    run(&["verify", f]);
    let from_f32 = run(&["encode", "-m", f, "--input", i]);
    let from_rows_f32_file = {
        let f32r = tmp.path().join("f32r.weights");
        run(&["convert", d, "-o", f32r.to_str().unwrap()]);
        assert!(meta(f32r.to_str().unwrap()).get("packed_layout").is_none());
        run(&["encode", "-m", f32r.to_str().unwrap(), "--input", i])
    };
    assert_eq!(from_f32, from_rows_f32_file);
    // --packed is for f32 EMBD files only, and excludes --unpacked.
    for bad in [
        &["convert", d, "--dtype", "bf16", "--packed", "-o", f][..],
        &["convert", d, "--packed", "--unpacked", "-o", f][..],
    ] {
        let o = Command::new(embd_bin()).args(bad).output().unwrap();
        assert!(!o.status.success(), "{bad:?}");
        assert!(
            String::from_utf8_lossy(&o.stderr).contains("--packed"),
            "{bad:?}"
        );
    }
}
