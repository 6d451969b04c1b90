//! Sending raft messages to peers over the gRPC peer service: snapshots to
//! every peer, and the other messages to peers without a direct link from
//! the Ready loop (`links/`): `https://` peers when the links have no TLS
//! client (as in unit tests).
//!
//! Each such peer has a link: a bounded queue drained by its own task, which
//! keeps one client stream open and sends batches of whatever is queued.
//! A full queue or a broken stream never blocks the Ready loop: messages are
//! dropped (raft retransmits) and raft is told the peer is unreachable.
//! Snapshots go on a stream of their own, in chunks.

use std::collections::HashMap;
use std::time::Duration;

use capstan_proto::peer::peer_client::PeerClient;
use capstan_proto::peer::{RaftBatch, SnapshotChunk};
use futures::StreamExt;
use parking_lot::Mutex;
use protobuf::Message as _;
use raft::eraftpb::{Message, MessageType};
use raft::SnapshotStatus;
use tokio::io::AsyncReadExt;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::transport::Channel;

use super::backoff::Backoff;
use super::interface::{Feedback, PeerEvent, Transport};
use super::links;
use crate::membership::identity::ClusterId;

/// Messages queued per peer before new ones are dropped.
const LINK_QUEUE: usize = 4096;
/// Messages sent in one batch at most.
const MAX_BATCH: usize = 512;
const SNAPSHOT_CHUNK: usize = 1024 * 1024;

struct Link {
    urls: Vec<String>,
    /// None for a peer on a direct link: only its URLs are kept, for
    /// snapshots.
    queue: Option<mpsc::Sender<Message>>,
}

pub struct GrpcTransport {
    local_id: u64,
    cluster_id: ClusterId,
    runtime: tokio::runtime::Handle,
    feedback: Mutex<Option<Feedback>>,
    links: Mutex<HashMap<u64, Link>>,
}

impl GrpcTransport {
    pub fn new(local_id: u64, cluster_id: ClusterId, runtime: tokio::runtime::Handle) -> Self {
        GrpcTransport {
            local_id,
            cluster_id,
            runtime,
            feedback: Mutex::new(None),
            links: Mutex::new(HashMap::new()),
        }
    }

    fn report(&self, event: PeerEvent) {
        if let Some(feedback) = self.feedback.lock().as_ref() {
            let _ = feedback(event);
        }
    }

    fn open_link(&self, to: u64, urls: Vec<String>) -> Link {
        let direct = urls
            .first()
            .and_then(|url| links::link_target(url))
            .is_some();
        if direct {
            return Link { urls, queue: None };
        }
        let (queue, rx) = mpsc::channel(LINK_QUEUE);
        let pump = LinkPump {
            to,
            from: self.local_id,
            cluster_id: self.cluster_id.clone(),
            url: urls.first().cloned().unwrap_or_default(),
            feedback: self.feedback.lock().clone(),
        };
        self.runtime.spawn(pump.run(rx));
        Link {
            urls,
            queue: Some(queue),
        }
    }

    fn send_snapshot(&self, message: Message) {
        let Some(url) = self
            .links
            .lock()
            .get(&message.to)
            .and_then(|l| l.urls.first().cloned())
        else {
            crate::snapshot::discard(&message.get_snapshot().data);
            return;
        };
        let feedback = self.feedback.lock().clone();
        let from = self.local_id;
        let cluster_id = self.cluster_id.get();
        self.runtime.spawn(async move {
            let to = message.to;
            let status = match send_snapshot(&url, from, cluster_id, message).await {
                Ok(()) => SnapshotStatus::Finish,
                Err(err) => {
                    tracing::warn!(to = format!("{to:x}"), %err, "sending snapshot failed");
                    SnapshotStatus::Failure
                }
            };
            if let Some(feedback) = feedback {
                let _ = feedback(PeerEvent::SnapshotReport { to, status });
            }
        });
    }
}

impl Transport for GrpcTransport {
    fn set_feedback(&self, feedback: Feedback) {
        *self.feedback.lock() = Some(feedback);
    }

    fn send(&self, messages: Vec<Message>) {
        for message in messages {
            if message.get_msg_type() == MessageType::MsgSnapshot {
                self.send_snapshot(message);
                continue;
            }
            let to = message.to;
            let queued = match self.links.lock().get(&to) {
                Some(Link {
                    queue: Some(queue), ..
                }) => queue.try_send(message).is_ok(),
                _ => false,
            };
            if !queued {
                self.report(PeerEvent::Unreachable { to });
            }
        }
    }

    fn set_peers(&self, peers: Vec<(u64, Vec<String>)>) {
        let mut links = self.links.lock();
        links.retain(|id, _| peers.iter().any(|(p, _)| p == id));
        for (id, urls) in peers {
            if id == self.local_id {
                continue;
            }
            let stale = links.get(&id).is_none_or(|l| l.urls != urls);
            if stale {
                let link = self.open_link(id, urls);
                links.insert(id, link);
            }
        }
    }
}

/// The task behind one link: connect, stream batches, reconnect on failure.
struct LinkPump {
    to: u64,
    from: u64,
    cluster_id: ClusterId,
    url: String,
    feedback: Option<Feedback>,
}

impl LinkPump {
    async fn run(self, mut rx: mpsc::Receiver<Message>) {
        let mut backoff = Backoff::default();
        loop {
            match connect(&self.url).await {
                Ok(channel) => {
                    backoff.reset();
                    if !self.stream(channel, &mut rx).await {
                        return; // the transport dropped this link
                    }
                }
                Err(err) => {
                    tracing::debug!(to = format!("{:x}", self.to), %err, "peer unreachable")
                }
            }
            // A link replaced (`member update`) or removed while its peer was
            // down ends here; left running, it would dial the old URL and
            // report the peer unreachable forever.
            if rx.is_closed() {
                return;
            }
            if let Some(feedback) = &self.feedback {
                let _ = feedback(PeerEvent::Unreachable { to: self.to });
            }
            tokio::time::sleep(backoff.pause()).await;
        }
    }

    /// Streams until the call fails (true) or the queue closes (false).
    async fn stream(&self, channel: Channel, rx: &mut mpsc::Receiver<Message>) -> bool {
        let mut client = PeerClient::new(channel);
        let (batches, batch_rx) = mpsc::channel::<RaftBatch>(16);
        let call = client.raft(ReceiverStream::new(batch_rx));
        tokio::pin!(call);
        loop {
            tokio::select! {
                _ = &mut call => return true,
                next = rx.recv() => {
                    let Some(first) = next else { return false };
                    let mut messages = vec![encode(&first)];
                    while messages.len() < MAX_BATCH {
                        match rx.try_recv() {
                            Ok(message) => messages.push(encode(&message)),
                            Err(_) => break,
                        }
                    }
                    let batch = RaftBatch { from: self.from, cluster_id: self.cluster_id.get(), messages };
                    if batches.send(batch).await.is_err() {
                        return true;
                    }
                }
            }
        }
    }
}

fn encode(message: &Message) -> Vec<u8> {
    message.write_to_bytes().expect("raft message encodes")
}

async fn connect(url: &str) -> Result<Channel, tonic::transport::Error> {
    crate::tls::peer_endpoint(url)?
        .connect_timeout(Duration::from_secs(1))
        .tcp_nodelay(true)
        .http2_keep_alive_interval(Duration::from_secs(5))
        .connect()
        .await
}

/// Streams the snapshot file `message` names, a chunk at a time (the
/// message goes first, its data still naming the file so the receiver can
/// check size and checksum), then removes the file: a retry cuts a new one.
async fn send_snapshot(
    url: &str,
    from: u64,
    cluster_id: u64,
    message: Message,
) -> Result<(), String> {
    let data = message.get_snapshot().data.to_vec();
    let sent = stream_snapshot(url, from, cluster_id, message).await;
    crate::snapshot::discard(&data);
    sent
}

async fn stream_snapshot(
    url: &str,
    from: u64,
    cluster_id: u64,
    message: Message,
) -> Result<(), String> {
    let (_, file) =
        crate::snapshot::open(&message.get_snapshot().data).map_err(|e| e.to_string())?;
    let first = SnapshotChunk {
        from,
        message: encode(&message),
        data: Vec::new(),
        cluster_id,
    };
    // A read error ends the stream early; the receiver then finds the
    // size or checksum wrong and refuses the snapshot.
    let file = tokio::fs::File::from_std(file);
    let rest = futures::stream::unfold(file, move |mut file| async move {
        let mut data = vec![0; SNAPSHOT_CHUNK];
        let mut filled = 0;
        while filled < data.len() {
            match file.read(&mut data[filled..]).await {
                Ok(0) => break,
                Ok(n) => filled += n,
                Err(err) => {
                    tracing::warn!(%err, "reading a snapshot file");
                    return None;
                }
            }
        }
        data.truncate(filled);
        (filled > 0).then(|| {
            let chunk = SnapshotChunk {
                from,
                message: Vec::new(),
                data,
                cluster_id,
            };
            (chunk, file)
        })
    });
    let chunks = futures::stream::iter([first]).chain(rest);
    let channel = connect(url).await.map_err(|e| e.to_string())?;
    let mut client = PeerClient::new(channel).max_decoding_message_size(64 * 1024 * 1024);
    client.snapshot(chunks).await.map_err(|e| e.to_string())?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A port nothing listens on: bound, then released.
    fn closed_port() -> u16 {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_link_dropped_while_its_peer_is_down_stops() {
        let transport = GrpcTransport::new(1, ClusterId::new(1), tokio::runtime::Handle::current());
        let (reported, reports) = std::sync::mpsc::channel();
        let feedback: Feedback = std::sync::Arc::new(move |event| {
            reported
                .send(event)
                .map_err(|_| crate::transport::interface::LoopStopped)
        });
        transport.set_feedback(feedback);
        // Plain URLs get direct links; this transport keeps https ones.
        let down = format!("https://127.0.0.1:{}", closed_port());
        transport.set_peers(vec![(2, vec![down])]);
        let first = tokio::task::spawn_blocking(move || {
            let first = reports.recv_timeout(Duration::from_secs(30));
            (first, reports)
        });
        let (first, reports) = first.await.unwrap();
        assert!(matches!(first, Ok(PeerEvent::Unreachable { to: 2 })));

        // Once the link is gone and the transport dropped, the last sender of
        // reports goes with the pump's task: the channel disconnects.
        transport.set_peers(Vec::new());
        drop(transport);
        let end = tokio::task::spawn_blocking(move || {
            let deadline = std::time::Instant::now() + Duration::from_secs(30);
            loop {
                let left = deadline.saturating_duration_since(std::time::Instant::now());
                match reports.recv_timeout(left) {
                    Ok(_) => continue,
                    Err(err) => return err,
                }
            }
        });
        assert_eq!(
            end.await.unwrap(),
            std::sync::mpsc::RecvTimeoutError::Disconnected,
            "the pump of a removed link still runs"
        );
    }
}
