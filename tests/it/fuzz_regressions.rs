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
        .filter(|p| !p.file_name().is_some_and(|n| n.to_string_lossy().starts_with('.')))
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
