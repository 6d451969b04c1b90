//! An etcd 3.4 database (from `etcdctl snapshot save`, against etcd or
//! capstan) as capstan's MVCC space: revisions with their history and
//! deletions, leases, the compaction point, and the access rules (users,
//! roles, whether auth is on), as `etcdctl snapshot restore` keeps them.
//! Membership, alarms and etcd's consistent index stay behind: the
//! restored store is a new cluster.

use capstan_proto::internal::{StoredLease, StoredRevision};
use capstan_proto::mvccpb::KeyValue;
use prost::Message;

use super::bolt_reader::BoltReader;
use super::error::BackupError;
use super::etcd_layout::{self as etcd, Lease};
use crate::apply::lease_key;
use crate::auth::{role_key, user_key, META_AUTH_ENABLED, META_AUTH_REVISION};
use crate::mvcc::{Revision, META_COMPACT_REV, META_CURRENT_REV};

/// Where converted pairs go.
pub type Sink<'a> = dyn FnMut(Vec<u8>, Vec<u8>) -> Result<(), BackupError> + 'a;

/// Converts every record capstan keeps from `db` and hands it to `put`.
pub fn read_database(db: &BoltReader, put: &mut Sink) -> Result<(), BackupError> {
    let found = db.for_each(etcd::KEY, &mut |key, value| {
        let (k, v) = revision(key, value)?;
        put(k, v)
    })?;
    if !found {
        return Err(BackupError::Invalid(
            "no `key` bucket: not an etcd v3 database".into(),
        ));
    }
    db.for_each(etcd::LEASE, &mut |_, value| {
        let lease = Lease::decode(value)?;
        let stored = StoredLease {
            id: lease.id,
            ttl: lease.ttl,
        };
        put(lease_key(lease.id), stored.encode_to_vec())
    })?;
    read_access_rules(db, put)?;
    if let Some(compacted) = compact_revision(db)? {
        // Reads below it were refused before the save; they still are.
        let bytes = compacted.to_be_bytes().to_vec();
        put(META_COMPACT_REV.to_vec(), bytes.clone())?;
        put(META_CURRENT_REV.to_vec(), bytes)?;
    }
    Ok(())
}

/// etcd's `auth`, `authUsers` and `authRoles` buckets; their values are
/// already what capstan keeps.
fn read_access_rules(db: &BoltReader, put: &mut Sink) -> Result<(), BackupError> {
    db.for_each(etcd::AUTH_USERS, &mut |name, user| {
        put(user_key(name), user.to_vec())
    })?;
    db.for_each(etcd::AUTH_ROLES, &mut |name, role| {
        put(role_key(name), role.to_vec())
    })?;
    db.for_each(etcd::AUTH, &mut |key, value| match key {
        etcd::AUTH_ENABLED => put(META_AUTH_ENABLED.to_vec(), value.to_vec()),
        etcd::AUTH_REVISION => put(META_AUTH_REVISION.to_vec(), value.to_vec()),
        _ => Ok(()),
    })?;
    Ok(())
}

fn revision(key: &[u8], value: &[u8]) -> Result<(Vec<u8>, Vec<u8>), BackupError> {
    let (main, sub, tombstone) = etcd::parse_revision_key(key)
        .ok_or_else(|| BackupError::Invalid(format!("`key` bucket key {key:?}")))?;
    let mut kv = KeyValue::decode(value)?;
    if tombstone {
        // capstan's deletion record also says when it happened.
        kv.mod_revision = main;
    }
    let stored = StoredRevision {
        kv: Some(kv),
        tombstone,
    };
    let key = Revision::new(main, sub).to_key().to_vec();
    Ok((key, stored.encode_to_vec()))
}

/// The revision etcd compacted to (or had scheduled a compaction to,
/// which it would finish on start).
fn compact_revision(db: &BoltReader) -> Result<Option<i64>, BackupError> {
    let mut compacted = None;
    db.for_each(etcd::META, &mut |key, value| {
        if key == etcd::SCHEDULED_COMPACT || key == etcd::FINISHED_COMPACT {
            let bad = || BackupError::Invalid(format!("meta {key:?}"));
            let (main, _, _) = etcd::parse_revision_key(value).ok_or_else(bad)?;
            compacted = compacted.max(Some(main));
        }
        Ok(())
    })?;
    Ok(compacted.filter(|&at| at > 0))
}
