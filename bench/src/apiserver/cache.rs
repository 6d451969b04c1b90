//! What the API server's watch cache costs: the growth of the API server's
//! resident memory per cached object (its RSS before and after creating
//! `objects` ConfigMaps, divided by their number, and compared with the
//! size of one ConfigMap's JSON as the server returns it), and the latency
//! of a list of all of them from the cache (`resourceVersion=0`, no store
//! read). Run once per store, after the timed workloads.

use std::time::{Duration, Instant};

use serde::Serialize;

use super::answers;
use super::collection;
use super::error::{ApiError, WrongAnswer};
use super::http::Connection;
use super::prepare::{create, expect_created};
use crate::run_spec::new_histogram;
use crate::servers::ServerKind;

/// The namespace the cached objects go into; nothing else is there.
const NAMESPACE: &str = "bench-cache";
/// Concurrent creators.
const FILLERS: usize = 16;
/// Lists of the whole namespace timed, one at a time.
const LISTS: usize = 30;
/// Lets the server finish what the creates started (watch events, the
/// controllers' pass) before its RSS is read again.
const SETTLE: Duration = Duration::from_secs(3);

#[derive(Debug, Clone, Serialize)]
pub struct CacheStats {
    pub backend: ServerKind,
    pub objects: usize,
    /// One ConfigMap's JSON as a get returns it.
    pub json_bytes: usize,
    pub rss_before_kb: u64,
    pub rss_after_kb: u64,
    pub rss_per_object_bytes: f64,
    /// RSS per object over its JSON size.
    pub rss_ratio: f64,
    pub list_p50_us: u64,
    pub list_p99_us: u64,
}

/// Fills the namespace, reading the API server's RSS (`pid`) around it,
/// then times lists of it from the cache.
pub async fn measure(
    backend: ServerKind,
    port: u16,
    pid: u32,
    timeout: Duration,
    objects: usize,
) -> Result<CacheStats, ApiError> {
    let mut http = Connection::new(port, timeout);
    let answer = http
        .post("/api/v1/namespaces", answers::namespace(NAMESPACE))
        .await?;
    expect_created(&answer, format!("create namespace {NAMESPACE}"))?;
    tokio::time::sleep(SETTLE).await;
    let rss_before_kb = rss_kb(pid)?;
    fill(port, timeout, objects).await?;
    let path = format!("{}?resourceVersion=0", collection(NAMESPACE));
    // A consistent list first: the cache holds every object after it.
    let answer = http.get(&collection(NAMESPACE)).await?;
    check_count(&answer, objects)?;
    tokio::time::sleep(SETTLE).await;
    let rss_after_kb = rss_kb(pid)?;
    let one = http
        .get(&format!("{}/item-00000", collection(NAMESPACE)))
        .await?;
    answers::expect_status(&one, hyper::StatusCode::OK).map_err(|source| ApiError::Wrong {
        what: "get one cached ConfigMap".into(),
        source,
    })?;
    let json_bytes = one.body.len();
    let mut latency = new_histogram();
    for i in 0..LISTS {
        let started = Instant::now();
        let answer = http.get(&path).await?;
        let micros = started.elapsed().as_micros().max(1) as u64;
        match i {
            0 => check_count(&answer, objects)?,
            _ => answers::expect_status(&answer, hyper::StatusCode::OK).map_err(|source| {
                ApiError::Wrong {
                    what: format!("list {NAMESPACE} from the cache"),
                    source,
                }
            })?,
        }
        let _ = latency.record(micros);
    }
    let grown = rss_after_kb.saturating_sub(rss_before_kb) as f64 * 1024.0;
    let per_object = grown / objects.max(1) as f64;
    Ok(CacheStats {
        backend,
        objects,
        json_bytes,
        rss_before_kb,
        rss_after_kb,
        rss_per_object_bytes: per_object,
        rss_ratio: per_object / json_bytes.max(1) as f64,
        list_p50_us: latency.value_at_quantile(0.5),
        list_p99_us: latency.value_at_quantile(0.99),
    })
}

async fn fill(port: u16, timeout: Duration, objects: usize) -> Result<(), ApiError> {
    let fillers = (0..FILLERS).map(|first| async move {
        let mut http = Connection::new(port, timeout);
        for i in (first..objects).step_by(FILLERS) {
            create(&mut http, NAMESPACE, &format!("item-{i:05}")).await?;
        }
        Ok::<_, ApiError>(())
    });
    for result in futures::future::join_all(fillers).await {
        result?;
    }
    Ok(())
}

fn check_count(answer: &super::http::Answer, want: usize) -> Result<(), ApiError> {
    let wrong = |source| ApiError::Wrong {
        what: format!("list {NAMESPACE}"),
        source,
    };
    let items = answers::check_list(answer, want).map_err(wrong)?;
    match items == want {
        true => Ok(()),
        false => Err(wrong(WrongAnswer::Field {
            field: "the number of items",
            got: items.to_string(),
            want: want.to_string(),
        })),
    }
}

/// The resident set size of process `pid`, in KiB (`VmRSS`).
fn rss_kb(pid: u32) -> Result<u64, ApiError> {
    let path = format!("/proc/{pid}/status");
    let status = std::fs::read_to_string(&path).map_err(|source| ApiError::Rss {
        path: path.clone(),
        source,
    })?;
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .ok_or(ApiError::Rss {
            path,
            source: std::io::Error::other("no VmRSS line"),
        })
}

/// The printed lines: one per store.
pub fn table(stats: &[CacheStats]) -> String {
    let mut out = String::from(
        "cache    objects  json B/object  RSS before  RSS after  RSS B/object  RSS/json  list-all p50 ms  p99 ms\n",
    );
    for s in stats {
        out.push_str(&format!(
            "{:<8} {:>7} {:>14} {:>8} MB {:>7} MB {:>13.0} {:>9.2} {:>16.1} {:>7.1}\n",
            s.backend.to_string(),
            s.objects,
            s.json_bytes,
            s.rss_before_kb / 1024,
            s.rss_after_kb / 1024,
            s.rss_per_object_bytes,
            s.rss_ratio,
            s.list_p50_us as f64 / 1000.0,
            s.list_p99_us as f64 / 1000.0,
        ));
    }
    out
}
