//! The committed `include/embedder.h` must equal the header cbindgen generates
//! from `src/capi` (build.rs writes it to OUT_DIR). Refresh it with
//! `EMBD_BLESS=1 cargo test --test it header`.

use std::path::Path;

const GENERATED: &str = include_str!(concat!(env!("OUT_DIR"), "/embedder.h"));

#[test]
fn header_is_fresh() {
    let committed_path = Path::new(env!("CARGO_MANIFEST_DIR")).join("include/embedder.h");
    let committed = std::fs::read_to_string(&committed_path).unwrap_or_default();
    if committed == GENERATED {
        return;
    }
    if std::env::var_os("EMBD_BLESS").is_some_and(|v| v == "1") {
        std::fs::write(&committed_path, GENERATED).expect("write include/embedder.h");
        eprintln!("refreshed {}", committed_path.display());
        return;
    }
    let (c, g): (Vec<&str>, Vec<&str>) = (committed.lines().collect(), GENERATED.lines().collect());
    let mut diff = String::new();
    let mut shown = 0;
    for i in 0..c.len().max(g.len()) {
        let (a, b) = (c.get(i), g.get(i));
        if a != b {
            diff.push_str(&format!(
                "line {}:\n  - committed: {}\n  + generated: {}\n",
                i + 1,
                a.unwrap_or(&"<none>"),
                b.unwrap_or(&"<none>")
            ));
            shown += 1;
            if shown == 20 {
                diff.push_str("  ...\n");
                break;
            }
        }
    }
    panic!(
        "include/embedder.h is stale (it differs from the header cbindgen generates from src/capi).\n\
         First differences:\n{diff}\nRefresh it with:  EMBD_BLESS=1 cargo test --test it header"
    );
}

#[test]
fn header_version_matches_cargo_toml() {
    let v = env!("CARGO_PKG_VERSION");
    assert!(
        GENERATED.contains(&format!("#define EMBD_VERSION_STRING \"{v}\"")),
        "EMBD_VERSION_STRING is not {v}"
    );
    let major: u32 = env!("CARGO_PKG_VERSION_MAJOR").parse().unwrap();
    let minor: u32 = env!("CARGO_PKG_VERSION_MINOR").parse().unwrap();
    let patch: u32 = env!("CARGO_PKG_VERSION_PATCH").parse().unwrap();
    let n = major * 1_000_000 + minor * 1000 + patch;
    assert!(GENERATED.contains(&format!("#define EMBD_VERSION_NUMBER {n}\n")));
}

#[test]
fn header_has_no_compat_or_foreign_items() {
    for bad in [
        "embedder_create",
        "tokenizer_encode",
        "CompatHandle",
        "DType",
        "#define OK ",
    ] {
        assert!(
            !GENERATED.contains(bad),
            "embedder.h unexpectedly contains {bad}"
        );
    }
}

#[test]
fn every_export_is_documented_with_thread_safety() {
    // Each function prototype is preceded by a doc comment mentioning thread safety.
    let lines: Vec<&str> = GENERATED.lines().collect();
    for (i, l) in lines.iter().enumerate() {
        let is_proto = l.contains("embd_") && l.trim_end().ends_with(");") && !l.starts_with(' ');
        if !is_proto {
            continue;
        }
        let start = lines[..i]
            .iter()
            .rposition(|x| x.starts_with("/**"))
            .unwrap();
        let doc = lines[start..i].join("\n");
        assert!(
            doc.contains("Thread safety"),
            "no thread-safety note for: {l}"
        );
    }
}
