//! `embd tokenize`: token ids per input.

use std::io::{BufWriter, Write};
use std::process::ExitCode;

use embedder::Error;

use crate::{open_model, stdout_err, EmbedArgs, InputArgs, ModelArgs};

#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    pub model: ModelArgs,
    #[command(flatten)]
    pub input: InputArgs,
    /// Do not truncate to the model's max_seq_length.
    #[arg(long)]
    pub no_truncate: bool,
}

/// Runs `embd tokenize`: prints `{"input_ids": [...]}` per input.
pub fn run(args: Args) -> Result<ExitCode, Error> {
    let Args {
        model,
        input,
        no_truncate,
    } = args;
    let emb = open_model(&model, None, &EmbedArgs::default())?;
    let texts = input.read()?;
    let stdout = std::io::stdout();
    let mut out = BufWriter::new(stdout.lock());
    for t in &texts {
        let ids = if no_truncate {
            emb.tokenize_full(t)
        } else {
            emb.tokenize(t)
        };
        let v = serde_json::json!({ "input_ids": ids });
        writeln!(out, "{v}").map_err(stdout_err)?;
    }
    out.flush().map_err(stdout_err)?;
    Ok(ExitCode::SUCCESS)
}
