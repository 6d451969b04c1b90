//! etcd 3.4's buckets and how it encodes their keys and values, for the
//! records a backup carries across.

use capstan_proto::internal::MemberRecord;
use serde::Serialize;

pub const KEY: &[u8] = b"key";
pub const LEASE: &[u8] = b"lease";
pub const META: &[u8] = b"meta";
pub const MEMBERS: &[u8] = b"members";
pub const ALARM: &[u8] = b"alarm";
pub const AUTH: &[u8] = b"auth";
pub const AUTH_ROLES: &[u8] = b"authRoles";
pub const AUTH_USERS: &[u8] = b"authUsers";

/// Every bucket an etcd 3.4 database has; those capstan has nothing for
/// are written empty, as a new etcd member creates them.
pub const BUCKETS: &[&[u8]] = &[
    ALARM,
    AUTH,
    AUTH_ROLES,
    AUTH_USERS,
    b"cluster",
    KEY,
    LEASE,
    MEMBERS,
    b"members_removed",
    META,
];

pub const CONSISTENT_INDEX: &[u8] = b"consistent_index";
/// The `auth` bucket's keys: one byte (1 on), and the auth revision as a
/// u64 big-endian, as capstan keeps them too.
pub const AUTH_ENABLED: &[u8] = b"authEnabled";
pub const AUTH_REVISION: &[u8] = b"authRevision";
pub const SCHEDULED_COMPACT: &[u8] = b"scheduledCompactRev";
pub const FINISHED_COMPACT: &[u8] = b"finishedCompactRev";

/// A revision key of the `key` bucket: main, `_`, sub (big-endian), and
/// a trailing `t` for a deletion.
pub fn revision_key(main: i64, sub: i64, tombstone: bool) -> Vec<u8> {
    let mut key = Vec::with_capacity(18);
    key.extend_from_slice(&(main as u64).to_be_bytes());
    key.push(b'_');
    key.extend_from_slice(&(sub as u64).to_be_bytes());
    if tombstone {
        key.push(b't');
    }
    key
}

/// Main, sub and whether it marks a deletion, from a `key` bucket key.
pub fn parse_revision_key(key: &[u8]) -> Option<(i64, i64, bool)> {
    let tombstone = match key.len() {
        17 => false,
        18 if key[17] == b't' => true,
        _ => return None,
    };
    if key[8] != b'_' {
        return None;
    }
    let main = u64::from_be_bytes(key[0..8].try_into().ok()?) as i64;
    let sub = u64::from_be_bytes(key[9..17].try_into().ok()?) as i64;
    Some((main, sub, tombstone))
}

/// `leasepb.Lease`, the value of the `lease` bucket (keyed by the ID,
/// big-endian).
#[derive(Clone, PartialEq, prost::Message)]
pub struct Lease {
    #[prost(int64, tag = "1")]
    pub id: i64,
    #[prost(int64, tag = "2")]
    pub ttl: i64,
    #[prost(int64, tag = "3")]
    pub remaining_ttl: i64,
}

/// A member as etcd's `members` bucket stores it: JSON keyed by the ID in
/// hexadecimal.
#[derive(Serialize)]
struct EtcdMember<'a> {
    id: u64,
    #[serde(rename = "peerURLs")]
    peer_urls: &'a [String],
    #[serde(rename = "isLearner", skip_serializing_if = "std::ops::Not::not")]
    is_learner: bool,
    name: &'a str,
    #[serde(rename = "clientURLs")]
    client_urls: &'a [String],
}

pub fn member_pair(member: &MemberRecord) -> (Vec<u8>, Vec<u8>) {
    let json = serde_json::to_vec(&EtcdMember {
        id: member.id,
        peer_urls: &member.peer_urls,
        is_learner: member.is_learner,
        name: &member.name,
        client_urls: &member.client_urls,
    })
    .expect("a member serialises");
    (format!("{:x}", member.id).into_bytes(), json)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn revision_keys_round_trip_and_sort_by_revision() {
        let a = revision_key(2, 1, false);
        let b = revision_key(3, 0, true);
        assert!(a < b);
        assert_eq!(b.len(), 18);
        assert_eq!(parse_revision_key(&a), Some((2, 1, false)));
        assert_eq!(parse_revision_key(&b), Some((3, 0, true)));
        assert_eq!(parse_revision_key(b"short"), None);
    }

    #[test]
    fn a_member_is_etcd_json_under_its_hex_id() {
        let (key, value) = member_pair(&MemberRecord {
            id: 0xabc,
            name: "m1".into(),
            peer_urls: vec!["http://a:2380".into()],
            client_urls: vec![],
            is_learner: false,
        });
        assert_eq!(key, b"abc");
        let json = String::from_utf8(value).unwrap();
        assert_eq!(
            json,
            r#"{"id":2748,"peerURLs":["http://a:2380"],"name":"m1","clientURLs":[]}"#
        );
    }
}
