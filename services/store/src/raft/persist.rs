//! The log's persist thread: makes what the Ready loop staged durable (one
//! write and one fdatasync) while the loop builds the next Ready, and
//! reports the Ready number that is now on disk.
//!
//! Readies are persisted in order; requests that queue up while a sync is
//! under way are covered by the next single sync. Nothing waiting on a
//! Ready (its followers' acknowledgements, its proposers' answers) goes
//! out before the report, so an fdatasync still stands behind every
//! acknowledgement.

use std::sync::mpsc::{self, Receiver, Sender};
use std::time::Instant;

use super::handle::NodeMsg;
use super::storage::RaftLog;
use crate::error::{Result, StoreError};
use crate::metrics::RaftMetrics;

/// Starts the thread; send it a Ready's number once that Ready's entries
/// and hard state are staged in `log`.
pub fn spawn_persister(
    log: RaftLog,
    node: Sender<NodeMsg>,
    metrics: RaftMetrics,
) -> Result<Sender<u64>> {
    let (tx, rx) = mpsc::channel();
    std::thread::Builder::new()
        .name("raft-log-sync".into())
        .spawn(move || persist(log, rx, node, metrics))
        .map_err(|err| StoreError::Storage(format!("spawn raft log sync thread: {err}")))?;
    Ok(tx)
}

fn persist(log: RaftLog, requests: Receiver<u64>, node: Sender<NodeMsg>, metrics: RaftMetrics) {
    while let Ok(first) = requests.recv() {
        let number = requests.try_iter().fold(first, u64::max);
        let started = Instant::now();
        if let Err(err) = log.sync() {
            // What was staged may not be on disk: nothing can be
            // acknowledged any more, and stopping is the only safe answer.
            tracing::error!(%err, "cannot sync the raft log; stopping");
            std::process::exit(2);
        }
        metrics
            .flush_seconds
            .observe(started.elapsed().as_secs_f64());
        if node.send(NodeMsg::Persisted { number }).is_err() {
            return;
        }
    }
}
