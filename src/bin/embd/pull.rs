//! `embd pull`: the downloader, the `embd-pull` binary next to `embd`.

use std::process::ExitCode;

use embedder::Error;

#[derive(clap::Args)]
pub struct Args {
    /// Arguments of `embd-pull`: `ID [--revision R] [--no-convert]`.
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    pub args: Vec<std::ffi::OsString>,
}

/// `embd pull`: replaces this process with the `embd-pull` binary next to
/// `embd` (the downloader lives in its own crate, `pull/`, so that the
/// library never links an HTTP client), passing `args` on.
pub fn run(args: Args) -> Result<ExitCode, Error> {
    crate::exec_sibling("embd-pull", "embd-pull", &args.args)
}
