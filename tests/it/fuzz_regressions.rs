//! Replays, on stable Rust, every input the fuzzers found interesting: the seed
//! corpora in `fuzz/corpus/<target>/` and every crash input in
//! `tests/data/fuzz/<target>/`, each through the same entry point as the
//! cargo-fuzz target (`fuzz/harness.rs`). A crash input that panics again
//! fails this test with the file's name.

#[path = "../../fuzz/harness.rs"]
mod harness;
#[path = "../../fuzz/make_seeds.rs"]
mod make_seeds;

use std::path::{Path, PathBuf};

use crate::common::repo;

/// The files of `dir` (none if it does not exist), sorted.
fn files(dir: &Path) -> Vec<PathBuf> {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut v: Vec<PathBuf> = rd
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_file())
        .filter(|p| {
            !p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with('.'))
        })
        .collect();
    v.sort();
    v
}

/// Runs every file of `root/<target>/` through its target; returns the count.
fn replay(root: &Path) -> usize {
    let mut n = 0;
    let mut failed = Vec::new();
    for (target, run) in harness::TARGETS {
        for f in files(&root.join(target)) {
            let data = std::fs::read(&f).unwrap();
            if std::panic::catch_unwind(|| run(&data)).is_err() {
                failed.push(f.display().to_string());
            }
            n += 1;
        }
    }
    assert!(failed.is_empty(), "inputs that panic: {failed:#?}");
    n
}

#[test]
fn crash_inputs_replay_without_panic() {
    let n = replay(&repo().join("tests/data/fuzz"));
    eprintln!("replayed {n} crash inputs");
}

#[test]
fn seed_corpora_replay_without_panic() {
    let n = replay(&repo().join("fuzz/corpus"));
    assert!(n >= harness::TARGETS.len(), "only {n} seed files");
}

#[test]
fn generated_seeds_replay_and_match_the_committed_corpus() {
    let seeds = make_seeds::seeds();
    for (target, run) in harness::TARGETS {
        assert!(
            seeds.iter().any(|(t, _, _)| t == target),
            "no seed for target {target}"
        );
        for (t, _, b) in &seeds {
            if t == target {
                run(b);
            }
        }
    }
    for (t, name, b) in &seeds {
        if *t == "embedder" {
            let m = embedder::ModelFile::from_bytes(b, Default::default()).unwrap();
            let e = embedder::Embedder::from_model_file(m, &embedder::Options::new().threads(1))
                .unwrap_or_else(|e| panic!("seed embedder/{name} does not load: {e}"));
            assert_eq!(e.embed(&["hello world"]).unwrap().len(), e.dim());
        }
        if *t == "hf_dir" {
            assert!(
                harness::hf_dir_reads(b),
                "seed hf_dir/{name} is not a readable folder"
            );
        }
    }
    // The committed corpus holds at least the generated seeds (the fuzzers may
    // add files there locally; those are not committed).
    for (t, name, _) in &seeds {
        let p = repo().join("fuzz/corpus").join(t).join(name);
        assert!(
            p.is_file(),
            "{} is missing: run `cargo test --test it fuzz_regressions::write_fuzz_seeds -- --ignored`",
            p.display()
        );
    }
}

/// Writes the seed corpora (`fuzz/corpus/<target>/<name>`).
#[test]
#[ignore = "writes fuzz/corpus; run by hand"]
fn write_fuzz_seeds() {
    for (t, name, b) in make_seeds::seeds() {
        let dir = repo().join("fuzz/corpus").join(t);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(name), b).unwrap();
    }
}

/// The bugs the fuzzers found, each as a named test on a hand-made input (the
/// crash inputs themselves are replayed above).
mod found {
    use embedder::formats::coreml_blob;

    /// coreml_blob: a record whose data offset points back at the record made
    /// `list_blobs` visit it `count` (up to 2^32) times, growing the list to OOM.
    #[test]
    fn coreml_blob_record_pointing_back_is_refused() {
        let mut b = vec![0u8; 192];
        b[0..4].copy_from_slice(&u32::MAX.to_le_bytes()); // count
        b[4..8].copy_from_slice(&2u32.to_le_bytes()); // version
        b[64..68].copy_from_slice(&0xDEAD_BEEFu32.to_le_bytes());
        b[68..72].copy_from_slice(&1u32.to_le_bytes()); // float16
        b[72..80].copy_from_slice(&64u64.to_le_bytes()); // size
        b[80..88].copy_from_slice(&0u64.to_le_bytes()); // data offset: before the record
        let e = coreml_blob::list_blobs(&b).unwrap_err();
        assert!(e.to_string().contains("does not lie after"), "{e}");
    }

    /// hf: a modules.json pooling path outside the folder (absolute or `..`)
    /// is refused instead of read.
    #[test]
    fn hf_pooling_path_outside_the_folder_is_refused() {
        let seeds = super::make_seeds::seeds();
        let (_, _, full) = seeds
            .iter()
            .find(|(t, n, _)| *t == "hf_dir" && n == "folder_0.bin")
            .unwrap();
        assert!(super::harness::hf_dir_reads(full));
        for bad in ["/tmp", "../1_Pooling", "1_Pooling/../.."] {
            // Rewrite the modules.json record (selector 5) with the bad path.
            let modules = serde_json::json!([
                {"path": "", "type": "sentence_transformers.models.Transformer"},
                {"path": bad, "type": "sentence_transformers.models.Pooling"}
            ])
            .to_string();
            let mut out = Vec::new();
            let mut rest = full.as_slice();
            while rest.len() >= 3 {
                let n = usize::from(u16::from_le_bytes([rest[1], rest[2]]));
                let body: &[u8] = if rest[0] == 5 {
                    modules.as_bytes()
                } else {
                    &rest[3..3 + n]
                };
                out.push(rest[0]);
                out.extend_from_slice(&(body.len() as u16).to_le_bytes());
                out.extend_from_slice(body);
                rest = &rest[3 + n..];
            }
            assert!(
                !super::harness::hf_dir_reads(&out),
                "pooling path {bad:?} accepted"
            );
        }
    }

    /// finalfusion: an empty vocabulary with a `[0, 2^32-1]` storage matrix (0
    /// bytes of data) made `embed_text` allocate 16 GiB for its accumulator
    /// (calloc may not fail here; the fuzz harness replaying
    /// tests/data/fuzz/finalfusion/review-empty-storage-huge-dims under
    /// `-malloc_limit_mb` is what catches a regression).
    #[test]
    fn finalfusion_empty_storage_with_huge_dims_allocates_nothing() {
        let mut b = Vec::new();
        b.extend_from_slice(b"FiFu");
        b.extend_from_slice(&0u32.to_le_bytes()); // version
        b.extend_from_slice(&2u32.to_le_bytes()); // 2 chunks
        b.extend_from_slice(&1u32.to_le_bytes()); // simple vocab
        b.extend_from_slice(&2u32.to_le_bytes()); // ndarray
        b.extend_from_slice(&1u32.to_le_bytes()); // chunk: simple vocab
        b.extend_from_slice(&8u64.to_le_bytes());
        b.extend_from_slice(&0u64.to_le_bytes()); // 0 words
        b.extend_from_slice(&2u32.to_le_bytes()); // chunk: ndarray
        b.extend_from_slice(&0u64.to_le_bytes()); // length (only reported)
        b.extend_from_slice(&0u64.to_le_bytes()); // rows
        b.extend_from_slice(&u32::MAX.to_le_bytes()); // cols
        b.extend_from_slice(&10u32.to_le_bytes()); // f32
        let pad = 4 - b.len() % 4;
        b.extend(std::iter::repeat_n(0u8, pad));
        let e = embedder::formats::finalfusion::Embeddings::from_bytes(&b).unwrap();
        assert_eq!(e.dims(), u32::MAX as usize);
        assert_eq!(e.embed_text("a b", true), None);
    }

    /// finalfusion: a chunk length near u64::MAX overflowed `body_at + len`.
    #[test]
    fn finalfusion_huge_chunk_length_is_not_an_overflow() {
        let mut b = Vec::new();
        b.extend_from_slice(b"FiFu");
        b.extend_from_slice(&0u32.to_le_bytes()); // version
        b.extend_from_slice(&2u32.to_le_bytes()); // 2 chunks
        b.extend_from_slice(&1u32.to_le_bytes()); // simple vocab
        b.extend_from_slice(&2u32.to_le_bytes()); // ndarray
        b.extend_from_slice(&1u32.to_le_bytes()); // chunk: simple vocab
        b.extend_from_slice(&u64::MAX.to_le_bytes()); // lying length
        b.extend_from_slice(&0u64.to_le_bytes()); // 0 words
        super::harness::fuzz_finalfusion(&b);
    }
}

/// Write-then-read round trips of random models (deterministic PRNG, no
/// dependency): random dtypes, shapes, names and metadata (non-ASCII
/// included), random vocabularies with the special tokens anywhere.
mod properties {
    use std::collections::BTreeMap;
    use std::sync::Arc;

    use embedder::formats::{
        embd, Backing, DType, FormatKind, ModelFile, ReadOptions, TensorEntry,
    };
    use embedder::{SpecialIds, Vocab};

    use super::make_seeds::Rng;

    const ALPHABET: &[&str] = &[
        "a", "b", "z", "0", "9", ".", "_", "-", " ", "é", "ß", "Ω", "中", "文", "🙂", "\u{301}",
        "#", "[", "]", "\u{0}", "\n", "\"", "\\", "=",
    ];

    fn string(r: &mut Rng, min: usize, max: usize) -> String {
        let n = min + r.below(max - min + 1);
        (0..n).map(|_| ALPHABET[r.below(ALPHABET.len())]).collect()
    }

    fn random_model(r: &mut Rng) -> ModelFile {
        // Vocabulary: 5 specials at random positions among random tokens.
        let n_extra = r.below(40);
        let mut tokens: Vec<String> = (0..n_extra).map(|_| string(r, 0, 12)).collect();
        let mut ids = [0u32; 5];
        for (k, name) in ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
            .iter()
            .enumerate()
        {
            let at = r.below(tokens.len() + 1);
            tokens.insert(at, name.to_string());
            // Earlier ids at or after `at` move one place up.
            for id in ids.iter_mut().take(k) {
                if *id as usize >= at {
                    *id += 1;
                }
            }
            ids[k] = at as u32;
        }
        let specials = SpecialIds {
            pad: ids[0],
            unk: ids[1],
            cls: ids[2],
            sep: ids[3],
            mask: ids[4],
        };
        let vocab = Vocab::new(tokens, specials).unwrap();
        // Metadata: the required keys (random values) and random extra keys.
        let mut md = BTreeMap::new();
        for k in embd::REQUIRED_KEYS {
            md.insert(k.to_string(), string(r, 0, 20));
        }
        md.insert("vocab_size".to_string(), vocab.len().to_string());
        for _ in 0..r.below(10) {
            md.insert(string(r, 1, 16), string(r, 0, 300));
        }
        // Tensors: random dtypes, 1..=4 dims, unique non-empty names, random bytes.
        let mut names = std::collections::BTreeSet::new();
        let mut ts = Vec::new();
        for _ in 0..r.below(9) {
            let name = string(r, 1, 24);
            if !names.insert(name.clone()) {
                continue;
            }
            let d = DType::ALL[r.below(DType::ALL.len())];
            let shape: Vec<usize> = (0..1 + r.below(4)).map(|_| 1 + r.below(5)).collect();
            let n: usize = shape.iter().product::<usize>() * d.size();
            let bytes: Vec<u8> = (0..n).map(|_| r.next() as u8).collect();
            ts.push(TensorEntry::owned_bytes(name, d, shape, &bytes));
        }
        ModelFile::new(
            FormatKind::Embd,
            Arc::new(Backing::from_bytes(&[])),
            md,
            Some(vocab),
            ts,
        )
        .unwrap()
    }

    fn assert_same(a: &ModelFile, b: &ModelFile, case: u64) {
        assert_eq!(a.metadata, b.metadata, "case {case}: metadata");
        let (va, vb) = (a.vocab.as_ref().unwrap(), b.vocab.as_ref().unwrap());
        assert_eq!(va.tokens(), vb.tokens(), "case {case}: vocab tokens");
        assert_eq!(va.specials(), vb.specials(), "case {case}: special ids");
        assert_eq!(
            a.tensors.len(),
            b.tensors.len(),
            "case {case}: tensor count"
        );
        for (x, y) in a.tensors.iter().zip(&b.tensors) {
            assert_eq!(x.name, y.name, "case {case}: tensor order/name");
            assert_eq!(x.dtype, y.dtype, "case {case}: {}", x.name);
            assert_eq!(x.shape, y.shape, "case {case}: {}", x.name);
            assert_eq!(
                a.tensor_bytes(x),
                b.tensor_bytes(y),
                "case {case}: {}",
                x.name
            );
        }
    }

    #[test]
    fn embd_write_read_round_trip_random_models() {
        for case in 0..300u64 {
            let mut r = Rng(0x5EED_0000 + case * 0x9E37_79B9 + 1);
            let m = random_model(&mut r);
            let checksums = r.below(2) == 0;
            let opts = embd::WriteOptions { checksums };
            let bytes = embd::to_bytes(&m, &opts).unwrap();
            // Through the dispatcher, and through the EMBD reader directly.
            let back = ModelFile::from_bytes(&bytes, ReadOptions::default())
                .unwrap_or_else(|e| panic!("case {case}: {e}"));
            assert_eq!(back.format, FormatKind::Embd, "case {case}");
            assert_same(&m, &back, case);
            // Every tensor of a TENSORS_ALIGNED file is viewable in place as f32.
            for t in back.tensors.iter().filter(|t| t.dtype == DType::F32) {
                assert!(
                    back.tensor_f32(t).is_some(),
                    "case {case}: {} aligned",
                    t.name
                );
            }
            // Writing what we read gives the same bytes (deterministic writer).
            assert_eq!(
                embd::to_bytes(&back, &opts).unwrap(),
                bytes,
                "case {case}: rewrite"
            );
            // The fuzz harness's invariants hold on every such file.
            super::harness::fuzz_embd(&bytes);
            // Any single flipped bit is either refused or (when it only hits
            // tensor data and checksums are off) read back without panicking.
            let mut bad = bytes.clone();
            let i = r.below(bad.len());
            bad[i] ^= 1 << r.below(8);
            if let Ok(m2) = ModelFile::from_bytes(&bad, ReadOptions::default()) {
                super::harness::check_model(&m2);
                if checksums {
                    panic!("case {case}: flipped bit at {i} not caught by the CRCs");
                }
            }
        }
    }

    #[test]
    fn tokenizer_invariants_on_random_vocabularies_and_texts() {
        use embedder::tokenizer::{Tokenizer, TokenizerConfig};
        for case in 0..200u64 {
            let mut r = Rng(0xC0FF_EE00 + case * 0x9E37_79B9 + 1);
            let m = random_model(&mut r);
            let cfg = TokenizerConfig {
                lowercase: r.below(2) == 0,
                strip_accents: r.below(2) == 0,
                handle_chinese_chars: r.below(2) == 0,
                clean_text: r.below(2) == 0,
                max_input_chars_per_word: r.below(20),
                continuation_prefix: ["##", "", "#"][r.below(3)].to_string(),
            };
            let tok = Tokenizer::new(m.vocab.clone().unwrap(), cfg);
            for _ in 0..10 {
                let text = string(&mut r, 0, 60);
                let max_len = [None, Some(0), Some(1), Some(2), Some(5), Some(64)][r.below(6)];
                super::harness::check_encode(&tok, &text, max_len);
            }
        }
    }
}
