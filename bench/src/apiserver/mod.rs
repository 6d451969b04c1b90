//! The API server workloads: a `capstan-apiserver` in front of each store
//! under test (capstan-store and a real etcd), then, with the same number
//! of clients on both, get one ConfigMap, a consistent list of a
//! namespace of them, and creates. The API server binary is the same on
//! both, so the capstan/etcd ratio isolates the store behind it.
//!
//! - [`process`]: the API server as a child process (killed on drop);
//! - [`http`]: hyper's pooled client over kept-alive connections;
//! - [`answers`]: the objects sent and the checks of every answer;
//! - [`prepare`]: the untimed setup (namespaces, the objects read);
//! - [`run`]: one timed run of one request kind;
//! - [`verify`]: checks of the server's state after the creates;
//! - [`table`]: ratios and the printed table;
//! - [`rbac`]: the `--api-rbac` variant (RBAC on, clients with a token);
//! - [`audit`]: the `--api-audit-level` variant (every request audited);
//! - [`webhook`]: the `--api-webhook` variant (a no-op mutating webhook on creates);
//! - this file: the order of it all and the checks it records.

mod answers;
pub mod audit;
mod cache;
pub mod encryption;
mod error;
pub use error::ApiError;
pub mod http;
mod prepare;
pub(crate) mod process;
pub mod rbac;
mod run;
mod table;
mod verify;
pub mod webhook;

use std::fmt;
use std::path::Path;
use std::time::Duration;

use hdrhistogram::Histogram;
use serde::Serialize;

use crate::checks::Checks;
use crate::servers::{ServerKind, ServerProcess};
pub use cache::{table as cache_table, CacheStats};
use http::Connection;
use process::ApiProcess;
pub use table::{ratios, table, ApiRatio};

/// The get workload reads this ConfigMap.
const GET_NAMESPACE: &str = "default";
const GET_NAME: &str = "bench-target";
/// The list workload lists this namespace, which holds nothing else.
const LIST_NAMESPACE: &str = "bench";
/// Creates go here, not into the listed namespace, so lists stay the same
/// size on both backends whatever each one's create rate was.
const CREATE_NAMESPACE: &str = "bench-creates";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ApiOp {
    Get,
    List,
    Create,
}

impl fmt::Display for ApiOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ApiOp::Get => "get",
            ApiOp::List => "list",
            ApiOp::Create => "create",
        })
    }
}

/// The settings every API server run shares.
#[derive(Debug, Clone)]
pub struct ApiConfig {
    pub clients: usize,
    pub duration: Duration,
    pub list_size: usize,
    /// ConfigMaps cached for the watch cache's figures; 0 skips them.
    pub cache_objects: usize,
    pub request_timeout: Duration,
    pub progress: bool,
}

/// One timed run.
pub struct ApiSpec {
    pub backend: ServerKind,
    pub op: ApiOp,
    pub clients: usize,
    pub duration: Duration,
    pub list_size: usize,
    pub progress: bool,
}

impl ApiSpec {
    fn label(&self) -> String {
        format!(
            "apiserver on {} {} clients={}",
            self.backend, self.op, self.clients
        )
    }
}

/// Its result.
#[derive(Debug, Clone, Serialize)]
pub struct ApiStats {
    pub backend: ServerKind,
    pub request: ApiOp,
    pub clients: usize,
    /// Requests answered as expected; only these are timed.
    pub ok: u64,
    /// Requests with no answer or a wrong one.
    pub errors: u64,
    pub elapsed_s: f64,
    pub ops_per_sec: f64,
    pub mean_us: f64,
    pub p50_us: u64,
    pub p99_us: u64,
    pub p999_us: u64,
    pub max_us: u64,
    /// List: the ConfigMaps in the listed namespace.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub list_size: Option<usize>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub error_samples: Vec<String>,
}

impl ApiStats {
    fn new(
        spec: &ApiSpec,
        ok: u64,
        errors: u64,
        error_samples: Vec<String>,
        elapsed: Duration,
        latency: &Histogram<u64>,
    ) -> ApiStats {
        let seconds = elapsed.as_secs_f64();
        let empty = latency.is_empty();
        let quantile = |q| {
            if empty {
                0
            } else {
                latency.value_at_quantile(q)
            }
        };
        ApiStats {
            backend: spec.backend,
            request: spec.op,
            clients: spec.clients,
            ok,
            errors,
            elapsed_s: seconds,
            ops_per_sec: if seconds > 0.0 {
                ok as f64 / seconds
            } else {
                0.0
            },
            mean_us: if empty { 0.0 } else { latency.mean() },
            p50_us: quantile(0.5),
            p99_us: quantile(0.99),
            p999_us: quantile(0.999),
            max_us: if empty { 0 } else { latency.max() },
            list_size: (spec.op == ApiOp::List).then_some(spec.list_size),
            error_samples,
        }
    }
}

fn collection(namespace: &str) -> String {
    format!("/api/v1/namespaces/{namespace}/configmaps")
}

/// An API server in front of one store under test.
pub struct Backend {
    pub kind: ServerKind,
    process: ApiProcess,
    /// False once it failed to prepare or stopped running.
    usable: bool,
}

/// Starts an API server on each store, recording whether each came up.
/// On the main thread, like the stores (see `ApiProcess::start`).
pub fn start_backends(
    binary: &Path,
    servers: &[ServerProcess],
    timeout: Duration,
    checks: &mut Checks,
) -> Vec<Backend> {
    let mut backends = Vec::new();
    for server in servers {
        let kind = server.kind;
        let name = format!("{kind}: capstan-apiserver on it starts and is ready");
        match ApiProcess::start(binary, &server.endpoint(), timeout) {
            Ok(process) => {
                checks.record(name, true, format!("on port {}", process.port));
                backends.push(Backend {
                    kind,
                    process,
                    usable: true,
                });
            }
            Err(err) => {
                checks.record(name, false, err.to_string());
            }
        }
    }
    backends
}

/// Prepares every backend, then runs each request kind on each backend in
/// turn, so one kind's runs are next to each other in time and the
/// machine's noise affects both alike. Reads go first, on stores not yet
/// grown by the creates; the watch cache's figures come last.
pub async fn run_all(
    config: &ApiConfig,
    backends: &mut [Backend],
    checks: &mut Checks,
    stats: &mut Vec<ApiStats>,
    cache_stats: &mut Vec<CacheStats>,
) {
    for backend in backends.iter_mut() {
        prepare_one(config, backend, checks).await;
    }
    for op in [ApiOp::Get, ApiOp::List, ApiOp::Create] {
        for backend in backends.iter_mut().filter(|b| b.usable) {
            run_one(config, op, backend, checks, stats).await;
        }
    }
    if config.cache_objects == 0 {
        return;
    }
    for backend in backends.iter_mut().filter(|b| b.usable) {
        measure_cache(config, backend, checks, cache_stats).await;
    }
}

async fn measure_cache(
    config: &ApiConfig,
    backend: &mut Backend,
    checks: &mut Checks,
    cache_stats: &mut Vec<CacheStats>,
) {
    if config.progress {
        eprintln!(
            "{}: measuring the watch cache with {} ConfigMaps",
            backend.kind, config.cache_objects
        );
    }
    let (port, pid) = (backend.process.port, backend.process.pid());
    let measured = cache::measure(
        backend.kind,
        port,
        pid,
        config.request_timeout,
        config.cache_objects,
    )
    .await;
    let label = format!("{}: watch cache measured", backend.kind);
    match measured {
        Ok(row) => {
            checks.record(
                label,
                true,
                format!("{:.0} B per object", row.rss_per_object_bytes),
            );
            cache_stats.push(row);
        }
        Err(err) => {
            checks.record(label, false, err.to_string());
        }
    }
}

async fn prepare_one(config: &ApiConfig, backend: &mut Backend, checks: &mut Checks) {
    if config.progress {
        eprintln!(
            "{}: preparing the API server workloads ({} ConfigMaps to list)",
            backend.kind, config.list_size
        );
    }
    let port = backend.process.port;
    let prepared = match prepare::prepare(port, config.request_timeout, config.list_size).await {
        Ok(()) => webhook::install(&mut Connection::new(port, config.request_timeout)).await,
        failed => failed,
    };
    backend.usable = checks.record(
        format!(
            "{}: apiserver workload data created and listed",
            backend.kind
        ),
        prepared.is_ok(),
        match prepared {
            Ok(()) => format!("a list sees all {} ConfigMaps", config.list_size),
            Err(err) => err.to_string(),
        },
    );
}

async fn run_one(
    config: &ApiConfig,
    op: ApiOp,
    backend: &mut Backend,
    checks: &mut Checks,
    stats: &mut Vec<ApiStats>,
) {
    let spec = ApiSpec {
        backend: backend.kind,
        op,
        clients: config.clients,
        duration: config.duration,
        list_size: config.list_size,
        progress: config.progress,
    };
    let label = spec.label();
    if config.progress {
        eprintln!("running {label} for {:?}", config.duration);
    }
    let port = backend.process.port;
    let outcome = match run::run(&spec, port, config.request_timeout).await {
        Ok(outcome) => outcome,
        Err(err) => {
            checks.record(format!("{label}: ran"), false, err.to_string());
            return;
        }
    };
    let row = &outcome.stats;
    if config.progress {
        eprintln!(
            "done {label}: {} ok, {} errors, {:.1} req/s, p50 {:.3} ms, p99 {:.3} ms",
            row.ok,
            row.errors,
            row.ops_per_sec,
            row.p50_us as f64 / 1000.0,
            row.p99_us as f64 / 1000.0
        );
    }
    checks.record(
        format!("{label}: every answer as expected"),
        row.errors == 0 && row.ok > 0,
        format!(
            "{} ok, {} errors {:?}",
            row.ok, row.errors, row.error_samples
        ),
    );
    if op == ApiOp::Create {
        let mut http = Connection::new(port, config.request_timeout);
        let verified = verify::check_creates(&mut http, &outcome.created, row.errors).await;
        checks.record(
            format!("{label}: acknowledged creates are stored"),
            verified.is_ok(),
            verified.unwrap_or_else(|err| err.to_string()),
        );
    }
    stats.push(outcome.stats);
    backend.usable = still_running(&label, backend, checks);
}

fn still_running(label: &str, backend: &mut Backend, checks: &mut Checks) -> bool {
    let status = backend.process.exit_status();
    checks.record(
        format!("{label}: the API server is still running"),
        status.is_none(),
        match status {
            None => "running".to_string(),
            Some(status) => format!(
                "exited: {status}; log tail:\n{}",
                backend.process.log_tail(20)
            ),
        },
    )
}

/// After every run: no panic or fatal error in any API server's log.
pub fn check_logs(backends: &[Backend], checks: &mut Checks) {
    for backend in backends {
        let alarms = backend.process.log_alarms();
        checks.record(
            format!(
                "{}: capstan-apiserver log shows no panic or fatal error",
                backend.kind
            ),
            alarms.is_empty(),
            match alarms.is_empty() {
                true => "clean".to_string(),
                false => alarms.join("\n"),
            },
        );
    }
}
