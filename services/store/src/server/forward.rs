//! Reaching the leader's peer service, for the requests only the leader's
//! lease clock can answer.

use std::collections::HashMap;
use std::time::Duration;

use capstan_proto::peer::peer_client::PeerClient;
use parking_lot::Mutex;
use tonic::transport::Channel;

use crate::error::{Result, StoreError};

/// Lazily connected channels to peers, by peer URL.
#[derive(Default)]
pub struct PeerChannels {
    channels: Mutex<HashMap<String, Channel>>,
}

impl PeerChannels {
    /// A client for the peer service at `url`.
    pub fn client(&self, url: &str) -> Result<PeerClient<Channel>> {
        Ok(PeerClient::new(self.channel(url)?))
    }

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
