//! Options for opening a model.

use std::ops::ControlFlow;
use std::sync::Arc;

use crate::quantize::OutputRanges;

use crate::model::precision::Precision;
use crate::vector::Matryoshka;

/// How to open a model. Every field has a sensible default; `Options::new()`
/// gives the model's own settings, all threads of the machine and verified
/// checksums.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    /// Worker threads for one embedding call; `None` = available parallelism.
    pub threads: Option<usize>,
    /// Override of the model's `max_seq_length` (tokens incl. `[CLS]`/`[SEP]`);
    /// must be in `2..=max_position_emb`.
    pub max_seq_length: Option<usize>,
    /// Override of the model's `normalize` metadata.
    pub normalize: Option<bool>,
    /// Verify the data and file CRCs at open (default true). Turning this off is
    /// an explicit start-up optimisation; the header CRC is always verified.
    pub verify_checksums: bool,
    /// Pack the layers' weight matrices into the kernels' panel layout on a
    /// background thread (default true), started by the first embedding call
    /// (so opening stays cheap): before it for a large first call, after it for
    /// a small one. Calls then read the packed copy instead of packing panels
    /// per call (much faster for short inputs); until it is ready they pack on
    /// the fly. Results are identical either way. The copy costs the size of
    /// those matrices in memory (42 MB for all-MiniLM-L6-v2); the mapped
    /// originals are released from the process's resident memory.
    pub prepack_weights: bool,
    /// Arithmetic of the encoder's dense layers; `None` = the file's own
    /// ([`Precision::Int8`] for files converted with `--dtype int8`,
    /// [`Precision::Bf16`] for `--dtype bf16` (packed), [`Precision::F32`]
    /// otherwise). Asking for a lower precision than the
    /// file's converts the weights at open.
    pub precision: Option<Precision>,
    /// Matryoshka truncation: keep only the first `K` components of every
    /// vector (`None` = all of them). When the model normalizes, the cut vector
    /// is L2-normalized again (what a cosine or dot-product search needs), as
    /// sentence-transformers' `truncate_dim` with `normalize_embeddings`.
    /// Must be in `1..=dim`, checked at open. [`crate::Embedder::dim`] then
    /// reports `K`.
    pub dimensions: Option<usize>,
    /// How a sentence vector is cut to [`Options::dimensions`]: the
    /// default [`Matryoshka::Truncate`] is sentence-transformers'
    /// `truncate_dim`; [`Matryoshka::LayerNorm`] is nomic-embed-text-v1.5's
    /// recipe (layer norm without affine, cut, normalize), applied to every
    /// sentence vector, cut or not. No model file says which one a model
    /// wants. Token vectors are always truncated.
    pub matryoshka: Matryoshka,
    /// Per-dimension ranges for `int8` / `uint8` output
    /// ([`crate::quantize::OutputPrecision`]), overriding the ranges stored in
    /// the model file; must cover the output dimension (after
    /// [`Options::dimensions`]), checked at open.
    pub output_ranges: Option<OutputRanges>,
    /// A prompt prepended to every text, as sentence-transformers' `prompt`
    /// (`Some("")` turns the model's default prompt off). When the model's
    /// pooling config says `include_prompt: false`, the prompt's tokens (and
    /// `[CLS]`) are left out of mean and max pooling. Exclusive with
    /// [`Options::prompt_name`].
    pub prompt: Option<String>,
    /// The name of a prompt stored in the model file (from
    /// `config_sentence_transformers.json`'s `prompts`), as
    /// sentence-transformers' `prompt_name`. Without `prompt` and
    /// `prompt_name`, the model's `default_prompt_name` applies, if any.
    pub prompt_name: Option<String>,
    /// Long texts: `None` (the default) truncates a text to `max_seq_length`
    /// tokens, as sentence-transformers does. `Some(overlap)` embeds a longer
    /// text as windows of `max_seq_length` tokens, each with its own `[CLS]`
    /// and `[SEP]`, consecutive windows sharing `overlap` tokens (less than
    /// `max_seq_length - 2`, checked at open); the windows' vectors are
    /// averaged weighted by their token counts, then L2-normalized when the
    /// model normalizes.
    pub window_overlap: Option<usize>,
    /// Called by every embedding call on the calling thread, between chunks
    /// of work (at least every ~50 ms of work; windowed texts: every 16
    /// texts), with the number of the call's texts whose vectors are complete
    /// (rows `0..done`) and the call's number of texts. Returning
    /// [`ControlFlow::Break`] stops the call with [`crate::ErrorKind::Cancelled`];
    /// rows `0..done` of the output are then complete.
    pub progress: Option<ProgressFn>,
}

/// A progress callback for [`Options::progress`]: `f(done, total)`, return
/// [`ControlFlow::Break`] to cancel. Compared by identity.
#[derive(Clone)]
pub struct ProgressFn(pub Arc<dyn Fn(usize, usize) -> ControlFlow<()> + Send + Sync>);

impl ProgressFn {
    /// Wraps a closure.
    pub fn new(f: impl Fn(usize, usize) -> ControlFlow<()> + Send + Sync + 'static) -> Self {
        ProgressFn(Arc::new(f))
    }

    /// Calls it.
    pub fn call(&self, done: usize, total: usize) -> ControlFlow<()> {
        (self.0)(done, total)
    }
}

impl std::fmt::Debug for ProgressFn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ProgressFn(..)")
    }
}

impl PartialEq for ProgressFn {
    fn eq(&self, other: &Self) -> bool {
        std::ptr::addr_eq(Arc::as_ptr(&self.0), Arc::as_ptr(&other.0))
    }
}

impl Eq for ProgressFn {}

/// What one embedding call does with a text longer than the model's
/// `max_seq_length` ([`CallOptions::truncation`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum Truncation {
    /// Keep the first tokens (sentence-transformers' default).
    #[default]
    Right,
    /// Keep the last tokens (HF `truncation_side="left"`, TEI's
    /// `truncation_direction: "left"`).
    Left,
    /// Refuse the text with [`crate::ErrorKind::LimitExceeded`] (TEI's
    /// `truncate: false`).
    Refuse,
}

impl Truncation {
    /// The lowercase name: `right`, `left` or `refuse`.
    pub fn name(self) -> &'static str {
        match self {
            Truncation::Right => "right",
            Truncation::Left => "left",
            Truncation::Refuse => "refuse",
        }
    }

    /// Parses a name of [`Truncation::name`] (ASCII case-insensitive).
    pub fn from_name(s: &str) -> Option<Truncation> {
        [Truncation::Right, Truncation::Left, Truncation::Refuse]
            .into_iter()
            .find(|t| t.name().eq_ignore_ascii_case(s))
    }
}

/// Options of one embedding call ([`crate::Embedder::embed_with`]), over the
/// ones the model was opened with: one open model serves queries and
/// documents, normalized or not, at any Matryoshka size. `CallOptions::default()`
/// changes nothing (the vectors are bit-identical to [`crate::Embedder::embed_into`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CallOptions {
    /// L2-normalize the vectors (`None`: as the model was opened).
    pub normalize: Option<bool>,
    /// Keep the first `K` components of each vector, `K` in `1..=hidden_size`
    /// (the model's full output, whatever [`Options::dimensions`] was); cut
    /// from the full vector and normalized again when normalizing. `None`: the
    /// open-time output dimension.
    pub dimensions: Option<usize>,
    /// The prompt prepended to every text of this call, replacing the
    /// open-time one (`Some("")`: none). Exclusive with `prompt_name`.
    pub prompt: Option<String>,
    /// The name of one of the model's stored prompts, replacing the open-time
    /// prompt.
    pub prompt_name: Option<String>,
    /// What a text longer than `max_seq_length` tokens becomes.
    pub truncation: Truncation,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            threads: None,
            max_seq_length: None,
            normalize: None,
            verify_checksums: true,
            prepack_weights: true,
            precision: None,
            dimensions: None,
            matryoshka: Matryoshka::Truncate,
            output_ranges: None,
            prompt: None,
            prompt_name: None,
            window_overlap: None,
            progress: None,
        }
    }
}

impl Options {
    /// The defaults.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets the number of worker threads (0 = available parallelism).
    #[must_use]
    pub fn threads(mut self, n: usize) -> Self {
        self.threads = if n == 0 { None } else { Some(n) };
        self
    }

    /// Overrides the maximum sequence length (tokens incl. `[CLS]`/`[SEP]`).
    #[must_use]
    pub fn max_seq_length(mut self, n: usize) -> Self {
        self.max_seq_length = Some(n);
        self
    }

    /// Overrides L2 normalization of the output.
    #[must_use]
    pub fn normalize(mut self, on: bool) -> Self {
        self.normalize = Some(on);
        self
    }

    /// Turns CRC verification of data and file at open on or off.
    #[must_use]
    pub fn verify_checksums(mut self, on: bool) -> Self {
        self.verify_checksums = on;
        self
    }

    /// Turns background packing of the weights after open on or off (see
    /// [`Options::prepack_weights`]).
    #[must_use]
    pub fn prepack_weights(mut self, on: bool) -> Self {
        self.prepack_weights = on;
        self
    }

    /// Sets the arithmetic of the dense layers (see [`Precision`]).
    #[must_use]
    pub fn precision(mut self, p: Precision) -> Self {
        self.precision = Some(p);
        self
    }

    /// Keeps only the first `k` components of every vector (see
    /// [`Options::dimensions`]).
    #[must_use]
    pub fn dimensions(mut self, k: usize) -> Self {
        self.dimensions = Some(k);
        self
    }

    /// Sets the Matryoshka recipe (see [`Options::matryoshka`]).
    #[must_use]
    pub fn matryoshka(mut self, m: Matryoshka) -> Self {
        self.matryoshka = m;
        self
    }

    /// Sets the ranges of `int8` / `uint8` output (see
    /// [`Options::output_ranges`]).
    #[must_use]
    pub fn output_ranges(mut self, r: OutputRanges) -> Self {
        self.output_ranges = Some(r);
        self
    }

    /// Prepends `p` to every text (see [`Options::prompt`]).
    #[must_use]
    pub fn prompt(mut self, p: impl Into<String>) -> Self {
        self.prompt = Some(p.into());
        self
    }

    /// Uses the model's prompt named `name` (see [`Options::prompt_name`]).
    #[must_use]
    pub fn prompt_name(mut self, name: impl Into<String>) -> Self {
        self.prompt_name = Some(name.into());
        self
    }

    /// Embeds long texts as overlapping windows instead of truncating them
    /// (see [`Options::window_overlap`]).
    #[must_use]
    pub fn window_overlap(mut self, overlap: usize) -> Self {
        self.window_overlap = Some(overlap);
        self
    }

    /// Sets the progress callback (see [`Options::progress`]).
    #[must_use]
    pub fn progress(
        mut self,
        f: impl Fn(usize, usize) -> ControlFlow<()> + Send + Sync + 'static,
    ) -> Self {
        self.progress = Some(ProgressFn::new(f));
        self
    }
}
