//! A history of client operations against a key-value store, as the fault
//! suites record it: what each client asked, what it was told, and when it
//! asked and heard back. The linearizability checker (`checker`) reads it;
//! `write_to` keeps it in a file next to a failing run's report.

use std::fmt;
use std::io::Write;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Instant;

/// What a client asked of one key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Input {
    Put {
        value: String,
    },
    /// A linearizable read.
    Get,
    Delete,
    /// A write only if the key exists (a patch): no effect on an absent key.
    Patch {
        value: String,
    },
    /// A transaction: if the key's value is `expect` (None: the key is
    /// absent) then put `value`.
    Cas {
        expect: Option<String>,
        value: String,
    },
}

/// What the client was told. `Unknown` is an ambiguous outcome (a timeout,
/// a broken connection, a server that lost leadership mid-request): the
/// operation may or may not have taken effect. `Failed` is an error that
/// is an answer: the server said the write did not happen, so it must
/// not have (whether the server was entitled to refuse is the profile's
/// to judge; see `Traffic::errors`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Output {
    Put,
    Get(Option<String>),
    Delete { deleted: bool },
    Cas { succeeded: bool },
    Patch { found: bool },
    Failed,
    Unknown,
}

/// The client id of the reads made after the traffic stopped.
pub const FINAL_READER: usize = usize::MAX;
/// The client id of the task that holds a lease for the whole run.
pub const LEASE_HOLDER: usize = usize::MAX - 1;

/// One operation. Times are nanoseconds since the history began; `ret` is
/// None for an ambiguous outcome, which may take effect at any time after
/// its call, or never.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Operation {
    pub client: usize,
    pub key: String,
    pub input: Input,
    pub output: Output,
    pub call: u64,
    pub ret: Option<u64>,
    /// The store revision the response carried, when it carried one.
    pub revision: Option<i64>,
}

impl Operation {
    pub fn is_ambiguous(&self) -> bool {
        self.ret.is_none()
    }

    /// A write the client was told took effect (a CAS that failed wrote
    /// nothing, but it was answered, which is what availability means; an
    /// error is not).
    pub fn is_acknowledged_write(&self) -> bool {
        !matches!(self.input, Input::Get) && !self.is_ambiguous() && self.output != Output::Failed
    }
}

impl fmt::Display for Operation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ret = self.ret.map_or("?".to_string(), |r| r.to_string());
        let client = match self.client {
            FINAL_READER => "final".to_string(),
            LEASE_HOLDER => "lease-holder".to_string(),
            id => id.to_string(),
        };
        write!(
            f,
            "client {client} [{} .. {}] {} {:?} -> {:?}",
            self.call, ret, self.key, self.input, self.output
        )?;
        if let Some(revision) = self.revision {
            write!(f, " @{revision}")?;
        }
        Ok(())
    }
}

/// Collects operations from many client threads or tasks.
pub struct Recorder {
    start: Instant,
    ops: Mutex<Vec<Operation>>,
    /// The call time of the latest-called acknowledged write, so a fault
    /// schedule can wait for writes to flow again without a scan.
    latest_write: AtomicU64,
}

impl Default for Recorder {
    fn default() -> Self {
        Recorder::new()
    }
}

impl Recorder {
    pub fn new() -> Recorder {
        Recorder {
            start: Instant::now(),
            ops: Mutex::new(Vec::new()),
            latest_write: AtomicU64::new(0),
        }
    }

    /// Now, on the history's clock: take it just before sending a request.
    pub fn now(&self) -> u64 {
        self.start.elapsed().as_nanos() as u64
    }

    /// Records a finished operation whose call time was `call`. An
    /// `Output::Unknown` is recorded as ambiguous whatever the clock says.
    pub fn record(
        &self,
        client: usize,
        key: &str,
        input: Input,
        call: u64,
        outcome: (Output, Option<i64>),
    ) {
        let (output, revision) = outcome;
        let ret = (output != Output::Unknown).then(|| self.now());
        let op = Operation {
            client,
            key: key.to_string(),
            input,
            output,
            call,
            ret,
            revision,
        };
        if op.is_acknowledged_write() {
            self.latest_write.fetch_max(op.call, Ordering::Relaxed);
        }
        self.ops.lock().unwrap_or_else(|e| e.into_inner()).push(op);
    }

    /// The call time of the latest-called acknowledged write (0: none).
    pub fn latest_acknowledged_write(&self) -> u64 {
        self.latest_write.load(Ordering::Relaxed)
    }

    /// A copy of everything recorded so far.
    pub fn operations(&self) -> Vec<Operation> {
        self.ops.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

/// Writes `ops` to `path`, one operation a line in call order, for a human
/// reading a failure.
pub fn write_to(path: &Path, ops: &[Operation]) -> std::io::Result<()> {
    let mut sorted: Vec<&Operation> = ops.iter().collect();
    sorted.sort_by_key(|op| op.call);
    let mut file = std::io::BufWriter::new(std::fs::File::create(path)?);
    for op in sorted {
        writeln!(file, "{op}")?;
    }
    file.flush()
}
