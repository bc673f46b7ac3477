//! Test oracles of the model: the naive BERT forward pass over a model
//! file's tensors (f64 accumulation, the kernels' scalar oracles of
//! [`crate::kernels::reference`]) and the pooling oracle ([`pool`], defined
//! beside pooling). Tensor names come from the family table
//! ([`crate::model::arch::bert::FAMILY`]).

use crate::formats::{DType, ModelFile};
use crate::kernels::reference::{gelu, gelu_tanh, layer_norm, matmul_nt, softmax};
use crate::model::arch::bert::FAMILY;
use crate::model::config::{Activation, ModelConfig};

/// The pooling oracle: [`crate::model::pooling::pool_f64`].
pub use crate::model::pooling::pool_f64 as pool;

/// A tensor as f32 values, dequantizing `int8_per_row` weights with their
/// `.weight_scale`. Panics if absent (oracle code).
pub fn tensor(file: &ModelFile, name: &str) -> Vec<f32> {
    let t = file
        .tensor(name)
        .unwrap_or_else(|| panic!("reference: tensor {name} missing"));
    let mut v = file.tensor_to_f32(t);
    if t.dtype == DType::I8 {
        let s = file.tensor_to_f32(
            file.tensor(&format!("{name}_scale"))
                .unwrap_or_else(|| panic!("reference: {name}_scale missing")),
        );
        let cols = t.shape[1];
        for (i, x) in v.iter_mut().enumerate() {
            *x *= s[i / cols];
        }
    }
    v
}

fn linear(x: &[f32], rows: usize, file: &ModelFile, prefix: &str) -> Vec<f32> {
    let w = tensor(file, &format!("{prefix}.weight"));
    let b = tensor(file, &format!("{prefix}.bias"));
    let n = b.len();
    let k = w.len() / n;
    let mut y = matmul_nt(rows, n, k, x, &w);
    for r in 0..rows {
        for j in 0..n {
            y[r * n + j] += b[j];
        }
    }
    y
}

fn ln_rows(x: &mut [f32], width: usize, file: &ModelFile, prefix: &str, eps: f32) {
    let g = tensor(file, &format!("{prefix}.weight"));
    let b = tensor(file, &format!("{prefix}.bias"));
    for row in x.chunks_mut(width) {
        let y = layer_norm(row, &g, &b, eps);
        row.copy_from_slice(&y);
    }
}

/// The naive BERT forward pass of one sequence: the last hidden states,
/// `[ids.len() x hidden]`, token type 0, no padding.
pub fn bert_forward(file: &ModelFile, cfg: &ModelConfig, ids: &[u32]) -> Vec<f32> {
    let h = cfg.hidden_size;
    let l = ids.len();
    let n = &crate::model::names::BERT;
    let weight = |module: &str| tensor(file, &format!("{module}.weight"));
    let word = weight(n.word);
    let pos = weight(n.position);
    let typ = weight(n.token_type);
    let mut x = vec![0.0f32; l * h];
    for (i, &id) in ids.iter().enumerate() {
        for j in 0..h {
            x[i * h + j] = word[id as usize * h + j] + typ[j] + pos[i * h + j];
        }
    }
    ln_rows(&mut x, h, file, n.emb_ln, cfg.layer_norm_eps);
    let nh = cfg.num_heads;
    let d = h / nh;
    for layer in 0..cfg.num_layers {
        let module = |m: &str| FAMILY.layer_module(layer, m);
        let [q, k, v] = [0, 1, 2].map(|i| linear(&x, l, file, &module(n.qkv[i])));
        let mut ctx = vec![0.0f32; l * h];
        for head in 0..nh {
            for i in 0..l {
                let mut scores = vec![0.0f32; l];
                for (j, s) in scores.iter_mut().enumerate() {
                    let mut acc = 0.0f64;
                    for t in 0..d {
                        acc +=
                            f64::from(q[i * h + head * d + t]) * f64::from(k[j * h + head * d + t]);
                    }
                    *s = (acc / (d as f64).sqrt()) as f32;
                }
                let pr = softmax(&scores);
                for t in 0..d {
                    let mut acc = 0.0f64;
                    for j in 0..l {
                        acc += f64::from(pr[j]) * f64::from(v[j * h + head * d + t]);
                    }
                    ctx[i * h + head * d + t] = acc as f32;
                }
            }
        }
        let ao = linear(&ctx, l, file, &module(n.attn_out));
        for (a, b) in x.iter_mut().zip(&ao) {
            *a += b;
        }
        ln_rows(&mut x, h, file, &module(n.attn_ln), cfg.layer_norm_eps);
        let mut inter = linear(&x, l, file, &module(n.ffn_up));
        for v in inter.iter_mut() {
            *v = match cfg.activation {
                Activation::Gelu => gelu(*v),
                Activation::GeluTanh => gelu_tanh(*v),
                Activation::Silu => crate::kernels::ops::silu(*v),
            };
        }
        let o = linear(&inter, l, file, &module(n.ffn_down));
        for (a, b) in x.iter_mut().zip(&o) {
            *a += b;
        }
        ln_rows(&mut x, h, file, &module(n.ffn_ln), cfg.layer_norm_eps);
    }
    x
}
