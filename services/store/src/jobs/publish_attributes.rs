//! A starting member publishes its name and client URLs through raft, so
//! `member list` on every member shows where to reach it (as etcd does).

use std::sync::Arc;
use std::time::Duration;

use capstan_proto::internal::raft_request::Request;
use capstan_proto::internal::MemberRecord;

use crate::membership::records;
use crate::server::Context;

pub async fn publish_attributes(ctx: Arc<Context>) {
    let update = MemberRecord {
        id: ctx.cluster.local_id,
        name: ctx.cluster.name.clone(),
        client_urls: ctx.cluster.client_urls.clone(),
        ..Default::default()
    };
    let mut delay = Duration::from_millis(100);
    loop {
        let recorded = records::find(&**ctx.mvcc.backend(), update.id)
            .ok()
            .flatten();
        let current = recorded
            .as_ref()
            .is_some_and(|r| r.name == update.name && r.client_urls == update.client_urls);
        if current {
            return;
        }
        // Until this member's record arrives (a joining member gets it with
        // the leader's snapshot) a publish changes nothing: keep trying.
        if let Err(err) = ctx
            .raft
            .propose(Request::MemberAttributes(update.clone()))
            .await
        {
            tracing::debug!(%err, "publishing member attributes; will retry");
        }
        tokio::time::sleep(delay).await;
        delay = (delay * 2).min(Duration::from_secs(2));
    }
}
