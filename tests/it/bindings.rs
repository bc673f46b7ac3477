//! The Python and Go bindings against `include/embedder.h`, read as text (no
//! interpreter or Go toolchain needed).
//!
//! - Python (`python/src/embedder/_native.py`): every `_fn(dll, name,
//!   restype, *argtypes)` names a function of the header, with as many
//!   argument types as the header's parameters, each the ctypes type of the
//!   C type ([`ctypes_of`]); the ctypes structures and the progress callback
//!   match the header's; and, as `lib()` promises every `embd_*` signature,
//!   every function of the header is declared, except those of
//!   [`PYTHON_LEAVES_OUT`].
//! - Go (`examples/go`): every `embd_*` function its cgo preambles, its
//!   `embd_go.h` or its Go code (`C.embd_*(...)`) calls is a function of the
//!   header, called with as many arguments as it has parameters; every
//!   `C.EMBD_*` constant exists. The C side (preambles and `embd_go.h`) is
//!   also compiled against the header with the C compiler, warnings as
//!   errors, as cgo compiles it: that checks the argument types.
//! - The status codes, precisions, output precisions and truncations that
//!   the bindings write out as numbers equal the header's constants.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn read(rel: &str) -> String {
    let p = repo().join(rel);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// Header functions the Python binding does not declare, and why.
const PYTHON_LEAVES_OUT: &[(&str, &str)] = &[
    (
        "embd_encode",
        "NUL-terminated texts; Python passes length-delimited ones (embd_encode_texts)",
    ),
    (
        "embd_output_precision_name",
        "Python keeps the names itself (OUTPUT_PRECISIONS, checked below)",
    ),
    (
        "embd_test_panic",
        "exported only by builds with the test-panic feature",
    ),
];

// ------------------------------------------------------------------ header

/// A C function of the header: return type and parameter types, spelled
/// with single spaces (`const embd_model *`).
#[derive(Debug, Clone)]
struct CFn {
    ret: String,
    params: Vec<String>,
}

/// What the header declares.
#[derive(Debug, Default)]
struct Header {
    fns: BTreeMap<String, CFn>,
    /// `typedef int32_t embd_precision;`: name -> scalar type.
    scalars: BTreeMap<String, String>,
    /// `typedef struct embd_model embd_model;`
    opaque: BTreeSet<String>,
    /// `typedef struct { ... } embd_text;`: fields (type, name).
    structs: BTreeMap<String, Vec<(String, String)>>,
    /// `typedef int (*embd_progress_fn)(...)`: return and parameter types.
    fn_types: BTreeMap<String, CFn>,
    /// `#define EMBD_X 3` and `EMBD_STATUS_X = 3,`: name -> value.
    constants: BTreeMap<String, i64>,
}

/// `text` without `/* */` and `//` comments.
fn strip_c_comments(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix("/*") {
            rest = r.find("*/").map_or("", |i| &r[i + 2..]);
        } else if let Some(r) = rest.strip_prefix("//") {
            rest = r.find('\n').map_or("", |i| &r[i..]);
        } else if rest.starts_with('"') {
            // A string literal, kept whole.
            let end = rest[1..].find('"').map_or(rest.len(), |i| i + 2);
            out.push_str(&rest[..end]);
            rest = &rest[end..];
        } else {
            let c = rest.chars().next().unwrap();
            out.push(c);
            rest = &rest[c.len_utf8()..];
        }
    }
    out
}

/// A C type with single spaces around `*`.
fn norm_c(t: &str) -> String {
    t.replace('*', " * ")
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

/// The type of a parameter declaration (`const embd_model *model` ->
/// `const embd_model *`).
fn param_type(p: &str) -> String {
    let p = norm_c(p);
    let cut = p.rfind([' ', '*']).map_or(0, |i| i + 1);
    let (ty, name) = p.split_at(cut);
    assert!(
        !name.is_empty() && name.chars().all(|c| c.is_alphanumeric() || c == '_'),
        "parameter {p:?} has no name"
    );
    norm_c(ty)
}

fn params_of(list: &str) -> Vec<String> {
    let list = list.trim();
    if list == "void" || list.is_empty() {
        return Vec::new();
    }
    list.split(',').map(param_type).collect()
}

fn header() -> Header {
    let text = strip_c_comments(&read("include/embedder.h"));
    let mut h = Header::default();
    let func = regex::Regex::new(r"^([A-Za-z_][\w \*]*?)\s*\b(embd_\w+)\((.*)\);$").unwrap();
    let fn_type = regex::Regex::new(r"^typedef ([\w \*]+?)\s*\(\*(embd_\w+)\)\((.*)\);$").unwrap();
    let scalar = regex::Regex::new(r"^typedef (u?int\d+_t|int|size_t|float) (embd_\w+);$").unwrap();
    let opaque = regex::Regex::new(r"^typedef struct (embd_\w+) (embd_\w+);$").unwrap();
    let define = regex::Regex::new(r"^#define (EMBD_\w+) (-?\d+)$").unwrap();
    let variant = regex::Regex::new(r"^(EMBD_\w+) = (-?\d+),?$").unwrap();
    let mut lines = text.lines().map(str::trim).filter(|l| !l.is_empty());
    while let Some(l) = lines.next() {
        if let Some(c) = fn_type.captures(l) {
            let f = CFn {
                ret: norm_c(&c[1]),
                params: params_of(&c[3]),
            };
            h.fn_types.insert(c[2].to_string(), f);
        } else if let Some(c) = func.captures(l) {
            let f = CFn {
                ret: norm_c(&c[1]),
                params: params_of(&c[3]),
            };
            assert!(h.fns.insert(c[2].to_string(), f).is_none(), "{}", &c[2]);
        } else if let Some(c) = scalar.captures(l) {
            h.scalars.insert(c[2].to_string(), c[1].to_string());
        } else if let Some(c) = opaque.captures(l) {
            assert_eq!(&c[1], &c[2]);
            h.opaque.insert(c[1].to_string());
        } else if let Some(c) = define.captures(l).or_else(|| variant.captures(l)) {
            h.constants.insert(c[1].to_string(), c[2].parse().unwrap());
        } else if l == "typedef struct {" {
            let mut fields = Vec::new();
            for f in lines.by_ref() {
                if let Some(name) = f.strip_prefix("} ") {
                    let name = name.trim_end_matches(';').to_string();
                    h.structs.insert(name, fields);
                    break;
                }
                let f = f.trim_end_matches(';');
                let ty = param_type(f);
                let name = f.rsplit([' ', '*']).next().unwrap().to_string();
                fields.push((ty, name));
            }
        }
    }
    assert!(h.fns.len() > 50, "only {} functions parsed", h.fns.len());
    h
}

/// `embd_text` -> `EmbdText`.
fn camel(c: &str) -> String {
    c.split('_')
        .map(|w| {
            let mut cs = w.chars();
            cs.next()
                .map(|f| f.to_ascii_uppercase().to_string() + cs.as_str())
                .unwrap_or_default()
        })
        .collect()
}

/// The ctypes type (as the canonical text [`py_canon`] gives) that passes
/// the C type `c`, or `None` for a C type no ctypes type stands for here.
fn ctypes_of(h: &Header, c: &str) -> Option<String> {
    let words: Vec<&str> = c.split(' ').filter(|w| *w != "const").collect();
    let mut ptrs = words.iter().filter(|w| **w == "*").count();
    let base = words.iter().find(|w| **w != "*")?;
    let base = h.scalars.get(*base).map_or(*base, String::as_str);
    let mut t = match (base, ptrs) {
        ("char", 1..) => {
            ptrs -= 1;
            "c_char_p".to_string()
        }
        ("void", 1..) => {
            ptrs -= 1;
            "c_void_p".to_string()
        }
        ("void", 0) => "None".to_string(),
        (b, 1..) if h.opaque.contains(b) => {
            ptrs -= 1;
            "c_void_p".to_string()
        }
        (b, _) if h.structs.contains_key(b) => camel(b),
        (b, _) if h.fn_types.contains_key(b) => b.trim_start_matches("embd_").to_uppercase(),
        ("int", _) => "c_int".to_string(),
        ("float", _) => "c_float".to_string(),
        ("size_t", _) => "c_size_t".to_string(),
        ("int32_t", _) => "c_int32".to_string(),
        ("uint32_t", _) => "c_uint32".to_string(),
        ("uint8_t", _) => "c_uint8".to_string(),
        _ => return None,
    };
    for _ in 0..ptrs {
        t = format!("POINTER({t})");
    }
    Some(t)
}

// ------------------------------------------------------------------ Python

/// The text of the call whose `(` is at `open` in `s`: up to its `)`.
fn balanced(s: &str, open: usize) -> &str {
    let mut depth = 0;
    let mut quote = None;
    for (i, c) in s[open..].char_indices() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '"' | '\'') => quote = Some(c),
            (None, '(' | '[' | '{') => depth += 1,
            (None, ')' | ']' | '}') => {
                depth -= 1;
                if depth == 0 {
                    return &s[open + 1..open + i];
                }
            }
            _ => {}
        }
    }
    panic!("unbalanced call at byte {open}");
}

/// The top-level comma-separated arguments of a call's text.
fn split_args(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let (mut depth, mut quote, mut cur) = (0i32, None, String::new());
    for c in s.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '"' | '\'') => quote = Some(c),
            (None, '(' | '[' | '{') => depth += 1,
            (None, ')' | ']' | '}') => depth -= 1,
            (None, ',') if depth == 0 => {
                out.push(std::mem::take(&mut cur));
                continue;
            }
            _ => {}
        }
        cur.push(c);
    }
    out.push(cur);
    out.into_iter()
        .map(|a| a.split_whitespace().collect::<String>())
        .filter(|a| !a.is_empty())
        .collect()
}

/// Python's `name = <type expression>` assignments (module level and in
/// `_declare`), whitespace removed.
fn py_aliases(py: &str) -> BTreeMap<String, String> {
    let assign = regex::Regex::new(r"(?m)^\s*([A-Za-z_]\w*)\s*=\s*(ctypes\.[^\n]+)$").unwrap();
    assign
        .captures_iter(py)
        .map(|c| (c[1].to_string(), c[2].split_whitespace().collect()))
        .collect()
}

/// A ctypes type expression in canonical text: aliases replaced, `ctypes.`
/// dropped (`ctypes.POINTER(vp)` -> `POINTER(c_void_p)`).
fn py_canon(aliases: &BTreeMap<String, String>, e: &str) -> String {
    let ident = regex::Regex::new(r"[A-Za-z_][\w\.]*").unwrap();
    let mut e = e.to_string();
    for _ in 0..8 {
        let next = ident
            .replace_all(&e, |c: &regex::Captures| {
                let w = &c[0];
                // PROGRESS_FN is a CFUNCTYPE (checked on its own).
                match aliases.get(w) {
                    Some(a) if !a.starts_with("ctypes.CFUNCTYPE") => a.clone(),
                    _ => w.trim_start_matches("ctypes.").to_string(),
                }
            })
            .into_owned();
        if next == e {
            break;
        }
        e = next;
    }
    e
}

/// `_fn(dll, name, restype, *argtypes)` of `_native.py`: name ->
/// (restype, argtypes), canonical; and the line of each.
fn python_decls(py: &str) -> BTreeMap<String, (String, Vec<String>, usize)> {
    let aliases = py_aliases(py);
    let body = &py[py.find("def _declare(").expect("_declare")..];
    let offset = py.len() - body.len();
    let line_of = |i: usize| py[..offset + i].lines().count();
    let loop_names = regex::Regex::new(r"for name in \(([^)]*)\):").unwrap();
    let mut out = BTreeMap::new();
    let mut pending_loop: Option<Vec<String>> = None;
    let mut at = 0;
    while let Some(i) = body[at..].find(['_', 'f']) {
        let i = at + i;
        at = i + 1;
        if body[i..].starts_with("for name in (") {
            let c = loop_names.captures(&body[i..]).expect("for name in (...):");
            pending_loop = Some(
                split_args(&c[1])
                    .iter()
                    .map(|s| s.trim_matches('"').to_string())
                    .collect(),
            );
            continue;
        }
        if !body[i..].starts_with("_fn(") || body[..i].ends_with("def ") {
            continue;
        }
        let args = split_args(balanced(body, i + 3));
        assert!(args.len() >= 3, "line {}: _fn({args:?})", line_of(i));
        assert_eq!(args[0], "dll", "line {}", line_of(i));
        let ret = py_canon(&aliases, &args[2]);
        let types: Vec<String> = args[3..].iter().map(|a| py_canon(&aliases, a)).collect();
        let names = match args[1].strip_prefix('"') {
            Some(n) => vec![n.trim_end_matches('"').to_string()],
            None => {
                assert_eq!(args[1], "name", "line {}", line_of(i));
                pending_loop
                    .take()
                    .expect("_fn(dll, name, ...) outside a loop")
            }
        };
        for n in names {
            let dup = out.insert(n.clone(), (ret.clone(), types.clone(), line_of(i)));
            assert!(dup.is_none(), "_native.py declares {n} twice");
        }
    }
    out
}

/// The binding's own mistakes, one line each (empty: none).
fn python_mismatches(h: &Header, py: &str) -> Vec<String> {
    let mut bad = Vec::new();
    let decls = python_decls(py);
    assert!(
        decls.len() > 40,
        "only {} _fn declarations parsed",
        decls.len()
    );
    for (name, (ret, args, line)) in &decls {
        let Some(c) = h.fns.get(name) else {
            bad.push(format!(
                "_native.py:{line}: {name} is not in include/embedder.h"
            ));
            continue;
        };
        let want_ret = ctypes_of(h, &c.ret);
        if want_ret.as_deref() != Some(ret.as_str()) {
            bad.push(format!(
                "_native.py:{line}: {name} returns {ret}, the header {} ({want_ret:?})",
                c.ret
            ));
        }
        if args.len() != c.params.len() {
            bad.push(format!(
                "_native.py:{line}: {name} has {} argument types, the header {} parameters",
                args.len(),
                c.params.len()
            ));
            continue;
        }
        for (k, (a, p)) in args.iter().zip(&c.params).enumerate() {
            let want = ctypes_of(h, p);
            if want.as_deref() != Some(a.as_str()) {
                bad.push(format!(
                    "_native.py:{line}: {name} argument {k} is {a}, the header's is {p} ({want:?})"
                ));
            }
        }
    }
    let left_out: BTreeSet<&str> = PYTHON_LEAVES_OUT.iter().map(|(n, _)| *n).collect();
    for name in h.fns.keys() {
        if !decls.contains_key(name) && !left_out.contains(name.as_str()) {
            bad.push(format!(
                "_native.py does not declare {name} (lib() declares every embd_* function; \
                 add it, or to PYTHON_LEAVES_OUT with the reason)"
            ));
        }
    }
    for n in &left_out {
        if decls.contains_key(*n) || !h.fns.contains_key(*n) {
            bad.push(format!(
                "PYTHON_LEAVES_OUT names {n}, which is declared or gone"
            ));
        }
    }
    // The structures: `_fields_ = [("ptr", ctypes.c_char_p), ...]`.
    let aliases = py_aliases(py);
    let class = regex::Regex::new(r#"class (\w+)\(ctypes\.Structure\):"#).unwrap();
    for c in class.captures_iter(py) {
        let cls = &c[1];
        let rest = &py[c.get(0).unwrap().end()..];
        let f = rest.find("_fields_ = [").expect("_fields_") + "_fields_ = ".len();
        let fields: Vec<(String, String)> = split_args(balanced(rest, f))
            .iter()
            .map(|t| {
                let inner = split_args(t.trim_start_matches('(').trim_end_matches(')'));
                (
                    inner[0].trim_matches('"').to_string(),
                    py_canon(&aliases, &inner[1]),
                )
            })
            .collect();
        let Some((c_name, c_fields)) = h.structs.iter().find(|(n, _)| camel(n) == cls) else {
            bad.push(format!(
                "_native.py: class {cls} is no struct of the header"
            ));
            continue;
        };
        let want: Vec<(String, String)> = c_fields
            .iter()
            .map(|(t, n)| (n.clone(), ctypes_of(h, t).unwrap_or_else(|| t.clone())))
            .collect();
        if fields != want {
            bad.push(format!(
                "_native.py: {cls} fields {fields:?}, the header's {c_name} {want:?}"
            ));
        }
    }
    // The callback types: `X = ctypes.CFUNCTYPE(restype, *argtypes)`.
    for (alias, e) in &aliases {
        let Some(inner) = e.strip_prefix("ctypes.CFUNCTYPE(") else {
            continue;
        };
        let args: Vec<String> = split_args(&inner[..inner.len() - 1])
            .iter()
            .map(|a| py_canon(&aliases, a))
            .collect();
        let Some((c_name, f)) = h
            .fn_types
            .iter()
            .find(|(n, _)| n.trim_start_matches("embd_").to_uppercase() == *alias)
        else {
            bad.push(format!(
                "_native.py: {alias} is no callback type of the header"
            ));
            continue;
        };
        let want: Vec<String> = std::iter::once(&f.ret)
            .chain(&f.params)
            .map(|t| ctypes_of(h, t).unwrap_or_else(|| t.clone()))
            .collect();
        if args != want {
            bad.push(format!(
                "_native.py: {alias} is CFUNCTYPE{args:?}, the header's {c_name} {want:?}"
            ));
        }
    }
    bad
}

#[test]
fn python_declarations_match_the_header() {
    let h = header();
    let bad = python_mismatches(&h, &read("python/src/embedder/_native.py"));
    assert!(bad.is_empty(), "\n{}", bad.join("\n"));
}

#[test]
fn a_wrong_python_declaration_is_caught() {
    let h = header();
    let py = read("python/src/embedder/_native.py");
    let swap = |from: &str, to: &str| {
        assert!(py.contains(from), "{from}");
        python_mismatches(&h, &py.replacen(from, to, 1))
    };
    let one = |bad: Vec<String>, what: &str| {
        assert!(bad.len() == 1 && bad[0].contains(what), "{what}: {bad:#?}");
    };
    // A type, a missing argument, a name, a return type, a missing function.
    one(
        swap(
            r#""embd_options_set_threads", st, vp, sz)"#,
            r#""embd_options_set_threads", st, vp, ctypes.c_int)"#,
        ),
        "embd_options_set_threads argument 1 is c_int",
    );
    one(
        swap(
            r#""embd_call_dim", st, vp, vp, c_size_p)"#,
            r#""embd_call_dim", st, vp, vp)"#,
        ),
        "embd_call_dim has 2 argument types, the header 3",
    );
    let bad = swap(r#""embd_count_tokens""#, r#""embd_count_token""#);
    assert!(
        bad.iter().any(|b| b.contains("embd_count_token is not in")),
        "{bad:#?}"
    );
    assert!(bad
        .iter()
        .any(|b| b.contains("does not declare embd_count_tokens")));
    one(
        swap(
            r#""embd_version_number", ctypes.c_uint32)"#,
            r#""embd_version_number", ctypes.c_int32)"#,
        ),
        "embd_version_number returns c_int32",
    );
    one(
        swap(
            r#"    _fn(dll, "embd_similarity""#,
            r#"    _gone(dll, "embd_similarity""#,
        ),
        "does not declare embd_similarity",
    );
    one(
        swap(r#"("len", ctypes.c_size_t)"#, r#"("len", ctypes.c_uint32)"#),
        "EmbdText fields",
    );
}

// ------------------------------------------------------------------ Go

/// A Go file's cgo preamble (the comment before `import "C"`), if any.
fn cgo_preamble(go: &str) -> Option<&str> {
    let end = go.find("\nimport \"C\"")?;
    let start = go[..end].rfind("/*")?;
    let close = go[start..end].rfind("*/")?;
    Some(&go[start + 2..start + close])
}

/// The Go binding's C text (preambles and `embd_go.h`) and Go text (the
/// rest), by file.
fn go_sources() -> Vec<(String, String, String)> {
    let dir = repo().join("examples/go");
    let mut out = Vec::new();
    let mut names: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "go" || x == "h"))
        .collect();
    names.sort();
    for p in names {
        let text = std::fs::read_to_string(&p).unwrap();
        let name = p.file_name().unwrap().to_string_lossy().to_string();
        if name.ends_with(".h") {
            out.push((name, text, String::new()));
        } else {
            let c = cgo_preamble(&text).unwrap_or("").to_string();
            out.push((name, c, text));
        }
    }
    out
}

/// Calls of `embd_*` functions in `text` (C, or Go with `prefix` `C.`):
/// (function, argument count).
fn calls(text: &str, prefix: &str) -> Vec<(String, usize)> {
    let re = regex::Regex::new(&format!(r"{}\b(embd_\w+)\s*\(", regex::escape(prefix))).unwrap();
    re.captures_iter(text)
        .map(|c| {
            let open = c.get(0).unwrap().end() - 1;
            (c[1].to_string(), split_args(balanced(text, open)).len())
        })
        .collect()
}

fn go_mismatches(h: &Header, sources: &[(String, String, String)]) -> Vec<String> {
    let mut bad = Vec::new();
    let mut used = BTreeSet::new();
    let constant = regex::Regex::new(r"\bC\.(EMBD_\w+)").unwrap();
    for (file, c_text, go_text) in sources {
        let c_text = strip_c_comments(c_text);
        let go_text = go_text
            .lines()
            .filter(|l| !l.trim_start().starts_with("//"))
            .collect::<Vec<_>>()
            .join("\n");
        let all = calls(&c_text, "").into_iter().chain(calls(&go_text, "C."));
        for (name, n) in all {
            if name.starts_with("embd_go_") || h.scalars.contains_key(&name) {
                continue; // the binding's own helpers; C type conversions
            }
            used.insert(name.clone());
            match h.fns.get(&name) {
                None => bad.push(format!("{file}: calls {name}, which is not in the header")),
                Some(f) if f.params.len() != n => bad.push(format!(
                    "{file}: calls {name} with {n} arguments, the header has {}",
                    f.params.len()
                )),
                Some(_) => {}
            }
        }
        for c in constant.captures_iter(&go_text) {
            if !h.constants.contains_key(&c[1]) {
                bad.push(format!(
                    "{file}: C.{} is not a constant of the header",
                    &c[1]
                ));
            }
        }
    }
    assert!(
        used.len() > 30,
        "only {} functions found in the Go binding",
        used.len()
    );
    bad
}

#[test]
fn go_calls_match_the_header() {
    let h = header();
    let bad = go_mismatches(&h, &go_sources());
    assert!(bad.is_empty(), "\n{}", bad.join("\n"));
}

#[test]
fn a_wrong_go_call_is_caught() {
    let h = header();
    let sources = go_sources();
    let swap = |from: &str, to: &str| {
        let mut s = sources.clone();
        let hit = s.iter_mut().any(|(_, c, g)| {
            let t = if c.contains(from) { c } else { g };
            let found = t.contains(from);
            *t = t.replacen(from, to, 1);
            found
        });
        assert!(hit, "{from}");
        go_mismatches(&h, &s)
    };
    let bad = swap(
        "embd_call_options_set_dimensions(o, dims)",
        "embd_call_options_set_dimensions(o)",
    );
    assert!(
        bad.len() == 1 && bad[0].contains("with 1 arguments, the header has 2"),
        "{bad:#?}"
    );
    let bad = swap("C.embd_dim(", "C.embd_dims(");
    assert!(
        bad.len() == 1 && bad[0].contains("embd_dims, which is not"),
        "{bad:#?}"
    );
    let bad = swap("C.EMBD_PRECISION_INT8", "C.EMBD_PRECISION_INT4");
    assert!(
        bad.len() == 1 && bad[0].contains("EMBD_PRECISION_INT4"),
        "{bad:#?}"
    );
}

/// The C compiler, if there is one.
fn cc() -> Option<String> {
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let ok = std::process::Command::new(&cc)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    ok.then_some(cc)
}

/// Compiles `c` (a preamble) against `include/embedder.h` and
/// `examples/go/embd_go.h`, warnings as errors: the compiler's messages on
/// failure.
fn compile_c(cc: &str, name: &str, c: &str) -> Result<(), String> {
    let dir = std::env::temp_dir().join(format!("embd-bindings-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // `#cgo` lines are cgo's, not C's; cgo declares `_GoString_` (a Go
    // string passed by value) and its two accessors before the preamble.
    let mut text = String::from(
        "#include <stddef.h>\n\
         typedef struct { const char *p; ptrdiff_t n; } _GoString_;\n\
         size_t _GoStringLen(_GoString_ s);\n\
         const char *_GoStringPtr(_GoString_ s);\n",
    );
    for l in c.lines().filter(|l| !l.trim_start().starts_with("#cgo")) {
        text.push_str(l);
        text.push('\n');
    }
    let file = dir.join(format!("{name}.c"));
    std::fs::write(&file, text).unwrap();
    let out = std::process::Command::new(cc)
        .args(["-std=c11", "-fsyntax-only", "-Wall", "-Werror"])
        .args(["-Wno-unused-function", "-Wno-unused-variable"])
        .args([
            "-Werror=incompatible-pointer-types",
            "-Werror=int-conversion",
        ])
        .args(["-Wconversion", "-Wno-sign-conversion"])
        .arg("-I")
        .arg(repo().join("include"))
        .arg("-I")
        .arg(repo().join("examples/go"))
        .arg(&file)
        .output()
        .unwrap();
    let _ = std::fs::remove_file(&file);
    if out.status.success() {
        Ok(())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

#[test]
fn go_c_side_compiles_against_the_header() {
    let Some(cc) = cc() else {
        eprintln!("skipping: no C compiler (cc or $CC)");
        return;
    };
    let mut failed = Vec::new();
    for (file, c, go) in go_sources() {
        let c = if go.is_empty() {
            // embd_go.h on its own.
            format!("#include \"{file}\"\n")
        } else {
            c
        };
        if c.trim().is_empty() {
            continue;
        }
        if let Err(e) = compile_c(&cc, &file.replace('.', "_"), &c) {
            failed.push(format!("{file}:\n{e}"));
        }
    }
    assert!(failed.is_empty(), "\n{}", failed.join("\n"));
    // And a preamble that passes a wrong type fails.
    let (_, c, _) = go_sources()
        .into_iter()
        .find(|(f, _, _)| f == "embedder.go")
        .unwrap();
    let from = "embd_options_set_threads(o, threads)";
    assert!(c.contains(from));
    let broken = c.replacen(from, "embd_options_set_threads(o, &threads)", 1);
    let e = compile_c(&cc, "broken", &broken).expect_err("a pointer for a size_t compiles");
    assert!(e.contains("embd_options_set_threads"), "{e}");
}

// ------------------------------------------------------------------ constants

/// Go's `StatusNullArgument Status = 1` constants, as `EMBD_STATUS_*`.
fn go_statuses(go: &str) -> BTreeMap<String, i64> {
    let re = regex::Regex::new(r"(?m)^\s*Status(\w+)\s+Status = (\d+)$").unwrap();
    let split = regex::Regex::new(r"([a-z0-9])([A-Z])").unwrap();
    re.captures_iter(go)
        .map(|c| {
            let snake = split.replace_all(&c[1], "${1}_${2}").to_uppercase();
            (format!("EMBD_STATUS_{snake}"), c[2].parse().unwrap())
        })
        .collect()
}

/// Python's `NAME = 3` members of `class <cls>` (`EMBD_<prefix>NAME`).
fn py_enum(py: &str, cls: &str, prefix: &str) -> BTreeMap<String, i64> {
    let body = &py[py.find(&format!("class {cls}(")).expect(cls)..];
    let re = regex::Regex::new(r"^    ([A-Z][A-Z0-9_]*) = (\d+)$").unwrap();
    body.lines()
        .skip(1)
        .take_while(|l| l.is_empty() || l.starts_with(' '))
        .filter_map(|l| re.captures(l))
        .map(|c| (format!("{prefix}{}", &c[1]), c[2].parse().unwrap()))
        .collect()
}

/// Python's `"name": value` (or `"name": (value, ...)`) entries of the
/// dict `NAME = {...}` / `NAME: ... = {...}`.
fn py_dict(py: &str, name: &str) -> BTreeMap<String, i64> {
    let at = regex::Regex::new(&format!(r"(?m)^{name}\b[^=]*= \{{"))
        .unwrap()
        .find(py)
        .unwrap_or_else(|| panic!("{name}"));
    let entry = regex::Regex::new(r#""(\w+)":\s*\(?(\d+)"#).unwrap();
    let body = balanced(py, at.end() - 1);
    entry
        .captures_iter(body)
        .map(|c| (c[1].to_string(), c[2].parse().unwrap()))
        .collect()
}

/// The header's constants starting with `prefix`.
fn with_prefix(h: &Header, prefix: &str) -> BTreeMap<String, i64> {
    h.constants
        .iter()
        .filter(|(n, _)| n.starts_with(prefix))
        .map(|(n, v)| (n.clone(), *v))
        .collect()
}

#[test]
fn constants_written_out_in_the_bindings_match_the_header() {
    use embedder::capi::{embd_output_precision_name, embd_precision_name};
    let h = header();
    let statuses = with_prefix(&h, "EMBD_STATUS_");
    assert!(statuses.len() > 10);
    let go = read("examples/go/embedder.go");
    assert_eq!(go_statuses(&go), statuses, "Go's Status constants");
    let errors = read("python/src/embedder/errors.py");
    assert_eq!(
        py_enum(&errors, "Status", "EMBD_STATUS_"),
        statuses,
        "Python's Status"
    );
    // Python's names are the library's (embd_*_name), for every constant.
    let name_of = |f: extern "C" fn(i32) -> *const std::ffi::c_char, v: i64| -> String {
        let p = f(i32::try_from(v).unwrap());
        assert!(!p.is_null(), "{v} has no name");
        // SAFETY: a non-NULL result is a static NUL-terminated string.
        unsafe { std::ffi::CStr::from_ptr(p) }
            .to_str()
            .unwrap()
            .to_string()
    };
    let py = read("python/src/embedder/_embedder.py");
    type NameFn = extern "C" fn(i32) -> *const std::ffi::c_char;
    let tables: [(&str, &str, Option<NameFn>); 3] = [
        ("PRECISIONS", "EMBD_PRECISION_", Some(embd_precision_name)),
        (
            "OUTPUT_PRECISIONS",
            "EMBD_OUTPUT_",
            Some(embd_output_precision_name),
        ),
        ("TRUNCATIONS", "EMBD_TRUNCATION_", None),
    ];
    for (dict, prefix, name) in tables {
        let consts = with_prefix(&h, prefix);
        let d = py_dict(&py, dict);
        let mut values: Vec<i64> = d.values().copied().collect();
        values.sort();
        let mut want: Vec<i64> = consts.values().copied().collect();
        want.sort();
        assert_eq!(values, want, "{dict}: the values of {prefix}*");
        for (k, v) in &d {
            match name {
                Some(f) => assert_eq!(&name_of(f, *v), k, "{dict}[{k:?}]"),
                None => assert_eq!(
                    consts.get(&format!("{prefix}{}", k.to_uppercase())),
                    Some(v),
                    "{dict}[{k:?}]"
                ),
            }
        }
    }
}

#[test]
fn header_parse_sees_the_shapes() {
    let h = header();
    let f = &h.fns["embd_encode"];
    assert_eq!(f.ret, "embd_status");
    assert_eq!(f.params[1], "const char * const *");
    assert_eq!(
        ctypes_of(&h, &f.params[1]).as_deref(),
        Some("POINTER(c_char_p)")
    );
    assert_eq!(h.fns["embd_last_error"].params.len(), 0);
    assert!(h.opaque.contains("embd_model"));
    assert_eq!(h.scalars["embd_precision"], "int32_t");
    assert_eq!(h.constants["EMBD_STATUS_INTERNAL_PANIC"], 91);
    assert!(Path::new(&repo().join("include/embedder.h")).is_file());
}
