//! `embd serve`: an HTTP server over the embedder engine that speaks
//! text-embeddings-inference's (TEI 1.9) native routes and OpenAI's
//! `/v1/embeddings`, batching requests across clients by a token budget.
//!
//! [`Config`] is the command line; [`spawn`] starts a server on its own
//! runtime (used by the binary and the tests); see `docs/SERVER.md`.

pub mod batcher;
pub mod error;
pub mod metrics;
pub mod openapi;
pub mod routes;

use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use embedder::{Embedder, Engine, Options};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

use crate::batcher::Batcher;
use crate::metrics::Metrics;

/// The server's version (the workspace's).
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// The command line of `embd serve` (and of `embd-serve`).
#[derive(clap::Parser, Debug, Clone)]
#[command(
    name = "embd serve",
    version,
    about = "Serve embedding models over HTTP: TEI's routes (/embed, /tokenize, /similarity, \
             /info, /metrics, ...) and OpenAI's /v1/embeddings"
)]
pub struct Config {
    /// A model to serve: PATH, or NAME=PATH (NAME is what a request's "model"
    /// field picks; default: the file's model name). Repeat for several; the
    /// first is the default.
    #[arg(
        short = 'm',
        long = "model",
        required = true,
        value_name = "[NAME=]PATH"
    )]
    pub models: Vec<String>,
    /// Address to listen on.
    #[arg(long, alias = "hostname", default_value = "127.0.0.1")]
    pub host: String,
    /// Port to listen on (0: any free port, printed at start).
    #[arg(short, long, default_value_t = 8080)]
    pub port: u16,
    /// Engine worker threads per model (default: every core).
    #[arg(long)]
    pub threads: Option<usize>,
    /// Tokens per engine call: requests queued together are packed into calls of
    /// at most this many tokens (a longer single request runs alone).
    #[arg(long, default_value_t = 16384)]
    pub max_batch_tokens: usize,
    /// Microseconds an engine call may wait for more requests while below the
    /// token budget (0: run as soon as the engine is free; requests arriving
    /// meanwhile form the next call).
    #[arg(long, default_value_t = 0)]
    pub max_batch_wait_us: u64,
    /// Inference requests served at once; more are answered 429.
    #[arg(long, default_value_t = 512)]
    pub max_concurrent_requests: usize,
    /// Inputs per request; more are answered 413.
    #[arg(long, default_value_t = 32)]
    pub max_client_batch_size: usize,
    /// Request body bytes; more are answered 413.
    #[arg(long, default_value_t = 2_000_000)]
    pub payload_limit: usize,
    /// Truncate inputs longer than the model when a request does not say
    /// (`truncate: null`); false refuses them with 413.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub auto_truncate: bool,
    /// Seconds a client has to send a request's headers, and again its body
    /// (slower: the connection is closed, or 408).
    #[arg(long, default_value_t = 10)]
    pub read_timeout_secs: u64,
    /// Seconds in-flight requests get to finish after SIGTERM/SIGINT.
    #[arg(long, default_value_t = 30)]
    pub shutdown_timeout_secs: u64,
    /// Skip the CRC check of model files at start (faster start-up).
    #[arg(long)]
    pub no_verify: bool,
}

impl Config {
    /// A configuration serving `model` on 127.0.0.1, any free port, with
    /// every other setting at its default.
    pub fn for_model(model: impl Into<String>) -> Config {
        use clap::Parser;
        let mut c = Config::parse_from(["embd-serve", "-m", "x"]);
        c.models = vec![model.into()];
        c.port = 0;
        c
    }
}

/// One served model.
pub struct Model {
    /// The name requests use.
    pub name: String,
    /// The file.
    pub path: PathBuf,
    /// The engine.
    pub engine: Arc<Embedder>,
    /// Its queue and engine thread.
    pub batcher: Batcher,
}

/// What every handler sees.
pub struct AppState {
    /// The models, the default first.
    pub models: Vec<Model>,
    /// The configuration.
    pub cfg: Config,
    /// Counters for `/metrics`.
    pub metrics: Arc<Metrics>,
    /// Inference requests served at once.
    pub permits: Arc<Semaphore>,
    /// SIGTERM seen: `/health` says 503.
    pub stopping: AtomicBool,
}

impl AppState {
    /// The model a request's `model` field names, else the default.
    pub fn model(&self, name: Option<&str>) -> &Model {
        name.and_then(|n| self.models.iter().find(|m| m.name == n))
            .unwrap_or(&self.models[0])
    }

    /// Requests waiting in every model's queue.
    pub fn queue_depth(&self) -> usize {
        self.models.iter().map(|m| m.batcher.depth()).sum()
    }

    /// Requests holding a permit.
    pub fn in_flight(&self) -> usize {
        self.cfg
            .max_concurrent_requests
            .saturating_sub(self.permits.available_permits())
    }
}

/// Splits a `-m` value into its name and path: `NAME=PATH` when the part
/// before `=` has no `/` and the whole value is not an existing file.
fn split_model_arg(arg: &str) -> (Option<String>, PathBuf) {
    if let Some((n, p)) = arg.split_once('=') {
        if !n.is_empty() && !n.contains('/') && !std::path::Path::new(arg).exists() {
            return (Some(n.to_string()), PathBuf::from(p));
        }
    }
    (None, PathBuf::from(arg))
}

/// Opens every model of `cfg` and starts its batcher.
///
/// # Errors
/// A message naming the model that failed, or a duplicate name.
pub fn load(cfg: &Config, metrics: &Arc<Metrics>) -> Result<Vec<Model>, String> {
    let mut models: Vec<Model> = Vec::new();
    for arg in &cfg.models {
        let (name, path) = split_model_arg(arg);
        let mut opts = Options::new().verify_checksums(!cfg.no_verify);
        if let Some(t) = cfg.threads {
            opts = opts.threads(t);
        }
        let engine = match Engine::open(&path, &opts) {
            Ok(Engine::Bert(e)) => Arc::new(*e),
            Ok(Engine::Static(_)) => {
                return Err(format!(
                    "{}: static word-embedding models are not served (only encoder models)",
                    path.display()
                ))
            }
            Err(e) => return Err(format!("{}: {e}", path.display())),
        };
        let name = name.unwrap_or_else(|| {
            let n = engine.info().name;
            if n.is_empty() {
                path.file_stem()
                    .map_or("model".into(), |s| s.to_string_lossy().into_owned())
            } else {
                n
            }
        });
        if models.iter().any(|m| m.name == name) {
            return Err(format!(
                "two models are named '{name}': give each a name with NAME=PATH"
            ));
        }
        let batcher = Batcher::start(
            Arc::clone(&engine),
            cfg.max_batch_tokens.max(1),
            Duration::from_micros(cfg.max_batch_wait_us),
            Arc::clone(metrics),
        )
        .map_err(|e| format!("cannot start the engine thread: {e}"))?;
        models.push(Model {
            name,
            path,
            engine,
            batcher,
        });
    }
    Ok(models)
}

/// Serves `state` on `listener` until `shutdown` resolves; then stops
/// accepting, lets in-flight requests finish (at most
/// `shutdown_timeout_secs`), and returns.
pub async fn serve(
    listener: TcpListener,
    state: Arc<AppState>,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()> {
    let app = routes::router(Arc::clone(&state));
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    let read_timeout = Duration::from_secs(state.cfg.read_timeout_secs.max(1));
    tokio::pin!(shutdown);
    loop {
        let (stream, _) = tokio::select! {
            r = listener.accept() => match r {
                Ok(c) => c,
                // Out of file descriptors and the like: wait a little, go on.
                Err(_) => {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let _ = stream.set_nodelay(true);
        let svc = hyper_util::service::TowerToHyperService::new(app.clone());
        let conn = hyper::server::conn::http1::Builder::new()
            .timer(TokioTimer::new())
            .header_read_timeout(read_timeout)
            .serve_connection(TokioIo::new(stream), svc);
        let conn = graceful.watch(conn);
        tokio::spawn(async move {
            let _ = conn.await;
        });
    }
    drop(listener);
    state.stopping.store(true, Ordering::SeqCst);
    let grace = Duration::from_secs(state.cfg.shutdown_timeout_secs);
    let _ = tokio::time::timeout(grace, graceful.shutdown()).await;
    Ok(())
}

/// A server running on its own thread and runtime.
pub struct Handle {
    /// Where it listens.
    pub addr: SocketAddr,
    /// Time from [`spawn`]'s call to listening, models loaded.
    pub startup: Duration,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Handle {
    /// Stops accepting, waits for in-flight requests, joins the thread.
    pub fn stop(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Handle {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// Loads the models of `cfg`, binds `host:port` and serves on a new thread
/// until the [`Handle`] is stopped or dropped.
///
/// # Errors
/// A model that does not open, an address that cannot be bound.
pub fn spawn(cfg: Config) -> Result<Handle, String> {
    let started = Instant::now();
    let metrics = Arc::new(Metrics::default());
    let models = load(&cfg, &metrics)?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("embd-serve-http")
        .build()
        .map_err(|e| format!("cannot start the runtime: {e}"))?;
    let addr = format!("{}:{}", cfg.host, cfg.port);
    let listener = rt
        .block_on(TcpListener::bind(&addr))
        .map_err(|e| format!("cannot listen on {addr}: {e}"))?;
    let local = listener
        .local_addr()
        .map_err(|e| format!("cannot listen on {addr}: {e}"))?;
    let state = Arc::new(AppState {
        models,
        permits: Arc::new(Semaphore::new(cfg.max_concurrent_requests.max(1))),
        cfg,
        metrics,
        stopping: AtomicBool::new(false),
    });
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let thread = std::thread::Builder::new()
        .name("embd-serve".into())
        .spawn(move || {
            let _ = rt.block_on(serve(listener, state, async {
                let _ = rx.await;
            }));
            // Connections still open after the grace period go with the runtime.
            rt.shutdown_timeout(Duration::from_millis(100));
        })
        .map_err(|e| format!("cannot start the server thread: {e}"))?;
    Ok(Handle {
        addr: local,
        startup: started.elapsed(),
        stop: Some(tx),
        thread: Some(thread),
    })
}
