//! The threads beside the Ready loop that wait on the disk.
//!
//! The log's sync thread makes what the Ready loop staged durable (one
//! write and one fdatasync) while the loop builds the next Ready, and
//! reports the Ready number that is now on disk.
//!
//! Readies are persisted in order; requests that queue up while a sync is
//! under way are covered by the next single sync. Nothing waiting on a
//! Ready (its followers' acknowledgements, its proposers' answers) goes
//! out before the report, so an fdatasync still stands behind every
//! acknowledgement.
//!
//! The state flush thread makes the state machine durable before the log
//! drops entries, so that long flush does not stall the loop either.

use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::Arc;
use std::time::Instant;

use super::storage::RaftLog;
use crate::error::{Result, StoreError};
use crate::metrics::RaftMetrics;
use crate::storage::Backend;

/// Tells the Ready loop what is now durable (a Ready's number, an applied
/// index); false once the loop is gone, which ends the thread.
pub type Report = Box<dyn Fn(u64) -> bool + Send>;

/// Starts the log's sync thread; send it a Ready's number once that
/// Ready's entries and hard state are staged in `log`.
pub fn spawn_log_sync(
    log: RaftLog,
    persisted: Report,
    metrics: RaftMetrics,
) -> Result<Sender<u64>> {
    let (tx, rx) = mpsc::channel();
    std::thread::Builder::new()
        .name("raft-log-sync".into())
        .spawn(move || persist(log, rx, persisted, metrics))
        .map_err(|err| StoreError::Storage(format!("spawn raft log sync thread: {err}")))?;
    Ok(tx)
}

fn persist(log: RaftLog, requests: Receiver<u64>, persisted: Report, metrics: RaftMetrics) {
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
        if !persisted(number) {
            return;
        }
    }
}

/// Starts the thread that flushes the state machine before the log is
/// truncated; send it the applied index at the time of asking. Everything
/// applied before the request is durable when it reports that index back.
pub fn spawn_state_flusher(
    backend: Arc<dyn Backend>,
    flushed: Report,
    metrics: RaftMetrics,
) -> Result<Sender<u64>> {
    let (tx, rx) = mpsc::channel::<u64>();
    let flush = move || {
        while let Ok(upto) = rx.recv() {
            let started = Instant::now();
            if let Err(err) = backend.flush() {
                tracing::error!(%err, "cannot flush the state machine; stopping");
                std::process::exit(2);
            }
            metrics
                .state_flush_seconds
                .observe(started.elapsed().as_secs_f64());
            if !flushed(upto) {
                return;
            }
        }
    };
    std::thread::Builder::new()
        .name("state-flush".into())
        .spawn(flush)
        .map_err(|err| StoreError::Storage(format!("spawn state flush thread: {err}")))?;
    Ok(tx)
}
