//! The API server workloads: a `capstan-apiserver` in front of each store
//! under test (capstan-store and a real etcd), then get one ConfigMap, a
//! consistent list of a namespace of them, and creates, each with the same
//! number of clients on both, so the capstan/etcd ratio isolates the store
//! under the same API server.
//!
//! - [`process`]: the API server as a child process (killed on drop);
//! - [`http`]: a minimal kept-alive HTTP/1.1 client;
//! - this file: preparing the data, the timed runs and their checks.

mod http;
mod process;

use std::fmt;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use serde::Serialize;
use serde_json::{json, Value};

use crate::servers::ServerKind;
use crate::workload::new_histogram;
pub use process::ApiProcess;

/// Where the workloads' objects live.
const WORK_NAMESPACE: &str = "bench";
const LIST_NAMESPACE: &str = "bench-list";
/// Clients filling the list namespace (not timed).
const FILLERS: usize = 16;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Request {
    Get,
    List,
    Create,
}

impl fmt::Display for Request {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Request::Get => "get",
            Request::List => "list",
            Request::Create => "create",
        })
    }
}

/// One timed run.
pub struct ApiSpec {
    pub backend: ServerKind,
    pub port: u16,
    pub request: Request,
    pub clients: usize,
    pub duration: Duration,
    pub list_size: usize,
}

/// Its result.
#[derive(Debug, Clone, Serialize)]
pub struct ApiStats {
    pub backend: ServerKind,
    pub request: Request,
    pub clients: usize,
    pub ok: u64,
    pub errors: u64,
    pub ops_per_sec: f64,
    pub p50_us: u64,
    pub p99_us: u64,
    /// The first wrong answer, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_error: Option<String>,
}

fn configmap(name: &str) -> Vec<u8> {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name},
           "data": {"payload": "x".repeat(200)}})
    .to_string()
    .into_bytes()
}

fn collection(namespace: &str) -> String {
    format!("/api/v1/namespaces/{namespace}/configmaps")
}

/// Creates the namespaces, the ConfigMap the get workload reads, and
/// `list_size` ConfigMaps for the list workload.
pub async fn prepare(port: u16, list_size: usize) -> Result<(), String> {
    let mut conn = http::Connection::open(port).await?;
    for namespace in [WORK_NAMESPACE, LIST_NAMESPACE] {
        let body =
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}});
        let (code, answer) = conn
            .request(
                "POST",
                "/api/v1/namespaces",
                Some(body.to_string().as_bytes()),
            )
            .await?;
        if code != 201 {
            return Err(format!(
                "create namespace {namespace}: {code} {}",
                String::from_utf8_lossy(&answer)
            ));
        }
    }
    expect_status(
        conn.request(
            "POST",
            &collection(WORK_NAMESPACE),
            Some(&configmap("target")),
        )
        .await?,
        201,
    )?;
    let fillers = (0..FILLERS).map(|f| async move {
        let mut conn = http::Connection::open(port).await?;
        for i in (f..list_size).step_by(FILLERS) {
            let answer = conn
                .request(
                    "POST",
                    &collection(LIST_NAMESPACE),
                    Some(&configmap(&format!("item-{i}"))),
                )
                .await?;
            expect_status(answer, 201)?;
        }
        Ok::<_, String>(())
    });
    for result in futures::future::join_all(fillers).await {
        result?;
    }
    Ok(())
}

fn expect_status((code, body): (u16, Vec<u8>), want: u16) -> Result<Vec<u8>, String> {
    match code == want {
        true => Ok(body),
        false => Err(format!(
            "HTTP {code} (wanted {want}): {}",
            String::from_utf8_lossy(&body)
                .chars()
                .take(300)
                .collect::<String>()
        )),
    }
}

/// Checks one answer as far as is cheap; the first answer of each client
/// is checked in full (a list's item count).
fn check(spec: &ApiSpec, answer: (u16, Vec<u8>), first: bool) -> Result<(), String> {
    match spec.request {
        Request::Get => {
            let body = expect_status(answer, 200)?;
            contains(&body, b"\"name\":\"target\"")
        }
        Request::Create => {
            let body = expect_status(answer, 201)?;
            contains(&body, b"\"resourceVersion\"")
        }
        Request::List if first => {
            let body = expect_status(answer, 200)?;
            let list: Value = serde_json::from_slice(&body).map_err(|e| e.to_string())?;
            let items = list["items"].as_array().map_or(0, Vec::len);
            match items >= spec.list_size {
                true => Ok(()),
                false => Err(format!(
                    "a list of {items} items, wanted {}",
                    spec.list_size
                )),
            }
        }
        Request::List => expect_status(answer, 200).map(drop),
    }
}

fn contains(body: &[u8], needle: &[u8]) -> Result<(), String> {
    match body.windows(needle.len()).any(|w| w == needle) {
        true => Ok(()),
        false => Err(format!("answer lacks {}", String::from_utf8_lossy(needle))),
    }
}

/// One client's share of a run.
struct ClientResult {
    latency_us: Histogram<u64>,
    ok: u64,
    errors: u64,
    first_error: Option<String>,
}

async fn client(spec: &ApiSpec, id: usize, deadline: Instant) -> Result<ClientResult, String> {
    let mut conn = http::Connection::open(spec.port).await?;
    let mut result = ClientResult {
        latency_us: new_histogram(),
        ok: 0,
        errors: 0,
        first_error: None,
    };
    let mut i = 0;
    while Instant::now() < deadline {
        let started = Instant::now();
        let answer = match spec.request {
            Request::Get => {
                conn.request(
                    "GET",
                    &format!("{}/target", collection(WORK_NAMESPACE)),
                    None,
                )
                .await?
            }
            Request::List => {
                conn.request("GET", &collection(LIST_NAMESPACE), None)
                    .await?
            }
            Request::Create => {
                let name = format!("c{id}-{i}-{}", spec.backend);
                conn.request("POST", &collection(WORK_NAMESPACE), Some(&configmap(&name)))
                    .await?
            }
        };
        let micros = started.elapsed().as_micros().max(1) as u64;
        match check(spec, answer, i == 0) {
            Ok(()) => {
                result.ok += 1;
                let _ = result.latency_us.record(micros);
            }
            Err(err) => {
                result.errors += 1;
                result.first_error.get_or_insert(err);
            }
        }
        i += 1;
    }
    Ok(result)
}

pub async fn run(spec: ApiSpec) -> Result<ApiStats, String> {
    let started = Instant::now();
    let deadline = started + spec.duration;
    let clients = (0..spec.clients).map(|id| client(&spec, id, deadline));
    let mut latency = new_histogram();
    let (mut ok, mut errors, mut first_error) = (0, 0, None);
    for result in futures::future::join_all(clients).await {
        let result = result?;
        latency.add(&result.latency_us).map_err(|e| e.to_string())?;
        ok += result.ok;
        errors += result.errors;
        first_error = first_error.or(result.first_error);
    }
    let seconds = started.elapsed().as_secs_f64();
    let quantile = |q| {
        if latency.is_empty() {
            0
        } else {
            latency.value_at_quantile(q)
        }
    };
    Ok(ApiStats {
        backend: spec.backend,
        request: spec.request,
        clients: spec.clients,
        ok,
        errors,
        ops_per_sec: ok as f64 / seconds,
        p50_us: quantile(0.5),
        p99_us: quantile(0.99),
        first_error,
    })
}

/// The results, capstan-store's rows with the ratio to etcd's.
pub fn table(stats: &[ApiStats]) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<8} {:>7} {:<8} {:>9} {:>10} {:>8} {:>8} {:>6} {:>9} {:>9}",
        "request",
        "clients",
        "store",
        "requests",
        "ops/s",
        "p50 ms",
        "p99 ms",
        "errors",
        "ops/s c/e",
        "p99 c/e"
    );
    for s in stats {
        let etcd = stats.iter().find(|e| {
            e.backend == ServerKind::Etcd && e.request == s.request && e.clients == s.clients
        });
        let ratio = |a: f64, b: f64| match (s.backend, etcd) {
            (ServerKind::Capstan, Some(_)) if b > 0.0 => format!("{:.2}x", a / b),
            _ => "-".into(),
        };
        let (etcd_ops, etcd_p99) = etcd.map_or((0.0, 0.0), |e| (e.ops_per_sec, e.p99_us as f64));
        let _ = writeln!(
            out,
            "{:<8} {:>7} {:<8} {:>9} {:>10.1} {:>8.3} {:>8.3} {:>6} {:>9} {:>9}",
            s.request.to_string(),
            s.clients,
            s.backend.name(),
            s.ok,
            s.ops_per_sec,
            s.p50_us as f64 / 1000.0,
            s.p99_us as f64 / 1000.0,
            s.errors,
            ratio(s.ops_per_sec, etcd_ops),
            ratio(s.p99_us as f64, etcd_p99)
        );
    }
    out
}
