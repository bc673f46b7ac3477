//! The encoder of every registered family (BERT, MPNet, RoBERTa, XLM-R: see
//! [`crate::model::arch`]), named after HF's modules: `embeddings`
//! (`BertEmbeddings`), then per layer (`layer`, `BertLayer`) the
//! `attention` block (`BertAttention`) and the feed-forward block
//! (`BertIntermediate` + `BertOutput`). Weight loading checks every tensor
//! exactly; the family's hooks choose the position ids, the token-type rows
//! and whether a relative position bias is added to the attention scores.
//!
//! # Packed batches
//!
//! A chunk of sequences is laid out contiguously, `[total_tokens x hidden]`,
//! without padding. Dense layers run once over all tokens; attention runs per
//! sequence and head over that sequence's rows only, so no mask is needed and
//! no work is spent on padding. Every row's arithmetic is independent of the
//! other rows (see [`crate::kernels::gemm`]), so a text gets bit-identical
//! results alone or in any batch, and with any [`Par`] setting.

mod attention;
mod embeddings;
mod layer;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use rayon::prelude::*;

use crate::error::{Error, ErrorKind, Result};
use crate::formats::ModelFile;
use crate::kernels::{attention as attention_kernel, Par};
use crate::model::arch::{AttentionBias, Family};
use crate::model::config::{Activation, ModelConfig};
use crate::model::linear::{self, Linear, LinearScratch};
use crate::model::param::{load_param, Param};
use crate::model::pooling::SentencePooling;
use crate::model::precision::{dense_layers, Calibration, LayerPrecision, Product};
use crate::threads::JoinOnDrop;

use attention::{AttentionScratch, RelativeBias, SelfAttention};
use embeddings::Embeddings;
use layer::{FeedForward, Layer};

/// A point of the forward pass reported by [`Encoder::forward_traced`].
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

/// The callback of [`Encoder::forward_traced`]: `(layer, stage, values)`.
pub type Trace<'a> = &'a mut dyn FnMut(usize, Stage, &[f32]);

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
    heads: usize,
    inter: usize,
    max_position: usize,
    eps: f32,
    activation: Activation,
    plan: LayerPrecision,
    family: &'static Family,
    embeddings: Embeddings,
    /// The attention bias hook ([`AttentionBias::RelativeBuckets`]).
    rel_bias: Option<RelativeBias>,
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

/// Name and exact shape of every tensor [`Encoder::load`] requires for
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
        let (h, i) = (cfg.hidden_size, cfg.intermediate_size);
        let p = |name: &str, shape: &[usize]| load_param(file, name, shape, int8);
        let embeddings = Embeddings::load(file, cfg, family, int8)?;
        let rel_bias = match (family.attention_bias, names.relative_bias) {
            (AttentionBias::RelativeBuckets, Some(t)) => {
                let (nb, nh) = (cfg.relative_buckets, cfg.num_heads);
                let table = p(t, &[nb, nh])?;
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
        // Layers load in parallel on the current rayon pool (int8 and bf16
        // weights are converted and packed here).
        let layers: Vec<Layer> = (0..cfg.num_layers)
            .into_par_iter()
            .map(|l| -> Result<Layer> {
                let n = |m: &str, kind: &str| family.layer_tensor(l, m, kind);
                let [qkv, out, up, down] = dense_layers(cfg, l).map(|d| {
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
                    attention: SelfAttention {
                        qkv: qkv?,
                        qkv_b,
                        out: out?,
                        out_b: p(&n(names.attn_out, "bias"), &[h])?,
                        ln_g: p(&n(names.attn_ln, "weight"), &[h])?,
                        ln_b: p(&n(names.attn_ln, "bias"), &[h])?,
                    },
                    ffn: FeedForward {
                        up: up?,
                        up_b: p(&n(names.ffn_up, "bias"), &[i])?,
                        down: down?,
                        down_b: p(&n(names.ffn_down, "bias"), &[h])?,
                        ln_g: p(&n(names.ffn_ln, "weight"), &[h])?,
                        ln_b: p(&n(names.ffn_ln, "bias"), &[h])?,
                    },
                })
            })
            .collect::<Result<_>>()?;
        let mut m = Encoder {
            hidden: h,
            heads: cfg.num_heads,
            inter: i,
            max_position: cfg.max_position,
            eps: cfg.layer_norm_eps,
            activation: cfg.activation,
            plan,
            family,
            embeddings,
            rel_bias,
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
        self.embeddings.for_each_param(&mut f);
        for l in self.layers.iter() {
            for p in l.params() {
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
            + heads * attention_kernel::scratch_len(max_len, self.hidden / self.heads)
            + if par.tasks() > 1 { max_len * h } else { 0 }
    }

    /// Runs the encoder over a chunk of sequences packed contiguously and writes
    /// one pooled vector of `hidden` floats per sequence into `out`. Every
    /// token has token type 0.
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
        self.forward_traced(seqs, None, ws, par, pooling, out, None)
    }

    /// [`Encoder::forward`] with a token type per token (`types[s]` has the
    /// length of `seqs[s]`; cross-encoders give the second text type 1).
    pub fn forward_typed(
        &self,
        seqs: &[&[u32]],
        types: &[&[u32]],
        ws: &mut Workspace,
        par: Par,
        pooling: SentencePooling,
        out: &mut [f32],
    ) -> Result<()> {
        self.forward_traced(seqs, Some(types), ws, par, pooling, out, None)
    }

    /// [`Encoder::forward`] (with token types when `types` is given), calling
    /// `trace(layer, stage, hidden)` with the hidden states of all tokens
    /// (`[total_tokens x hidden]`) after each sub-layer (for precision
    /// reports).
    #[allow(clippy::too_many_arguments)]
    pub fn forward_traced(
        &self,
        seqs: &[&[u32]],
        types: Option<&[&[u32]]>,
        ws: &mut Workspace,
        par: Par,
        pooling: SentencePooling,
        out: &mut [f32],
        mut trace: Option<Trace<'_>>,
    ) -> Result<()> {
        let h = self.hidden;
        if !self.check_inputs(seqs, types, out.len(), seqs.len() * h)? {
            return Ok(());
        }
        self.hidden_states(seqs, types, ws, par, &mut trace)?;
        let mut o = 0;
        for (s, dst) in seqs.iter().zip(out.chunks_exact_mut(h)) {
            pooling.apply(&ws.hidden[o * h..(o + s.len()) * h], h, dst);
            o += s.len();
        }
        Ok(())
    }

    /// Runs the encoder like [`Encoder::forward_typed`] (token types when
    /// `types` is given) and writes the last hidden state of every token,
    /// un-pooled: `hidden` floats per token, the sequences' tokens one after
    /// another (`out` holds at least `total_tokens x hidden` floats).
    pub fn forward_tokens(
        &self,
        seqs: &[&[u32]],
        types: Option<&[&[u32]]>,
        ws: &mut Workspace,
        par: Par,
        out: &mut [f32],
    ) -> Result<()> {
        let total: usize = seqs.iter().map(|s| s.len()).sum();
        let n = total * self.hidden;
        if !self.check_inputs(seqs, types, out.len(), n)? {
            return Ok(());
        }
        self.hidden_states(seqs, types, ws, par, &mut None)?;
        out[..n].copy_from_slice(&ws.hidden[..n]);
        Ok(())
    }

    /// The checks of every forward pass: an output of at least `need`
    /// floats, sequences within the position table, one type row per
    /// sequence. `Ok(false)`: no tokens, nothing to run. (The caller
    /// validated the inputs; a violation is an internal error, not a panic.)
    fn check_inputs(
        &self,
        seqs: &[&[u32]],
        types: Option<&[&[u32]]>,
        out_len: usize,
        need: usize,
    ) -> Result<bool> {
        let total: usize = seqs.iter().map(|s| s.len()).sum();
        let max_len = seqs.iter().map(|s| s.len()).max().unwrap_or(0);
        if total == 0 {
            return Ok(false);
        }
        let internal = |m: &str| Error::new(ErrorKind::Internal, m);
        if out_len < need {
            return Err(internal("forward: output buffer too small"));
        }
        if max_len + self.embeddings.first_position() > self.max_position {
            return Err(internal("forward: sequence longer than the position table"));
        }
        if types.is_some_and(|t| t.len() != seqs.len()) {
            return Err(internal(
                "forward: token types for a different number of sequences",
            ));
        }
        Ok(true)
    }

    /// The last hidden states of every token into `ws.hidden[..total * h]`.
    fn hidden_states(
        &self,
        seqs: &[&[u32]],
        types: Option<&[&[u32]]>,
        ws: &mut Workspace,
        par: Par,
        trace: &mut Option<Trace<'_>>,
    ) -> Result<()> {
        let (h, nh, ni, eps) = (self.hidden, self.heads, self.inter, self.eps);
        let d = h / nh;
        let total: usize = seqs.iter().map(|s| s.len()).sum();
        let max_len = seqs.iter().map(|s| s.len()).max().unwrap_or(0);
        grow(&mut ws.hidden, total * h);
        grow(&mut ws.qkv, total * 3 * h);
        grow(&mut ws.ctx, total * h);
        grow(&mut ws.inter, total * ni);
        let par_heads = par.tasks() > 1;
        let scratch = attention_kernel::scratch_len(max_len, d);
        grow(&mut ws.scores, if par_heads { nh } else { 1 } * scratch);
        if par_heads {
            grow(&mut ws.heads, max_len * h);
        }

        let Workspace {
            hidden,
            qkv,
            ctx,
            inter,
            scores,
            heads,
            lin,
        } = ws;
        let hidden = &mut hidden[..total * h];
        self.embeddings.forward(seqs, types, hidden, par)?;
        let mut s = AttentionScratch {
            qkv: &mut qkv[..total * 3 * h],
            ctx: &mut ctx[..total * h],
            scores,
            heads,
            lin,
        };
        let inter = &mut inter[..total * ni];
        let bias = self.rel_bias.as_ref();
        for (li, l) in self.layers.iter().enumerate() {
            // Attention: Q, K and V in one pass over the hidden states, then
            // per sequence and head over the sequence's own rows.
            if let Some(t) = trace.as_mut() {
                t(li, Stage::Input(Product::Qkv), hidden);
            }
            l.attention.project_qkv(hidden, total, &mut s, par);
            SelfAttention::attend_all(seqs.iter().map(|q| q.len()), h, nh, bias, &mut s, par);
            if let Some(t) = trace.as_mut() {
                t(li, Stage::Input(Product::AttnOut), s.ctx);
            }
            l.attention.output(s.ctx, total, hidden, eps, par, s.lin);
            if let Some(t) = trace.as_mut() {
                t(li, Stage::Attention, hidden);
            }

            // Feed-forward.
            if let Some(t) = trace.as_mut() {
                t(li, Stage::Input(Product::FfnUp), hidden);
            }
            l.ffn.up(hidden, total, inter, self.activation, par, s.lin);
            if let Some(t) = trace.as_mut() {
                t(li, Stage::Input(Product::FfnDown), inter);
            }
            l.ffn.down(inter, total, hidden, eps, par, s.lin);
            if let Some(t) = trace.as_mut() {
                t(li, Stage::FeedForward, hidden);
            }
        }
        Ok(())
    }
}
