//! `etcdserverpb.Maintenance`: status, hashes, alarms and snapshots.

use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use capstan_proto::etcdserverpb::maintenance_server::Maintenance;
use capstan_proto::etcdserverpb::{
    AlarmRequest, AlarmResponse, AlarmType, DefragmentRequest, DefragmentResponse, HashKvRequest,
    HashKvResponse, HashRequest, HashResponse, MoveLeaderRequest, MoveLeaderResponse,
    SnapshotRequest, SnapshotResponse, StatusRequest, StatusResponse,
};
use capstan_proto::internal::raft_request::Request as RaftRequest;
use futures::Stream;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status};

use super::context::Context;
use crate::backup::BackupStream;
use crate::error::StoreError;

/// The etcd API version this member speaks, as `endpoint status` shows it.
pub const API_VERSION: &str = "3.5.0";

pub struct MaintenanceService(pub Arc<Context>);

type SnapshotStream = Pin<Box<dyn Stream<Item = Result<SnapshotResponse, Status>> + Send>>;

/// Bytes per message of a snapshot download.
const SNAPSHOT_CHUNK: usize = 1 << 20;

/// Sends a backup's chunks, each saying how much is left, as etcd sends its
/// database; stops early if the client went away.
fn send_chunks(
    ctx: &Context,
    mut backup: BackupStream,
    tx: &mpsc::Sender<Result<SnapshotResponse, Status>>,
) {
    loop {
        let chunk = match backup.next_chunk(SNAPSHOT_CHUNK) {
            Ok(Some(blob)) => Ok(SnapshotResponse {
                header: Some(ctx.header(ctx.mvcc.current_revision())),
                remaining_bytes: backup.remaining(),
                blob,
            }),
            Ok(None) => return,
            Err(err) => Err(Status::from(err)),
        };
        let failed = chunk.is_err();
        if tx.blocking_send(chunk).is_err() || failed {
            return;
        }
    }
}

/// The raised alarms as etcd's Status lists them among its errors.
fn alarm_errors(ctx: &Context) -> Vec<String> {
    ctx.alarms
        .list(AlarmType::None as i32)
        .into_iter()
        .map(|alarm| {
            let name = AlarmType::try_from(alarm.alarm).map_or("UNKNOWN", |a| a.as_str_name());
            format!("memberID:{} alarm:{name} ", alarm.member_id)
        })
        .collect()
}

#[tonic::async_trait]
impl Maintenance for MaintenanceService {
    async fn alarm(
        &self,
        request: Request<AlarmRequest>,
    ) -> Result<Response<AlarmResponse>, Status> {
        // Every alarm request is a raft entry, listing included, as in
        // etcd 3.4: the answer is the cluster's agreed set.
        let ctx = &self.0;
        let work = ctx.propose(RaftRequest::Alarm(request.into_inner()));
        ctx.observe("Alarm", work).await
    }

    async fn status(
        &self,
        _request: Request<StatusRequest>,
    ) -> Result<Response<StatusResponse>, Status> {
        let ctx = &self.0;
        let status = ctx.raft.status();
        let work = async {
            let db_size = ctx.mvcc.backend().size_on_disk() as i64;
            Ok(StatusResponse {
                header: Some(ctx.header(ctx.mvcc.current_revision())),
                version: API_VERSION.into(),
                db_size,
                leader: status.leader(),
                raft_index: status.commit.load(Ordering::Acquire),
                raft_term: status.term(),
                raft_applied_index: status.applied.load(Ordering::Acquire),
                errors: alarm_errors(ctx),
                db_size_in_use: db_size,
                is_learner: false,
            })
        };
        ctx.observe("Status", work).await
    }

    async fn defragment(
        &self,
        _request: Request<DefragmentRequest>,
    ) -> Result<Response<DefragmentResponse>, Status> {
        // The backend is copied into a new database of only the live
        // pairs (see `storage`); this member serves nothing meanwhile, as
        // an etcd member does while it defragments.
        let ctx = &self.0;
        let work = async {
            // What a compaction freed is reclaimed only once its records
            // are deleted, which the compactor does after the answer.
            ctx.mvcc.wait_compacted(ctx.mvcc.compact_revision()).await;
            let backend = ctx.mvcc.backend().clone();
            let before = backend.size_on_disk();
            tokio::task::spawn_blocking(move || backend.defragment())
                .await
                .map_err(|e| StoreError::Storage(format!("defragment: {e}")))??;
            ctx.quota.forget_size();
            let after = ctx.mvcc.backend().size_on_disk();
            tracing::info!(before, after, "defragmented the backend");
            Ok(DefragmentResponse {
                header: Some(ctx.header(ctx.mvcc.current_revision())),
            })
        };
        ctx.observe("Defragment", work).await
    }

    async fn hash(&self, _request: Request<HashRequest>) -> Result<Response<HashResponse>, Status> {
        let ctx = &self.0;
        let work = async {
            let (hash, _, revision) = ctx.mvcc.hash_kv(0)?;
            Ok(HashResponse {
                header: Some(ctx.header(revision)),
                hash,
            })
        };
        ctx.observe("Hash", work).await
    }

    async fn hash_kv(
        &self,
        request: Request<HashKvRequest>,
    ) -> Result<Response<HashKvResponse>, Status> {
        let ctx = &self.0;
        let at = request.into_inner().revision;
        let work = async {
            let (hash, compact_revision, _) = ctx.mvcc.hash_kv(at)?;
            Ok(HashKvResponse {
                header: Some(ctx.header(ctx.mvcc.current_revision())),
                hash,
                compact_revision,
            })
        };
        ctx.observe("HashKV", work).await
    }

    type SnapshotStream = SnapshotStream;

    async fn snapshot(
        &self,
        _request: Request<SnapshotRequest>,
    ) -> Result<Response<Self::SnapshotStream>, Status> {
        let ctx = self.0.clone();
        let work = async {
            let (mvcc, dir) = (ctx.mvcc.clone(), ctx.data_dir.clone());
            tokio::task::spawn_blocking(move || BackupStream::create(&mvcc, &dir))
                .await
                .map_err(|e| StoreError::Storage(format!("snapshot: {e}")))?
        };
        let backup = ctx.observe("Snapshot", work).await?.into_inner();
        // A couple of chunks in flight: the file is read as the client
        // takes them.
        let (tx, rx) = mpsc::channel(2);
        tokio::task::spawn_blocking(move || send_chunks(&ctx, backup, &tx));
        Ok(Response::new(Box::pin(ReceiverStream::new(rx))))
    }

    async fn move_leader(
        &self,
        request: Request<MoveLeaderRequest>,
    ) -> Result<Response<MoveLeaderResponse>, Status> {
        let ctx = &self.0;
        let target = request.into_inner().target_id;
        let work = async {
            if !ctx.raft.status().is_leader() {
                return Err(StoreError::NotLeader);
            }
            let members = crate::membership::records::load_members(&**ctx.mvcc.backend())?;
            if !members.iter().any(|m| m.id == target && !m.is_learner) {
                return Err(StoreError::BadLeaderTransferee);
            }
            ctx.raft.transfer_leader(target)?;
            // Wait until the target leads, as etcd does, within the request timeout.
            let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(5);
            while ctx.raft.status().leader() != target {
                if tokio::time::Instant::now() >= deadline {
                    return Err(StoreError::Timeout);
                }
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            }
            Ok(MoveLeaderResponse {
                header: Some(ctx.header(ctx.mvcc.current_revision())),
            })
        };
        ctx.observe("MoveLeader", work).await
    }
}
