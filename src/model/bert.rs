//! The BERT encoder: weight loading with exact checks, and the packed forward
//! pass.
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
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::JoinHandle;

use rayon::prelude::*;

use crate::error::{Error, Result};
use crate::formats::{DType, ModelFile};
use crate::kernels::gemm::{self, Epilogue};
use crate::kernels::sgemm::{self, PackedB};
use crate::kernels::{ops, Par};
use crate::model::config::{Activation, ModelConfig, Pooling};
use crate::model::pooling;

/// One weight tensor as f32: borrowed in place from the shared model file, or
/// owned after a conversion (f16/bf16, dequantized int8, misaligned f32).
pub enum Param {
    /// A FLOAT32 tensor of `file`, viewed zero-copy.
    Mapped {
        /// Keeps the mapping alive.
        file: Arc<ModelFile>,
        /// Index into `file.tensors`.
        index: usize,
    },
    /// Converted values.
    Owned(Vec<f32>),
}

impl Param {
    /// The values. For a mapped tensor this is a view of the file's bytes.
    pub fn as_slice(&self) -> &[f32] {
        match self {
            Param::Owned(v) => v,
            // Presence, dtype and alignment were checked at load, so the view
            // exists; the empty fallback is unreachable and would only make the
            // bounds-checked kernels refuse the call.
            Param::Mapped { file, index } => file
                .tensors
                .get(*index)
                .and_then(|t| file.tensor_f32(t))
                .unwrap_or(&[]),
        }
    }

    /// True when the values are read in place from the file.
    pub fn is_mapped(&self) -> bool {
        matches!(self, Param::Mapped { .. })
    }

    /// Drops the mapped file pages holding only this tensor from the process's
    /// resident memory (they are read back from the page cache if touched
    /// again, with the same bytes); a no-op for owned values.
    fn release_pages(&self) {
        if let Some((file, r)) = self.file_range() {
            file.release_pages(r);
        }
    }

    /// The file and byte range of a mapped tensor.
    fn file_range(&self) -> Option<(Arc<ModelFile>, std::ops::Range<usize>)> {
        match self {
            Param::Mapped { file, index } => {
                let r = file.tensor_file_range(file.tensors.get(*index)?)?;
                Some((Arc::clone(file), r))
            }
            Param::Owned(_) => None,
        }
    }
}

fn shape_str(s: &[usize]) -> String {
    let v: Vec<String> = s.iter().map(|d| d.to_string()).collect();
    format!("[{}]", v.join(", "))
}

/// Loads one tensor, checking presence, dtype and exact shape.
fn load_param(file: &Arc<ModelFile>, name: &str, shape: &[usize], int8: bool) -> Result<Param> {
    let index = file
        .tensors
        .iter()
        .position(|t| t.name == name)
        .ok_or_else(|| Error::model(format!("required tensor '{name}' is missing")))?;
    let t = &file.tensors[index];
    if t.shape != shape {
        return Err(Error::model(format!(
            "tensor '{name}' has shape {}, expected {}",
            shape_str(&t.shape),
            shape_str(shape)
        )));
    }
    let numel: usize = shape.iter().product();
    if t.byte_len() != numel * t.dtype.size() {
        return Err(Error::model(format!(
            "tensor '{name}' has {} data bytes, expected {} for {} {}",
            t.byte_len(),
            numel * t.dtype.size(),
            shape_str(shape),
            t.dtype
        )));
    }
    match t.dtype {
        DType::F32 => Ok(if file.tensor_f32(t).is_some() {
            Param::Mapped {
                file: Arc::clone(file),
                index,
            }
        } else {
            Param::Owned(file.tensor_to_f32(t))
        }),
        DType::F16 | DType::BF16 => Ok(Param::Owned(file.tensor_to_f32(t))),
        DType::I8 if shape.len() == 2 => {
            let scale_name = format!("{name}_scale");
            let Some(st) = file.tensor(&scale_name) else {
                return Err(Error::model(format!(
                    "tensor '{name}' is int8 but '{scale_name}' is missing"
                )));
            };
            if !int8 {
                return Err(Error::model(format!(
                    "tensor '{name}' is int8 but metadata 'quantization' is not int8_per_row"
                )));
            }
            if st.dtype != DType::F32 || st.shape != [shape[0]] || st.byte_len() != shape[0] * 4 {
                return Err(Error::model(format!(
                    "tensor '{scale_name}' has {} {}, expected f32 [{}]",
                    st.dtype,
                    shape_str(&st.shape),
                    shape[0]
                )));
            }
            let scales = file.tensor_to_f32(st);
            let mut v = file.tensor_to_f32(t);
            let cols = shape[1];
            if cols > 0 {
                for (row, s) in v.chunks_exact_mut(cols).zip(&scales) {
                    for x in row {
                        *x *= *s;
                    }
                }
            }
            Ok(Param::Owned(v))
        }
        d => Err(Error::model(format!(
            "tensor '{name}' has dtype {d}, expected f32, f16, bf16 (or int8 with a scale)"
        ))),
    }
}

/// Weights of one encoder layer.
struct Layer {
    q_w: Param,
    q_b: Param,
    k_w: Param,
    k_b: Param,
    v_w: Param,
    v_b: Param,
    ao_w: Param,
    ao_b: Param,
    ln1_g: Param,
    ln1_b: Param,
    i_w: Param,
    i_b: Param,
    o_w: Param,
    o_b: Param,
    ln2_g: Param,
    ln2_b: Param,
}

/// The four weight matrices of one layer packed for the engine's kernels
/// (Q, K and V side by side).
struct PackedLayer {
    qkv: PackedB,
    ao: PackedB,
    inter: PackedB,
    out: PackedB,
}

impl PackedLayer {
    /// Packs `l` into one buffer, or `None` when the engine's own kernels are
    /// not in use (or `h` is not a multiple of [`sgemm::SEGMENT_ALIGN`]).
    fn new(l: &Layer, h: usize, inter: usize) -> Option<PackedLayer> {
        let isa = sgemm::isa().filter(|_| h.is_multiple_of(sgemm::SEGMENT_ALIGN))?;
        let ws = [l.q_w.as_slice(), l.k_w.as_slice(), l.v_w.as_slice()];
        let qkv = sgemm::Stacked {
            ws: &ws,
            seg_n: h,
            k: h,
        };
        let ao = sgemm::Transposed {
            w: l.ao_w.as_slice(),
            ldw: h,
        };
        let wi = sgemm::Transposed {
            w: l.i_w.as_slice(),
            ldw: h,
        };
        let wo = sgemm::Transposed {
            w: l.o_w.as_slice(),
            ldw: inter,
        };
        let mut all = PackedB::pack_all(
            isa,
            &[
                (h, 3 * h, &qkv),
                (h, h, &ao),
                (h, inter, &wi),
                (inter, h, &wo),
            ],
        )
        .into_iter();
        let mut next = || all.next().expect("four matrices packed");
        Some(PackedLayer {
            qkv: next(),
            ao: next(),
            inter: next(),
            out: next(),
        })
    }

    fn bytes(&self) -> usize {
        self.qkv.bytes() + self.ao.bytes() + self.inter.bytes() + self.out.bytes()
    }
}

/// Packed weights of every layer, filled once (usually by a background
/// thread) and read by every forward pass from then on.
struct PackStore {
    layers: Vec<OnceLock<PackedLayer>>,
    /// Asks the background packer to stop (the model is being dropped).
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

/// A loaded BERT encoder.
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
    word: Param,
    pos: Param,
    typ: Param,
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
/// `cfg`, in the canonical order (embeddings, then each layer), using the HF BERT
/// names. Writers and test generators build models from this list.
pub fn required_tensors(cfg: &ModelConfig) -> Vec<(String, Vec<usize>)> {
    let (h, i) = (cfg.hidden_size, cfg.intermediate_size);
    let mut out = vec![
        (
            "embeddings.word_embeddings.weight".to_string(),
            vec![cfg.vocab_size, h],
        ),
        (
            "embeddings.position_embeddings.weight".to_string(),
            vec![cfg.max_position, h],
        ),
        (
            "embeddings.token_type_embeddings.weight".to_string(),
            vec![cfg.type_vocab_size, h],
        ),
        ("embeddings.LayerNorm.weight".to_string(), vec![h]),
        ("embeddings.LayerNorm.bias".to_string(), vec![h]),
    ];
    for l in 0..cfg.num_layers {
        for (n, s) in [
            ("attention.self.query.weight", vec![h, h]),
            ("attention.self.query.bias", vec![h]),
            ("attention.self.key.weight", vec![h, h]),
            ("attention.self.key.bias", vec![h]),
            ("attention.self.value.weight", vec![h, h]),
            ("attention.self.value.bias", vec![h]),
            ("attention.output.dense.weight", vec![h, h]),
            ("attention.output.dense.bias", vec![h]),
            ("attention.output.LayerNorm.weight", vec![h]),
            ("attention.output.LayerNorm.bias", vec![h]),
            ("intermediate.dense.weight", vec![i, h]),
            ("intermediate.dense.bias", vec![i]),
            ("output.dense.weight", vec![h, i]),
            ("output.dense.bias", vec![h]),
            ("output.LayerNorm.weight", vec![h]),
            ("output.LayerNorm.bias", vec![h]),
        ] {
            out.push((format!("encoder.layer.{l}.{n}"), s));
        }
    }
    out
}

impl BertModel {
    /// Loads and checks every required tensor against `cfg`: presence, dtype and
    /// exact shape; the error names the first missing or mismatching tensor.
    /// FLOAT32 tensors stay in the file (zero-copy); FLOAT16/BFLOAT16 are
    /// converted and `int8_per_row` weights dequantized to owned f32.
    pub fn load(file: &Arc<ModelFile>, cfg: &ModelConfig) -> Result<BertModel> {
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
        let (h, i, v) = (cfg.hidden_size, cfg.intermediate_size, cfg.vocab_size);
        let p = |name: &str, shape: &[usize]| load_param(file, name, shape, int8);
        let word = p("embeddings.word_embeddings.weight", &[v, h])?;
        let pos = p(
            "embeddings.position_embeddings.weight",
            &[cfg.max_position, h],
        )?;
        let typ = p(
            "embeddings.token_type_embeddings.weight",
            &[cfg.type_vocab_size, h],
        )?;
        let emb_ln_g = p("embeddings.LayerNorm.weight", &[h])?;
        let emb_ln_b = p("embeddings.LayerNorm.bias", &[h])?;
        let mut layers = Vec::with_capacity(cfg.num_layers);
        for l in 0..cfg.num_layers {
            let n = |s: &str| format!("encoder.layer.{l}.{s}");
            layers.push(Layer {
                q_w: p(&n("attention.self.query.weight"), &[h, h])?,
                q_b: p(&n("attention.self.query.bias"), &[h])?,
                k_w: p(&n("attention.self.key.weight"), &[h, h])?,
                k_b: p(&n("attention.self.key.bias"), &[h])?,
                v_w: p(&n("attention.self.value.weight"), &[h, h])?,
                v_b: p(&n("attention.self.value.bias"), &[h])?,
                ao_w: p(&n("attention.output.dense.weight"), &[h, h])?,
                ao_b: p(&n("attention.output.dense.bias"), &[h])?,
                ln1_g: p(&n("attention.output.LayerNorm.weight"), &[h])?,
                ln1_b: p(&n("attention.output.LayerNorm.bias"), &[h])?,
                i_w: p(&n("intermediate.dense.weight"), &[i, h])?,
                i_b: p(&n("intermediate.dense.bias"), &[i])?,
                o_w: p(&n("output.dense.weight"), &[h, i])?,
                o_b: p(&n("output.dense.bias"), &[h])?,
                ln2_g: p(&n("output.LayerNorm.weight"), &[h])?,
                ln2_b: p(&n("output.LayerNorm.bias"), &[h])?,
            });
        }
        let mut m = BertModel {
            hidden: h,
            heads: cfg.num_heads,
            inter: i,
            vocab: v,
            max_position: cfg.max_position,
            eps: cfg.layer_norm_eps,
            activation: cfg.activation,
            word,
            pos,
            typ,
            emb_ln_g,
            emb_ln_b,
            packs: Arc::new(PackStore {
                layers: (0..layers.len()).map(|_| OnceLock::new()).collect(),
                stop: AtomicBool::new(false),
            }),
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
        m.mapped = mapped;
        m.owned = owned;
        Ok(m)
    }

    fn for_each_param(&self, mut f: impl FnMut(&Param)) {
        for p in [
            &self.word,
            &self.pos,
            &self.typ,
            &self.emb_ln_g,
            &self.emb_ln_b,
        ] {
            f(p);
        }
        for l in self.layers.iter() {
            for p in [
                &l.q_w, &l.q_b, &l.k_w, &l.k_b, &l.v_w, &l.v_b, &l.ao_w, &l.ao_b, &l.ln1_g,
                &l.ln1_b, &l.i_w, &l.i_b, &l.o_w, &l.o_b, &l.ln2_g, &l.ln2_b,
            ] {
                f(p);
            }
        }
    }

    /// Packs the weights of every layer for the kernels (see the type's docs):
    /// on a background thread that returns at once when `background`, else on
    /// the calling thread before returning. Layers already packed are skipped;
    /// a second call while the background thread runs does nothing. A no-op
    /// when the engine's own kernels are not in use on this CPU. Costs one
    /// copy of the layers' weight matrices in memory (42 MB for
    /// all-MiniLM-L6-v2); the mapped pages of the originals are released from
    /// resident memory once a layer is packed.
    pub fn prepack(&self, background: bool) {
        if sgemm::isa().is_none() {
            return;
        }
        let (layers, packs) = (Arc::clone(&self.layers), Arc::clone(&self.packs));
        let (h, inter) = (self.hidden, self.inter);
        let word = self.word.file_range();
        let work = move || {
            for (l, slot) in layers.iter().zip(&packs.layers) {
                if packs.stop.load(Ordering::Relaxed) {
                    return;
                }
                if slot.get().is_none() {
                    if let Some(p) = PackedLayer::new(l, h, inter) {
                        let _ = slot.set(p);
                        // From now on products read the packed copy only.
                        for w in [&l.q_w, &l.k_w, &l.v_w, &l.ao_w, &l.i_w, &l.o_w] {
                            w.release_pages();
                        }
                    }
                }
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

    /// Layers whose weights are packed so far, and the bytes those copies hold.
    pub fn packed_layers(&self) -> (usize, usize) {
        let done: Vec<&PackedLayer> = self.packs.layers.iter().filter_map(|s| s.get()).collect();
        (done.len(), done.iter().map(|p| p.bytes()).sum())
    }

    /// How many parameter tensors are read in place from the file, and how many
    /// were converted into owned memory.
    pub fn param_counts(&self) -> (usize, usize) {
        (self.mapped, self.owned)
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
            + heads * max_len * max_len
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
        pooling: Pooling,
        normalize: bool,
        out: &mut [f32],
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
        if max_len > self.max_position {
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
        grow(
            &mut ws.scores,
            if par_heads { nh } else { 1 } * max_len * max_len,
        );
        if par_heads {
            grow(&mut ws.heads, max_len * h);
        }

        // Embeddings: (word + token_type 0) + position, then LayerNorm.
        let word = self.word.as_slice();
        let pos = self.pos.as_slice();
        let typ = &self.typ.as_slice()[..h];
        let hidden = &mut ws.hidden[..total * h];
        let mut rows = hidden.chunks_exact_mut(h);
        for s in seqs {
            for (i, &id) in s.iter().enumerate() {
                let id = id as usize;
                let (Some(row), Some(w), Some(p)) = (
                    rows.next(),
                    word.get(id * h..(id + 1) * h).filter(|_| id < self.vocab),
                    pos.get(i * h..(i + 1) * h),
                ) else {
                    return Err(Error::new(
                        crate::ErrorKind::Internal,
                        format!("forward: token id {id} or position {i} out of range"),
                    ));
                };
                for j in 0..h {
                    row[j] = (w[j] + typ[j]) + p[j];
                }
            }
        }
        let (g, b, eps) = (self.emb_ln_g.as_slice(), self.emb_ln_b.as_slice(), self.eps);
        for_rows(hidden, h, par, |r| ops::layer_norm(r, g, b, eps));

        let scale = 1.0 / (d as f32).sqrt();
        for (l, packed) in self.layers.iter().zip(&self.packs.layers) {
            let packed = packed.get();
            let x = &ws.hidden[..total * h];
            let qkv = &mut ws.qkv[..total * 3 * h];
            // Q, K and V in one pass over x (columns side by side).
            let biases = [l.q_b.as_slice(), l.k_b.as_slice(), l.v_b.as_slice()];
            match packed {
                Some(p) => {
                    gemm::linear_stacked_packed(x, total, h, &p.qkv, &biases, h, qkv, 3 * h, par)
                }
                None => gemm::linear_stacked(
                    x,
                    total,
                    h,
                    &[l.q_w.as_slice(), l.k_w.as_slice(), l.v_w.as_slice()],
                    &biases,
                    h,
                    qkv,
                    3 * h,
                    par,
                ),
            }

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
                    let scores = &mut ws.scores[..nh * len * len];
                    heads
                        .par_chunks_mut(len * d)
                        .zip(scores.par_chunks_mut(len * len))
                        .enumerate()
                        .for_each(|(hd, (dst, sc))| {
                            attend(q_s, len, h, d, hd, scale, sc, dst, d);
                        });
                    for (i, row) in ctx_s.chunks_exact_mut(h).enumerate() {
                        for hd in 0..nh {
                            let src = &heads[hd * len * d + i * d..hd * len * d + (i + 1) * d];
                            row[hd * d..(hd + 1) * d].copy_from_slice(src);
                        }
                    }
                } else {
                    let sc = &mut ws.scores[..len * len];
                    for hd in 0..nh {
                        attend(q_s, len, h, d, hd, scale, sc, &mut ctx_s[hd * d..], h);
                    }
                }
                o += len;
            }

            // Attention output: hidden += ctx · Wᵀ, then bias + LayerNorm.
            let hidden = &mut ws.hidden[..total * h];
            let ctx = &ws.ctx[..total * h];
            let none = Epilogue::None;
            match packed {
                Some(p) => gemm::linear_packed(ctx, total, h, &p.ao, h, hidden, h, true, none, par),
                None => {
                    let w = l.ao_w.as_slice();
                    gemm::linear(ctx, total, h, w, h, hidden, h, true, none, par)
                }
            }
            let (bb, g, b) = (l.ao_b.as_slice(), l.ln1_g.as_slice(), l.ln1_b.as_slice());
            for_rows(hidden, h, par, |r| ops::bias_layer_norm(r, bb, g, b, eps));

            // Feed-forward.
            let inter = &mut ws.inter[..total * self.inter];
            let epi = match self.activation {
                Activation::Gelu => Epilogue::BiasGelu(l.i_b.as_slice()),
                Activation::GeluTanh => Epilogue::BiasGeluTanh(l.i_b.as_slice()),
            };
            let ni = self.inter;
            match packed {
                Some(p) => {
                    gemm::linear_packed(hidden, total, h, &p.inter, ni, inter, ni, false, epi, par);
                    gemm::linear_packed(inter, total, ni, &p.out, h, hidden, h, true, none, par);
                }
                None => {
                    let (wi, wo) = (l.i_w.as_slice(), l.o_w.as_slice());
                    gemm::linear(hidden, total, h, wi, ni, inter, ni, false, epi, par);
                    gemm::linear(inter, total, ni, wo, h, hidden, h, true, none, par);
                }
            }
            let (bb, g, b) = (l.o_b.as_slice(), l.ln2_g.as_slice(), l.ln2_b.as_slice());
            for_rows(hidden, h, par, |r| ops::bias_layer_norm(r, bb, g, b, eps));
        }

        let mut o = 0;
        for (s, dst) in seqs.iter().zip(out.chunks_exact_mut(h)) {
            let len = s.len();
            pooling::pool(&ws.hidden[o * h..(o + len) * h], h, pooling, normalize, dst);
            o += len;
        }
        Ok(())
    }
}

/// One attention head of one sequence: `dst = softmax(scale · Q Kᵀ) · V`.
/// `qkv` holds the sequence's `[len x 3h]` rows (Q | K | V); `dst` receives
/// `len x d` values with row stride `ldd`.
#[allow(clippy::too_many_arguments)]
fn attend(
    qkv: &[f32],
    len: usize,
    h: usize,
    d: usize,
    head: usize,
    scale: f32,
    scores: &mut [f32],
    dst: &mut [f32],
    ldd: usize,
) {
    let ld = 3 * h;
    let c = head * d;
    gemm::matmul_nt(
        len,
        len,
        d,
        scale,
        &qkv[c..],
        ld,
        &qkv[h + c..],
        ld,
        0.0,
        scores,
        len,
        Par::Serial,
    );
    for row in scores.chunks_exact_mut(len) {
        ops::softmax(row);
    }
    gemm::matmul_nn(
        len,
        d,
        len,
        1.0,
        scores,
        len,
        &qkv[2 * h + c..],
        ld,
        0.0,
        dst,
        ldd,
        Par::Serial,
    );
}
