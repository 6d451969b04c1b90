//! What a workload run is and what its clients bring back, shared by the
//! runner (workload.rs) and the per-workload clients and checks (txn.rs,
//! verify.rs).

use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::time::Duration;

use hdrhistogram::Histogram;
use serde::Serialize;

use crate::cpu::ServerUse;
use crate::servers::ServerKind;

/// Error messages kept per workload for the report.
pub(crate) const MAX_ERROR_SAMPLES: usize = 5;
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
    /// Compare-and-swap txns, one key per client.
    Txn,
}

impl fmt::Display for Workload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Workload::Put => "put",
            Workload::Get => "get",
            Workload::Txn => "txn",
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
    /// The cores the server is pinned to (`--cores`), if it is.
    pub cores: Option<usize>,
}

impl RunSpec {
    pub fn label(&self) -> String {
        let cores = self.cores.map_or(String::new(), |n| format!(" cores={n}"));
        format!(
            "{} {} clients={}{cores}",
            self.server, self.workload, self.clients
        )
    }

    pub(crate) fn run_prefix(&self) -> String {
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
    /// What the server's processes and threads used while the clients ran.
    pub server_use: Option<ServerUse>,
}

/// One client's share of a run.
pub(crate) struct ClientResult {
    pub(crate) ok: u64,
    pub(crate) errors: u64,
    pub(crate) error_samples: Vec<String>,
    pub(crate) latency_us: Histogram<u64>,
    /// Put, txn: the revision of every acknowledged write, in order.
    /// Get: the header revision of every read, in order.
    pub(crate) revisions: Vec<i64>,
    /// Get: reads that returned something other than the value written.
    /// Txn: compare-and-swaps whose compare failed.
    pub(crate) wrong_reads: u64,
    pub(crate) wrong_samples: Vec<String>,
}

impl ClientResult {
    pub(crate) fn new() -> Self {
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

    pub(crate) fn error(&mut self, message: String) {
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
pub(crate) struct Progress {
    pub(crate) ok: AtomicU64,
    pub(crate) errors: AtomicU64,
    pub(crate) done: AtomicBool,
}
