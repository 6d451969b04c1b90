//! Cluster membership as the state machine records it: one record per
//! member under the `c` prefix of the MVCC space, so every member agrees on
//! the list and snapshots carry it.

use capstan_proto::internal::MemberRecord;
use prost::Message;

use crate::error::Result;
use crate::mvcc::WriteView;
use crate::storage::{Backend, Space, WriteBatch};

const MEMBER_PREFIX: u8 = b'c';

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
/// removed.
fn amend(
    view: &mut WriteView,
    backend: &dyn Backend,
    id: u64,
    change: impl FnOnce(&mut MemberRecord),
) -> Result<()> {
    if let Some(mut record) = find(backend, id)? {
        change(&mut record);
        view.put_record(member_key(record.id), record.encode_to_vec());
    }
    Ok(())
}

/// A member publishing its name and client URLs.
pub fn publish_attributes(
    view: &mut WriteView,
    backend: &dyn Backend,
    update: &MemberRecord,
) -> Result<()> {
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
) -> Result<()> {
    amend(view, backend, update.id, |record| {
        record.peer_urls = update.peer_urls.clone();
    })
}

pub fn add_member(view: &mut WriteView, record: &MemberRecord) {
    view.put_record(member_key(record.id), record.encode_to_vec());
}

pub fn remove_member(view: &mut WriteView, id: u64) {
    view.delete_record(member_key(id));
}

pub fn find(backend: &dyn Backend, id: u64) -> Result<Option<MemberRecord>> {
    match backend.get(Space::Mvcc, &member_key(id))? {
        Some(bytes) => Ok(Some(MemberRecord::decode(bytes.as_slice())?)),
        None => Ok(None),
    }
}
