//! `embd serve`: an HTTP server over the embedder engine that speaks
//! text-embeddings-inference's (TEI 1.9) native routes and OpenAI's
//! `/v1/embeddings`, batching requests across clients by a token budget.
//!
//! [`Config`] is the command line; [`spawn`] starts a server on its own
//! runtime (used by the binary and the tests); see `docs/SERVER.md`.

pub mod api;
pub mod auth;
pub mod batcher;
pub mod body;
pub mod cohere;
pub mod cors;
pub mod error;
pub mod metrics;
pub mod ollama;
pub mod openapi;
pub mod routes;

use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use embedder::model::head::Task;
use embedder::{Embedder, Engine, ModelFile, Options, ReadOptions, Reranker};
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
    about = "Serve embedding models and rerankers over HTTP: TEI's routes (/embed, /embed_all, \
             /embed_sparse, /rerank, /tokenize, /similarity, /info, /metrics, ...), OpenAI's \
             /v1/embeddings, Ollama's /api/embed, Cohere's /v2/embed and /v2/rerank, the Jina \
             / Cohere /v1/rerank, and /encode (dense, sparse and multi-vector outputs at once)"
)]
pub struct Config {
    /// A model to serve (an embedder or a reranker): PATH, or NAME=PATH (NAME
    /// is what a request's "model" field picks; default: the file's model
    /// name). PATH is a model file, or a hub id `org/name[@revision]` found
    /// in the HuggingFace cache (as `embd -m`; `embd pull` fetches one). Repeat for several; the first of each kind is the default for
    /// its routes.
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
    /// Tokens per input (a pair, for rerankers) at most, below each model's
    /// own maximum (sentence-transformers' `max_seq_length`, `CrossEncoder`'s
    /// `max_length`); default: each model's.
    #[arg(long, value_name = "TOKENS")]
    pub max_input_length: Option<usize>,
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
    /// Accept token ids (`[int]`, `[[int]]`) on /v1/embeddings, read as ids
    /// of the served model's own vocabulary. Off: they are refused (422),
    /// since OpenAI clients send ids of OpenAI's tokenizer (tiktoken), which
    /// would give wrong vectors. The TEI routes always accept ids.
    #[arg(long)]
    pub accept_token_ids: bool,
    /// Origins whose web pages may call the server from a browser (CORS):
    /// `scheme://host[:port]` as the browser sends it, or `*` for any;
    /// repeat or separate with commas. Default: none (no CORS headers).
    #[arg(long, value_name = "ORIGIN")]
    pub cors_allow_origin: Vec<String>,
    /// An API key: requests must send `Authorization: Bearer KEY` with one of
    /// the keys (every route but /health and /ping; /metrics too unless
    /// --metrics-public). Repeat for several. Also read from EMBD_API_KEY
    /// (one key) when the flag is absent; keys that must not show in `ps`
    /// go in --api-key-file. Default: no key needed.
    #[arg(
        long = "api-key",
        value_name = "KEY",
        env = "EMBD_API_KEY",
        hide_env_values = true
    )]
    pub api_keys: Vec<String>,
    /// A file of API keys, one a line (blank lines and lines starting with #
    /// skipped), added to --api-key's.
    #[arg(long, value_name = "FILE")]
    pub api_key_file: Option<PathBuf>,
    /// Serve /metrics without a key when API keys are set.
    #[arg(long)]
    pub metrics_public: bool,
}

impl Config {
    /// A configuration serving `model` on 127.0.0.1, any free port, with
    /// every other setting at its default.
    pub fn for_model(model: impl Into<String>) -> Config {
        use clap::Parser;
        let mut c = Config::parse_from(["embd-serve", "-m", "x"]);
        c.models = vec![model.into()];
        c.port = 0;
        // Not from the environment (EMBD_API_KEY): a test sets its keys.
        c.api_keys.clear();
        c
    }
}

/// One served model.
pub struct Model {
    /// The name requests use.
    pub name: String,
    /// The file.
    pub path: PathBuf,
    /// What it computes.
    pub kind: ModelKind,
}

/// A served model's engine: an embedder or a reranker.
pub enum ModelKind {
    /// An embedding model and its queue.
    Embedder(EmbedModel),
    /// A cross-encoder.
    Reranker(RerankModel),
}

/// An embedding model: the engine and its queue and engine thread (requests
/// are batched across clients).
pub struct EmbedModel {
    /// The engine.
    pub engine: Arc<Embedder>,
    /// Its queue and engine thread.
    pub batcher: Batcher,
}

/// A cross-encoder: one ranking runs at a time on the engine's workers (a
/// ranking is already a batch of pairs); others wait their turn.
pub struct RerankModel {
    /// The engine.
    pub engine: Arc<Reranker>,
    /// One permit: the ranking running.
    pub turn: Arc<Semaphore>,
}

impl Model {
    /// "embedding" or "re-ranker".
    pub fn kind_name(&self) -> &'static str {
        match self.kind {
            ModelKind::Embedder(_) => "embedding",
            ModelKind::Reranker(_) => "re-ranker",
        }
    }
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
    /// The origins allowed to call from a browser (`None`: CORS off).
    pub cors: Option<cors::Origins>,
    /// The API keys (none: requests need no key).
    pub keys: auth::Keys,
}

impl AppState {
    /// Checks `cfg`, then loads its models (their batchers start).
    ///
    /// # Errors
    /// A bad `--cors-allow-origin`, a bad API key or key file, a model that
    /// does not open, a duplicate name.
    pub fn new(cfg: Config, metrics: Arc<Metrics>) -> Result<AppState, String> {
        let cors = cors::Origins::parse(&cfg.cors_allow_origin)?;
        let keys = auth::Keys::load(&cfg.api_keys, cfg.api_key_file.as_deref())?;
        let models = load(&cfg, &metrics)?;
        Ok(AppState {
            models,
            permits: Arc::new(Semaphore::new(cfg.max_concurrent_requests.max(1))),
            cfg,
            metrics,
            stopping: AtomicBool::new(false),
            cors,
            keys,
        })
    }

    /// The model a request's `model` field names when it is of the kind
    /// `pick` accepts, else the first of that kind (OpenAI clients send
    /// names of their own). `Err` names the mismatch: the named model is of
    /// the other kind, or the server has none of this kind.
    pub fn pick<'a, T>(
        &'a self,
        name: Option<&str>,
        what: &str,
        pick: impl Fn(&'a ModelKind) -> Option<T>,
    ) -> Result<(&'a Model, T), String> {
        if let Some(m) = name.and_then(|n| self.models.iter().find(|m| m.name == n)) {
            return pick(&m.kind).map(|t| (m, t)).ok_or_else(|| {
                let article = |w: &str| if w.starts_with('e') { "an" } else { "a" };
                format!(
                    "model '{}' is {} {} model, not {} {what} model",
                    m.name,
                    article(m.kind_name()),
                    m.kind_name(),
                    article(what),
                )
            });
        }
        self.models
            .iter()
            .find_map(|m| pick(&m.kind).map(|t| (m, t)))
            .ok_or_else(|| {
                let served: Vec<String> = self
                    .models
                    .iter()
                    .map(|m| format!("'{}' ({})", m.name, m.kind_name()))
                    .collect();
                format!(
                    "this server has no {what} model (it serves {})",
                    served.join(", ")
                )
            })
    }

    /// The embedding model a request names, else the first.
    pub fn embedder(&self, name: Option<&str>) -> Result<(&Model, &EmbedModel), String> {
        self.pick(name, "embedding", |k| match k {
            ModelKind::Embedder(e) => Some(e),
            ModelKind::Reranker(_) => None,
        })
    }

    /// The reranker a request names, else the first.
    pub fn reranker(&self, name: Option<&str>) -> Result<(&Model, &RerankModel), String> {
        self.pick(name, "re-ranker", |k| match k {
            ModelKind::Reranker(r) => Some(r),
            ModelKind::Embedder(_) => None,
        })
    }

    /// Requests waiting in every model's queue.
    pub fn queue_depth(&self) -> usize {
        self.models
            .iter()
            .map(|m| match &m.kind {
                ModelKind::Embedder(e) => e.batcher.depth(),
                ModelKind::Reranker(r) => usize::from(r.turn.available_permits() == 0),
            })
            .sum()
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
        let (name, spec) = split_model_arg(arg);
        let path = embedder::hub::resolve_model_path(&spec).map_err(|e| e.to_string())?;
        let mut opts = Options::new().verify_checksums(!cfg.no_verify);
        if let Some(t) = cfg.threads {
            opts = opts.threads(t);
        }
        if let Some(n) = cfg.max_input_length {
            opts = opts.max_seq_length(n);
        }
        let failed = |e: embedder::Error| format!("{}: {e}", path.display());
        let file = ModelFile::open(
            &path,
            ReadOptions {
                verify_checksums: opts.verify_checksums,
            },
        )
        .map_err(failed)?;
        let (info_name, kind) = match Task::of(&file.metadata).map_err(failed)? {
            Task::Classification => {
                let r = Reranker::from_model_file(file, &opts).map_err(failed)?;
                let kind = ModelKind::Reranker(RerankModel {
                    engine: Arc::new(r),
                    turn: Arc::new(Semaphore::new(1)),
                });
                (model_name(&kind), kind)
            }
            Task::Embedding => {
                let engine = match Engine::from_model_file(file, &opts)
                    .map_err(failed)?
                    .into_embedder()
                {
                    Ok(e) => Arc::new(e),
                    Err(_) => {
                        return Err(format!(
                            "{}: static word-embedding models are not served (only encoder models)",
                            path.display()
                        ))
                    }
                };
                let batcher = Batcher::start(
                    Arc::clone(&engine),
                    cfg.max_batch_tokens.max(1),
                    Duration::from_micros(cfg.max_batch_wait_us),
                    Arc::clone(metrics),
                )
                .map_err(|e| format!("cannot start the engine thread: {e}"))?;
                let kind = ModelKind::Embedder(EmbedModel { engine, batcher });
                (model_name(&kind), kind)
            }
        };
        let name = name.unwrap_or_else(|| {
            let n = info_name;
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
        models.push(Model { name, path, kind });
    }
    Ok(models)
}

/// The model name a file stores.
fn model_name(kind: &ModelKind) -> String {
    match kind {
        ModelKind::Embedder(e) => e.engine.info().name,
        ModelKind::Reranker(r) => r.engine.info().name,
    }
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
    let state = Arc::new(AppState::new(cfg, Arc::new(Metrics::default()))?);
    let cfg = &state.cfg;
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
