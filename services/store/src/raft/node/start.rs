//! Starting the Ready loop: raft-rs's node over the log, the loop's inbox
//! and direct links, the threads that wait on the disk, then the loop's
//! own thread.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use parking_lot::Mutex;
use raft::{Config, RawNode, StateRole};
use tokio::sync::watch;

use super::{answers, peer_list, DiskThreads, Node, NodeConfig};
use crate::apply::Applier;
use crate::error::{Result, StoreError};
use crate::lease::Lessor;
use crate::membership::identity::ClusterId;
use crate::metrics::RaftMetrics;
use crate::raft::handle::{RaftHandle, RaftStatus};
use crate::raft::inbox::{Inbox, InboxSender};
use crate::raft::lanes::Lanes;
use crate::raft::logger::raft_logger;
use crate::raft::node_msg::NodeMsg;
use crate::raft_log::{spawn_log_sync, spawn_state_flusher, RaftLog};
use crate::storage::Backend;
use crate::transport::links::DirectLinks;
use crate::transport::Transport;

/// What the Ready loop works on, besides its configuration.
pub struct NodeParts {
    pub cluster_id: ClusterId,
    pub log: RaftLog,
    pub backend: Arc<dyn Backend>,
    pub applier: Applier,
    pub lessor: Arc<Mutex<Lessor>>,
    pub transport: Arc<dyn Transport>,
    /// The state machine's durable applied index.
    pub applied: u64,
}

/// Starts the Ready loop thread on a log and state machine that are open.
pub fn start_node(config: NodeConfig, parts: NodeParts) -> Result<RaftHandle> {
    // An entry is applied only once committed, so the commit index is at
    // least the applied one even if its own write was lost in a crash.
    let applied = parts.applied;
    (parts.log).finish_interrupted_snapshot(&*parts.backend, applied)?;
    parts.log.set_commit(applied)?;
    let raw = raw_node(&config, &parts.log, applied)?;
    let (inbox, tx) = Inbox::new().map_err(inbox_failed)?;
    let registry = inbox.registry().try_clone().map_err(inbox_failed)?;
    let links = DirectLinks::new(
        config.member_id,
        parts.cluster_id.clone(),
        tx.peer_feedback(),
        registry,
        config.metrics.clone(),
    );
    parts.transport.set_feedback(tx.peer_feedback());
    let peers = match peer_list(&parts.applier.members()?) {
        peers if peers.is_empty() => config.bootstrap_peers.clone(),
        peers => peers,
    };
    let disk = DiskThreads::spawn(&parts, &tx, &config.metrics)?;
    let (mut node, handle) = Node::new(config, parts, raw, links, disk, tx);
    node.report_log_start();
    node.set_peers(peers);
    std::thread::Builder::new()
        .name("raft-ready-loop".into())
        .spawn(move || node.run(inbox))
        .map_err(|err| StoreError::Storage(format!("spawn raft thread: {err}")))?;
    Ok(handle)
}

fn inbox_failed(err: std::io::Error) -> StoreError {
    StoreError::Storage(format!("raft inbox: {err}"))
}

/// raft-rs's node over `log`, campaigning at once if it is alone.
fn raw_node(config: &NodeConfig, log: &RaftLog, applied: u64) -> Result<RawNode<RaftLog>> {
    let raft_config = Config {
        id: config.member_id,
        election_tick: config.election_ticks,
        heartbeat_tick: config.heartbeat_ticks,
        applied,
        check_quorum: true,
        pre_vote: true,
        max_size_per_msg: 1024 * 1024,
        max_inflight_msgs: 256,
        max_uncommitted_size: 128 * 1024 * 1024,
        ..Default::default()
    };
    raft_config
        .validate()
        .map_err(|err| StoreError::Config(format!("raft: {err}")))?;
    let mut raw = RawNode::new(&raft_config, log.clone(), &raft_logger())
        .map_err(|err| StoreError::Storage(format!("raft node: {err}")))?;
    if log.conf_state().voters == [config.member_id] {
        // Alone in the group: no one to wait for, take the lead at once.
        let _ = raw.campaign();
    }
    Ok(raw)
}

impl DiskThreads {
    fn spawn(parts: &NodeParts, tx: &InboxSender, metrics: &RaftMetrics) -> Result<DiskThreads> {
        let report = |to_msg: fn(u64) -> NodeMsg| {
            let tx = tx.clone();
            Box::new(move |value| tx.send(to_msg(value)).is_ok())
        };
        let persisted = report(|number| NodeMsg::Persisted { number });
        let flushed = report(|upto| NodeMsg::StateFlushed { upto });
        Ok(DiskThreads {
            log_sync: spawn_log_sync(parts.log.clone(), persisted, metrics.clone())?,
            flush_state: spawn_state_flusher(parts.backend.clone(), flushed, metrics.clone())?,
        })
    }
}

/// Request ids are unique per member and per process start: the member's id
/// in the top bits, the start time below, then a counter.
fn first_request_id(member_id: u64) -> u64 {
    let millis = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0);
    ((member_id & 0xffff) << 48) | ((millis & 0xff_ffff_ffff) << 8)
}

impl Node {
    fn new(
        config: NodeConfig,
        parts: NodeParts,
        raw: RawNode<RaftLog>,
        links: DirectLinks,
        disk: DiskThreads,
        tx: InboxSender,
    ) -> (Node, RaftHandle) {
        let applied = parts.applied;
        let status = Arc::new(RaftStatus {
            member_id: config.member_id,
            ..Default::default()
        });
        status.applied.store(applied, Ordering::Release);
        (status.last_index).store(parts.log.last_index(), Ordering::Release);
        let (applied_tx, applied_rx) = watch::channel(applied);
        // Lane 0: the runtime starting the node, if it runs on one.
        let lanes = Arc::new(Lanes::default());
        lanes.open();
        let handle = RaftHandle {
            tx,
            status: status.clone(),
            applied: applied_rx,
            next_id: Arc::new(AtomicU64::new(first_request_id(config.member_id))),
            request_timeout: config.request_timeout,
            lanes: lanes.clone(),
        };
        let node = Node {
            raw,
            log: parts.log,
            backend: parts.backend,
            applier: parts.applier,
            lessor: parts.lessor,
            status,
            applied_tx,
            config,
            transport: parts.transport,
            links,
            socket_events: Vec::new(),
            waiters: HashMap::new(),
            answers: answers::Answers::new(lanes),
            proposal_index: HashMap::new(),
            pending_reads: Vec::new(),
            inflight_reads: HashMap::new(),
            next_read_ctx: 0,
            applied,
            role: StateRole::Follower,
            disk,
            unpersisted: VecDeque::new(),
            flushing: false,
        };
        (node, handle)
    }
}
