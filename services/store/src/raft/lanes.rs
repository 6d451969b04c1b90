//! The ways back from the Ready loop to the runtimes that wait on it: one
//! lane per runtime, each a task of that runtime that wakes, in one go,
//! every caller of a batch of answers.
//!
//! Each runtime serves its own connections on one thread. A batch handed
//! to its lane's task wakes the requests' tasks first and their
//! connections' tasks after, so each connection writes all its ready
//! responses with one `writev` (answered one by one from the loop's
//! thread, each request's task ran straight into its connection's task:
//! a `writev` per response). With one lane per runtime, the loop hands each
//! runtime only its own callers' answers, and no runtime's thread carries
//! another's connections.
//!
//! A caller's lane is the one its thread opened (`Lanes::open`); threads
//! that opened none use lane 0, the runtime that started the node.

use std::cell::Cell;

use parking_lot::RwLock;
use tokio::sync::{mpsc, oneshot};

use crate::apply::ApplyOutcome;
use crate::error::Result;

thread_local! {
    /// The lane this thread's callers are answered by.
    static LANE: Cell<usize> = const { Cell::new(0) };
}

/// The lane of callers on this thread.
pub fn current_lane() -> usize {
    LANE.with(Cell::get)
}

/// A caller waiting for the Ready loop, and the lane it is answered by.
pub struct Reply<T> {
    pub lane: usize,
    pub done: oneshot::Sender<T>,
}

impl<T> Reply<T> {
    /// A reply by the lane of the calling thread.
    pub fn here(done: oneshot::Sender<T>) -> Reply<T> {
        Reply {
            lane: current_lane(),
            done,
        }
    }
}

pub type ProposalReply = Reply<Result<ApplyOutcome>>;

/// What a lane's task answers at once.
pub enum Batch {
    Proposals(Vec<(oneshot::Sender<Result<ApplyOutcome>>, Result<ApplyOutcome>)>),
    /// Readers of one ReadIndex round and the index they may read at.
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

/// Every runtime's lane, by number.
#[derive(Default)]
pub struct Lanes {
    lanes: RwLock<Vec<mpsc::UnboundedSender<Batch>>>,
}

impl Lanes {
    /// Opens a lane on the current runtime and makes it this thread's;
    /// returns its number. Outside a runtime nothing is opened and the
    /// thread keeps lane 0.
    pub fn open(&self) -> Option<usize> {
        let runtime = tokio::runtime::Handle::try_current().ok()?;
        let (tx, mut rx) = mpsc::unbounded_channel::<Batch>();
        runtime.spawn(async move {
            while let Some(batch) = rx.recv().await {
                batch.answer();
            }
        });
        let mut lanes = self.lanes.write();
        lanes.push(tx);
        let lane = lanes.len() - 1;
        LANE.with(|current| current.set(lane));
        Some(lane)
    }

    /// Hands `batch` to lane `lane`'s task; answers it on this thread if
    /// that lane is not open (or its runtime has stopped).
    pub fn hand_over(&self, lane: usize, batch: Batch) {
        let unsent = match self.lanes.read().get(lane) {
            Some(tx) => tx.send(batch).err().map(|err| err.0),
            None => Some(batch),
        };
        if let Some(batch) = unsent {
            batch.answer();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_runtime_answers_its_own_callers() {
        let lanes = std::sync::Arc::new(Lanes::default());
        let opened = |lanes: std::sync::Arc<Lanes>| {
            std::thread::spawn(move || {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .unwrap();
                runtime.block_on(async move {
                    let lane = lanes.open().expect("inside a runtime");
                    assert_eq!(current_lane(), lane);
                    let (done, wait) = oneshot::channel();
                    let reply = Reply::here(done);
                    assert_eq!(reply.lane, lane);
                    // The loop's thread hands the answer over.
                    let lanes = lanes.clone();
                    std::thread::spawn(move || {
                        lanes.hand_over(reply.lane, Batch::Reads(7, vec![reply.done]))
                    });
                    (lane, wait.await.unwrap())
                })
            })
        };
        let first = opened(lanes.clone()).join().unwrap();
        let second = opened(lanes.clone()).join().unwrap();
        assert_ne!(first.0, second.0);
        assert_eq!((first.1, second.1), (7, 7));
    }

    #[test]
    fn a_lane_never_opened_is_answered_in_place() {
        let lanes = Lanes::default();
        let (done, mut wait) = oneshot::channel();
        lanes.hand_over(3, Batch::Reads(9, vec![done]));
        assert_eq!(wait.try_recv().unwrap(), 9);
    }
}
