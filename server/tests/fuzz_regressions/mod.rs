//! Replays, on stable Rust, the inputs of the server's fuzz targets
//! (`fuzz/server_harness.rs`): their seed corpora in `fuzz/corpus/<target>/`
//! and crash inputs in `tests/data/fuzz/<target>/`, and a few thousand
//! deterministic mutations of each seed (bytes flipped, cut, repeated), so
//! that the parsers meet malformed bodies in every test run, not only under
//! cargo-fuzz. A module of the `serve` test binary.

#[path = "../../../fuzz/server_harness.rs"]
mod server_harness;

use std::path::{Path, PathBuf};

fn files(dir: &Path) -> Vec<PathBuf> {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut v: Vec<PathBuf> = rd
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_file())
        .collect();
    v.sort();
    v
}

/// xorshift64*: the mutations are the same in every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// One mutation of `seed`.
fn mutate(seed: &[u8], rng: &mut Rng) -> Vec<u8> {
    const TOKENS: &[&[u8]] = &[
        b"null",
        b"true",
        b"[]",
        b"{}",
        b"\"\"",
        b"-1",
        b"1e999",
        b"\"int8\"",
        b"\"NONE\"",
        b"[\"a\"]",
        b"\"\\ud800\"",
        b"0",
        b"\x00",
        b"\"Bearer \"",
    ];
    let mut v = seed.to_vec();
    for _ in 0..=rng.below(3) {
        let at = rng.below(v.len() + 1);
        match rng.below(5) {
            0 if !v.is_empty() => {
                let i = at.min(v.len() - 1);
                v[i] ^= 1 << rng.below(8);
            }
            1 => v.truncate(at),
            2 => {
                let t = TOKENS[rng.below(TOKENS.len())];
                v.splice(at..at, t.iter().copied());
            }
            3 if !v.is_empty() => {
                let end = (at + rng.below(16)).min(v.len());
                let piece: Vec<u8> = v[at.min(end)..end].to_vec();
                v.splice(at..at, piece);
            }
            _ => {
                let end = (at + rng.below(8)).min(v.len());
                v.drain(at.min(end)..end);
            }
        }
    }
    v
}

#[test]
fn server_fuzz_seeds_crash_inputs_and_mutations() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut seeds = 0;
    for (target, run) in server_harness::TARGETS {
        let mut inputs = files(&root.join("fuzz/corpus").join(target));
        assert!(!inputs.is_empty(), "fuzz/corpus/{target} has no seeds");
        inputs.extend(files(&root.join("tests/data/fuzz").join(target)));
        let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
        for f in &inputs {
            let data = std::fs::read(f).unwrap();
            if std::panic::catch_unwind(|| run(&data)).is_err() {
                panic!("{target}: {} panics", f.display());
            }
            seeds += 1;
            for k in 0..1500 {
                let m = mutate(&data, &mut rng);
                if std::panic::catch_unwind(|| run(&m)).is_err() {
                    panic!(
                        "{target}: mutation {k} of {} panics: {:?}",
                        f.display(),
                        String::from_utf8_lossy(&m)
                    );
                }
            }
        }
    }
    assert!(seeds >= 9, "{seeds}");
}
