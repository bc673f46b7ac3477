//! The module layering of `src/` (docs/ARCHITECTURE.md, "Dependencies"):
//! which module may name which, read from the code's `crate::` and `super::`
//! paths (comments, strings and `#[cfg(test)]` items left out). Guards
//! against a circle through `formats`, `import`, `model`, `options` and
//! `quantize` coming back.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Files that name the crate root's re-exports (`crate::Options`): the C
/// API is a surface over the library's public API, as the CLI and the server
/// are, so it names what a user of the library names. Every other file
/// imports from the defining module.
const ROOT_PATHS_PENDING: &[&str] = &["capi"];

/// Modules below the runtime: each may name only the rooms listed (besides
/// itself and the leaves in `LEAVES`). A room is a top-level module, or
/// `model::<sub>`.
const ALLOWED: &[(&str, &[&str])] = &[
    // The arithmetic types: every module may use them; they use nothing.
    ("model::precision", &[]),
    // The tensor-name conventions (prefixes, BERT's layout): they use nothing.
    ("model::names", &[]),
    // Containers: bytes to a `ModelFile`. Tensor names of the BERT layout
    // (the AMB and legacy readers) come from `model::names`.
    ("formats", &["model::names"]),
    ("quantize", &["formats"]),
    ("options", &["model::precision", "quantize"]),
    ("model::param", &["formats"]),
    ("model::packed", &["formats", "model::precision"]),
    (
        "model::linear",
        &[
            "formats",
            "model::packed",
            "model::param",
            "model::precision",
        ],
    ),
    // The shared layers (embeddings, attention, MLP, norms, rotary tables):
    // a leaf of the model, taking its settings as values, never a family or
    // a config.
    (
        "model::blocks",
        &[
            "formats",
            "model::linear",
            "model::param",
            "model::precision",
        ],
    ),
    // HF folders onto our layout: containers and the model's tables.
    (
        "import",
        &[
            "formats",
            "model::arch",
            "model::config",
            "model::dense",
            "model::head",
            "model::multi_vector",
            "model::names",
            "model::outputs",
            "model::pair_template",
            "model::pooling",
            "model::sparse",
            "model::static_vocab",
            "model::tokenizer",
        ],
    ),
];

/// Modules every room may use: they import nothing above them.
const LEAVES: &[&str] = &[
    "error",
    "limits",
    "kernels",
    "tokenizer",
    "vector",
    "threads",
    "atomic_write",
];

/// Rooms no `model` module may name.
const ABOVE_MODEL: &[&str] = &[
    "import", "options", "quantize", "convert", "engine", "embedder", "reranker", "capi", "compat",
    "hub", "crate",
];

fn src_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn rs_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            rs_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The module path of a file (`model/arch/mod.rs` -> `[model, arch]`).
fn module_of(rel: &Path) -> Vec<String> {
    let mut parts: Vec<String> = rel
        .iter()
        .map(|s| s.to_string_lossy().into_owned())
        .collect();
    let last = parts.pop().unwrap();
    let stem = last.trim_end_matches(".rs");
    if stem != "mod" && stem != "lib" {
        parts.push(stem.to_string());
    }
    parts
}

/// The room of a module path: `model::<sub>`, else the top-level module;
/// `crate` for an item of the crate root (a re-export).
fn room(path: &[String]) -> String {
    match path {
        [] => "crate".to_string(),
        [m, sub, ..] if m == "model" => format!("model::{sub}"),
        [m] if m == "model" => "model".to_string(),
        [first, ..] => first.clone(),
    }
}

/// `src` with comments, string and char literals blanked (lines kept).
fn strip(src: &str) -> String {
    let b = src.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let blank = |out: &mut Vec<u8>, s: &[u8]| {
        out.extend(s.iter().map(|&c| if c == b'\n' { b'\n' } else { b' ' }))
    };
    let mut i = 0;
    while i < b.len() {
        let rest = &b[i..];
        let ident_before = i > 0 && (b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_');
        if rest.starts_with(b"//") {
            let end = rest.iter().position(|&c| c == b'\n').unwrap_or(rest.len());
            blank(&mut out, &rest[..end]);
            i += end;
        } else if rest.starts_with(b"/*") {
            let (mut depth, mut j) = (1, 2);
            while j < rest.len() && depth > 0 {
                if rest[j..].starts_with(b"/*") {
                    depth += 1;
                    j += 2;
                } else if rest[j..].starts_with(b"*/") {
                    depth -= 1;
                    j += 2;
                } else {
                    j += 1;
                }
            }
            blank(&mut out, &rest[..j]);
            i += j;
        } else if !ident_before && (rest.starts_with(b"r\"") || rest.starts_with(b"r#")) {
            let hashes = rest[1..].iter().take_while(|&&c| c == b'#').count();
            if rest.get(1 + hashes) != Some(&b'"') {
                out.push(b[i]);
                i += 1;
                continue;
            }
            let mut close = vec![b'"'];
            close.extend(std::iter::repeat_n(b'#', hashes));
            let body = 2 + hashes;
            let end = rest[body..]
                .windows(close.len())
                .position(|w| w == close.as_slice())
                .map_or(rest.len(), |p| body + p + close.len());
            blank(&mut out, &rest[..end]);
            i += end;
        } else if rest[0] == b'"' {
            let mut j = 1;
            while j < rest.len() && rest[j] != b'"' {
                j += if rest[j] == b'\\' { 2 } else { 1 };
            }
            let end = (j + 1).min(rest.len());
            blank(&mut out, &rest[..end]);
            i += end;
        } else if rest[0] == b'\'' && !ident_before {
            // A char literal ('a', '\n', '\u{..}'); a lifetime has no closing quote.
            let len = if rest.get(1) == Some(&b'\\') {
                rest[2..].iter().position(|&c| c == b'\'').map(|p| p + 3)
            } else {
                let ch = std::str::from_utf8(&rest[1..rest.len().min(6)])
                    .ok()
                    .or_else(|| std::str::from_utf8(&rest[1..rest.len().min(5)]).ok())
                    .or_else(|| std::str::from_utf8(&rest[1..rest.len().min(4)]).ok())
                    .or_else(|| std::str::from_utf8(&rest[1..rest.len().min(3)]).ok())
                    .and_then(|s| s.chars().next());
                ch.map(char::len_utf8)
                    .filter(|&n| rest.get(1 + n) == Some(&b'\''))
                    .map(|n| n + 2)
            };
            match len {
                Some(n) => {
                    blank(&mut out, &rest[..n]);
                    i += n;
                }
                None => {
                    out.push(b[i]);
                    i += 1;
                }
            }
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).unwrap()
}

/// `s` with every `#[cfg(test)]` item blanked (up to its `;` or its closing
/// brace).
fn without_test_items(s: &str) -> String {
    let mut b = s.as_bytes().to_vec();
    let mut from = 0;
    while let Some(p) = s[from..].find("#[cfg(test)]") {
        let start = from + p;
        let mut k = start + "#[cfg(test)]".len();
        while k < b.len() && b[k] != b'{' && b[k] != b';' {
            k += 1;
        }
        if k < b.len() && b[k] == b'{' {
            let mut depth = 0;
            while k < b.len() {
                match b[k] {
                    b'{' => depth += 1,
                    b'}' => {
                        depth -= 1;
                        if depth == 0 {
                            break;
                        }
                    }
                    _ => {}
                }
                k += 1;
            }
        }
        let end = (k + 1).min(b.len());
        for c in &mut b[start..end] {
            if *c != b'\n' {
                *c = b' ';
            }
        }
        from = end;
    }
    String::from_utf8(b).unwrap()
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// The paths a `use` tree names (`crate::{a::B, c}` -> `crate::a::B`, `crate::c`).
fn expand_use(tree: &str) -> Vec<String> {
    let tree: String = tree.split_whitespace().collect::<Vec<_>>().join(" ");
    let Some(open) = tree.find('{') else {
        return vec![tree.split(" as ").next().unwrap().replace(' ', "")];
    };
    let prefix = tree[..open].replace(' ', "");
    let inner = &tree[open + 1..tree.rfind('}').unwrap()];
    let (mut parts, mut depth, mut cur) = (Vec::new(), 0, String::new());
    for c in inner.chars() {
        match c {
            ',' if depth == 0 => parts.push(std::mem::take(&mut cur)),
            '{' => {
                depth += 1;
                cur.push(c)
            }
            '}' => {
                depth -= 1;
                cur.push(c)
            }
            _ => cur.push(c),
        }
    }
    parts.push(cur);
    parts
        .iter()
        .filter(|p| !p.trim().is_empty())
        .flat_map(|p| expand_use(p.trim()))
        .map(|p| match p.as_str() {
            "self" => prefix.trim_end_matches("::").to_string(),
            _ => format!("{prefix}{p}"),
        })
        .collect()
}

/// Every `crate::` / `super::` path in the code of `s` (`use` trees expanded).
fn paths(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = s.to_string();
    // `use` items first, then blanked so their paths are not read twice.
    let mut from = 0;
    while let Some(p) = rest[from..].find("use ") {
        let at = from + p;
        let before_ok = at == 0 || !is_ident(rest[..at].chars().last().unwrap());
        let Some(semi) = rest[at..].find(';') else {
            break;
        };
        let body = rest[at + 4..at + semi].trim().to_string();
        if before_ok && (body.starts_with("crate") || body.starts_with("super")) {
            out.extend(expand_use(&body));
            let blanked: String = rest[at..at + semi]
                .chars()
                .map(|c| if c == '\n' { '\n' } else { ' ' })
                .collect();
            rest.replace_range(at..at + semi, &blanked);
        }
        from = at + 4;
    }
    for start in ["crate::", "super::"] {
        let mut from = 0;
        while let Some(p) = rest[from..].find(start) {
            let at = from + p;
            from = at + start.len();
            if at > 0
                && (is_ident(rest[..at].chars().last().unwrap()) || rest[..at].ends_with("::"))
            {
                continue;
            }
            let len = rest[at..]
                .char_indices()
                .find(|&(i, c)| {
                    !(is_ident(c)
                        || (c == ':' && rest[at + i..].starts_with("::"))
                        || (c == ':' && rest[..at + i].ends_with(':')))
                })
                .map_or(rest.len() - at, |(i, _)| i);
            out.push(rest[at..at + len].trim_end_matches(':').to_string());
        }
    }
    out
}

/// The module paths of `src`, for resolving a path to its module.
fn modules(files: &[(Vec<String>, String)]) -> BTreeSet<Vec<String>> {
    files.iter().map(|(m, _)| m.clone()).collect()
}

/// The module a path names: its longest prefix that is a module of `src`.
fn resolve(me: &[String], path: &str, mods: &BTreeSet<Vec<String>>) -> Vec<String> {
    let mut segs: Vec<&str> = path.split("::").collect();
    let mut abs: Vec<String> = if segs[0] == "crate" {
        segs.remove(0);
        Vec::new()
    } else {
        let mut base = me.to_vec();
        while let Some(&s) = segs.first() {
            match s {
                "super" => {
                    base.pop();
                }
                "self" => {}
                _ => break,
            }
            segs.remove(0);
        }
        base
    };
    abs.extend(segs.iter().map(|s| s.to_string()));
    (0..=abs.len())
        .rev()
        .map(|k| abs[..k].to_vec())
        .find(|p| mods.contains(p))
        .unwrap_or_default()
}

/// room -> rooms it names -> the files and paths that name them.
type Edges = BTreeMap<String, BTreeMap<String, Vec<String>>>;

fn room_edges() -> Edges {
    let src = src_dir();
    let mut list = Vec::new();
    rs_files(&src, &mut list);
    let mut files = Vec::new();
    for p in list {
        let rel = p.strip_prefix(&src).unwrap().to_path_buf();
        if rel.starts_with("bin") || rel == Path::new("lib.rs") {
            continue;
        }
        let text = std::fs::read_to_string(&p).unwrap();
        files.push((module_of(&rel), rel.display().to_string(), text));
    }
    let mods = modules(
        &files
            .iter()
            .map(|(m, _, _)| (m.clone(), String::new()))
            .collect::<Vec<_>>(),
    );
    let mut edges = Edges::new();
    for (me, rel, text) in &files {
        let code = without_test_items(&strip(text));
        let from = room(me);
        for path in paths(&code) {
            let target = resolve(me, &path, &mods);
            let to = room(&target);
            if to != from {
                edges
                    .entry(from.clone())
                    .or_default()
                    .entry(to)
                    .or_default()
                    .push(format!("{rel}: {path}"));
            }
        }
    }
    edges
}

fn show(edges: &Edges, from: &str, to: &str) -> String {
    edges[from][to].join(", ")
}

#[test]
fn low_modules_name_only_what_is_below_them() {
    let edges = room_edges();
    let mut bad = Vec::new();
    for &(from, allowed) in ALLOWED {
        for to in edges.get(from).map(|m| m.keys()).into_iter().flatten() {
            if !allowed.contains(&to.as_str()) && !LEAVES.contains(&to.as_str()) {
                bad.push(format!("{from} -> {to} ({})", show(&edges, from, to)));
            }
        }
    }
    assert!(bad.is_empty(), "forbidden imports:\n{}", bad.join("\n"));
}

#[test]
fn model_names_nothing_above_it() {
    let edges = room_edges();
    let mut bad = Vec::new();
    for (from, tos) in &edges {
        if from != "model" && !from.starts_with("model::") {
            continue;
        }
        for to in tos.keys() {
            if ABOVE_MODEL.contains(&to.as_str()) {
                bad.push(format!("{from} -> {to} ({})", show(&edges, from, to)));
            }
        }
    }
    assert!(
        bad.is_empty(),
        "model imports from above it:\n{}",
        bad.join("\n")
    );
}

#[test]
fn crate_internals_import_from_the_defining_module() {
    let edges = room_edges();
    let mut bad = Vec::new();
    for (from, tos) in &edges {
        if tos.contains_key("crate") && !ROOT_PATHS_PENDING.contains(&from.as_str()) {
            bad.push(format!("{from}: {}", show(&edges, from, "crate")));
        }
    }
    assert!(
        bad.is_empty(),
        "crate-root re-export paths inside the crate (import from the defining module):\n{}",
        bad.join("\n")
    );
}

/// The strongly connected rooms of the graph with more than one member.
fn circles(edges: &Edges) -> Vec<BTreeSet<String>> {
    let nodes: BTreeSet<&String> = edges
        .keys()
        .chain(edges.values().flat_map(|m| m.keys()))
        .collect();
    let reach = |a: &String| -> BTreeSet<String> {
        let mut seen = BTreeSet::new();
        let mut todo = vec![a.clone()];
        while let Some(n) = todo.pop() {
            for t in edges.get(&n).map(|m| m.keys()).into_iter().flatten() {
                if seen.insert(t.clone()) {
                    todo.push(t.clone());
                }
            }
        }
        seen
    };
    let reaches: BTreeMap<&String, BTreeSet<String>> =
        nodes.iter().map(|&n| (n, reach(n))).collect();
    let mut out: Vec<BTreeSet<String>> = Vec::new();
    for &n in &nodes {
        let comp: BTreeSet<String> = nodes
            .iter()
            .filter(|&&m| m == n || (reaches[n].contains(m) && reaches[m].contains(n)))
            .map(|m| m.to_string())
            .collect();
        if comp.len() > 1 && !out.contains(&comp) {
            out.push(comp);
        }
    }
    out
}

#[test]
fn rooms_below_the_runtime_form_no_circle() {
    let edges = room_edges();
    // Circles among the runtime and surface files are not checked here; this
    // guards the rooms below the runtime.
    let low = |r: &str| {
        r.starts_with("model")
            || ["formats", "import", "options", "quantize", "convert"].contains(&r)
            || LEAVES.contains(&r)
    };
    let low_edges: Edges = edges
        .iter()
        .filter(|(f, _)| low(f))
        .map(|(f, m)| {
            let kept = m
                .iter()
                .filter(|(t, _)| low(t))
                .map(|(t, v)| (t.clone(), v.clone()))
                .collect();
            (f.clone(), kept)
        })
        .collect();
    let found = circles(&low_edges);
    assert!(
        found.is_empty(),
        "circles among the modules below the runtime: {found:?}"
    );
}
