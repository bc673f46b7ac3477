//! `embd serve`: the HTTP server, the `embd-serve` binary next to `embd`.

use std::process::ExitCode;

use embedder::Error;

#[derive(clap::Args)]
pub struct Args {
    /// Arguments of `embd-serve`, e.g. `-m models/all-MiniLM-L6-v2.weights --port 8080`.
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    pub args: Vec<std::ffi::OsString>,
}

/// `embd serve`: replaces this process with the `embd-serve` binary next to
/// `embd` (the server lives in its own crate, `server/`, so that the library
/// never links an HTTP stack), passing `args` on.
pub fn run(args: Args) -> Result<ExitCode, Error> {
    crate::exec_sibling("embd-serve", "embd-server", &args.args)
}
