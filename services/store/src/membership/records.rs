//! Cluster membership as the state machine records it: one record per
//! member under the `c` prefix of the MVCC space, so every member agrees on
//! the list and snapshots carry it.

use capstan_proto::internal::MemberRecord;
use prost::Message;
use raft::eraftpb::ConfChangeType;

use crate::error::Result;
use crate::mvcc::WriteView;
use crate::storage::{Backend, Space, WriteBatch};

pub const MEMBER_PREFIX: u8 = b'c';

fn member_key(id: u64) -> Vec<u8> {
    let mut key = vec![MEMBER_PREFIX];
    key.extend_from_slice(&id.to_be_bytes());
    key
}

/// Removes every member record (a restored snapshot's members are not the
/// new cluster's).
pub fn clear_members(backend: &dyn Backend) -> Result<()> {
    let mut batch = WriteBatch::default();
    for (key, _) in backend.scan(Space::Mvcc, &[MEMBER_PREFIX], Some(&[MEMBER_PREFIX + 1]))? {
        batch.delete(key);
    }
    backend.write(Space::Mvcc, batch)
}

/// Every member, in id order.
pub fn load_members(backend: &dyn Backend) -> Result<Vec<MemberRecord>> {
    let start = [MEMBER_PREFIX];
    let end = [MEMBER_PREFIX + 1];
    backend
        .scan(Space::Mvcc, &start, Some(&end))?
        .into_iter()
        .map(|(_, value)| Ok(MemberRecord::decode(value.as_slice())?))
        .collect()
}

/// Records the members a new cluster starts with (the same on every member,
/// since they come from the same --initial-cluster).
pub fn write_initial_members(backend: &dyn Backend, members: &[MemberRecord]) -> Result<()> {
    let mut batch = WriteBatch::default();
    for member in members {
        batch.put(member_key(member.id), member.encode_to_vec());
    }
    backend.write(Space::Mvcc, batch)
}

/// Changes part of a member's record; a member removed meanwhile stays
/// removed. Returns the members as they are with the change: it reaches the
/// backend only when the view is finished, so a reload would miss it.
fn amend(
    view: &mut WriteView,
    backend: &dyn Backend,
    id: u64,
    change: impl FnOnce(&mut MemberRecord),
) -> Result<Vec<MemberRecord>> {
    let mut members = load_members(backend)?;
    if let Some(record) = members.iter_mut().find(|m| m.id == id) {
        change(record);
        view.put_record(member_key(record.id), record.encode_to_vec());
    }
    Ok(members)
}

/// A member publishing its name and client URLs.
pub fn publish_attributes(
    view: &mut WriteView,
    backend: &dyn Backend,
    update: &MemberRecord,
) -> Result<Vec<MemberRecord>> {
    amend(view, backend, update.id, |record| {
        record.name = update.name.clone();
        record.client_urls = update.client_urls.clone();
    })
}

/// `member update`: a member's peer URLs change (it moved); nothing else.
pub fn update_peer_urls(
    view: &mut WriteView,
    backend: &dyn Backend,
    update: &MemberRecord,
) -> Result<Vec<MemberRecord>> {
    amend(view, backend, update.id, |record| {
        record.peer_urls = update.peer_urls.clone();
    })
}

/// Records a committed membership change of `node_id`: a removal drops
/// its record; an addition or a promotion writes `record`, as a learner or
/// a voter (a promotion keeps what the member published).
pub fn apply_change(
    view: &mut WriteView,
    backend: &dyn Backend,
    kind: ConfChangeType,
    node_id: u64,
    record: Option<&MemberRecord>,
) -> Result<()> {
    match (kind, record) {
        (ConfChangeType::RemoveNode, _) => view.delete_record(member_key(node_id)),
        (_, Some(record)) => {
            let mut record = record.clone();
            record.is_learner = kind == ConfChangeType::AddLearnerNode;
            if let Some(existing) = find(backend, node_id)? {
                record.name = existing.name;
                record.client_urls = existing.client_urls;
                record.peer_urls = existing.peer_urls;
            }
            view.put_record(member_key(record.id), record.encode_to_vec());
        }
        (_, None) => {}
    }
    Ok(())
}

pub fn find(backend: &dyn Backend, id: u64) -> Result<Option<MemberRecord>> {
    match backend.get(Space::Mvcc, &member_key(id))? {
        Some(bytes) => Ok(Some(MemberRecord::decode(bytes.as_slice())?)),
        None => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::mvcc::MvccStore;
    use crate::storage::SledBackend;

    /// The members an update returns drive the transport, so they carry the
    /// change before the view reaches the backend.
    #[test]
    fn a_peer_url_update_returns_the_members_with_the_new_urls() {
        let dir = tempfile::tempdir().unwrap();
        let backend: Arc<dyn Backend> = Arc::new(SledBackend::open(dir.path()).unwrap());
        let mvcc = MvccStore::open(backend.clone()).unwrap();
        let member = |id, url: &str| MemberRecord {
            id,
            peer_urls: vec![url.to_string()],
            ..Default::default()
        };
        write_initial_members(
            &*backend,
            &[member(1, "http://a:1"), member(2, "http://b:2")],
        )
        .unwrap();

        let mut view = mvcc.write();
        let members = update_peer_urls(&mut view, &*backend, &member(2, "http://c:3")).unwrap();
        let urls = |members: &[MemberRecord]| -> Vec<Vec<String>> {
            members.iter().map(|m| m.peer_urls.clone()).collect()
        };
        assert_eq!(urls(&members), [vec!["http://a:1"], vec!["http://c:3"]]);
        view.finish(1).unwrap();
        assert_eq!(urls(&load_members(&*backend).unwrap()), urls(&members));
    }
}
