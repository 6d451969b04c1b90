//! The workloads: concurrent clients sharing a small pool of connections,
//! each issuing one request at a time until the deadline, recording every
//! request's latency. After each workload its results are checked against
//! the server's state.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use capstan_proto::etcdserverpb::{PutRequest, RangeRequest};

use crate::checks::Checks;
use crate::client::{connect_clients, header_revision, within};
use crate::cpu::{self, ProcessSample};
use crate::grpc::{self, Kv};
use crate::run_spec::{
    new_histogram, ClientResult, Progress, RunOutcome, RunSpec, Workload, KEY_PREFIX,
    MAX_ERROR_SAMPLES,
};
use crate::{txn, verify};

/// Upper bound on requests per client in one workload, whatever the duration.
const MAX_OPS_PER_CLIENT: u64 = 20_000_000;

/// Runs one workload and checks its results; returns its measurements.
/// `server_cpu` samples the CPU of the server's processes and threads.
pub async fn run(
    spec: RunSpec,
    checks: &mut Checks,
    server_cpu: impl Fn() -> Option<Vec<ProcessSample>>,
) -> Result<RunOutcome, String> {
    let label = spec.label();
    let conns = spec.clients.min(spec.max_conns);
    let pool = connect_pool(&spec.endpoint, conns, spec.request_timeout)
        .await
        .map_err(|err| format!("{label}: connect: {err}"))?;
    // Set-up and checks go through etcd-client, on a connection of their own.
    let admin = connect_clients(
        &spec.endpoint,
        1,
        Some(spec.request_timeout),
        spec.request_timeout,
    )
    .await
    .map_err(|err| format!("{label}: connect: {err}"))?;
    let prefix = spec.run_prefix();
    let value: Arc<Vec<u8>> = Arc::new(make_value(spec.value_size, spec.run_id));

    // Before the clients start: the store's revision (put, txn), the key
    // the get clients read (get), the revisions of the keys to swap (txn).
    let mut admin = admin[0].kv_client();
    let mut txn_revisions = Vec::new();
    if spec.workload == Workload::Txn {
        txn_revisions = txn::prepare_keys(
            &mut admin,
            &prefix,
            spec.clients,
            &value,
            spec.request_timeout,
        )
        .await
        .map_err(|err| format!("{label}: write the keys to swap: {err}"))?;
    }
    let (start_revision, get_key) = match spec.workload {
        Workload::Put | Workload::Txn => {
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

    let cpu_before = server_cpu();
    let start = Instant::now();
    let deadline = start + spec.duration;
    let mut tasks = Vec::with_capacity(spec.clients);
    for client in 0..spec.clients {
        let kv = pool[client % conns].clone();
        let progress = progress.clone();
        let value = value.clone();
        let timeout = spec.request_timeout;
        let task = match &get_key {
            None if spec.workload == Workload::Txn => tokio::spawn(txn::cas_client(
                kv,
                txn::key(&prefix, client),
                txn_revisions[client],
                value,
                deadline,
                timeout,
                progress,
            )),
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
    let server_use = (cpu_before.zip(server_cpu()))
        .and_then(|(before, after)| cpu::server_between(&before, &after, elapsed));
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
        server_use,
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
            verify::puts(&spec, &mut admin, &prefix, start_revision, &results, checks).await
        }
        Workload::Get => verify::gets(&spec, start_revision, &results, checks),
        Workload::Txn => {
            let (admin, revisions) = (&mut admin, &txn_revisions);
            txn::verify(
                &spec,
                admin,
                &prefix,
                start_revision,
                revisions,
                &results,
                checks,
            )
            .await
        }
    }
    Ok(outcome)
}

async fn put_client(
    mut kv: Kv,
    key_prefix: String,
    value: Arc<Vec<u8>>,
    deadline: Instant,
    timeout: Duration,
    progress: Arc<Progress>,
) -> ClientResult {
    let mut result = ClientResult::new();
    let mut seq: u64 = 0;
    while seq < MAX_OPS_PER_CLIENT && Instant::now() < deadline {
        let request = PutRequest {
            key: format!("{key_prefix}{seq:010}").into_bytes(),
            value: value.to_vec(),
            ..Default::default()
        };
        seq += 1;
        let started = Instant::now();
        let answer = grpc::within(timeout, kv.put(request)).await;
        let micros = started.elapsed().as_micros() as u64;
        match answer {
            Ok(resp) => {
                result.latency_us.saturating_record(micros.max(1));
                result.ok += 1;
                result.revisions.push(grpc::revision(resp.header.as_ref()));
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
    mut kv: Kv,
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
        // Linearizable: serializable stays false.
        let request = RangeRequest {
            key: key.as_bytes().to_vec(),
            ..Default::default()
        };
        let answer = grpc::within(timeout, kv.range(request)).await;
        let micros = started.elapsed().as_micros() as u64;
        match answer {
            Ok(resp) => {
                result.latency_us.saturating_record(micros.max(1));
                result.ok += 1;
                result.revisions.push(grpc::revision(resp.header.as_ref()));
                let kvs = &resp.kvs;
                if kvs.len() != 1 || kvs[0].value != *value || kvs[0].key != key.as_bytes() {
                    result.wrong_reads += 1;
                    if result.wrong_samples.is_empty() {
                        result.wrong_samples.push(format!(
                            "{} kvs, first value {} bytes",
                            kvs.len(),
                            kvs.first().map_or(0, |kv| kv.value.len())
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

/// Opens `conns` separate HTTP/2 connections and makes one request on
/// each so connection set-up is not measured.
async fn connect_pool(endpoint: &str, conns: usize, timeout: Duration) -> Result<Vec<Kv>, String> {
    let mut pool = Vec::with_capacity(conns);
    for _ in 0..conns {
        let mut kv = grpc::connect(endpoint, timeout).await?;
        let warm_up = RangeRequest {
            key: format!("{KEY_PREFIX}/warm-up").into_bytes(),
            ..Default::default()
        };
        grpc::within(timeout, kv.range(warm_up))
            .await
            .map_err(|err| format!("first request: {err}"))?;
        pool.push(kv);
    }
    Ok(pool)
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
    fn values_differ_per_run() {
        assert_eq!(make_value(10, 1).len(), 10);
        assert_ne!(make_value(10, 1), make_value(10, 2));
    }
}
