//! The peer service: raft messages and snapshots (`peer_snapshot.rs`) from
//! other members, and lease requests forwarded to the leader.

use std::sync::Arc;
use std::time::Instant;

use capstan_proto::peer::peer_server::{Peer, PeerServer};
use capstan_proto::peer::{
    Ack, LearnerInSyncRequest, LearnerInSyncResponse, LeaseRenewRequest, LeaseRenewResponse,
    LeaseTimeToLiveRequest, LeaseTimeToLiveResponse, RaftBatch, SnapshotChunk,
};
use futures::StreamExt;
use protobuf::Message as _;
use raft::eraftpb::Message;
use tokio::sync::Semaphore;
use tonic::{Request, Response, Status, Streaming};

use super::cluster_id::{admit, same_cluster};
use super::context::Context;

pub struct PeerService(pub Arc<Context>, Semaphore);

pub fn peer_server(ctx: Arc<Context>) -> PeerServer<PeerService> {
    // One snapshot is received at a time.
    let service = PeerService(ctx, Semaphore::new(1));
    PeerServer::new(service).max_decoding_message_size(64 * 1024 * 1024)
}

fn decode(bytes: &[u8]) -> Result<Message, Status> {
    Message::parse_from_bytes(bytes).map_err(|err| Status::invalid_argument(err.to_string()))
}

#[tonic::async_trait]
impl Peer for PeerService {
    async fn raft(&self, request: Request<Streaming<RaftBatch>>) -> Result<Response<Ack>, Status> {
        let mut batches = request.into_inner();
        while let Some(batch) = batches.next().await {
            let batch = batch?;
            admit(&self.0, batch.cluster_id)?;
            for bytes in &batch.messages {
                self.0.raft.step(decode(bytes)?)?;
            }
        }
        Ok(Response::new(Ack {}))
    }

    async fn snapshot(
        &self,
        request: Request<Streaming<SnapshotChunk>>,
    ) -> Result<Response<Ack>, Status> {
        super::peer_snapshot::receive(&self.0, &self.1, request.into_inner()).await?;
        Ok(Response::new(Ack {}))
    }

    async fn lease_renew(
        &self,
        request: Request<LeaseRenewRequest>,
    ) -> Result<Response<LeaseRenewResponse>, Status> {
        let ctx = &self.0;
        let request = request.into_inner();
        same_cluster(ctx, request.cluster_id)?;
        let ttl = if ctx.raft.status().is_leader() {
            ctx.lessor.lock().renew(request.id).unwrap_or(0)
        } else {
            -1
        };
        Ok(Response::new(LeaseRenewResponse { ttl }))
    }

    async fn learner_in_sync(
        &self,
        request: Request<LearnerInSyncRequest>,
    ) -> Result<Response<LearnerInSyncResponse>, Status> {
        let ctx = &self.0;
        let request = request.into_inner();
        same_cluster(ctx, request.cluster_id)?;
        if !ctx.raft.status().is_leader() {
            return Ok(Response::new(LearnerInSyncResponse {
                not_leader: true,
                in_sync: None,
            }));
        }
        let in_sync = ctx
            .raft
            .learner_in_sync(request.member_id)
            .await
            .map_err(Status::from)?;
        Ok(Response::new(LearnerInSyncResponse {
            not_leader: false,
            in_sync,
        }))
    }

    async fn lease_time_to_live(
        &self,
        request: Request<LeaseTimeToLiveRequest>,
    ) -> Result<Response<LeaseTimeToLiveResponse>, Status> {
        let ctx = &self.0;
        let request = request.into_inner();
        same_cluster(ctx, request.cluster_id)?;
        if !ctx.raft.status().is_leader() {
            return Ok(Response::new(LeaseTimeToLiveResponse {
                not_leader: true,
                ..Default::default()
            }));
        }
        let info = ctx.lessor.lock().info(request.id, Instant::now());
        Ok(Response::new(match info {
            Some(info) => LeaseTimeToLiveResponse {
                found: true,
                not_leader: false,
                remaining: info.remaining,
                granted: info.granted,
                keys: info.keys,
            },
            None => LeaseTimeToLiveResponse::default(),
        }))
    }
}
