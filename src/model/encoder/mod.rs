//! The encoder of every registered family (BERT, MPNet, RoBERTa, XLM-R,
//! ModernBERT: see [`crate::model::arch`]): the embeddings, the layers built
//! from the shared blocks of [`crate::model::blocks`] as the family
//! describes them, each run by the family's own `forward`, and the final
//! norm. Weight loading checks every tensor exactly. The encoder gives the
//! last hidden states of every token; what they become (pooled vectors,
//! sparse weights, token vectors, logits) is the output heads' business
//! ([`crate::model::outputs`]).
//!
//! # Packed batches
//!
//! A chunk of sequences is laid out contiguously, `[total_tokens x hidden]`,
//! without padding. Dense layers run once over all tokens; attention runs per
//! sequence and head over that sequence's rows only, so no mask is needed and
//! no work is spent on padding. Every row's arithmetic is independent of the
//! other rows (see [`crate::kernels::gemm`]), so a text gets bit-identical
//! results alone or in any batch, and with any [`Par`] setting.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use rayon::prelude::*;

use crate::error::{Error, ErrorKind, Result};
use crate::formats::ModelFile;
use crate::kernels::attention::Band;
use crate::kernels::{attention as attention_kernel, Par};
use crate::model::arch::tensors::{Dims, Glu, NormTensor};
use crate::model::arch::{Family, RelativePositions};
use crate::model::blocks::attention::{Attention, AttentionScratch, Heads, RelativeBias};
use crate::model::blocks::disentangled::Disentangled;
use crate::model::blocks::embeddings::{Embeddings, EmbeddingsSpec};
use crate::model::blocks::mlp::Mlp;
use crate::model::blocks::norm::Norm;
use crate::model::blocks::rope::Rope;
use crate::model::blocks::{Layer, LayerRun};
use crate::model::config::ModelConfig;
use crate::model::linear::{self, Linear, LinearScratch};
use crate::model::param::{load_param, Param};
use crate::model::precision::{Calibration, LayerPrecision, Product};
use crate::threads::JoinOnDrop;

pub use crate::model::blocks::{Stage, Trace};

/// Tells the background packer to stop (the model is being dropped).
#[derive(Default)]
struct PackStore {
    stop: AtomicBool,
}

/// A loaded encoder (any registered family).
///
/// # Pre-packed weights
///
/// The kernels read weight matrices as panels in their own layout. Until a
/// layer's weights are packed ([`Encoder::prepack`]), each product packs
/// the panels it needs on the fly, which costs as much as the arithmetic for
/// short inputs; after, products read the packed copy in place. The values
/// are the same bit for bit either way (only the layout of the weights
/// changes), so a result never depends on whether, or when, packing happened.
pub struct Encoder {
    hidden: usize,
    /// Every layer's attention shape.
    heads: Heads,
    /// The up projection's output width (`2 x inter` when gated).
    up_width: usize,
    /// Whether the feed-forward is gated (its up product goes through the
    /// `wide` buffer).
    gated: bool,
    inter: usize,
    max_position: usize,
    plan: LayerPrecision,
    family: &'static Family,
    embeddings: Embeddings,
    /// The norm after the last layer, if the family has one.
    final_norm: Option<Norm>,
    /// MPNet's relative position bias ([`RelativePositions::Buckets`]).
    rel_bias: Option<RelativeBias>,
    /// DeBERTa-v2's relative embeddings ([`RelativePositions::Disentangled`]).
    disentangled: Option<Disentangled>,
    layers: Arc<Vec<Layer>>,
    packs: Arc<PackStore>,
    /// The background packer; joined (after `stop` is set) when the model is
    /// dropped.
    packer: JoinOnDrop,
    mapped: usize,
    owned: usize,
}

impl Drop for Encoder {
    fn drop(&mut self) {
        // The packer stops after the layer it is on; dropping `packer` then
        // waits for it.
        self.packs.stop.store(true, Ordering::Relaxed);
    }
}

/// Scratch memory for one forward call, reused across layers and calls. Its
/// buffers only grow; their size is set by the largest chunk processed.
#[derive(Default)]
pub struct Workspace {
    hidden: Vec<f32>,
    normed: Vec<f32>,
    wide: Vec<f32>,
    qkv: Vec<f32>,
    ctx: Vec<f32>,
    inter: Vec<f32>,
    scores: Vec<f32>,
    heads: Vec<f32>,
    relative: Vec<f32>,
    lin: LinearScratch,
}

impl Workspace {
    /// Bytes currently held.
    pub fn bytes(&self) -> usize {
        4 * (self.hidden.len()
            + self.normed.len()
            + self.wide.len()
            + self.qkv.len()
            + self.ctx.len()
            + self.inter.len()
            + self.scores.len()
            + self.heads.len()
            + self.relative.len())
            + self.lin.bytes()
    }
}

/// The sequences of one forward pass: ids, per-token token types when the
/// model reads them (cross-encoder pairs; `None`: type 0 everywhere), and
/// per-sequence attention-key limits (`keys[s]`: only the first `keys[s]`
/// tokens of sequence `s` are attended to, as ColBERT's query expansion
/// wants; `None`: all of them).
#[derive(Debug, Clone, Copy, Default)]
pub struct Seqs<'a> {
    /// Each sequence's ids.
    pub ids: &'a [&'a [u32]],
    /// Each sequence's token types, as long as its ids.
    pub types: Option<&'a [&'a [u32]]>,
    /// Each sequence's attention-key limit.
    pub keys: Option<&'a [usize]>,
}

impl<'a> Seqs<'a> {
    /// Sequences of token type 0, every token a key.
    pub fn untyped(ids: &'a [&'a [u32]]) -> Self {
        Seqs {
            ids,
            ..Seqs::default()
        }
    }

    /// Sequences with a token type per token (`types[i]` as long as `ids[i]`).
    pub fn typed(ids: &'a [&'a [u32]], types: &'a [&'a [u32]]) -> Self {
        Seqs {
            ids,
            types: Some(types),
            keys: None,
        }
    }

    /// The same sequences with attention-key limits.
    pub fn with_keys(self, keys: Option<&'a [usize]>) -> Self {
        Seqs { keys, ..self }
    }

    /// Sequences.
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    /// No sequences.
    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// Tokens in all sequences.
    pub fn tokens(&self) -> usize {
        self.ids.iter().map(|s| s.len()).sum()
    }

    /// Sequences `r`.
    pub fn slice(&self, r: std::ops::Range<usize>) -> Self {
        Seqs {
            ids: &self.ids[r.clone()],
            types: self.types.map(|t| &t[r.clone()]),
            keys: self.keys.map(|k| &k[r]),
        }
    }
}

/// Buffers an output head may use after the encoder ran (parts of the
/// workspace the encoder no longer needs), kept between calls.
pub struct HeadScratch<'a> {
    /// Any size: grow it with [`HeadScratch::floats`].
    pub buf: &'a mut Vec<f32>,
    /// The products' scratch.
    pub lin: &'a mut LinearScratch,
}

impl HeadScratch<'_> {
    /// The same buffers, for another head.
    pub fn reborrow(&mut self) -> HeadScratch<'_> {
        HeadScratch {
            buf: &mut *self.buf,
            lin: &mut *self.lin,
        }
    }

    /// `buf` with at least `n` floats, and the products' scratch.
    pub fn floats(&mut self, n: usize) -> (&mut [f32], &mut LinearScratch) {
        grow(self.buf, n);
        (&mut self.buf[..n], &mut *self.lin)
    }
}

fn grow(v: &mut Vec<f32>, n: usize) {
    if v.len() < n {
        v.resize(n, 0.0);
    }
}

/// One dense product of an encoder layer: its weight tensors (side by side
/// along the output dimension), `[widths[s] x k]` each.
pub struct DenseLayer {
    /// Which product.
    pub product: Product,
    /// HF tensor names of the weights.
    pub weights: Vec<String>,
    /// Output features of each weight tensor.
    pub widths: Vec<usize>,
    /// Input features.
    pub k: usize,
}

/// The sizes of `cfg`'s tensor dimensions.
fn dims(cfg: &ModelConfig) -> Dims {
    let heads = cfg.heads();
    Dims {
        hidden: cfg.hidden_size,
        inter: cfg.intermediate_size,
        query: heads.q * heads.d,
        key_value: heads.kv * heads.d,
    }
}

/// The dense products of layer `l`, in the order of the forward pass, as
/// the family's [`crate::model::arch::LayerTensors`] list them.
///
/// # Panics
/// If `cfg.architecture` is not a registered family (a validated config's
/// always is).
pub fn dense_layers(cfg: &ModelConfig, l: usize) -> [DenseLayer; 4] {
    let f = cfg.family().expect("a registered architecture");
    let dims = dims(cfg);
    (f.layer)(l).dense().map(|(product, d)| DenseLayer {
        product,
        weights: d
            .modules
            .iter()
            .map(|m| f.layer_tensor(l, m.name, "weight"))
            .collect(),
        widths: d.widths(&dims),
        k: dims.of(d.input),
    })
}

/// The bias tensor of a weight tensor (`x.weight` -> `x.bias`).
fn bias_name(weight: &str) -> String {
    format!("{}.bias", weight.strip_suffix(".weight").unwrap_or(weight))
}

/// Name and exact shape of every tensor [`Encoder::load`] requires for
/// `cfg`, in the canonical order (embeddings, then each layer, then the
/// final norm and the relative position tensors): the family's
/// [`crate::model::arch::tensors`] with the model's sizes. Writers and test
/// generators build models from this list.
///
/// # Panics
/// If `cfg.architecture` is not a registered family (a validated config's
/// always is).
pub fn required_tensors(cfg: &ModelConfig) -> Vec<(String, Vec<usize>)> {
    let f = cfg.family().expect("a registered architecture");
    let e = &f.embeddings;
    let h = cfg.hidden_size;
    let mut out = vec![(format!("{}.weight", e.word), vec![cfg.vocab_size, h])];
    if let Some(p) = e.position {
        out.push((format!("{p}.weight"), vec![cfg.max_position, h]));
    }
    if let Some(t) = e.token_type {
        out.push((format!("{t}.weight"), vec![cfg.type_vocab_size, h]));
    }
    let norm = |out: &mut Vec<(String, Vec<usize>)>, module: String, t: &NormTensor| {
        out.push((format!("{module}.weight"), vec![h]));
        if t.bias {
            out.push((format!("{module}.bias"), vec![h]));
        }
    };
    if let Some(t) = &e.norm {
        norm(&mut out, t.name.to_string(), t);
    }
    for l in 0..cfg.num_layers {
        let t = (f.layer)(l);
        let layer_norm = |out: &mut Vec<(String, Vec<usize>)>, n: &NormTensor| {
            norm(out, f.layer_module(l, n.name), n)
        };
        for (d, (_, spec)) in dense_layers(cfg, l).iter().zip(t.dense()) {
            for (w, &n) in d.weights.iter().zip(&d.widths) {
                out.push((w.clone(), vec![n, d.k]));
                if spec.bias {
                    out.push((bias_name(w), vec![n]));
                }
            }
            match d.product {
                Product::Qkv => {
                    for m in t.q_norm.iter().chain(t.k_norm.iter()) {
                        out.push((
                            format!("{}.weight", f.layer_module(l, m)),
                            vec![cfg.head_dim()],
                        ));
                    }
                }
                Product::AttnOut => {
                    for n in t.attn_norm.iter().chain(t.post_attn_norm.iter()) {
                        layer_norm(&mut out, n);
                    }
                }
                Product::FfnDown => {
                    for n in std::iter::once(&t.mlp_norm).chain(t.post_mlp_norm.iter()) {
                        layer_norm(&mut out, n);
                    }
                }
                Product::FfnUp => {}
            }
        }
    }
    if let Some(t) = &f.final_norm {
        norm(&mut out, t.name.to_string(), t);
    }
    match f.relative {
        RelativePositions::Buckets { table } => {
            out.push((table.to_string(), vec![cfg.relative_buckets, cfg.num_heads]));
        }
        RelativePositions::Disentangled { rows, norm: n } => {
            out.push((rows.to_string(), vec![2 * cfg.relative_span(), h]));
            norm(&mut out, n.name.to_string(), &n);
        }
        RelativePositions::None | RelativePositions::Rotary => {}
    }
    out
}

/// The rotary tables of a model: global layers', and local layers' where
/// their base differs.
struct Ropes {
    global: Option<Arc<Rope>>,
    local: Option<Arc<Rope>>,
}

impl Ropes {
    fn new(cfg: &ModelConfig, family: &Family) -> Ropes {
        if !family.rotary() {
            return Ropes {
                global: None,
                local: None,
            };
        }
        let d = cfg.head_dim();
        // Tables for the inputs this model runs (`max_seq_length`), not the
        // whole position range (32,768 for Qwen3: 16 MB and 50 ms at open).
        let positions = cfg.max_seq_length.min(cfg.max_position);
        let factor = cfg.rope_linear_factor;
        let global = Arc::new(Rope::scaled(cfg.rope_theta, factor, d, positions));
        let local = if (0..cfg.num_layers).any(|l| cfg.is_local_layer(l)) {
            if cfg.local_rope_theta == cfg.rope_theta {
                Arc::clone(&global)
            } else {
                Arc::new(Rope::scaled(cfg.local_rope_theta, factor, d, positions))
            }
        } else {
            Arc::clone(&global)
        };
        Ropes {
            global: Some(global),
            local: Some(local),
        }
    }
}

/// Loads layer `l` of `family`: the tensors its
/// [`crate::model::arch::LayerTensors`] list, each shape checked.
#[allow(clippy::too_many_arguments)]
fn load_layer(
    file: &Arc<ModelFile>,
    cfg: &ModelConfig,
    family: &'static Family,
    l: usize,
    plan: LayerPrecision,
    calib: Option<&Calibration>,
    int8: bool,
    ropes: &Ropes,
) -> Result<Layer> {
    let t = (family.layer)(l);
    let h = cfg.hidden_size;
    let heads = cfg.heads();
    let p = |name: &str, shape: &[usize]| load_param(file, name, shape, int8);
    let dense = dense_layers(cfg, l);
    let has_bias = t.dense().map(|(_, d)| d.bias);
    // The biases of product `i`, its modules' side by side.
    let biases = |i: usize| -> Result<Option<Vec<f32>>> {
        let d = &dense[i];
        if !has_bias[i] {
            return Ok(None);
        }
        let mut b = Vec::with_capacity(d.widths.iter().sum());
        for (w, &n) in d.weights.iter().zip(&d.widths) {
            b.extend_from_slice(p(&bias_name(w), &[n])?.as_slice());
        }
        Ok(Some(b))
    };
    // The bias of a one-module product `i`, read in place.
    let bias = |i: usize| -> Result<Option<Param>> {
        match has_bias[i] {
            true => Ok(Some(p(&bias_name(&dense[i].weights[0]), &[h])?)),
            false => Ok(None),
        }
    };
    let (qkv_b, up_b) = (biases(0)?, biases(2)?);
    let (out_b, down_b) = (bias(1)?, bias(3)?);
    let [qkv, out, up, down] = dense.map(|d| {
        let prec = plan.of(d.product);
        let amax = calib
            .and_then(|c| c.layers.get(l))
            .map(|a| a[d.product as usize].as_slice())
            .filter(|a| a.len() == d.k);
        Linear::load(file, &d.weights, &d.widths, d.k, prec, int8, amax)
    });
    let eps = cfg.layer_norm_eps;
    let norm = |n: &NormTensor| {
        let module = family.layer_module(l, n.name);
        Norm::with_spec(file, &module, family.norm_spec(n, eps), h, int8)
    };
    let opt_norm = |n: Option<NormTensor>| n.as_ref().map(norm).transpose();
    // Per-head norms: the family's kind over `head_dim` values.
    let head_norm = |module: Option<&str>| {
        module
            .map(|m| {
                let name = family.layer_module(l, m);
                Norm::load(file, &name, family.norm, heads.d, false, eps, int8)
            })
            .transpose()
    };
    let local = cfg.is_local_layer(l);
    let inter = cfg.intermediate_size;
    Ok(Layer {
        attn_norm: opt_norm(t.attn_norm)?,
        attention: Attention {
            heads,
            qkv: qkv?,
            qkv_b,
            out: out?,
            out_b,
            band: match (local, cfg.causal) {
                (true, false) => Band::window(cfg.sliding_window),
                (true, true) => Band {
                    right: 0,
                    ..Band::window(cfg.sliding_window)
                },
                (false, false) => Band::FULL,
                (false, true) => Band::CAUSAL,
            },
            rope: if local {
                ropes.local.clone()
            } else {
                ropes.global.clone()
            },
            scale: cfg.attention_scale(),
            q_norm: head_norm(t.q_norm)?,
            k_norm: head_norm(t.k_norm)?,
        },
        mlp_norm: Some(norm(&t.mlp_norm)?),
        mlp: Mlp {
            up: up?,
            up_b: up_b.map(Param::Owned),
            down: down?,
            down_b,
            act: cfg.activation,
            gated: t.glu.gated(),
            up_first: t.glu == Glu::UpGate,
            zeros: vec![0.0; inter],
        },
        post_attn_norm: opt_norm(t.post_attn_norm)?,
        post_mlp_norm: opt_norm(t.post_mlp_norm)?,
    })
}

impl Encoder {
    /// Loads and checks every required tensor against `cfg`: presence, dtype and
    /// exact shape; the error names the first missing or mismatching tensor.
    /// FLOAT32 tensors stay in the file (zero-copy); FLOAT16/BFLOAT16 are
    /// converted and `int8_per_row` weights dequantized to owned f32 for the
    /// f32 products; the dense layers take the representation `plan` asks
    /// for (int8 weights are packed at load, from the file's int8 tensors or
    /// quantized from its floats).
    ///
    /// `calib` (optional) smooths the int8 products (see [`Linear::load`]).
    pub fn load(
        file: &Arc<ModelFile>,
        cfg: &ModelConfig,
        plan: LayerPrecision,
        calib: Option<&Calibration>,
    ) -> Result<Encoder> {
        cfg.validate()?;
        let int8 = crate::model::param::stores_int8(file)?;
        let family = cfg.family()?;
        let e = &family.embeddings;
        let h = cfg.hidden_size;
        let eps = cfg.layer_norm_eps;
        let p = |name: &str, shape: &[usize]| load_param(file, name, shape, int8);
        let norm =
            |n: &NormTensor| Norm::with_spec(file, n.name, family.norm_spec(n, eps), h, int8);
        let embeddings = Embeddings::load(
            file,
            &EmbeddingsSpec {
                word: e.word,
                position: e.position,
                token_type: e.token_type,
                norm: e.norm.as_ref().map(|n| (n.name, family.norm_spec(n, eps))),
                hidden: h,
                vocab: cfg.vocab_size,
                type_vocab: cfg.type_vocab_size,
                max_position: cfg.max_position,
                positions: family.positions,
                padding_idx: cfg.padding_idx,
                scale: e.scale,
            },
            int8,
        )?;
        let rel_bias = match family.relative {
            RelativePositions::Buckets { table } => {
                let (nb, nh) = (cfg.relative_buckets, cfg.num_heads);
                let table = p(table, &[nb, nh])?;
                Some(RelativeBias::from_buckets(
                    table.as_slice(),
                    nb,
                    nh,
                    cfg.relative_max_distance,
                    cfg.max_position,
                ))
            }
            _ => None,
        };
        let disentangled = match family.relative {
            RelativePositions::Disentangled { rows, norm: n } => {
                let span = cfg.relative_span();
                let mut rows = p(rows, &[2 * span, h])?.as_slice().to_vec();
                norm(&n)?.apply(&mut rows, h, Par::Serial);
                Some(Disentangled {
                    rows,
                    span,
                    buckets: cfg.position_buckets,
                    max_position: cfg.max_relative_positions,
                    c2p: cfg.c2p,
                    p2c: cfg.p2c,
                })
            }
            _ => None,
        };
        let final_norm = family.final_norm.as_ref().map(norm).transpose()?;
        let ropes = Ropes::new(cfg, family);
        // Layers load in parallel on the current rayon pool (int8 and bf16
        // weights are converted and packed here); the error reported is the
        // first layer's, whichever thread met its own first.
        let layers: Vec<Result<Layer>> = (0..cfg.num_layers)
            .into_par_iter()
            .map(|l| load_layer(file, cfg, family, l, plan, calib, int8, &ropes))
            .collect();
        let layers: Vec<Layer> = layers.into_iter().collect::<Result<_>>()?;
        let up_width = layers.first().map_or(0, |l| l.mlp.up_width());
        let gated = layers.first().is_some_and(|l| l.mlp.gated);
        let mut m = Encoder {
            hidden: h,
            heads: cfg.heads(),
            up_width,
            gated,
            inter: cfg.intermediate_size,
            // Rotary tables cover `max_seq_length` positions.
            max_position: if family.rotary() {
                cfg.max_seq_length.min(cfg.max_position)
            } else {
                cfg.max_position
            },
            plan,
            family,
            embeddings,
            final_norm,
            rel_bias,
            disentangled,
            packs: Arc::new(PackStore::default()),
            layers: Arc::new(layers),
            packer: JoinOnDrop::default(),
            mapped: 0,
            owned: 0,
        };
        let (mut mapped, mut owned) = (0, 0);
        m.for_each_param(|p| {
            if p.is_mapped() {
                mapped += 1
            } else {
                owned += 1
            }
        });
        if m.embeddings.word.is_mapped() {
            mapped += 1;
        } else {
            owned += 1;
        }
        for l in m.layers.iter() {
            // The concatenated Q, K and V biases.
            if l.attention.qkv_b.is_some() {
                owned += (family.layer)(0).qkv.modules.len();
            }
            for lin in l.linears() {
                let (a, b) = lin.param_counts();
                mapped += a;
                owned += b;
            }
        }
        m.mapped = mapped;
        m.owned = owned;
        Ok(m)
    }

    fn for_each_param(&self, mut f: impl FnMut(&Param)) {
        self.embeddings.for_each_param(&mut f);
        for l in self.layers.iter() {
            for p in l.params() {
                f(p);
            }
        }
        self.final_norm.iter().flat_map(Norm::params).for_each(f);
    }

    /// Every layer's `Linear`s, layer by layer.
    pub(crate) fn linears(&self) -> impl Iterator<Item = &Linear> {
        self.layers.iter().flat_map(|l| l.linears())
    }

    /// The precision of each kind of product.
    pub fn plan(&self) -> LayerPrecision {
        self.plan
    }

    /// Packs the f32 weights of every layer for the kernels (see the type's
    /// docs): on a background thread that returns at once when `background`,
    /// else on the calling thread before returning. Layers already packed are
    /// skipped; a second call while the background thread runs does nothing.
    /// A no-op when the engine's own kernels are not in use on this CPU.
    /// Costs one copy of the layers' f32 weight matrices in memory (42 MB for
    /// all-MiniLM-L6-v2); the mapped pages of the originals are released from
    /// resident memory once a layer is packed.
    pub fn prepack(&self, background: bool) {
        let (layers, packs) = (Arc::clone(&self.layers), Arc::clone(&self.packs));
        let word = self.embeddings.word.file_range();
        let work = move || {
            for l in layers.iter() {
                if packs.stop.load(Ordering::Relaxed) {
                    return;
                }
                linear::pack_f32_layer(&l.linears());
            }
            // A CRC check at open mapped the whole word-embedding table; calls
            // read only their tokens' rows, so let those come back on demand.
            if let Some((file, r)) = &word {
                file.release_pages(r.clone());
            }
        };
        if !background {
            work();
            return;
        }
        // A failure to spawn only leaves the weights unpacked.
        self.packer.spawn_if_idle("embd-prepack", work);
    }

    /// Layers whose weights are all in their final packed form so far, and
    /// the bytes the dense layers hold outside the file.
    pub fn packed_layers(&self) -> (usize, usize) {
        let done = self
            .layers
            .iter()
            .filter(|l| l.linears().iter().all(|x| x.is_packed()))
            .count();
        let bytes = self
            .layers
            .iter()
            .flat_map(|l| l.linears())
            .map(Linear::owned_bytes)
            .sum();
        (done, bytes)
    }

    /// How many parameter tensors are read in place from the file, and how many
    /// were converted into owned memory.
    pub fn param_counts(&self) -> (usize, usize) {
        (self.mapped, self.owned)
    }

    /// The encoder family.
    pub fn family(&self) -> &'static Family {
        self.family
    }

    /// Hidden size (the width of token vectors).
    pub fn hidden_size(&self) -> usize {
        self.hidden
    }

    /// Workspace floats needed for a chunk of `tokens` total tokens whose longest
    /// sequence has `max_len` tokens.
    pub fn workspace_floats(&self, tokens: usize, max_len: usize, par: Par) -> usize {
        let h = self.hidden;
        let (qw, cw) = (self.heads.qkv_width(), self.heads.ctx_width());
        let heads = if par.tasks() > 1 { self.heads.q } else { 1 };
        let normed = if self.family.forward.normed { h } else { 0 };
        let wide = if self.gated { self.up_width } else { 0 };
        tokens * (h + normed + qw + cw + wide + self.inter)
            + heads * attention_kernel::scratch_len(max_len, self.heads.d)
            + if par.tasks() > 1 { max_len * cw } else { 0 }
            + self.disentangled.as_ref().map_or(0, |x| {
                x.relative_floats(max_len, self.heads.q, self.heads.d, par)
            })
    }

    /// Runs the encoder over a chunk of sequences packed contiguously (with
    /// their token types and attention-key limits when `seqs` has them) and
    /// hands `f` the last hidden states of every token (`[total_tokens x
    /// hidden]`, the sequences one after another) with the workspace's spare
    /// buffers for the output heads. `trace(layer, stage, hidden)`, when
    /// given, sees the hidden states of all tokens after each sub-layer
    /// (calibration, precision reports).
    ///
    /// Ids must be below the vocabulary size and sequences no longer than the
    /// position table (the caller validates; violations return an internal
    /// error rather than panicking).
    pub fn forward<R>(
        &self,
        seqs: Seqs<'_>,
        ws: &mut Workspace,
        par: Par,
        mut trace: Option<Trace<'_>>,
        f: impl FnOnce(&[f32], HeadScratch<'_>) -> R,
    ) -> Result<R> {
        let total = seqs.tokens();
        if self.check_inputs(seqs)? {
            self.hidden_states(seqs, ws, par, &mut trace)?;
        }
        let Workspace {
            hidden, inter, lin, ..
        } = ws;
        Ok(f(
            &hidden[..total * self.hidden],
            HeadScratch { buf: inter, lin },
        ))
    }

    /// The checks of every forward pass: sequences within the position
    /// table, one type row and one key limit per sequence. `Ok(false)`: no
    /// tokens, nothing to run. (The caller validated the inputs; a violation
    /// is an internal error, not a panic.)
    fn check_inputs(&self, seqs: Seqs<'_>) -> Result<bool> {
        let max_len = seqs.ids.iter().map(|s| s.len()).max().unwrap_or(0);
        if seqs.tokens() == 0 {
            return Ok(false);
        }
        let internal = |m: &str| Error::new(ErrorKind::Internal, m);
        if max_len + self.embeddings.first_position() > self.max_position {
            return Err(internal("forward: sequence longer than the position table"));
        }
        if seqs.types.is_some_and(|t| t.len() != seqs.len()) {
            return Err(internal(
                "forward: token types for a different number of sequences",
            ));
        }
        if seqs.keys.is_some_and(|k| k.len() != seqs.len()) {
            return Err(internal(
                "forward: attention keys for a different number of sequences",
            ));
        }
        Ok(true)
    }

    /// The last hidden states of every token into `ws.hidden[..total * h]`
    /// (sequence `s` with only its first `keys[s]` tokens as attention keys
    /// when `seqs` has key limits).
    fn hidden_states(
        &self,
        seqs: Seqs<'_>,
        ws: &mut Workspace,
        par: Par,
        trace: &mut Option<Trace<'_>>,
    ) -> Result<()> {
        let (types, keys) = (seqs.types, seqs.keys);
        let seqs = seqs.ids;
        let h = self.hidden;
        let (qw, cw, d) = (self.heads.qkv_width(), self.heads.ctx_width(), self.heads.d);
        let lens: Vec<usize> = seqs.iter().map(|s| s.len()).collect();
        let total: usize = lens.iter().sum();
        let max_len = lens.iter().copied().max().unwrap_or(0);
        let normed_len = if self.family.forward.normed {
            total * h
        } else {
            0
        };
        let wide_len = if self.gated { total * self.up_width } else { 0 };
        grow(&mut ws.hidden, total * h);
        grow(&mut ws.normed, normed_len);
        grow(&mut ws.qkv, total * qw);
        grow(&mut ws.ctx, total * cw);
        grow(&mut ws.wide, wide_len);
        grow(&mut ws.inter, total * self.inter);
        let par_heads = par.tasks() > 1;
        let scratch = attention_kernel::scratch_len(max_len, d);
        grow(
            &mut ws.scores,
            if par_heads { self.heads.q } else { 1 } * scratch,
        );
        if par_heads {
            grow(&mut ws.heads, max_len * cw);
        }

        let Workspace {
            hidden,
            normed,
            wide,
            qkv,
            ctx,
            inter,
            scores,
            heads,
            relative,
            lin,
        } = ws;
        let hidden = &mut hidden[..total * h];
        self.embeddings.forward(seqs, types, hidden, par)?;
        let (normed, wide) = (&mut normed[..normed_len], &mut wide[..wide_len]);
        let (qkv, ctx) = (&mut qkv[..total * qw], &mut ctx[..total * cw]);
        let inter = &mut inter[..total * self.inter];
        for (li, l) in self.layers.iter().enumerate() {
            let mut run = LayerRun {
                hidden: &mut *hidden,
                normed: &mut *normed,
                s: AttentionScratch {
                    qkv: &mut *qkv,
                    ctx: &mut *ctx,
                    scores: &mut *scores,
                    heads: &mut *heads,
                    lin: &mut *lin,
                    relative: &mut *relative,
                    keys,
                },
                wide: &mut *wide,
                inter: &mut *inter,
                lens: &lens,
                total,
                h,
                bias: self.rel_bias.as_ref(),
                disentangled: self.disentangled.as_ref(),
                par,
                trace: &mut *trace,
                layer: li,
            };
            (self.family.forward.run)(l, &mut run);
        }
        if let Some(n) = &self.final_norm {
            n.apply(hidden, h, par);
        }
        Ok(())
    }
}
