//! Which cluster peer traffic comes from: every way in on the peer port
//! (direct links, the gRPC raft stream, snapshots, the requests forwarded
//! to the leader) admits only this member's cluster.

use tonic::Status;

use super::context::Context;

/// Accepts raft traffic only from this member's cluster; a member that
/// does not know its cluster yet (it is joining) adopts the sender's.
pub fn admit(ctx: &Context, cluster_id: u64) -> Result<(), Status> {
    let cluster = &ctx.cluster;
    let backend = &**ctx.mvcc.backend();
    let same_cluster =
        (cluster.cluster_id).adopt(cluster_id, backend, cluster.local_id, &cluster.name)?;
    if !same_cluster {
        return Err(Status::permission_denied(format!(
            "message from cluster {:x}, this is {:x}",
            cluster_id,
            cluster.cluster_id.get()
        )));
    }
    Ok(())
}

/// Answers a request forwarded from another member of this cluster only;
/// such requests never teach a member its cluster.
pub fn same_cluster(ctx: &Context, cluster_id: u64) -> Result<(), Status> {
    let ours = ctx.cluster.cluster_id.get();
    if cluster_id != ours || ours == 0 {
        return Err(Status::permission_denied(format!(
            "request from cluster {cluster_id:x}, this is {ours:x}"
        )));
    }
    Ok(())
}
