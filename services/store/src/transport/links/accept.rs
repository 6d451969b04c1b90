//! The listener's side of direct links. The peer port serves two kinds of
//! connection: direct raft links and HTTP/2 for the peer gRPC service
//! (snapshots, forwarded lease requests). Over TLS the handshake's ALPN
//! tells them apart (a link asks for `LINK_ALPN`); in plain text one
//! peeked byte does (a link's `MAGIC` begins with 0x00, HTTP/2's preface
//! with 'P'). A link's hello is checked (`admit`) and its socket, with its
//! TLS session, handed to the Ready loop; everything else goes on to the
//! gRPC server.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use capstan_proto::peer::RaftBatch;
use prost::Message as _;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_rustls::rustls::{self, ServerConfig};
use tokio_rustls::server::TlsStream;
use tokio_rustls::TlsAcceptor;
use tokio_stream::wrappers::ReceiverStream;
use tonic::transport::server::{Connected, TcpConnectInfo};

use super::frame::MAGIC;
use crate::tls::LINK_ALPN;
use crate::transport::interface::{Feedback, PeerEvent};

/// How long a new connection may take to say what it is.
const HELLO_TIMEOUT: Duration = Duration::from_secs(10);
/// A hello names two ids: a few bytes.
const MAX_HELLO: usize = 1024;

/// Decides whether a hello's sender (member id, cluster id) may link.
pub type Admit = Arc<dyn Fn(u64, u64) -> Result<(), String> + Send + Sync>;

/// A peer connection for the gRPC server, in plain text or TLS.
pub enum PeerStream {
    Plain(TcpStream),
    Tls(Box<TlsStream<TcpStream>>),
}

/// Accepts on `listener` until the returned stream is dropped; the
/// stream yields the connections that are not direct raft links.
pub fn split_listener(
    listener: TcpListener,
    tls: Option<Arc<ServerConfig>>,
    admit: Admit,
    feedback: Feedback,
) -> ReceiverStream<io::Result<PeerStream>> {
    let (others, rx) = mpsc::channel(64);
    let acceptor = tls.map(TlsAcceptor::from);
    tokio::spawn(async move {
        loop {
            let accepted = tokio::select! {
                _ = others.closed() => return,
                accepted = listener.accept() => accepted,
            };
            match accepted {
                Ok((stream, _)) => {
                    let _ = stream.set_nodelay(true);
                    let sorting = Sorting {
                        others: others.clone(),
                        admit: admit.clone(),
                        feedback: feedback.clone(),
                    };
                    tokio::spawn(sorting.sort(stream, acceptor.clone()));
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

/// Where one accepted connection goes.
struct Sorting {
    others: mpsc::Sender<io::Result<PeerStream>>,
    admit: Admit,
    feedback: Feedback,
}

impl Sorting {
    async fn sort(self, stream: TcpStream, acceptor: Option<TlsAcceptor>) {
        let Some(acceptor) = acceptor else {
            return self.sort_plain(stream).await;
        };
        let tls = match tokio::time::timeout(HELLO_TIMEOUT, acceptor.accept(stream)).await {
            Ok(Ok(tls)) => tls,
            Ok(Err(err)) => return tracing::debug!(%err, "a peer's TLS handshake failed"),
            Err(_) => return tracing::debug!("a peer's TLS handshake timed out"),
        };
        if tls.get_ref().1.alpn_protocol() != Some(LINK_ALPN) {
            let _ = self.others.send(Ok(PeerStream::Tls(Box::new(tls)))).await;
            return;
        }
        let mut tls = tls;
        let Some(from) = self.hello(&mut tls).await else {
            return;
        };
        let (stream, session) = tls.into_inner();
        self.hand_over(from, stream, Some(rustls::Connection::Server(session)));
    }

    async fn sort_plain(self, mut stream: TcpStream) {
        let mut first = [0u8; 1];
        match tokio::time::timeout(HELLO_TIMEOUT, stream.peek(&mut first)).await {
            Ok(Ok(1)) => {}
            _ => return,
        }
        if first[0] != MAGIC[0] {
            let _ = self.others.send(Ok(PeerStream::Plain(stream))).await;
            return;
        }
        if let Some(from) = self.hello(&mut stream).await {
            self.hand_over(from, stream, None);
        }
    }

    /// Reads and checks a link's hello: the sender's id if it may link.
    async fn hello(&self, stream: &mut (impl AsyncRead + Unpin)) -> Option<u64> {
        let hello = match tokio::time::timeout(HELLO_TIMEOUT, read_hello(stream)).await {
            Ok(Ok(hello)) => hello,
            Ok(Err(err)) => {
                tracing::debug!(%err, "a peer link's hello");
                return None;
            }
            Err(_) => {
                tracing::debug!("a peer link sent no hello");
                return None;
            }
        };
        if let Err(err) = (self.admit)(hello.from, hello.cluster_id) {
            tracing::warn!(from = format!("{:x}", hello.from), %err, "refused a peer link");
            return None;
        }
        Some(hello.from)
    }

    fn hand_over(&self, from: u64, stream: TcpStream, tls: Option<rustls::Connection>) {
        match stream.into_std() {
            Ok(stream) => {
                let tls = tls.map(Box::new);
                let _ = (self.feedback)(PeerEvent::LinkFrom { from, stream, tls });
            }
            Err(err) => tracing::warn!(%err, "cannot hand over a peer link"),
        }
    }
}

async fn read_hello(stream: &mut (impl AsyncRead + Unpin)) -> io::Result<RaftBatch> {
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

impl Connected for PeerStream {
    type ConnectInfo = TcpConnectInfo;

    fn connect_info(&self) -> TcpConnectInfo {
        match self {
            PeerStream::Plain(stream) => stream.connect_info(),
            PeerStream::Tls(tls) => tls.get_ref().0.connect_info(),
        }
    }
}

impl AsyncRead for PeerStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            PeerStream::Plain(stream) => Pin::new(stream).poll_read(cx, buf),
            PeerStream::Tls(tls) => Pin::new(tls.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for PeerStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            PeerStream::Plain(stream) => Pin::new(stream).poll_write(cx, buf),
            PeerStream::Tls(tls) => Pin::new(tls.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            PeerStream::Plain(stream) => Pin::new(stream).poll_write_vectored(cx, bufs),
            PeerStream::Tls(tls) => Pin::new(tls.as_mut()).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            PeerStream::Plain(stream) => stream.is_write_vectored(),
            PeerStream::Tls(tls) => tls.is_write_vectored(),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            PeerStream::Plain(stream) => Pin::new(stream).poll_flush(cx),
            PeerStream::Tls(tls) => Pin::new(tls.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            PeerStream::Plain(stream) => Pin::new(stream).poll_shutdown(cx),
            PeerStream::Tls(tls) => Pin::new(tls.as_mut()).poll_shutdown(cx),
        }
    }
}
