//! The applier: one committed request at a time, in one MVCC write view,
//! with etcd's semantics (`kv.rs`, `lease.rs`, `alarms.rs`, the member
//! records); while NOSPACE is raised, requests that grow the database are
//! refused here, on every member alike, and a client's request only goes
//! through if the access rules at its entry allow it (`auth.rs`).

use std::sync::Arc;

use capstan_proto::etcdserverpb::{CompactionResponse, ResponseHeader};
use capstan_proto::internal::raft_request::Request;
use capstan_proto::internal::{Caller, MemberRecord};
use parking_lot::Mutex;
use raft::eraftpb::ConfChangeType;

use super::alarms::{self, Alarms};
use super::auth;
use super::lease::restore_leases;
use super::outcome::ApplyOutcome;
use super::{kv, lease};
use crate::auth::AuthStore;
use crate::error::{Result, StoreError};
use crate::lease::Lessor;
use crate::membership::records;
use crate::mvcc::{MvccStore, WriteView};
use crate::watch::WatchHub;

pub struct Applier {
    mvcc: Arc<MvccStore>,
    lessor: Arc<Mutex<Lessor>>,
    hub: Arc<WatchHub>,
    alarms: Arc<Alarms>,
    auth: Arc<AuthStore>,
}

impl Applier {
    pub fn new(
        mvcc: Arc<MvccStore>,
        lessor: Arc<Mutex<Lessor>>,
        hub: Arc<WatchHub>,
        alarms: Arc<Alarms>,
        auth: Arc<AuthStore>,
    ) -> Self {
        Applier {
            mvcc,
            lessor,
            hub,
            alarms,
            auth,
        }
    }

    pub(super) fn mvcc(&self) -> &MvccStore {
        &self.mvcc
    }

    pub(super) fn hub(&self) -> &WatchHub {
        &self.hub
    }

    /// Applies one request as the entry at raft `index`; a client's
    /// (`caller` set) only if the access rules allow it.
    pub(super) fn dispatch(
        &self,
        view: &mut WriteView,
        index: u64,
        caller: Option<&Caller>,
        request: &Request,
    ) -> Result<ApplyOutcome> {
        if self.alarms.no_space() && alarms::grows_database(request) {
            return Err(StoreError::NoSpace);
        }
        let mut lessor = self.lessor.lock();
        if let Some(caller) = caller {
            auth::check(&self.auth, &lessor, caller, request)?;
        }
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
                records::publish_attributes(view, &**self.mvcc.backend(), record)
                    .map(ApplyOutcome::Members)
            }
            // The transport follows the members returned here: they must
            // carry the new URLs, or peers keep dialling the old ones.
            Request::MemberPeerUrls(record) => {
                records::update_peer_urls(view, &**self.mvcc.backend(), record)
                    .map(ApplyOutcome::Members)
            }
            Request::Alarm(req) => Ok(ApplyOutcome::Alarm(self.alarms.apply(view, req))),
            _ => auth::apply(&self.auth, view, index, request),
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
        records::apply_change(&mut view, &**self.mvcc.backend(), kind, node_id, record)?;
        view.finish(index)?;
        self.members()
    }

    pub fn members(&self) -> Result<Vec<MemberRecord>> {
        records::load_members(&**self.mvcc.backend())
    }

    /// Replaces the whole state machine with the snapshot file a raft
    /// snapshot's data names.
    pub fn restore_snapshot(&self, data: &[u8]) -> Result<()> {
        crate::snapshot::install(&self.mvcc, data)?;
        let mut lessor = self.lessor.lock();
        lessor.clear();
        restore_leases(&self.mvcc, &mut lessor)?;
        self.alarms.reload(&**self.mvcc.backend())?;
        self.auth.reload(&**self.mvcc.backend())?;
        self.hub.resync(self.mvcc.current_revision());
        Ok(())
    }
}
