//! `embd verify`: checks a model file completely.

use std::path::PathBuf;
use std::process::ExitCode;

use embedder::{Engine, Error};

#[derive(clap::Args)]
pub struct Args {
    /// Model file, or hub id `org/name[@revision]` in the HuggingFace cache.
    pub file: PathBuf,
}

/// Runs `embd verify`: exit 0 if the file is valid, else print the first
/// problem and exit 1.
pub fn run(args: Args) -> Result<ExitCode, Error> {
    let file = embedder::hub::resolve_model_path(&args.file)?;
    match Engine::verify(&file) {
        Ok(summary) => {
            println!("ok: {}: {summary}", file.display());
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => {
            println!("invalid: {e}");
            Ok(ExitCode::from(1))
        }
    }
}
