//! The hand-written `include/cpp_embedder/c_api.h` must declare exactly the
//! functions `src/compat` exports, with the same parameter and return types.
//! (cbindgen does not generate that header: it keeps cpp_embedder's typedefs
//! and layout. This test is what keeps the two in step.)
//!
//! Both sides are read as text: every `CPP_EMBEDDER_API` declaration of the
//! header, and every `#[no_mangle] pub [unsafe] extern "C" fn` of the Rust
//! files. C types are mapped to the Rust types by [`c_to_rust`]; a C type the
//! table does not know fails the test.

use std::collections::BTreeMap;
use std::path::Path;

/// A function: its parameter types and return type (`None`: void), as Rust
/// spells them.
#[derive(Debug, PartialEq, Eq)]
struct Sig {
    params: Vec<String>,
    ret: Option<String>,
}

/// The Rust type of a C type of c_api.h, or `None` for one the table lacks.
fn c_to_rust(c: &str) -> Option<&'static str> {
    Some(match c {
        "EmbedderHandle" | "TokenizerHandle" => "*mut c_void",
        // The enum is an `int` in C (its values fit), returned as `c_int`.
        "CppEmbedderError" | "int" => "c_int",
        "uint32_t" => "u32",
        "float" => "f32",
        "const char*" => "*const c_char",
        "char*" => "*mut c_char",
        // cpp_embedder's `const char**` texts: the library only reads the
        // array, so Rust takes it as `*const` (same ABI).
        "const char**" => "*const *const c_char",
        "float*" => "*mut f32",
        "const float*" => "*const f32",
        "uint32_t*" => "*mut u32",
        "const uint32_t*" => "*const u32",
        _ => return None,
    })
}

/// Collapses runs of whitespace to one space.
fn words(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// A C type or declaration with whitespace collapsed and `*` glued to the
/// type: `const char *x` -> `const char* x`.
fn squash(s: &str) -> String {
    words(s).replace(" *", "*")
}

/// Splits `type name` (C) into the type, dropping the parameter name.
fn c_param_type(p: &str) -> String {
    let p = squash(p);
    let cut = p
        .rfind(|c: char| !(c.is_alphanumeric() || c == '_'))
        .map_or(0, |i| i + 1);
    squash(&p[..cut])
}

fn header_sigs(text: &str) -> BTreeMap<String, Sig> {
    let mut out = BTreeMap::new();
    // Declarations start a line with the export macro and end at `;`.
    let mut decls = Vec::new();
    let mut cur: Option<String> = None;
    for line in text.lines() {
        if let Some(d) = line.strip_prefix("CPP_EMBEDDER_API ") {
            cur = Some(String::new());
            cur.as_mut().unwrap().push_str(d);
        } else if let Some(c) = cur.as_mut() {
            c.push(' ');
            c.push_str(line);
        }
        if let Some(d) = cur.take_if(|c| c.contains(';')) {
            decls.push(d[..d.find(';').unwrap()].to_string());
        }
    }
    for decl in decls {
        let open = decl.find('(').expect("a function declaration");
        let head = squash(&decl[..open]);
        let args = &decl[open + 1..decl.rfind(')').expect("closing parenthesis")];
        let name_at = head.rfind(['*', ' ']).map_or(0, |i| i + 1);
        let (ret, name) = (squash(&head[..name_at]), head[name_at..].to_string());
        let map = |c: &str| {
            c_to_rust(c)
                .unwrap_or_else(|| panic!("{name}: C type `{c}` has no Rust mapping in c_to_rust"))
                .to_string()
        };
        let params = if squash(args) == "void" {
            vec![]
        } else {
            args.split(',').map(|p| map(&c_param_type(p))).collect()
        };
        let ret = (ret != "void").then(|| map(&ret));
        assert!(
            out.insert(name.clone(), Sig { params, ret }).is_none(),
            "{name} declared twice in c_api.h"
        );
    }
    out
}

fn rust_sigs(dir: &Path) -> BTreeMap<String, Sig> {
    let mut out = BTreeMap::new();
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .expect("src/compat")
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "rs"))
        .collect();
    files.sort();
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap();
        let mut rest = text.as_str();
        let mut n_no_mangle = text.matches("#[no_mangle]").count();
        while let Some(i) = rest.find("extern \"C\" fn ") {
            let decl_start = &rest[..i];
            assert!(
                decl_start.ends_with("pub ") || decl_start.ends_with("pub unsafe "),
                "{}: an extern \"C\" fn that is not `pub`",
                f.display()
            );
            rest = &rest[i + "extern \"C\" fn ".len()..];
            let open = rest.find('(').unwrap();
            let name = rest[..open].trim().to_string();
            // The parameter list ends at the parenthesis that closes it.
            let mut depth = 0;
            let mut close = open;
            for (j, c) in rest[open..].char_indices() {
                match c {
                    '(' => depth += 1,
                    ')' => {
                        depth -= 1;
                        if depth == 0 {
                            close = open + j;
                            break;
                        }
                    }
                    _ => {}
                }
            }
            let args = &rest[open + 1..close];
            let body = rest[close + 1..].find('{').unwrap() + close + 1;
            let ret = rest[close + 1..body].trim();
            let ret = ret.strip_prefix("->").map(words);
            let params = args
                .split(',')
                .map(str::trim)
                .filter(|p| !p.is_empty())
                .map(|p| words(p.split_once(':').expect("name: type").1))
                .collect();
            out.insert(name, Sig { params, ret });
            rest = &rest[body..];
            n_no_mangle -= 1;
        }
        assert_eq!(
            n_no_mangle,
            0,
            "{}: every #[no_mangle] item should be an extern \"C\" fn",
            f.display()
        );
    }
    out
}

#[test]
fn cpp_embedder_header_matches_the_compat_exports() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let header = std::fs::read_to_string(root.join("include/cpp_embedder/c_api.h")).unwrap();
    let c = header_sigs(&header);
    let rust = rust_sigs(&root.join("src/compat"));
    assert_eq!(c.len(), 29, "c_api.h declares cpp_embedder's 29 functions");
    let missing: Vec<_> = c.keys().filter(|k| !rust.contains_key(*k)).collect();
    let extra: Vec<_> = rust.keys().filter(|k| !c.contains_key(*k)).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "declared in c_api.h but not exported by src/compat: {missing:?}; \
         exported but not declared: {extra:?}"
    );
    for (name, want) in &c {
        assert_eq!(&rust[name], want, "{name}: src/compat differs from c_api.h");
    }
}

#[test]
fn embedder_h_has_no_cpp_embedder_function() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let header = std::fs::read_to_string(root.join("include/cpp_embedder/c_api.h")).unwrap();
    let embd = std::fs::read_to_string(root.join("include/embedder.h")).unwrap();
    for name in header_sigs(&header).keys() {
        assert!(
            !embd.contains(&format!(" {name}(")) && !embd.contains(&format!("*{name}(")),
            "include/embedder.h declares the cpp_embedder function {name}"
        );
    }
}

#[test]
fn the_parsers_see_drift() {
    // A changed parameter type, a missing parameter, and an unknown C type.
    let h = "CPP_EMBEDDER_API float embedder_norm(const float* embedding, uint32_t dim);";
    let s = &header_sigs(h)["embedder_norm"];
    assert_eq!(s.params, ["*const f32", "u32"]);
    assert_eq!(s.ret.as_deref(), Some("f32"));
    let drifted = header_sigs("CPP_EMBEDDER_API float embedder_norm(float* embedding);");
    assert_ne!(&drifted["embedder_norm"], s);
    let unknown = std::panic::catch_unwind(|| {
        header_sigs("CPP_EMBEDDER_API double embedder_norm(const float* e, uint32_t dim);")
    });
    assert!(unknown.is_err(), "an unmapped C type must fail");
}
