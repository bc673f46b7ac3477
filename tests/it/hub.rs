//! Models by name (`embedder::hub`): a HuggingFace cache laid out as
//! `huggingface_hub` writes it (blobs, relative snapshot symlinks, refs),
//! filled with the tiny XLM-R reference folder; the hub id resolves offline,
//! converts once into the weights cache and embeds as the reference
//! (sentence-transformers' vectors in `xlmr-tiny_reference.jsonl`), through
//! the library, the C ABI and every `embd` subcommand that takes a model.

use std::path::{Path, PathBuf};
use std::process::Command;

use embedder::hub::{HfCache, HubId, WeightsCache};
use embedder::{Engine, Options};

use crate::common::{embd_bin, read_reference, shared_dir, TempDir};

const REPO: &str = "tiny-org/xlmr-tiny";
const COMMIT: &str = "1111111111111111111111111111111111111111";

/// Files of `src` (relative paths, sorted).
fn files(src: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![src.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push(p.strip_prefix(src).unwrap().to_path_buf());
            }
        }
    }
    out.sort();
    out
}

/// A cache holding `src` as `repo` at `commit` (refs/main), blobs named by
/// a hash of their bytes.
fn fill_cache(root: &Path, repo: &str, commit: &str, src: &Path) -> HfCache {
    let cache = HfCache::at(root);
    let id = HubId::parse(repo).unwrap();
    for rel in files(src) {
        let bytes = std::fs::read(src.join(&rel)).unwrap();
        let etag = format!("{:08x}{:08x}", crc32fast::hash(&bytes), bytes.len());
        let blob = cache.blob(&id, &etag);
        std::fs::create_dir_all(blob.parent().unwrap()).unwrap();
        std::fs::write(&blob, &bytes).unwrap();
        cache
            .link(&id, commit, rel.to_str().unwrap(), &etag)
            .unwrap();
    }
    cache.write_ref(&id, "main", commit).unwrap();
    cache
}

fn xlmr_dir() -> PathBuf {
    shared_dir().join("reference/families/xlmr-tiny")
}

/// The first reference texts and their vectors.
fn reference(n: usize) -> (Vec<String>, Vec<Vec<f32>>) {
    let cases = read_reference("families/xlmr-tiny_reference.jsonl");
    let cases = &cases[..n.min(cases.len())];
    (
        cases.iter().map(|c| c.text.clone()).collect(),
        cases.iter().map(|c| c.embedding.clone().unwrap()).collect(),
    )
}

/// Every row within the f32 bars of the family tests (cosine 0.99999, 1e-5).
fn assert_close(what: &str, got: &[Vec<f32>], want: &[Vec<f32>]) {
    assert_eq!(got.len(), want.len(), "{what}: rows");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert_eq!(g.len(), w.len(), "{what}: row {i} dimension");
        let (mut dot, mut na, mut nb, mut max_abs) = (0f64, 0f64, 0f64, 0f64);
        for (a, b) in g.iter().zip(w) {
            let (a, b) = (f64::from(*a), f64::from(*b));
            dot += a * b;
            na += a * a;
            nb += b * b;
            max_abs = max_abs.max((a - b).abs());
        }
        let cos = dot / (na.sqrt() * nb.sqrt());
        assert!(
            cos >= 0.99999 && max_abs <= 1e-5,
            "{what}: row {i}: cosine {cos}, max |diff| {max_abs}"
        );
    }
}

#[test]
fn a_cached_snapshot_converts_once_and_embeds_as_the_reference() {
    let tmp = TempDir::new("hub-lib");
    let cache = fill_cache(&tmp.join("hf"), REPO, COMMIT, &xlmr_dir());
    let weights = WeightsCache::at(tmp.join("embd"));
    let id = HubId::parse(REPO).unwrap();
    let snap = cache.find_snapshot(&id).unwrap();
    assert_eq!(snap.commit, COMMIT);
    let path = weights.weights_for(&id, &snap).unwrap();
    assert!(
        path.starts_with(tmp.join("embd/models--tiny-org--xlmr-tiny")),
        "{}",
        path.display()
    );
    let (texts, want) = reference(40);
    let engine = Engine::open(&path, &Options::new()).unwrap();
    assert_eq!(engine.info().name, REPO);
    let dim = want[0].len();
    let got: Vec<Vec<f32>> = engine
        .embed(&texts)
        .unwrap()
        .chunks(dim)
        .map(<[f32]>::to_vec)
        .collect();
    assert_close("converted from the cache", &got, &want);

    // A second resolution reuses the file; a changed snapshot converts again
    // and the stale conversion goes.
    let before = std::fs::metadata(&path).unwrap().modified().unwrap();
    assert_eq!(weights.weights_for(&id, &snap).unwrap(), path);
    assert_eq!(
        std::fs::metadata(&path).unwrap().modified().unwrap(),
        before
    );
    let etag = "feedbeef";
    std::fs::write(cache.blob(&id, etag), b"{}").unwrap();
    cache.link(&id, COMMIT, "extra/config.json", etag).unwrap();
    let again = weights.weights_for(&id, &snap).unwrap();
    assert_ne!(again, path);
    assert!(again.is_file() && !path.exists());

    // By commit; an unknown revision names the cached ones.
    let by_commit = HubId::parse(&format!("{REPO}@{COMMIT}")).unwrap();
    assert_eq!(cache.find_snapshot(&by_commit).unwrap().dir, snap.dir);
    let e = cache
        .find_snapshot(&HubId::parse(&format!("{REPO}@v2")).unwrap())
        .unwrap_err();
    assert!(
        e.message().contains("no revision 'v2'") && e.message().contains("cached: main"),
        "{e}"
    );
}

/// `embd` with the caches of `tmp` (HF_HOME, so the `hub` folder under it
/// is the HF cache, and EMBD_CACHE_DIR).
fn embd(tmp: &Path, args: &[&str], stdin: Option<&str>) -> std::process::Output {
    use std::io::Write;
    let mut c = Command::new(embd_bin());
    c.args(args)
        .env_remove("HF_HUB_CACHE")
        .env_remove("HUGGINGFACE_HUB_CACHE")
        .env("HF_HOME", tmp.join("hf-home"))
        .env("EMBD_CACHE_DIR", tmp.join("embd"))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = c.spawn().unwrap();
    let mut sin = child.stdin.take().unwrap();
    // A subcommand that reads no input may exit before taking it all: a
    // broken pipe here is not the test's concern (its status and output are).
    if let Err(e) = sin.write_all(stdin.unwrap_or("").as_bytes()) {
        assert_eq!(e.kind(), std::io::ErrorKind::BrokenPipe, "{e}");
    }
    drop(sin);
    child.wait_with_output().unwrap()
}

#[test]
fn every_subcommand_takes_a_hub_id() {
    let tmp = TempDir::new("hub-cli");
    fill_cache(&tmp.join("hf-home/hub"), REPO, COMMIT, &xlmr_dir());
    let (texts, want) = reference(12);
    let jsonl: String = texts
        .iter()
        .map(|t| serde_json::json!({ "text": t }).to_string() + "\n")
        .collect();
    let o = embd(&tmp, &["encode", "-m", REPO, "--jsonl"], Some(&jsonl));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let got: Vec<Vec<f32>> = String::from_utf8(o.stdout)
        .unwrap()
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            v["embedding"]
                .as_array()
                .unwrap()
                .iter()
                .map(|x| x.as_f64().unwrap() as f32)
                .collect()
        })
        .collect();
    assert_close("embd encode -m", &got, &want);

    let main_rev = format!("{REPO}@main");
    for args in [
        vec!["tokenize", "-m", REPO],
        vec!["similarity", "-m", main_rev.as_str(), "a", "b"],
        vec!["inspect", REPO],
        vec!["verify", REPO],
    ] {
        let o = embd(&tmp, &args, Some("hello\n"));
        assert!(
            o.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
    let out = tmp.join("int8.weights");
    let o = embd(
        &tmp,
        &[
            "convert",
            REPO,
            "-o",
            out.to_str().unwrap(),
            "--dtype",
            "int8",
        ],
        None,
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let o = embd(&tmp, &["inspect", "--json", out.to_str().unwrap()], None);
    assert!(String::from_utf8_lossy(&o.stdout).contains(REPO));

    // Not in the cache: both readings named, and how to fetch it.
    let o = embd(&tmp, &["encode", "-m", "tiny-org/absent"], Some("x\n"));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success());
    assert!(
        err.contains("tiny-org/absent: no such file")
            && err.contains("not in the HuggingFace cache")
            && err.contains("embd pull tiny-org/absent"),
        "{err}"
    );
    // A path that cannot be a hub id stays a missing file.
    let o = embd(
        &tmp,
        &["encode", "-m", "models/absent.weights"],
        Some("x\n"),
    );
    assert!(!String::from_utf8_lossy(&o.stderr).contains("HuggingFace"));
}

#[test]
fn the_c_abi_opens_a_hub_id() {
    use std::ffi::CString;
    let tmp = TempDir::new("hub-capi");
    // The C ABI reads the caches from the environment: this test owns
    // these two variables (no other test sets them).
    let hf = tmp.join("hf");
    fill_cache(&hf, REPO, COMMIT, &xlmr_dir());
    // SAFETY of set_var: no other test of this binary reads or writes these variables.
    std::env::set_var("HF_HUB_CACHE", &hf);
    std::env::set_var("EMBD_CACHE_DIR", tmp.join("embd"));
    let name = CString::new(REPO).unwrap();
    let mut model = std::ptr::null_mut();
    // SAFETY: a NUL-terminated path, NULL options, a valid out pointer.
    let st = unsafe { embedder::capi::embd_open(name.as_ptr(), std::ptr::null(), &mut model) };
    assert_eq!(st, embedder::capi::embd_status::Ok);
    assert!(!model.is_null());
    embedder::capi::embd_free(model);
    let absent = CString::new("tiny-org/absent").unwrap();
    // SAFETY: as above.
    let st = unsafe { embedder::capi::embd_open(absent.as_ptr(), std::ptr::null(), &mut model) };
    assert_eq!(st, embedder::capi::embd_status::NotFound);
    std::env::remove_var("HF_HUB_CACHE");
    std::env::remove_var("EMBD_CACHE_DIR");
}
