//! The Ready loop's side of talking to peers: which way each message goes
//! (a direct link the loop writes itself, or the gRPC transport), and what
//! the loop's own sockets brought.

use raft::eraftpb::Message;

use super::Node;
use crate::raft::inbox::Inbox;
use crate::transport::PeerEvent;

impl Node {
    pub(super) fn send(&mut self, messages: Vec<Message>) {
        if messages.is_empty() {
            return;
        }
        let mut rest = Vec::new();
        let mut unreachable = Vec::new();
        self.links.send(messages, &mut rest, &mut unreachable);
        self.report_unreachable(unreachable);
        if !rest.is_empty() {
            self.transport.send(rest);
        }
    }

    /// Points both ways of sending at a new set of peers.
    pub(super) fn set_peers(&mut self, peers: Vec<(u64, Vec<String>)>) {
        self.links.set_peers(&peers);
        self.transport.set_peers(peers);
    }

    /// What the transport reported.
    pub(super) fn on_peer_event(&mut self, event: PeerEvent) {
        match event {
            PeerEvent::Unreachable { to } => self.raw.report_unreachable(to),
            PeerEvent::SnapshotReport { to, status } => self.raw.report_snapshot(to, status),
            PeerEvent::LinkUp {
                to,
                generation,
                stream,
                tls,
            } => self.links.link_up(to, generation, stream, tls),
            PeerEvent::LinkFrom { from, stream, tls } => self.links.inbound(from, stream, tls),
        }
    }

    /// Reads and writes the sockets the last wait found ready, and steps
    /// the messages that arrived.
    pub(super) fn on_sockets(&mut self, inbox: &Inbox) {
        let mut events = std::mem::take(&mut self.socket_events);
        inbox.socket_events(&mut events);
        let mut received = Vec::new();
        let mut unreachable = Vec::new();
        for &(token, readable, writable) in &events {
            (self.links).on_event(token, readable, writable, &mut received, &mut unreachable);
        }
        self.socket_events = events;
        self.report_unreachable(unreachable);
        for message in received {
            if let Err(err) = self.raw.step(message) {
                tracing::debug!(%err, "raft rejected a peer message");
            }
        }
    }

    /// Once per tick: links whose peer stopped taking bytes are redialed.
    pub(super) fn check_links(&mut self) {
        let mut unreachable = Vec::new();
        self.links.check_stalls(&mut unreachable);
        self.report_unreachable(unreachable);
    }

    fn report_unreachable(&mut self, peers: Vec<u64>) {
        for to in peers {
            self.raw.report_unreachable(to);
        }
    }
}
