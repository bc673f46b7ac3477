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
