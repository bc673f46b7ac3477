//! Options for opening a model.

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
}

impl Default for Options {
    fn default() -> Self {
        Options {
            threads: None,
            max_seq_length: None,
            normalize: None,
            verify_checksums: true,
            prepack_weights: true,
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
}
