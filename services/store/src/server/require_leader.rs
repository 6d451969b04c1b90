//! etcd's "require leader" contract, for clients that send the
//! `hasleader: true` metadata (kube-apiserver does, and so does ours): a
//! member without a leader refuses their requests with "etcdserver: no
//! leader" instead of answering from a state that may be stale, and ends
//! their watch streams once it has been without a leader for three
//! election timeouts, so the client moves to a member that can see the
//! cluster instead of waiting on a silent stream.

use std::sync::Arc;
use std::time::Instant;

use tonic::metadata::MetadataMap;
use tonic::Status;

use super::context::Context;
use crate::error::StoreError;

const KEY: &str = "hasleader";
/// Election timeouts without a leader before a stream is ended (etcd's).
const MISSES: u32 = 3;

pub fn wanted(metadata: &MetadataMap) -> bool {
    metadata.get(KEY).is_some_and(|value| value == "true")
}

/// The interceptor for every client service.
pub fn check(ctx: &Context, metadata: &MetadataMap) -> Result<(), Status> {
    if wanted(metadata) && ctx.raft.status().leader() == 0 {
        return Err(StoreError::NoLeader.into());
    }
    Ok(())
}

/// Resolves once the member has been without a leader for
/// [`MISSES`] election timeouts in a row.
pub async fn leader_lost(ctx: Arc<Context>) {
    let patience = ctx.limits.election_timeout * MISSES;
    let mut leaderless_since: Option<Instant> = None;
    loop {
        tokio::time::sleep(ctx.limits.election_timeout / 2).await;
        if ctx.raft.status().leader() != 0 {
            leaderless_since = None;
            continue;
        }
        let since = *leaderless_since.get_or_insert_with(Instant::now);
        if since.elapsed() >= patience {
            return;
        }
    }
}
