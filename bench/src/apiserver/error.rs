//! What can go wrong around the API server workloads: starting the API
//! server, talking HTTP to it, and answers that are not what the request
//! should have produced (the last kind is counted per request, not fatal).

use std::io;
use std::path::PathBuf;
use std::process::ExitStatus;
use std::time::Duration;

use hyper::{Method, StatusCode};

/// Failures that stop an API server from being started or a run from
/// being made.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error("create a temporary directory for capstan-apiserver: {0}")]
    TempDir(#[source] io::Error),
    #[error("set up the RBAC variant: {0}")]
    Rbac(String),
    #[error("set up the webhook variant: {0}")]
    Webhook(String),
    #[error("find a free port for capstan-apiserver: {0}")]
    Port(#[source] io::Error),
    #[error("create the log {}: {source}", path.display())]
    Log {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("start {}: {source}", binary.display())]
    Spawn {
        binary: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("capstan-apiserver exited ({status}) before it was ready; log:\n{log}")]
    Exited { status: ExitStatus, log: String },
    #[error("capstan-apiserver not ready within {timeout:?}; log:\n{log}")]
    NotReady { timeout: Duration, log: String },
    #[error("{method} {path}: {source}")]
    Transport {
        method: Method,
        path: String,
        #[source]
        source: TransportError,
    },
    #[error("{what}: {source}")]
    Wrong {
        what: String,
        #[source]
        source: WrongAnswer,
    },
    #[error("read {path}: {source}")]
    Rss {
        path: String,
        #[source]
        source: io::Error,
    },
    #[error("merge latency histograms: {0}")]
    Histogram(#[from] hdrhistogram::AdditionError),
}

/// Why a request got no HTTP answer at all.
#[derive(Debug, thiserror::Error)]
pub enum TransportError {
    #[error("build the request: {0}")]
    Build(#[from] hyper::http::Error),
    #[error("connect: {0}")]
    Connect(#[source] io::Error),
    #[error("{0}")]
    Http(#[from] hyper::Error),
    #[error("no answer within {0:?}")]
    Timeout(Duration),
}

/// An answer that came back but is not what the request should produce.
#[derive(Debug, thiserror::Error)]
pub enum WrongAnswer {
    #[error("HTTP {got} (wanted {want}): {body}")]
    Status {
        got: StatusCode,
        want: StatusCode,
        body: String,
    },
    #[error("undecodable JSON: {0}")]
    Json(#[from] serde_json::Error),
    #[error("{field} is {got:?}, wanted {want}")]
    Field {
        field: &'static str,
        got: String,
        want: String,
    },
}
