//! [`Route`]: one row of the server's route table, [`crate::routes::ROUTES`].
//! The router, the OpenAPI document ([`crate::openapi::document`]), CORS
//! ([`crate::cors`]) and the API-key check ([`crate::auth`]) all read the
//! same rows, so a new route is one row (and its handler and documentation
//! functions). This module is a leaf: the modules that read the rows depend
//! on it, not on each other.

use std::sync::Arc;

use axum::http::Method;
use axum::routing::{MethodFilter, MethodRouter};
use serde_json::Value;

use crate::error::Dialect;
use crate::AppState;

/// Who may call a route when the server has API keys (`--api-key`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// Anyone (`/health`, `/ping`: load balancers and orchestrators probe them).
    Public,
    /// Anyone with `--metrics-public`, else a key holder (`/metrics`).
    Metrics,
    /// A key holder.
    Key,
}

/// One route: its method, path, handler and OpenAPI operation.
#[derive(Clone, Copy)]
pub struct Route {
    /// `"GET"` or `"POST"`.
    pub method: &'static str,
    /// The path, as the router matches it (`/v1/embeddings`).
    pub path: &'static str,
    /// The handler, answering `filter` (the route's method).
    pub handler: fn(filter: MethodFilter) -> MethodRouter<Arc<AppState>>,
    /// The OpenAPI operation object (`summary`, `requestBody`, `responses`)
    /// of `/openapi.json`'s `paths[path][method]`.
    pub documentation: fn() -> Value,
    /// The error body the route's clients read (also for a refused key).
    pub dialect: Dialect,
    /// Who may call it when the server has API keys.
    pub access: Access,
}

impl Route {
    /// The method as a router filter.
    pub fn filter(&self) -> MethodFilter {
        match self.method {
            "GET" => MethodFilter::GET,
            _ => MethodFilter::POST,
        }
    }
}

/// A route's method (`"GET"`, `"POST"`) as an `http` method.
pub fn method_of(m: &str) -> Method {
    match m {
        "GET" => Method::GET,
        _ => Method::POST,
    }
}
