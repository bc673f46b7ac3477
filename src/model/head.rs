//! Classification heads of cross-encoders (HF `*ForSequenceClassification`):
//! the metadata that marks a file as a classifier, the score activation, and
//! the head's arithmetic on the encoder's first-token state.
//!
//! Both layouts HF uses are the same two products, under different names:
//!
//! | layout ([`HeadLayout`]) | dense + tanh on the first token | to the labels |
//! |---|---|---|
//! | `bert` (BERT: the pooler) | `pooler.dense` | `classifier` |
//! | `roberta` (RoBERTa, XLM-R, MPNet) | `classifier.dense` | `classifier.out_proj` |
//! | `modernbert` (`ModernBertPredictionHead`) | `head.dense`, GELU, `head.norm` (LayerNorm) | `classifier` |
//!
//! `logits = W_out · tanh(W_dense · h₀ + b_dense) + b_out` (dropout is off at
//! inference; ModernBERT: `W_out · LayerNorm(gelu(W_dense · h₀)) + b_out`,
//! on the first token's or the mean state, `classifier_pooling`), then the
//! activation sentence-transformers' `CrossEncoder` applies
//! ([`ScoreActivation`]). The head runs in f32 with f64 accumulation
//! whatever precision the encoder runs in: it is two small products per pair.

use std::collections::BTreeMap;

use crate::error::{Error, Result};
use crate::formats::ModelFile;
use crate::model::pooling::{Pooling, SentencePooling};

/// Metadata key marking what a model file computes: absent (or `embedding`)
/// for an embedder, [`TASK_CLASSIFICATION`] for a cross-encoder.
pub const TASK_KEY: &str = "task";
/// [`TASK_KEY`]'s value for a cross-encoder (sequence classification).
pub const TASK_CLASSIFICATION: &str = "classification";

/// Metadata key: the state a classifier's head reads, `cls` (the first
/// token's, the default), `mean` (ModernBERT's `classifier_pooling`) or
/// `last` (an LLM reranker's last token).
pub const CLASSIFIER_POOLING: &str = "classifier_pooling";

/// Metadata key: the activation after a `bert` head's dense product, `tanh`
/// (absent: BERT's pooler) or `gelu` (DeBERTa-v2's `ContextPooler` with
/// `pooler_hidden_act` gelu).
pub const POOLER_ACTIVATION: &str = "pooler_activation";

/// What a model file computes, from its metadata.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Task {
    /// Sentence embeddings (`Embedder`).
    Embedding,
    /// Scores of text pairs (`Reranker`).
    Classification,
}

impl Task {
    /// The task of a file with metadata `md`.
    ///
    /// # Errors
    /// [`crate::ErrorKind::Model`] for an unknown `task` value.
    pub fn of(md: &BTreeMap<String, String>) -> Result<Task> {
        match md.get(TASK_KEY).map(|s| s.trim()) {
            None | Some("embedding") => Ok(Task::Embedding),
            Some(TASK_CLASSIFICATION) => Ok(Task::Classification),
            Some(other) => Err(Error::model(format!(
                "metadata '{TASK_KEY}' = '{other}' is not 'embedding' or '{TASK_CLASSIFICATION}'"
            ))),
        }
    }
}

/// The names of a head's two products.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeadLayout {
    /// BERT: `pooler.dense` then `classifier`.
    Bert,
    /// RoBERTa / XLM-R / MPNet: `classifier.dense` then `classifier.out_proj`.
    Roberta,
    /// ModernBERT: `head.dense` (no bias), GELU, `head.norm` (LayerNorm
    /// without bias), then `classifier`.
    ModernBert,
    /// An LLM scored on two tokens (sentence-transformers' `LogitScore`:
    /// Qwen3-Reranker): the LM head's rows of the "true" and "false" answer
    /// tokens, `logit_score.weight` = `[2 x hidden]`, on the last token's
    /// state; logit = `l_true - l_false`.
    LogitScore,
}

impl HeadLayout {
    /// Every layout.
    pub const ALL: [HeadLayout; 4] = [
        HeadLayout::Bert,
        HeadLayout::Roberta,
        HeadLayout::ModernBert,
        HeadLayout::LogitScore,
    ];

    /// The metadata spelling (`classifier_head`).
    pub fn name(self) -> &'static str {
        match self {
            HeadLayout::Bert => "bert",
            HeadLayout::Roberta => "roberta",
            HeadLayout::ModernBert => "modernbert",
            HeadLayout::LogitScore => "logit_score",
        }
    }

    /// Parses [`HeadLayout::name`].
    pub fn from_name(s: &str) -> Option<HeadLayout> {
        HeadLayout::ALL.into_iter().find(|l| l.name() == s)
    }

    /// Canonical tensor name prefixes: (dense, output); a layout without a
    /// dense product has an empty one.
    pub fn tensors(self) -> (&'static str, &'static str) {
        match self {
            HeadLayout::Bert => ("pooler.dense", "classifier"),
            HeadLayout::Roberta => ("classifier.dense", "classifier.out_proj"),
            HeadLayout::ModernBert => ("head.dense", "classifier"),
            HeadLayout::LogitScore => ("", "logit_score"),
        }
    }

    /// The layout whose tensors a model holds (by canonical name), if any.
    pub fn detect<'a>(mut names: impl Iterator<Item = &'a str> + Clone) -> Option<HeadLayout> {
        HeadLayout::ALL.into_iter().find(|l| {
            let (d, o) = l.tensors();
            if d.is_empty() {
                // Written by the importer, never found in a checkpoint.
                return false;
            }
            let w = |p: &str| format!("{p}.weight");
            let (dw, ow) = (w(d), w(o));
            names.clone().any(|n| n == dw) && names.any(|n| n == ow)
        })
    }
}

/// The function from logits to scores, as sentence-transformers' `CrossEncoder`
/// resolves it (`activation_fn`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScoreActivation {
    /// `1 / (1 + e^-x)` per label (the default for one label).
    Sigmoid,
    /// The logits themselves (the default for several labels).
    Identity,
    /// `tanh` per label.
    Tanh,
    /// Softmax over the labels of a pair (`torch.nn.Softmax()` on `[pairs,
    /// labels]` picks the label dimension).
    Softmax,
}

impl ScoreActivation {
    /// Every activation.
    pub const ALL: [ScoreActivation; 4] = [
        ScoreActivation::Sigmoid,
        ScoreActivation::Identity,
        ScoreActivation::Tanh,
        ScoreActivation::Softmax,
    ];

    /// The metadata spelling (`activation`).
    pub fn name(self) -> &'static str {
        match self {
            ScoreActivation::Sigmoid => "sigmoid",
            ScoreActivation::Identity => "identity",
            ScoreActivation::Tanh => "tanh",
            ScoreActivation::Softmax => "softmax",
        }
    }

    /// Parses [`ScoreActivation::name`].
    pub fn from_name(s: &str) -> Option<ScoreActivation> {
        ScoreActivation::ALL.into_iter().find(|a| a.name() == s)
    }

    /// sentence-transformers' default: sigmoid for one label, identity for several.
    pub fn default_for(num_labels: usize) -> ScoreActivation {
        if num_labels == 1 {
            ScoreActivation::Sigmoid
        } else {
            ScoreActivation::Identity
        }
    }

    /// The activation a saved torch class path names
    /// (`torch.nn.modules.activation.Sigmoid`, `torch.nn.Identity`, ...).
    /// `Ok(None)` for a path outside `torch.`, which sentence-transformers does
    /// not import without `trust_remote_code` (it uses the default instead).
    ///
    /// # Errors
    /// [`crate::ErrorKind::Unsupported`] for a torch class that is not one of
    /// the four.
    pub fn from_torch_path(path: &str) -> Result<Option<ScoreActivation>> {
        if !path.starts_with("torch.") {
            return Ok(None);
        }
        let class = path.rsplit('.').next().unwrap_or("");
        let a = match class {
            "Sigmoid" => ScoreActivation::Sigmoid,
            "Identity" => ScoreActivation::Identity,
            "Tanh" => ScoreActivation::Tanh,
            "Softmax" => ScoreActivation::Softmax,
            _ => {
                return Err(Error::unsupported(format!(
                "activation function '{path}' is not supported (Sigmoid, Identity, Tanh, Softmax)"
            )))
            }
        };
        Ok(Some(a))
    }

    /// Applies the activation to one pair's logits, in place.
    pub fn apply(self, v: &mut [f32]) {
        match self {
            ScoreActivation::Identity => {}
            ScoreActivation::Sigmoid => {
                for x in v.iter_mut() {
                    *x = sigmoid(*x);
                }
            }
            ScoreActivation::Tanh => {
                for x in v.iter_mut() {
                    *x = x.tanh();
                }
            }
            ScoreActivation::Softmax => {
                let m = v.iter().copied().fold(f32::NEG_INFINITY, f32::max);
                let mut sum = 0.0f64;
                for x in v.iter_mut() {
                    *x = (*x - m).exp();
                    sum += f64::from(*x);
                }
                for x in v.iter_mut() {
                    *x = (f64::from(*x) / sum) as f32;
                }
            }
        }
    }
}

/// The logistic function, as torch computes it in f32 (`1 / (1 + e^-x)`,
/// finite for every finite input).
fn sigmoid(x: f32) -> f32 {
    if x >= 0.0 {
        1.0 / (1.0 + (-x).exp())
    } else {
        let e = x.exp();
        e / (1.0 + e)
    }
}

/// A classifier's settings from the metadata: labels, names and activation.
#[derive(Debug, Clone, PartialEq)]
pub struct ClassifierConfig {
    /// `classifier_head`.
    pub layout: HeadLayout,
    /// `num_labels`.
    pub num_labels: usize,
    /// `id2label` (a JSON object `{"0": "LABEL_0", ...}`): label `i`'s name;
    /// `LABEL_i` where the file names none.
    pub labels: Vec<String>,
    /// `activation`.
    pub activation: ScoreActivation,
}

impl ClassifierConfig {
    /// Reads the classifier keys of a file whose [`Task`] is classification.
    ///
    /// # Errors
    /// [`crate::ErrorKind::Model`] naming a missing or invalid key.
    pub fn from_metadata(md: &BTreeMap<String, String>) -> Result<ClassifierConfig> {
        let get = |k: &str| md.get(k).map(|s| s.trim());
        let layout = match get("classifier_head") {
            None => return Err(Error::model("metadata key 'classifier_head' is missing")),
            Some(v) => HeadLayout::from_name(v).ok_or_else(|| {
                Error::model(format!(
                    "metadata 'classifier_head' = '{v}' is not 'bert', 'roberta', 'modernbert' or 'logit_score'"
                ))
            })?,
        };
        let num_labels = match get("num_labels") {
            None => return Err(Error::model("metadata key 'num_labels' is missing")),
            Some(v) => v
                .parse::<usize>()
                .ok()
                .filter(|&n| (1..=crate::limits::MAX_LABELS).contains(&n))
                .ok_or_else(|| {
                    Error::model(format!(
                        "metadata 'num_labels' = '{v}' is not in 1..={}",
                        crate::limits::MAX_LABELS
                    ))
                })?,
        };
        let mut labels: Vec<String> = (0..num_labels).map(|i| format!("LABEL_{i}")).collect();
        if let Some(j) = get("id2label") {
            let map: BTreeMap<String, String> = serde_json::from_str(j).map_err(|e| {
                Error::model(format!(
                    "metadata 'id2label' is not a JSON object of strings: {e}"
                ))
            })?;
            for (k, v) in map {
                let i = k
                    .parse::<usize>()
                    .ok()
                    .filter(|&i| i < num_labels)
                    .ok_or_else(|| {
                        Error::model(format!(
                            "metadata 'id2label': key '{k}' is not a label index below {num_labels}"
                        ))
                    })?;
                labels[i] = v;
            }
        }
        let activation = match get("activation") {
            None => ScoreActivation::default_for(num_labels),
            Some(v) => ScoreActivation::from_name(v).ok_or_else(|| {
                Error::model(format!(
                    "metadata 'activation' = '{v}' is not sigmoid, identity, tanh or softmax"
                ))
            })?,
        };
        Ok(ClassifierConfig {
            layout,
            num_labels,
            labels,
            activation,
        })
    }
}

/// A loaded head: how it pools the last hidden states, both products in f32.
#[derive(Debug, Clone)]
pub struct ClassificationHead {
    cfg: ClassifierConfig,
    /// The state the head reads: the first token's (`[CLS]` / `<s>`), or as
    /// [`CLASSIFIER_POOLING`] says (ModernBERT's mean, an LLM's last token).
    pooling: Pooling,
    hidden: usize,
    /// `[hidden x hidden]`, row-major (output rows).
    dense_w: Vec<f32>,
    /// The dense bias (zeros where the layout has none).
    dense_b: Vec<f32>,
    /// ModernBERT's `head.norm` weight and its eps.
    norm: Option<(Vec<f32>, f64)>,
    /// The pooler's activation is GELU, not tanh (metadata
    /// [`POOLER_ACTIVATION`] `gelu`: DeBERTa-v2's `ContextPooler`).
    gelu_pooler: bool,
    /// `[labels x hidden]`.
    out_w: Vec<f32>,
    out_b: Vec<f32>,
}

impl ClassificationHead {
    /// Builds a head from its parts (shapes checked).
    ///
    /// # Errors
    /// [`crate::ErrorKind::Model`] when a part has the wrong length.
    pub fn new(
        cfg: ClassifierConfig,
        hidden: usize,
        dense_w: Vec<f32>,
        dense_b: Vec<f32>,
        out_w: Vec<f32>,
        out_b: Vec<f32>,
    ) -> Result<ClassificationHead> {
        let labels = cfg.num_labels;
        let (d, o) = cfg.layout.tensors();
        let checks = if cfg.layout == HeadLayout::LogitScore {
            vec![(format!("{o}.weight"), out_w.len(), 2 * hidden)]
        } else {
            vec![
                (format!("{d}.weight"), dense_w.len(), hidden * hidden),
                (format!("{d}.bias"), dense_b.len(), hidden),
                (format!("{o}.weight"), out_w.len(), labels * hidden),
                (format!("{o}.bias"), out_b.len(), labels),
            ]
        };
        for (name, got, want) in checks {
            if got != want {
                return Err(Error::model(format!(
                    "tensor '{name}' has {got} values; the head needs {want} (hidden {hidden}, {labels} labels)"
                )));
            }
        }
        Ok(ClassificationHead {
            cfg,
            pooling: Pooling::Cls,
            hidden,
            dense_w,
            dense_b,
            norm: None,
            gelu_pooler: false,
            out_w,
            out_b,
        })
    }

    /// Loads the head of a classifier file (its metadata and four tensors, of
    /// any float dtype) for an encoder of width `hidden`.
    ///
    /// # Errors
    /// [`crate::ErrorKind::Model`] for bad metadata or a missing or misshapen
    /// tensor, named.
    pub fn load(file: &ModelFile, hidden: usize) -> Result<ClassificationHead> {
        let pooling = classifier_pooling(&file.metadata)?;
        let cfg = ClassifierConfig::from_metadata(&file.metadata)?;
        let (d, o) = cfg.layout.tensors();
        let labels = cfg.num_labels;
        let read = |name: String, shape: &[usize]| -> Result<Vec<f32>> {
            let t = file.tensor(&name).ok_or_else(|| {
                Error::model(format!(
                    "classifier tensor '{name}' is missing ({} head)",
                    cfg.layout.name()
                ))
            })?;
            if t.shape != shape {
                return Err(Error::model(format!(
                    "tensor '{name}' has shape {:?}, expected {shape:?}",
                    t.shape
                )));
            }
            if !matches!(
                t.dtype,
                crate::formats::DType::F32
                    | crate::formats::DType::F16
                    | crate::formats::DType::BF16
            ) {
                return Err(Error::model(format!(
                    "tensor '{name}' has dtype {}, expected a float type",
                    t.dtype.name()
                )));
            }
            Ok(file.tensor_to_f32(t))
        };
        if cfg.layout == HeadLayout::LogitScore {
            if labels != 1 {
                return Err(Error::model(format!(
                    "a logit_score head has one label, not {labels}"
                )));
            }
            let out_w = read(format!("{o}.weight"), &[2, hidden])?;
            let head =
                ClassificationHead::new(cfg, hidden, Vec::new(), Vec::new(), out_w, Vec::new())?;
            return Ok(ClassificationHead { pooling, ..head });
        }
        let dense_w = read(format!("{d}.weight"), &[hidden, hidden])?;
        let modern = cfg.layout == HeadLayout::ModernBert;
        let dense_b = if modern && file.tensor(&format!("{d}.bias")).is_none() {
            vec![0.0; hidden]
        } else {
            read(format!("{d}.bias"), &[hidden])?
        };
        let out_w = read(format!("{o}.weight"), &[labels, hidden])?;
        let out_b = read(format!("{o}.bias"), &[labels])?;
        let mut head =
            ClassificationHead::new(cfg.clone(), hidden, dense_w, dense_b, out_w, out_b)?;
        if modern {
            let eps = file
                .metadata
                .get("layer_norm_eps")
                .and_then(|v| v.trim().parse::<f64>().ok())
                .unwrap_or(1e-5);
            head.norm = Some((read("head.norm.weight".into(), &[hidden])?, eps));
        }
        head.gelu_pooler = match file.metadata.get(POOLER_ACTIVATION).map(|s| s.trim()) {
            None | Some("tanh") => false,
            Some("gelu") => true,
            Some(v) => {
                return Err(Error::model(format!(
                    "metadata '{POOLER_ACTIVATION}' = '{v}' is not 'tanh' or 'gelu'"
                )))
            }
        };
        Ok(ClassificationHead { pooling, ..head })
    }

    /// The classifier's settings.
    pub fn config(&self) -> &ClassifierConfig {
        &self.cfg
    }

    /// Number of labels (logits per pair).
    pub fn num_labels(&self) -> usize {
        self.cfg.num_labels
    }

    /// The state the head reads (the first token's, the mean, the last).
    pub fn pooling(&self) -> Pooling {
        self.pooling
    }

    /// The encoder width the head reads.
    pub fn hidden(&self) -> usize {
        self.hidden
    }

    /// The logits of each sequence of a chunk (`seqs`, their last hidden
    /// states `hidden` in the encoder's layout), `num_labels` per sequence:
    /// the head's pooling, then [`ClassificationHead::logits`].
    pub fn apply(&self, seqs: &[&[u32]], hidden: &[f32]) -> Vec<f32> {
        let (h, labels) = (self.hidden, self.num_labels());
        let pooling = SentencePooling::new(self.pooling, false);
        let mut pooled = vec![0.0f32; h];
        let mut rows = vec![0.0f32; seqs.len() * labels];
        let mut o = 0;
        for (s, row) in seqs.iter().zip(rows.chunks_exact_mut(labels)) {
            pooling.apply(&hidden[o * h..(o + s.len()) * h], h, &mut pooled);
            o += s.len();
            self.logits(&pooled, row);
        }
        rows
    }

    /// The logits of one pair from the encoder's first-token state `h0`
    /// (`hidden` values) into `out` (`num_labels` values).
    pub fn logits(&self, h0: &[f32], out: &mut [f32]) {
        let h = self.hidden;
        debug_assert_eq!(h0.len(), h);
        if self.cfg.layout == HeadLayout::LogitScore {
            // Each answer token's logit rounded to f32 (the LM head's
            // output), then their difference in f32, as LogitScore.
            let mut rows = self.out_w.chunks_exact(h);
            let mut logit = || rows.next().map_or(0.0, |r| dot(r, h0) as f32);
            let (t, f) = (logit(), logit());
            out[0] = t - f;
            return;
        }
        let pooled: Vec<f32> = match &self.norm {
            None => self
                .dense_w
                .chunks_exact(h)
                .zip(&self.dense_b)
                .map(|(row, &b)| {
                    let v = dot(row, h0) + f64::from(b);
                    if self.gelu_pooler {
                        // DeBERTa's `ContextPooler`: erf GELU.
                        (0.5 * v * (1.0 + crate::kernels::reference::erf_f64(v / 2f64.sqrt())))
                            as f32
                    } else {
                        v.tanh() as f32
                    }
                })
                .collect(),
            Some((g, eps)) => {
                // ModernBertPredictionHead: LayerNorm(gelu(dense(h))).
                let x: Vec<f64> = self
                    .dense_w
                    .chunks_exact(h)
                    .zip(&self.dense_b)
                    .map(|(row, &b)| {
                        let v = dot(row, h0) + f64::from(b);
                        0.5 * v * (1.0 + crate::kernels::reference::erf_f64(v / 2f64.sqrt()))
                    })
                    .collect();
                let mean = x.iter().sum::<f64>() / h as f64;
                let var = x.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / h as f64;
                let inv = 1.0 / (var + eps).sqrt();
                x.iter()
                    .zip(g)
                    .map(|(v, &g)| ((v - mean) * inv * f64::from(g)) as f32)
                    .collect()
            }
        };
        for ((o, row), &b) in out
            .iter_mut()
            .zip(self.out_w.chunks_exact(h))
            .zip(&self.out_b)
        {
            *o = (dot(row, &pooled) + f64::from(b)) as f32;
        }
    }
}

/// The state a classifier reads ([`CLASSIFIER_POOLING`]): the first token's
/// (absent, `cls`), the mean of all tokens' (ModernBERT's `mean`), or the
/// last token's (`last`, an LLM reranker).
///
/// # Errors
/// [`crate::ErrorKind::Model`] for another value.
fn classifier_pooling(md: &BTreeMap<String, String>) -> Result<Pooling> {
    match md.get(CLASSIFIER_POOLING).map(|s| s.trim()) {
        None | Some("cls") => Ok(Pooling::Cls),
        Some("mean") => Ok(Pooling::Mean),
        Some("last") => Ok(Pooling::LastToken),
        Some(v) => Err(Error::model(format!(
            "metadata '{CLASSIFIER_POOLING}' = '{v}' is not 'cls', 'mean' or 'last'"
        ))),
    }
}

/// `a · b` accumulated in f64.
fn dot(a: &[f32], b: &[f32]) -> f64 {
    a.iter()
        .zip(b)
        .map(|(&x, &y)| f64::from(x) * f64::from(y))
        .sum()
}

/// The message refusing an embedding model where a reranker is expected.
pub(crate) fn not_a_classifier() -> Error {
    Error::model(
        "this is an embedding model (no classification head, metadata 'task' is not \
         'classification'): open it as an embedder (Engine / Embedder, embd_open, embd encode), \
         not as a Reranker; a cross-encoder is converted from a HF *ForSequenceClassification folder",
    )
}

/// The message refusing a classifier where an embedder is expected.
pub(crate) fn not_an_embedder() -> Error {
    Error::model(
        "this is a cross-encoder (metadata 'task' = 'classification'): it scores text pairs \
         and gives no embeddings; open it with Reranker (embd_rerank_open, embd rerank), \
         not as an embedder",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(layout: HeadLayout, labels: usize) -> ClassifierConfig {
        ClassifierConfig {
            layout,
            num_labels: labels,
            labels: (0..labels).map(|i| format!("LABEL_{i}")).collect(),
            activation: ScoreActivation::default_for(labels),
        }
    }

    #[test]
    fn head_arithmetic_by_hand() {
        // hidden 2, two labels; values chosen so every step is checkable:
        // dense = [[1, 0], [0, 2]], b = [0, -1]; h0 = [0.5, 1]
        // pre-tanh [0.5, 1.0] -> tanh [0.46211716, 0.76159416]
        // out = [[1, 1], [2, -1]], b = [0.25, 0]
        // logits [1.22371132 + 0.25, 0.92423432 - 0.76159416]
        let classic = HeadLayout::ALL
            .into_iter()
            .filter(|&l| l != HeadLayout::LogitScore);
        for layout in classic {
            let head = ClassificationHead::new(
                cfg(layout, 2),
                2,
                vec![1.0, 0.0, 0.0, 2.0],
                vec![0.0, -1.0],
                vec![1.0, 1.0, 2.0, -1.0],
                vec![0.25, 0.0],
            )
            .unwrap();
            let mut out = [0.0f32; 2];
            head.logits(&[0.5, 1.0], &mut out);
            assert!((out[0] - 1.473_711_3).abs() < 1e-6, "{out:?}");
            assert!((out[1] - 0.162_640_16).abs() < 1e-6, "{out:?}");
        }
    }

    #[test]
    fn logit_score_is_the_difference_of_two_rows() {
        // rows yes = [1, 2], no = [-1, 0.5]; h = [0.5, 1]: 2.5 - 0 = 2.5.
        let head = ClassificationHead::new(
            cfg(HeadLayout::LogitScore, 1),
            2,
            Vec::new(),
            Vec::new(),
            vec![1.0, 2.0, -1.0, 0.5],
            Vec::new(),
        )
        .unwrap();
        let mut out = [0.0f32; 1];
        head.logits(&[0.5, 1.0], &mut out);
        assert_eq!(out[0], 2.5);
        // The two rows are required.
        let short = ClassificationHead::new(
            cfg(HeadLayout::LogitScore, 1),
            2,
            vec![],
            vec![],
            vec![1.0; 2],
            vec![],
        );
        assert!(short.is_err());
    }

    #[test]
    fn shapes_are_checked() {
        let e = ClassificationHead::new(
            cfg(HeadLayout::Roberta, 1),
            2,
            vec![0.0; 4],
            vec![0.0; 2],
            vec![0.0; 3],
            vec![0.0; 1],
        )
        .unwrap_err();
        assert!(e.message().contains("classifier.out_proj.weight"), "{e}");
    }

    #[test]
    fn activations() {
        let mut v = [0.0f32, 2.0, -2.0];
        ScoreActivation::Sigmoid.apply(&mut v);
        assert_eq!(v[0], 0.5);
        assert!((v[1] - 0.880_797_1).abs() < 1e-7);
        assert!((v[2] - 0.119_202_92).abs() < 1e-7);
        let mut v = [1.0f32, 1.0];
        ScoreActivation::Softmax.apply(&mut v);
        assert_eq!(v, [0.5, 0.5]);
        let mut v = [-100.0f32, 100.0];
        ScoreActivation::Sigmoid.apply(&mut v);
        assert!(v[0] > 0.0 && v[0] < 1e-40 && v[1] == 1.0, "{v:?}");
        assert_eq!(ScoreActivation::default_for(1), ScoreActivation::Sigmoid);
        assert_eq!(ScoreActivation::default_for(3), ScoreActivation::Identity);
    }

    #[test]
    fn torch_paths() {
        let p = ScoreActivation::from_torch_path;
        assert_eq!(
            p("torch.nn.modules.activation.Sigmoid").unwrap(),
            Some(ScoreActivation::Sigmoid)
        );
        assert_eq!(
            p("torch.nn.modules.linear.Identity").unwrap(),
            Some(ScoreActivation::Identity)
        );
        assert_eq!(p("my_module.Custom").unwrap(), None);
        assert!(p("torch.nn.modules.activation.GELU").is_err());
    }

    #[test]
    fn metadata() {
        let md: BTreeMap<String, String> = [
            ("task", "classification"),
            ("classifier_head", "bert"),
            ("num_labels", "3"),
            ("id2label", r#"{"0": "contradiction", "2": "neutral"}"#),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        assert_eq!(Task::of(&md).unwrap(), Task::Classification);
        let c = ClassifierConfig::from_metadata(&md).unwrap();
        assert_eq!(c.labels, ["contradiction", "LABEL_1", "neutral"]);
        assert_eq!(c.activation, ScoreActivation::Identity);
        let mut bad = md.clone();
        bad.insert("id2label".into(), r#"{"3": "x"}"#.into());
        assert!(ClassifierConfig::from_metadata(&bad).is_err());
        bad = md.clone();
        bad.insert("num_labels".into(), "0".into());
        assert!(ClassifierConfig::from_metadata(&bad).is_err());
        assert_eq!(Task::of(&BTreeMap::new()).unwrap(), Task::Embedding);
    }

    #[test]
    fn layout_detection() {
        let bert = ["pooler.dense.weight", "classifier.weight", "x"];
        assert_eq!(
            HeadLayout::detect(bert.iter().copied()),
            Some(HeadLayout::Bert)
        );
        let rob = ["classifier.dense.weight", "classifier.out_proj.weight"];
        assert_eq!(
            HeadLayout::detect(rob.iter().copied()),
            Some(HeadLayout::Roberta)
        );
        assert_eq!(
            HeadLayout::detect(["pooler.dense.weight"].iter().copied()),
            None
        );
    }
}
