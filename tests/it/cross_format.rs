//! The same BERT model through every container that can hold it: identical vectors
//! for the f32 containers, and the accuracy of AMB's int4/int5 block quantization
//! against sentence-transformers on the reference set.

use std::process::Command;

use embedder::formats::amb::{self, Quant, ScaleType};
use embedder::{Embedder, ModelFile, Options, ReadOptions};

use crate::common::{embd_bin, minilm_weights, read_reference, TempDir};

fn cosine(a: &[f32], b: &[f32]) -> f64 {
    let (mut d, mut na, mut nb) = (0f64, 0f64, 0f64);
    for (x, y) in a.iter().zip(b) {
        d += f64::from(*x) * f64::from(*y);
        na += f64::from(*x) * f64::from(*x);
        nb += f64::from(*y) * f64::from(*y);
    }
    d / (na.sqrt() * nb.sqrt())
}

#[test]
fn every_f32_container_gives_identical_vectors() {
    let Some(weights) = minilm_weights("every_f32_container_gives_identical_vectors") else {
        return;
    };
    let cases = read_reference("minilm_reference.jsonl");
    let texts: Vec<&str> = cases.iter().take(24).map(|c| c.text.as_str()).collect();
    let base = Embedder::open(&weights, &Options::new())
        .unwrap()
        .embed(&texts)
        .unwrap();
    let tmp = TempDir::new("cross-format");
    for (to, name) in [
        ("legacy", "m.legacy"),
        ("amb", "m.amb"),
        ("lwt", "m.lwt"),
        ("coreml-blob", "m.coreml"),
    ] {
        let out = tmp.path().join(name);
        let st = Command::new(embd_bin())
            .arg("convert")
            .arg(&weights)
            .arg("-o")
            .arg(&out)
            .args(["--to", to])
            .output()
            .unwrap();
        assert!(
            st.status.success(),
            "{to}: {}",
            String::from_utf8_lossy(&st.stderr)
        );
        let v = Command::new(embd_bin())
            .arg("verify")
            .arg(&out)
            .output()
            .unwrap();
        assert!(
            v.status.success(),
            "{to}: verify: {}",
            String::from_utf8_lossy(&v.stdout)
        );
        let got = Embedder::open(&out, &Options::new())
            .unwrap_or_else(|e| panic!("{to}: {e}"))
            .embed(&texts)
            .unwrap();
        assert!(
            got.iter()
                .zip(&base)
                .all(|(a, b)| a.to_bits() == b.to_bits()),
            "{to}: vectors differ from the .weights model"
        );
    }
}

#[test]
fn amb_block_quantization_accuracy_vs_reference() {
    let Some(weights) = minilm_weights("amb_block_quantization_accuracy_vs_reference") else {
        return;
    };
    let src = ModelFile::open(&weights, ReadOptions::default()).unwrap();
    let cases = read_reference("minilm_reference.jsonl");
    let texts: Vec<&str> = cases.iter().map(|c| c.text.as_str()).collect();
    for (bits, quant, (min_worst, min_mean)) in [
        (
            4,
            Quant::Int4Block {
                block: 32,
                scale: ScaleType::F16,
            },
            (0.80, 0.93),
        ),
        (
            5,
            Quant::Int5Block {
                block: 32,
                scale: ScaleType::F16,
            },
            (0.95, 0.98),
        ),
    ] {
        let mut bytes = Vec::new();
        amb::write(
            &src,
            &mut bytes,
            &amb::WriteOptions {
                quant,
                checksum: true,
            },
        )
        .unwrap();
        let m = ModelFile::from_bytes(&bytes, ReadOptions::default()).unwrap();
        let e = Embedder::from_model_file(m, &Options::new()).unwrap();
        let v = e.embed(&texts).unwrap();
        let dim = e.dim();
        let cos: Vec<f64> = cases
            .iter()
            .enumerate()
            .map(|(i, c)| cosine(&v[i * dim..(i + 1) * dim], c.embedding.as_ref().unwrap()))
            .collect();
        let worst = cos.iter().copied().fold(1.0, f64::min);
        let mean = cos.iter().sum::<f64>() / cos.len() as f64;
        eprintln!(
            "AMB int{bits} (block 32, f16 scales), {} bytes: cosine vs sentence-transformers mean {mean:.5}, worst {worst:.5}",
            bytes.len()
        );
        // A sanity bound, not a parity claim: block-quantized weights are lossy.
        assert!(
            worst >= min_worst && mean >= min_mean,
            "int{bits}: worst cosine {worst}, mean {mean}"
        );
    }
}
