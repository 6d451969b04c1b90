//! The compare-and-swap workload: each client owns one key and rewrites it
//! with a txn that compares the key's mod revision with the one it last
//! wrote (as Kubernetes updates an object), so every compare must hold.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use capstan_proto::etcdserverpb::{
    compare, request_op, Compare, PutRequest, RequestOp, TxnRequest,
};
use etcd_client::{GetOptions, KvClient};

use crate::checks::Checks;
use crate::client::{header_revision, within};
use crate::grpc::{self, Kv};
use crate::run_spec::{ClientResult, Progress, RunSpec};
use crate::verify;

/// The key client `client` swaps.
pub(crate) fn key(prefix: &str, client: usize) -> String {
    format!("{prefix}txn/{client:05}")
}

/// Writes every client's key once, before timing; returns their revisions.
pub(crate) async fn prepare_keys(
    admin: &mut KvClient,
    prefix: &str,
    clients: usize,
    value: &[u8],
    timeout: Duration,
) -> Result<Vec<i64>, String> {
    let mut revisions = Vec::with_capacity(clients);
    for client in 0..clients {
        let resp = within(
            timeout,
            admin.put(key(prefix, client), value.to_vec(), None),
        )
        .await?;
        revisions.push(header_revision(resp.header()));
    }
    Ok(revisions)
}

pub(crate) async fn cas_client(
    mut kv: Kv,
    key: String,
    mut revision: i64,
    value: Arc<Vec<u8>>,
    deadline: Instant,
    timeout: Duration,
    progress: Arc<Progress>,
) -> ClientResult {
    let mut result = ClientResult::new();
    while Instant::now() < deadline {
        let txn = swap(&key, revision, &value);
        let started = Instant::now();
        let answer = grpc::within(timeout, kv.txn(txn)).await;
        let micros = started.elapsed().as_micros() as u64;
        match answer {
            Ok(resp) if resp.succeeded => {
                result.latency_us.saturating_record(micros.max(1));
                result.ok += 1;
                revision = grpc::revision(resp.header.as_ref());
                result.revisions.push(revision);
                progress.ok.fetch_add(1, Ordering::Relaxed);
            }
            Ok(_) => {
                // Only this client writes the key: a failed compare is a bug.
                result.wrong_reads += 1;
                result.error(format!("txn: compare mod_revision == {revision} failed"));
                progress.errors.fetch_add(1, Ordering::Relaxed);
                break;
            }
            Err(err) => {
                result.error(format!("txn: {err}"));
                progress.errors.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
    result
}

/// The txn that writes `value` to `key` if its mod revision is `revision`.
fn swap(key: &str, revision: i64, value: &[u8]) -> TxnRequest {
    let compare = Compare {
        result: compare::CompareResult::Equal as i32,
        target: compare::CompareTarget::Mod as i32,
        key: key.as_bytes().to_vec(),
        target_union: Some(compare::TargetUnion::ModRevision(revision)),
        ..Default::default()
    };
    let put = PutRequest {
        key: key.as_bytes().to_vec(),
        value: value.to_vec(),
        ..Default::default()
    };
    TxnRequest {
        compare: vec![compare],
        success: vec![RequestOp {
            request: Some(request_op::Request::RequestPut(put)),
        }],
        failure: Vec::new(),
    }
}

/// After a txn run: revisions as for puts, and each key's mod revision is
/// the last one its client was told.
pub(crate) async fn verify(
    spec: &RunSpec,
    admin: &mut KvClient,
    prefix: &str,
    start_revision: i64,
    initial: &[i64],
    results: &[ClientResult],
    checks: &mut Checks,
) {
    let label = spec.label();
    let listed = within(
        spec.request_timeout,
        admin.get(
            format!("{prefix}txn/"),
            Some(GetOptions::new().with_prefix()),
        ),
    )
    .await;
    let (end_revision, detail) = match listed {
        Ok(resp) => {
            let found: Vec<i64> = resp.kvs().iter().map(|kv| kv.mod_revision()).collect();
            let expected: Vec<i64> = results
                .iter()
                .zip(initial)
                .map(|(r, first)| r.revisions.last().copied().unwrap_or(*first))
                .collect();
            let detail = (found != expected).then(|| {
                format!(
                    "{} keys; first mismatch at client {:?}",
                    found.len(),
                    found.iter().zip(&expected).position(|(f, e)| f != e)
                )
            });
            (Some(header_revision(resp.header())), detail)
        }
        Err(err) => (None, Some(format!("range failed: {err}"))),
    };
    checks.record(
        format!("{label}: each key holds its client's last swap"),
        detail.is_none(),
        detail.unwrap_or_else(|| format!("{} keys", initial.len())),
    );
    verify::revisions(&label, start_revision, end_revision, results, checks);
}
