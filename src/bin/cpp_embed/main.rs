//! `cpp_embed`: cpp_embedder's command line, same flags, output layouts and
//! exit codes (reference spec section 5), running on this library through the
//! cpp_embedder compatibility API (`embedder::compat`), so model loading
//! (EMBD and legacy files, the sibling `<stem>.vocab`), error codes and
//! messages are exactly those of `libcpp_embedder`.
//!
//! ```text
//! cpp_embed -m MODEL (-t TEXT)... [-f FILE] [-o OUT] [--format json|binary]
//! cpp_embed -m MODEL --similarity TEXT1 TEXT2
//! ```

use std::ffi::{c_char, CStr, CString};
use std::io::Write;
use std::process::ExitCode;

use embedder::compat::{
    embedder_cosine_similarity, embedder_create_with_config, embedder_destroy,
    embedder_embed_batch, embedder_get_dim, embedder_get_error,
};

/// cpp_embedder's dimension, written in the binary header when there are no vectors.
const DEFAULT_DIM: u32 = 384;

const USAGE: &str = "\
Usage: cpp_embed [options]

Generate sentence embeddings.

Options:
  -m, --model PATH        Path to the model weights file (required)
  -t, --text TEXT         Text to embed (may be repeated)
  -f, --file PATH         File with one text per line
  -o, --output PATH       Output file (default: stdout)
      --format FORMAT     Output format: json (default) or binary
      --similarity T1 T2  Print the cosine similarity of two texts
  -h, --help              Show this help

Examples:
  cpp_embed -m model.weights -t \"Hello world\"
  cpp_embed -m model.weights -f texts.txt -o embeddings.json
  cpp_embed -m model.weights --similarity \"cat\" \"dog\"
";

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Format {
    Json,
    Binary,
}

#[derive(Debug)]
struct Args {
    model: String,
    texts: Vec<String>,
    file: Option<String>,
    output: Option<String>,
    format: Format,
    similarity: Option<(String, String)>,
}

enum Parsed {
    Run(Args),
    Help,
}

/// A failure: the message after "Error: ", and whether the usage follows it.
struct Fail {
    msg: String,
    usage: bool,
}

fn parse_error(msg: impl Into<String>) -> Fail {
    Fail {
        msg: msg.into(),
        usage: true,
    }
}

fn run_error(msg: impl Into<String>) -> Fail {
    Fail {
        msg: msg.into(),
        usage: false,
    }
}

/// The value after option `opt`; a missing value or one starting with '-' is
/// refused, as cpp_embedder's parser does.
fn value<'a>(
    it: &mut impl Iterator<Item = &'a String>,
    opt: &str,
    what: &str,
) -> Result<String, Fail> {
    match it.next() {
        Some(v) if !v.starts_with('-') => Ok(v.clone()),
        _ => Err(parse_error(format!("{opt} requires {what} argument"))),
    }
}

fn parse(argv: &[String]) -> Result<Parsed, Fail> {
    let mut model = None;
    let mut texts = Vec::new();
    let mut file = None;
    let mut output = None;
    let mut format = Format::Json;
    let mut similarity = None;
    let mut it = argv.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "-h" | "--help" => return Ok(Parsed::Help),
            "-m" | "--model" => model = Some(value(&mut it, a, "a path")?),
            "-t" | "--text" => texts.push(value(&mut it, a, "a text")?),
            "-f" | "--file" => file = Some(value(&mut it, a, "a path")?),
            "-o" | "--output" => output = Some(value(&mut it, a, "a path")?),
            "--format" => {
                format = match value(&mut it, a, "a format")?.as_str() {
                    "json" => Format::Json,
                    "binary" => Format::Binary,
                    other => {
                        return Err(parse_error(format!(
                            "Invalid format: {other} (expected json or binary)"
                        )))
                    }
                }
            }
            "--similarity" => {
                let t1 = value(&mut it, a, "two text")?;
                let t2 = value(&mut it, a, "two text")?;
                similarity = Some((t1, t2));
            }
            s if s.starts_with('-') => return Err(parse_error(format!("Unknown option: {s}"))),
            s => return Err(parse_error(format!("Unexpected argument: {s}"))),
        }
    }
    let model = model.ok_or_else(|| parse_error("Model path is required (-m)"))?;
    if similarity.is_none() && texts.is_empty() && file.is_none() {
        return Err(parse_error(
            "No input: give at least one -t TEXT or -f FILE (or --similarity)",
        ));
    }
    Ok(Parsed::Run(Args {
        model,
        texts,
        file,
        output,
        format,
        similarity,
    }))
}

/// The texts of a file: lines split at '\n' as `std::getline` does, empty
/// lines skipped, a trailing '\r' kept.
fn file_lines(path: &str) -> Result<Vec<String>, Fail> {
    let bytes =
        std::fs::read(path).map_err(|e| run_error(format!("Cannot open file: {path}: {e}")))?;
    let text = String::from_utf8(bytes)
        .map_err(|e| run_error(format!("{path}: not valid UTF-8 ({e})")))?;
    Ok(text
        .split('\n')
        .filter(|l| !l.is_empty())
        .map(str::to_owned)
        .collect())
}

fn last_error() -> String {
    // SAFETY: embedder_get_error never returns NULL; the string is valid until
    // the next compat call on this thread, and is copied at once.
    unsafe { CStr::from_ptr(embedder_get_error()) }
        .to_string_lossy()
        .into_owned()
}

fn c_string(s: &str) -> Result<CString, Fail> {
    CString::new(s).map_err(|_| run_error("text contains a NUL byte"))
}

/// A loaded compat handle, destroyed on drop.
struct Model(*mut std::ffi::c_void);

impl Model {
    fn open(path: &str) -> Result<Model, Fail> {
        let p = c_string(path)?;
        // SAFETY: `p` is NUL-terminated and outlives the call. The original
        // CLI filled only the weights path: defaults (256 tokens, normalized,
        // all threads).
        let h = unsafe { embedder_create_with_config(p.as_ptr(), 0, 1, 0) };
        if h.is_null() {
            return Err(run_error(last_error()));
        }
        Ok(Model(h))
    }

    fn dim(&self) -> u32 {
        embedder_get_dim(self.0)
    }

    fn embed(&self, texts: &[String]) -> Result<Vec<f32>, Fail> {
        let dim = self.dim() as usize;
        let n = u32::try_from(texts.len()).map_err(|_| run_error("too many texts"))?;
        let size = u32::try_from(texts.len() * dim).map_err(|_| run_error("too many texts"))?;
        let cs = texts
            .iter()
            .map(|t| c_string(t))
            .collect::<Result<Vec<_>, _>>()?;
        let ptrs: Vec<*const c_char> = cs.iter().map(|c| c.as_ptr()).collect();
        let mut out = vec![0.0f32; texts.len() * dim];
        // SAFETY: `ptrs` holds `n` NUL-terminated strings alive for the call;
        // `out` is writable for `size` floats.
        let code =
            unsafe { embedder_embed_batch(self.0, ptrs.as_ptr(), n, out.as_mut_ptr(), size) };
        if code != 0 {
            return Err(run_error(last_error()));
        }
        Ok(out)
    }
}

impl Drop for Model {
    fn drop(&mut self) {
        embedder_destroy(self.0);
    }
}

/// `printf("%.*g", precision, v)`: C's shortest-of-%e/%f formatting, which is
/// what `std::ostream << std::setprecision(p)` prints.
fn c_format(fmt: &CStr, v: f64) -> String {
    let mut buf = [0u8; 64];
    // SAFETY: the buffer is 64 bytes (a %g/%f of a finite or non-finite double
    // with precision <= 8 is far shorter), the format takes one double.
    let n = unsafe { libc::snprintf(buf.as_mut_ptr().cast(), buf.len(), fmt.as_ptr(), v) };
    let n = usize::try_from(n).unwrap_or(0).min(buf.len() - 1);
    String::from_utf8_lossy(&buf[..n]).into_owned()
}

/// JSON string escaping as cpp_embedder wrote it: short escapes for `"` `\`
/// and \b \f \n \r \t, `\u00xx` (lowercase) for other bytes below 0x20, all
/// other bytes (UTF-8 included) as they are.
fn json_escape(s: &str, out: &mut Vec<u8>) {
    for &b in s.as_bytes() {
        match b {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            0x08 => out.extend_from_slice(b"\\b"),
            0x0c => out.extend_from_slice(b"\\f"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            0..=0x1f => out.extend_from_slice(format!("\\u{b:04x}").as_bytes()),
            _ => out.push(b),
        }
    }
}

fn json(texts: &[String], vectors: &[f32], dim: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(texts.len() * (dim * 16 + 64) + 32);
    out.extend_from_slice(b"{\n  \"embeddings\": [\n");
    for (i, t) in texts.iter().enumerate() {
        if i > 0 {
            out.extend_from_slice(b",\n");
        }
        out.extend_from_slice(b"    {\n      \"text\": \"");
        json_escape(t, &mut out);
        out.extend_from_slice(b"\",\n      \"vector\": [");
        for (j, v) in vectors[i * dim..(i + 1) * dim].iter().enumerate() {
            if j > 0 {
                out.extend_from_slice(b", ");
            }
            out.extend_from_slice(c_format(c"%.8g", f64::from(*v)).as_bytes());
        }
        out.extend_from_slice(b"]\n    }");
    }
    if !texts.is_empty() {
        out.push(b'\n');
    }
    out.extend_from_slice(b"  ]\n}\n");
    out
}

fn binary(count: usize, vectors: &[f32], dim: u32) -> Result<Vec<u8>, Fail> {
    let count = u32::try_from(count).map_err(|_| run_error("too many texts"))?;
    let dim = if count == 0 { DEFAULT_DIM } else { dim };
    let mut out = Vec::with_capacity(8 + vectors.len() * 4);
    out.extend_from_slice(&count.to_ne_bytes());
    out.extend_from_slice(&dim.to_ne_bytes());
    for v in vectors {
        out.extend_from_slice(&v.to_ne_bytes());
    }
    Ok(out)
}

fn write_output(path: Option<&str>, bytes: &[u8]) -> Result<(), Fail> {
    match path {
        Some(p) => std::fs::write(p, bytes)
            .map_err(|e| run_error(format!("Cannot open output file: {p}: {e}"))),
        None => {
            let mut so = std::io::stdout().lock();
            so.write_all(bytes)
                .and_then(|()| so.flush())
                .map_err(|e| run_error(format!("writing stdout: {e}")))
        }
    }
}

fn run(args: Args) -> Result<(), Fail> {
    let model = Model::open(&args.model)?;
    if let Some((t1, t2)) = &args.similarity {
        let v = model.embed(&[t1.clone(), t2.clone()])?;
        let dim = model.dim();
        let d = dim as usize;
        // SAFETY: `v` holds two vectors of `dim` floats.
        let s = unsafe { embedder_cosine_similarity(v.as_ptr(), v[d..].as_ptr(), dim) };
        let text = format!(
            "Text 1: \"{t1}\"\nText 2: \"{t2}\"\nCosine similarity: {}\n",
            c_format(c"%.6f", f64::from(s))
        );
        return write_output(None, text.as_bytes());
    }
    let mut texts = args.texts;
    if let Some(f) = &args.file {
        texts.extend(file_lines(f)?);
    }
    let vectors = model.embed(&texts)?;
    let dim = model.dim();
    let bytes = match args.format {
        Format::Json => json(&texts, &vectors, dim as usize),
        Format::Binary => binary(texts.len(), &vectors, dim)?,
    };
    write_output(args.output.as_deref(), &bytes)
}

fn main() -> ExitCode {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    if argv.is_empty() {
        eprint!("{USAGE}");
        return ExitCode::from(1);
    }
    let result = parse(&argv).and_then(|p| match p {
        Parsed::Help => {
            print!("{USAGE}");
            Ok(())
        }
        Parsed::Run(args) => run(args),
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(f) => {
            eprintln!("Error: {}", f.msg);
            if f.usage {
                eprint!("\n{USAGE}");
            }
            ExitCode::from(1)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| (*s).to_owned()).collect()
    }

    fn err(a: &[&str]) -> String {
        match parse(&argv(a)) {
            Err(f) => {
                assert!(f.usage);
                f.msg
            }
            Ok(_) => panic!("{a:?} parsed"),
        }
    }

    #[test]
    fn parses_the_original_flags() {
        let Ok(Parsed::Run(a)) = parse(&argv(&[
            "-m", "m.w", "-t", "a", "--text", "b", "-f", "x", "-f", "y", "-o", "o", "--format",
            "binary",
        ])) else {
            panic!()
        };
        assert_eq!(a.model, "m.w");
        assert_eq!(a.texts, ["a", "b"]);
        assert_eq!(a.file.as_deref(), Some("y")); // only the last -f counts
        assert_eq!(a.output.as_deref(), Some("o"));
        assert_eq!(a.format, Format::Binary);
        let Ok(Parsed::Run(a)) = parse(&argv(&["--model", "m", "--similarity", "x", "y"])) else {
            panic!()
        };
        assert_eq!(a.similarity, Some(("x".into(), "y".into())));
        assert!(matches!(
            parse(&argv(&["-t", "a", "--help"])),
            Ok(Parsed::Help)
        ));
    }

    #[test]
    fn refuses_what_the_original_refuses() {
        assert!(err(&["-m", "-t"]).contains("requires"));
        assert!(err(&["-m"]).contains("requires"));
        assert!(err(&["-m", "m", "--similarity", "a"]).contains("requires"));
        assert_eq!(err(&["-m", "m", "--bogus"]), "Unknown option: --bogus");
        assert_eq!(err(&["-m", "m", "word"]), "Unexpected argument: word");
        assert!(err(&["-m", "m"]).contains("-t"));
        assert!(err(&["-t", "x"]).contains("Model"));
        assert!(err(&["-m", "m", "-t", "x", "--format", "xml"]).contains("xml"));
    }

    #[test]
    fn formats_like_iostream_setprecision_8() {
        assert_eq!(c_format(c"%.8g", 0.1f32 as f64), "0.1");
        assert_eq!(c_format(c"%.8g", -0.0123456789), "-0.012345679");
        assert_eq!(c_format(c"%.8g", 1.5e-5), "1.5e-05");
        assert_eq!(c_format(c"%.6f", 0.5), "0.500000");
    }

    #[test]
    fn json_layout_and_escapes() {
        let out = json(
            &["a\"\\\u{1}\té".into(), "b".into()],
            &[1.0, 0.5, -2.0, 0.25],
            2,
        );
        let want = "{\n  \"embeddings\": [\n    {\n      \"text\": \"a\\\"\\\\\\u0001\\té\",\n      \"vector\": [1, 0.5]\n    },\n    {\n      \"text\": \"b\",\n      \"vector\": [-2, 0.25]\n    }\n  ]\n}\n";
        assert_eq!(String::from_utf8(out).unwrap(), want);
    }

    #[test]
    fn binary_layout() {
        let b = binary(1, &[1.0, 2.0], 2).ok().unwrap();
        assert_eq!(&b[..4], &1u32.to_ne_bytes());
        assert_eq!(&b[4..8], &2u32.to_ne_bytes());
        assert_eq!(&b[8..12], &1.0f32.to_ne_bytes());
        let e = binary(0, &[], 0).ok().unwrap();
        assert_eq!(e, [0u32.to_ne_bytes(), 384u32.to_ne_bytes()].concat());
    }
}
