//! Cohere's embed API, as the `cohere` SDK (`ClientV2.embed`, and the v1
//! `Client.embed`) and LiteLLM's `cohere/` provider send it: `POST
//! /v2/embed` and `POST /v1/embed` with `texts` (or v2's `inputs` of text
//! parts), `model`, `input_type`, `embedding_types`, `output_dimension`,
//! `max_tokens` and `truncate`.
//!
//! - `input_type` picks the model's stored prompt for that use, when it has
//!   one: `search_query` its `query` prompt, `search_document` its
//!   `document` (or `passage`) prompt, `classification` and `clustering`
//!   the prompts of those names. A model without them embeds the text as is.
//! - `embedding_types`: any of `float`, `int8`, `uint8`, `binary`,
//!   `ubinary`, all from one embedding pass, with sentence-transformers'
//!   `quantize_embeddings` semantics (the library's output precisions);
//!   `int8` and `uint8` use the ranges stored in the model file (`embd
//!   convert --output-ranges-corpus`), and without them are a 422 saying so.
//! - `truncate`: `END` (default) cuts the end of a long input, `START` its
//!   start, `NONE` refuses it (413).
//! - Errors are Cohere's body, `{"message"}`.

use axum::extract::{Request, State};
use axum::response::{IntoResponse, Response};
use axum::Json;
use embedder::quantize::quantize_embeddings;
use embedder::{CallOptions, OutputPrecision, Truncation};
use serde_json::{json, Map, Value};

use crate::body::read_json;
use crate::error::{ApiError, Dialect};
use crate::routes::{embed_inputs_chunked, permit, request_id, Input, St};
use crate::{AppState, EmbedModel};

/// Which API version's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Version {
    /// `/v1/embed`: a list of floats unless `embedding_types` is given.
    V1,
    /// `/v2/embed`: always by type.
    V2,
}

/// A parsed embed body.
#[derive(Debug)]
pub struct EmbedCall {
    /// The model's name, if any (else the first embedding model).
    pub model: Option<String>,
    /// The texts.
    pub texts: Vec<String>,
    /// The prompt names `input_type` tries, in order.
    pub prompts: &'static [&'static str],
    /// The output types, in the order of [`OutputPrecision::ALL`].
    pub types: Vec<OutputPrecision>,
    /// `embedding_types` was given (v1 answers by type then).
    pub by_type: bool,
    /// Components to keep.
    pub output_dimension: Option<usize>,
    /// Tokens per input at most, if given.
    pub max_tokens: Option<usize>,
    /// What a long input becomes.
    pub truncation: Truncation,
}

/// Cohere's names of the output precisions.
fn type_name(p: OutputPrecision) -> &'static str {
    match p {
        OutputPrecision::Float32 => "float",
        other => other.name(),
    }
}

fn field_list<'a>(o: &'a Map<String, Value>, name: &str) -> Result<Option<&'a [Value]>, ApiError> {
    match o.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Array(a)) => Ok(Some(a)),
        Some(_) => Err(ApiError::validation(format!("`{name}` must be a list"))),
    }
}

/// The text of one of v2's `inputs`: its text parts, joined by a newline.
fn input_text(i: usize, v: &Value) -> Result<String, ApiError> {
    let parts = v.get("content").and_then(Value::as_array).ok_or_else(|| {
        ApiError::validation(format!(
            "`inputs[{i}]` must be an object with a `content` list of \
                 {{\"type\": \"text\", \"text\": ...}} parts"
        ))
    })?;
    let mut texts = Vec::with_capacity(parts.len());
    for (j, p) in parts.iter().enumerate() {
        match (p.get("type").and_then(Value::as_str), p.get("text")) {
            (Some("text"), Some(Value::String(t))) => texts.push(t.as_str()),
            (Some("image_url" | "image"), _) => {
                return Err(ApiError::validation(format!(
                    "`inputs[{i}].content[{j}]` is an image; this server embeds texts only"
                )))
            }
            _ => {
                return Err(ApiError::validation(format!(
                    "`inputs[{i}].content[{j}]` must be {{\"type\": \"text\", \"text\": string}}"
                )))
            }
        }
    }
    if texts.is_empty() {
        return Err(ApiError::empty(format!("`inputs[{i}].content` is empty")));
    }
    Ok(texts.join("\n"))
}

impl EmbedCall {
    /// Reads an embed body.
    ///
    /// # Errors
    /// 422 naming the field for wrong types and unknown values; 400 without
    /// texts; 422 for images.
    pub fn from_value(v: &Value) -> Result<EmbedCall, ApiError> {
        let o = v
            .as_object()
            .ok_or_else(|| ApiError::validation("the request body must be a JSON object"))?;
        let model = match o.get("model") {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) => Some(s.clone()),
            Some(_) => return Err(ApiError::validation("`model` must be a string")),
        };
        if field_list(o, "images")?.is_some_and(|a| !a.is_empty()) {
            return Err(ApiError::validation(
                "`images`: this server embeds texts only",
            ));
        }
        let texts: Vec<String> = match (field_list(o, "texts")?, field_list(o, "inputs")?) {
            (Some(_), Some(_)) => {
                return Err(ApiError::validation("give `texts` or `inputs`, not both"))
            }
            (Some(t), None) => t
                .iter()
                .enumerate()
                .map(|(i, x)| {
                    x.as_str().map(str::to_string).ok_or_else(|| {
                        ApiError::validation(format!("`texts[{i}]` must be a string"))
                    })
                })
                .collect::<Result<_, _>>()?,
            (None, Some(inputs)) => inputs
                .iter()
                .enumerate()
                .map(|(i, x)| input_text(i, x))
                .collect::<Result<_, _>>()?,
            (None, None) => {
                return Err(ApiError::empty(
                    "the request has no `texts` (or `inputs`) to embed",
                ))
            }
        };
        if texts.is_empty() {
            return Err(ApiError::empty("`texts` cannot be empty"));
        }
        let prompts: &'static [&'static str] = match o.get("input_type") {
            None | Some(Value::Null) => &[],
            Some(Value::String(s)) => match s.as_str() {
                "search_query" => &["query", "search_query"],
                "search_document" => &["document", "passage", "search_document"],
                "classification" => &["classification"],
                "clustering" => &["clustering"],
                other => {
                    return Err(ApiError::validation(format!(
                        "`input_type` must be one of \"search_query\", \"search_document\", \
                         \"classification\", \"clustering\", not {other:?}"
                    )))
                }
            },
            Some(_) => return Err(ApiError::validation("`input_type` must be a string")),
        };
        let mut types = Vec::new();
        let given = field_list(o, "embedding_types")?;
        for (i, t) in given.unwrap_or(&[]).iter().enumerate() {
            let name = t.as_str().ok_or_else(|| {
                ApiError::validation(format!("`embedding_types[{i}]` must be a string"))
            })?;
            let p = OutputPrecision::ALL
                .into_iter()
                .find(|&p| type_name(p) == name)
                .ok_or_else(|| {
                    ApiError::validation(format!(
                        "`embedding_types[{i}]`: {name:?} is not one of \"float\", \"int8\", \
                         \"uint8\", \"binary\", \"ubinary\""
                    ))
                })?;
            if !types.contains(&p) {
                types.push(p);
            }
        }
        let by_type = given.is_some_and(|g| !g.is_empty());
        if types.is_empty() {
            types.push(OutputPrecision::Float32);
        }
        types.sort_by_key(|p| OutputPrecision::ALL.iter().position(|q| q == p));
        let positive = |name: &str| -> Result<Option<usize>, ApiError> {
            match o.get(name) {
                None | Some(Value::Null) => Ok(None),
                Some(v) => match v.as_u64() {
                    Some(n) if n >= 1 => Ok(Some(usize::try_from(n).unwrap_or(usize::MAX))),
                    _ => Err(ApiError::validation(format!(
                        "`{name}` must be a positive integer"
                    ))),
                },
            }
        };
        let output_dimension = positive("output_dimension")?;
        let max_tokens = positive("max_tokens")?;
        let truncation = match o.get("truncate") {
            None | Some(Value::Null) => Truncation::Right,
            Some(Value::String(s)) if s.eq_ignore_ascii_case("end") => Truncation::Right,
            Some(Value::String(s)) if s.eq_ignore_ascii_case("start") => Truncation::Left,
            Some(Value::String(s)) if s.eq_ignore_ascii_case("none") => Truncation::Refuse,
            Some(_) => {
                return Err(ApiError::validation(
                    "`truncate` must be \"NONE\", \"START\" or \"END\"",
                ))
            }
        };
        Ok(EmbedCall {
            model,
            texts,
            prompts,
            types,
            by_type,
            output_dimension,
            max_tokens,
            truncation,
        })
    }
}

/// The first of `names` the model stores as a prompt.
fn stored_prompt(model: &EmbedModel, names: &[&str]) -> Option<String> {
    names.iter().find_map(|n| {
        let o = CallOptions {
            prompt_name: Some((*n).to_string()),
            ..CallOptions::default()
        };
        model.engine.plan(&o).ok().map(|_| (*n).to_string())
    })
}

/// The 422 for `int8` / `uint8` on a model without usable ranges.
fn check_ranges(
    name: &str,
    model: &EmbedModel,
    types: &[OutputPrecision],
    dim: usize,
) -> Result<(), ApiError> {
    let Some(p) = types.iter().find(|p| p.needs_ranges()) else {
        return Ok(());
    };
    let t = type_name(*p);
    match model.engine.output_ranges() {
        None => Err(ApiError::validation(format!(
            "`embedding_types`: {t} embeddings need per-dimension ranges, and model '{name}' \
             stores none. Store them by converting the model with a calibration corpus (a text \
             a line, as your documents): `embd convert MODEL -o model.weights \
             --output-ranges-corpus corpus.txt`, then serve that file. float, binary and \
             ubinary need no ranges"
        ))),
        Some(r) if r.dim() != dim => Err(ApiError::validation(format!(
            "`embedding_types`: {t} uses the model's stored ranges, which cover all {} \
             dimensions; with `output_dimension` {dim} the vectors are cut and normalized \
             again, so the ranges do not apply. Ask for float, binary or ubinary, or for the \
             full dimension",
            r.dim()
        ))),
        Some(_) => Ok(()),
    }
}

/// `POST /v2/embed`.
pub async fn embed_v2(State(st): State<St>, req: Request) -> Response {
    answer(&st, req, Version::V2).await
}

/// `POST /v1/embed`.
pub async fn embed_v1(State(st): State<St>, req: Request) -> Response {
    answer(&st, req, Version::V1).await
}

async fn answer(st: &AppState, req: Request, version: Version) -> Response {
    match embed_inner(st, req, version).await {
        Ok(r) => r,
        Err(e) => e.dialect(Dialect::Cohere).into_response(),
    }
}

async fn embed_inner(st: &AppState, req: Request, version: Version) -> Result<Response, ApiError> {
    let _permit = permit(st)?;
    let v: Value = read_json(st, req).await?;
    let call = EmbedCall::from_value(&v)?;
    let (m, model) = st
        .embedder(call.model.as_deref())
        .map_err(ApiError::backend)?;
    let max = model.engine.max_seq_length();
    if let Some(k) = call.max_tokens.filter(|&k| k < max) {
        return Err(ApiError::validation(format!(
            "`max_tokens` {k} is below model '{}''s max_seq_length {max}; this server cuts \
             inputs at the model's maximum only (leave max_tokens out, or give {max} or more)",
            m.name
        )));
    }
    let dim = call.output_dimension.unwrap_or(model.engine.dim());
    check_ranges(&m.name, model, &call.types, dim)?;
    let opts = CallOptions {
        dimensions: call.output_dimension,
        prompt_name: stored_prompt(model, call.prompts),
        truncation: call.truncation,
        ..CallOptions::default()
    };
    let texts = call.texts.clone();
    let inputs = call.texts.into_iter().map(Input::Text).collect();
    let e = embed_inputs_chunked(st, model, inputs, opts, true).await?;
    let dim = e.dim;
    let mut by_type = Map::new();
    for &p in &call.types {
        let rows: Value = if p == OutputPrecision::Float32 {
            json!(e.rows().collect::<Vec<_>>())
        } else {
            let row = p.row_len(dim);
            let mut out = vec![0u8; texts.len() * row];
            quantize_embeddings(&e.vectors, dim, p, model.engine.output_ranges(), &mut out)
                .map_err(|err| ApiError::from_engine(&err))?;
            let lists: Vec<Value> = out
                .chunks_exact(row.max(1))
                .map(|r| {
                    if p.is_signed() {
                        json!(r.iter().map(|&b| b as i8).collect::<Vec<_>>())
                    } else {
                        json!(r)
                    }
                })
                .collect();
            Value::Array(lists)
        };
        by_type.insert(type_name(p).to_string(), rows);
    }
    let ver = match version {
        Version::V1 => "1",
        Version::V2 => "2",
    };
    let floats_only = version == Version::V1 && !call.by_type;
    let (response_type, embeddings) = if floats_only {
        (
            "embeddings_floats",
            by_type.remove("float").unwrap_or(Value::Null),
        )
    } else {
        ("embeddings_by_type", Value::Object(by_type))
    };
    let body = json!({
        "response_type": response_type,
        "id": request_id(),
        "embeddings": embeddings,
        "texts": texts,
        "meta": {
            "api_version": {"version": ver},
            "billed_units": {"input_tokens": e.tokens},
        },
    });
    let mut resp = Json(body).into_response();
    e.headers(&mut resp);
    Ok(resp)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodies() {
        let c = EmbedCall::from_value(&json!({
            "texts": ["a"], "embedding_types": ["ubinary", "float", "int8", "float"],
            "truncate": "START", "input_type": "search_query"
        }))
        .unwrap();
        assert_eq!(
            c.types,
            [
                OutputPrecision::Float32,
                OutputPrecision::Int8,
                OutputPrecision::Ubinary
            ]
        );
        assert!(c.by_type && c.truncation == Truncation::Left && c.prompts[0] == "query");
        let c = EmbedCall::from_value(&json!({"inputs": [{"content": [
            {"type": "text", "text": "x"}, {"type": "text", "text": "y"}]}]}))
        .unwrap();
        assert_eq!(c.texts, ["x\ny"]);
        assert!(!c.by_type && c.types == [OutputPrecision::Float32]);
        for bad in [
            json!({"texts": ["a"], "embedding_types": ["int4"]}),
            json!({"texts": ["a"], "truncate": "MIDDLE"}),
            json!({"texts": ["a"], "input_type": "query"}),
            json!({"texts": [1]}),
            json!({"texts": ["a"], "inputs": []}),
            json!({"texts": ["a"], "output_dimension": 0}),
            json!({"inputs": [{"content": [{"type": "image_url", "image_url": "x"}]}]}),
        ] {
            assert_eq!(
                EmbedCall::from_value(&bad).unwrap_err().status.as_u16(),
                422,
                "{bad}"
            );
        }
        assert_eq!(
            EmbedCall::from_value(&json!({}))
                .unwrap_err()
                .status
                .as_u16(),
            400
        );
    }
}
