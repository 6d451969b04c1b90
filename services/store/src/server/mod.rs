//! The client-facing gRPC server: etcd's KV, Watch, Lease, Cluster and
//! Maintenance services, plus `/metrics` and health endpoints on the same
//! port; and the peer port, shared by direct raft links and the peer gRPC
//! service. Handlers check a request (`validate.rs`, `quota.rs`), then read
//! locally or propose through raft (`context.rs`).

mod cluster;
mod context;
mod debug;
mod forward;
mod http;
mod kv;
mod lease;
mod maintenance;
mod peer;
mod quota;
mod require_leader;
mod validate;
mod watch;

use std::future::Future;
use std::sync::Arc;

use capstan_proto::etcdserverpb::cluster_server::ClusterServer;
use capstan_proto::etcdserverpb::kv_server::KvServer;
use capstan_proto::etcdserverpb::lease_server::LeaseServer;
use capstan_proto::etcdserverpb::maintenance_server::MaintenanceServer;
use capstan_proto::etcdserverpb::watch_server::WatchServer;
use tonic::service::interceptor::InterceptedService;
use tonic::service::Routes;
use tonic::transport::ServerTlsConfig;

use crate::transport::links::accept::{split_listener, Admit};

pub use context::{Context, FromOutcome, Limits};
pub use quota::{Quota, DEFAULT_QUOTA_BYTES};

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
/// go to the Ready loop (`transport::links`), the rest to the peer gRPC
/// service.
/// TLS, when configured, is terminated here for both.
pub async fn serve_peers(
    ctx: Arc<Context>,
    listener: tokio::net::TcpListener,
    tls: Option<Arc<tokio_rustls::rustls::ServerConfig>>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::result::Result<(), tonic::transport::Error> {
    let service = peer::peer_server(ctx.clone());
    let feedback = ctx.raft.peer_feedback();
    let admit: Admit = Arc::new(move |_from, cluster_id| {
        peer::admit(&ctx, cluster_id).map_err(|status| status.message().to_string())
    });
    let incoming = split_listener(listener, tls, admit, feedback);
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
