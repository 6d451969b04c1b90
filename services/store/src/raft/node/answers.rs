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

pub(super) struct Answers {
    batch: Vec<Answer>,
    /// The task that sends them; None outside a runtime (then the Ready
    /// loop sends them itself).
    runtime: Option<mpsc::UnboundedSender<Vec<Answer>>>,
}

impl Answers {
    /// Starts the sending task on the current runtime, if there is one.
    pub(super) fn start() -> Answers {
        let runtime = tokio::runtime::Handle::try_current().ok().map(|handle| {
            let (tx, mut rx) = mpsc::unbounded_channel::<Vec<Answer>>();
            handle.spawn(async move {
                while let Some(batch) = rx.recv().await {
                    for (done, result) in batch {
                        let _ = done.send(result);
                    }
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
        if self.batch.is_empty() {
            return;
        }
        let batch = std::mem::take(&mut self.batch);
        let unsent = match &self.runtime {
            Some(runtime) => runtime.send(batch).err().map(|e| e.0),
            None => Some(batch),
        };
        for (done, result) in unsent.into_iter().flatten() {
            let _ = done.send(result);
        }
    }
}
