//! Lease grant and revoke as raft-applied writes, and their persistence.

use capstan_proto::etcdserverpb::{
    LeaseGrantRequest, LeaseGrantResponse, LeaseRevokeRequest, LeaseRevokeResponse, ResponseHeader,
};
use capstan_proto::internal::StoredLease;
use prost::Message;

use super::kv;
use crate::error::{Result, StoreError};
use crate::lease::Lessor;
use crate::mvcc::{MvccStore, WriteView};
use crate::storage::Space;

pub const LEASE_PREFIX: u8 = b'l';

pub fn lease_key(id: i64) -> Vec<u8> {
    let mut key = vec![LEASE_PREFIX];
    key.extend_from_slice(&(id as u64).to_be_bytes());
    key
}

fn header(view: &WriteView) -> Option<ResponseHeader> {
    Some(ResponseHeader {
        revision: view.revision(),
        ..Default::default()
    })
}

pub fn grant(
    view: &mut WriteView,
    lessor: &mut Lessor,
    req: &LeaseGrantRequest,
) -> Result<LeaseGrantResponse> {
    let ttl = lessor.grant(req.id, req.ttl)?;
    let record = StoredLease { id: req.id, ttl };
    view.put_record(lease_key(req.id), record.encode_to_vec());
    Ok(LeaseGrantResponse {
        header: header(view),
        id: req.id,
        ttl,
        error: String::new(),
    })
}

/// Removes the lease and deletes its keys, all in one revision.
pub fn revoke(
    view: &mut WriteView,
    lessor: &mut Lessor,
    req: &LeaseRevokeRequest,
) -> Result<LeaseRevokeResponse> {
    let keys = lessor.revoke(req.id)?;
    kv::delete_keys(view, &keys)?;
    view.delete_record(lease_key(req.id));
    Ok(LeaseRevokeResponse {
        header: header(view),
    })
}

/// Rebuilds the lessor from the persisted leases and the keys attached to them.
pub fn restore_leases(mvcc: &MvccStore, lessor: &mut Lessor) -> Result<()> {
    let start = [LEASE_PREFIX];
    let end = [LEASE_PREFIX + 1];
    for (_, value) in mvcc.backend().scan(Space::Mvcc, &start, Some(&end))? {
        let lease = StoredLease::decode(value.as_slice())?;
        lessor.restore(lease.id, lease.ttl);
    }
    for (key, lease) in mvcc.leased_keys(&[0], &[0]) {
        if !lessor.exists(lease) {
            return Err(StoreError::Corrupt(format!(
                "key {key:?} on missing lease {lease}"
            )));
        }
        lessor.attach(lease, &key);
    }
    Ok(())
}
