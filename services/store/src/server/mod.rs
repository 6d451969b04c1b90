//! The client-facing gRPC server: etcd's KV, Watch, Lease, Cluster and
//! Maintenance services, plus `/metrics` and health endpoints on the same
//! port. Handlers validate, then read locally or propose through raft.

mod cluster;
mod debug;
mod forward;
mod http;
mod kv;
mod lease;
mod maintenance;
mod peer;
mod quota;
mod require_leader;
mod watch;

use std::future::Future;
use std::sync::Arc;
use std::time::Instant;

use capstan_proto::etcdserverpb::cluster_server::ClusterServer;
use capstan_proto::etcdserverpb::kv_server::KvServer;
use capstan_proto::etcdserverpb::lease_server::LeaseServer;
use capstan_proto::etcdserverpb::maintenance_server::MaintenanceServer;
use capstan_proto::etcdserverpb::watch_server::WatchServer;
use capstan_proto::etcdserverpb::{
    AlarmResponse, CompactionResponse, DeleteRangeResponse, LeaseGrantResponse,
    LeaseRevokeResponse, PutResponse, ResponseHeader, TxnResponse,
};
use capstan_proto::internal::raft_request::Request;
use parking_lot::Mutex;
use tonic::service::interceptor::InterceptedService;
use tonic::service::Routes;
use tonic::transport::ServerTlsConfig;
use tonic::{Response, Status};
use tracing::Instrument;

use crate::apply::{unexpected, Alarms, ApplyOutcome};
use crate::error::{Result, StoreError};
use crate::lease::Lessor;
use crate::member::Cluster;
use crate::metrics::Metrics;
use crate::mvcc::MvccStore;
use crate::raft::wire::accept::{split_listener, Admit};
use crate::raft::RaftHandle;
use crate::watch::WatchHub;

pub use quota::{Quota, DEFAULT_QUOTA_BYTES};

/// Limits on client requests.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub max_request_bytes: usize,
    pub max_txn_ops: usize,
    /// For clients that require a leader (see [`require_leader`]).
    pub election_timeout: std::time::Duration,
}

/// Everything a handler needs.
pub struct Context {
    pub raft: RaftHandle,
    pub mvcc: Arc<MvccStore>,
    pub hub: Arc<WatchHub>,
    pub lessor: Arc<Mutex<Lessor>>,
    pub cluster: Cluster,
    pub limits: Limits,
    pub metrics: Metrics,
    pub peers: forward::PeerChannels,
    /// Set only with `--experimental-enable-failpoints`.
    pub failpoints: Option<Arc<crate::failpoints::Failpoints>>,
    /// Where temporary files (snapshot downloads) go.
    pub data_dir: std::path::PathBuf,
    /// The raised alarms, shared with the applier.
    pub alarms: Arc<Alarms>,
    pub quota: Quota,
}

impl Context {
    pub fn header(&self, revision: i64) -> ResponseHeader {
        ResponseHeader {
            cluster_id: self.cluster.cluster_id.get(),
            member_id: self.cluster.local_id,
            revision,
            raft_term: self.raft.status().term(),
        }
    }

    /// Fills in the member's part of a header the apply layer started.
    pub fn complete_header(&self, header: &mut Option<ResponseHeader>) {
        let revision = header.as_ref().map_or(0, |h| h.revision);
        *header = Some(self.header(revision));
    }

    pub fn check_size(&self, request: &impl prost::Message) -> Result<()> {
        if request.encoded_len() > self.limits.max_request_bytes {
            return Err(StoreError::RequestTooLarge);
        }
        Ok(())
    }

    /// Proposes `request` through raft and returns this member's response
    /// once it has applied it.
    pub async fn propose<T: FromOutcome>(&self, request: Request) -> Result<T> {
        let outcome = self.raft.propose(request).await?;
        let mut response = T::from_outcome(outcome)?;
        self.complete_header(response.header_mut());
        Ok(response)
    }

    /// Runs one unary request inside a span, counting and timing it.
    pub async fn observe<T>(
        &self,
        method: &'static str,
        work: impl Future<Output = Result<T>>,
    ) -> std::result::Result<Response<T>, Status> {
        let span = tracing::debug_span!("grpc", method);
        let started = Instant::now();
        let result = work.instrument(span).await;
        let code = match &result {
            Ok(_) => "OK",
            Err(err) => code_name(err.code()),
        };
        self.metrics.record(method, code, started.elapsed());
        if let Err(err) = &result {
            tracing::debug!(method, %err, "request failed");
        }
        result.map(Response::new).map_err(Status::from)
    }
}

/// A response type that an apply outcome can be turned into.
pub trait FromOutcome: Sized {
    fn from_outcome(outcome: ApplyOutcome) -> Result<Self>;
    fn header_mut(&mut self) -> &mut Option<ResponseHeader>;
}

macro_rules! from_outcome {
    ($($variant:ident => $response:ty),* $(,)?) => {$(
        impl FromOutcome for $response {
            fn from_outcome(outcome: ApplyOutcome) -> Result<Self> {
                match outcome {
                    ApplyOutcome::$variant(response) => Ok(response),
                    other => Err(unexpected(&other)),
                }
            }

            fn header_mut(&mut self) -> &mut Option<ResponseHeader> {
                &mut self.header
            }
        }
    )*};
}

from_outcome! {
    Put => PutResponse,
    DeleteRange => DeleteRangeResponse,
    Txn => TxnResponse,
    Compaction => CompactionResponse,
    LeaseGrant => LeaseGrantResponse,
    LeaseRevoke => LeaseRevokeResponse,
    Alarm => AlarmResponse,
}

fn code_name(code: tonic::Code) -> &'static str {
    use tonic::Code::*;
    match code {
        Ok => "OK",
        InvalidArgument => "InvalidArgument",
        NotFound => "NotFound",
        FailedPrecondition => "FailedPrecondition",
        OutOfRange => "OutOfRange",
        Unavailable => "Unavailable",
        Unimplemented => "Unimplemented",
        ResourceExhausted => "ResourceExhausted",
        Internal => "Internal",
        _ => "Other",
    }
}

/// Serves the client API on `addr` until `shutdown` resolves.
pub async fn serve(
    ctx: Arc<Context>,
    listener: tokio::net::TcpListener,
    tls: Option<ServerTlsConfig>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::result::Result<(), tonic::transport::Error> {
    // Leave room above the request limit so an oversized request is
    // decoded and refused with etcd's own error rather than a transport one.
    let decode_limit = ctx.limits.max_request_bytes + 512 * 1024;
    let leader_check = |ctx: &Arc<Context>| {
        let ctx = ctx.clone();
        move |request: tonic::Request<()>| {
            require_leader::check(&ctx, request.metadata())?;
            Ok(request)
        }
    };
    let mut routes = Routes::builder();
    routes
        .add_service(InterceptedService::new(
            KvServer::new(kv::KvService(ctx.clone())).max_decoding_message_size(decode_limit),
            leader_check(&ctx),
        ))
        .add_service(InterceptedService::new(
            WatchServer::new(watch::WatchService(ctx.clone()))
                .max_decoding_message_size(decode_limit),
            leader_check(&ctx),
        ))
        .add_service(InterceptedService::new(
            LeaseServer::new(lease::LeaseService(ctx.clone()))
                .max_decoding_message_size(decode_limit),
            leader_check(&ctx),
        ))
        .add_service(ClusterServer::new(cluster::ClusterService(ctx.clone())))
        .add_service(MaintenanceServer::new(maintenance::MaintenanceService(
            ctx.clone(),
        )));
    let router = http::add_routes(routes.routes().into_axum_router(), ctx.clone());
    let router = debug::add_routes(router, ctx.failpoints.clone());
    let incoming = no_delay(listener);
    builder(tls)?
        .accept_http1(true)
        .tcp_nodelay(true)
        .add_routes(Routes::from(router))
        .serve_with_incoming_shutdown(incoming, shutdown)
        .await
}

/// Serves the peer port on `listener` until `shutdown`: direct raft links
/// go to the Ready loop (`raft::wire`), the rest to the peer gRPC service.
/// TLS, when configured, is terminated here for both.
pub async fn serve_peers(
    ctx: Arc<Context>,
    listener: tokio::net::TcpListener,
    tls: Option<Arc<tokio_rustls::rustls::ServerConfig>>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::result::Result<(), tonic::transport::Error> {
    let service = peer::peer_server(ctx.clone());
    let raft = ctx.raft.clone();
    let admit: Admit = Arc::new(move |_from, cluster_id| {
        peer::admit(&ctx, cluster_id).map_err(|status| status.message().to_string())
    });
    let incoming = split_listener(listener, tls, admit, raft);
    builder(None)?
        .tcp_nodelay(true)
        .add_service(service)
        .serve_with_incoming_shutdown(incoming, shutdown)
        .await
}

/// A server builder, serving TLS when configured.
fn builder(
    tls: Option<ServerTlsConfig>,
) -> std::result::Result<tonic::transport::Server, tonic::transport::Error> {
    let builder = tonic::transport::Server::builder();
    match tls {
        Some(tls) => builder.tls_config(tls),
        None => Ok(builder),
    }
}

/// Accepted connections with Nagle's algorithm off: a small response must
/// not wait for the client's delayed ACK (tonic ignores `tcp_nodelay` for
/// listeners it did not bind itself).
fn no_delay(listener: tokio::net::TcpListener) -> tonic::transport::server::TcpIncoming {
    tonic::transport::server::TcpIncoming::from(listener).with_nodelay(Some(true))
}

/// Binds a client URL such as `http://127.0.0.1:2379` or `https://...`.
pub async fn bind(url: &str) -> std::io::Result<tokio::net::TcpListener> {
    let host_port = url
        .trim_start_matches("http://")
        .trim_start_matches("https://")
        .trim_end_matches('/');
    tokio::net::TcpListener::bind(host_port).await
}
