//! Alarms, as etcd keeps them: one record per (member, alarm type) under
//! the `a` prefix of the MVCC space, raised and cleared only by applied
//! raft entries, so every member holds the same set, snapshots carry it
//! and it survives restarts. While a NOSPACE alarm is raised by any
//! member, every member refuses the requests that grow the database (put,
//! a txn that puts, lease grant), as etcd's capped applier does; reads,
//! deletes and compaction still go through.

use std::collections::BTreeSet;

use capstan_proto::etcdserverpb::alarm_request::AlarmAction;
use capstan_proto::etcdserverpb::request_op::Request as Op;
use capstan_proto::etcdserverpb::{
    AlarmMember, AlarmRequest, AlarmResponse, AlarmType, ResponseHeader, TxnRequest,
};
use capstan_proto::internal::raft_request::Request;
use parking_lot::RwLock;

use crate::error::Result;
use crate::mvcc::WriteView;
use crate::storage::{Backend, Space};

pub const ALARM_PREFIX: u8 = b'a';

pub fn alarm_key(member: u64, alarm: i32) -> Vec<u8> {
    let mut key = vec![ALARM_PREFIX];
    key.extend_from_slice(&member.to_be_bytes());
    key.extend_from_slice(&alarm.to_be_bytes());
    key
}

pub fn parse_key(key: &[u8]) -> Option<(u64, i32)> {
    let member = u64::from_be_bytes(key.get(1..9)?.try_into().ok()?);
    let alarm = i32::from_be_bytes(key.get(9..13)?.try_into().ok()?);
    Some((member, alarm))
}

/// The raised alarms, kept in memory beside their records so that every
/// write can check them cheaply.
#[derive(Default)]
pub struct Alarms {
    raised: RwLock<BTreeSet<(u64, i32)>>,
}

impl Alarms {
    /// The alarms recorded in the backend.
    pub fn load(backend: &dyn Backend) -> Result<Alarms> {
        let alarms = Alarms::default();
        alarms.reload(backend)?;
        Ok(alarms)
    }

    /// Reads the set again (after a snapshot replaced the state machine).
    pub fn reload(&self, backend: &dyn Backend) -> Result<()> {
        let records = backend.scan(Space::Mvcc, &[ALARM_PREFIX], Some(&[ALARM_PREFIX + 1]))?;
        *self.raised.write() = records.iter().filter_map(|(k, _)| parse_key(k)).collect();
        Ok(())
    }

    /// Every raised alarm of type `alarm` (NONE: of every type).
    pub fn list(&self, alarm: i32) -> Vec<AlarmMember> {
        self.raised
            .read()
            .iter()
            .filter(|(_, a)| alarm == AlarmType::None as i32 || *a == alarm)
            .map(|&(member_id, alarm)| AlarmMember { member_id, alarm })
            .collect()
    }

    pub fn is_raised(&self, member: u64, alarm: AlarmType) -> bool {
        self.raised.read().contains(&(member, alarm as i32))
    }

    /// Whether some member raised NOSPACE.
    pub fn no_space(&self) -> bool {
        let nospace = AlarmType::Nospace as i32;
        self.raised.read().iter().any(|(_, a)| *a == nospace)
    }

    /// Applies an alarm request: the alarms it changed (or, for GET, the
    /// ones raised), as etcd answers.
    pub fn apply(&self, view: &mut WriteView, req: &AlarmRequest) -> AlarmResponse {
        let member = (req.member_id, req.alarm);
        let alarms = match req.action() {
            AlarmAction::Get => self.list(req.alarm),
            AlarmAction::Activate if req.alarm != AlarmType::None as i32 => {
                let added = self.raised.write().insert(member);
                if added {
                    view.put_record(alarm_key(member.0, member.1), Vec::new());
                    tracing::warn!(
                        member = format!("{:x}", member.0),
                        alarm = req.alarm,
                        "alarm raised"
                    );
                }
                added_or_removed(added, member)
            }
            AlarmAction::Activate => Vec::new(),
            AlarmAction::Deactivate => {
                let removed = self.raised.write().remove(&member);
                if removed {
                    view.delete_record(alarm_key(member.0, member.1));
                    tracing::info!(
                        member = format!("{:x}", member.0),
                        alarm = req.alarm,
                        "alarm cleared"
                    );
                }
                added_or_removed(removed, member)
            }
        };
        AlarmResponse {
            header: Some(ResponseHeader {
                revision: view.revision(),
                ..Default::default()
            }),
            alarms,
        }
    }
}

fn added_or_removed(changed: bool, (member_id, alarm): (u64, i32)) -> Vec<AlarmMember> {
    if changed {
        vec![AlarmMember { member_id, alarm }]
    } else {
        Vec::new()
    }
}

/// Whether `request` would grow the database, so that NOSPACE refuses it:
/// a put, a lease grant, or a txn with a put in either branch (etcd 3.4
/// looks only at a txn's top-level puts; nested ones count here too, so
/// that a nested txn is no way around the alarm).
pub fn grows_database(request: &Request) -> bool {
    match request {
        Request::Put(_) | Request::LeaseGrant(_) => true,
        Request::Txn(txn) => txn_puts(txn),
        _ => false,
    }
}

fn txn_puts(txn: &TxnRequest) -> bool {
    txn.success
        .iter()
        .chain(&txn.failure)
        .any(|op| match &op.request {
            Some(Op::RequestPut(_)) => true,
            Some(Op::RequestTxn(nested)) => txn_puts(nested),
            _ => false,
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mvcc::MvccStore;
    use crate::storage::SledBackend;
    use capstan_proto::etcdserverpb::{PutRequest, RequestOp};
    use std::sync::Arc;

    fn request(action: AlarmAction, member_id: u64) -> AlarmRequest {
        AlarmRequest {
            action: action as i32,
            member_id,
            alarm: AlarmType::Nospace as i32,
        }
    }

    #[test]
    fn raised_alarms_are_recorded_listed_and_cleared() {
        let dir = tempfile::tempdir().unwrap();
        let backend: Arc<dyn Backend> = Arc::new(SledBackend::open(dir.path()).unwrap());
        let mvcc = MvccStore::open(backend.clone()).unwrap();
        let alarms = Alarms::load(&*backend).unwrap();
        let mut view = mvcc.write();
        let raised = alarms.apply(&mut view, &request(AlarmAction::Activate, 7));
        assert_eq!(raised.alarms.len(), 1);
        let again = alarms.apply(&mut view, &request(AlarmAction::Activate, 7));
        assert!(again.alarms.is_empty(), "raising twice changes nothing");
        view.finish(2).unwrap();
        assert!(alarms.no_space());
        let reloaded = Alarms::load(&*backend).unwrap();
        assert_eq!(reloaded.list(AlarmType::None as i32)[0].member_id, 7);

        let mut view = mvcc.write();
        let cleared = alarms.apply(&mut view, &request(AlarmAction::Deactivate, 7));
        assert_eq!(cleared.alarms.len(), 1);
        view.finish(3).unwrap();
        assert!(!alarms.no_space());
        assert!(Alarms::load(&*backend).unwrap().list(0).is_empty());
    }

    #[test]
    fn only_requests_that_put_grow_the_database() {
        let put = || RequestOp {
            request: Some(Op::RequestPut(PutRequest::default())),
        };
        let nested = TxnRequest {
            failure: vec![put()],
            ..Default::default()
        };
        let with_nested = TxnRequest {
            success: vec![RequestOp {
                request: Some(Op::RequestTxn(nested)),
            }],
            ..Default::default()
        };
        assert!(grows_database(&Request::Put(PutRequest::default())));
        assert!(grows_database(&Request::Txn(with_nested)));
        assert!(!grows_database(&Request::Txn(TxnRequest::default())));
    }
}
