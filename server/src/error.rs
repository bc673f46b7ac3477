//! Errors of the HTTP API in the shapes clients read: TEI's flat
//! `{"error", "error_type"}` on the native routes, OpenAI's nested
//! `{"error": {"message", "type", "param", "code"}}` on OpenAI's routes,
//! Cohere's `{"message"}` on Cohere's, and Ollama's `{"error"}` (with
//! Ollama's status codes) on `/api/*`.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use embedder::ErrorKind;
use serde_json::json;

/// TEI's `error_type`, plus the transport errors TEI leaves to its HTTP stack.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ErrorType {
    /// A request that does not validate (422, or 413 for limits).
    Validation,
    /// The tokenizer refused the input (422).
    Tokenizer,
    /// The engine failed, or the model cannot do this (424).
    Backend,
    /// Over `--max-concurrent-requests` (429).
    Overloaded,
    /// No input (400).
    Empty,
    /// The body did not arrive in time (408).
    Timeout,
    /// No such route or method (404 / 405).
    NotFound,
    /// The server is stopping (503).
    Unavailable,
    /// No API key, or not one of the server's (401).
    Unauthorized,
}

impl ErrorType {
    /// The name in error bodies and metrics.
    pub fn name(self) -> &'static str {
        match self {
            ErrorType::Validation => "validation",
            ErrorType::Tokenizer => "tokenizer",
            ErrorType::Backend => "backend",
            ErrorType::Overloaded => "overloaded",
            ErrorType::Empty => "empty",
            ErrorType::Timeout => "timeout",
            ErrorType::NotFound => "not_found",
            ErrorType::Unavailable => "unavailable",
            ErrorType::Unauthorized => "unauthorized",
        }
    }

    /// Every type, for the metrics.
    pub const ALL: [ErrorType; 9] = [
        ErrorType::Validation,
        ErrorType::Tokenizer,
        ErrorType::Backend,
        ErrorType::Overloaded,
        ErrorType::Empty,
        ErrorType::Timeout,
        ErrorType::NotFound,
        ErrorType::Unavailable,
        ErrorType::Unauthorized,
    ];
}

/// Which body shape an error takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    /// TEI's flat body.
    Tei,
    /// OpenAI's nested body.
    OpenAi,
    /// Cohere's body (`/v2/rerank`, `/v1/embed`, `/v2/embed`).
    Cohere,
    /// Ollama's body `{"error"}`, with Ollama's statuses: what TEI answers
    /// 413, 415 or 422 is a 400 there, a backend failure a 500, overload a
    /// 503.
    Ollama,
}

/// An error answer: status, type, message, and the body shape.
#[derive(Debug, Clone)]
pub struct ApiError {
    /// HTTP status.
    pub status: StatusCode,
    /// TEI's error type.
    pub kind: ErrorType,
    /// What went wrong, for a person.
    pub message: String,
    /// The body's shape.
    pub dialect: Dialect,
    /// The answer closes the connection (`Connection: close`): the request's
    /// body was not read to its end.
    pub close: bool,
}

impl ApiError {
    /// An error with TEI's body.
    pub fn new(status: StatusCode, kind: ErrorType, message: impl Into<String>) -> Self {
        ApiError {
            status,
            kind,
            message: message.into(),
            dialect: Dialect::Tei,
            close: false,
        }
    }

    /// The same error, closing the connection after the answer.
    pub fn closing(mut self) -> Self {
        self.close = true;
        self
    }

    /// 422 validation.
    pub fn validation(message: impl Into<String>) -> Self {
        Self::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            ErrorType::Validation,
            message,
        )
    }

    /// 413 validation (a limit).
    pub fn too_large(message: impl Into<String>) -> Self {
        Self::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            ErrorType::Validation,
            message,
        )
    }

    /// 400 empty.
    pub fn empty(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, ErrorType::Empty, message)
    }

    /// 404 not found (Ollama's unknown model).
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, ErrorType::NotFound, message)
    }

    /// 424 backend.
    pub fn backend(message: impl Into<String>) -> Self {
        Self::new(StatusCode::FAILED_DEPENDENCY, ErrorType::Backend, message)
    }

    /// The same error in `dialect`'s shape.
    pub fn dialect(mut self, dialect: Dialect) -> Self {
        self.dialect = dialect;
        self
    }

    /// An engine error: limits are 413, bad arguments 422, the rest 424.
    pub fn from_engine(e: &embedder::Error) -> Self {
        match e.kind() {
            ErrorKind::LimitExceeded => Self::too_large(e.to_string()),
            ErrorKind::InvalidArgument => Self::validation(e.to_string()),
            _ => Self::backend(e.to_string()),
        }
    }

    /// OpenAI's `type` for this status.
    fn openai_type(&self) -> &'static str {
        match self.status.as_u16() {
            429 => "rate_limit_error",
            s if s >= 500 || s == 424 => "server_error",
            _ => "invalid_request_error",
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = match (self.dialect, self.status.as_u16()) {
            (Dialect::Ollama, 413 | 415 | 422) => StatusCode::BAD_REQUEST,
            (Dialect::Ollama, 424) => StatusCode::INTERNAL_SERVER_ERROR,
            (Dialect::Ollama, 429) => StatusCode::SERVICE_UNAVAILABLE,
            _ => self.status,
        };
        let body = match self.dialect {
            Dialect::Tei => json!({"error": self.message, "error_type": self.kind.name()}),
            Dialect::OpenAi => json!({"error": {
                "message": self.message,
                "type": self.openai_type(),
                "param": null,
                "code": self.kind.name(),
            }}),
            Dialect::Cohere => json!({"message": self.message}),
            Dialect::Ollama => json!({"error": self.message}),
        };
        let mut r = (status, axum::Json(body)).into_response();
        if self.close {
            r.headers_mut().insert(
                axum::http::header::CONNECTION,
                axum::http::HeaderValue::from_static("close"),
            );
        }
        r.extensions_mut().insert(self.kind);
        r
    }
}
