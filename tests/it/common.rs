//! Helpers shared by the integration tests: paths to the repository, the shared
//! reference data and the real model, temporary directories.

use std::path::{Path, PathBuf};

/// The repository root.
pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `$EMBD_SHARED_DIR`, else `<repo>/../shared` (else `<repo>/../../shared`, for a git
/// worktree one level deeper than the main checkout).
pub fn shared_dir() -> PathBuf {
    let dir = match std::env::var_os("EMBD_SHARED_DIR") {
        Some(d) => PathBuf::from(d),
        None => {
            let near = repo().join("../shared");
            let far = repo().join("../../shared");
            if !near.is_dir() && far.join("reference").is_dir() {
                far
            } else {
                near
            }
        }
    };
    assert!(
        dir.join("reference").is_dir(),
        "shared data directory {} (with reference/) is absent: set EMBD_SHARED_DIR",
        dir.display()
    );
    dir
}

/// `path` if it exists; `None` (after a skip line) when it is absent and
/// `EMBD_SKIP_MODEL_TESTS=1`; otherwise the test fails saying how to fetch the model.
pub fn model_path(rel: &str, test: &str) -> Option<PathBuf> {
    let path = repo().join(rel);
    if path.exists() {
        return Some(path);
    }
    if std::env::var("EMBD_SKIP_MODEL_TESTS").as_deref() == Ok("1") {
        eprintln!(
            "skipping {test}: {} is absent (EMBD_SKIP_MODEL_TESTS=1)",
            path.display()
        );
        return None;
    }
    panic!(
        "{} is absent: run scripts/fetch_model.sh (MiniLM) or scripts/fetch_mpnet.sh \
         (MPNet) to fetch and convert the model \
         (or set EMBD_SKIP_MODEL_TESTS=1 to skip model tests)",
        path.display()
    );
}

/// The HF folder of all-MiniLM-L6-v2 (see [`model_path`]).
pub fn minilm_hf_dir(test: &str) -> Option<PathBuf> {
    model_path("models/all-MiniLM-L6-v2-hf", test)
}

/// The converted all-MiniLM-L6-v2 `.weights` (see [`model_path`]).
pub fn minilm_weights(test: &str) -> Option<PathBuf> {
    model_path("models/all-MiniLM-L6-v2.weights", test)
}

/// The converted all-mpnet-base-v2 `.weights` (see [`model_path`]; fetched by
/// `scripts/fetch_mpnet.sh`).
pub fn mpnet_weights(test: &str) -> Option<PathBuf> {
    model_path("models/all-mpnet-base-v2.weights", test)
}

/// The HF folder of all-mpnet-base-v2 (see [`model_path`]).
pub fn mpnet_hf_dir(test: &str) -> Option<PathBuf> {
    model_path("models/all-mpnet-base-v2-hf", test)
}

/// One parsed line of a reference JSONL file.
pub struct RefCase {
    /// The exact text.
    pub text: String,
    /// Token ids incl. [CLS]/[SEP].
    pub input_ids: Vec<u32>,
    /// The reference embedding, when the file has one.
    pub embedding: Option<Vec<f32>>,
}

/// Every line of `shared/reference/<name>`.
pub fn read_reference(name: &str) -> Vec<RefCase> {
    let path = shared_dir().join("reference").join(name);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| {
            let v: serde_json::Value = serde_json::from_str(l)
                .unwrap_or_else(|e| panic!("{name} line {}: bad JSON: {e}", i + 1));
            let text = v["text"]
                .as_str()
                .unwrap_or_else(|| panic!("{name} line {}: no text", i + 1))
                .to_string();
            let input_ids = v["input_ids"]
                .as_array()
                .unwrap_or_else(|| panic!("{name} line {}: no input_ids", i + 1))
                .iter()
                .map(|x| x.as_u64().expect("id is an integer") as u32)
                .collect();
            let embedding = v.get("embedding").and_then(|e| e.as_array()).map(|a| {
                a.iter()
                    .map(|x| x.as_f64().expect("embedding value is a number") as f32)
                    .collect()
            });
            RefCase {
                text,
                input_ids,
                embedding,
            }
        })
        .collect()
}

/// A fresh temporary directory, removed on drop.
pub struct TempDir(PathBuf);

impl TempDir {
    /// Creates `<tmp>/embd-it-<pid>-<tag>`.
    pub fn new(tag: &str) -> TempDir {
        let p = std::env::temp_dir().join(format!("embd-it-{}-{tag}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl std::ops::Deref for TempDir {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.0
    }
}

impl AsRef<Path> for TempDir {
    fn as_ref(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The `embd` binary built for this test run.
pub fn embd_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_embd"))
}

/// One row of `tests/data/families.tsv`: a reference model every binding's
/// family tests run (that file's header says what each column means).
#[derive(Clone, Debug)]
pub struct Family {
    pub name: String,
    /// The model folder under `shared/reference`.
    pub folder: String,
    pub tokenizer: String,
    pub dim: usize,
    pub max_tokens: usize,
    pub lines: usize,
    /// A tokenizer case file under `shared/reference` and its line count.
    pub cases: Option<(String, usize)>,
    /// The lines of `<folder>_prompt_reference.jsonl`, and the prompt of its
    /// lines without a `prompt_name`.
    pub prompts: Option<(usize, Option<String>)>,
}

impl Family {
    /// The model folder.
    pub fn dir(&self) -> PathBuf {
        shared_dir().join("reference").join(&self.folder)
    }

    /// Whether sentence-transformers normalizes this model's output (a
    /// `Normalize` module in `modules.json`; distiluse's folder has none).
    pub fn normalizes(&self) -> bool {
        let path = self.dir().join("modules.json");
        let text =
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let modules: serde_json::Value = serde_json::from_str(&text).unwrap();
        modules
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m["type"].as_str().unwrap_or("").ends_with("Normalize"))
    }

    /// `<folder>_reference.jsonl`, relative to `shared/reference`.
    pub fn reference(&self) -> String {
        format!("{}_reference.jsonl", self.folder)
    }

    /// `<folder>_prompt_reference.jsonl`.
    pub fn prompt_reference(&self) -> PathBuf {
        shared_dir()
            .join("reference")
            .join(format!("{}_prompt_reference.jsonl", self.folder))
    }
}

/// The rows of `tests/data/families.tsv`, in file order.
pub fn families() -> Vec<Family> {
    let path = repo().join("tests/data/families.tsv");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut rows = text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty());
    let header: Vec<&str> = rows.next().expect("header line").split('\t').collect();
    let col = |name: &str| {
        header
            .iter()
            .position(|h| *h == name)
            .unwrap_or_else(|| panic!("{}: no column {name}", path.display()))
    };
    let cols = [
        "name",
        "folder",
        "tokenizer",
        "dim",
        "max_tokens",
        "lines",
        "cases",
        "case_lines",
        "prompt_lines",
        "prompt_default",
    ]
    .map(col);
    rows.map(|l| {
        let f: Vec<&str> = l.split('\t').collect();
        assert_eq!(f.len(), header.len(), "{}: {l:?}", path.display());
        let get = |i: usize| Some(f[cols[i]]).filter(|v| *v != "-");
        let num =
            |i: usize| get(i).map(|v| v.parse::<usize>().unwrap_or_else(|e| panic!("{l:?}: {e}")));
        Family {
            name: f[cols[0]].to_string(),
            folder: f[cols[1]].to_string(),
            tokenizer: f[cols[2]].to_string(),
            dim: num(3).expect("dim"),
            max_tokens: num(4).expect("max_tokens"),
            lines: num(5).expect("lines"),
            cases: get(6).map(|c| (c.to_string(), num(7).expect("case_lines"))),
            prompts: num(8).map(|n| (n, get(9).map(str::to_string))),
        }
    })
    .collect()
}

/// The row named `name`, if the table has it.
pub fn try_family(name: &str) -> Option<Family> {
    families().into_iter().find(|f| f.name == name)
}

/// The row named `name`.
pub fn family(name: &str) -> Family {
    try_family(name).unwrap_or_else(|| panic!("{name} is not in tests/data/families.tsv"))
}
