//! `--quota-backend-bytes`, as etcd 3.4 means it: 0 is the default quota
//! (2 GiB), a negative value turns the quota off. A request that would
//! grow the database (put, txn with a put, lease grant) is refused with
//! etcd's NOSPACE error when the backend's size on disk plus the
//! request's cost reaches the quota, and the member raises the NOSPACE
//! alarm through raft, so every member refuses such requests until
//! `etcdctl alarm disarm` (after `compact` and `defrag` freed space).
//! The check itself is `Context::check_quota` (`context.rs`).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use capstan_proto::etcdserverpb::request_op::Request as Op;
use capstan_proto::etcdserverpb::TxnRequest;
use capstan_proto::internal::raft_request::Request;

use crate::storage::Backend;

/// etcd's `DefaultQuotaBytes`.
pub const DEFAULT_QUOTA_BYTES: u64 = 2 * 1024 * 1024 * 1024;
/// What etcd adds to a put's key and value for its bookkeeping.
const KV_OVERHEAD: u64 = 256;
/// etcd's cost of a lease grant.
const LEASE_OVERHEAD: u64 = 64;
/// How stale the measured database size may be: measuring it lists the
/// backend's files, too slow to do for every write.
const SIZE_REFRESH: Duration = Duration::from_millis(100);

/// `measured_at` when the size must be measured at the next request.
const STALE: u64 = u64::MAX;

/// Atomics rather than a lock: every write asks, from many tasks at once.
pub struct Quota {
    /// None: no quota.
    limit: Option<u64>,
    /// The last measured size, and when (milliseconds after `epoch`).
    size: AtomicU64,
    measured_at: AtomicU64,
    epoch: Instant,
}

impl Quota {
    /// The quota `--quota-backend-bytes` asks for.
    pub fn from_setting(bytes: i64) -> Quota {
        let limit = match bytes {
            ..0 => None,
            0 => Some(DEFAULT_QUOTA_BYTES),
            bytes => Some(bytes as u64),
        };
        Quota {
            limit,
            size: AtomicU64::new(0),
            measured_at: AtomicU64::new(STALE),
            epoch: Instant::now(),
        }
    }

    pub fn limit(&self) -> Option<u64> {
        self.limit
    }

    /// Whether the database has room for a request of this cost (etcd's
    /// `backendQuota.Available`).
    pub fn available(&self, backend: &dyn Backend, cost: u64) -> bool {
        let Some(limit) = self.limit else {
            return true;
        };
        self.size(backend) + cost < limit
    }

    /// The database's size, measured again by one caller once the last
    /// measurement is older than `SIZE_REFRESH`.
    fn size(&self, backend: &dyn Backend) -> u64 {
        let now = self.epoch.elapsed().as_millis() as u64;
        let at = self.measured_at.load(Ordering::Acquire);
        let fresh = at != STALE && now.saturating_sub(at) < SIZE_REFRESH.as_millis() as u64;
        let measures = !fresh
            && self
                .measured_at
                .compare_exchange(at, now, Ordering::AcqRel, Ordering::Acquire)
                .is_ok();
        if measures {
            self.size.store(backend.size_on_disk(), Ordering::Release);
        }
        self.size.load(Ordering::Acquire)
    }

    /// Measure again at the next request (the database just shrank).
    pub fn forget_size(&self) {
        self.measured_at.store(STALE, Ordering::Release);
    }
}

/// What a request adds to the database, as etcd estimates it: zero for
/// exactly the requests that do not grow it (every put costs at least
/// `KV_OVERHEAD`, a lease grant `LEASE_OVERHEAD`).
pub fn cost(request: &Request) -> u64 {
    match request {
        Request::Put(put) => KV_OVERHEAD + (put.key.len() + put.value.len()) as u64,
        Request::Txn(txn) => txn_cost(txn),
        Request::LeaseGrant(_) => LEASE_OVERHEAD,
        _ => 0,
    }
}

/// The larger of the two branches' puts.
fn txn_cost(txn: &TxnRequest) -> u64 {
    let branch = |ops: &[capstan_proto::etcdserverpb::RequestOp]| -> u64 {
        ops.iter()
            .map(|op| match &op.request {
                Some(Op::RequestPut(put)) => cost(&Request::Put(put.clone())),
                Some(Op::RequestTxn(nested)) => txn_cost(nested),
                _ => 0,
            })
            .sum()
    };
    branch(&txn.success).max(branch(&txn.failure))
}

#[cfg(test)]
mod tests {
    use super::*;
    use capstan_proto::etcdserverpb::{PutRequest, RequestOp};

    fn put(value_len: usize) -> PutRequest {
        PutRequest {
            key: b"key".to_vec(),
            value: vec![0; value_len],
            ..Default::default()
        }
    }

    #[test]
    fn the_setting_means_what_etcd_means() {
        assert_eq!(Quota::from_setting(0).limit(), Some(DEFAULT_QUOTA_BYTES));
        assert_eq!(Quota::from_setting(-1).limit(), None);
        assert_eq!(Quota::from_setting(4096).limit(), Some(4096));
    }

    #[test]
    fn a_txn_costs_its_larger_branch() {
        let op = |len| RequestOp {
            request: Some(Op::RequestPut(put(len))),
        };
        let txn = TxnRequest {
            success: vec![op(100), op(100)],
            failure: vec![op(1000)],
            ..Default::default()
        };
        assert_eq!(cost(&Request::Txn(txn)), KV_OVERHEAD + 3 + 1000);
        assert_eq!(cost(&Request::Put(put(10))), KV_OVERHEAD + 13);
    }
}
