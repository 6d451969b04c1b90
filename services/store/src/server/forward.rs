//! Reaching the leader's peer service, for the requests only the leader's
//! lease clock can answer.

use std::collections::HashMap;
use std::time::Duration;

use capstan_proto::peer::peer_client::PeerClient;
use parking_lot::Mutex;
use tonic::transport::Channel;

use super::Context;
use crate::apply::members;
use crate::error::{Result, StoreError};

/// Lazily connected channels to peers, by peer URL.
#[derive(Default)]
pub struct PeerChannels {
    channels: Mutex<HashMap<String, Channel>>,
}

impl PeerChannels {
    fn channel(&self, url: &str) -> Result<Channel> {
        let mut channels = self.channels.lock();
        if let Some(channel) = channels.get(url) {
            return Ok(channel.clone());
        }
        let channel = crate::tls::peer_endpoint(url)
            .map_err(|err| StoreError::Storage(format!("peer url {url}: {err}")))?
            .connect_timeout(Duration::from_secs(1))
            .timeout(Duration::from_secs(5))
            .connect_lazy();
        channels.insert(url.to_string(), channel.clone());
        Ok(channel)
    }
}

/// A client for the current leader's peer service.
pub fn leader_client(ctx: &Context) -> Result<PeerClient<Channel>> {
    let leader = ctx.raft.status().leader();
    if leader == 0 {
        return Err(StoreError::NoLeader);
    }
    let record = members::find(&**ctx.mvcc.backend(), leader)?.ok_or(StoreError::NoLeader)?;
    let url = record.peer_urls.first().ok_or(StoreError::NoLeader)?;
    Ok(PeerClient::new(ctx.peers.channel(url)?))
}
