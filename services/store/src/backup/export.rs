//! Capstan's MVCC space as etcd 3.4's database: one pass over the records
//! in key order, revisions and leases streamed into their buckets as they
//! come, the few small records (members, alarms, the access rules, meta)
//! gathered and written sorted at the end.

use std::collections::BTreeMap;
use std::io::{Seek, Write};

use capstan_proto::etcdserverpb::AlarmMember;
use capstan_proto::internal::{MemberRecord, StoredLease, StoredRevision};
use capstan_proto::mvccpb::KeyValue;
use prost::Message;

use super::bolt_writer::BoltWriter;
use super::error::BackupError;
use super::etcd_layout::{self as etcd, Lease};
use crate::apply::alarms::{parse_key as parse_alarm_key, ALARM_PREFIX};
use crate::apply::LEASE_PREFIX;
use crate::auth::{META_AUTH_ENABLED, META_AUTH_REVISION, ROLE_PREFIX, USER_PREFIX};
use crate::membership::records::MEMBER_PREFIX;
use crate::mvcc::{MvccStore, Revision, META_APPLIED_INDEX, META_COMPACT_REV, REVISION_PREFIX};

/// Pairs of the small buckets, sorted as bbolt wants them.
type Gathered = BTreeMap<&'static [u8], BTreeMap<Vec<u8>, Vec<u8>>>;

/// Writes the whole of `mvcc`, at one applied index, as a bbolt database
/// to `out`; returns it positioned at the end.
pub fn write_database<W: Write + Seek>(mvcc: &MvccStore, out: W) -> Result<W, BackupError> {
    let mut db = BoltWriter::new(out)?;
    let mut gathered = Gathered::new();
    mvcc.for_each_record(|key, value| route(&mut db, &mut gathered, key, value))?;
    for (bucket, pairs) in gathered {
        db.begin(bucket)?;
        for (key, value) in pairs {
            db.put(key, value)?;
        }
    }
    db.end()?;
    for bucket in etcd::BUCKETS {
        if !db.has(bucket) {
            db.begin(bucket)?;
        }
    }
    db.finish()
}

/// Sends one capstan record to its etcd bucket. Revisions and leases are
/// contiguous and in etcd's order in capstan's key space, so each is
/// written as it comes; a record etcd has no place for is left out.
fn route<W: Write + Seek>(
    db: &mut BoltWriter<W>,
    gathered: &mut Gathered,
    key: &[u8],
    value: &[u8],
) -> Result<(), BackupError> {
    let stream = |db: &mut BoltWriter<W>, bucket: &[u8], pair: (Vec<u8>, Vec<u8>)| {
        if !db.has(bucket) {
            db.begin(bucket)?;
        }
        db.put(pair.0, pair.1)
    };
    match key.first().copied() {
        Some(REVISION_PREFIX) => stream(db, etcd::KEY, revision(key, value)?),
        Some(LEASE_PREFIX) => stream(db, etcd::LEASE, lease(value)?),
        Some(MEMBER_PREFIX) => {
            let member = MemberRecord::decode(value)?;
            let (k, v) = etcd::member_pair(&member);
            gathered.entry(etcd::MEMBERS).or_default().insert(k, v);
            Ok(())
        }
        // Users and roles are kept as etcd keeps them, under their name.
        Some(USER_PREFIX) => gather(gathered, etcd::AUTH_USERS, &key[1..], value),
        Some(ROLE_PREFIX) => gather(gathered, etcd::AUTH_ROLES, &key[1..], value),
        Some(ALARM_PREFIX) => {
            if let Some((member_id, alarm)) = parse_alarm_key(key) {
                let k = AlarmMember { member_id, alarm }.encode_to_vec();
                gathered
                    .entry(etcd::ALARM)
                    .or_default()
                    .insert(k, Vec::new());
            }
            Ok(())
        }
        _ if key == META_AUTH_ENABLED => gather(gathered, etcd::AUTH, etcd::AUTH_ENABLED, value),
        _ if key == META_AUTH_REVISION => gather(gathered, etcd::AUTH, etcd::AUTH_REVISION, value),
        _ => {
            if let Some((k, v)) = meta(key, value) {
                let meta = gathered.entry(etcd::META).or_default();
                for name in k {
                    meta.insert(name.to_vec(), v.clone());
                }
            }
            Ok(())
        }
    }
}

fn gather(
    gathered: &mut Gathered,
    bucket: &'static [u8],
    key: &[u8],
    value: &[u8],
) -> Result<(), BackupError> {
    let pairs = gathered.entry(bucket).or_default();
    pairs.insert(key.to_vec(), value.to_vec());
    Ok(())
}

fn revision(key: &[u8], value: &[u8]) -> Result<(Vec<u8>, Vec<u8>), BackupError> {
    let rev = Revision::from_key(key)
        .ok_or_else(|| BackupError::Invalid(format!("revision key {key:?}")))?;
    let stored = StoredRevision::decode(value)?;
    let mut kv = stored.kv.unwrap_or_default();
    if stored.tombstone {
        // etcd's deletion record holds the key alone.
        kv = KeyValue {
            key: kv.key,
            ..Default::default()
        };
    }
    let key = etcd::revision_key(rev.main, rev.sub, stored.tombstone);
    Ok((key, kv.encode_to_vec()))
}

fn lease(value: &[u8]) -> Result<(Vec<u8>, Vec<u8>), BackupError> {
    let stored = StoredLease::decode(value)?;
    let lease = Lease {
        id: stored.id,
        ttl: stored.ttl,
        remaining_ttl: 0,
    };
    Ok((
        (stored.id as u64).to_be_bytes().to_vec(),
        lease.encode_to_vec(),
    ))
}

/// The `meta` keys a capstan meta record becomes, and their value.
fn meta(key: &[u8], value: &[u8]) -> Option<(Vec<&'static [u8]>, Vec<u8>)> {
    if key == META_APPLIED_INDEX {
        // Both are a u64 big-endian.
        return Some((vec![etcd::CONSISTENT_INDEX], value.to_vec()));
    }
    if key == META_COMPACT_REV {
        let at = i64::from_be_bytes(value.try_into().ok()?);
        let rev = etcd::revision_key(at, 0, false);
        return Some((vec![etcd::SCHEDULED_COMPACT, etcd::FINISHED_COMPACT], rev));
    }
    None
}
