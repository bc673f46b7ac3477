//! `embd serve`: the HTTP server, the `embd-serve` binary next to `embd`.

use std::process::ExitCode;

use embedder::{Error, ErrorKind};

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
    let args = &args.args;
    use std::os::unix::process::CommandExt;
    let exe = std::env::current_exe()
        .map_err(|e| Error::new(ErrorKind::Io, format!("cannot find the embd binary: {e}")))?;
    let server = exe.with_file_name("embd-serve");
    if !server.is_file() {
        return Err(Error::new(
            ErrorKind::NotFound,
            format!(
                "embd serve needs the embd-serve binary at {}; build it with \
                 `cargo build --release -p embd-server` (it is built beside embd)",
                server.display()
            ),
        ));
    }
    let e = std::process::Command::new(&server).args(args).exec();
    Err(Error::new(
        ErrorKind::Io,
        format!("cannot run {}: {e}", server.display()),
    ))
}
