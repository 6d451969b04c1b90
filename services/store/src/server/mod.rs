//! The client-facing gRPC server: etcd's KV, Watch, Lease, Cluster,
//! Maintenance and Auth services, plus `/metrics` and health endpoints on the same
//! port; and the peer port, shared by direct raft links and the peer gRPC
//! service. Handlers find who is asking (`credentials.rs`), check a request
//! (`validate.rs`, `quota.rs`), then read locally or propose through raft
//! (`context.rs`), where the access rules are checked as it is applied.

mod auth;
mod cluster;
mod cluster_id;
mod context;
mod credentials;
mod debug;
mod forward;
mod http;
pub mod in_process;
mod kv;
mod lease;
mod maintenance;
mod peer;
mod peer_snapshot;
mod quota;
mod require_leader;
mod serving;
mod validate;
mod watch;

use std::future::Future;
use std::sync::Arc;

use capstan_proto::etcdserverpb::auth_server::AuthServer;
use capstan_proto::etcdserverpb::cluster_server::ClusterServer;
use capstan_proto::etcdserverpb::kv_server::KvServer;
use capstan_proto::etcdserverpb::lease_server::LeaseServer;
use capstan_proto::etcdserverpb::maintenance_server::MaintenanceServer;
use capstan_proto::etcdserverpb::watch_server::WatchServer;
use tokio::sync::watch::Receiver as StopSignal;
use tonic::service::interceptor::InterceptedService;
use tonic::service::Routes;
use tonic::transport::ServerTlsConfig;

use crate::transport::links::accept::{split_listener, Admit};

pub use context::{Context, FromOutcome, Limits};
pub use quota::{Quota, DEFAULT_QUOTA_BYTES};
pub use serving::ServingRuntimes;

/// Serves the client API on `listener` until `stop` says so: the
/// connections are shared out among the serving runtimes (`serving.rs`).
pub async fn serve(
    ctx: Arc<Context>,
    listener: tokio::net::TcpListener,
    tls: Option<ServerTlsConfig>,
    stop: StopSignal<bool>,
    runtimes: Vec<tokio::runtime::Handle>,
) -> std::result::Result<(), tonic::transport::Error> {
    let mut queues = Vec::new();
    let mut served = Vec::new();
    for runtime in runtimes {
        let (queue, connections) = serving::queue();
        let server = serve_connections(ctx.clone(), connections, tls.clone(), when_stopped(&stop));
        served.push(runtime.spawn(server));
        queues.push(queue);
    }
    serving::hand_out(listener, queues, stop).await;
    for server in served {
        match server.await {
            Ok(result) => result?,
            Err(err) => tracing::warn!(%err, "a serving runtime's server ended abnormally"),
        }
    }
    Ok(())
}

/// Streams a client may reset before this member has accepted them,
/// at once, before the connection is closed with GOAWAY. h2's default of
/// 20 guards against rapid-reset floods, but an API server in front of a
/// busy member cancels more than 20 queued requests whenever its own
/// callers give up (seen at 30,000 pods: every request on the connection
/// then failed with "too_many_resets"). etcd's Go server has no such
/// count; this keeps one, far above an API server's normal cancellations
/// and still bounding what a flood can queue.
const PENDING_ACCEPT_RESETS: usize = 1024;

/// Serves the connections one runtime is handed, until `shutdown`.
async fn serve_connections(
    ctx: Arc<Context>,
    connections: tokio::sync::mpsc::Receiver<std::net::TcpStream>,
    tls: Option<ServerTlsConfig>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::result::Result<(), tonic::transport::Error> {
    builder(tls)?
        .accept_http1(true)
        .tcp_nodelay(true)
        .http2_max_pending_accept_reset_streams(Some(PENDING_ACCEPT_RESETS))
        .add_routes(client_routes(&ctx))
        .serve_with_incoming_shutdown(serving::incoming(connections), shutdown)
        .await
}

/// etcd's services, `/metrics`, the health endpoints and the failpoints.
fn client_routes(ctx: &Arc<Context>) -> Routes {
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
            leader_check(ctx),
        ))
        .add_service(InterceptedService::new(
            WatchServer::new(watch::WatchService(ctx.clone()))
                .max_decoding_message_size(decode_limit),
            leader_check(ctx),
        ))
        .add_service(InterceptedService::new(
            LeaseServer::new(lease::LeaseService(ctx.clone()))
                .max_decoding_message_size(decode_limit),
            leader_check(ctx),
        ))
        .add_service(ClusterServer::new(cluster::ClusterService(ctx.clone())))
        .add_service(MaintenanceServer::new(
            maintenance::MaintenanceService::new(ctx.clone()),
        ))
        .add_service(AuthServer::new(auth::AuthService(ctx.clone())));
    let router = http::add_routes(routes.routes().into_axum_router(), ctx.clone());
    let router = debug::add_routes(router, ctx.failpoints.clone());
    Routes::from(router)
}

/// A future that resolves once `stop` says the member is stopping.
pub fn when_stopped(stop: &StopSignal<bool>) -> impl Future<Output = ()> + Send + 'static {
    let mut stop = stop.clone();
    async move {
        let _ = stop.wait_for(|stopped| *stopped).await;
    }
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
        cluster_id::admit(&ctx, cluster_id).map_err(|status| status.message().to_string())
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

/// Binds a client URL such as `http://127.0.0.1:2379` or `https://...`.
pub async fn bind(url: &str) -> std::io::Result<tokio::net::TcpListener> {
    let host_port = url
        .trim_start_matches("http://")
        .trim_start_matches("https://")
        .trim_end_matches('/');
    tokio::net::TcpListener::bind(host_port).await
}
