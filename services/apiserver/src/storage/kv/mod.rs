//! The store's KV API as its own messages (etcd's protobuf types), on
//! either path to a member: over a connection through etcd-client, or
//! straight into the store this process embeds, where a request is a
//! call and stays the message it is (no encoding, framing, HTTP/2 or
//! decoding on either side: under thousands of node heartbeats that was
//! most of what a write cost the API server beyond the store's own work).

mod over_etcd_client;
mod requests;

use std::sync::Arc;

use capstan_proto::etcdserverpb::kv_server::Kv;
use capstan_proto::etcdserverpb::{RangeRequest, RangeResponse, TxnRequest, TxnResponse};

pub use requests::{
    create_revision_is, delete, get, key_alone, mod_revision_is, prefix_end, prefix_range, put,
    revision_of, txn, version_is,
};

/// etcd's metadata key by which a request asks to be refused rather than
/// wait when the member has no leader (etcd-client's `require_leader`).
const HAS_LEADER: &str = "hasleader";

/// One member's KV API.
#[derive(Clone)]
pub enum KvClient {
    /// A member reached over a connection.
    Remote(Box<etcd_client::KvClient>),
    /// The store in this process, called directly.
    InProcess(Arc<dyn Kv>),
}

impl KvClient {
    pub async fn range(self, request: RangeRequest) -> Result<RangeResponse, etcd_client::Error> {
        match self {
            KvClient::Remote(mut client) => over_etcd_client::range(&mut client, request).await,
            KvClient::InProcess(kv) => answer(kv.range(asking_for_a_leader(request)).await),
        }
    }

    pub async fn txn(self, request: TxnRequest) -> Result<TxnResponse, etcd_client::Error> {
        match self {
            KvClient::Remote(mut client) => over_etcd_client::txn(&mut client, request).await,
            KvClient::InProcess(kv) => answer(kv.txn(asking_for_a_leader(request)).await),
        }
    }
}

/// As the connections' requests do (see `connection.rs`): a member cut
/// off from its cluster refuses instead of waiting.
fn asking_for_a_leader<T>(message: T) -> tonic::Request<T> {
    let mut request = tonic::Request::new(message);
    let yes = tonic::metadata::MetadataValue::from_static("true");
    request.metadata_mut().insert(HAS_LEADER, yes);
    request
}

/// The store's answer, its refusals as etcd-client reports a member's, so
/// both paths fail alike (see `connection::classify`).
fn answer<T>(result: Result<tonic::Response<T>, tonic::Status>) -> Result<T, etcd_client::Error> {
    result
        .map(tonic::Response::into_inner)
        .map_err(etcd_client::Error::GRpcStatus)
}
