//! The answers to a run of applied proposals, handed to the async runtime
//! as one batch. Sent one by one from the Ready loop's thread, each answer
//! woke its request's task from outside the runtime; the runtime ran that
//! task and then, before the next woken one, its connection's task, which
//! wrote that one response: one `writev` per response. Sent from a task
//! inside the runtime, the requests' tasks all run before the connections'
//! tasks, which then write every response they have in one go.

use std::time::Instant;

use tokio::sync::{mpsc, oneshot};

use crate::apply::ApplyOutcome;
use crate::error::Result;

/// A proposer waiting for its entry to be applied.
pub(super) struct Waiter {
    pub since: Instant,
    pub done: oneshot::Sender<Result<ApplyOutcome>>,
}

impl Waiter {
    pub fn new(done: oneshot::Sender<Result<ApplyOutcome>>) -> Self {
        Waiter {
            since: Instant::now(),
            done,
        }
    }
}

type Answer = (oneshot::Sender<Result<ApplyOutcome>>, Result<ApplyOutcome>);

/// What the runtime's task answers at once.
enum Batch {
    Proposals(Vec<Answer>),
    /// The readers of one ReadIndex round and the index they may read at.
    Reads(u64, Vec<oneshot::Sender<u64>>),
}

impl Batch {
    fn answer(self) {
        match self {
            Batch::Proposals(answers) => {
                for (done, result) in answers {
                    let _ = done.send(result);
                }
            }
            Batch::Reads(index, readers) => {
                for reader in readers {
                    let _ = reader.send(index);
                }
            }
        }
    }
}

pub(super) struct Answers {
    batch: Vec<Answer>,
    /// The task that sends them; None outside a runtime (then the Ready
    /// loop sends them itself).
    runtime: Option<mpsc::UnboundedSender<Batch>>,
}

impl Answers {
    /// Starts the sending task on the current runtime, if there is one.
    pub(super) fn start() -> Answers {
        let runtime = tokio::runtime::Handle::try_current().ok().map(|handle| {
            let (tx, mut rx) = mpsc::unbounded_channel::<Batch>();
            handle.spawn(async move {
                while let Some(batch) = rx.recv().await {
                    batch.answer();
                }
            });
            tx
        });
        Answers {
            batch: Vec::new(),
            runtime,
        }
    }

    pub(super) fn push(
        &mut self,
        done: oneshot::Sender<Result<ApplyOutcome>>,
        result: Result<ApplyOutcome>,
    ) {
        self.batch.push((done, result));
    }

    /// Sends what was pushed since the last call.
    pub(super) fn send(&mut self) {
        if !self.batch.is_empty() {
            let batch = std::mem::take(&mut self.batch);
            self.hand_over(Batch::Proposals(batch));
        }
    }

    /// Tells the readers of a ReadIndex round the index they may read at.
    pub(super) fn send_reads(&mut self, index: u64, readers: Vec<oneshot::Sender<u64>>) {
        self.hand_over(Batch::Reads(index, readers));
    }

    fn hand_over(&self, batch: Batch) {
        let unsent = match &self.runtime {
            Some(runtime) => runtime.send(batch).err().map(|e| e.0),
            None => Some(batch),
        };
        if let Some(batch) = unsent {
            batch.answer();
        }
    }
}
