//! Direct peer links: raft messages to and from peers, written and read by
//! the Ready loop itself on non-blocking sockets (through a rustls session
//! for `https://` peers).
//!
//! Through gRPC (`grpc.rs`) a message crossed from the loop's thread
//! to the async runtime and back on each member: at one client on three
//! members that was about two thirds of the cluster's CPU per linearizable
//! read, most of it threads waking each other. Here the loop writes a
//! Ready's messages to the peer's socket and steps what arrives on its own
//! sockets, woken by the same poller as its inbox (`raft/inbox.rs`): the
//! loop hands the links that poller's registry, and the links number their
//! sockets from [`FIRST_TOKEN`] on.
//!
//! Each member dials each peer once and sends on that link only; what it
//! receives comes on the links its peers dialed. Connecting happens on the
//! runtime (`dial.rs`), and so do the TLS handshakes; the listener's side
//! is in `accept.rs`. Snapshots still go through gRPC.

pub mod accept;
mod conn;
mod dial;
mod frame;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use capstan_proto::peer::RaftBatch;
use mio::{Interest, Registry, Token};
use protobuf::Message as _;
use raft::eraftpb::{Message, MessageType};
use tokio_rustls::rustls;

use super::backoff::Backoff;
use super::interface::Feedback;
use crate::membership::identity::ClusterId;
use crate::metrics::RaftMetrics;
use conn::Conn;
pub use dial::link_target;
use dial::{Dial, Target};
use frame::put_frame;

/// The poller's first token for a link's socket; those below are the
/// poller owner's own.
pub const FIRST_TOKEN: Token = Token(1);

/// Bytes a connected link may have waiting for its socket; past that new
/// messages are dropped and raft hears the peer is unreachable.
const CONNECTED_BACKLOG: usize = 32 * 1024 * 1024;
/// Bytes kept for a link that is still connecting.
const DIALING_BACKLOG: usize = 4 * 1024 * 1024;
/// A link whose queued bytes the socket has not taken for this long is
/// taken for dead (a partition drops packets without an error) and redialed.
const STALL_LIMIT: Duration = Duration::from_secs(3);
/// A link that broke sooner than this after it came up is redialed only
/// after a pause that doubles each time (a peer refusing our hello).
const STEADY: Duration = Duration::from_secs(5);

struct OutLink {
    target: Target,
    generation: u64,
    wanted: Arc<AtomicBool>,
    conn: Option<(Token, Conn, Instant)>,
    /// Frames queued while the link connects.
    pending: Vec<u8>,
    /// Pauses before redialing a link that keeps breaking.
    redial: Backoff,
}

enum Slot {
    Out(u64),
    /// A link a peer dialed, by that peer's id.
    In(u64, Conn),
}

pub struct DirectLinks {
    local_id: u64,
    cluster_id: ClusterId,
    runtime: Option<tokio::runtime::Handle>,
    feedback: Feedback,
    registry: Registry,
    links: HashMap<u64, OutLink>,
    slots: HashMap<Token, Slot>,
    next_token: usize,
    generation: u64,
    metrics: RaftMetrics,
}

impl DirectLinks {
    pub fn new(
        local_id: u64,
        cluster_id: ClusterId,
        feedback: Feedback,
        registry: Registry,
        metrics: RaftMetrics,
    ) -> DirectLinks {
        DirectLinks {
            local_id,
            cluster_id,
            runtime: tokio::runtime::Handle::try_current().ok(),
            feedback,
            registry,
            links: HashMap::new(),
            slots: HashMap::new(),
            next_token: FIRST_TOKEN.0,
            generation: 0,
            metrics,
        }
    }

    /// Keeps a link to every peer whose first URL has a link target,
    /// replacing those whose target changed and dropping those no longer
    /// listed.
    pub fn set_peers(&mut self, peers: &[(u64, Vec<String>)]) {
        let wanted: HashMap<u64, Target> = peers
            .iter()
            .filter(|(id, _)| *id != self.local_id)
            .filter_map(|(id, urls)| Some((*id, link_target(urls.first()?)?)))
            .collect();
        let stale: Vec<u64> = (self.links.iter())
            .filter(|(id, link)| wanted.get(id) != Some(&link.target))
            .map(|(id, _)| *id)
            .collect();
        for id in stale {
            self.drop_link(id);
        }
        for (id, target) in wanted {
            if !self.links.contains_key(&id) {
                self.open_link(id, target);
            }
        }
    }

    /// Whether messages to `to` go on a direct link.
    pub fn handles(&self, to: u64) -> bool {
        self.links.contains_key(&to)
    }

    fn open_link(&mut self, to: u64, target: Target) {
        let link = OutLink {
            target,
            generation: 0,
            wanted: Arc::new(AtomicBool::new(false)),
            conn: None,
            pending: Vec::new(),
            redial: Backoff::default(),
        };
        self.links.insert(to, link);
        self.dial(to, Duration::ZERO);
    }

    fn drop_link(&mut self, to: u64) {
        if let Some(mut link) = self.links.remove(&to) {
            link.wanted.store(false, Ordering::Release);
            if let Some((token, mut conn, _)) = link.conn.take() {
                let _ = self.registry.deregister(&mut conn.stream);
                self.slots.remove(&token);
            }
        }
    }

    /// Starts connecting `to`'s link after `delay`.
    fn dial(&mut self, to: u64, delay: Duration) {
        self.generation += 1;
        let Some(link) = self.links.get_mut(&to) else {
            return;
        };
        link.wanted.store(false, Ordering::Release);
        link.wanted = Arc::new(AtomicBool::new(true));
        link.generation = self.generation;
        let dial = Dial {
            to,
            from: self.local_id,
            cluster_id: self.cluster_id.clone(),
            target: link.target.clone(),
            generation: link.generation,
            wanted: link.wanted.clone(),
            feedback: self.feedback.clone(),
        };
        if let Some(runtime) = &self.runtime {
            runtime.spawn(async move {
                tokio::time::sleep(delay).await;
                dial.run().await
            });
        }
    }

    /// The runtime connected `to`; a socket for a link since replaced is
    /// dropped.
    pub fn link_up(
        &mut self,
        to: u64,
        generation: u64,
        stream: std::net::TcpStream,
        tls: Option<Box<rustls::Connection>>,
    ) {
        let Some(link) = self.links.get_mut(&to) else {
            return;
        };
        if link.generation != generation || link.conn.is_some() {
            return;
        }
        let mut conn = Conn::new(mio::net::TcpStream::from_std(stream), tls);
        let token = Token(self.next_token);
        self.next_token += 1;
        let interest = Interest::READABLE | Interest::WRITABLE;
        if let Err(err) = self.registry.register(&mut conn.stream, token, interest) {
            tracing::warn!(%err, "cannot watch a peer link");
            let delay = link.redial.pause();
            return self.dial(to, delay);
        }
        tracing::info!(
            to = format!("{to:x}"),
            tls = link.target.tls.is_some(),
            "peer link up"
        );
        conn.queue().append(&mut link.pending);
        link.conn = Some((token, conn, Instant::now()));
        self.slots.insert(token, Slot::Out(to));
    }

    /// Peer `from` dialed us and the listener checked its hello. A link
    /// it dialed before is dead to it: that socket goes.
    pub fn inbound(
        &mut self,
        from: u64,
        stream: std::net::TcpStream,
        tls: Option<Box<rustls::Connection>>,
    ) {
        let older: Vec<Token> = (self.slots.iter())
            .filter(|(_, slot)| matches!(slot, Slot::In(id, _) if *id == from))
            .map(|(token, _)| *token)
            .collect();
        for token in older {
            if let Some(Slot::In(_, mut conn)) = self.slots.remove(&token) {
                let _ = self.registry.deregister(&mut conn.stream);
            }
        }
        let mut conn = Conn::new(mio::net::TcpStream::from_std(stream), tls);
        let token = Token(self.next_token);
        self.next_token += 1;
        // Writable too: a TLS session may owe the dialer records.
        let interest = Interest::READABLE | Interest::WRITABLE;
        match self.registry.register(&mut conn.stream, token, interest) {
            Ok(()) => {
                self.slots.insert(token, Slot::In(from, conn));
            }
            Err(err) => tracing::warn!(%err, "cannot watch a peer link"),
        }
    }

    /// Queues and writes `messages`: those for peers on direct links go
    /// there; the rest (snapshots, other peers) are left in `rest`. Peers
    /// whose link could not take them are added to `unreachable`.
    pub fn send(
        &mut self,
        messages: Vec<Message>,
        rest: &mut Vec<Message>,
        unreachable: &mut Vec<u64>,
    ) {
        let mut batches: Vec<(u64, Vec<Vec<u8>>)> = Vec::new();
        for message in messages {
            let direct =
                self.handles(message.to) && message.get_msg_type() != MessageType::MsgSnapshot;
            if !direct {
                rest.push(message);
                continue;
            }
            let bytes = message.write_to_bytes().expect("raft message encodes");
            match batches.iter_mut().find(|(to, _)| *to == message.to) {
                Some((_, queued)) => queued.push(bytes),
                None => batches.push((message.to, vec![bytes])),
            }
        }
        for (to, messages) in batches {
            let batch = RaftBatch {
                from: self.local_id,
                cluster_id: 0,
                messages,
            };
            if !self.write(to, &batch) {
                self.metrics.peer_sent_failures.inc();
                unreachable.push(to);
            }
        }
    }

    /// Whether `to`'s link took the batch.
    fn write(&mut self, to: u64, batch: &RaftBatch) -> bool {
        let Some(link) = self.links.get_mut(&to) else {
            return false;
        };
        let Some((_, conn, _)) = &mut link.conn else {
            if link.pending.len() >= DIALING_BACKLOG {
                return false;
            }
            put_frame(batch, &mut link.pending);
            return true;
        };
        if conn.backlog() >= CONNECTED_BACKLOG {
            return false;
        }
        put_frame(batch, conn.queue());
        match conn.flush() {
            Ok(sent) => {
                self.metrics.peer_sent_bytes.inc_by(sent as u64);
                true
            }
            Err(err) => {
                self.break_link(to, &err.to_string());
                false
            }
        }
    }

    /// Drops `to`'s socket and dials again.
    fn break_link(&mut self, to: u64, why: &str) {
        let Some(link) = self.links.get_mut(&to) else {
            return;
        };
        let mut delay = link.redial.pause();
        if let Some((token, mut conn, since)) = link.conn.take() {
            tracing::debug!(to = format!("{to:x}"), why, "peer link broke");
            let _ = self.registry.deregister(&mut conn.stream);
            self.slots.remove(&token);
            if since.elapsed() >= STEADY {
                link.redial.reset();
                delay = Duration::ZERO;
            }
        }
        self.dial(to, delay);
    }

    /// Handles a socket the poller found ready: writes what waits, reads
    /// what arrived into `received`. Broken links are redialed and their
    /// peers added to `unreachable`.
    pub fn on_event(
        &mut self,
        token: Token,
        readable: bool,
        writable: bool,
        received: &mut Vec<Message>,
        unreachable: &mut Vec<u64>,
    ) {
        match self.slots.get_mut(&token) {
            Some(Slot::Out(to)) => {
                let to = *to;
                if let Err(why) = self.on_out_event(to, readable, writable) {
                    self.break_link(to, &why);
                    unreachable.push(to);
                }
            }
            Some(Slot::In(_, conn)) => {
                let mut handled = Ok(0);
                if writable {
                    handled = conn.flush().map(|_| 0).map_err(|e| e.to_string());
                }
                // Read on any event: a TLS session handed over may hold
                // records it read before the socket was watched.
                if handled.is_ok() {
                    handled = read_messages(conn, received);
                }
                match handled {
                    Ok(bytes) => {
                        self.metrics.peer_received_bytes.inc_by(bytes as u64);
                    }
                    Err(why) => {
                        tracing::debug!(why, "inbound peer link closed");
                        if let Some(Slot::In(_, mut conn)) = self.slots.remove(&token) {
                            let _ = self.registry.deregister(&mut conn.stream);
                        }
                    }
                }
            }
            None => {}
        }
    }

    fn on_out_event(&mut self, to: u64, readable: bool, writable: bool) -> Result<(), String> {
        let Some((_, conn, _)) = self.links.get_mut(&to).and_then(|l| l.conn.as_mut()) else {
            return Ok(());
        };
        if writable {
            let sent = conn.flush().map_err(|e| e.to_string())?;
            self.metrics.peer_sent_bytes.inc_by(sent as u64);
        }
        if readable {
            // Nothing is sent back on a link we dialed: a readable socket
            // is a closed one (or a confused peer).
            let mut ignored = Vec::new();
            read_messages(conn, &mut ignored)?;
        }
        Ok(())
    }

    /// Redials links whose bytes have waited too long; their peers go in
    /// `unreachable`.
    pub fn check_stalls(&mut self, unreachable: &mut Vec<u64>) {
        let stalled: Vec<u64> = (self.links.iter())
            .filter(|(_, link)| {
                link.conn
                    .as_ref()
                    .is_some_and(|(_, conn, _)| conn.stalled_for() >= STALL_LIMIT)
            })
            .map(|(id, _)| *id)
            .collect();
        for to in stalled {
            self.break_link(to, "the peer took nothing for too long");
            unreachable.push(to);
        }
    }
}

/// Reads a socket's batches and decodes their messages into `received`;
/// returns the bytes read.
fn read_messages(conn: &mut Conn, received: &mut Vec<Message>) -> Result<usize, String> {
    let mut bad = None;
    let bytes = conn
        .read(|batch| {
            for bytes in &batch.messages {
                match Message::parse_from_bytes(bytes) {
                    Ok(message) => received.push(message),
                    Err(err) => bad = Some(err.to_string()),
                }
            }
        })
        .map_err(|e| e.to_string())?;
    bad.map_or(Ok(bytes), Err)
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tls_tests;
