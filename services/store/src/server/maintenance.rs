//! `etcdserverpb.Maintenance`: status, hashes, alarms and snapshots. With
//! auth on, what can read or disturb the whole store (snapshots, hashes,
//! defragmentation, moving the leader, raising or clearing alarms) is for
//! root, as in etcd 3.5 and later; status and the alarm list for any user.

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
use capstan_proto::internal::Caller;
use futures::Stream;
use tokio::sync::{mpsc, OwnedSemaphorePermit, Semaphore};
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status};

use super::context::Context;
use crate::backup::BackupStream;
use crate::error::{Result as StoreResult, StoreError};

/// The etcd API version this member speaks, as `endpoint status` shows it.
pub const API_VERSION: &str = "3.5.0";

/// Snapshot downloads served at once: each writes a copy of the whole
/// database to disk before it streams it, so more are refused (etcd's
/// "too many requests") rather than filling the disk.
const MAX_DOWNLOADS: usize = 2;

pub struct MaintenanceService {
    ctx: Arc<Context>,
    downloads: Arc<Semaphore>,
}

impl MaintenanceService {
    pub fn new(ctx: Arc<Context>) -> MaintenanceService {
        MaintenanceService {
            ctx,
            downloads: Arc::new(Semaphore::new(MAX_DOWNLOADS)),
        }
    }

    fn admin(&self, caller: &Caller) -> StoreResult<()> {
        self.ctx.auth.checker(caller).admin()
    }

    fn status(&self, caller: &Caller) -> StoreResult<StatusResponse> {
        let ctx = &self.ctx;
        ctx.auth.checker(caller).identified()?;
        let status = ctx.raft.status();
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
    }

    /// The backend is copied into a new database of only the live pairs
    /// (see `storage`); this member serves nothing meanwhile, as an etcd
    /// member does while it defragments.
    async fn defragment(&self, caller: &Caller) -> StoreResult<DefragmentResponse> {
        let ctx = &self.ctx;
        self.admin(caller)?;
        // What a compaction freed is reclaimed only once its records are
        // deleted, which the compactor does after the answer.
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
    }

    /// Writes the backup file, holding one of the download slots, which
    /// goes with the stream.
    async fn backup(&self, caller: &Caller) -> StoreResult<(BackupStream, OwnedSemaphorePermit)> {
        self.admin(caller)?;
        let slot = (self.downloads.clone())
            .try_acquire_owned()
            .map_err(|_| StoreError::TooManyRequests)?;
        let (mvcc, dir) = (self.ctx.mvcc.clone(), self.ctx.data_dir.clone());
        let backup = tokio::task::spawn_blocking(move || BackupStream::create(&mvcc, &dir))
            .await
            .map_err(|e| StoreError::Storage(format!("snapshot: {e}")))??;
        Ok((backup, slot))
    }

    async fn move_leader(&self, caller: &Caller, target: u64) -> StoreResult<MoveLeaderResponse> {
        let ctx = &self.ctx;
        self.admin(caller)?;
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
    }
}

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
        let ctx = &self.ctx;
        let work = |caller: Caller, req| async move {
            ctx.propose(&caller, RaftRequest::Alarm(req)).await
        };
        ctx.serve("Alarm", request, work).await
    }

    async fn status(
        &self,
        request: Request<StatusRequest>,
    ) -> Result<Response<StatusResponse>, Status> {
        let work = |caller: Caller, _req| async move { self.status(&caller) };
        self.ctx.serve("Status", request, work).await
    }

    async fn defragment(
        &self,
        request: Request<DefragmentRequest>,
    ) -> Result<Response<DefragmentResponse>, Status> {
        let work = |caller: Caller, _req| async move { self.defragment(&caller).await };
        self.ctx.serve("Defragment", request, work).await
    }

    async fn hash(&self, request: Request<HashRequest>) -> Result<Response<HashResponse>, Status> {
        let ctx = &self.ctx;
        let work = |caller: Caller, _req| async move {
            self.admin(&caller)?;
            let (hash, _, revision) = ctx.mvcc.hash_kv(0)?;
            Ok(HashResponse {
                header: Some(ctx.header(revision)),
                hash,
            })
        };
        ctx.serve("Hash", request, work).await
    }

    async fn hash_kv(
        &self,
        request: Request<HashKvRequest>,
    ) -> Result<Response<HashKvResponse>, Status> {
        let ctx = &self.ctx;
        let work = |caller: Caller, req: HashKvRequest| async move {
            self.admin(&caller)?;
            let (hash, compact_revision, _) = ctx.mvcc.hash_kv(req.revision)?;
            Ok(HashKvResponse {
                header: Some(ctx.header(ctx.mvcc.current_revision())),
                hash,
                compact_revision,
            })
        };
        ctx.serve("HashKV", request, work).await
    }

    type SnapshotStream = SnapshotStream;

    async fn snapshot(
        &self,
        request: Request<SnapshotRequest>,
    ) -> Result<Response<Self::SnapshotStream>, Status> {
        let work = |caller: Caller, _req| async move { self.backup(&caller).await };
        let (backup, slot) = self
            .ctx
            .serve("Snapshot", request, work)
            .await?
            .into_inner();
        // A couple of chunks in flight: the file is read as the client
        // takes them.
        let (tx, rx) = mpsc::channel(2);
        let ctx = self.ctx.clone();
        tokio::task::spawn_blocking(move || {
            send_chunks(&ctx, backup, &tx);
            drop(slot);
        });
        Ok(Response::new(Box::pin(ReceiverStream::new(rx))))
    }

    async fn move_leader(
        &self,
        request: Request<MoveLeaderRequest>,
    ) -> Result<Response<MoveLeaderResponse>, Status> {
        let work = |caller: Caller, req: MoveLeaderRequest| async move {
            self.move_leader(&caller, req.target_id).await
        };
        self.ctx.serve("MoveLeader", request, work).await
    }
}
