//! A raft snapshot arriving on the peer port, checked like any other raft
//! traffic before a byte of it is written: it must come from this
//! member's cluster and be a snapshot for this member; its size, declared
//! up front, must fit what a store under the quota can be; no more than
//! that size is taken, one snapshot is received at a time, and a sender
//! that goes quiet is dropped. The chunks go to a file as they arrive; the
//! message raft gets names the file once it is complete and durable.

use std::time::Duration;

use capstan_proto::peer::SnapshotChunk;
use futures::StreamExt;
use protobuf::Message as _;
use raft::eraftpb::{Message, MessageType};
use tokio::sync::Semaphore;
use tonic::{Status, Streaming};

use super::cluster_id::admit;
use super::context::Context;
use super::quota::DEFAULT_QUOTA_BYTES;
use crate::snapshot::{self, Receiver, SnapshotFile};

/// How long a sender may pause between chunks.
const IDLE: Duration = Duration::from_secs(30);

/// etcd's suggested largest database, the basis of the bound without a
/// quota.
const SUGGESTED_MAX_BYTES: u64 = 4 * DEFAULT_QUOTA_BYTES;

/// The largest snapshot a member takes: twice what its quota lets the
/// database grow to (a dump is about the size of the live data).
pub fn max_snapshot_bytes(ctx: &Context) -> u64 {
    ctx.quota
        .limit()
        .unwrap_or(SUGGESTED_MAX_BYTES)
        .saturating_mul(2)
}

/// Receives one snapshot stream and hands its message to raft.
pub async fn receive(
    ctx: &Context,
    receiving: &Semaphore,
    mut chunks: Streaming<SnapshotChunk>,
) -> Result<(), Status> {
    let _slot = receiving
        .try_acquire()
        .map_err(|_| Status::resource_exhausted("a snapshot is being received already"))?;
    let first = next_chunk(&mut chunks)
        .await?
        .ok_or_else(|| Status::invalid_argument("a snapshot stream without a message"))?;
    admit(ctx, first.cluster_id)?;
    let mut message = snapshot_message(ctx, &first)?;
    let declared = SnapshotFile::decode_from(&message.get_snapshot().data)
        .map_err(|err| Status::invalid_argument(err.to_string()))?
        .size;
    let limit = max_snapshot_bytes(ctx);
    if declared > limit {
        return Err(Status::resource_exhausted(format!(
            "a snapshot of {declared} bytes is more than this member takes ({limit})"
        )));
    }
    let mut receiver = Receiver::create(&snapshot::dir(&ctx.data_dir)).await?;
    let mut data = first.data;
    loop {
        if receiver.size() + data.len() as u64 > declared {
            return Err(Status::invalid_argument(format!(
                "more snapshot data than the {declared} bytes declared"
            )));
        }
        receiver.write(&data).await?;
        match next_chunk(&mut chunks).await? {
            Some(chunk) if chunk.message.is_empty() => data = chunk.data,
            Some(_) => return Err(Status::invalid_argument("a second raft message")),
            None => break,
        }
    }
    let local = receiver.finish(&message.get_snapshot().data).await?;
    message.mut_snapshot().data = local.into();
    ctx.raft.step(message)?;
    ctx.metrics.raft.snapshot_receive_success.inc();
    Ok(())
}

async fn next_chunk(
    chunks: &mut Streaming<SnapshotChunk>,
) -> Result<Option<SnapshotChunk>, Status> {
    match tokio::time::timeout(IDLE, chunks.next()).await {
        Ok(next) => next.transpose(),
        Err(_) => Err(Status::deadline_exceeded(format!(
            "no snapshot data for {IDLE:?}"
        ))),
    }
}

/// The raft message of the first chunk: a snapshot, for this member.
fn snapshot_message(ctx: &Context, first: &SnapshotChunk) -> Result<Message, Status> {
    let message = Message::parse_from_bytes(&first.message)
        .map_err(|err| Status::invalid_argument(err.to_string()))?;
    if message.get_msg_type() != MessageType::MsgSnapshot {
        return Err(Status::invalid_argument(format!(
            "a {:?} on the snapshot stream",
            message.get_msg_type()
        )));
    }
    if message.to != ctx.cluster.local_id || message.from != first.from {
        return Err(Status::invalid_argument(format!(
            "a snapshot from {:x} to {:x}, sent by {:x} to {:x}",
            message.from, message.to, first.from, ctx.cluster.local_id
        )));
    }
    Ok(message)
}
