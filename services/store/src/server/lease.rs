//! `etcdserverpb.Lease`: grant and revoke go through raft; keep-alives and
//! time-to-live are answered from the leader's lease clock.

use std::pin::Pin;
use std::sync::Arc;
use std::time::Instant;

use capstan_proto::etcdserverpb::lease_server::Lease;
use capstan_proto::etcdserverpb::{
    LeaseGrantRequest, LeaseGrantResponse, LeaseKeepAliveRequest, LeaseKeepAliveResponse,
    LeaseLeasesRequest, LeaseLeasesResponse, LeaseRevokeRequest, LeaseRevokeResponse, LeaseStatus,
    LeaseTimeToLiveRequest, LeaseTimeToLiveResponse,
};
use capstan_proto::internal::raft_request::Request;
use capstan_proto::internal::Caller;
use futures::{Stream, StreamExt};
use rand::Rng;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request as GrpcRequest, Response, Status, Streaming};

use super::context::Context;
use crate::apply::auth::check_lease_keys;
use crate::auth::Access;
use crate::error::{Result, StoreError};
use crate::lease::{LeaseInfo, MAX_LEASE_TTL};
use capstan_proto::peer::{LeaseRenewRequest, LeaseTimeToLiveRequest as PeerTtlRequest};

pub struct LeaseService(pub Arc<Context>);

impl LeaseService {
    async fn grant(
        &self,
        caller: Caller,
        mut req: LeaseGrantRequest,
    ) -> Result<LeaseGrantResponse> {
        let ctx = &self.0;
        if req.ttl > MAX_LEASE_TTL {
            return Err(StoreError::LeaseTtlTooLarge);
        }
        if req.id == 0 {
            req.id = self.unused_id();
        } else if ctx.lessor.lock().exists(req.id) {
            return Err(StoreError::LeaseExists);
        }
        let request = Request::LeaseGrant(req);
        ctx.check_quota(&request).await?;
        ctx.propose(&caller, request).await
    }

    /// A fresh positive id; chosen by the proposer so that every member
    /// applies the same one.
    fn unused_id(&self) -> i64 {
        let lessor = self.0.lessor.lock();
        let mut rng = rand::rng();
        loop {
            let id = rng.random_range(1..i64::MAX);
            if !lessor.exists(id) {
                return id;
            }
        }
    }

    async fn revoke(&self, caller: Caller, req: LeaseRevokeRequest) -> Result<LeaseRevokeResponse> {
        if !self.0.lessor.lock().exists(req.id) {
            return Err(StoreError::LeaseNotFound);
        }
        self.0.propose(&caller, Request::LeaseRevoke(req)).await
    }

    async fn time_to_live(
        &self,
        caller: Caller,
        req: LeaseTimeToLiveRequest,
    ) -> Result<LeaseTimeToLiveResponse> {
        let ctx = &self.0;
        check_lease(ctx, &caller, req.id, Access::Read)?;
        let info = if ctx.raft.status().is_leader() {
            ctx.lessor.lock().info(req.id, Instant::now())
        } else {
            leader_time_to_live(ctx, req.id).await?
        };
        let header = Some(ctx.header(ctx.mvcc.current_revision()));
        Ok(match info {
            Some(info) => LeaseTimeToLiveResponse {
                header,
                id: req.id,
                ttl: info.remaining,
                granted_ttl: info.granted,
                keys: if req.keys { info.keys } else { Vec::new() },
            },
            // etcd answers an unknown lease with TTL -1, not an error.
            None => LeaseTimeToLiveResponse {
                header,
                id: req.id,
                ttl: -1,
                ..Default::default()
            },
        })
    }

    async fn leases(&self, caller: Caller) -> Result<LeaseLeasesResponse> {
        let ctx = &self.0;
        let ids = ctx.lessor.lock().ids();
        for &id in &ids {
            check_lease(ctx, &caller, id, Access::Read)?;
        }
        let leases = ids.into_iter().map(|id| LeaseStatus { id }).collect();
        Ok(LeaseLeasesResponse {
            header: Some(ctx.header(ctx.mvcc.current_revision())),
            leases,
        })
    }
}

/// Whether `caller` may see or renew lease `id`: `access` to each of its
/// keys (root may do anything).
fn check_lease(ctx: &Context, caller: &Caller, id: i64, access: Access) -> Result<()> {
    // The lessor first, then the rules: the order the applier takes them
    // in (it changes the rules while it holds the lessor).
    let lessor = ctx.lessor.lock();
    let checker = ctx.auth.checker(caller);
    check_lease_keys(&checker, &lessor, id, access)
}

/// Asks the leader, whose clock is the only one that runs, for a lease's
/// remaining time.
async fn leader_time_to_live(ctx: &Context, id: i64) -> Result<Option<LeaseInfo>> {
    let mut client = ctx.leader_client()?;
    let response = client
        .lease_time_to_live(PeerTtlRequest {
            id,
            cluster_id: ctx.cluster.cluster_id.get(),
        })
        .await
        .map_err(|_| StoreError::NoLeader)?
        .into_inner();
    if response.not_leader {
        return Err(StoreError::LeaderChanged);
    }
    Ok(response.found.then_some(LeaseInfo {
        remaining: response.remaining,
        granted: response.granted,
        keys: response.keys,
    }))
}

/// Renews one lease on the leader; an unknown lease is answered with TTL 0,
/// as etcd does.
async fn keep_alive(ctx: &Context, id: i64) -> Result<LeaseKeepAliveResponse> {
    let ttl = if ctx.raft.status().is_leader() {
        ctx.lessor.lock().renew(id).unwrap_or(0)
    } else {
        let mut client = ctx.leader_client()?;
        let response = client
            .lease_renew(LeaseRenewRequest {
                id,
                cluster_id: ctx.cluster.cluster_id.get(),
            })
            .await
            .map_err(|_| StoreError::NoLeader)?
            .into_inner();
        if response.ttl < 0 {
            return Err(StoreError::LeaderChanged);
        }
        response.ttl
    };
    Ok(LeaseKeepAliveResponse {
        header: Some(ctx.header(ctx.mvcc.current_revision())),
        id,
        ttl,
    })
}

type KeepAliveStream =
    Pin<Box<dyn Stream<Item = std::result::Result<LeaseKeepAliveResponse, Status>> + Send>>;

#[tonic::async_trait]
impl Lease for LeaseService {
    async fn lease_grant(
        &self,
        request: GrpcRequest<LeaseGrantRequest>,
    ) -> std::result::Result<Response<LeaseGrantResponse>, Status> {
        let work = |caller, req| self.grant(caller, req);
        self.0.serve("LeaseGrant", request, work).await
    }

    async fn lease_revoke(
        &self,
        request: GrpcRequest<LeaseRevokeRequest>,
    ) -> std::result::Result<Response<LeaseRevokeResponse>, Status> {
        let work = |caller, req| self.revoke(caller, req);
        self.0.serve("LeaseRevoke", request, work).await
    }

    type LeaseKeepAliveStream = KeepAliveStream;

    async fn lease_keep_alive(
        &self,
        request: GrpcRequest<Streaming<LeaseKeepAliveRequest>>,
    ) -> std::result::Result<Response<Self::LeaseKeepAliveStream>, Status> {
        let (tx, rx) = mpsc::channel(64);
        let ctx = self.0.clone();
        let credentials = ctx.credentials(&request);
        let mut incoming = request.into_inner();
        tokio::spawn(async move {
            while let Some(Ok(req)) = incoming.next().await {
                let started = Instant::now();
                let renewal = async {
                    let caller = ctx.caller(&credentials).await?;
                    check_lease(&ctx, &caller, req.id, Access::Write)?;
                    keep_alive(&ctx, req.id).await
                };
                let response = renewal.await.map_err(Status::from);
                let code = if response.is_ok() {
                    "OK"
                } else {
                    "Unavailable"
                };
                ctx.metrics
                    .record("LeaseKeepAlive", code, started.elapsed());
                if tx.send(response).await.is_err() {
                    break;
                }
            }
        });
        Ok(Response::new(Box::pin(ReceiverStream::new(rx))))
    }

    async fn lease_time_to_live(
        &self,
        request: GrpcRequest<LeaseTimeToLiveRequest>,
    ) -> std::result::Result<Response<LeaseTimeToLiveResponse>, Status> {
        let work = |caller, req| self.time_to_live(caller, req);
        self.0.serve("LeaseTimeToLive", request, work).await
    }

    async fn lease_leases(
        &self,
        request: GrpcRequest<LeaseLeasesRequest>,
    ) -> std::result::Result<Response<LeaseLeasesResponse>, Status> {
        let work = |caller, _req| self.leases(caller);
        self.0.serve("LeaseLeases", request, work).await
    }
}
