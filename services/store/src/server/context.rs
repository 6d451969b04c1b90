//! What every handler of the client and peer services shares: the
//! member's state, its limits, and the steps each request goes through
//! (size check, proposal, metrics and span).

use std::future::Future;
use std::sync::Arc;
use std::time::Instant;

use capstan_proto::etcdserverpb::alarm_request::AlarmAction;
use capstan_proto::etcdserverpb::{AlarmRequest, AlarmType};
use capstan_proto::etcdserverpb::{
    AlarmResponse, CompactionResponse, DeleteRangeResponse, LeaseGrantResponse,
    LeaseRevokeResponse, PutResponse, ResponseHeader, TxnResponse,
};
use capstan_proto::internal::raft_request::Request;
use capstan_proto::internal::Caller;
use capstan_proto::peer::peer_client::PeerClient;
use parking_lot::Mutex;
use tonic::transport::Channel;
use tonic::{Response, Status};
use tracing::Instrument;

use super::forward::PeerChannels;
use super::quota::{cost, Quota};
use crate::apply::{unexpected, Alarms, ApplyOutcome};
use crate::auth::AuthStore;
use crate::error::{Result, StoreError};
use crate::lease::Lessor;
use crate::membership::identity::Cluster;
use crate::membership::records;
use crate::metrics::Metrics;
use crate::mvcc::MvccStore;
use crate::raft::RaftHandle;
use crate::watch::WatchHub;

/// Limits on client requests.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub max_request_bytes: usize,
    pub max_txn_ops: usize,
    /// For clients that require a leader (see `require_leader.rs`).
    pub election_timeout: std::time::Duration,
}

/// Everything a handler needs.
pub struct Context {
    pub raft: RaftHandle,
    pub mvcc: Arc<MvccStore>,
    pub hub: Arc<WatchHub>,
    pub lessor: Arc<Mutex<Lessor>>,
    pub cluster: Cluster,
    pub limits: Limits,
    pub metrics: Metrics,
    pub peers: PeerChannels,
    /// Set only with `--experimental-enable-failpoints`.
    pub failpoints: Option<Arc<crate::failpoints::Failpoints>>,
    /// Where temporary files (snapshot downloads) go.
    pub data_dir: std::path::PathBuf,
    /// The raised alarms, shared with the applier.
    pub alarms: Arc<Alarms>,
    pub quota: Quota,
    /// The access rules and tokens, shared with the applier.
    pub auth: Arc<AuthStore>,
    /// `--client-cert-auth`: a client certificate's common name is a user.
    pub client_cert_auth: bool,
}

impl Context {
    pub fn header(&self, revision: i64) -> ResponseHeader {
        ResponseHeader {
            cluster_id: self.cluster.cluster_id.get(),
            member_id: self.cluster.local_id,
            revision,
            raft_term: self.raft.status().term(),
        }
    }

    /// Fills in the member's part of a header the apply layer started.
    pub fn complete_header(&self, header: &mut Option<ResponseHeader>) {
        let revision = header.as_ref().map_or(0, |h| h.revision);
        *header = Some(self.header(revision));
    }

    pub fn check_size(&self, request: &impl prost::Message) -> Result<()> {
        if request.encoded_len() > self.limits.max_request_bytes {
            return Err(StoreError::RequestTooLarge);
        }
        Ok(())
    }

    /// Proposes a client's `request` through raft and returns this
    /// member's response once it has applied it; it is applied only if
    /// `caller` may make it under the access rules at its entry.
    pub async fn propose<T: FromOutcome>(&self, caller: &Caller, request: Request) -> Result<T> {
        let outcome = self.raft.propose_as(Some(caller.clone()), request).await?;
        self.respond(outcome)
    }

    /// Proposes the member's own `request`, which no rule restricts.
    pub async fn propose_own<T: FromOutcome>(&self, request: Request) -> Result<T> {
        let outcome = self.raft.propose(request).await?;
        self.respond(outcome)
    }

    fn respond<T: FromOutcome>(&self, outcome: ApplyOutcome) -> Result<T> {
        let mut response = T::from_outcome(outcome)?;
        self.complete_header(response.header_mut());
        Ok(response)
    }

    /// Refuses a request that would grow a database that is full, or
    /// whose NOSPACE alarm is raised; on the first refusal this member
    /// raises the alarm through raft (and waits for it, as etcd does).
    pub async fn check_quota(&self, request: &Request) -> Result<()> {
        let cost = cost(request);
        if cost == 0 {
            return Ok(());
        }
        if self.alarms.no_space() {
            return Err(StoreError::NoSpace);
        }
        if self.quota.available(&**self.mvcc.backend(), cost) {
            return Ok(());
        }
        let member = self.cluster.local_id;
        tracing::warn!(
            quota = self.quota.limit(),
            size = self.mvcc.backend().size_on_disk(),
            "database space exceeded; raising the NOSPACE alarm"
        );
        let raise = AlarmRequest {
            action: AlarmAction::Activate as i32,
            member_id: member,
            alarm: AlarmType::Nospace as i32,
        };
        if let Err(err) = self
            .propose_own::<AlarmResponse>(Request::Alarm(raise))
            .await
        {
            tracing::warn!(%err, "raising the NOSPACE alarm failed");
        }
        Err(StoreError::NoSpace)
    }

    /// A client for the current leader's peer service, for the requests
    /// only the leader can answer (its lease clock, its learners' progress).
    pub fn leader_client(&self) -> Result<PeerClient<Channel>> {
        let leader = self.raft.status().leader();
        if leader == 0 {
            return Err(StoreError::NoLeader);
        }
        let backend = &**self.mvcc.backend();
        let record = records::find(backend, leader)?.ok_or(StoreError::NoLeader)?;
        let url = record.peer_urls.first().ok_or(StoreError::NoLeader)?;
        self.peers.client(url)
    }

    /// Runs one unary request inside a span, counting and timing it.
    pub async fn observe<T>(
        &self,
        method: &'static str,
        work: impl Future<Output = Result<T>>,
    ) -> std::result::Result<Response<T>, Status> {
        let span = tracing::debug_span!("grpc", method);
        let started = Instant::now();
        let result = work.instrument(span).await;
        let code = match &result {
            Ok(_) => "OK",
            Err(err) => code_name(err.code()),
        };
        self.metrics.record(method, code, started.elapsed());
        if let Err(err) = &result {
            tracing::debug!(method, %err, "request failed");
        }
        result.map(Response::new).map_err(Status::from)
    }
}

/// A response type that an apply outcome can be turned into.
pub trait FromOutcome: Sized {
    fn from_outcome(outcome: ApplyOutcome) -> Result<Self>;
    fn header_mut(&mut self) -> &mut Option<ResponseHeader>;
}

macro_rules! from_outcome {
    ($($variant:ident => $response:ty),* $(,)?) => {$(
        impl FromOutcome for $response {
            fn from_outcome(outcome: ApplyOutcome) -> Result<Self> {
                match outcome {
                    ApplyOutcome::$variant(response) => Ok(response),
                    other => Err(unexpected(&other)),
                }
            }

            fn header_mut(&mut self) -> &mut Option<ResponseHeader> {
                &mut self.header
            }
        }
    )*};
}

from_outcome! {
    Put => PutResponse,
    DeleteRange => DeleteRangeResponse,
    Txn => TxnResponse,
    Compaction => CompactionResponse,
    LeaseGrant => LeaseGrantResponse,
    LeaseRevoke => LeaseRevokeResponse,
    Alarm => AlarmResponse,
}

fn code_name(code: tonic::Code) -> &'static str {
    use tonic::Code::*;
    match code {
        Ok => "OK",
        InvalidArgument => "InvalidArgument",
        NotFound => "NotFound",
        FailedPrecondition => "FailedPrecondition",
        OutOfRange => "OutOfRange",
        Unavailable => "Unavailable",
        Unimplemented => "Unimplemented",
        ResourceExhausted => "ResourceExhausted",
        PermissionDenied => "PermissionDenied",
        Unauthenticated => "Unauthenticated",
        Internal => "Internal",
        _ => "Other",
    }
}
