//! The Ready loop: one thread that owns the `RawNode`.
//!
//! Each turn it takes every queued proposal and read request (so one Ready —
//! and one fsync — covers many client requests), ticks the clock, and handles
//! the Ready with raft-rs's asynchronous persistence: send messages, hand
//! committed entries to the applier (those are durable on a quorum, this
//! member included), stage new entries and hard state in the log, hand the
//! sync to the log's sync thread (`raft_log::spawn_log_sync`) and advance.
//! While that fdatasync runs, the loop builds and stages the next Ready.
//! When the sync thread reports a Ready durable, the loop tells raft
//! (`on_persist_ready`) and only then sends that Ready's persisted messages
//! (a follower's acknowledgements, votes); the entries it made committable
//! are applied and answered in a later Ready.
//! A small Ready with no sync under way is synced on the loop itself, which
//! spares a lone client's request two thread hand-offs.
//! The state machine is flushed only before the log is truncated (see
//! `truncate_log`).
//!
//! Between turns the loop sleeps on its inbox (`inbox.rs`), which wakes it
//! both for messages from other threads and for the sockets of its direct
//! peer links (`transport::links`): raft messages to and from peers (in
//! plain text or TLS) are written and read on this thread, with no
//! hand-off to the async runtime.

mod answers;
mod committed;
mod peers;
mod reads;
pub(super) mod start;

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use capstan_proto::internal::{raft_request, MemberRecord, RaftRequest};
use parking_lot::Mutex;
use prost::Message as _;
use raft::eraftpb::{Message, Snapshot};
use raft::{RawNode, StateRole};
use tokio::sync::watch;

use super::handle::RaftStatus;
use super::inbox::{Inbox, Woken};
use super::lanes::{ProposalReply, Reply};
use super::node_msg::NodeMsg;
use crate::apply::Applier;
use crate::error::{Result, StoreError};
use crate::lease::Lessor;
use crate::raft_log::RaftLog;
use crate::storage::Backend;
use crate::transport::links::DirectLinks;
use crate::transport::Transport;
use answers::Waiter;

/// How the Ready loop is set up.
#[derive(Debug, Clone)]
pub struct NodeConfig {
    pub member_id: u64,
    pub tick: Duration,
    pub election_ticks: usize,
    pub heartbeat_ticks: usize,
    /// Applied entries after which the front of the log is dropped.
    pub snapshot_count: u64,
    pub request_timeout: Duration,
    /// Peers to talk to while the state machine knows no members yet (a
    /// member joining an existing cluster, before its first snapshot).
    pub bootstrap_peers: Vec<(u64, Vec<String>)>,
    pub metrics: crate::metrics::RaftMetrics,
}

/// Entries kept behind the applied index when the log is truncated, so a
/// briefly lagging follower can still catch up from the log (as etcd does),
/// unless they hold more than `CATCH_UP_BYTES`.
const CATCH_UP_ENTRIES: u64 = 5000;
const CATCH_UP_BYTES: usize = 8 << 20;
/// The log's entries live in memory until the front is dropped: past this
/// many payload bytes the front goes whatever `snapshot_count` says, so
/// large values (30,000 pods of 4 KB) cannot hold 60 MB of log.
const LOG_BYTES: usize = 32 << 20;
/// Requests taken from the queue per turn, bounding one Ready's size.
const MAX_BATCH: usize = 4096;
/// Readies of at most this many new entries are synced on the loop's own
/// thread when no other sync is under way (see `Node::sync_inline`).
const INLINE_SYNC_ENTRIES: usize = 2;

struct Node {
    raw: RawNode<RaftLog>,
    log: RaftLog,
    backend: Arc<dyn Backend>,
    applier: Applier,
    lessor: Arc<Mutex<Lessor>>,
    status: Arc<RaftStatus>,
    applied_tx: watch::Sender<u64>,
    config: NodeConfig,
    transport: Arc<dyn Transport>,
    /// The direct peer links: the loop writes and reads their sockets.
    links: DirectLinks,
    /// Scratch space for the sockets one wait found ready.
    socket_events: Vec<(mio::Token, bool, bool)>,
    waiters: HashMap<u64, Waiter>,
    answers: answers::Answers,
    /// For proposals made while leader: the log index each landed at. If a
    /// different entry is applied there, the proposal was lost to a leader
    /// change and its client is told so at once.
    proposal_index: HashMap<u64, u64>,
    pending_reads: Vec<Reply<u64>>,
    inflight_reads: HashMap<Vec<u8>, (Instant, Vec<Reply<u64>>)>,
    next_read_ctx: u64,
    applied: u64,
    role: StateRole,
    disk: DiskThreads,
    /// Messages that may go only once their Ready is durable, by number.
    unpersisted: VecDeque<(u64, Vec<Message>)>,
    /// A state flush is under way; the log is truncated when it ends.
    flushing: bool,
}

/// The threads that wait on the disk for the loop, and how to ask them.
struct DiskThreads {
    /// Ready numbers go here once staged; the log's sync thread syncs them.
    log_sync: std::sync::mpsc::Sender<u64>,
    /// Applied indexes go here to be made durable in the state machine.
    flush_state: std::sync::mpsc::Sender<u64>,
}

fn peer_list(members: &[MemberRecord]) -> Vec<(u64, Vec<String>)> {
    members
        .iter()
        .map(|m| (m.id, m.peer_urls.clone()))
        .collect()
}

impl Node {
    fn run(mut self, mut inbox: Inbox) {
        let mut last_tick = Instant::now();
        loop {
            // A Ready synced inline leaves raft with more to do at once
            // (the entries that sync made committable): no waiting then.
            let wait = match self.raw.has_ready() {
                true => Duration::ZERO,
                false => self.config.tick.saturating_sub(last_tick.elapsed()),
            };
            match inbox.wait(wait) {
                Ok(Woken::Ready) => {}
                Ok(Woken::Disconnected) => break,
                Err(err) => {
                    tracing::error!(%err, "the raft loop cannot poll; stopping");
                    std::process::exit(2);
                }
            }
            for _ in 0..MAX_BATCH {
                match inbox.next_message() {
                    Some(msg) => self.handle(msg),
                    None => break,
                }
            }
            self.on_sockets(&inbox);
            if last_tick.elapsed() >= self.config.tick {
                self.raw.tick();
                last_tick = Instant::now();
                self.expire_stale_requests();
                self.log.drop_unclaimed_snapshot();
                self.check_links();
            }
            self.issue_reads();
            if let Err(err) = self.on_ready() {
                // The log or state machine can no longer be trusted to be
                // durable; stopping is the only safe answer.
                tracing::error!(%err, "storage failure in the raft loop; stopping");
                std::process::exit(2);
            }
        }
        let _ = self.log.sync();
        let _ = self.backend.flush();
        tracing::info!("raft loop stopped");
    }

    fn handle(&mut self, msg: NodeMsg) {
        match msg {
            NodeMsg::Propose { id, data, reply } => {
                let before = self.raw.raft.raft_log.last_index();
                let result = self.raw.propose(Vec::new(), data);
                self.track_proposal(id, before, result, reply);
            }
            NodeMsg::ConfChange {
                id,
                change,
                record,
                reply,
            } => {
                let context = RaftRequest {
                    id,
                    request: Some(raft_request::Request::MemberAttributes(record)),
                    caller: None,
                };
                let before = self.raw.raft.raft_log.last_index();
                let result = self
                    .raw
                    .propose_conf_change(context.encode_to_vec(), change);
                self.track_proposal(id, before, result, reply);
            }
            NodeMsg::ReadIndex { reply } => self.pending_reads.push(reply),
            NodeMsg::Step(message) => {
                if let Err(err) = self.raw.step(*message) {
                    tracing::debug!(%err, "raft rejected a peer message");
                }
            }
            NodeMsg::Peer(event) => self.on_peer_event(event),
            NodeMsg::TransferLeader { to } => self.raw.transfer_leader(to),
            NodeMsg::LearnerInSync { id, done } => {
                let _ = done.send(self.learner_in_sync(id));
            }
            NodeMsg::Persisted { number } => self.on_persisted(number),
            NodeMsg::StateFlushed { upto } => {
                if let Err(err) = self.on_state_flushed(upto) {
                    tracing::error!(%err, "cannot truncate the raft log; stopping");
                    std::process::exit(2);
                }
            }
        }
    }

    /// A learner counts as in sync once it has 90% of the committed log,
    /// etcd's rule for promotion.
    fn learner_in_sync(&self, id: u64) -> Option<bool> {
        let raft = &self.raw.raft;
        if raft.state != StateRole::Leader {
            return None;
        }
        let matched = raft.prs().get(id).map_or(0, |progress| progress.matched);
        let committed = raft.raft_log.committed;
        Some(matched as f64 >= committed as f64 * 0.9)
    }

    /// Remembers who waits for a proposal. `before` is the last log index
    /// before proposing: if the proposal was appended to this member's own
    /// log (it leads), it sits right after it, and anything else applied at
    /// that index means it was lost. A follower forwards instead (its raft
    /// state may have changed within this turn), so nothing is recorded.
    fn track_proposal(
        &mut self,
        id: u64,
        before: u64,
        result: raft::Result<()>,
        reply: ProposalReply,
    ) {
        match result {
            Ok(()) => {
                let appended = self.raw.raft.raft_log.last_index();
                if self.raw.raft.state == StateRole::Leader && appended == before + 1 {
                    self.proposal_index.insert(appended, id);
                }
                self.waiters.insert(id, Waiter::new(reply));
            }
            Err(raft::Error::ProposalDropped) => {
                let _ = reply.done.send(Err(StoreError::NoLeader));
            }
            Err(err) => {
                let _ = reply.done.send(Err(StoreError::Storage(err.to_string())));
            }
        }
    }

    fn on_ready(&mut self) -> Result<()> {
        if !self.raw.has_ready() {
            return Ok(());
        }
        let mut ready = self.raw.ready();
        if let Some(soft) = ready.ss() {
            self.on_role_change(soft.leader_id, soft.raft_state);
        }
        self.send(ready.take_messages());
        if !ready.snapshot().is_empty() {
            self.install_snapshot(ready.snapshot().clone())?;
        }
        self.answer_reads(ready.take_read_states());
        self.hand_on_committed(ready.take_committed_entries())?;
        let staged = !ready.entries().is_empty() || ready.hs().is_some();
        if !ready.entries().is_empty() {
            let entries = ready.entries().len() as f64;
            self.config.metrics.entries_per_ready.observe(entries);
        }
        // raft reads appended entries back through `Storage` from
        // `advance_append_async` on, so they go in before it; they are
        // durable once the sync thread reports this Ready's number.
        self.log.append(ready.entries())?;
        if let Some(hard_state) = ready.hs() {
            self.log.set_hard_state(hard_state)?;
            self.status.term.store(hard_state.term, Ordering::Release);
            self.status
                .commit
                .fetch_max(hard_state.commit, Ordering::AcqRel);
        }
        if !ready.snapshot().is_empty() {
            return self.finish_synchronously(ready);
        }
        let inline = self.start_sync(&mut ready)?;
        let number = ready.number();
        self.raw.advance_append_async(ready);
        if inline {
            self.raw.on_persist_ready(number);
        }
        self.raw.advance_apply();
        self.publish_progress();
        if staged {
            self.truncate_log()?;
        }
        Ok(())
    }

    /// Makes a staged Ready durable, on this thread (returns true) or the
    /// log's sync thread, and sends its persisted messages once that is
    /// done: at once after an inline sync, on the sync thread's report
    /// otherwise.
    fn start_sync(&mut self, ready: &mut raft::Ready) -> Result<bool> {
        let persisted = ready.take_persisted_messages();
        let inline = ready.must_sync() && self.sync_inline(ready.entries().len());
        if inline {
            self.sync_now()?;
            self.send(persisted);
        } else if ready.must_sync() {
            self.unpersisted.push_back((ready.number(), persisted));
            if self.disk.log_sync.send(ready.number()).is_err() {
                return Err(StoreError::Storage(
                    "the raft log sync thread stopped".into(),
                ));
            }
        } else if let Some((_, waiting)) = self.unpersisted.back_mut() {
            // Nothing of this Ready needs a sync of its own (a new commit
            // index rides with the next one), but its messages keep their
            // order behind those of a Ready still being synced.
            waiting.extend(persisted);
        } else {
            self.send(persisted);
        }
        Ok(inline)
    }

    /// Whether to sync a Ready on this thread rather than the log sync
    /// thread's. Under light load (a Ready of a few entries, no sync under
    /// way) the hand-off costs more than it hides: two thread wake-ups per
    /// Ready, on the path of every single-client request. Under load the
    /// sync thread lets the loop build the next Ready during the sync.
    fn sync_inline(&self, entries: usize) -> bool {
        self.unpersisted.is_empty() && entries <= INLINE_SYNC_ENTRIES
    }

    fn sync_now(&self) -> Result<()> {
        let started = Instant::now();
        self.log.sync()?;
        self.config
            .metrics
            .flush_seconds
            .observe(started.elapsed().as_secs_f64());
        Ok(())
    }

    /// Ends a Ready that installed a snapshot the synchronous way: raft
    /// must not count the snapshot as applied before it counts it as
    /// persisted. The snapshot is durable already; one sync makes this and
    /// every earlier Ready durable, then `advance_append` says so.
    fn finish_synchronously(&mut self, mut ready: raft::Ready) -> Result<()> {
        self.log.sync()?;
        for (_, messages) in std::mem::take(&mut self.unpersisted) {
            self.send(messages);
        }
        self.send(ready.take_persisted_messages());
        let mut light = self.raw.advance_append(ready);
        if let Some(commit) = light.commit_index() {
            self.log.set_commit(commit)?;
            self.status.commit.fetch_max(commit, Ordering::AcqRel);
        }
        self.send(light.take_messages());
        self.hand_on_committed(light.take_committed_entries())?;
        self.raw.advance_apply();
        self.publish_progress();
        Ok(())
    }

    /// The log's sync thread made Readies up to `number` durable: raft may
    /// count their entries as this member's, and their messages may go.
    fn on_persisted(&mut self, number: u64) {
        self.raw.on_persist_ready(number);
        while self
            .unpersisted
            .front()
            .is_some_and(|(waiting, _)| *waiting <= number)
        {
            if let Some((_, messages)) = self.unpersisted.pop_front() {
                self.send(messages);
            }
        }
    }

    fn on_role_change(&mut self, leader: u64, role: StateRole) {
        self.status.leader.store(leader, Ordering::Release);
        let was_leader = self.role == StateRole::Leader;
        let is_leader = role == StateRole::Leader;
        if is_leader && !was_leader {
            // A new leader cannot know how long the old one last saw each
            // keep-alive, so every lease gets a full TTL plus an election.
            let extension = self.config.tick * self.config.election_ticks as u32;
            self.lessor.lock().promote(extension);
            tracing::info!(term = self.raw.raft.term, "became leader");
        } else if was_leader && !is_leader {
            self.lessor.lock().demote();
            tracing::info!(leader, "lost leadership");
        }
        self.role = role;
    }

    /// Replaces the state machine and the log with a leader's snapshot.
    fn install_snapshot(&mut self, snapshot: Snapshot) -> Result<()> {
        let meta = snapshot.get_metadata();
        tracing::info!(
            index = meta.index,
            term = meta.term,
            bytes = snapshot.data.len(),
            "installing snapshot"
        );
        // The snapshot's position is staged before the state machine it
        // restores: the backend may reach disk at any moment (a flush on
        // another thread), and a restored state found without its position
        // would be corrupt. The state goes to disk before the log drops
        // its entries (the log cannot replay what the snapshot replaces); a
        // crash in between is finished by
        // `RaftLog::finish_interrupted_snapshot` on the next start.
        RaftLog::record_snapshot_meta(&*self.backend, meta)?;
        self.applier.restore_snapshot(&snapshot.data)?;
        self.backend.flush()?;
        self.log.apply_snapshot(&snapshot)?;
        crate::snapshot::discard(&snapshot.data);
        self.applied = meta.index;
        self.config.metrics.snapshots_applied.inc();
        self.report_log_start();
        self.set_peers(peer_list(&self.applier.members()?));
        Ok(())
    }

    fn publish_progress(&mut self) {
        self.status
            .last_index
            .store(self.log.last_index(), Ordering::Release);
        self.status.applied.store(self.applied, Ordering::Release);
        self.applied_tx.send_if_modified(|applied| {
            let changed = *applied != self.applied;
            *applied = self.applied;
            changed
        });
    }

    /// Once `snapshot_count` applied entries beyond the catch-up window
    /// have piled up, or the log's entries hold `LOG_BYTES`, asks the flush
    /// thread to make the state machine durable. The state machine is not
    /// synced per Ready but replayed from the log after a crash, so no entry
    /// may go before what it built is on disk; the flush (long: all of
    /// sled's dirty state) runs beside the loop, and `on_state_flushed`
    /// drops the entries it covers.
    fn truncate_log(&mut self) -> Result<()> {
        if self.flushing {
            return Ok(());
        }
        let first = self.log.first_index();
        let keep = CATCH_UP_ENTRIES.min(self.config.snapshot_count);
        let applied = self.applied;
        let by_count = applied >= first + self.config.snapshot_count + keep;
        let by_bytes = !by_count
            && self.log.entry_bytes() >= LOG_BYTES
            && self.log.cut_keeping(applied, keep, CATCH_UP_BYTES) >= first;
        if !by_count && !by_bytes {
            return Ok(());
        }
        self.flushing = true;
        (self.disk.flush_state)
            .send(applied)
            .map_err(|_| StoreError::Storage("the state flush thread stopped".into()))
    }

    /// The state machine is durable up to applied index `upto`: entries
    /// before the catch-up window behind it go.
    fn on_state_flushed(&mut self, upto: u64) -> Result<()> {
        self.flushing = false;
        let keep = CATCH_UP_ENTRIES.min(self.config.snapshot_count);
        let upto = self.log.cut_keeping(upto, keep, CATCH_UP_BYTES);
        tracing::info!(upto, "truncating the raft log");
        self.log.truncate_front(upto)?;
        self.report_log_start();
        Ok(())
    }

    fn report_log_start(&self) {
        let first = self.log.first_index();
        self.config.metrics.log_first_index.set(first as i64);
        let bytes = self.log.entry_bytes();
        self.config.metrics.log_entry_bytes.set(bytes as i64);
    }
}
