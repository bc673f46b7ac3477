//! The static word-embedding runtime: finalfusion [`Embeddings`] looked up word
//! by word and averaged into a sentence vector (what
//! [`crate::StaticEmbedder`] runs). The container side (parsing and writing
//! `.fifu`, the [`Embeddings`] type) is [`crate::formats::finalfusion`].

use crate::formats::finalfusion::{Embeddings, Subwords};

/// FNV-1a 64-bit over the finalfusion n-gram key: char count as u64 LE, then
/// each char as u32 LE.
pub fn ff_hash(ngram: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut feed = |b: &[u8]| {
        for &x in b {
            h ^= u64::from(x);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    };
    feed(&(ngram.chars().count() as u64).to_le_bytes());
    for ch in ngram.chars() {
        feed(&(ch as u32).to_le_bytes());
    }
    h
}

/// fastText's FNV-1a 32-bit, with each byte sign-extended before the xor.
pub fn fasttext_hash(ngram: &str) -> u32 {
    let mut h: u32 = 2_166_136_261;
    for b in ngram.bytes() {
        h ^= (b as i8) as u32;
        h = h.wrapping_mul(16_777_619);
    }
    h
}

/// The n-grams of `word` (already bracketed) in finalfusion order: start
/// ascending, length descending from `min(max_n, rest)` to `min_n`.
pub fn ngrams(word: &str, min_n: usize, max_n: usize) -> Vec<&str> {
    let offs: Vec<usize> = word
        .char_indices()
        .map(|(i, _)| i)
        .chain(std::iter::once(word.len()))
        .collect();
    let nchars = offs.len() - 1;
    let mut out = Vec::new();
    if min_n == 0 {
        return out;
    }
    for i in 0..nchars {
        let rest = nchars - i;
        let top = max_n.min(rest);
        let mut n = top;
        while n >= min_n {
            out.push(&word[offs[i]..offs[i + n]]);
            n -= 1;
        }
    }
    out
}

impl Embeddings {
    /// Storage row `i` (reconstructed for quantized storage), or `None` when out of range.
    pub fn row(&self, i: usize) -> Option<Vec<f32>> {
        if i >= self.rows {
            return None;
        }
        match &self.quant {
            None => {
                let t = self.model.tensor("embeddings")?;
                let b = self.model.tensor_bytes(t);
                let row = b.get(i * self.dims * 4..(i + 1) * self.dims * 4)?;
                Some(
                    row.chunks_exact(4)
                        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                        .collect(),
                )
            }
            Some(q) => {
                let codes_t = self.model.tensor("quantized.codes")?;
                let codes = self.model.tensor_bytes(codes_t);
                let sub = q.r / q.q;
                let mut out = vec![0f32; q.r];
                for s in 0..q.q {
                    let code = usize::from(*codes.get(i * q.q + s)?);
                    let base = (s * q.c + code) * sub;
                    out[s * sub..(s + 1) * sub].copy_from_slice(q.centroids.get(base..base + sub)?);
                }
                if let Some(p) = &q.projection {
                    let mut proj = vec![0f32; q.r];
                    for (j, o) in proj.iter_mut().enumerate() {
                        let prow = &p[j * q.r..(j + 1) * q.r];
                        *o = prow.iter().zip(&out).map(|(a, b)| a * b).sum();
                    }
                    out = proj;
                }
                if let Some(n) = &q.norms {
                    let n = *n.get(i)?;
                    for v in &mut out {
                        *v *= n;
                    }
                }
                Some(out)
            }
        }
    }

    /// Subword storage rows of a (non-bracketed) word, duplicates kept, in
    /// finalfusion order. Empty for a SimpleVocab.
    pub fn subword_indices(&self, word: &str) -> Vec<usize> {
        let nw = self.words.len();
        let bracketed = format!("<{word}>");
        let (min_n, max_n) = match &self.subwords {
            Subwords::None => return Vec::new(),
            Subwords::Bucket { min_n, max_n, .. }
            | Subwords::FastText { min_n, max_n, .. }
            | Subwords::Explicit { min_n, max_n, .. } => (*min_n as usize, *max_n as usize),
        };
        let mut out = Vec::new();
        for g in ngrams(&bracketed, min_n, max_n) {
            let idx = match &self.subwords {
                Subwords::None => None,
                Subwords::Bucket { exp, .. } => {
                    let mask = if *exp >= 64 {
                        u64::MAX
                    } else {
                        (1u64 << exp) - 1
                    };
                    Some(ff_hash(g) & mask)
                }
                Subwords::FastText { buckets, .. } => {
                    Some(u64::from(fasttext_hash(g) % (*buckets).max(1)))
                }
                Subwords::Explicit { .. } => self.explicit.get(g).copied(),
            };
            if let Some(i) = idx {
                out.push(nw + i as usize);
            }
        }
        out
    }

    /// The embedding of `word`, as the real library returns it: the stored row
    /// for a known word; for an unknown word the L2-normalized sum of its
    /// subword rows; `None` when neither exists.
    pub fn lookup(&self, word: &str) -> Option<Vec<f32>> {
        self.lookup_with_norm(word).map(|(v, _)| v)
    }

    /// Like [`Embeddings::lookup`], plus the norm: NdNorms entry (or 1) for a known
    /// word, the norm of the sum before normalizing for an unknown one.
    pub fn lookup_with_norm(&self, word: &str) -> Option<(Vec<f32>, f32)> {
        if let Some(&i) = self.index.get(word) {
            let n = self
                .norms
                .as_ref()
                .and_then(|n| n.get(i).copied())
                .unwrap_or(1.0);
            return Some((self.row(i)?, n));
        }
        let idxs = self.subword_indices(word);
        if idxs.is_empty() {
            return None;
        }
        let mut v = vec![0f32; self.dims];
        for i in idxs {
            let r = self.row(i)?;
            for (a, b) in v.iter_mut().zip(&r) {
                *a += b;
            }
        }
        let norm = crate::vector::l2_normalize(&mut v);
        Some((v, norm))
    }

    /// The static sentence embedding: `text` split on Unicode whitespace, each
    /// token looked up with [`Embeddings::lookup`] (tokens without an embedding
    /// are skipped), the mean of the found vectors, L2-normalized when
    /// `normalize`. `None` when no token has an embedding.
    pub fn embed_text(&self, text: &str, normalize: bool) -> Option<Vec<f32>> {
        // With no rows the file bounds nothing about `dims` (an empty
        // [0, 2^32-1] matrix is 0 bytes): no lookup can succeed, allocate nothing.
        if self.rows == 0 {
            return None;
        }
        let mut acc = vec![0f32; self.dims];
        let mut n = 0usize;
        for tok in text.split_whitespace() {
            if let Some(v) = self.lookup(tok) {
                for (a, b) in acc.iter_mut().zip(&v) {
                    *a += b;
                }
                n += 1;
            }
        }
        if n == 0 {
            return None;
        }
        let inv = 1.0 / n as f32;
        for a in &mut acc {
            *a *= inv;
        }
        if normalize {
            crate::vector::l2_normalize(&mut acc);
        }
        Some(acc)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::formats::finalfusion::tests::small;

    #[test]
    fn hash_test_vectors() {
        assert_eq!(ff_hash("<ab>"), 0xad97_7fd4_b0c7_88d0);
        assert_eq!(ff_hash("<ab"), 0x932d_d5e4_99e8_4c39);
        assert_eq!(ff_hash("ab>"), 0xb0d9_f494_1d47_ba0b);
        assert_eq!(ff_hash("<Da") & ((1 << 21) - 1), 2_026_735);
        assert_eq!(fasttext_hash("<ab"), 0x489c_66e4);
        assert_eq!(fasttext_hash("ël>"), 0x1139_aaf1);
    }

    #[test]
    fn daniel_fasttext_indices() {
        let mut idx: Vec<u32> = ngrams("<Daniël>", 3, 6)
            .into_iter()
            .map(|g| fasttext_hash(g) % 2_000_000)
            .collect();
        idx.sort_unstable();
        assert_eq!(
            idx,
            [
                69886, 84537, 338340, 441697, 448390, 468430, 504093, 573175, 749365, 804851,
                811506, 991985, 1022467, 1105725, 1249224, 1418443, 1493412, 1880616
            ]
        );
    }

    #[test]
    fn ngram_order() {
        assert_eq!(ngrams("<ab>", 3, 6), ["<ab>", "<ab", "ab>"]);
        assert!(ngrams("<>", 3, 6).is_empty());
    }

    #[test]
    fn lookups() {
        let e = small(
            Subwords::Bucket {
                min_n: 3,
                max_n: 6,
                exp: 3,
            },
            &["cat", "dog"],
            false,
        );
        assert_eq!(e.lookup("cat"), e.row(0));
        let v = e.lookup("unknownword").unwrap();
        assert!((crate::vector::norm(&v) - 1.0).abs() < 1e-5);
        let simple = small(Subwords::None, &["cat"], false);
        assert!(simple.lookup("dog").is_none());
        let t = simple.embed_text("cat  dog cat", false).unwrap();
        assert_eq!(Some(t), simple.row(0));
    }
}
