//! Sentence pooling of token vectors: mean, `[CLS]`, max; then optional L2
//! normalisation.
//!
//! Everything about a pooling mode lives here: the [`Pooling`] enum, its
//! metadata name (read by the model config, written by the importers, returned
//! by the C API), its sentence-transformers `pooling_mode_*` flag, the
//! implementation ([`pool`]) and the f64 oracle the tests compare it with
//! ([`pool_f64`]). A new mode is a variant here plus its arms below.

use std::ffi::CStr;
use std::fmt;

/// How token vectors are pooled into one sentence vector.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pooling {
    /// Mean over tokens with attention mask 1 (`[CLS]` and `[SEP]` included).
    Mean,
    /// The `[CLS]` token's vector.
    Cls,
    /// Element-wise max over tokens with attention mask 1.
    Max,
    /// The last token's vector (decoders: the only token that has seen the
    /// whole text; sentence-transformers `lasttoken`).
    LastToken,
}

/// sentence-transformers `Pooling` config flags (`pooling_mode_*`) and the
/// mode name each selects, the modes this engine does not run included (they
/// are refused by name: [`Pooling::from_name`] does not know them).
pub const SENTENCE_TRANSFORMERS_FLAGS: &[(&str, &str)] = &[
    ("pooling_mode_mean_tokens", "mean"),
    ("pooling_mode_cls_token", "cls"),
    ("pooling_mode_max_tokens", "max"),
    ("pooling_mode_mean_sqrt_len_tokens", "mean_sqrt_len"),
    ("pooling_mode_weightedmean_tokens", "weightedmean"),
    ("pooling_mode_lasttoken", "lasttoken"),
];

impl Pooling {
    /// Every mode, in the order messages list them.
    pub const ALL: [Pooling; 4] = [
        Pooling::Mean,
        Pooling::Cls,
        Pooling::Max,
        Pooling::LastToken,
    ];

    /// The metadata spelling (also the C API's `embd_pooling` string and the
    /// sentence-transformers `pooling_mode` value).
    pub fn name(self) -> &'static str {
        self.c_name().to_str().expect("ASCII names")
    }

    /// The metadata spelling as a static NUL-terminated string (the C API's
    /// `embd_pooling`).
    pub fn c_name(self) -> &'static CStr {
        match self {
            Pooling::Mean => c"mean",
            Pooling::Cls => c"cls",
            Pooling::Max => c"max",
            Pooling::LastToken => c"lasttoken",
        }
    }

    /// Parses the metadata spelling.
    pub fn from_name(s: &str) -> Option<Pooling> {
        Pooling::ALL.into_iter().find(|p| p.name() == s)
    }

    /// The supported names for messages: `mean, cls, max or lasttoken`.
    pub fn expected() -> String {
        let names: Vec<&str> = Pooling::ALL.iter().map(|p| p.name()).collect();
        match names.split_last() {
            Some((last, rest)) if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
            _ => names.concat(),
        }
    }
}

impl fmt::Display for Pooling {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A sentence-transformers `Pooling` module as the forward pass applies it:
/// the mode, whether the vectors are L2-normalised after it, and how many
/// leading tokens mean and max pooling leave out (`skip`: the `[CLS]` and the
/// prompt when `include_prompt` is false; they stay in attention). `[CLS]`
/// pooling ignores `skip`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SentencePooling {
    /// The pooling mode.
    pub mode: Pooling,
    /// L2-normalise the pooled vector.
    pub normalize: bool,
    /// Leading tokens left out of mean and max pooling.
    pub skip: usize,
}

impl SentencePooling {
    /// `mode` over every token, normalised when `normalize`.
    pub fn new(mode: Pooling, normalize: bool) -> SentencePooling {
        SentencePooling {
            mode,
            normalize,
            skip: 0,
        }
    }

    /// Pools one sequence's `[len x width]` hidden rows into `out[..width]`.
    pub fn apply(&self, hidden: &[f32], width: usize, out: &mut [f32]) {
        let len = hidden.len().checked_div(width).unwrap_or(0);
        let skip = match self.mode {
            Pooling::Cls | Pooling::LastToken => 0,
            _ => self.skip.min(len),
        };
        pool(
            &hidden[skip * width..],
            width,
            self.mode,
            self.normalize,
            out,
        );
    }
}

/// Pools the `[rows x width]` hidden states of one sequence (every token has
/// attention mask 1) into `out[..width]`, then L2-normalises if asked.
/// Mean sums in f64 (column blocks on the stack, no allocation).
pub fn pool(hidden: &[f32], width: usize, pooling: Pooling, normalize: bool, out: &mut [f32]) {
    let out = &mut out[..width];
    let rows = hidden.len().checked_div(width).unwrap_or(0);
    if rows == 0 {
        out.fill(0.0);
        return;
    }
    match pooling {
        Pooling::Cls => out.copy_from_slice(&hidden[..width]),
        Pooling::LastToken => out.copy_from_slice(&hidden[(rows - 1) * width..rows * width]),
        Pooling::Max => {
            out.copy_from_slice(&hidden[..width]);
            for row in hidden.chunks_exact(width).skip(1) {
                for (o, &v) in out.iter_mut().zip(row) {
                    *o = o.max(v);
                }
            }
        }
        Pooling::Mean => {
            const BLOCK: usize = 64;
            let inv = 1.0 / rows as f64;
            let mut j0 = 0;
            while j0 < width {
                let nb = BLOCK.min(width - j0);
                let mut acc = [0.0f64; BLOCK];
                for row in hidden.chunks_exact(width) {
                    for (a, &v) in acc.iter_mut().zip(&row[j0..j0 + nb]) {
                        *a += f64::from(v);
                    }
                }
                for (o, a) in out[j0..j0 + nb].iter_mut().zip(&acc) {
                    *o = (a * inv) as f32;
                }
                j0 += nb;
            }
        }
    }
    if normalize {
        crate::vector::l2_normalize(out);
    }
}

/// The f64 oracle of [`pool`] for tests: pools `[len x width]` hidden states
/// and optionally L2-normalises, obviously rather than fast.
pub fn pool_f64(hidden: &[f32], width: usize, pooling: Pooling, normalize: bool) -> Vec<f32> {
    let rows = hidden.len() / width;
    let mut out: Vec<f64> = match pooling {
        Pooling::Cls => hidden[..width].iter().map(|&v| f64::from(v)).collect(),
        Pooling::LastToken => hidden[(rows - 1) * width..rows * width]
            .iter()
            .map(|&v| f64::from(v))
            .collect(),
        Pooling::Mean => (0..width)
            .map(|j| {
                (0..rows)
                    .map(|i| f64::from(hidden[i * width + j]))
                    .sum::<f64>()
                    / rows as f64
            })
            .collect(),
        Pooling::Max => (0..width)
            .map(|j| {
                (0..rows)
                    .map(|i| f64::from(hidden[i * width + j]))
                    .fold(f64::NEG_INFINITY, f64::max)
            })
            .collect(),
    };
    if normalize {
        let n = out.iter().map(|v| v * v).sum::<f64>().sqrt().max(1e-12);
        for v in &mut out {
            *v /= n;
        }
    }
    out.iter().map(|&v| v as f32).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pooling_matches_reference() {
        for width in [1usize, 3, 64, 65, 130] {
            for rows in [1usize, 2, 7] {
                let h: Vec<f32> = (0..rows * width)
                    .map(|i| ((i * 7919 % 23) as f32 - 11.0) * 0.13)
                    .collect();
                for p in [Pooling::Mean, Pooling::Cls, Pooling::Max] {
                    for norm in [false, true] {
                        let mut out = vec![9.0f32; width + 1];
                        pool(&h, width, p, norm, &mut out);
                        let want = pool_f64(&h, width, p, norm);
                        for (a, b) in out.iter().zip(&want) {
                            assert!((a - b).abs() < 1e-6, "{p} {norm} {width} {rows}");
                        }
                        assert_eq!(out[width], 9.0);
                    }
                }
            }
        }
    }

    #[test]
    fn names_round_trip() {
        for p in Pooling::ALL {
            assert_eq!(Pooling::from_name(p.name()), Some(p));
            assert_eq!(p.c_name().to_bytes(), p.name().as_bytes());
        }
        assert_eq!(Pooling::from_name("sum"), None);
        assert_eq!(Pooling::expected(), "mean, cls, max or lasttoken");
    }
}
