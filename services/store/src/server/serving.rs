//! The runtimes that serve client connections: one per core, each a
//! current-thread runtime on a thread of its own, owning the connections
//! handed to it and answered by a lane of its own from the Ready loop
//! (`raft/lanes.rs`).
//!
//! On one runtime thread the tasks a batch of answers wakes run in order,
//! the requests' first, so each connection writes all its ready responses
//! at once. But one thread served every connection: HTTP/2 framing,
//! protobuf, the loopback's TCP path, about 18 µs of CPU per put, the
//! store's ceiling near 55,000 puts/s whatever the machine. Several such
//! runtimes keep each one's batching and share the connections out, so
//! the serving work grows with the cores.

use std::io;
use std::thread::JoinHandle;

use tokio::net::{TcpListener, TcpStream};
use tokio::runtime::Handle;
use tokio::sync::{mpsc, oneshot, watch};
use tokio_stream::wrappers::ReceiverStream;
use tokio_stream::{Stream, StreamExt};

use crate::error::{Result, StoreError};
use crate::raft::RaftHandle;

/// Connections accepted but not yet taken up by their runtime.
const HANDED_OUT: usize = 256;

/// The serving runtimes' threads; stopped on [`ServingRuntimes::stop`].
pub struct ServingRuntimes {
    handles: Vec<Handle>,
    stops: Vec<oneshot::Sender<()>>,
    threads: Vec<JoinHandle<()>>,
}

impl ServingRuntimes {
    /// Starts `count` runtimes, each with its answer lane open.
    pub fn start(count: usize, raft: &RaftHandle) -> Result<ServingRuntimes> {
        let mut runtimes = ServingRuntimes {
            handles: Vec::new(),
            stops: Vec::new(),
            threads: Vec::new(),
        };
        for at in 0..count.max(1) {
            let (stop, stopped) = oneshot::channel();
            let (started, handle) = std::sync::mpsc::channel();
            let raft = raft.clone();
            let thread = std::thread::Builder::new()
                .name(format!("serve-{at}"))
                .spawn(move || run_runtime(raft, started, stopped))
                .map_err(|err| StoreError::Storage(format!("spawn serving thread: {err}")))?;
            let handle = handle
                .recv()
                .map_err(|_| StoreError::Storage("a serving runtime failed to start".into()))?;
            runtimes.handles.push(handle);
            runtimes.stops.push(stop);
            runtimes.threads.push(thread);
        }
        Ok(runtimes)
    }

    pub fn handles(&self) -> &[Handle] {
        &self.handles
    }

    /// Stops every runtime; what still runs on them is dropped.
    pub fn stop(self) {
        for stop in self.stops {
            let _ = stop.send(());
        }
        for thread in self.threads {
            let _ = thread.join();
        }
    }
}

fn run_runtime(
    raft: RaftHandle,
    started: std::sync::mpsc::Sender<Handle>,
    stopped: oneshot::Receiver<()>,
) {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => return tracing::error!(%err, "cannot start a serving runtime"),
    };
    runtime.block_on(async move {
        raft.open_answer_lane();
        if started.send(Handle::current()).is_ok() {
            let _ = stopped.await;
        }
    });
}

/// Accepts on `listener` until `stop`, handing the connections to the
/// runtimes' queues in turn (a runtime whose server has ended is passed
/// over from then on).
pub async fn hand_out(
    listener: TcpListener,
    mut queues: Vec<mpsc::Sender<std::net::TcpStream>>,
    mut stop: watch::Receiver<bool>,
) {
    let mut next = 0;
    while !queues.is_empty() {
        let accepted = tokio::select! {
            _ = stop.wait_for(|stopped| *stopped) => return,
            accepted = listener.accept() => accepted,
        };
        let mut stream = match accepted.and_then(|(stream, _)| stream.into_std()) {
            Ok(stream) => stream,
            Err(err) => {
                // Out of descriptors, usually: wait rather than spin.
                tracing::warn!(%err, "accepting a client connection");
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                continue;
            }
        };
        while !queues.is_empty() {
            let at = next % queues.len();
            match queues[at].send(stream).await {
                Ok(()) => break,
                Err(unsent) => {
                    tracing::error!("a serving runtime's server has ended; passing it over");
                    stream = unsent.0;
                    queues.remove(at);
                }
            }
        }
        next += 1;
    }
}

/// The connections handed to one runtime, as tonic takes them: on this
/// runtime's reactor, with Nagle's algorithm off (a small response must not
/// wait for the client's delayed ACK).
pub fn incoming(
    queue: mpsc::Receiver<std::net::TcpStream>,
) -> impl Stream<Item = io::Result<TcpStream>> {
    ReceiverStream::new(queue).map(|stream| {
        let stream = TcpStream::from_std(stream)?;
        stream.set_nodelay(true)?;
        Ok(stream)
    })
}

/// A queue for one runtime's connections.
pub fn queue() -> (
    mpsc::Sender<std::net::TcpStream>,
    mpsc::Receiver<std::net::TcpStream>,
) {
    mpsc::channel(HANDED_OUT)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn connections_go_to_the_runtimes_in_turn_passing_over_an_ended_one() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (first, mut first_rx) = queue();
        let (second, second_rx) = queue();
        let (third, mut third_rx) = queue();
        drop(second_rx);
        let (stop_tx, stop) = watch::channel(false);
        let handing = tokio::spawn(hand_out(listener, vec![first, second, third], stop));
        let mut clients = Vec::new();
        for _ in 0..4 {
            clients.push(TcpStream::connect(addr).await.unwrap());
        }
        let peer = |stream: std::net::TcpStream| stream.peer_addr().unwrap();
        let mine: Vec<_> = clients.iter().map(|c| c.local_addr().unwrap()).collect();
        let (a, b) = (
            first_rx.recv().await.unwrap(),
            third_rx.recv().await.unwrap(),
        );
        let (c, d) = (
            first_rx.recv().await.unwrap(),
            third_rx.recv().await.unwrap(),
        );
        assert_eq!(
            [peer(a), peer(b), peer(c), peer(d)].to_vec(),
            mine,
            "handed out in turn, the ended runtime passed over"
        );
        stop_tx.send(true).unwrap();
        handing.await.unwrap();
    }

    #[tokio::test]
    async fn a_handed_connection_serves_on_the_taking_runtime() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (server, _) = listener.accept().unwrap();
        server.set_nonblocking(true).unwrap();
        let (tx, rx) = queue();
        tx.send(server).await.unwrap();
        drop(tx);
        let taken: Vec<_> = incoming(rx).collect().await;
        let stream = taken.into_iter().next().unwrap().unwrap();
        assert!(stream.nodelay().unwrap());
        assert_eq!(stream.peer_addr().unwrap(), client.local_addr().unwrap());
    }
}
