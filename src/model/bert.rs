//! The encoder of every registered family (BERT, MPNet: see
//! [`crate::model::arch`]): weight loading with exact checks, and the packed
//! forward pass. Embeddings, attention, feed-forward and LayerNorm are one
//! code path; the family's hooks choose the position ids, whether token-type
//! row 0 is added, and whether a relative position bias is added to the
//! attention scores.
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
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use rayon::prelude::*;

use crate::error::{Error, Result};
use crate::formats::ModelFile;
use crate::kernels::gemm::Epilogue;
use crate::kernels::{attention, ops, Par};
use crate::model::arch::{self, AttentionBias, Family, Positions};
use crate::model::config::{Activation, ModelConfig};
use crate::model::linear::{self, Linear, LinearScratch};
use crate::model::param::{load_param, Param, Table};
use crate::model::pooling::SentencePooling;
use crate::options::Precision;

/// Weights of one encoder layer.
struct Layer {
    /// Q, K and V side by side (`[3h x h]`).
    qkv: Linear,
    /// The Q, K and V biases, concatenated.
    qkv_b: Vec<f32>,
    ao: Linear,
    ao_b: Param,
    ln1_g: Param,
    ln1_b: Param,
    inter: Linear,
    i_b: Param,
    out: Linear,
    o_b: Param,
    ln2_g: Param,
    ln2_b: Param,
}

impl Layer {
    fn linears(&self) -> [&Linear; 4] {
        [&self.qkv, &self.ao, &self.inter, &self.out]
    }
}

/// A point of the forward pass reported by [`BertModel::forward_traced`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// The input of a product (`[total_tokens x k]`).
    Input(Product),
    /// After the attention block's residual add and LayerNorm.
    Attention,
    /// After the feed-forward block's residual add and LayerNorm (the layer's
    /// output).
    FeedForward,
}

/// The callback of [`BertModel::forward_traced`]: `(layer, stage, values)`.
pub type Trace<'a> = &'a mut dyn FnMut(usize, Stage, &[f32]);

/// The dense products of an encoder layer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Product {
    /// Q, K and V projections.
    Qkv,
    /// Attention output projection.
    AttnOut,
    /// Feed-forward up projection.
    FfnUp,
    /// Feed-forward down projection.
    FfnDown,
}

impl Product {
    /// Every product, in the order of the forward pass.
    pub const ALL: [Product; 4] = [
        Product::Qkv,
        Product::AttnOut,
        Product::FfnUp,
        Product::FfnDown,
    ];

    /// Short name (`qkv`, `attn_out`, `ffn_up`, `ffn_down`).
    pub fn name(self) -> &'static str {
        match self {
            Product::Qkv => "qkv",
            Product::AttnOut => "attn_out",
            Product::FfnUp => "ffn_up",
            Product::FfnDown => "ffn_down",
        }
    }
}

/// Activation statistics of calibration data: the largest magnitude of each
/// input channel of each product, per layer (see [`crate::model::calibrate`]).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Calibration {
    /// `layers[l][p]`: product `Product::ALL[p]` of layer `l`, one value per
    /// input channel.
    pub layers: Vec<[Vec<f32>; 4]>,
}

/// Tells the background packer to stop (the model is being dropped).
#[derive(Default)]
struct PackStore {
    stop: AtomicBool,
}

/// A slot for one background thread, joined when the slot is dropped, so that
/// no thread outlives its owner (and the code it runs, e.g. across `dlclose`).
#[derive(Default)]
pub(crate) struct JoinOnDrop(Mutex<Option<JoinHandle<()>>>);

impl JoinOnDrop {
    /// Starts `f` on a thread named `name`, unless the thread started here
    /// before is still running. Best effort: when no thread can be started,
    /// `f` does not run.
    pub(crate) fn spawn_if_idle(&self, name: &str, f: impl FnOnce() + Send + 'static) {
        let mut slot = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if slot.as_ref().is_some_and(|t| !t.is_finished()) {
            return;
        }
        *slot = std::thread::Builder::new().name(name.into()).spawn(f).ok();
    }
}

impl Drop for JoinOnDrop {
    fn drop(&mut self) {
        let handle = self.0.get_mut().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(handle) = handle {
            // A panic in the thread has no result to pass on.
            let _ = handle.join();
        }
    }
}

/// A loaded encoder (any registered family; the name is historical).
///
/// # Pre-packed weights
///
/// The kernels read weight matrices as panels in their own layout. Until a
/// layer's weights are packed ([`BertModel::prepack`]), each product packs
/// the panels it needs on the fly, which costs as much as the arithmetic for
/// short inputs; after, products read the packed copy in place. The values
/// are the same bit for bit either way (only the layout of the weights
/// changes), so a result never depends on whether, or when, packing happened.
pub struct BertModel {
    hidden: usize,
    heads: usize,
    inter: usize,
    vocab: usize,
    max_position: usize,
    eps: f32,
    activation: Activation,
    plan: LayerPrecision,
    family: &'static Family,
    /// Position ids hook: `padding_idx` for [`Positions::AfterPadding`].
    padding_idx: usize,
    word: Table,
    pos: Param,
    /// Token-type row 0 (`[hidden]`), added to every token, if the family has
    /// token types.
    typ: Option<Param>,
    /// Attention bias hook: for [`AttentionBias::RelativeBuckets`], per head
    /// the bias of every relative position `j - i` in
    /// `-(max_position-1)..=max_position-1`, `[heads x (2·max_position − 1)]`.
    rel_bias: Option<Vec<f32>>,
    emb_ln_g: Param,
    emb_ln_b: Param,
    layers: Arc<Vec<Layer>>,
    packs: Arc<PackStore>,
    /// The background packer; joined (after `stop` is set) when the model is
    /// dropped.
    packer: JoinOnDrop,
    mapped: usize,
    owned: usize,
}

impl Drop for BertModel {
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
    qkv: Vec<f32>,
    ctx: Vec<f32>,
    inter: Vec<f32>,
    scores: Vec<f32>,
    heads: Vec<f32>,
    lin: LinearScratch,
}

impl Workspace {
    /// Bytes currently held.
    pub fn bytes(&self) -> usize {
        4 * (self.hidden.len()
            + self.qkv.len()
            + self.ctx.len()
            + self.inter.len()
            + self.scores.len()
            + self.heads.len())
            + self.lin.bytes()
    }
}

fn grow(v: &mut Vec<f32>, n: usize) {
    if v.len() < n {
        v.resize(n, 0.0);
    }
}

/// Row passes over fewer floats than this run on one thread (splitting them
/// costs more in synchronisation than the pass itself).
const MIN_SPLIT_ROW_FLOATS: usize = 1 << 15;

/// Applies `f` to each `width`-wide row of `buf`, in parallel if asked.
fn for_rows(buf: &mut [f32], width: usize, par: Par, f: impl Fn(&mut [f32]) + Sync + Send) {
    let rows = buf.len() / width.max(1);
    match par {
        Par::Threads(t) if t > 1 && rows > 1 && buf.len() >= MIN_SPLIT_ROW_FLOATS => {
            let per = rows.div_ceil(t);
            buf.par_chunks_mut(per * width)
                .for_each(|c| c.chunks_exact_mut(width).for_each(&f));
        }
        _ => buf.chunks_exact_mut(width).for_each(f),
    }
}

/// Name and exact shape of every tensor [`BertModel::load`] requires for
/// `cfg`, in the canonical order (embeddings, then each layer), using the
/// family's HF names. Writers and test generators build models from this list.
///
/// # Panics
/// If `cfg.architecture` is not a registered family (a validated config's
/// always is).
pub fn required_tensors(cfg: &ModelConfig) -> Vec<(String, Vec<usize>)> {
    let f = cfg.family().expect("a registered architecture");
    let n = &f.names;
    let (h, i) = (cfg.hidden_size, cfg.intermediate_size);
    let mut out = vec![
        (format!("{}.weight", n.word), vec![cfg.vocab_size, h]),
        (format!("{}.weight", n.position), vec![cfg.max_position, h]),
    ];
    if let Some(t) = n.token_type {
        out.push((format!("{t}.weight"), vec![cfg.type_vocab_size, h]));
    }
    out.push((format!("{}.weight", n.emb_ln), vec![h]));
    out.push((format!("{}.bias", n.emb_ln), vec![h]));
    for l in 0..cfg.num_layers {
        let mut m = |module: &str, rows: usize, cols: usize| {
            out.push((f.layer_tensor(l, module, "weight"), vec![rows, cols]));
            out.push((f.layer_tensor(l, module, "bias"), vec![rows]));
        };
        for q in n.qkv {
            m(q, h, h);
        }
        m(n.attn_out, h, h);
        out.push((f.layer_tensor(l, n.attn_ln, "weight"), vec![h]));
        out.push((f.layer_tensor(l, n.attn_ln, "bias"), vec![h]));
        let mut m = |module: &str, rows: usize, cols: usize| {
            out.push((f.layer_tensor(l, module, "weight"), vec![rows, cols]));
            out.push((f.layer_tensor(l, module, "bias"), vec![rows]));
        };
        m(n.ffn_up, i, h);
        m(n.ffn_down, h, i);
        out.push((f.layer_tensor(l, n.ffn_ln, "weight"), vec![h]));
        out.push((f.layer_tensor(l, n.ffn_ln, "bias"), vec![h]));
    }
    if let (AttentionBias::RelativeBuckets, Some(t)) = (f.attention_bias, n.relative_bias) {
        out.push((t.to_string(), vec![cfg.relative_buckets, cfg.num_heads]));
    }
    out
}

/// The precision of each kind of product of an encoder layer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LayerPrecision {
    /// Q, K and V projections.
    pub qkv: Precision,
    /// Attention output projection.
    pub attn_out: Precision,
    /// Feed-forward up projection (followed by GELU).
    pub ffn_up: Precision,
    /// Feed-forward down projection.
    pub ffn_down: Precision,
}

impl LayerPrecision {
    /// Every product in `p`.
    pub const fn uniform(p: Precision) -> LayerPrecision {
        LayerPrecision {
            qkv: p,
            attn_out: p,
            ffn_up: p,
            ffn_down: p,
        }
    }

    /// The products' precisions the engine uses for a requested precision
    /// (chosen by measurement: see `embd precision-report`) for a BERT model;
    /// see [`LayerPrecision::for_family`].
    pub const fn for_precision(p: Precision) -> LayerPrecision {
        LayerPrecision::uniform(p)
    }

    /// The products' precisions the engine uses for a requested precision on
    /// a model of `family`: [`LayerPrecision::for_precision`], with the
    /// family's [`Family::int8_f32_products`] kept in f32 when `p` is int8.
    pub fn for_family(p: Precision, family: &Family) -> LayerPrecision {
        let mut plan = LayerPrecision::for_precision(p);
        if p == Precision::Int8 {
            for &product in family.int8_f32_products {
                match product {
                    Product::Qkv => plan.qkv = Precision::F32,
                    Product::AttnOut => plan.attn_out = Precision::F32,
                    Product::FfnUp => plan.ffn_up = Precision::F32,
                    Product::FfnDown => plan.ffn_down = Precision::F32,
                }
            }
        }
        plan
    }
}

impl LayerPrecision {
    /// The precision of product `p`.
    pub const fn of(self, p: Product) -> Precision {
        match p {
            Product::Qkv => self.qkv,
            Product::AttnOut => self.attn_out,
            Product::FfnUp => self.ffn_up,
            Product::FfnDown => self.ffn_down,
        }
    }

    /// Whether any product is int8.
    pub fn any_int8(self) -> bool {
        Product::ALL.iter().any(|&p| self.of(p) == Precision::Int8)
    }
}

/// One dense product of an encoder layer: its weight tensors (side by side
/// along the output dimension), each `[seg_n x k]`.
pub struct DenseLayer {
    /// Which product.
    pub product: Product,
    /// HF tensor names of the weights.
    pub weights: Vec<String>,
    /// Output features per weight tensor.
    pub seg_n: usize,
    /// Input features.
    pub k: usize,
}

/// The dense products of layer `l`, in the order of the forward pass.
///
/// # Panics
/// If `cfg.architecture` is not a registered family (a validated config's
/// always is).
pub fn dense_layers(cfg: &ModelConfig, l: usize) -> [DenseLayer; 4] {
    let f = cfg.family().expect("a registered architecture");
    let n = &f.names;
    let (h, i) = (cfg.hidden_size, cfg.intermediate_size);
    let d = |product, names: &[&str], seg_n, k| DenseLayer {
        product,
        weights: names
            .iter()
            .map(|s| f.layer_tensor(l, s, "weight"))
            .collect(),
        seg_n,
        k,
    };
    [
        d(Product::Qkv, &n.qkv, h, h),
        d(Product::AttnOut, &[n.attn_out], h, h),
        d(Product::FfnUp, &[n.ffn_up], i, h),
        d(Product::FfnDown, &[n.ffn_down], h, i),
    ]
}

/// The `int8_per_row` tensors of every dense weight of the model in `file`,
/// smoothed with `calib`: for each weight `W` (`[rows x cols]`) the int8 `W`,
/// `W_scale` (`[rows]`) and, with a calibration, `W_smooth` (`[cols]`).
/// What `embd convert --dtype int8` writes.
///
/// # Errors
/// A missing or misshapen tensor.
pub fn int8_tensors(
    file: &Arc<ModelFile>,
    cfg: &ModelConfig,
    calib: Option<&Calibration>,
) -> Result<Vec<crate::formats::TensorEntry>> {
    use crate::formats::{DType, TensorEntry};
    let mut out = Vec::new();
    for l in 0..cfg.num_layers {
        for d in dense_layers(cfg, l) {
            let amax = calib
                .and_then(|c| c.layers.get(l))
                .map(|a| a[d.product as usize].as_slice())
                .filter(|a| a.len() == d.k);
            let w = linear::int8_weights(file, &d.weights, d.seg_n, d.k, false, amax)?;
            for (s, name) in d.weights.iter().enumerate() {
                let rows = s * d.seg_n..(s + 1) * d.seg_n;
                let q: Vec<u8> = w.q[rows.start * d.k..rows.end * d.k]
                    .iter()
                    .map(|&v| v as u8)
                    .collect();
                out.push(TensorEntry::owned_bytes(
                    name,
                    DType::I8,
                    vec![d.seg_n, d.k],
                    &q,
                ));
                out.push(TensorEntry::owned_f32(
                    format!("{name}_scale"),
                    vec![d.seg_n],
                    &w.scales[rows],
                ));
                if let Some(f) = &w.smooth {
                    out.push(TensorEntry::owned_f32(
                        format!("{name}_smooth"),
                        vec![d.k],
                        f,
                    ));
                }
            }
        }
    }
    Ok(out)
}

impl BertModel {
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
    ) -> Result<BertModel> {
        cfg.validate()?;
        let int8 = match file.metadata.get("quantization").map(|s| s.trim()) {
            None | Some("") | Some("none") => false,
            Some("int8_per_row") => true,
            Some(q) => {
                return Err(Error::unsupported(format!(
                    "metadata 'quantization' = '{q}' is not supported (only int8_per_row)"
                )))
            }
        };
        let family = cfg.family()?;
        let names = &family.names;
        let (h, i, v) = (cfg.hidden_size, cfg.intermediate_size, cfg.vocab_size);
        let p = |name: &str, shape: &[usize]| load_param(file, name, shape, int8);
        let word = Table::load(file, &format!("{}.weight", names.word), [v, h], int8)?;
        let pos = p(
            &format!("{}.weight", names.position),
            &[cfg.max_position, h],
        )?;
        let typ = match names.token_type {
            Some(t) => {
                let all = p(&format!("{t}.weight"), &[cfg.type_vocab_size, h])?;
                Some(Param::Owned(all.as_slice()[..h].to_vec()))
            }
            None => None,
        };
        let rel_bias = match (family.attention_bias, names.relative_bias) {
            (AttentionBias::RelativeBuckets, Some(t)) => {
                let (nb, nh) = (cfg.relative_buckets, cfg.num_heads);
                let table = p(t, &[nb, nh])?;
                Some(relative_bias_table(
                    table.as_slice(),
                    nb,
                    nh,
                    cfg.relative_max_distance,
                    cfg.max_position,
                ))
            }
            _ => None,
        };
        let emb_ln_g = p(&format!("{}.weight", names.emb_ln), &[h])?;
        let emb_ln_b = p(&format!("{}.bias", names.emb_ln), &[h])?;
        // Layers load in parallel on the current rayon pool (int8 and bf16
        // weights are converted and packed here).
        let layers: Vec<Layer> = (0..cfg.num_layers)
            .into_par_iter()
            .map(|l| -> Result<Layer> {
                let n = |m: &str, kind: &str| family.layer_tensor(l, m, kind);
                let [qkv, ao, inter, out] = dense_layers(cfg, l).map(|d| {
                    let prec = plan.of(d.product);
                    let amax = calib
                        .and_then(|c| c.layers.get(l))
                        .map(|a| a[d.product as usize].as_slice())
                        .filter(|a| a.len() == d.k);
                    Linear::load(file, &d.weights, d.seg_n, d.k, prec, int8, amax)
                });
                let mut qkv_b = Vec::with_capacity(3 * h);
                for s in names.qkv {
                    let b = p(&n(s, "bias"), &[h])?;
                    qkv_b.extend_from_slice(b.as_slice());
                }
                Ok(Layer {
                    qkv: qkv?,
                    qkv_b,
                    ao: ao?,
                    ao_b: p(&n(names.attn_out, "bias"), &[h])?,
                    ln1_g: p(&n(names.attn_ln, "weight"), &[h])?,
                    ln1_b: p(&n(names.attn_ln, "bias"), &[h])?,
                    inter: inter?,
                    i_b: p(&n(names.ffn_up, "bias"), &[i])?,
                    out: out?,
                    o_b: p(&n(names.ffn_down, "bias"), &[h])?,
                    ln2_g: p(&n(names.ffn_ln, "weight"), &[h])?,
                    ln2_b: p(&n(names.ffn_ln, "bias"), &[h])?,
                })
            })
            .collect::<Result<_>>()?;
        let mut m = BertModel {
            hidden: h,
            heads: cfg.num_heads,
            inter: i,
            vocab: v,
            max_position: cfg.max_position,
            eps: cfg.layer_norm_eps,
            activation: cfg.activation,
            plan,
            family,
            padding_idx: cfg.padding_idx,
            word,
            pos,
            typ,
            rel_bias,
            emb_ln_g,
            emb_ln_b,
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
        if m.word.is_mapped() {
            mapped += 1;
        } else {
            owned += 1;
        }
        for l in m.layers.iter() {
            // The concatenated Q, K and V biases (three tensors).
            owned += 3;
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
        for p in [&self.pos, &self.emb_ln_g, &self.emb_ln_b] {
            f(p);
        }
        if let Some(p) = &self.typ {
            f(p);
        }
        for l in self.layers.iter() {
            for p in [
                &l.ao_b, &l.ln1_g, &l.ln1_b, &l.i_b, &l.o_b, &l.ln2_g, &l.ln2_b,
            ] {
                f(p);
            }
        }
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
        let word = self.word.file_range();
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

    /// Position id of a sequence's first token (see [`ModelConfig::first_position`]).
    fn first_position(&self) -> usize {
        match self.family.positions {
            Positions::Sequential => 0,
            Positions::AfterPadding => self.padding_idx + 1,
        }
    }

    /// Hidden size (= output dimension).
    pub fn hidden_size(&self) -> usize {
        self.hidden
    }

    /// Workspace floats needed for a chunk of `tokens` total tokens whose longest
    /// sequence has `max_len` tokens.
    pub fn workspace_floats(&self, tokens: usize, max_len: usize, par: Par) -> usize {
        let h = self.hidden;
        let heads = if par.tasks() > 1 { self.heads } else { 1 };
        tokens * (5 * h + self.inter)
            + heads * attention::scratch_len(max_len, self.hidden / self.heads)
            + if par.tasks() > 1 { max_len * h } else { 0 }
    }

    /// Runs the encoder over a chunk of sequences packed contiguously and writes
    /// one pooled vector of `hidden` floats per sequence into `out`.
    ///
    /// Ids must be below the vocabulary size and sequences no longer than the
    /// position table (the caller validates; violations return an internal
    /// error rather than panicking).
    pub fn forward(
        &self,
        seqs: &[&[u32]],
        ws: &mut Workspace,
        par: Par,
        pooling: SentencePooling,
        out: &mut [f32],
    ) -> Result<()> {
        self.forward_traced(seqs, ws, par, pooling, out, None)
    }

    /// [`BertModel::forward`], calling `trace(layer, stage, hidden)` with the
    /// hidden states of all tokens (`[total_tokens x hidden]`) after each
    /// sub-layer (for precision reports).
    pub fn forward_traced(
        &self,
        seqs: &[&[u32]],
        ws: &mut Workspace,
        par: Par,
        pooling: SentencePooling,
        out: &mut [f32],
        mut trace: Option<Trace<'_>>,
    ) -> Result<()> {
        let h = self.hidden;
        let nh = self.heads;
        let d = h / nh;
        let total: usize = seqs.iter().map(|s| s.len()).sum();
        let max_len = seqs.iter().map(|s| s.len()).max().unwrap_or(0);
        if total == 0 {
            return Ok(());
        }
        if out.len() < seqs.len() * h {
            return Err(Error::new(
                crate::ErrorKind::Internal,
                "forward: output buffer too small",
            ));
        }
        if max_len + self.first_position() > self.max_position {
            return Err(Error::new(
                crate::ErrorKind::Internal,
                "forward: sequence longer than the position table",
            ));
        }
        grow(&mut ws.hidden, total * h);
        grow(&mut ws.qkv, total * 3 * h);
        grow(&mut ws.ctx, total * h);
        grow(&mut ws.inter, total * self.inter);
        let par_heads = par.tasks() > 1;
        let scratch = attention::scratch_len(max_len, d);
        grow(&mut ws.scores, if par_heads { nh } else { 1 } * scratch);
        if par_heads {
            grow(&mut ws.heads, max_len * h);
        }

        // Embeddings: (word [+ token_type 0]) + position, then LayerNorm.
        let word = &self.word;
        let pos = self.pos.as_slice();
        let typ = self.typ.as_ref().map(Param::as_slice);
        let hidden = &mut ws.hidden[..total * h];
        let mut rows = hidden.chunks_exact_mut(h);
        for s in seqs {
            let mut non_pad = 0usize;
            for (i, &id) in s.iter().enumerate() {
                let id = id as usize;
                // The position ids hook.
                let at = match self.family.positions {
                    Positions::Sequential => i,
                    Positions::AfterPadding if id == self.padding_idx => self.padding_idx,
                    Positions::AfterPadding => {
                        non_pad += 1;
                        self.padding_idx + non_pad
                    }
                };
                let (Some(row), Some(p)) = (rows.next(), pos.get(at * h..(at + 1) * h)) else {
                    return Err(Error::new(
                        crate::ErrorKind::Internal,
                        format!("forward: position {at} out of range"),
                    ));
                };
                if id >= self.vocab || !word.row_into(id, row) {
                    return Err(Error::new(
                        crate::ErrorKind::Internal,
                        format!("forward: token id {id} out of range"),
                    ));
                }
                match typ {
                    Some(typ) => {
                        for j in 0..h {
                            row[j] = (row[j] + typ[j]) + p[j];
                        }
                    }
                    None => {
                        for j in 0..h {
                            row[j] += p[j];
                        }
                    }
                }
            }
        }
        let (g, b, eps) = (self.emb_ln_g.as_slice(), self.emb_ln_b.as_slice(), self.eps);
        for_rows(hidden, h, par, |r| ops::layer_norm(r, g, b, eps));

        let scale = 1.0 / (d as f32).sqrt();
        // The attention bias hook: per head, the bias of each relative
        // position, centred at `max_position - 1`.
        let width = 2 * self.max_position - 1;
        let bias = self
            .rel_bias
            .as_deref()
            .map(|t| (t, width, self.max_position - 1));
        for (li, l) in self.layers.iter().enumerate() {
            let x = &ws.hidden[..total * h];
            let qkv = &mut ws.qkv[..total * 3 * h];
            // Q, K and V in one pass over x (columns side by side).
            if let Some(t) = trace.as_mut() {
                t(li, Stage::Input(Product::Qkv), x);
            }
            let epi = Epilogue::Bias(&l.qkv_b);
            l.qkv
                .forward(x, total, qkv, 3 * h, false, epi, par, &mut ws.lin);

            // Attention, per sequence and head, over the sequence's own rows.
            let qkv = &ws.qkv[..total * 3 * h];
            let ctx = &mut ws.ctx[..total * h];
            let mut o = 0;
            for s in seqs {
                let len = s.len();
                let q_s = &qkv[o * 3 * h..(o + len) * 3 * h];
                let ctx_s = &mut ctx[o * h..(o + len) * h];
                if par_heads {
                    let heads = &mut ws.heads[..len * h];
                    let per = attention::scratch_len(len, d);
                    let scores = &mut ws.scores[..nh * per];
                    heads
                        .par_chunks_mut(len * d)
                        .zip(scores.par_chunks_mut(per))
                        .enumerate()
                        .for_each(|(hd, (dst, sc))| {
                            let b = bias.map(|(t, w, c)| (&t[hd * w..(hd + 1) * w], c));
                            attend(q_s, len, h, d, hd, scale, b, sc, dst, d);
                        });
                    for (i, row) in ctx_s.chunks_exact_mut(h).enumerate() {
                        for hd in 0..nh {
                            let src = &heads[hd * len * d + i * d..hd * len * d + (i + 1) * d];
                            row[hd * d..(hd + 1) * d].copy_from_slice(src);
                        }
                    }
                } else {
                    let sc = &mut ws.scores[..attention::scratch_len(len, d)];
                    for hd in 0..nh {
                        let b = bias.map(|(t, w, c)| (&t[hd * w..(hd + 1) * w], c));
                        attend(q_s, len, h, d, hd, scale, b, sc, &mut ctx_s[hd * d..], h);
                    }
                }
                o += len;
            }

            // Attention output: hidden += ctx · Wᵀ, then bias + LayerNorm.
            let hidden = &mut ws.hidden[..total * h];
            let ctx = &ws.ctx[..total * h];
            let none = Epilogue::None;
            if let Some(t) = trace.as_mut() {
                t(li, Stage::Input(Product::AttnOut), ctx);
            }
            l.ao.forward(ctx, total, hidden, h, true, none, par, &mut ws.lin);
            let (bb, g, b) = (l.ao_b.as_slice(), l.ln1_g.as_slice(), l.ln1_b.as_slice());
            for_rows(hidden, h, par, |r| ops::bias_layer_norm(r, bb, g, b, eps));
            if let Some(t) = trace.as_mut() {
                t(li, Stage::Attention, hidden);
            }

            // Feed-forward.
            let inter = &mut ws.inter[..total * self.inter];
            let epi = match self.activation {
                Activation::Gelu => Epilogue::BiasGelu(l.i_b.as_slice()),
                Activation::GeluTanh => Epilogue::BiasGeluTanh(l.i_b.as_slice()),
            };
            let ni = self.inter;
            if let Some(t) = trace.as_mut() {
                t(li, Stage::Input(Product::FfnUp), hidden);
            }
            l.inter
                .forward(hidden, total, inter, ni, false, epi, par, &mut ws.lin);
            if let Some(t) = trace.as_mut() {
                t(li, Stage::Input(Product::FfnDown), inter);
            }
            l.out
                .forward(inter, total, hidden, h, true, none, par, &mut ws.lin);
            let (bb, g, b) = (l.o_b.as_slice(), l.ln2_g.as_slice(), l.ln2_b.as_slice());
            for_rows(hidden, h, par, |r| ops::bias_layer_norm(r, bb, g, b, eps));
            if let Some(t) = trace.as_mut() {
                t(li, Stage::FeedForward, hidden);
            }
        }

        let mut o = 0;
        for (s, dst) in seqs.iter().zip(out.chunks_exact_mut(h)) {
            pooling.apply(&ws.hidden[o * h..(o + s.len()) * h], h, dst);
            o += s.len();
        }
        Ok(())
    }
}

/// One attention head of one sequence: `dst = softmax(scale · Q Kᵀ + B) · V`.
/// `qkv` holds the sequence's `[len x 3h]` rows (Q | K | V); `dst` receives
/// `len x d` values with row stride `ldd`; `scratch` holds
/// [`attention::scratch_len`] floats. `bias` (the attention bias hook): the
/// head's bias by relative position and the index of relative position 0 in
/// it; `B[i][j] = bias[centre + j - i]`.
#[allow(clippy::too_many_arguments)]
fn attend(
    qkv: &[f32],
    len: usize,
    h: usize,
    d: usize,
    head: usize,
    scale: f32,
    bias: Option<(&[f32], usize)>,
    scratch: &mut [f32],
    dst: &mut [f32],
    ldd: usize,
) {
    let c = head * d;
    let x = attention::HeadInput {
        qkv,
        ld: 3 * h,
        len,
        d,
        q: c,
        k: h + c,
        v: 2 * h + c,
        bias,
    };
    attention::attend(x, scale, scratch, dst, ldd);
}

/// The relative position bias of every head for every relative position
/// `-(max_position-1)..=max_position-1`, `[heads x (2·max_position − 1)]`,
/// from the `[buckets x heads]` table.
fn relative_bias_table(
    table: &[f32],
    buckets: usize,
    heads: usize,
    max_distance: usize,
    max_position: usize,
) -> Vec<f32> {
    let width = 2 * max_position - 1;
    let centre = max_position as i64 - 1;
    let mut out = vec![0.0; heads * width];
    for r in 0..width {
        let b = arch::relative_bucket(r as i64 - centre, buckets, max_distance);
        for hd in 0..heads {
            out[hd * width + r] = table[b * heads + hd];
        }
    }
    out
}
