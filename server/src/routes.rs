//! The routes: TEI 1.9's native ones and OpenAI's embeddings, with their
//! exact request and response shapes (unknown request fields are ignored),
//! and `/encode`, the native route of the output stage (dense, sparse and
//! multi-vector outputs of one forward pass).
//!
//! [`ROUTES`] is the one table of routes, a [`Route`] row each (method,
//! path, handler, documentation): [`router`] is built from it, the OpenAPI
//! document and CORS read it, and a test checks it against `/openapi.json`.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{on, MethodFilter, MethodRouter};
use axum::{Json, Router};
use base64::Engine as _;
use embedder::tokenizer::TokenSpan;
use embedder::{
    CallOptions, CallPlan, EncodeRequest, EncodeTask, Encoded, OutputKind, SparseVector, Truncation,
};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use tokio::sync::oneshot;

pub use crate::api::{method_of, Access, Route};
use crate::batcher::{EncodeInputs, EncodeJob, Job};
use crate::body::read_json;
use crate::error::{ApiError, Dialect, ErrorType};
use crate::openapi;
use crate::{cohere, ollama};
use crate::{AppState, EmbedModel, RerankModel};

pub(crate) type St = Arc<AppState>;

/// Every route, one row each: the router, the OpenAPI document, CORS and
/// the API-key check all follow this table. The last two columns: the error
/// body the route's clients read, and who may call it with `--api-key`.
#[rustfmt::skip]
pub static ROUTES: &[Route] = &[
    row("POST", "/embed",          |f| on(f, embed),                 openapi::embed,               TEI,    Key),
    row("POST", "/",               |f| on(f, embed),                 openapi::embed,               TEI,    Key),
    row("POST", "/v1/embeddings",  |f| on(f, openai_embeddings),     openapi::openai_embeddings,   OPENAI, Key),
    row("POST", "/embeddings",     |f| on(f, openai_embeddings),     openapi::openai_embeddings,   OPENAI, Key),
    row("POST", "/tokenize",       |f| on(f, tokenize),              openapi::tokenize,            TEI,    Key),
    row("POST", "/decode",         |f| on(f, decode),                openapi::decode,              TEI,    Key),
    row("POST", "/similarity",     |f| on(f, similarity),            openapi::similarity,          TEI,    Key),
    row("POST", "/embed_all",      |f| on(f, embed_all),             openapi::embed_all,           TEI,    Key),
    row("POST", "/embed_sparse",   |f| on(f, embed_sparse),          openapi::embed_sparse,        TEI,    Key),
    row("POST", "/encode",         |f| on(f, encode),                openapi::encode,              TEI,    Key),
    row("POST", "/rerank",         |f| on(f, rerank),                openapi::rerank,              TEI,    Key),
    row("POST", "/v1/rerank",      |f| on(f, openai_rerank),         openapi::openai_rerank,       OPENAI, Key),
    row("POST", "/v2/rerank",      |f| on(f, cohere_v2_rerank),      openapi::cohere_v2_rerank,    COHERE, Key),
    row("POST", "/v2/embed",       |f| on(f, cohere::embed_v2),      openapi::cohere_embed_v2,     COHERE, Key),
    row("POST", "/v1/embed",       |f| on(f, cohere::embed_v1),      openapi::cohere_embed_v1,     COHERE, Key),
    row("POST", "/api/embed",      |f| on(f, ollama::embed),         openapi::ollama_embed,        OLLAMA, Key),
    row("POST", "/api/embeddings", |f| on(f, ollama::embeddings),    openapi::ollama_embeddings,   OLLAMA, Key),
    row("GET",  "/api/tags",       |f| on(f, ollama::tags),          openapi::ollama_tags,         OLLAMA, Key),
    row("POST", "/api/show",       |f| on(f, ollama::show),          openapi::ollama_show,         OLLAMA, Key),
    row("GET",  "/api/version",    |f| on(f, ollama::version),       openapi::ollama_version,      OLLAMA, Key),
    row("GET",  "/info",           |f| on(f, info),                  openapi::info,                TEI,    Key),
    row("GET",  "/health",         |f| on(f, health),                openapi::health,              TEI,    Public),
    row("GET",  "/ping",           |f| on(f, health),                openapi::health,              TEI,    Public),
    row("GET",  "/metrics",        |f| on(f, metrics),               openapi::metrics,             TEI,    Metrics),
    row("GET",  "/openapi.json",   |f| on(f, openapi_document),      openapi::openapi,             TEI,    Key),
];

const TEI: Dialect = Dialect::Tei;
const OPENAI: Dialect = Dialect::OpenAi;
const COHERE: Dialect = Dialect::Cohere;
const OLLAMA: Dialect = Dialect::Ollama;
use Access::{Key, Metrics, Public};

/// A row of [`ROUTES`].
const fn row(
    method: &'static str,
    path: &'static str,
    handler: fn(MethodFilter) -> MethodRouter<St>,
    documentation: fn() -> Value,
    dialect: Dialect,
    access: Access,
) -> Route {
    Route {
        method,
        path,
        handler,
        documentation,
        dialect,
        access,
    }
}

/// The application: every route of [`ROUTES`], JSON errors for unknown
/// routes and methods, CORS (when configured), and the metrics and timing
/// layer.
pub fn router(state: St) -> Router {
    let mut r = Router::new();
    for route in ROUTES {
        let (m, p) = (route.method, route.path);
        let dialect = route.dialect;
        let not_allowed = move || async move {
            ApiError::new(
                StatusCode::METHOD_NOT_ALLOWED,
                ErrorType::NotFound,
                format!("{p} answers {m} only"),
            )
            .dialect(dialect)
        };
        r = r.route(p, (route.handler)(route.filter()).fallback(not_allowed));
    }
    r.fallback(|req: Request| async move {
        ApiError::new(
            StatusCode::NOT_FOUND,
            ErrorType::NotFound,
            format!("no route {} {}", req.method(), req.uri().path()),
        )
    })
    .layer(axum::middleware::from_fn_with_state(
        (Arc::clone(&state), ROUTES),
        crate::auth::check,
    ))
    .layer(axum::middleware::from_fn_with_state(
        (Arc::clone(&state), ROUTES),
        crate::cors::cors,
    ))
    .layer(axum::middleware::from_fn_with_state(
        Arc::clone(&state),
        observe,
    ))
    .with_state(state)
}

/// Counts every answer by route and status, errors by type, and adds
/// `x-total-time`.
async fn observe(State(st): State<St>, req: Request, next: Next) -> Response {
    let start = Instant::now();
    let path = req.uri().path().to_string();
    let route = ROUTES
        .iter()
        .find(|r| r.path == path)
        .map_or("other", |r| r.path);
    let mut resp = next.run(req).await;
    let took = start.elapsed();
    st.metrics
        .observe_request(route, resp.status().as_u16(), took);
    if let Some(&kind) = resp.extensions().get::<ErrorType>() {
        st.metrics.observe_error(kind);
    }
    set_ms(&mut resp, "x-total-time", took);
    resp
}

fn set_ms(resp: &mut Response, name: &'static str, d: Duration) {
    if let Ok(v) = HeaderValue::from_str(&d.as_millis().to_string()) {
        resp.headers_mut().insert(name, v);
    }
}

fn set_num(resp: &mut Response, name: &'static str, n: usize) {
    resp.headers_mut().insert(name, HeaderValue::from(n));
}

/// An inference request's permit (else 429).
pub(crate) fn permit(st: &AppState) -> Result<tokio::sync::OwnedSemaphorePermit, ApiError> {
    Arc::clone(&st.permits).try_acquire_owned().map_err(|_| {
        ApiError::new(
            StatusCode::TOO_MANY_REQUESTS,
            ErrorType::Overloaded,
            format!(
                "the server is overloaded: {} requests are in flight (--max-concurrent-requests)",
                st.cfg.max_concurrent_requests
            ),
        )
    })
}

/// One input: a text or token ids (without `[CLS]`/`[SEP]`).
#[derive(Debug, Clone)]
pub enum Input {
    /// A text.
    Text(String),
    /// Token ids of a text.
    Ids(Vec<u32>),
}

fn parse_ids(a: &[Value], field: &str) -> Result<Vec<u32>, ApiError> {
    a.iter()
        .enumerate()
        .map(|(j, v)| {
            v.as_u64()
                .and_then(|x| u32::try_from(x).ok())
                .ok_or_else(|| {
                    ApiError::validation(format!(
                        "`{field}`: token id at position {j} ({v}) is not an integer in 0..2^32"
                    ))
                })
        })
        .collect()
}

/// `str | [str] | [int] | [[int] | str]`.
fn parse_inputs(v: &Value, field: &str) -> Result<Vec<Input>, ApiError> {
    match v {
        Value::String(s) => Ok(vec![Input::Text(s.clone())]),
        Value::Array(a) if a.is_empty() => {
            Err(ApiError::empty(format!("`{field}` cannot be empty")))
        }
        Value::Array(a) if a.iter().all(Value::is_number) => {
            Ok(vec![Input::Ids(parse_ids(a, field)?)])
        }
        Value::Array(a) => a
            .iter()
            .enumerate()
            .map(|(i, x)| match x {
                Value::String(s) => Ok(Input::Text(s.clone())),
                Value::Array(ids) => Ok(Input::Ids(parse_ids(ids, &format!("{field}[{i}]"))?)),
                _ => Err(ApiError::validation(format!(
                    "`{field}[{i}]` must be a string or a list of token ids"
                ))),
            })
            .collect(),
        Value::Null => Err(ApiError::validation(format!("`{field}` is missing"))),
        _ => Err(ApiError::validation(format!(
            "`{field}` must be a string, a list of strings, or token ids"
        ))),
    }
}

/// What one embedding request came to.
pub(crate) struct Embedded {
    /// `n x dim` floats, or `tokens x dim` for token vectors.
    pub(crate) vectors: Vec<f32>,
    pub(crate) dim: usize,
    /// Tokens of each input.
    pub(crate) lens: Vec<usize>,
    pub(crate) tokens: usize,
    pub(crate) characters: usize,
    pub(crate) tokenize_time: Duration,
    pub(crate) queue_time: Duration,
    pub(crate) inference_time: Duration,
}

/// TEI's `x-compute-*` and timing headers.
fn compute_headers(
    resp: &mut Response,
    tokens: usize,
    characters: usize,
    tokenize_time: Duration,
    queue_time: Duration,
    inference_time: Duration,
) {
    resp.headers_mut()
        .insert("x-compute-type", HeaderValue::from_static("cpu"));
    set_num(resp, "x-compute-tokens", tokens);
    set_num(resp, "x-compute-characters", characters);
    set_ms(resp, "x-tokenization-time", tokenize_time);
    set_ms(resp, "x-queue-time", queue_time);
    set_ms(resp, "x-inference-time", inference_time);
    set_ms(
        resp,
        "x-compute-time",
        tokenize_time + queue_time + inference_time,
    );
}

impl Embedded {
    pub(crate) fn headers(&self, resp: &mut Response) {
        compute_headers(
            resp,
            self.tokens,
            self.characters,
            self.tokenize_time,
            self.queue_time,
            self.inference_time,
        );
    }

    pub(crate) fn rows(&self) -> impl Iterator<Item = &[f32]> {
        self.vectors.chunks_exact(self.dim.max(1))
    }
}

/// Texts longer than this many bytes in all are tokenized off the async
/// workers.
const INLINE_TOKENIZE_BYTES: usize = 16 << 10;

/// The embedding model a request names (else the first), or TEI's 424.
fn embed_model<'a>(st: &'a AppState, name: Option<&str>) -> Result<&'a EmbedModel, ApiError> {
    st.embedder(name).map(|(_, e)| e).map_err(ApiError::backend)
}

/// What an embedding request asks for: a vector per input, or per token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Output {
    Sentences,
    Tokens,
}

/// TEI's 413 for a request of `n` inputs above `--max-client-batch-size`.
pub(crate) fn check_batch(max: usize, n: usize) -> Result<(), ApiError> {
    if n > max {
        return Err(ApiError::too_large(format!(
            "batch size {n} > maximum allowed batch size {max} (--max-client-batch-size)"
        )));
    }
    Ok(())
}

/// Tokenizes `inputs` under `opts` on `model`, queues them, and waits for
/// the vectors. `allow_empty`: an empty string is an input (TEI) or refused
/// (OpenAI).
pub(crate) async fn embed_inputs(
    st: &AppState,
    model: &EmbedModel,
    inputs: Vec<Input>,
    opts: CallOptions,
    allow_empty: bool,
    output: Output,
) -> Result<Embedded, ApiError> {
    check_batch(st.cfg.max_client_batch_size, inputs.len())?;
    for (i, x) in inputs.iter().enumerate() {
        match x {
            Input::Text(t) if t.is_empty() && !allow_empty => {
                return Err(ApiError::empty(format!("input {i} is an empty string")))
            }
            Input::Ids(ids) if ids.is_empty() => {
                return Err(ApiError::empty(format!("input {i} has no token ids")))
            }
            _ => {}
        }
    }
    let plan = match output {
        Output::Sentences => model.engine.plan(&opts),
        Output::Tokens => model.engine.plan_tokens(&opts),
    }
    .map_err(|e| ApiError::from_engine(&e))?;
    if plan.pool_from() > 0 && inputs.iter().any(|x| matches!(x, Input::Ids(_))) {
        return Err(ApiError::validation(
            "token-id inputs cannot be combined with a prompt this model leaves out of pooling",
        ));
    }
    let characters: usize = inputs
        .iter()
        .map(|x| match x {
            Input::Text(t) => t.chars().count(),
            Input::Ids(_) => 0,
        })
        .sum();
    let t0 = Instant::now();
    let engine = Arc::clone(&model.engine);
    let p = plan.clone();
    let tokenize = move || -> Result<Vec<Vec<u32>>, ApiError> {
        inputs
            .iter()
            .enumerate()
            .map(|(i, x)| {
                let r = match x {
                    Input::Text(t) => engine.tokenize_planned(t, &p),
                    Input::Ids(ids) => engine.wrap_ids(ids, p.truncation()),
                };
                r.map(|(ids, _)| ids).map_err(|e| {
                    let mut err = ApiError::from_engine(&e);
                    err.message = format!("input {i}: {}", err.message);
                    err
                })
            })
            .collect()
    };
    let seqs = if characters > INLINE_TOKENIZE_BYTES {
        tokio::task::spawn_blocking(tokenize)
            .await
            .map_err(|_| ApiError::backend("tokenization failed"))??
    } else {
        tokenize()?
    };
    let tokenize_time = t0.elapsed();
    let lens: Vec<usize> = seqs.iter().map(Vec::len).collect();
    let tokens: usize = lens.iter().sum();
    st.metrics.observe_inputs(seqs.len(), tokens);
    let dim = plan.dim();
    let vectors = run_job(st, model, seqs, plan).await?;
    Ok(Embedded {
        vectors: vectors.0,
        dim,
        lens,
        tokens,
        characters,
        tokenize_time,
        queue_time: vectors.1,
        inference_time: vectors.2,
    })
}

/// [`embed_inputs`] for the routes whose clients send every input in one
/// request (Ollama's and Cohere's clients have no batch size to set): more
/// inputs than `--max-client-batch-size` run as several jobs of at most that
/// many, one after the other, and their vectors come back in order.
pub(crate) async fn embed_inputs_chunked(
    st: &AppState,
    model: &EmbedModel,
    inputs: Vec<Input>,
    opts: CallOptions,
    allow_empty: bool,
) -> Result<Embedded, ApiError> {
    let per = st.cfg.max_client_batch_size.max(1);
    if inputs.len() <= per {
        return embed_inputs(st, model, inputs, opts, allow_empty, Output::Sentences).await;
    }
    let mut all: Option<Embedded> = None;
    let mut rest = inputs;
    let mut offset = 0;
    while !rest.is_empty() {
        let tail = rest.split_off(per.min(rest.len()));
        let chunk = std::mem::replace(&mut rest, tail);
        let n = chunk.len();
        let e = embed_inputs(
            st,
            model,
            chunk,
            opts.clone(),
            allow_empty,
            Output::Sentences,
        )
        .await
        .map_err(|mut err| {
            // "input i" of the chunk is input offset + i of the request.
            err.message = renumber_inputs(&err.message, offset);
            err
        })?;
        offset += n;
        match &mut all {
            None => all = Some(e),
            Some(a) => {
                a.vectors.extend_from_slice(&e.vectors);
                a.lens.extend_from_slice(&e.lens);
                a.tokens += e.tokens;
                a.characters += e.characters;
                a.tokenize_time += e.tokenize_time;
                a.queue_time += e.queue_time;
                a.inference_time += e.inference_time;
            }
        }
    }
    all.ok_or_else(|| ApiError::empty("no inputs"))
}

/// A message's leading `input I` with `I + offset`.
fn renumber_inputs(msg: &str, offset: usize) -> String {
    if offset == 0 {
        return msg.to_string();
    }
    let Some(rest) = msg.strip_prefix("input ") else {
        return msg.to_string();
    };
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    match rest[..digits].parse::<usize>() {
        Ok(i) => format!("input {}{}", i + offset, &rest[digits..]),
        Err(_) => msg.to_string(),
    }
}

/// The engine's answer to a job the batcher took (`queued`), or the error
/// of a job it refused (shutting down) or dropped unanswered.
async fn engine_answer<T>(queued: bool, rx: oneshot::Receiver<T>) -> Result<T, ApiError> {
    if !queued {
        return Err(ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            ErrorType::Unavailable,
            "the server is shutting down",
        ));
    }
    rx.await
        .map_err(|_| ApiError::backend("the engine stopped before answering"))
}

/// Queues sequences on the model's batcher and waits for their vectors.
async fn run_job(
    st: &AppState,
    model: &EmbedModel,
    seqs: Vec<Vec<u32>>,
    plan: CallPlan,
) -> Result<(Vec<f32>, Duration, Duration), ApiError> {
    let (tx, rx) = oneshot::channel();
    let queued = model.batcher.submit(Job::new(seqs, plan, tx)).is_ok();
    let done = engine_answer(queued, rx).await?;
    st.metrics.observe_queue(done.queue_time);
    let v = done.vectors.map_err(|e| ApiError::from_engine(&e))?;
    Ok((v, done.queue_time, done.inference_time))
}

pub(crate) fn truncation(
    st: &AppState,
    truncate: Option<bool>,
    direction: Option<&str>,
) -> Result<Truncation, ApiError> {
    let left = match direction {
        None => false,
        Some(d) if d.eq_ignore_ascii_case("right") => false,
        Some(d) if d.eq_ignore_ascii_case("left") => true,
        Some(d) => {
            return Err(ApiError::validation(format!(
                "`truncation_direction` must be \"right\" or \"left\", not {d:?}"
            )))
        }
    };
    Ok(match (truncate.unwrap_or(st.cfg.auto_truncate), left) {
        (false, _) => Truncation::Refuse,
        (true, false) => Truncation::Right,
        (true, true) => Truncation::Left,
    })
}

/// The body of `/embed` and `/embed_all` (TEI).
#[derive(Deserialize)]
struct EmbedRequest {
    #[serde(default)]
    inputs: Value,
    normalize: Option<bool>,
    truncate: Option<bool>,
    truncation_direction: Option<String>,
    prompt_name: Option<String>,
    dimensions: Option<usize>,
    model: Option<String>,
    /// Extension: `query` or `document`.
    task: Option<String>,
}

/// `POST /embed` and `POST /`: `[[f32]]`.
async fn embed(State(st): State<St>, req: Request) -> Result<Response, ApiError> {
    let _permit = permit(&st)?;
    let req: EmbedRequest = read_json(&st, req).await?;
    let inputs = parse_inputs(&req.inputs, "inputs")?;
    let task = parse_task(req.task.as_deref())?;
    let mut opts = CallOptions {
        normalize: Some(req.normalize.unwrap_or(true)),
        dimensions: req.dimensions,
        prompt_name: req.prompt_name,
        truncation: truncation(&st, req.truncate, req.truncation_direction.as_deref())?,
        ..CallOptions::default()
    };
    let model = embed_model(&st, req.model.as_deref())?;
    require_outputs(model, &[OutputKind::Dense])?;
    task_prompt(model, task, &mut opts);
    let e = embed_inputs(&st, model, inputs, opts, true, Output::Sentences).await?;
    let rows: Vec<&[f32]> = e.rows().collect();
    let mut resp = Json(rows).into_response();
    e.headers(&mut resp);
    Ok(resp)
}

/// `POST /embed_all`, `[[[f32]]]`: on a model with a multi-vector output
/// (ColBERT, BGE-M3), the multi-vectors of each input (as the model outputs
/// them: ColBERT's markers, query expansion and skip-list; normalized);
/// otherwise the un-pooled token vectors of each input (special and prompt
/// tokens included; not normalized unless the request says
/// `"normalize": true`).
async fn embed_all(State(st): State<St>, req: Request) -> Result<Response, ApiError> {
    let _permit = permit(&st)?;
    let req: EmbedRequest = read_json(&st, req).await?;
    let inputs = parse_inputs(&req.inputs, "inputs")?;
    let task = parse_task(req.task.as_deref())?;
    let mut opts = CallOptions {
        normalize: req.normalize,
        dimensions: req.dimensions,
        prompt_name: req.prompt_name,
        truncation: truncation(&st, req.truncate, req.truncation_direction.as_deref())?,
        ..CallOptions::default()
    };
    let model = embed_model(&st, req.model.as_deref())?;
    if model.engine.outputs().contains(&OutputKind::MultiVector) {
        if opts.dimensions.is_some() {
            return Err(ApiError::validation(
                "`dimensions`: this model's /embed_all answers its multi-vectors, which have                  the model's own width",
            ));
        }
        if opts.normalize == Some(false) {
            return Err(ApiError::validation(
                "`normalize`: this model's /embed_all answers its multi-vectors, which the                  model normalizes",
            ));
        }
        opts.normalize = None;
        let texts = inputs_of(
            inputs,
            model,
            task,
            opts.truncation,
            "/embed_all on a multi-vector model",
        )?;
        let ask = EncodeRequest {
            outputs: vec![OutputKind::MultiVector],
            task,
            call: opts,
            top_k: None,
        };
        let e = encode_texts(&st, model, texts, ask).await?;
        let per_input: Vec<Vec<&[f32]>> = e
            .encoded
            .multi_vector()
            .into_iter()
            .flatten()
            .map(|m| (0..m.rows()).map(|i| m.row(i)).collect())
            .collect();
        let mut resp = Json(per_input).into_response();
        e.headers(&mut resp);
        return Ok(resp);
    }
    task_prompt(model, task, &mut opts);
    let e = embed_inputs(&st, model, inputs, opts, true, Output::Tokens).await?;
    let mut rows = e.rows();
    let per_input: Vec<Vec<&[f32]>> = e
        .lens
        .iter()
        .map(|&n| rows.by_ref().take(n).collect())
        .collect();
    let mut resp = Json(per_input).into_response();
    e.headers(&mut resp);
    Ok(resp)
}

/// `task`: `query` or `document` (sentence-transformers' `encode_query` /
/// `encode_document`), else 422.
fn parse_task(task: Option<&str>) -> Result<Option<EncodeTask>, ApiError> {
    match task {
        None => Ok(None),
        Some("query") => Ok(Some(EncodeTask::Query)),
        Some("document") => Ok(Some(EncodeTask::Document)),
        Some(t) => Err(ApiError::validation(format!(
            "`task` must be \"query\" or \"document\", not {t:?}"
        ))),
    }
}

/// On the routes that go through the pooled (or token-state) path, a task
/// means its prompt: the prompt of that name when the model stores one and
/// the request names none, as [`embedder::Embedder::encode`] does.
pub(crate) fn task_prompt(model: &EmbedModel, task: Option<EncodeTask>, opts: &mut CallOptions) {
    let Some(t) = task else { return };
    if opts.prompt.is_some() || opts.prompt_name.is_some() {
        return;
    }
    let named = CallOptions {
        prompt_name: Some(t.name().to_string()),
        ..CallOptions::default()
    };
    if model.engine.plan(&named).is_ok() {
        opts.prompt_name = named.prompt_name;
    }
}

/// TEI's 424 when the model lacks an output `kinds` names, with the
/// engine's message (before the request waits in the queue).
fn require_outputs(model: &EmbedModel, kinds: &[OutputKind]) -> Result<(), ApiError> {
    let has = model.engine.outputs();
    match kinds.iter().find(|k| !has.contains(k)) {
        None => Ok(()),
        Some(k) => Err(ApiError::backend(format!(
            "this model has no {} output; its outputs: {}",
            k.name(),
            has.iter().map(|k| k.name()).collect::<Vec<_>>().join(", ")
        ))),
    }
}

/// The inputs of an output-stage request: texts (the output stage
/// tokenizes them itself), or token ids of the model's vocabulary without
/// the special tokens (as TEI takes them), framed here as `truncation` says.
/// Texts and ids are not mixed in one request (422).
fn inputs_of(
    inputs: Vec<Input>,
    model: &EmbedModel,
    task: Option<EncodeTask>,
    truncation: Truncation,
    route: &str,
) -> Result<EncodeInputs, ApiError> {
    if let Some(i) = inputs.iter().position(|x| matches!(x, Input::Ids(_))) {
        if !model.engine.takes_token_ids(task) {
            return Err(ApiError::validation(format!(
                "input {i} is token ids; {route} on this model takes texts only (ColBERT's \
                 markers and query expansion, and an inference-free model's query route, are \
                 made from texts)"
            )));
        }
    }
    if !inputs.iter().any(|x| matches!(x, Input::Ids(_))) {
        let texts = inputs
            .into_iter()
            .filter_map(|x| match x {
                Input::Text(t) => Some(t),
                Input::Ids(_) => None,
            })
            .collect();
        return Ok(EncodeInputs::Texts(texts));
    }
    inputs
        .into_iter()
        .enumerate()
        .map(|(i, x)| match x {
            Input::Ids(raw) if raw.is_empty() => {
                Err(ApiError::empty(format!("input {i} has no token ids")))
            }
            Input::Ids(raw) => model
                .engine
                .wrap_ids(&raw, truncation)
                .map(|(ids, _)| ids)
                .map_err(|e| {
                    ApiError::from_engine(&embedder::Error::new(
                        e.kind(),
                        format!("input {i}: {}", e.message()),
                    ))
                }),
            Input::Text(_) => Err(ApiError::validation(format!(
                "input {i} is a text and another input is token ids; {route} takes texts or \
                 token ids, not both in one request"
            ))),
        })
        .collect::<Result<Vec<_>, _>>()
        .map(EncodeInputs::Ids)
}

/// What one output-stage request came to.
struct EncodedInputs {
    encoded: Encoded,
    tokens: usize,
    characters: usize,
    queue_time: Duration,
    inference_time: Duration,
}

impl EncodedInputs {
    fn headers(&self, resp: &mut Response) {
        compute_headers(
            resp,
            self.tokens,
            self.characters,
            Duration::ZERO,
            self.queue_time,
            self.inference_time,
        );
    }
}

/// Queues `inputs` for [`embedder::Embedder::encode`] (texts) or
/// [`embedder::Embedder::encode_ids`] (token ids) on the model's engine
/// thread (the batcher: one engine call at a time per model, on the
/// engine's workers, so the cores are never oversubscribed; requests with
/// the same options share a call, and `encode` gives each text the same
/// bits whatever the batch) and waits for the outputs.
async fn encode_texts(
    st: &AppState,
    model: &EmbedModel,
    inputs: EncodeInputs,
    ask: EncodeRequest,
) -> Result<EncodedInputs, ApiError> {
    check_batch(st.cfg.max_client_batch_size, inputs.len())?;
    require_outputs(model, &ask.outputs)?;
    if ask.top_k == Some(0) {
        return Err(ApiError::validation("`top_k` is 0; ask for at least 1"));
    }
    let characters = match &inputs {
        EncodeInputs::Texts(t) => t.iter().map(|t| t.chars().count()).sum(),
        EncodeInputs::Ids(_) => 0,
    };
    let n = inputs.len();
    let (tx, rx) = oneshot::channel();
    let job = EncodeJob::new(inputs, ask, model.engine.max_seq_length(), tx);
    let queued = model.batcher.submit_encode(job).is_ok();
    let done = engine_answer(queued, rx).await?;
    st.metrics.observe_queue(done.queue_time);
    let encoded = done.encoded.map_err(|e| ApiError::from_engine(&e))?;
    let tokens = encoded.info.iter().map(|i| i.tokens).sum();
    st.metrics.observe_inputs(n, tokens);
    Ok(EncodedInputs {
        encoded,
        tokens,
        characters,
        queue_time: done.queue_time,
        inference_time: done.inference_time,
    })
}

#[derive(Deserialize)]
struct EmbedSparseRequest {
    #[serde(default)]
    inputs: Value,
    truncate: Option<bool>,
    truncation_direction: Option<String>,
    prompt_name: Option<String>,
    model: Option<String>,
    /// Extension: `query` or `document`.
    task: Option<String>,
}

/// TEI's `SparseValue`.
#[derive(Serialize)]
struct SparseValue {
    index: u32,
    value: f32,
}

/// TEI's sparse vector: the non-zero weights, ids ascending.
fn sparse_values(v: &SparseVector) -> Vec<SparseValue> {
    v.indices
        .iter()
        .zip(&v.values)
        .filter(|(_, &x)| x != 0.0)
        .map(|(&index, &value)| SparseValue { index, value })
        .collect()
}

/// `POST /embed_sparse` (TEI's): `[[{"index", "value"}]]`, the non-zero
/// weights of each input's sparse vector, ids ascending; 424 naming the
/// model's outputs when it has no sparse output.
async fn embed_sparse(State(st): State<St>, req: Request) -> Result<Response, ApiError> {
    let _permit = permit(&st)?;
    let req: EmbedSparseRequest = read_json(&st, req).await?;
    let inputs = parse_inputs(&req.inputs, "inputs")?;
    let task = parse_task(req.task.as_deref())?;
    let call = CallOptions {
        prompt_name: req.prompt_name,
        truncation: truncation(&st, req.truncate, req.truncation_direction.as_deref())?,
        ..CallOptions::default()
    };
    let model = embed_model(&st, req.model.as_deref())?;
    let texts = inputs_of(inputs, model, task, call.truncation, "/embed_sparse")?;
    let ask = EncodeRequest {
        outputs: vec![OutputKind::Sparse],
        task,
        call,
        top_k: None,
    };
    let e = encode_texts(&st, model, texts, ask).await?;
    let out: Vec<Vec<SparseValue>> = e
        .encoded
        .sparse()
        .into_iter()
        .flatten()
        .map(sparse_values)
        .collect();
    let mut resp = Json(out).into_response();
    e.headers(&mut resp);
    Ok(resp)
}

/// One input's outputs in `/encode`'s answer (those asked for). Serialized
/// from the `f32`s themselves: the shortest text that reads back to the
/// same bits.
#[derive(Serialize)]
struct EncodedItem<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    dense: Option<&'a [f32]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    sparse: Option<IndexedSparse<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    multi_vector: Option<Vec<&'a [f32]>>,
}

#[derive(Serialize)]
struct IndexedSparse<'a> {
    indices: &'a [u32],
    values: &'a [f32],
}

#[derive(Serialize)]
struct Usage {
    prompt_tokens: usize,
    total_tokens: usize,
}

#[derive(Serialize)]
struct EncodeAnswer<'a> {
    model: &'a str,
    data: Vec<EncodedItem<'a>>,
    usage: Usage,
}

#[derive(Deserialize)]
struct EncodeBody {
    #[serde(default)]
    inputs: Value,
    outputs: Option<Value>,
    task: Option<String>,
    truncate: Option<bool>,
    truncation_direction: Option<String>,
    prompt_name: Option<String>,
    normalize: Option<bool>,
    dimensions: Option<usize>,
    top_k: Option<usize>,
    model: Option<String>,
}

/// `outputs`: a list of names (or one name, or a comma-separated list);
/// absent or empty: every output the model has.
fn parse_outputs(v: Option<&Value>, model: &EmbedModel) -> Result<Vec<OutputKind>, ApiError> {
    let names: Vec<&str> = match v {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::String(s)) => s.split([',', ' ']).filter(|p| !p.is_empty()).collect(),
        Some(Value::Array(a)) => a
            .iter()
            .enumerate()
            .map(|(i, x)| {
                x.as_str()
                    .ok_or_else(|| ApiError::validation(format!("`outputs[{i}]` must be a string")))
            })
            .collect::<Result<_, _>>()?,
        Some(_) => {
            return Err(ApiError::validation(
                "`outputs` must be a list of \"dense\", \"sparse\", \"multi-vector\"",
            ))
        }
    };
    if names.is_empty() {
        return Ok(model.engine.outputs().to_vec());
    }
    let mut kinds = Vec::new();
    for n in names {
        let k = OutputKind::from_name(n).ok_or_else(|| {
            ApiError::validation(format!(
                "`outputs`: {n:?} is not one of \"dense\", \"sparse\", \"multi-vector\""
            ))
        })?;
        if !kinds.contains(&k) {
            kinds.push(k);
        }
    }
    kinds.sort();
    Ok(kinds)
}

/// `POST /encode` (this server's own): any of the model's outputs, dense,
/// sparse and multi-vector (BGE-M3's three), from one forward pass per
/// text: `{"model", "data": [{"dense"?, "sparse"?: {"indices", "values"},
/// "multi_vector"?: [[f32]]}], "usage"}`.
async fn encode(State(st): State<St>, req: Request) -> Result<Response, ApiError> {
    let _permit = permit(&st)?;
    let req: EncodeBody = read_json(&st, req).await?;
    let inputs = parse_inputs(&req.inputs, "inputs")?;
    let task = parse_task(req.task.as_deref())?;
    let call = CallOptions {
        normalize: Some(req.normalize.unwrap_or(true)),
        dimensions: req.dimensions,
        prompt_name: req.prompt_name,
        truncation: truncation(&st, req.truncate, req.truncation_direction.as_deref())?,
        ..CallOptions::default()
    };
    let (m, model) = st
        .embedder(req.model.as_deref())
        .map_err(ApiError::backend)?;
    let outputs = parse_outputs(req.outputs.as_ref(), model)?;
    let texts = inputs_of(inputs, model, task, call.truncation, "/encode")?;
    let ask = EncodeRequest {
        outputs,
        task,
        call,
        top_k: req.top_k,
    };
    let e = encode_texts(&st, model, texts, ask).await?;
    let enc = &e.encoded;
    let data: Vec<EncodedItem<'_>> = (0..enc.info.len())
        .map(|i| EncodedItem {
            dense: enc.dense_row(i),
            sparse: enc.sparse().map(|s| IndexedSparse {
                indices: &s[i].indices,
                values: &s[i].values,
            }),
            multi_vector: enc
                .multi_vector()
                .map(|m| (0..m[i].rows()).map(|r| m[i].row(r)).collect()),
        })
        .collect();
    let body = EncodeAnswer {
        model: &m.name,
        data,
        usage: Usage {
            prompt_tokens: e.tokens,
            total_tokens: e.tokens,
        },
    };
    let mut resp = Json(body).into_response();
    e.headers(&mut resp);
    Ok(resp)
}

#[derive(Deserialize)]
struct OpenAiRequest {
    #[serde(default)]
    input: Value,
    model: Option<String>,
    encoding_format: Option<String>,
    dimensions: Option<usize>,
}

/// Why `/v1/embeddings` refuses token ids (without `--accept-token-ids`):
/// OpenAI's clients send ids of OpenAI's own tokenizer (tiktoken), which
/// this server would read as ids of the served model's vocabulary and
/// answer with vectors of other words.
fn token_ids_refused(i: usize, model: &str) -> String {
    format!(
        "input {i} is token ids. This server reads token ids as ids of the served model's own \
         vocabulary ('{model}'), not of OpenAI's tiktoken, so ids made by an OpenAI client's \
         tokenizer would give wrong vectors; they are refused. Send the texts instead: \
         LangChain's OpenAIEmbeddings needs check_embedding_ctx_length=False (its default \
         sends tiktoken ids). To embed ids of this model's own vocabulary, start the server \
         with --accept-token-ids."
    )
}

/// `POST /v1/embeddings` and `/embeddings`, OpenAI's shape and errors.
async fn openai_embeddings(State(st): State<St>, req: Request) -> Response {
    match openai_embeddings_inner(&st, req).await {
        Ok(r) => r,
        Err(e) => e.dialect(Dialect::OpenAi).into_response(),
    }
}

async fn openai_embeddings_inner(st: &AppState, req: Request) -> Result<Response, ApiError> {
    let _permit = permit(st)?;
    let req: OpenAiRequest = read_json(st, req).await?;
    let base64 = match req.encoding_format.as_deref() {
        None | Some("float") => false,
        Some("base64") => true,
        Some(f) => {
            return Err(ApiError::validation(format!(
                "`encoding_format` must be \"float\" or \"base64\", not {f:?}"
            )))
        }
    };
    let inputs = parse_inputs(&req.input, "input")?;
    let opts = CallOptions {
        normalize: Some(true),
        dimensions: req.dimensions,
        truncation: truncation(st, None, None)?,
        ..CallOptions::default()
    };
    let (model, em) = st
        .embedder(req.model.as_deref())
        .map_err(ApiError::backend)?;
    if !st.cfg.accept_token_ids {
        if let Some(i) = inputs.iter().position(|x| matches!(x, Input::Ids(_))) {
            return Err(ApiError::validation(token_ids_refused(i, &model.name)));
        }
    }
    let e = embed_inputs(st, em, inputs, opts, false, Output::Sentences).await?;
    let data: Vec<Value> = e
        .rows()
        .enumerate()
        .map(|(i, v)| {
            let embedding = if base64 {
                let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
                Value::String(base64::engine::general_purpose::STANDARD.encode(bytes))
            } else {
                json!(v)
            };
            json!({"object": "embedding", "embedding": embedding, "index": i})
        })
        .collect();
    let body = json!({
        "object": "list",
        "data": data,
        "model": model.name,
        "usage": {"prompt_tokens": e.tokens, "total_tokens": e.tokens},
    });
    let mut resp = Json(body).into_response();
    e.headers(&mut resp);
    Ok(resp)
}

#[derive(Deserialize)]
struct TokenizeRequest {
    #[serde(default)]
    inputs: Value,
    add_special_tokens: Option<bool>,
    prompt_name: Option<String>,
    model: Option<String>,
}

/// `POST /tokenize`: `[[{"id", "text", "special", "start", "stop"}]]`.
/// `text` is the vocabulary piece; `start`/`stop` are byte offsets into the
/// input (`null` for the added `[CLS]`/`[SEP]` and a prompt's tokens).
async fn tokenize(State(st): State<St>, req: Request) -> Result<Response, ApiError> {
    let req: TokenizeRequest = read_json(&st, req).await?;
    let texts: Vec<String> = parse_inputs(&req.inputs, "inputs")?
        .into_iter()
        .map(|x| match x {
            Input::Text(t) => Some(t),
            Input::Ids(_) => None,
        })
        .collect::<Option<_>>()
        .ok_or_else(|| {
            ApiError::validation("`inputs` of /tokenize must be a string or a list of strings")
        })?;
    check_batch(st.cfg.max_client_batch_size, texts.len())?;
    let model = embed_model(&st, req.model.as_deref())?;
    let plan = model
        .engine
        .plan(&CallOptions {
            prompt_name: req.prompt_name,
            ..CallOptions::default()
        })
        .map_err(|e| ApiError::from_engine(&e))?;
    let special = req.add_special_tokens.unwrap_or(true);
    let tok = model.engine.tokenizer();
    let specials = tok.vocab().specials().as_array();
    let mut out = Vec::with_capacity(texts.len());
    let plen = plan.prompt().len();
    for t in &texts {
        let text = format!("{}{t}", plan.prompt());
        let mut spans = Vec::new();
        let (pre, post) = tok.single_frame();
        let frame = |ids: &[u32]| {
            ids.iter()
                .map(|&id| TokenSpan { id, offsets: None })
                .collect::<Vec<_>>()
        };
        if special {
            spans.extend(frame(&pre));
        }
        spans.extend(tok.encode_raw_with_offsets(&text));
        if special {
            spans.extend(frame(&post));
        }
        let toks: Vec<Value> = spans
            .iter()
            .map(|s| {
                // Offsets into the request's text; the prompt's tokens and
                // the added [CLS]/[SEP] have none.
                let (start, stop) = match s.offsets {
                    Some((a, b)) if a >= plen => (json!(a - plen), json!(b - plen)),
                    _ => (Value::Null, Value::Null),
                };
                json!({
                    "id": s.id,
                    "text": tok.vocab().token(s.id).unwrap_or(""),
                    "special": specials.contains(&s.id),
                    "start": start,
                    "stop": stop,
                })
            })
            .collect();
        out.push(Value::Array(toks));
    }
    Ok(Json(out).into_response())
}

#[derive(Deserialize)]
struct DecodeRequest {
    #[serde(default)]
    ids: Value,
    skip_special_tokens: Option<bool>,
    model: Option<String>,
}

/// `POST /decode`: `[str]`.
async fn decode(State(st): State<St>, req: Request) -> Result<Response, ApiError> {
    let req: DecodeRequest = read_json(&st, req).await?;
    let seqs: Vec<Vec<u32>> = parse_inputs(&req.ids, "ids")?
        .into_iter()
        .map(|x| match x {
            Input::Ids(i) => Some(i),
            Input::Text(_) => None,
        })
        .collect::<Option<_>>()
        .ok_or_else(|| {
            ApiError::validation("`ids` must be a list of token ids or a list of such lists")
        })?;
    check_batch(st.cfg.max_client_batch_size, seqs.len())?;
    let model = embed_model(&st, req.model.as_deref())?;
    let tok = model.engine.tokenizer();
    let skip = req.skip_special_tokens.unwrap_or(true);
    let out: Vec<String> = seqs.iter().map(|s| tok.decode(s, skip)).collect();
    Ok(Json(out).into_response())
}

#[derive(Deserialize)]
struct SimilarityInputs {
    source_sentence: String,
    sentences: Vec<String>,
}

#[derive(Deserialize, Default)]
struct SimilarityParameters {
    truncate: Option<bool>,
    truncation_direction: Option<String>,
    prompt_name: Option<String>,
}

#[derive(Deserialize)]
struct SimilarityRequest {
    inputs: SimilarityInputs,
    #[serde(default)]
    parameters: Option<SimilarityParameters>,
    model: Option<String>,
}

/// `POST /similarity`: the cosine of each sentence to the source, `[f32]`.
async fn similarity(State(st): State<St>, req: Request) -> Result<Response, ApiError> {
    let _permit = permit(&st)?;
    let req: SimilarityRequest = read_json(&st, req).await?;
    if req.inputs.sentences.is_empty() {
        return Err(ApiError::empty("`inputs.sentences` cannot be empty"));
    }
    let p = req.parameters.unwrap_or_default();
    let opts = CallOptions {
        normalize: Some(true),
        prompt_name: p.prompt_name,
        truncation: truncation(&st, p.truncate, p.truncation_direction.as_deref())?,
        ..CallOptions::default()
    };
    let mut inputs = vec![Input::Text(req.inputs.source_sentence)];
    inputs.extend(req.inputs.sentences.into_iter().map(Input::Text));
    let model = embed_model(&st, req.model.as_deref())?;
    // The source counts against the client batch size like any input.
    let e = embed_inputs(&st, model, inputs, opts, true, Output::Sentences).await?;
    let mut rows = e.rows();
    let src = rows.next().unwrap_or(&[]);
    let sims: Vec<f32> = rows.map(|v| embedder::cosine_similarity(src, v)).collect();
    let mut resp = Json(sims).into_response();
    e.headers(&mut resp);
    Ok(resp)
}

#[derive(Deserialize)]
struct RerankRequest {
    query: String,
    texts: Vec<String>,
    truncate: Option<bool>,
    truncation_direction: Option<String>,
    raw_scores: Option<bool>,
    return_text: Option<bool>,
    model: Option<String>,
    /// An LLM reranker's instruction (a CrossEncoder prompt).
    #[serde(alias = "instruction")]
    prompt: Option<String>,
}

#[derive(Deserialize)]
struct OpenAiRerankRequest {
    model: Option<String>,
    query: String,
    documents: Vec<Value>,
    top_n: Option<usize>,
    return_documents: Option<bool>,
    /// An LLM reranker's instruction (a CrossEncoder prompt).
    #[serde(alias = "instruction")]
    prompt: Option<String>,
}

/// What one ranking came to.
struct Ranking {
    /// Every document, best first.
    ranked: Vec<embedder::Ranked>,
    tokens: usize,
    characters: usize,
    queue_time: Duration,
    inference_time: Duration,
}

/// What one ranking asks for.
struct RankRequest {
    query: String,
    docs: Vec<String>,
    /// The request's name for the documents (for messages).
    field: &'static str,
    /// `false` refuses a pair longer than the model (413) instead of
    /// cutting it as `CrossEncoder` does.
    truncate: bool,
    /// Rank by logit.
    raw: bool,
    /// An LLM reranker's instruction, if the request gives one.
    prompt: Option<String>,
}

/// Ranks documents for a query on a reranker: waits for its turn, then
/// runs the ranking on a blocking thread.
async fn rank_documents(
    st: &AppState,
    model: &RerankModel,
    req: RankRequest,
) -> Result<(Ranking, Vec<String>), ApiError> {
    let RankRequest {
        query,
        docs,
        field,
        truncate,
        raw,
        prompt,
    } = req;
    if prompt.is_some() && !model.engine.takes_prompt() {
        return Err(ApiError::validation(
            "`prompt`: this reranker takes no prompt (only an LLM reranker with a prompt \
             template, such as Qwen3-Reranker, scores pairs under an instruction)",
        ));
    }
    if docs.is_empty() {
        return Err(ApiError::empty(format!("`{field}` cannot be empty")));
    }
    check_batch(st.cfg.max_client_batch_size, docs.len())?;
    let characters =
        query.chars().count() * docs.len() + docs.iter().map(|d| d.chars().count()).sum::<usize>();
    let queued = Instant::now();
    let turn = Arc::clone(&model.turn)
        .acquire_owned()
        .await
        .map_err(|_| ApiError::backend("the reranker stopped"))?;
    let queue_time = queued.elapsed();
    let engine = Arc::clone(&model.engine);
    let max = engine.max_seq_length();
    let job = move || {
        // The turn is held until the ranking ends, even if the client left.
        let _turn = turn;
        if !truncate {
            let cut = |d: &String| {
                engine
                    .tokenize_pair_prompted(&query, d, prompt.as_deref())
                    .map(|e| e.truncated)
                    .unwrap_or(false)
            };
            if let Some(i) = docs.iter().position(cut) {
                return Err(ApiError::too_large(format!(
                    "document {i}: the query and the document have more tokens than the \
                     model's max_seq_length {max}, and truncation is off (`truncate`: false)"
                )));
            }
        }
        let mut info = vec![embedder::TextInfo::default(); docs.len()];
        let t = Instant::now();
        let ranked = engine
            .rank_prompted(&query, &docs, None, raw, prompt.as_deref(), Some(&mut info))
            .map_err(|e| ApiError::from_engine(&e))?;
        let tokens = info.iter().map(|i| i.tokens).sum();
        Ok((ranked, tokens, t.elapsed(), docs))
    };
    let (ranked, tokens, inference_time, docs) = tokio::task::spawn_blocking(job)
        .await
        .map_err(|_| ApiError::backend("the ranking failed"))??;
    st.metrics.observe_queue(queue_time);
    st.metrics.observe_inputs(docs.len(), tokens);
    st.metrics.observe_batch(docs.len(), tokens, inference_time);
    Ok((
        Ranking {
            ranked,
            tokens,
            characters,
            queue_time,
            inference_time,
        },
        docs,
    ))
}

impl Ranking {
    fn headers(&self, resp: &mut Response) {
        compute_headers(
            resp,
            self.tokens,
            self.characters,
            Duration::ZERO,
            self.queue_time,
            self.inference_time,
        );
    }
}

/// The reranker a request names (else the first), or TEI's 424.
fn rerank_model<'a>(
    st: &'a AppState,
    name: Option<&str>,
) -> Result<(&'a crate::Model, &'a RerankModel), ApiError> {
    st.reranker(name).map_err(ApiError::backend)
}

/// `POST /rerank` (TEI's shape): `[{"index", "score", "text"?}]`, best first.
async fn rerank(State(st): State<St>, req: Request) -> Result<Response, ApiError> {
    let _permit = permit(&st)?;
    let req: RerankRequest = read_json(&st, req).await?;
    let (_, model) = rerank_model(&st, req.model.as_deref())?;
    let truncate = match truncation(&st, req.truncate, req.truncation_direction.as_deref())? {
        Truncation::Left => {
            return Err(ApiError::validation(
                "rerankers cut the longer text of a pair first (`longest_first`, as \
                 CrossEncoder does); `truncation_direction` \"left\" does not apply",
            ))
        }
        t => t != Truncation::Refuse,
    };
    let raw = req.raw_scores.unwrap_or(false);
    let ask = RankRequest {
        query: req.query,
        docs: req.texts,
        field: "texts",
        truncate,
        raw,
        prompt: req.prompt,
    };
    let (r, docs) = rank_documents(&st, model, ask).await?;
    let with_text = req.return_text.unwrap_or(false);
    let out: Vec<Value> = r
        .ranked
        .iter()
        .map(|x| {
            let score = if raw { x.logit } else { x.score };
            let mut o = json!({"index": x.index, "score": score});
            if with_text {
                o["text"] = json!(docs[x.index]);
            }
            o
        })
        .collect();
    let mut resp = Json(out).into_response();
    r.headers(&mut resp);
    Ok(resp)
}

/// `POST /v1/rerank` (Jina / Cohere v1 / llama-server shape).
async fn openai_rerank(State(st): State<St>, req: Request) -> Response {
    match document_rerank(&st, req).await {
        Ok((m, r, docs, req)) => {
            let body = json!({
                "model": m,
                "object": "list",
                "results": ranked_documents(&r, &docs, &req),
                "usage": {"prompt_tokens": r.tokens, "total_tokens": r.tokens},
            });
            let mut resp = Json(body).into_response();
            r.headers(&mut resp);
            resp
        }
        Err(e) => e.dialect(Dialect::OpenAi).into_response(),
    }
}

/// `POST /v2/rerank` (Cohere's v2 shape: `id`, `results`, `meta`; Cohere's
/// error body).
async fn cohere_v2_rerank(State(st): State<St>, req: Request) -> Response {
    match document_rerank(&st, req).await {
        Ok((_, r, docs, req)) => {
            let body = json!({
                "id": request_id(),
                "results": ranked_documents(&r, &docs, &req),
                "meta": {
                    "api_version": {"version": "2"},
                    "tokens": {"input_tokens": r.tokens, "output_tokens": 0},
                },
            });
            let mut resp = Json(body).into_response();
            r.headers(&mut resp);
            resp
        }
        Err(e) => e.dialect(Dialect::Cohere).into_response(),
    }
}

/// A request id for `/v2/rerank` answers: a random version-4 UUID (from the
/// standard library's randomly keyed hasher over a counter).
pub(crate) fn request_id() -> String {
    use std::hash::{BuildHasher, Hasher};
    use std::sync::atomic::AtomicU64;
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let half = |salt: u64| {
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u64(n);
        h.write_u64(salt);
        h.finish()
    };
    let (a, b) = (half(1), half(2));
    let a = (a & !0xf000) | 0x4000; // version 4
    let b = (b & !(0b11 << 62)) | (0b10 << 62); // RFC 4122 variant
    format!(
        "{:08x}-{:04x}-{:04x}-{:04x}-{:012x}",
        a >> 32,
        (a >> 16) & 0xffff,
        a & 0xffff,
        b >> 48,
        b & 0xffff_ffff_ffff
    )
}

/// The best `top_n` of a ranking as `{"index", "relevance_score",
/// "document"?: {"text"}}`.
fn ranked_documents(r: &Ranking, docs: &[String], req: &DocumentRerank) -> Vec<Value> {
    r.ranked
        .iter()
        .take(req.top_n.unwrap_or(usize::MAX))
        .map(|x| {
            let mut o = json!({"index": x.index, "relevance_score": x.score});
            if req.return_documents {
                o["document"] = json!({"text": docs[x.index]});
            }
            o
        })
        .collect()
}

/// What the answer of a document rerank (v1 or v2) needs of its request.
struct DocumentRerank {
    top_n: Option<usize>,
    return_documents: bool,
}

/// `/v1/rerank` and `/v2/rerank`: the model's name, the ranking, the
/// documents, and the answer's options.
async fn document_rerank(
    st: &AppState,
    req: Request,
) -> Result<(String, Ranking, Vec<String>, DocumentRerank), ApiError> {
    let _permit = permit(st)?;
    let req: OpenAiRerankRequest = read_json(st, req).await?;
    let (m, model) = rerank_model(st, req.model.as_deref())?;
    // Cohere's documents are strings or {"text": ...} objects.
    let docs: Vec<String> = req
        .documents
        .iter()
        .enumerate()
        .map(|(i, d)| match d {
            Value::String(s) => Ok(s.clone()),
            Value::Object(o) => match o.get("text") {
                Some(Value::String(s)) => Ok(s.clone()),
                _ => Err(ApiError::validation(format!(
                    "`documents[{i}]` is an object without a string \"text\""
                ))),
            },
            _ => Err(ApiError::validation(format!(
                "`documents[{i}]` must be a string or {{\"text\": string}}"
            ))),
        })
        .collect::<Result<_, _>>()?;
    if req.top_n == Some(0) {
        return Err(ApiError::validation("`top_n` is 0; ask for at least 1"));
    }
    let truncate = st.cfg.auto_truncate;
    let ask = RankRequest {
        query: req.query,
        docs,
        field: "documents",
        truncate,
        raw: false,
        prompt: req.prompt,
    };
    let (r, docs) = rank_documents(st, model, ask).await?;
    let opts = DocumentRerank {
        top_n: req.top_n,
        return_documents: req.return_documents.unwrap_or(false),
    };
    Ok((m.name.clone(), r, docs, opts))
}

/// `GET /info`: TEI's fields (of the first model), and every served model.
async fn info(State(st): State<St>) -> Response {
    let models: Vec<Value> = st
        .models
        .iter()
        .map(|m| match &m.kind {
            crate::ModelKind::Embedder(e) => {
                let i = e.engine.info();
                json!({
                    "model_id": m.name,
                    "model_type": {"embedding": {"pooling": i.pooling.name()}},
                    "dim": i.dim,
                    "hidden_size": i.hidden_size,
                    "max_input_length": i.max_seq_length,
                    "normalize": i.normalize,
                    "precision": i.precision.name(),
                    "threads": e.engine.threads(),
                    "prompt": e.engine.prompt(),
                    "outputs": e.engine.outputs().iter().map(|k| k.name()).collect::<Vec<_>>(),
                })
            }
            crate::ModelKind::Reranker(r) => {
                let i = r.engine.info();
                let id2label: serde_json::Map<String, Value> = r
                    .engine
                    .labels()
                    .iter()
                    .enumerate()
                    .map(|(k, l)| (k.to_string(), json!(l)))
                    .collect();
                let label2id: serde_json::Map<String, Value> = r
                    .engine
                    .labels()
                    .iter()
                    .enumerate()
                    .map(|(k, l)| (l.clone(), json!(k)))
                    .collect();
                json!({
                    "model_id": m.name,
                    "model_type": {"reranker": {"id2label": id2label, "label2id": label2id}},
                    "dim": null,
                    "hidden_size": i.hidden_size,
                    "max_input_length": r.engine.max_seq_length(),
                    "activation": r.engine.activation().name(),
                    "precision": r.engine.precision().name(),
                    "threads": r.engine.threads(),
                })
            }
        })
        .collect();
    let first = &models[0];
    Json(json!({
        "model_id": first["model_id"],
        "model_sha": null,
        "model_dtype": first["precision"],
        "model_type": first["model_type"],
        "max_input_length": first["max_input_length"],
        "dim": first["dim"],
        "max_concurrent_requests": st.cfg.max_concurrent_requests,
        "max_batch_tokens": st.cfg.max_batch_tokens,
        "max_batch_requests": null,
        "max_client_batch_size": st.cfg.max_client_batch_size,
        "payload_limit": st.cfg.payload_limit,
        "auto_truncate": st.cfg.auto_truncate,
        "tokenization_workers": null,
        "version": crate::VERSION,
        "sha": null,
        "docker_label": null,
        "models": models,
    }))
    .into_response()
}

/// `GET /health` and `/ping`: 200 while serving, 503 once stopping.
async fn health(State(st): State<St>) -> Response {
    if st.stopping.load(Ordering::SeqCst) {
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            ErrorType::Unavailable,
            "the server is shutting down",
        )
        .into_response()
    } else {
        StatusCode::OK.into_response()
    }
}

/// `GET /metrics`: Prometheus text.
async fn metrics(State(st): State<St>) -> Response {
    let text = st.metrics.render(st.queue_depth(), st.in_flight());
    (
        [(
            axum::http::header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        text,
    )
        .into_response()
}

/// `GET /openapi.json`.
async fn openapi_document(State(_st): State<St>) -> Response {
    Json(openapi::document(ROUTES)).into_response()
}
