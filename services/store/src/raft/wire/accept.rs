//! The listener's side of direct links. A plain peer listener serves two
//! kinds of connection: direct raft links, which begin with `MAGIC`, and
//! HTTP/2 for the peer gRPC service (snapshots, forwarded lease requests).
//! One peeked byte tells them apart; a direct link's hello is checked
//! (`admit`) and its socket handed to the Ready loop, everything else is
//! passed on to the gRPC server.

use std::io;
use std::sync::Arc;
use std::time::Duration;

use capstan_proto::peer::RaftBatch;
use prost::Message as _;
use tokio::io::AsyncReadExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;

use super::frame::MAGIC;
use crate::raft::RaftHandle;

/// How long a new connection may take to say what it is.
const HELLO_TIMEOUT: Duration = Duration::from_secs(10);
/// A hello names two ids: a few bytes.
const MAX_HELLO: usize = 1024;

/// Decides whether a hello's sender (member id, cluster id) may link.
pub type Admit = Arc<dyn Fn(u64, u64) -> Result<(), String> + Send + Sync>;

/// Accepts on `listener` until the returned stream is dropped; the
/// stream yields the connections that are not direct raft links.
pub fn split_listener(
    listener: TcpListener,
    admit: Admit,
    raft: RaftHandle,
) -> ReceiverStream<io::Result<TcpStream>> {
    let (others, rx) = mpsc::channel(64);
    tokio::spawn(async move {
        loop {
            let accepted = tokio::select! {
                _ = others.closed() => return,
                accepted = listener.accept() => accepted,
            };
            match accepted {
                Ok((stream, _)) => {
                    let _ = stream.set_nodelay(true);
                    let route = route(stream, others.clone(), admit.clone(), raft.clone());
                    tokio::spawn(route);
                }
                Err(err) => {
                    // Out of descriptors, usually: wait rather than spin.
                    tracing::warn!(%err, "accepting a peer connection");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
        }
    });
    ReceiverStream::new(rx)
}

async fn route(
    mut stream: TcpStream,
    others: mpsc::Sender<io::Result<TcpStream>>,
    admit: Admit,
    raft: RaftHandle,
) {
    let mut first = [0u8; 1];
    match tokio::time::timeout(HELLO_TIMEOUT, stream.peek(&mut first)).await {
        Ok(Ok(1)) => {}
        _ => return,
    }
    if first[0] != MAGIC[0] {
        let _ = others.send(Ok(stream)).await;
        return;
    }
    let hello = match tokio::time::timeout(HELLO_TIMEOUT, read_hello(&mut stream)).await {
        Ok(Ok(hello)) => hello,
        Ok(Err(err)) => return tracing::debug!(%err, "a peer link's hello"),
        Err(_) => return tracing::debug!("a peer link sent no hello"),
    };
    if let Err(err) = admit(hello.from, hello.cluster_id) {
        tracing::warn!(from = format!("{:x}", hello.from), %err, "refused a peer link");
        return;
    }
    match stream.into_std() {
        Ok(stream) => {
            let _ = raft.link_from(hello.from, stream);
        }
        Err(err) => tracing::warn!(%err, "cannot hand over a peer link"),
    }
}

async fn read_hello(stream: &mut TcpStream) -> io::Result<RaftBatch> {
    let mut magic = [0u8; MAGIC.len()];
    stream.read_exact(&mut magic).await?;
    if &magic != MAGIC {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "not a raft link",
        ));
    }
    let mut varint = Vec::with_capacity(10);
    let len = loop {
        varint.push(stream.read_u8().await?);
        match prost::decode_length_delimiter(&varint[..]) {
            Ok(len) => break len,
            Err(_) if varint.len() < 10 => continue,
            Err(err) => return Err(io::Error::new(io::ErrorKind::InvalidData, err)),
        }
    };
    if len > MAX_HELLO {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "hello too large",
        ));
    }
    let mut body = vec![0u8; len];
    stream.read_exact(&mut body).await?;
    RaftBatch::decode(&body[..]).map_err(|err| io::Error::new(io::ErrorKind::InvalidData, err))
}
