//! `embd-serve` (also run as `embd serve`): see `docs/SERVER.md`.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

use clap::Parser;
use embd_server::{metrics::Metrics, serve, AppState, Config};
use tokio::net::TcpListener;

fn main() -> ExitCode {
    let cfg = Config::parse();
    let started = Instant::now();
    let state = match AppState::new(cfg, Arc::new(Metrics::default())) {
        Ok(s) => Arc::new(s),
        Err(e) => {
            eprintln!("embd serve: {e}");
            return ExitCode::FAILURE;
        }
    };
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("embd-serve-http")
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("embd serve: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let addr = format!("{}:{}", state.cfg.host, state.cfg.port);
    let listener = match rt.block_on(TcpListener::bind(&addr)) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("embd serve: cannot listen on {addr}: {e}");
            return ExitCode::FAILURE;
        }
    };
    let local = listener.local_addr().map_or(addr, |a| a.to_string());
    let names: Vec<&str> = state.models.iter().map(|m| m.name.as_str()).collect();
    eprintln!(
        "embd serve: listening on http://{local} (models: {}; ready in {} ms)",
        names.join(", "),
        started.elapsed().as_millis()
    );
    let r = rt.block_on(serve(listener, Arc::clone(&state), stop_signal()));
    eprintln!("embd serve: stopped");
    // In-flight work is done (or the grace period is over): drop the models,
    // which joins their engine threads after their queues drain.
    drop(state);
    rt.shutdown_timeout(std::time::Duration::from_millis(100));
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("embd serve: {e}");
            ExitCode::FAILURE
        }
    }
}

/// SIGTERM or SIGINT (Ctrl-C).
async fn stop_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let (Ok(mut term), Ok(mut int)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) else {
        // Without signal handlers, serve until killed.
        return std::future::pending().await;
    };
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
    eprintln!("embd serve: stopping (finishing requests in flight)");
}
