//! One timed run: `clients` concurrent clients, each sending one request
//! at a time until the deadline over the shared kept-alive pool, every
//! answer checked and every good answer's latency recorded.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use hyper::StatusCode;

use super::answers::{self, configmap};
use super::error::{ApiError, WrongAnswer};
use super::http::{Answer, Connection};
use super::{collection, ApiOp, ApiSpec, ApiStats, GET_NAME, GET_NAMESPACE, LIST_NAMESPACE};
use crate::run_spec::new_histogram;

/// Bounds each client's loop whatever the duration.
const MAX_OPS_PER_CLIENT: u64 = 10_000_000;
/// Lists are decoded and counted in full on each client's first answer and
/// every this many after; the rest only need a 200. Decoding every 300 KB
/// answer would take CPU from the servers measured on this 2-core machine.
const LIST_CHECK_EVERY: u64 = 8;
/// Pause after a request that got no answer, so a dead server is not
/// hammered in a tight loop until the deadline.
const FAILURE_PAUSE: Duration = Duration::from_millis(20);
/// Distinct wrong answers kept for the report.
const MAX_SAMPLES: usize = 3;

/// What a run measured, and for creates what it made.
pub struct RunOutcome {
    pub stats: ApiStats,
    /// Create: (name, resourceVersion) of every create answered 201.
    pub created: Vec<(String, String)>,
}

/// Counters the progress printer reads while a run goes.
#[derive(Default)]
struct Progress {
    ok: AtomicU64,
    errors: AtomicU64,
    done: AtomicBool,
}

/// One client's share of a run.
struct ClientResult {
    latency_us: Histogram<u64>,
    ok: u64,
    errors: u64,
    samples: Vec<String>,
    created: Vec<(String, String)>,
}

impl ClientResult {
    fn error(&mut self, message: String) {
        self.errors += 1;
        if self.samples.len() < MAX_SAMPLES {
            self.samples.push(message);
        }
    }
}

pub async fn run(spec: &ApiSpec, port: u16, timeout: Duration) -> Result<RunOutcome, ApiError> {
    let progress = Arc::new(Progress::default());
    let printer = spec.progress.then(|| {
        tokio::spawn(print_progress(
            spec.label(),
            spec.duration,
            progress.clone(),
        ))
    });
    let started = Instant::now();
    let deadline = started + spec.duration;
    let clients = (0..spec.clients).map(|id| {
        let http = Connection::new(port, timeout);
        client(spec, http, id, deadline, &progress)
    });
    let results = futures::future::join_all(clients).await;
    let elapsed = started.elapsed();
    progress.done.store(true, Ordering::Relaxed);
    if let Some(printer) = printer {
        printer.abort();
    }
    merge(spec, results, elapsed)
}

fn merge(
    spec: &ApiSpec,
    results: Vec<ClientResult>,
    elapsed: Duration,
) -> Result<RunOutcome, ApiError> {
    let mut latency = new_histogram();
    let (mut ok, mut errors, mut samples, mut created) = (0, 0, Vec::new(), Vec::new());
    for result in results {
        latency.add(&result.latency_us)?;
        ok += result.ok;
        errors += result.errors;
        samples.extend(result.samples);
        created.extend(result.created);
    }
    samples.truncate(MAX_SAMPLES);
    let stats = ApiStats::new(spec, ok, errors, samples, elapsed, &latency);
    Ok(RunOutcome { stats, created })
}

async fn client(
    spec: &ApiSpec,
    mut http: Connection,
    id: usize,
    deadline: Instant,
    progress: &Progress,
) -> ClientResult {
    let mut result = ClientResult {
        latency_us: new_histogram(),
        ok: 0,
        errors: 0,
        samples: Vec::new(),
        created: Vec::new(),
    };
    let get_path = format!("{}/{GET_NAME}", collection(GET_NAMESPACE));
    let list_path = collection(LIST_NAMESPACE);
    let mut i = 0;
    while Instant::now() < deadline && i < MAX_OPS_PER_CLIENT {
        let name = format!("c{id:02}-{i:07}");
        let started = Instant::now();
        let sent = match spec.op {
            ApiOp::Get => http.get(&get_path).await,
            ApiOp::List => http.get(&list_path).await,
            ApiOp::Create => {
                let path = collection(super::CREATE_NAMESPACE);
                http.post(&path, configmap(&name)).await
            }
        };
        let micros = started.elapsed().as_micros().max(1) as u64;
        let checked = match sent {
            Ok(answer) => verify(spec, &answer, &name, i).map_err(|e| e.to_string()),
            Err(err) => {
                tokio::time::sleep(FAILURE_PAUSE).await;
                Err(err.to_string())
            }
        };
        match checked {
            Ok(version) => {
                result.ok += 1;
                let _ = result.latency_us.record(micros);
                if let Some(version) = version {
                    result.created.push((name, version));
                }
                progress.ok.fetch_add(1, Ordering::Relaxed);
            }
            Err(message) => {
                result.error(message);
                progress.errors.fetch_add(1, Ordering::Relaxed);
            }
        }
        i += 1;
    }
    result
}

/// Checks one answer; a create's resourceVersion.
fn verify(
    spec: &ApiSpec,
    answer: &Answer,
    name: &str,
    i: u64,
) -> Result<Option<String>, WrongAnswer> {
    match spec.op {
        ApiOp::Get => answers::check_get(answer, GET_NAMESPACE, GET_NAME).map(|()| None),
        ApiOp::Create => answers::check_create(answer, name).map(Some),
        ApiOp::List if i.is_multiple_of(LIST_CHECK_EVERY) => {
            answers::check_list(answer, spec.list_size).map(|_| None)
        }
        ApiOp::List => answers::expect_status(answer, StatusCode::OK).map(|()| None),
    }
}

async fn print_progress(label: String, duration: Duration, progress: Arc<Progress>) {
    let start = Instant::now();
    let mut ticker = tokio::time::interval(Duration::from_secs(1));
    ticker.tick().await;
    let mut last_ok = 0;
    // Bounded: one line a second for the run plus a generous tail.
    for _ in 0..duration.as_secs() + 120 {
        ticker.tick().await;
        if progress.done.load(Ordering::Relaxed) {
            return;
        }
        let ok = progress.ok.load(Ordering::Relaxed);
        let errors = progress.errors.load(Ordering::Relaxed);
        eprintln!(
            "  [{label}] {:>5.1}s/{:.0}s {ok:>9} ok {errors} errors {:>7} req/s",
            start.elapsed().as_secs_f64(),
            duration.as_secs_f64(),
            ok - last_ok
        );
        last_ok = ok;
    }
}
