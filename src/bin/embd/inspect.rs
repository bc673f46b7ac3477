//! `embd inspect`: a model file's header, metadata, vocabulary and tensor
//! table.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use embedder::{Error, ModelFile, ReadOptions};

use crate::stdout_err;

#[derive(clap::Args)]
pub struct Args {
    /// Model file, HF folder, or hub id `org/name[@revision]` in the
    /// HuggingFace cache.
    pub file: PathBuf,
    /// Machine-readable output.
    #[arg(long)]
    pub json: bool,
}

/// Runs `embd inspect`.
pub fn run(args: Args) -> Result<ExitCode, Error> {
    let Args { file, json } = args;
    let file = embedder::hub::resolve_model_path(&file)?;
    let m = ModelFile::open(&file, ReadOptions::default())?;
    let out = std::io::stdout();
    let mut out = out.lock();
    if json {
        writeln!(out, "{}", inspect_json(&m)).map_err(stdout_err)?;
    } else {
        print_inspect(&m, &mut out).map_err(stdout_err)?;
    }
    Ok(ExitCode::SUCCESS)
}

fn print_inspect(m: &ModelFile, out: &mut dyn Write) -> std::io::Result<()> {
    if !m.details.iter().any(|(k, _)| k == "format") {
        writeln!(out, "format: {}", m.format.name())?;
    }
    for (k, v) in &m.details {
        writeln!(out, "{k}: {v}")?;
    }
    writeln!(out, "\nmetadata ({} keys):", m.metadata.len())?;
    for (k, v) in &m.metadata {
        writeln!(out, "  {k} = {v}")?;
    }
    match &m.vocab {
        Some(v) => {
            let s = v.specials();
            writeln!(
                out,
                "\nvocabulary: {} tokens; special ids: pad={} unk={} cls={} sep={} mask={}",
                v.len(),
                s.pad,
                s.unk,
                s.cls,
                s.sep,
                s.mask
            )?;
        }
        None => writeln!(out, "\nvocabulary: none")?,
    }
    let tok = embedder::model::tokenizer::describe(m);
    if !tok.is_empty() {
        writeln!(out, "\ntokenizer:")?;
        for (k, v) in tok {
            writeln!(out, "  {k}: {v}")?;
        }
    }
    writeln!(out, "\ntensors ({}):", m.tensors.len())?;
    writeln!(
        out,
        "  {:<52} {:<5} {:<14} {:>12} {:>12}",
        "name", "dtype", "shape", "offset", "bytes"
    )?;
    let mut total = 0usize;
    for t in &m.tensors {
        total += t.byte_len();
        writeln!(
            out,
            "  {:<52} {:<5} {:<14} {:>12} {:>12}",
            t.name,
            t.dtype.name(),
            format!("{:?}", t.shape),
            t.file_offset,
            t.byte_len()
        )?;
    }
    writeln!(out, "  total tensor bytes: {total}")
}

fn inspect_json(m: &ModelFile) -> serde_json::Value {
    use serde_json::{json, Map, Value};
    let details: Map<String, Value> = m
        .details
        .iter()
        .map(|(k, v)| (k.clone(), Value::String(v.clone())))
        .collect();
    let tensors: Vec<Value> = m
        .tensors
        .iter()
        .map(|t| {
            json!({"name": t.name, "dtype": t.dtype.name(), "shape": t.shape,
                   "offset": t.file_offset, "bytes": t.byte_len()})
        })
        .collect();
    let vocab = m.vocab.as_ref().map(|v| {
        let s = v.specials();
        json!({"size": v.len(), "special_ids": {"pad": s.pad, "unk": s.unk, "cls": s.cls, "sep": s.sep, "mask": s.mask}})
    });
    json!({
        "format": m.format.name(),
        "header": details,
        "metadata": m.metadata,
        "vocab": vocab,
        "tokenizer": embedder::model::tokenizer::describe(m)
            .into_iter()
            .map(|(k, v)| (k, Value::String(v)))
            .collect::<Map<String, Value>>(),
        "tensor_count": m.tensors.len(),
        "tensors": tensors,
    })
}
