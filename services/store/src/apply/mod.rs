//! Apply: turns committed raft entries into MVCC writes.
//!
//! Each entry is one `RaftRequest`; it is applied in one MVCC write view.
//! The views of a run of entries (a Ready's committed entries) are written
//! to the backend in one batch with the last one's raft index
//! ([`ApplyBatch`]); their events are then handed to the watch hub, and the
//! outcomes go back to the member that proposed them.

pub mod alarms;
mod batch;
mod kv;
mod lease;
pub mod members;
pub mod range;
pub mod validate;

use std::sync::Arc;

use capstan_proto::etcdserverpb::{
    AlarmResponse, CompactionResponse, DeleteRangeResponse, LeaseGrantResponse,
    LeaseRevokeResponse, PutResponse, ResponseHeader, TxnResponse,
};
use capstan_proto::internal::raft_request::Request;
use capstan_proto::internal::MemberRecord;
use parking_lot::Mutex;
use raft::eraftpb::ConfChangeType;

pub use alarms::Alarms;
pub use batch::ApplyBatch;
pub use lease::{lease_key, restore_leases, LEASE_PREFIX};

use crate::error::{Result, StoreError};
use crate::lease::Lessor;
use crate::mvcc::{MvccStore, WriteView};
use crate::watch::WatchHub;

/// The response to an applied request, before the server adds its header.
#[derive(Debug, Clone)]
pub enum ApplyOutcome {
    Put(PutResponse),
    DeleteRange(DeleteRangeResponse),
    Txn(TxnResponse),
    Compaction(CompactionResponse),
    LeaseGrant(LeaseGrantResponse),
    LeaseRevoke(LeaseRevokeResponse),
    /// The member list after a membership change or attribute update.
    Members(Vec<MemberRecord>),
    Alarm(AlarmResponse),
}

/// What applying one entry produced.
pub struct Applied {
    /// The proposer's request id, to wake its waiting client.
    pub request_id: u64,
    pub result: Result<ApplyOutcome>,
}

pub struct Applier {
    mvcc: Arc<MvccStore>,
    lessor: Arc<Mutex<Lessor>>,
    hub: Arc<WatchHub>,
    alarms: Arc<Alarms>,
}

impl Applier {
    pub fn new(
        mvcc: Arc<MvccStore>,
        lessor: Arc<Mutex<Lessor>>,
        hub: Arc<WatchHub>,
        alarms: Arc<Alarms>,
    ) -> Self {
        Applier {
            mvcc,
            lessor,
            hub,
            alarms,
        }
    }

    /// Starts applying a run of committed entries as one backend batch.
    pub fn batch(&self) -> ApplyBatch<'_> {
        ApplyBatch {
            applier: self,
            group: None,
            committed: Vec::new(),
            outcomes: Vec::new(),
        }
    }

    pub(super) fn dispatch(&self, view: &mut WriteView, request: &Request) -> Result<ApplyOutcome> {
        if self.alarms.no_space() && alarms::grows_database(request) {
            return Err(StoreError::NoSpace);
        }
        let mut lessor = self.lessor.lock();
        match request {
            Request::Put(req) => kv::put(view, &mut lessor, req).map(ApplyOutcome::Put),
            Request::DeleteRange(req) => {
                kv::delete_range(view, &mut lessor, req).map(ApplyOutcome::DeleteRange)
            }
            Request::Txn(req) => kv::txn(view, &mut lessor, req).map(ApplyOutcome::Txn),
            Request::Compaction(req) => {
                view.compact(req.revision)?;
                Ok(ApplyOutcome::Compaction(CompactionResponse {
                    header: Some(ResponseHeader {
                        revision: view.revision(),
                        ..Default::default()
                    }),
                }))
            }
            Request::LeaseGrant(req) => {
                lease::grant(view, &mut lessor, req).map(ApplyOutcome::LeaseGrant)
            }
            Request::LeaseRevoke(req) => {
                lease::revoke(view, &mut lessor, req).map(ApplyOutcome::LeaseRevoke)
            }
            Request::MemberAttributes(record) => {
                members::publish_attributes(view, &**self.mvcc.backend(), record)
                    .map(ApplyOutcome::Members)
            }
            // The transport follows the members returned here: they must
            // carry the new URLs, or peers keep dialling the old ones.
            Request::MemberPeerUrls(record) => {
                members::update_peer_urls(view, &**self.mvcc.backend(), record)
                    .map(ApplyOutcome::Members)
            }
            Request::Alarm(req) => Ok(ApplyOutcome::Alarm(self.alarms.apply(view, req))),
        }
    }

    /// Records a committed membership change at raft `index`.
    pub fn apply_member_change(
        &self,
        index: u64,
        kind: ConfChangeType,
        node_id: u64,
        record: Option<&MemberRecord>,
    ) -> Result<Vec<MemberRecord>> {
        let mut view = self.mvcc.write();
        match (kind, record) {
            (ConfChangeType::RemoveNode, _) => members::remove_member(&mut view, node_id),
            (_, Some(record)) => {
                let mut record = record.clone();
                record.is_learner = kind == ConfChangeType::AddLearnerNode;
                if let Some(existing) = members::find(&**self.mvcc.backend(), node_id)? {
                    // A promotion keeps what the member published.
                    record.name = existing.name;
                    record.client_urls = existing.client_urls;
                    record.peer_urls = existing.peer_urls;
                }
                members::add_member(&mut view, &record);
            }
            (_, None) => {}
        }
        view.finish(index)?;
        self.members()
    }

    pub fn members(&self) -> Result<Vec<MemberRecord>> {
        members::load_members(&**self.mvcc.backend())
    }

    /// Replaces the whole state machine with the snapshot file a raft
    /// snapshot's data names.
    pub fn restore_snapshot(&self, data: &[u8]) -> Result<()> {
        crate::snapshot::install(&self.mvcc, data)?;
        let mut lessor = self.lessor.lock();
        lessor.clear();
        restore_leases(&self.mvcc, &mut lessor)?;
        self.alarms.reload(&**self.mvcc.backend())?;
        self.hub.resync(self.mvcc.current_revision());
        Ok(())
    }
}

/// Fails loudly if an outcome does not match the request kind; used by the
/// server to unwrap the response it expects.
pub fn unexpected(outcome: &ApplyOutcome) -> StoreError {
    StoreError::Corrupt(format!("unexpected apply outcome {outcome:?}"))
}
