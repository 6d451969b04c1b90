//! The workloads: concurrent clients sharing a small pool of connections,
//! each issuing one request at a time until the deadline, recording every
//! request's latency. After each workload its results are checked against
//! the server's state.

use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use etcd_client::{Client, ConnectOptions, GetOptions, KvClient};
use hdrhistogram::Histogram;
use serde::Serialize;

use crate::checks::Checks;
use crate::servers::ServerKind;

/// Upper bound on requests per client in one workload, whatever the duration.
const MAX_OPS_PER_CLIENT: u64 = 20_000_000;
/// Error messages kept per workload for the report.
const MAX_ERROR_SAMPLES: usize = 5;
/// Latencies are recorded in microseconds, from 1 µs to 5 minutes.
const HIST_MAX_US: u64 = 300_000_000;
/// All keys the benchmark writes live under this prefix.
pub const KEY_PREFIX: &str = "capstan-bench";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Workload {
    /// Puts of distinct keys.
    Put,
    /// Linearizable gets of one key.
    Get,
}

impl fmt::Display for Workload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Workload::Put => "put",
            Workload::Get => "get",
        })
    }
}

/// What one workload run is.
#[derive(Debug, Clone)]
pub struct RunSpec {
    pub server: ServerKind,
    pub endpoint: String,
    pub workload: Workload,
    pub clients: usize,
    pub max_conns: usize,
    pub duration: Duration,
    pub value_size: usize,
    pub request_timeout: Duration,
    pub progress: bool,
    /// Distinguishes the keys of this run from every other run's.
    pub run_id: usize,
}

impl RunSpec {
    pub fn label(&self) -> String {
        format!("{} {} clients={}", self.server, self.workload, self.clients)
    }

    fn run_prefix(&self) -> String {
        format!(
            "{KEY_PREFIX}/{:03}-{}-{}-c{}/",
            self.run_id, self.server, self.workload, self.clients
        )
    }
}

/// What a workload run measured.
pub struct RunOutcome {
    pub spec: RunSpec,
    pub conns: usize,
    pub ok: u64,
    pub errors: u64,
    pub error_samples: Vec<String>,
    pub elapsed: Duration,
    pub latency_us: Histogram<u64>,
}

/// One client's share of a run.
struct ClientResult {
    ok: u64,
    errors: u64,
    error_samples: Vec<String>,
    latency_us: Histogram<u64>,
    /// Put: the revision of every acknowledged put, in order.
    /// Get: the header revision of every read, in order.
    revisions: Vec<i64>,
    /// Get: reads that returned something other than the value written.
    wrong_reads: u64,
    wrong_samples: Vec<String>,
}

impl ClientResult {
    fn new() -> Self {
        ClientResult {
            ok: 0,
            errors: 0,
            error_samples: Vec::new(),
            latency_us: new_histogram(),
            revisions: Vec::new(),
            wrong_reads: 0,
            wrong_samples: Vec::new(),
        }
    }

    fn error(&mut self, message: String) {
        self.errors += 1;
        if self.error_samples.len() < MAX_ERROR_SAMPLES {
            self.error_samples.push(message);
        }
    }
}

pub fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, HIST_MAX_US, 3).expect("valid histogram bounds")
}

/// Counters the progress printer reads while a run goes.
#[derive(Default)]
struct Progress {
    ok: AtomicU64,
    errors: AtomicU64,
    done: AtomicBool,
}

/// Runs one workload and checks its results; returns its measurements.
pub async fn run(spec: RunSpec, checks: &mut Checks) -> Result<RunOutcome, String> {
    let label = spec.label();
    let conns = spec.clients.min(spec.max_conns);
    let pool = connect_pool(&spec.endpoint, conns, spec.request_timeout)
        .await
        .map_err(|err| format!("{label}: connect: {err}"))?;
    let prefix = spec.run_prefix();
    let value: Arc<Vec<u8>> = Arc::new(make_value(spec.value_size, spec.run_id));

    // Before the clients start: the store's revision (put), or the key the
    // get clients read (get).
    let mut admin = pool[0].clone();
    let (start_revision, get_key) = match spec.workload {
        Workload::Put => {
            let resp = within(spec.request_timeout, admin.get(prefix.clone(), None))
                .await
                .map_err(|err| format!("{label}: read the start revision: {err}"))?;
            (header_revision(resp.header()), None)
        }
        Workload::Get => {
            let key = format!("{prefix}key");
            let resp = within(
                spec.request_timeout,
                admin.put(key.clone(), value.to_vec(), None),
            )
            .await
            .map_err(|err| format!("{label}: write the key to read: {err}"))?;
            (header_revision(resp.header()), Some(key))
        }
    };

    let progress = Arc::new(Progress::default());
    let printer = spec.progress.then(|| {
        tokio::spawn(print_progress(
            label.clone(),
            spec.duration,
            progress.clone(),
        ))
    });

    let start = Instant::now();
    let deadline = start + spec.duration;
    let mut tasks = Vec::with_capacity(spec.clients);
    for client in 0..spec.clients {
        let kv = pool[client % conns].clone();
        let progress = progress.clone();
        let value = value.clone();
        let timeout = spec.request_timeout;
        let task = match &get_key {
            None => {
                let key_prefix = format!("{prefix}put/{client:05}/");
                tokio::spawn(put_client(
                    kv, key_prefix, value, deadline, timeout, progress,
                ))
            }
            Some(key) => tokio::spawn(get_client(
                kv,
                key.clone(),
                value,
                deadline,
                timeout,
                progress,
            )),
        };
        tasks.push(task);
    }
    // Every request is bounded by the request timeout, so the tasks end by
    // deadline + timeout; the margin only guards against a bug here.
    let join_limit = spec.duration + spec.request_timeout + Duration::from_secs(30);
    let joined = tokio::time::timeout(join_limit, futures::future::join_all(tasks)).await;
    let elapsed = start.elapsed();
    progress.done.store(true, Ordering::Relaxed);
    if let Some(printer) = printer {
        printer.abort();
    }
    let joined =
        joined.map_err(|_| format!("{label}: clients did not finish within {join_limit:?}"))?;

    let mut results = Vec::with_capacity(joined.len());
    for result in joined {
        results.push(result.map_err(|err| format!("{label}: client task failed: {err}"))?);
    }

    let mut outcome = RunOutcome {
        conns,
        ok: 0,
        errors: 0,
        error_samples: Vec::new(),
        elapsed,
        latency_us: new_histogram(),
        spec: spec.clone(),
    };
    for result in &results {
        outcome.ok += result.ok;
        outcome.errors += result.errors;
        outcome
            .latency_us
            .add(&result.latency_us)
            .map_err(|err| format!("{label}: merge histograms: {err}"))?;
        for sample in &result.error_samples {
            if outcome.error_samples.len() < MAX_ERROR_SAMPLES {
                outcome.error_samples.push(sample.clone());
            }
        }
    }

    checks.record(
        format!("{label}: every request succeeded"),
        outcome.errors == 0 && outcome.ok > 0,
        format!(
            "{} ok, {} failed{}",
            outcome.ok,
            outcome.errors,
            if outcome.error_samples.is_empty() {
                String::new()
            } else {
                format!("; e.g. {}", outcome.error_samples.join(" | "))
            }
        ),
    );
    match spec.workload {
        Workload::Put => {
            verify_puts(&spec, &mut admin, &prefix, start_revision, &results, checks).await
        }
        Workload::Get => verify_gets(&spec, start_revision, &results, checks),
    }
    Ok(outcome)
}

/// After a put run: the store holds exactly the acknowledged keys, and the
/// acknowledged revisions are unique, increasing per client, and exactly
/// the revisions after the start (nothing else writes meanwhile).
async fn verify_puts(
    spec: &RunSpec,
    admin: &mut KvClient,
    prefix: &str,
    start_revision: i64,
    results: &[ClientResult],
    checks: &mut Checks,
) {
    let label = spec.label();
    let acked: u64 = results.iter().map(|r| r.ok).sum();
    let put_prefix = format!("{prefix}put/");
    let counted = within(
        spec.request_timeout,
        admin.get(
            put_prefix.clone(),
            Some(GetOptions::new().with_prefix().with_count_only()),
        ),
    )
    .await;
    let (count_ok, count_detail, end_revision) = match counted {
        Ok(resp) => (
            u64::try_from(resp.count()).ok() == Some(acked),
            format!(
                "{} keys under {put_prefix}, {acked} puts acknowledged",
                resp.count()
            ),
            Some(header_revision(resp.header())),
        ),
        Err(err) => (false, format!("count range failed: {err}"), None),
    };
    checks.record(
        format!("{label}: key count equals acknowledged puts"),
        count_ok,
        count_detail,
    );

    let per_client: Vec<&[i64]> = results.iter().map(|r| r.revisions.as_slice()).collect();
    let duplicates = repeated_revisions(&per_client);
    checks.record(
        format!("{label}: put revisions are unique"),
        duplicates.is_none() && acked > 0,
        duplicates.unwrap_or_else(|| format!("{acked} distinct revisions")),
    );

    let disorder = first_disorder(&per_client);
    checks.record(
        format!("{label}: each client's put revisions increase"),
        disorder.is_none(),
        disorder.unwrap_or_else(|| format!("{} clients in order", results.len())),
    );

    let expected_last = start_revision + acked as i64;
    let gap = revision_gap(&per_client, start_revision, end_revision);
    checks.record(
        format!(
            "{label}: put revisions are exactly {}..={expected_last}",
            start_revision + 1
        ),
        gap.is_none(),
        gap.unwrap_or_else(|| format!("store revision afterwards {expected_last}")),
    );
}

/// After a get run: every read returned the value written before the run,
/// at a revision no older than that write, never going back per client.
fn verify_gets(spec: &RunSpec, write_revision: i64, results: &[ClientResult], checks: &mut Checks) {
    let label = spec.label();
    let wrong: u64 = results.iter().map(|r| r.wrong_reads).sum();
    let reads: u64 = results.iter().map(|r| r.ok).sum();
    let sample = results.iter().flat_map(|r| r.wrong_samples.iter()).next();
    checks.record(
        format!("{label}: every read returned the written value"),
        wrong == 0 && reads > 0,
        match sample {
            None => format!("{reads} reads"),
            Some(sample) => format!("{wrong} of {reads} reads wrong, e.g. {sample}"),
        },
    );

    let per_client: Vec<&[i64]> = results.iter().map(|r| r.revisions.as_slice()).collect();
    let problem = read_regression(&per_client, write_revision);
    checks.record(
        format!("{label}: read revisions never go back"),
        problem.is_none(),
        problem.unwrap_or_else(|| format!("all reads at revision >= {write_revision}")),
    );
}

/// Revisions acknowledged more than once, described; None if all differ.
fn repeated_revisions(per_client: &[&[i64]]) -> Option<String> {
    let mut all: Vec<i64> = per_client.iter().flat_map(|r| r.iter().copied()).collect();
    all.sort_unstable();
    let repeats: Vec<i64> = all
        .windows(2)
        .filter(|w| w[0] == w[1])
        .map(|w| w[0])
        .collect();
    (!repeats.is_empty()).then(|| {
        format!(
            "{} of {} acknowledgements repeat a revision, e.g. {:?}",
            repeats.len(),
            all.len(),
            &repeats[..repeats.len().min(5)]
        )
    })
}

/// The first place a client's acknowledged put revisions fail to increase.
fn first_disorder(per_client: &[&[i64]]) -> Option<String> {
    per_client
        .iter()
        .enumerate()
        .find_map(|(client, revisions)| {
            revisions
                .windows(2)
                .find(|w| w[1] <= w[0])
                .map(|w| format!("client {client}: revision {} after {}", w[1], w[0]))
        })
}

/// With nothing else writing, N acknowledged puts after `start` must hold
/// exactly revisions start+1..=start+N, and the store must be at start+N.
fn revision_gap(per_client: &[&[i64]], start: i64, end: Option<i64>) -> Option<String> {
    let mut all: Vec<i64> = per_client.iter().flat_map(|r| r.iter().copied()).collect();
    all.sort_unstable();
    all.dedup();
    let acked: usize = per_client.iter().map(|r| r.len()).sum();
    let expected_last = start + acked as i64;
    let exact = all.len() == acked
        && all.first().is_none_or(|&first| first == start + 1)
        && all.last().is_none_or(|&last| last == expected_last);
    let store_ok = end.is_none_or(|end| end == expected_last);
    if exact && store_ok {
        return None;
    }
    Some(format!(
        "start revision {start}, {acked} acknowledged puts with {} distinct revisions {:?}..={:?}, \
         store revision afterwards {}",
        all.len(),
        all.first(),
        all.last(),
        end.map_or("unknown".into(), |r| r.to_string())
    ))
}

/// The first read whose revision is below the write it must see or below
/// the same client's previous read.
fn read_regression(per_client: &[&[i64]], write_revision: i64) -> Option<String> {
    for (client, revisions) in per_client.iter().enumerate() {
        let mut previous = write_revision;
        for &revision in revisions.iter() {
            if revision < previous {
                return Some(format!(
                    "client {client}: read at revision {revision} after {previous} \
                     (the key was written at {write_revision})"
                ));
            }
            previous = revision;
        }
    }
    None
}

async fn put_client(
    mut kv: KvClient,
    key_prefix: String,
    value: Arc<Vec<u8>>,
    deadline: Instant,
    timeout: Duration,
    progress: Arc<Progress>,
) -> ClientResult {
    let mut result = ClientResult::new();
    let mut seq: u64 = 0;
    while seq < MAX_OPS_PER_CLIENT && Instant::now() < deadline {
        let key = format!("{key_prefix}{seq:010}");
        seq += 1;
        let started = Instant::now();
        let answer = within(timeout, kv.put(key, value.to_vec(), None)).await;
        let micros = started.elapsed().as_micros() as u64;
        match answer {
            Ok(resp) => {
                result.latency_us.saturating_record(micros.max(1));
                result.ok += 1;
                result.revisions.push(header_revision(resp.header()));
                progress.ok.fetch_add(1, Ordering::Relaxed);
            }
            Err(err) => {
                result.error(format!("put: {err}"));
                progress.errors.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
    result
}

async fn get_client(
    mut kv: KvClient,
    key: String,
    value: Arc<Vec<u8>>,
    deadline: Instant,
    timeout: Duration,
    progress: Arc<Progress>,
) -> ClientResult {
    let mut result = ClientResult::new();
    let mut count: u64 = 0;
    while count < MAX_OPS_PER_CLIENT && Instant::now() < deadline {
        count += 1;
        let started = Instant::now();
        // Linearizable: GetOptions default (no with_serializable()).
        let answer = within(timeout, kv.get(key.as_bytes(), None)).await;
        let micros = started.elapsed().as_micros() as u64;
        match answer {
            Ok(resp) => {
                result.latency_us.saturating_record(micros.max(1));
                result.ok += 1;
                result.revisions.push(header_revision(resp.header()));
                let kvs = resp.kvs();
                if kvs.len() != 1
                    || kvs[0].value() != value.as_slice()
                    || kvs[0].key() != key.as_bytes()
                {
                    result.wrong_reads += 1;
                    if result.wrong_samples.is_empty() {
                        result.wrong_samples.push(format!(
                            "{} kvs, first value {} bytes",
                            kvs.len(),
                            kvs.first().map_or(0, |kv| kv.value().len())
                        ));
                    }
                }
                progress.ok.fetch_add(1, Ordering::Relaxed);
            }
            Err(err) => {
                result.error(format!("get: {err}"));
                progress.errors.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
    result
}

/// Opens `conns` separate connections (each its own HTTP/2 channel) and
/// makes one request on each so connection set-up is not measured.
async fn connect_pool(
    endpoint: &str,
    conns: usize,
    timeout: Duration,
) -> Result<Vec<KvClient>, String> {
    let mut pool = Vec::with_capacity(conns);
    for _ in 0..conns {
        let options = ConnectOptions::new()
            .with_connect_timeout(Duration::from_secs(5))
            .with_timeout(timeout);
        let client = within(
            timeout,
            Client::connect(endpoint.split(',').collect::<Vec<_>>(), Some(options)),
        )
        .await
        .map_err(|err| err.to_string())?;
        let mut kv = client.kv_client();
        within(timeout, kv.get(format!("{KEY_PREFIX}/warm-up"), None))
            .await
            .map_err(|err| format!("first request: {err}"))?;
        pool.push(kv);
    }
    Ok(pool)
}

/// Runs a request with a time limit, flattening both failures to text.
async fn within<T>(
    limit: Duration,
    request: impl std::future::Future<Output = Result<T, etcd_client::Error>>,
) -> Result<T, String> {
    match tokio::time::timeout(limit, request).await {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(err)) => Err(err.to_string()),
        Err(_) => Err(format!("timed out after {limit:?}")),
    }
}

fn header_revision(header: Option<&etcd_client::ResponseHeader>) -> i64 {
    header.map_or(-1, |h| h.revision())
}

/// A value of `size` bytes, printable and different per run.
fn make_value(size: usize, run_id: usize) -> Vec<u8> {
    let alphabet = b"abcdefghijklmnopqrstuvwxyz0123456789";
    (0..size)
        .map(|i| alphabet[(i + run_id) % alphabet.len()])
        .collect()
}

async fn print_progress(label: String, duration: Duration, progress: Arc<Progress>) {
    let start = Instant::now();
    let mut ticker = tokio::time::interval(Duration::from_secs(1));
    ticker.tick().await;
    let mut last_ok = 0;
    // Bounded: one line a second for the run plus a generous tail.
    let max_lines = duration.as_secs() + 120;
    for _ in 0..max_lines {
        ticker.tick().await;
        if progress.done.load(Ordering::Relaxed) {
            return;
        }
        let ok = progress.ok.load(Ordering::Relaxed);
        let errors = progress.errors.load(Ordering::Relaxed);
        eprintln!(
            "  [{label}] {:>5.1}s/{:.0}s {ok:>9} ok {errors} errors {:>9} ops/s",
            start.elapsed().as_secs_f64(),
            duration.as_secs_f64(),
            ok - last_ok
        );
        last_ok = ok;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repeated_revisions_are_found() {
        assert!(repeated_revisions(&[&[2, 4], &[3, 5]]).is_none());
        let found = repeated_revisions(&[&[2, 4], &[4, 5]]).unwrap();
        assert!(found.contains("[4]"), "{found}");
    }

    #[test]
    fn per_client_order() {
        assert!(first_disorder(&[&[2, 4, 9], &[3]]).is_none());
        let found = first_disorder(&[&[2, 4], &[5, 3]]).unwrap();
        assert!(found.starts_with("client 1"), "{found}");
        assert!(first_disorder(&[&[2, 2]]).is_some());
    }

    #[test]
    fn revisions_must_follow_the_start_without_gaps() {
        assert!(revision_gap(&[&[11, 13], &[12]], 10, Some(13)).is_none());
        assert!(revision_gap(&[&[11, 14], &[12]], 10, Some(14)).is_some()); // gap at 13
        assert!(revision_gap(&[&[11, 13], &[12]], 10, Some(14)).is_some()); // store moved on
        assert!(revision_gap(&[&[11, 12], &[12]], 10, Some(13)).is_some()); // repeat
        assert!(revision_gap(&[&[], &[]], 10, Some(10)).is_none());
    }

    #[test]
    fn reads_never_go_back() {
        assert!(read_regression(&[&[5, 5, 7], &[6]], 5).is_none());
        assert!(read_regression(&[&[4]], 5).is_some()); // older than the write
        assert!(read_regression(&[&[6], &[7, 6]], 5).is_some()); // went back
    }

    #[test]
    fn values_differ_per_run() {
        assert_eq!(make_value(10, 1).len(), 10);
        assert_ne!(make_value(10, 1), make_value(10, 2));
    }
}
