//! `embd pull ID [--revision R]`: downloads what a conversion needs of a
//! model on the HuggingFace hub into the HuggingFace cache, in
//! `huggingface_hub`'s layout (so sentence-transformers finds it, and a
//! model it fetched is found here), then converts it once into the weights
//! cache, where `embd -m ID`, `embd serve -m ID` and the bindings open it.
//!
//! `HF_ENDPOINT` (default `https://huggingface.co`), `HF_TOKEN` (else the
//! token file `huggingface_hub` writes: `HF_TOKEN_PATH`, `$HF_HOME/token`),
//! `HF_HUB_CACHE` / `HF_HOME`, `EMBD_CACHE_DIR`. Its own crate, so that the
//! library and the C library never link an HTTP client.

mod download;
#[path = "../../src/bin/embd/progress.rs"]
mod progress;

use std::process::ExitCode;

use clap::Parser;
use embedder::hub::{HfCache, HubId, WeightsCache};
use embedder::Error;

/// The hub `HF_ENDPOINT` defaults to.
const DEFAULT_ENDPOINT: &str = "https://huggingface.co";

#[derive(Parser)]
#[command(
    name = "embd pull",
    version,
    about = "Download a model from the HuggingFace hub into the HuggingFace cache, then convert it"
)]
struct Args {
    /// Hub model id, `org/name` or `org/name@revision`.
    id: String,
    /// Branch, tag or commit (default: main).
    #[arg(long)]
    revision: Option<String>,
    /// Download only; skip the conversion into the weights cache.
    #[arg(long)]
    no_convert: bool,
}

fn main() -> ExitCode {
    let args = Args::parse();
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("embd pull: error: {e}");
            ExitCode::from(1)
        }
    }
}

fn run(args: &Args) -> Result<(), Error> {
    let id = HubId::parse(&args.id)?.with_revision(args.revision.as_deref())?;
    if std::env::var("HF_HUB_OFFLINE")
        .is_ok_and(|v| matches!(v.trim(), "1" | "true" | "TRUE" | "yes" | "on"))
    {
        return Err(Error::invalid_argument(
            "HF_HUB_OFFLINE is set: embd pull downloads nothing (a model already in the cache opens by name without it)",
        ));
    }
    let endpoint = std::env::var("HF_ENDPOINT")
        .ok()
        .filter(|e| !e.trim().is_empty())
        .unwrap_or_else(|| DEFAULT_ENDPOINT.to_string());
    let hub = download::Hub::new(endpoint.trim_end_matches('/'), token())?;
    let cache = HfCache::from_env()?;
    let snapshot = hub.pull(&cache, &id)?;
    eprintln!(
        "{id}: commit {} in {}",
        snapshot.commit,
        snapshot.dir.display()
    );
    if !args.no_convert {
        let path = WeightsCache::from_env()?.weights_for(&id, &snapshot)?;
        println!("{}", path.display());
    }
    Ok(())
}

/// `HF_TOKEN`, else the token file of `huggingface_hub login`.
fn token() -> Option<String> {
    if let Some(t) = std::env::var("HF_TOKEN")
        .ok()
        .filter(|t| !t.trim().is_empty())
    {
        return Some(t.trim().to_string());
    }
    let path = match std::env::var_os("HF_TOKEN_PATH").filter(|p| !p.is_empty()) {
        Some(p) => std::path::PathBuf::from(p),
        None => match std::env::var_os("HF_HOME").filter(|p| !p.is_empty()) {
            Some(h) => std::path::PathBuf::from(h).join("token"),
            None => {
                let base = std::env::var_os("XDG_CACHE_HOME")
                    .filter(|p| !p.is_empty())
                    .map(std::path::PathBuf::from)
                    .or_else(|| {
                        std::env::var_os("HOME").map(|h| std::path::PathBuf::from(h).join(".cache"))
                    })?;
                base.join("huggingface").join("token")
            }
        },
    };
    std::fs::read_to_string(path)
        .ok()
        .map(|t| t.trim().to_string())
        .filter(|t| !t.is_empty())
}
