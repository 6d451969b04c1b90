//! Opening a direct link, on the async runtime: connect (and shake hands
//! for an `https://` peer), say the magic and the hello, then hand the
//! socket, with its TLS session, to the Ready loop. Failed attempts are
//! reported (raft then slows down sending to that peer) and retried with
//! a growing pause until the loop no longer wants the link.

use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use capstan_proto::peer::RaftBatch;
use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::rustls::pki_types::ServerName;
use tokio_rustls::rustls::{self, ClientConfig};
use tokio_rustls::TlsConnector;

use super::frame::{put_frame, MAGIC};
use crate::membership::identity::ClusterId;
use crate::transport::backoff::Backoff;
use crate::transport::interface::{Feedback, PeerEvent};

const CONNECT_TIMEOUT: Duration = Duration::from_secs(1);

/// Who dials whom, and where the socket goes.
pub struct Dial {
    pub to: u64,
    pub from: u64,
    /// Read at each attempt: a joining member learns it from its peers.
    pub cluster_id: ClusterId,
    pub target: Target,
    pub generation: u64,
    /// Cleared by the loop when the link is dropped or replaced.
    pub wanted: Arc<AtomicBool>,
    pub feedback: Feedback,
}

impl Dial {
    pub async fn run(self) {
        let mut backoff = Backoff::default();
        while self.wanted.load(Ordering::Acquire) {
            match self.open().await {
                Ok((stream, tls)) => {
                    let up = PeerEvent::LinkUp {
                        to: self.to,
                        generation: self.generation,
                        stream,
                        tls,
                    };
                    let _ = (self.feedback)(up);
                    return;
                }
                Err(err) => {
                    tracing::debug!(to = format!("{:x}", self.to), %err, "peer unreachable");
                    if (self.feedback)(PeerEvent::Unreachable { to: self.to }).is_err() {
                        return;
                    }
                }
            }
            tokio::time::sleep(backoff.pause()).await;
        }
    }

    async fn open(&self) -> io::Result<(std::net::TcpStream, Option<Box<rustls::Connection>>)> {
        let connect = TcpStream::connect(&self.target.addr);
        let stream = tokio::time::timeout(CONNECT_TIMEOUT, connect)
            .await
            .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "connect timed out"))??;
        stream.set_nodelay(true)?;
        let Some((config, name)) = &self.target.tls else {
            let mut stream = stream;
            self.say_hello(&mut stream).await?;
            return Ok((stream.into_std()?, None));
        };
        let handshake = TlsConnector::from(config.clone()).connect(name.clone(), stream);
        let mut tls = tokio::time::timeout(CONNECT_TIMEOUT, handshake)
            .await
            .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "TLS handshake timed out"))??;
        self.say_hello(&mut tls).await?;
        let (stream, session) = tls.into_inner();
        let session = Box::new(rustls::Connection::Client(session));
        Ok((stream.into_std()?, Some(session)))
    }

    async fn say_hello(&self, stream: &mut (impl AsyncWrite + Unpin)) -> io::Result<()> {
        let mut hello = MAGIC.to_vec();
        let batch = RaftBatch {
            from: self.from,
            cluster_id: self.cluster_id.get(),
            messages: Vec::new(),
        };
        put_frame(&batch, &mut hello);
        stream.write_all(&hello).await?;
        stream.flush().await
    }
}

/// Where a direct link dials, and how.
#[derive(Clone)]
pub struct Target {
    /// `host:port` of the peer's first URL.
    pub addr: String,
    /// For an `https://` URL: the client's TLS and the name to verify.
    pub tls: Option<(Arc<ClientConfig>, ServerName<'static>)>,
}

impl PartialEq for Target {
    fn eq(&self, other: &Target) -> bool {
        self.addr == other.addr && self.tls.is_some() == other.tls.is_some()
    }
}

/// The link target of a peer URL: plain `http://`, or `https://` once the
/// links have a TLS client (`tls::set_link_client`); None for any other,
/// which then goes over gRPC.
pub fn link_target(url: &str) -> Option<Target> {
    let (rest, tls) = match url.strip_prefix("https://") {
        Some(rest) => (rest, Some(crate::tls::link_client()?)),
        None => (url.strip_prefix("http://")?, None),
    };
    let authority = rest.split('/').next().unwrap_or(rest);
    if authority.is_empty() {
        return None;
    }
    let tls = match tls {
        None => None,
        Some(config) => Some((config, server_name(authority)?)),
    };
    Some(Target {
        addr: authority.to_string(),
        tls,
    })
}

/// The host part of `host:port` (an IPv6 address in brackets) as TLS
/// verifies it.
fn server_name(authority: &str) -> Option<ServerName<'static>> {
    let host = match authority.rsplit_once(':') {
        Some((host, port)) if port.bytes().all(|b| b.is_ascii_digit()) => host,
        _ => authority,
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    ServerName::try_from(host.to_string()).ok()
}

#[cfg(test)]
mod tests {
    use super::{link_target, server_name};

    fn addr(url: &str) -> Option<String> {
        link_target(url).map(|target| target.addr)
    }

    #[test]
    fn plain_urls_get_a_direct_link_and_tls_ones_only_with_a_tls_client() {
        assert_eq!(
            addr("http://127.0.0.1:2380").as_deref(),
            Some("127.0.0.1:2380")
        );
        assert_eq!(
            addr("http://10.0.0.1:2380/").as_deref(),
            Some("10.0.0.1:2380")
        );
        assert_eq!(addr("http://"), None);
        assert_eq!(addr("unix:///run/peer.sock"), None);
        // No unit test sets the links' TLS client: https stays with gRPC.
        assert_eq!(addr("https://127.0.0.1:2380"), None);
    }

    #[test]
    fn the_name_a_tls_link_verifies_is_the_urls_host() {
        let name = |authority| server_name(authority).map(|n| n.to_str().into_owned());
        assert_eq!(name("m1.example:2380").as_deref(), Some("m1.example"));
        assert_eq!(name("127.0.0.1:2380").as_deref(), Some("127.0.0.1"));
        assert_eq!(name("[::1]:2380").as_deref(), Some("::1"));
    }
}
