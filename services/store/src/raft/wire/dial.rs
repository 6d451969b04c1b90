//! Opening a direct link, on the async runtime: connect, say the magic and
//! the hello, then hand the socket to the Ready loop. Failed attempts are
//! reported (raft then slows down sending to that peer) and retried with
//! a growing pause until the loop no longer wants the link.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use capstan_proto::peer::RaftBatch;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

use super::frame::{put_frame, MAGIC};
use crate::member::ClusterId;
use crate::raft::handle::NodeMsg;
use crate::raft::inbox::InboxSender;

const CONNECT_TIMEOUT: Duration = Duration::from_secs(1);
const MAX_BACKOFF: Duration = Duration::from_secs(1);

/// Who dials whom, and where the socket goes.
pub struct Dial {
    pub to: u64,
    pub from: u64,
    /// Read at each attempt: a joining member learns it from its peers.
    pub cluster_id: ClusterId,
    /// `host:port` of the peer's first URL.
    pub addr: String,
    pub generation: u64,
    /// Cleared by the loop when the link is dropped or replaced.
    pub wanted: Arc<AtomicBool>,
    pub inbox: InboxSender,
}

impl Dial {
    pub async fn run(self) {
        let mut backoff = Duration::from_millis(50);
        while self.wanted.load(Ordering::Acquire) {
            match self.open().await {
                Ok(stream) => {
                    let up = NodeMsg::LinkUp {
                        to: self.to,
                        generation: self.generation,
                        stream,
                    };
                    let _ = self.inbox.send(up);
                    return;
                }
                Err(err) => {
                    tracing::debug!(to = format!("{:x}", self.to), %err, "peer unreachable");
                    if self
                        .inbox
                        .send(NodeMsg::Unreachable { to: self.to })
                        .is_err()
                    {
                        return;
                    }
                }
            }
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(MAX_BACKOFF);
        }
    }

    async fn open(&self) -> std::io::Result<std::net::TcpStream> {
        let connect = TcpStream::connect(&self.addr);
        let mut stream = tokio::time::timeout(CONNECT_TIMEOUT, connect)
            .await
            .map_err(|_| {
                std::io::Error::new(std::io::ErrorKind::TimedOut, "connect timed out")
            })??;
        stream.set_nodelay(true)?;
        let mut hello = MAGIC.to_vec();
        let batch = RaftBatch {
            from: self.from,
            cluster_id: self.cluster_id.get(),
            messages: Vec::new(),
        };
        put_frame(&batch, &mut hello);
        stream.write_all(&hello).await?;
        stream.into_std()
    }
}

/// The `host:port` of a plain `http://` URL; None for any other.
pub fn plain_addr(url: &str) -> Option<String> {
    let rest = url.strip_prefix("http://")?;
    let authority = rest.split('/').next().unwrap_or(rest);
    (!authority.is_empty()).then(|| authority.to_string())
}

#[cfg(test)]
mod tests {
    use super::plain_addr;

    #[test]
    fn only_plain_urls_get_a_direct_link() {
        assert_eq!(
            plain_addr("http://127.0.0.1:2380").as_deref(),
            Some("127.0.0.1:2380")
        );
        assert_eq!(
            plain_addr("http://10.0.0.1:2380/").as_deref(),
            Some("10.0.0.1:2380")
        );
        assert_eq!(plain_addr("https://127.0.0.1:2380"), None);
        assert_eq!(plain_addr("http://"), None);
    }
}
