//! The server's OpenAPI 3.0 document (`GET /openapi.json`): one operation
//! function per route (the `documentation` of its [`Route`] row), and
//! [`document`], which lays the rows out as OpenAPI's `paths`. A test checks
//! that the document's paths and methods are exactly
//! [`crate::routes::ROUTES`].

use serde_json::{json, Map, Value};

use crate::api::{Access, Route};
use crate::error::Dialect;

fn tei_error() -> Value {
    json!({"type": "object", "required": ["error", "error_type"], "properties": {
        "error": {"type": "string"},
        "error_type": {"type": "string", "enum": ["validation", "tokenizer", "backend",
            "overloaded", "empty", "timeout", "not_found", "unavailable"]}
    }})
}

fn openai_error() -> Value {
    json!({"type": "object", "required": ["error"], "properties": {"error": {
    "type": "object", "required": ["message", "type", "code"], "properties": {
        "message": {"type": "string"}, "type": {"type": "string"},
        "param": {"nullable": true}, "code": {"type": "string", "nullable": true}
    }}}})
}

fn cohere_error() -> Value {
    json!({"type": "object", "required": ["message"], "properties": {
        "message": {"type": "string"}
    }})
}

fn ollama_error() -> Value {
    json!({"type": "object", "required": ["error"], "properties": {
        "error": {"type": "string"}
    }})
}

fn inputs_schema() -> Value {
    json!({"oneOf": [
        {"type": "string"},
        {"type": "array", "items": {"type": "string"}},
        {"type": "array", "items": {"type": "integer", "minimum": 0}},
        {"type": "array", "items": {"type": "array", "items": {"type": "integer", "minimum": 0}}}
    ]})
}

/// Which error body a route answers.
#[derive(Clone, Copy)]
enum Shape {
    Tei,
    OpenAi,
    Cohere,
    Ollama,
}

fn errors(shape: Shape, codes: &[&str]) -> Map<String, Value> {
    let schema = match shape {
        Shape::Tei => tei_error(),
        Shape::OpenAi => openai_error(),
        Shape::Cohere => cohere_error(),
        Shape::Ollama => ollama_error(),
    };
    codes
        .iter()
        .map(|c| {
            (
                c.to_string(),
                json!({"description": "error",
                    "content": {"application/json": {"schema": schema}}}),
            )
        })
        .collect()
}

const INFER_ERRORS: &[&str] = &["400", "408", "413", "415", "422", "424", "429", "503"];
const PARSE_ERRORS: &[&str] = &["400", "408", "413", "415", "422"];

fn post(summary: &str, body: Value, ok: Value, shape: Shape, codes: &[&str]) -> Value {
    let mut responses = errors(shape, codes);
    responses.insert(
        "200".into(),
        json!({"description": "OK", "content": {"application/json": {"schema": ok}}}),
    );
    json!({
        "summary": summary,
        "requestBody": {"required": true,
            "content": {"application/json": {"schema": body}}},
        "responses": responses,
    })
}

fn get(summary: &str, content_type: &str, ok: Value) -> Value {
    let ok = if ok.is_null() {
        json!({"description": "OK"})
    } else {
        json!({"description": "OK", "content": {content_type: {"schema": ok}}})
    };
    json!({"summary": summary, "responses": {"200": ok}})
}

fn embed_request() -> Value {
    json!({"type": "object", "required": ["inputs"], "properties": {
        "inputs": inputs_schema(),
        "normalize": {"type": "boolean", "default": true},
        "truncate": {"type": "boolean", "nullable": true},
        "truncation_direction": {"type": "string", "enum": ["right", "left", "Right", "Left"]},
        "prompt_name": {"type": "string", "nullable": true},
        "dimensions": {"type": "integer", "minimum": 1, "nullable": true},
        "model": {"type": "string", "nullable": true},
        "task": task_schema()
    }})
}

fn task_schema() -> Value {
    json!({"type": "string", "enum": ["query", "document"], "nullable": true,
        "description": "Extension: encode as a query or a document (sentence-transformers' \
            encode_query / encode_document: the prompt of that name, ColBERT's query markers \
            and expansion, a Router's query route)"})
}

fn matrix() -> Value {
    json!({"type": "array", "items": {"type": "array", "items": {"type": "number"}}})
}

/// `POST /embed` and `POST /` (TEI).
pub(crate) fn embed() -> Value {
    post(
        "Embed inputs (TEI)",
        embed_request(),
        matrix(),
        Shape::Tei,
        INFER_ERRORS,
    )
}

/// `POST /v1/embeddings` and `POST /embeddings` (OpenAI).
pub(crate) fn openai_embeddings() -> Value {
    post(
        "Embed inputs (OpenAI)",
        json!({"type": "object", "required": ["input"], "properties": {
            "input": inputs_schema(),
            "model": {"type": "string"},
            "encoding_format": {"type": "string", "enum": ["float", "base64"]},
            "dimensions": {"type": "integer", "minimum": 1},
            "user": {"type": "string"}
        }}),
        json!({"type": "object", "required": ["object", "data", "model", "usage"],
            "properties": {
            "object": {"type": "string", "enum": ["list"]},
            "data": {"type": "array", "items": {"type": "object",
                "required": ["object", "embedding", "index"], "properties": {
                "object": {"type": "string", "enum": ["embedding"]},
                "embedding": {"oneOf": [{"type": "array", "items": {"type": "number"}},
                    {"type": "string", "format": "byte"}]},
                "index": {"type": "integer"}}}},
            "model": {"type": "string"},
            "usage": {"type": "object", "required": ["prompt_tokens", "total_tokens"],
                "properties": {"prompt_tokens": {"type": "integer"},
                    "total_tokens": {"type": "integer"}}}
        }}),
        Shape::OpenAi,
        INFER_ERRORS,
    )
}

/// `POST /tokenize`.
pub(crate) fn tokenize() -> Value {
    post(
        "Tokenize inputs",
        json!({"type": "object", "required": ["inputs"], "properties": {
            "inputs": {"oneOf": [{"type": "string"},
                {"type": "array", "items": {"type": "string"}}]},
            "add_special_tokens": {"type": "boolean", "default": true},
            "prompt_name": {"type": "string", "nullable": true},
            "model": {"type": "string", "nullable": true}
        }}),
        json!({"type": "array", "items": {"type": "array", "items": {"type": "object",
            "required": ["id", "text", "special", "start", "stop"], "properties": {
            "id": {"type": "integer"}, "text": {"type": "string"},
            "special": {"type": "boolean"},
            "start": {"type": "integer", "nullable": true},
            "stop": {"type": "integer", "nullable": true}}}}}),
        Shape::Tei,
        PARSE_ERRORS,
    )
}

/// `POST /decode`.
pub(crate) fn decode() -> Value {
    post(
        "Decode token ids",
        json!({"type": "object", "required": ["ids"], "properties": {
            "ids": {"oneOf": [
                {"type": "array", "items": {"type": "integer", "minimum": 0}},
                {"type": "array", "items": {"type": "array",
                    "items": {"type": "integer", "minimum": 0}}}]},
            "skip_special_tokens": {"type": "boolean", "default": true},
            "model": {"type": "string", "nullable": true}
        }}),
        json!({"type": "array", "items": {"type": "string"}}),
        Shape::Tei,
        PARSE_ERRORS,
    )
}

/// `POST /similarity`.
pub(crate) fn similarity() -> Value {
    post(
        "Cosine of each sentence to the source sentence",
        json!({"type": "object", "required": ["inputs"], "properties": {
            "inputs": {"type": "object", "required": ["source_sentence", "sentences"],
                "properties": {"source_sentence": {"type": "string"},
                    "sentences": {"type": "array", "items": {"type": "string"}}}},
            "parameters": {"type": "object", "nullable": true, "properties": {
                "truncate": {"type": "boolean", "nullable": true},
                "truncation_direction": {"type": "string", "enum": ["right", "left"]},
                "prompt_name": {"type": "string", "nullable": true}}},
            "model": {"type": "string", "nullable": true}
        }}),
        json!({"type": "array", "items": {"type": "number"}}),
        Shape::Tei,
        INFER_ERRORS,
    )
}

/// `POST /embed_all`.
pub(crate) fn embed_all() -> Value {
    post(
        "Un-pooled token vectors of each input (special and prompt tokens included); \
         on a model with a multi-vector output (ColBERT, BGE-M3), its multi-vectors \
         (texts only)",
        json!({"type": "object", "required": ["inputs"], "properties": {
            "inputs": inputs_schema(),
            "normalize": {"type": "boolean", "default": false},
            "truncate": {"type": "boolean", "nullable": true},
            "truncation_direction": {"type": "string", "enum": ["right", "left", "Right", "Left"]},
            "prompt_name": {"type": "string", "nullable": true},
            "dimensions": {"type": "integer", "minimum": 1, "nullable": true},
            "model": {"type": "string", "nullable": true},
            "task": task_schema()
        }}),
        json!({"type": "array", "items": matrix()}),
        Shape::Tei,
        INFER_ERRORS,
    )
}

/// `POST /embed_sparse`.
pub(crate) fn embed_sparse() -> Value {
    post(
        "Sparse vectors (TEI): the non-zero weights of each input, ids ascending; \
         424 on a model without a sparse output",
        json!({"type": "object", "required": ["inputs"], "properties": {
            "inputs": {"oneOf": [{"type": "string"},
                {"type": "array", "items": {"type": "string"}}]},
            "truncate": {"type": "boolean", "nullable": true},
            "truncation_direction": {"type": "string", "enum": ["right", "left", "Right", "Left"]},
            "prompt_name": {"type": "string", "nullable": true},
            "model": {"type": "string", "nullable": true},
            "task": task_schema()
        }}),
        json!({"type": "array", "items": {"type": "array", "items": {"type": "object",
            "required": ["index", "value"], "properties": {
            "index": {"type": "integer", "minimum": 0}, "value": {"type": "number"}}}}}),
        Shape::Tei,
        INFER_ERRORS,
    )
}

/// `POST /encode`.
pub(crate) fn encode() -> Value {
    post(
        "The model's outputs (dense, sparse, multi-vector: BGE-M3's three) from one \
         forward pass per input; 424 naming the model's outputs for one it lacks",
        json!({"type": "object", "required": ["inputs"], "properties": {
            "inputs": {"oneOf": [{"type": "string"},
                {"type": "array", "items": {"type": "string"}}]},
            "outputs": {"type": "array", "items": {"type": "string",
                "enum": ["dense", "sparse", "multi-vector"]},
                "description": "default: every output the model has"},
            "task": task_schema(),
            "normalize": {"type": "boolean", "default": true},
            "dimensions": {"type": "integer", "minimum": 1, "nullable": true},
            "top_k": {"type": "integer", "minimum": 1, "nullable": true},
            "truncate": {"type": "boolean", "nullable": true},
            "truncation_direction": {"type": "string", "enum": ["right", "left", "Right", "Left"]},
            "prompt_name": {"type": "string", "nullable": true},
            "model": {"type": "string", "nullable": true}
        }}),
        json!({"type": "object", "required": ["model", "data", "usage"], "properties": {
            "model": {"type": "string"},
            "data": {"type": "array", "items": {"type": "object", "properties": {
                "dense": {"type": "array", "items": {"type": "number"}},
                "sparse": {"type": "object", "required": ["indices", "values"],
                    "properties": {
                    "indices": {"type": "array", "items": {"type": "integer", "minimum": 0}},
                    "values": {"type": "array", "items": {"type": "number"}}}},
                "multi_vector": matrix()}}},
            "usage": {"type": "object", "required": ["prompt_tokens", "total_tokens"],
                "properties": {"prompt_tokens": {"type": "integer"},
                    "total_tokens": {"type": "integer"}}}
        }}),
        Shape::Tei,
        INFER_ERRORS,
    )
}

/// `POST /rerank` (TEI).
pub(crate) fn rerank() -> Value {
    post(
        "Rerank texts against a query (TEI), best first; 424 on a server without a reranker",
        json!({"type": "object", "required": ["query", "texts"], "properties": {
            "query": {"type": "string"},
            "texts": {"type": "array", "items": {"type": "string"}},
            "truncate": {"type": "boolean", "nullable": true},
            "truncation_direction": {"type": "string", "enum": ["right", "left"]},
            "raw_scores": {"type": "boolean", "default": false},
            "return_text": {"type": "boolean", "default": false},
            "model": {"type": "string", "nullable": true},
            "prompt": {"type": "string", "nullable": true,
                "description": "An LLM reranker's instruction (Qwen3-Reranker); 422 for other rerankers"}
        }}),
        json!({"type": "array", "items": {"type": "object", "required": ["index", "score"],
            "properties": {"index": {"type": "integer"}, "score": {"type": "number"},
                "text": {"type": "string"}}}}),
        Shape::Tei,
        INFER_ERRORS,
    )
}

/// The request of `/v1/rerank` and `/v2/rerank` (Jina / Cohere).
fn documents_rerank_request() -> Value {
    json!({"type": "object", "required": ["query", "documents"], "properties": {
        "model": {"type": "string"},
        "query": {"type": "string"},
        "documents": {"type": "array", "items": {"oneOf": [{"type": "string"},
            {"type": "object", "required": ["text"],
                "properties": {"text": {"type": "string"}}}]}},
        "top_n": {"type": "integer", "minimum": 1},
        "return_documents": {"type": "boolean", "default": false},
        "prompt": {"type": "string", "nullable": true,
            "description": "An LLM reranker's instruction (Qwen3-Reranker); 422 for other rerankers"}
    }})
}

/// The `results` of `/v1/rerank` and `/v2/rerank`, best first.
fn relevance_results() -> Value {
    json!({"type": "array", "items": {"type": "object",
        "required": ["index", "relevance_score"], "properties": {
        "index": {"type": "integer"}, "relevance_score": {"type": "number"},
        "document": {"type": "object", "properties": {"text": {"type": "string"}}}}}})
}

/// `POST /v1/rerank` (Jina / Cohere v1).
pub(crate) fn openai_rerank() -> Value {
    post(
        "Rerank documents (Jina / Cohere shape), best first; 424 on a server without a reranker",
        documents_rerank_request(),
        json!({"type": "object", "required": ["model", "object", "results"],
            "properties": {"model": {"type": "string"}, "object": {"type": "string"},
            "results": relevance_results(),
            "usage": {"type": "object"}}}),
        Shape::OpenAi,
        INFER_ERRORS,
    )
}

/// `POST /v2/rerank` (Cohere v2).
pub(crate) fn cohere_v2_rerank() -> Value {
    post(
        "Rerank documents (Cohere's v2 shape), best first; 424 on a server without a reranker",
        documents_rerank_request(),
        json!({"type": "object", "required": ["id", "results", "meta"],
            "properties": {"id": {"type": "string"},
            "results": relevance_results(),
            "meta": {"type": "object", "properties": {
                "api_version": {"type": "object",
                    "properties": {"version": {"type": "string"}}},
                "tokens": {"type": "object", "properties": {
                    "input_tokens": {"type": "number"},
                    "output_tokens": {"type": "number"}}}}}}}),
        Shape::Cohere,
        INFER_ERRORS,
    )
}

/// The request of `/v2/embed` and `/v1/embed` (Cohere).
fn cohere_embed_request() -> Value {
    json!({"type": "object", "oneOf": [{"required": ["texts"]}, {"required": ["inputs"]}],
        "properties": {
        "model": {"type": "string"},
        "texts": {"type": "array", "minItems": 1, "items": {"type": "string"}},
        "inputs": {"type": "array", "minItems": 1, "items": {"type": "object",
            "required": ["content"],
            "properties": {"content": {"type": "array", "minItems": 1, "items": {"type": "object",
                "required": ["type", "text"], "properties": {
                "type": {"type": "string", "enum": ["text"]}, "text": {"type": "string"}}}}}}},
        "input_type": {"type": "string",
            "enum": ["search_query", "search_document", "classification", "clustering"]},
        "embedding_types": {"type": "array", "items": {"type": "string",
            "enum": ["float", "int8", "uint8", "binary", "ubinary"]}},
        "output_dimension": {"type": "integer", "minimum": 1},
        "max_tokens": {"type": "integer", "minimum": 1},
        "truncate": {"type": "string", "enum": ["NONE", "START", "END"]}
    }})
}

fn by_type() -> Value {
    json!({"type": "object", "properties": {
        "float": matrix(),
        "int8": {"type": "array", "items": {"type": "array", "items": {"type": "integer"}}},
        "uint8": {"type": "array", "items": {"type": "array", "items": {"type": "integer"}}},
        "binary": {"type": "array", "items": {"type": "array", "items": {"type": "integer"}}},
        "ubinary": {"type": "array", "items": {"type": "array", "items": {"type": "integer"}}}
    }})
}

fn cohere_meta() -> Value {
    json!({"type": "object", "properties": {
        "api_version": {"type": "object", "properties": {"version": {"type": "string"}}},
        "billed_units": {"type": "object",
            "properties": {"input_tokens": {"type": "integer"}}}}})
}

/// `POST /v2/embed` (Cohere v2).
pub(crate) fn cohere_embed_v2() -> Value {
    post(
        "Embed texts (Cohere's v2 shape): float, int8, uint8, binary and ubinary vectors",
        cohere_embed_request(),
        json!({"type": "object", "required": ["id", "embeddings"], "properties": {
            "response_type": {"type": "string", "enum": ["embeddings_by_type"]},
            "id": {"type": "string"}, "embeddings": by_type(),
            "texts": {"type": "array", "items": {"type": "string"}},
            "meta": cohere_meta()}}),
        Shape::Cohere,
        INFER_ERRORS,
    )
}

/// `POST /v1/embed` (Cohere v1).
pub(crate) fn cohere_embed_v1() -> Value {
    post(
        "Embed texts (Cohere's v1 shape): a list of floats, or by type with embedding_types",
        cohere_embed_request(),
        json!({"type": "object", "required": ["id", "embeddings", "response_type"],
            "properties": {
            "response_type": {"type": "string",
                "enum": ["embeddings_floats", "embeddings_by_type"]},
            "id": {"type": "string"},
            "embeddings": {"oneOf": [matrix(), by_type()]},
            "texts": {"type": "array", "items": {"type": "string"}},
            "meta": cohere_meta()}}),
        Shape::Cohere,
        INFER_ERRORS,
    )
}

/// Ollama's errors: 400 for bad bodies, 404 unknown model, 500, 503 busy.
const OLLAMA_ERRORS: &[&str] = &["400", "404", "408", "500", "503"];

/// `POST /api/embed` (Ollama).
pub(crate) fn ollama_embed() -> Value {
    post(
        "Embed inputs (Ollama): L2-normalized vectors",
        json!({"type": "object", "required": ["model"], "properties": {
            "model": {"type": "string"},
            "input": {"oneOf": [{"type": "string"},
                {"type": "array", "items": {"type": "string"}}]},
            "truncate": {"type": "boolean", "default": true},
            "dimensions": {"type": "integer"},
            "keep_alive": {"oneOf": [{"type": "string"}, {"type": "number"}],
                "description": "accepted and ignored (models stay loaded)"},
            "options": {"type": "object", "description": "accepted and ignored"}
        }}),
        json!({"type": "object", "required": ["model", "embeddings"], "properties": {
            "model": {"type": "string"}, "embeddings": matrix(),
            "total_duration": {"type": "integer"}, "load_duration": {"type": "integer"},
            "prompt_eval_count": {"type": "integer"}}}),
        Shape::Ollama,
        OLLAMA_ERRORS,
    )
}

/// `POST /api/embeddings` (Ollama, legacy).
pub(crate) fn ollama_embeddings() -> Value {
    post(
        "Embed one prompt (Ollama's legacy route): the model's own output",
        json!({"type": "object", "required": ["model"], "properties": {
            "model": {"type": "string", "minLength": 1}, "prompt": {"type": "string"},
            "keep_alive": {"oneOf": [{"type": "string"}, {"type": "number"}]},
            "options": {"type": "object"}
        }}),
        json!({"type": "object", "required": ["embedding"], "properties": {
            "embedding": {"type": "array", "items": {"type": "number"}}}}),
        Shape::Ollama,
        OLLAMA_ERRORS,
    )
}

fn ollama_details() -> Value {
    json!({"type": "object", "properties": {
        "format": {"type": "string"}, "family": {"type": "string"},
        "quantization_level": {"type": "string"},
        "context_length": {"type": "integer"}, "embedding_length": {"type": "integer"}}})
}

/// `GET /api/tags` (Ollama).
pub(crate) fn ollama_tags() -> Value {
    get(
        "The served embedding models (Ollama's list)",
        "application/json",
        json!({"type": "object", "required": ["models"], "properties": {
            "models": {"type": "array", "items": {"type": "object",
                "required": ["name", "model"], "properties": {
                "name": {"type": "string"}, "model": {"type": "string"},
                "modified_at": {"type": "string"}, "size": {"type": "integer"},
                "details": ollama_details(),
                "capabilities": {"type": "array", "items": {"type": "string"}}}}}}}),
    )
}

/// `POST /api/show` (Ollama).
pub(crate) fn ollama_show() -> Value {
    post(
        "A served embedding model's details (Ollama)",
        json!({"type": "object", "anyOf": [{"required": ["model"]}, {"required": ["name"]}],
            "properties": {
            "model": {"type": "string", "minLength": 1}, "name": {"type": "string", "minLength": 1},
            "verbose": {"type": "boolean"}}}),
        json!({"type": "object", "required": ["details", "model_info"], "properties": {
            "details": ollama_details(), "model_info": {"type": "object"},
            "capabilities": {"type": "array", "items": {"type": "string"}}}}),
        Shape::Ollama,
        &["400", "404", "408"],
    )
}

/// `GET /api/version` (Ollama).
pub(crate) fn ollama_version() -> Value {
    get(
        "This server's version",
        "application/json",
        json!({"type": "object", "required": ["version"],
            "properties": {"version": {"type": "string"}}}),
    )
}

/// `GET /info`.
pub(crate) fn info() -> Value {
    get(
        "Models and limits",
        "application/json",
        json!({"type": "object", "required": ["model_id", "max_input_length",
            "max_batch_tokens", "max_client_batch_size", "version", "models"]}),
    )
}

/// `GET /health` and `GET /ping`.
pub(crate) fn health() -> Value {
    json!({"summary": "200 while serving, 503 once stopping",
        "responses": {"200": {"description": "OK"}, "503": {"description": "stopping",
            "content": {"application/json": {"schema": tei_error()}}}}})
}

/// `GET /metrics`.
pub(crate) fn metrics() -> Value {
    get(
        "Prometheus metrics",
        "text/plain",
        json!({"type": "string"}),
    )
}

/// `GET /openapi.json`.
pub(crate) fn openapi() -> Value {
    get(
        "This document",
        "application/json",
        json!({"type": "object"}),
    )
}

/// A route's operation with its security: routes of [`Access::Key`] (and
/// `/metrics`) take the bearer key when the server has keys, and answer 401
/// in the route's error body without one.
fn secured(r: &Route) -> Value {
    let mut op = (r.documentation)();
    let security = match r.access {
        Access::Public => json!([]),
        // Without a key when the server runs with --metrics-public.
        Access::Metrics => json!([{"bearer": []}, {}]),
        Access::Key => json!([{"bearer": []}]),
    };
    if r.access != Access::Public {
        let shape = match r.dialect {
            Dialect::Tei => Shape::Tei,
            Dialect::OpenAi => Shape::OpenAi,
            Dialect::Cohere => Shape::Cohere,
            Dialect::Ollama => Shape::Ollama,
        };
        if let Some(resp) = op.get_mut("responses").and_then(Value::as_object_mut) {
            resp.extend(errors(shape, &["401"]));
        }
    }
    op["security"] = security;
    op
}

/// The document of `routes`: each row's documentation under its path and
/// (lower-case) method, and the bearer security scheme of `--api-key`.
pub fn document(routes: &[Route]) -> Value {
    let mut paths = Map::new();
    for r in routes {
        let item = paths
            .entry(r.path)
            .or_insert_with(|| Value::Object(Map::new()));
        if let Some(o) = item.as_object_mut() {
            o.insert(r.method.to_ascii_lowercase(), secured(r));
        }
    }
    json!({
        "openapi": "3.0.3",
        "info": {
            "title": "embd serve",
            "version": crate::VERSION,
            "description": "Sentence embeddings and reranking over HTTP: \
                text-embeddings-inference's routes, OpenAI's /v1/embeddings, the \
                Jina / Cohere /v1/rerank, Cohere's /v2/rerank, /v2/embed and /v1/embed, \
                Ollama's /api/embed (see docs/SERVER.md)."
        },
        "paths": paths,
        "components": {"securitySchemes": {"bearer": {"type": "http", "scheme": "bearer",
            "description": "One of the server's --api-key keys; needed only when it has \
                keys"}}},
    })
}
