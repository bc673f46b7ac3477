//! Ollama's embedding API, as the `ollama` Python client, LangChain's
//! `OllamaEmbeddings` and LlamaIndex's `OllamaEmbedding` call it:
//! `POST /api/embed` (`model`, `input`, `truncate`, `dimensions`,
//! `keep_alive`, `options`), the legacy `POST /api/embeddings` (`prompt` ->
//! `embedding`), and the routes clients list and check models with:
//! `GET /api/tags`, `POST /api/show`, `GET /api/version`.
//!
//! Behaviour and errors follow Ollama's server (`server/routes.go`): errors
//! are `{"error": str}`; a body that does not parse or an input that is not
//! a string is a 400; an unknown model a 404 (`model 'x' not found`); with
//! `truncate: false` an input longer than the model is a 400 ("the input
//! length exceeds the context length"); an absent or empty input answers no
//! vectors (Ollama's way to load a model). `/api/embed` always L2-normalizes
//! and `dimensions` keeps the first components, normalized again (a value
//! outside `1..dim` keeps all, as Ollama); `/api/embeddings` answers the
//! model's own output. Model names match with or without Ollama's `:latest`
//! tag, ignoring case.

use std::time::Instant;

use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use embedder::CallOptions;
use serde_json::{json, Map, Value};

use crate::body::read_json;
use crate::error::{ApiError, Dialect};
use crate::routes::{embed_inputs_chunked, permit, truncation, Input, St};
use crate::{AppState, EmbedModel, Model, ModelKind};

/// Ollama's tag for a name given without one.
const LATEST: &str = ":latest";

/// A parsed `/api/embed` body.
#[derive(Debug)]
pub struct EmbedCall {
    /// The model name as sent (answered back as Ollama does).
    pub model: String,
    /// The texts (none: the answer has no vectors).
    pub input: Vec<String>,
    /// `false`: refuse inputs longer than the model; else cut them.
    pub truncate: Option<bool>,
    /// Components to keep (`None`: all).
    pub dimensions: Option<usize>,
}

/// A parsed `/api/embeddings` body.
#[derive(Debug)]
pub struct EmbeddingsCall {
    /// The model name.
    pub model: String,
    /// The text (empty: the answer has no vector).
    pub prompt: String,
}

fn bad(msg: impl Into<String>) -> ApiError {
    ApiError::new(
        StatusCode::BAD_REQUEST,
        crate::error::ErrorType::Validation,
        msg,
    )
    .dialect(Dialect::Ollama)
}

fn object(v: &Value) -> Result<&Map<String, Value>, ApiError> {
    v.as_object()
        .ok_or_else(|| bad("the request body must be a JSON object"))
}

/// A string field, absent or null as "".
fn string_field(o: &Map<String, Value>, name: &str) -> Result<String, ApiError> {
    match o.get(name) {
        None | Some(Value::Null) => Ok(String::new()),
        Some(Value::String(s)) => Ok(s.clone()),
        Some(_) => Err(bad(format!("`{name}` must be a string"))),
    }
}

/// `keep_alive` (a duration string or seconds) and `options` (an object of
/// runner settings) are accepted and ignored: the models stay loaded, and
/// the sampling and GPU settings clients send do not apply to an encoder.
fn check_ignored(o: &Map<String, Value>) -> Result<(), ApiError> {
    match o.get("keep_alive") {
        None | Some(Value::Null | Value::String(_) | Value::Number(_)) => {}
        Some(_) => {
            return Err(bad(
                "`keep_alive` must be a duration (\"5m\") or a number of seconds",
            ))
        }
    }
    match o.get("options") {
        None | Some(Value::Null | Value::Object(_)) => Ok(()),
        Some(_) => Err(bad("`options` must be an object")),
    }
}

impl EmbedCall {
    /// Reads an `/api/embed` body.
    ///
    /// # Errors
    /// Ollama's 400s: not an object, no model, an input that is not a string
    /// or a list of strings ("invalid input type"), fields of the wrong type.
    pub fn from_value(v: &Value) -> Result<EmbedCall, ApiError> {
        let o = object(v)?;
        let model = string_field(o, "model")?;
        if model.is_empty() {
            return Err(bad("model is required"));
        }
        let input = match o.get("input") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::String(s)) if s.is_empty() => Vec::new(),
            Some(Value::String(s)) => vec![s.clone()],
            Some(Value::Array(a)) => a
                .iter()
                .map(|x| x.as_str().map(str::to_string))
                .collect::<Option<Vec<_>>>()
                .ok_or_else(|| bad("invalid input type"))?,
            Some(_) => return Err(bad("invalid input type")),
        };
        let truncate = match o.get("truncate") {
            None | Some(Value::Null) => None,
            Some(Value::Bool(b)) => Some(*b),
            Some(_) => return Err(bad("`truncate` must be true or false")),
        };
        let dimensions = match o.get("dimensions") {
            None | Some(Value::Null) => None,
            Some(Value::Number(n)) => match n.as_i64() {
                // As Ollama: 0 or less keeps every component.
                Some(d) if d <= 0 => None,
                Some(d) => Some(usize::try_from(d).unwrap_or(usize::MAX)),
                None => return Err(bad("`dimensions` must be an integer")),
            },
            Some(_) => return Err(bad("`dimensions` must be an integer")),
        };
        check_ignored(o)?;
        Ok(EmbedCall {
            model,
            input,
            truncate,
            dimensions,
        })
    }
}

impl EmbeddingsCall {
    /// Reads an `/api/embeddings` body.
    ///
    /// # Errors
    /// Ollama's 400s: not an object, fields of the wrong type, no model.
    pub fn from_value(v: &Value) -> Result<EmbeddingsCall, ApiError> {
        let o = object(v)?;
        let model = string_field(o, "model")?;
        if model.is_empty() {
            return Err(bad("model is required"));
        }
        let prompt = string_field(o, "prompt")?;
        check_ignored(o)?;
        Ok(EmbeddingsCall { model, prompt })
    }
}

/// The served model `name` names: its name, with or without `:latest`,
/// ignoring case.
fn find<'a>(st: &'a AppState, name: &str) -> Option<&'a Model> {
    let bare = |n: &str| -> String {
        let n = n.strip_suffix(LATEST).unwrap_or(n);
        n.to_lowercase()
    };
    let want = bare(name);
    st.models.iter().find(|m| bare(&m.name) == want)
}

/// Ollama's 404 for a name this server does not serve.
fn not_found(st: &AppState, name: &str) -> ApiError {
    let served: Vec<&str> = st.models.iter().map(|m| m.name.as_str()).collect();
    ApiError::not_found(format!(
        "model '{name}' not found (this server serves: {})",
        served.join(", ")
    ))
    .dialect(Dialect::Ollama)
}

/// The embedding model `name` names, else Ollama's 404 (or its 400 for a
/// model that does not embed).
fn embedder<'a>(st: &'a AppState, name: &str) -> Result<(&'a Model, &'a EmbedModel), ApiError> {
    let m = find(st, name).ok_or_else(|| not_found(st, name))?;
    match &m.kind {
        ModelKind::Embedder(e) => Ok((m, e)),
        ModelKind::Reranker(_) => Err(bad(format!(
            "\"{}\" does not support embeddings (it is a re-ranker; its routes are /rerank, \
             /v1/rerank and /v2/rerank)",
            m.name
        ))),
    }
}

fn nanos(d: std::time::Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// `POST /api/embed`: `{model, embeddings, total_duration, load_duration,
/// prompt_eval_count}` (durations in nanoseconds, as Ollama).
pub async fn embed(State(st): State<St>, req: Request) -> Response {
    let start = Instant::now();
    match embed_inner(&st, req, start).await {
        Ok(r) => r,
        Err(e) => e.dialect(Dialect::Ollama).into_response(),
    }
}

async fn embed_inner(st: &AppState, req: Request, start: Instant) -> Result<Response, ApiError> {
    let _permit = permit(st)?;
    let v: Value = read_json(st, req).await?;
    let call = EmbedCall::from_value(&v)?;
    let (_, model) = embedder(st, &call.model)?;
    let loaded = start.elapsed();
    if call.input.is_empty() {
        return Ok(Json(json!({"model": call.model, "embeddings": []})).into_response());
    }
    let dim = model.engine.dim();
    let opts = CallOptions {
        normalize: Some(true),
        dimensions: call.dimensions.filter(|&d| d < dim),
        truncation: truncation(st, call.truncate, None)?,
        ..CallOptions::default()
    };
    let inputs = call.input.into_iter().map(Input::Text).collect();
    let e = embed_inputs_chunked(st, model, inputs, opts, true)
        .await
        .map_err(too_long)?;
    let embeddings: Vec<&[f32]> = e.rows().collect();
    let body = json!({
        "model": call.model,
        "embeddings": embeddings,
        "total_duration": nanos(start.elapsed()),
        "load_duration": nanos(loaded),
        "prompt_eval_count": e.tokens,
    });
    let mut resp = Json(body).into_response();
    e.headers(&mut resp);
    Ok(resp)
}

/// Ollama's words for an input over the model with truncation off, with
/// the engine's details after them.
fn too_long(e: ApiError) -> ApiError {
    if e.status == StatusCode::PAYLOAD_TOO_LARGE && e.message.contains("max_seq_length") {
        let mut e = e;
        e.message = format!(
            "the input length exceeds the context length ({})",
            e.message
        );
        return e;
    }
    e
}

/// `POST /api/embeddings` (legacy): `{"embedding": [f64]}`, the model's own
/// output for one prompt (no vector for an empty one).
pub async fn embeddings(State(st): State<St>, req: Request) -> Response {
    match embeddings_inner(&st, req).await {
        Ok(r) => r,
        Err(e) => e.dialect(Dialect::Ollama).into_response(),
    }
}

async fn embeddings_inner(st: &AppState, req: Request) -> Result<Response, ApiError> {
    let _permit = permit(st)?;
    let v: Value = read_json(st, req).await?;
    let call = EmbeddingsCall::from_value(&v)?;
    let (_, model) = embedder(st, &call.model)?;
    if call.prompt.is_empty() {
        return Ok(Json(json!({"embedding": []})).into_response());
    }
    let opts = CallOptions {
        truncation: truncation(st, None, None)?,
        ..CallOptions::default()
    };
    let e = embed_inputs_chunked(st, model, vec![Input::Text(call.prompt)], opts, true).await?;
    let embedding: Vec<f64> = e.vectors.iter().map(|&x| f64::from(x)).collect();
    let mut resp = Json(json!({ "embedding": embedding })).into_response();
    e.headers(&mut resp);
    Ok(resp)
}

/// Ollama's name of a served model: with its `:latest` tag.
fn tagged(name: &str) -> String {
    if name.contains(':') {
        name.to_string()
    } else {
        format!("{name}{LATEST}")
    }
}

/// The file's size and modification time (RFC 3339, UTC).
fn file_facts(m: &Model) -> (u64, Option<String>) {
    match std::fs::metadata(&m.path) {
        Ok(md) => (
            md.len(),
            md.modified().ok().map(embedder::import::hf::iso8601),
        ),
        Err(_) => (0, None),
    }
}

/// Ollama's `details` of an embedding model.
fn details(e: &EmbedModel) -> Value {
    let c = e.engine.config();
    json!({
        "parent_model": "",
        "format": "embd",
        "family": c.architecture,
        "families": [c.architecture],
        "parameter_size": "",
        "quantization_level": e.engine.precision().name(),
        "context_length": e.engine.max_seq_length(),
        "embedding_length": e.engine.dim(),
    })
}

/// `GET /api/tags`: the served embedding models, as Ollama lists its own.
pub async fn tags(State(st): State<St>) -> Response {
    let models: Vec<Value> = st
        .models
        .iter()
        .filter_map(|m| match &m.kind {
            ModelKind::Embedder(e) => Some((m, e)),
            ModelKind::Reranker(_) => None,
        })
        .map(|(m, e)| {
            let (size, modified) = file_facts(m);
            let mut o = json!({
                "name": tagged(&m.name),
                "model": tagged(&m.name),
                "size": size,
                "details": details(e),
                "capabilities": ["embedding"],
            });
            if let Some(t) = modified {
                o["modified_at"] = json!(t);
            }
            o
        })
        .collect();
    Json(json!({ "models": models })).into_response()
}

/// `POST /api/show`: a served embedding model's details and `model_info`.
pub async fn show(State(st): State<St>, req: Request) -> Response {
    match show_inner(&st, req).await {
        Ok(r) => r,
        Err(e) => e.dialect(Dialect::Ollama).into_response(),
    }
}

async fn show_inner(st: &AppState, req: Request) -> Result<Response, ApiError> {
    let v: Value = read_json(st, req).await?;
    let o = object(&v)?;
    let mut name = string_field(o, "model")?;
    if name.is_empty() {
        // Ollama's deprecated spelling.
        name = string_field(o, "name")?;
    }
    if name.is_empty() {
        return Err(bad("model is required"));
    }
    let (m, e) = embedder(st, &name)?;
    let c = e.engine.config();
    let arch = &c.architecture;
    let mut info = Map::new();
    info.insert("general.architecture".into(), json!(arch));
    info.insert("general.basename".into(), json!(m.name));
    info.insert(
        format!("{arch}.context_length"),
        json!(e.engine.max_seq_length()),
    );
    info.insert(format!("{arch}.embedding_length"), json!(e.engine.dim()));
    info.insert(format!("{arch}.block_count"), json!(c.num_layers));
    info.insert(format!("{arch}.attention.head_count"), json!(c.num_heads));
    info.insert(
        format!("{arch}.pooling_type"),
        json!(e.engine.info().pooling.name()),
    );
    let (_, modified) = file_facts(m);
    let mut body = json!({
        "license": "",
        "modelfile": "",
        "parameters": "",
        "template": "",
        "details": details(e),
        "model_info": info,
        "capabilities": ["embedding"],
    });
    if let Some(t) = modified {
        body["modified_at"] = json!(t);
    }
    Ok(Json(body).into_response())
}

/// `GET /api/version`: this server's version.
pub async fn version(State(_st): State<St>) -> Response {
    Json(json!({ "version": crate::VERSION })).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodies() {
        let e = EmbedCall::from_value(&json!({"model": "m", "input": ["a", 1]})).unwrap_err();
        assert_eq!(
            (e.status, e.message.as_str()),
            (StatusCode::BAD_REQUEST, "invalid input type")
        );
        let c =
            EmbedCall::from_value(&json!({"model": "m", "input": "", "dimensions": -3})).unwrap();
        assert!(c.input.is_empty() && c.dimensions.is_none());
        let e = EmbeddingsCall::from_value(&json!({"prompt": "a"})).unwrap_err();
        assert_eq!(e.message, "model is required");
        assert_eq!(tagged("a"), "a:latest");
        assert_eq!(tagged("a:v2"), "a:v2");
    }
}
