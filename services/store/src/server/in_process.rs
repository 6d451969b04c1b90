//! The client API without a socket, for a process that embeds this member
//! and its only client (`capstan`: the store and the API server in one
//! process). Each request goes straight to the same routes a connection
//! is served by, on the caller's own thread: no TLS, no TCP, no HTTP/2
//! framing and no hand-over to a serving thread and back, which under
//! thousands of node heartbeats were most of a write's cost.
//!
//! The Ready loop answers each calling thread by a lane of its own, as it
//! answers each serving runtime.
//!
//! The caller is who its client certificate says, as over TLS: the
//! embedder hands over the chain it would have presented, and the
//! handshake's verification is not needed for a caller in this process.

use std::cell::Cell;
use std::sync::Arc;

use tokio_rustls::rustls::pki_types::CertificateDer;
use tonic::body::Body;
use tonic::codegen::http;
use tower::util::BoxCloneSyncService;
use tower::ServiceExt;

use capstan_proto::etcdserverpb::kv_server::Kv;
use capstan_proto::etcdserverpb::{
    CompactionRequest, CompactionResponse, DeleteRangeRequest, DeleteRangeResponse, PutRequest,
    PutResponse, RangeRequest, RangeResponse, TxnRequest, TxnResponse,
};
use tonic::{Request, Response, Status};

use super::context::Context;
use super::kv::KvService;
use super::require_leader;
use crate::error::Result;
use crate::raft::RaftHandle;

type Answer<T> = std::result::Result<Response<T>, Status>;

/// A gRPC channel to this member's client API, as tonic clients (and
/// etcd-client's `Channel::Custom`) take one.
pub type ClientChannel =
    BoxCloneSyncService<http::Request<Body>, http::Response<Body>, tower::BoxError>;

/// The certificate chain of an in-process caller, in the place of the one
/// a TLS handshake would have verified.
#[derive(Debug, Clone)]
pub(crate) struct InProcessPeer(pub Arc<Vec<CertificateDer<'static>>>);

thread_local! {
    /// Whether this thread has its own lane for the Ready loop's answers.
    static ANSWERED_HERE: Cell<bool> = const { Cell::new(false) };
}

/// Opens an answer lane on the calling thread's runtime the first time it
/// calls, so the Ready loop wakes its callers directly rather than through
/// the runtime that started the member (see `raft/lanes.rs`).
fn answer_on_this_thread(raft: &RaftHandle) {
    if !ANSWERED_HERE.with(|opened| opened.replace(true)) {
        raft.open_answer_lane();
    }
}

/// Marks a request as `peer`'s, and has its answer come back on this
/// thread's lane.
fn arriving_from(peer: &InProcessPeer, raft: &RaftHandle, extensions: &mut http::Extensions) {
    answer_on_this_thread(raft);
    extensions.insert(peer.clone());
}

/// A channel whose requests are served by `ctx` as if `certificates` had
/// been presented on a client connection.
pub fn channel(ctx: &Arc<Context>, certificates: Vec<CertificateDer<'static>>) -> ClientChannel {
    let peer = InProcessPeer(Arc::new(certificates));
    let raft = ctx.raft.clone();
    let routes = super::client_routes(ctx)
        .map_request(move |mut request: http::Request<Body>| {
            arriving_from(&peer, &raft, request.extensions_mut());
            request
        })
        .map_err(|never| match never {});
    BoxCloneSyncService::new(routes)
}

/// The caller presenting the chain in the PEM file `cert_file` (the
/// client certificate it would use over TLS; none when `cert_file` is
/// empty), read once: a [`channel`] and the [`kv`] service for it.
pub fn client_presenting(
    ctx: &Arc<Context>,
    cert_file: &str,
) -> Result<(ClientChannel, Arc<dyn Kv>)> {
    let chain = chain_in(cert_file)?;
    Ok((channel(ctx, chain.clone()), kv(ctx, chain)))
}

/// The certificate chain in the PEM file `cert_file`; none when empty.
fn chain_in(cert_file: &str) -> Result<Vec<CertificateDer<'static>>> {
    match cert_file.is_empty() {
        true => Ok(Vec::new()),
        false => crate::tls::certificate_chain("etcd-certfile", cert_file),
    }
}

/// The KV service itself, for a caller in this process that wants no
/// gRPC in between: requests and answers stay the messages they are, not
/// encoded, framed and decoded twice. The checks a connection's requests
/// pass are made here too: the caller is who `certificates` say, and a
/// request that asks for a leader (`hasleader`) is refused without one.
pub fn kv(ctx: &Arc<Context>, certificates: Vec<CertificateDer<'static>>) -> Arc<dyn Kv> {
    Arc::new(InProcessKv {
        service: KvService(ctx.clone()),
        peer: InProcessPeer(Arc::new(certificates)),
    })
}

struct InProcessKv {
    service: KvService,
    peer: InProcessPeer,
}

impl InProcessKv {
    /// `request` as a connection of this caller would have delivered it.
    fn delivered<T>(&self, mut request: Request<T>) -> Result<Request<T>, Status> {
        let ctx = &self.service.0;
        require_leader::check(ctx, request.metadata())?;
        arriving_from(&self.peer, &ctx.raft, request.extensions_mut());
        Ok(request)
    }
}

#[tonic::async_trait]
impl Kv for InProcessKv {
    async fn range(&self, request: Request<RangeRequest>) -> Answer<RangeResponse> {
        Kv::range(&self.service, self.delivered(request)?).await
    }

    async fn put(&self, request: Request<PutRequest>) -> Answer<PutResponse> {
        Kv::put(&self.service, self.delivered(request)?).await
    }

    async fn delete_range(
        &self,
        request: Request<DeleteRangeRequest>,
    ) -> Answer<DeleteRangeResponse> {
        Kv::delete_range(&self.service, self.delivered(request)?).await
    }

    async fn txn(&self, request: Request<TxnRequest>) -> Answer<TxnResponse> {
        Kv::txn(&self.service, self.delivered(request)?).await
    }

    async fn compact(&self, request: Request<CompactionRequest>) -> Answer<CompactionResponse> {
        Kv::compact(&self.service, self.delivered(request)?).await
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use capstan_proto::etcdserverpb::kv_client::KvClient;
    use capstan_proto::etcdserverpb::{PutRequest, RangeRequest};

    use super::*;
    use crate::config::{Flags, StoreConfig};

    #[tokio::test(flavor = "multi_thread")]
    async fn a_put_and_a_range_are_served_without_a_socket() {
        let dir = tempfile::tempdir().unwrap();
        let flags = Flags {
            data_dir: Some(dir.path().join("member")),
            ..Default::default()
        };
        let ctx = crate::open(&StoreConfig::load(&flags).unwrap()).unwrap();
        let mut kv = KvClient::new(channel(&ctx, Vec::new()));
        let put = PutRequest {
            key: b"in-process".to_vec(),
            value: b"v".to_vec(),
            ..Default::default()
        };
        // The lone member elects itself within an election timeout.
        let deadline = Instant::now() + Duration::from_secs(20);
        let written = loop {
            match kv.put(put.clone()).await {
                Ok(answer) => break answer.into_inner(),
                Err(status) if Instant::now() < deadline => {
                    tracing::debug!(%status, "waiting for a leader");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                Err(status) => panic!("no put within 20 s: {status}"),
            }
        };
        let range = RangeRequest {
            key: b"in-process".to_vec(),
            ..Default::default()
        };
        let read = kv.range(range).await.unwrap().into_inner();
        assert_eq!(read.kvs.len(), 1);
        assert_eq!(read.kvs[0].value, b"v");
        let written_at = written.header.unwrap().revision;
        assert_eq!(read.kvs[0].mod_revision, written_at);
        assert!(ANSWERED_HERE.with(Cell::get), "this thread has its lane");
    }
}
