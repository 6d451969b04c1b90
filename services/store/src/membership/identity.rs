//! Cluster membership as bootstrapped from `--initial-cluster`, and this
//! member's persisted identity.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use capstan_proto::etcdserverpb::Member as WireMember;
use capstan_proto::internal::{MemberIdentity, MemberRecord};
use prost::Message;

use crate::config::{split_urls, StoreConfig};
use crate::error::{Result, StoreError};
use crate::storage::{Backend, Space, WriteBatch};

const IDENTITY_KEY: &[u8] = b"s/identity";

#[derive(Debug, Clone, PartialEq)]
pub struct Member {
    pub id: u64,
    pub name: String,
    pub peer_urls: Vec<String>,
    pub client_urls: Vec<String>,
}

impl Member {
    pub fn to_record(&self) -> MemberRecord {
        MemberRecord {
            id: self.id,
            name: self.name.clone(),
            peer_urls: self.peer_urls.clone(),
            client_urls: self.client_urls.clone(),
            is_learner: false,
        }
    }
}

/// The wire form of a member record.
pub fn to_wire(record: &MemberRecord) -> WireMember {
    WireMember {
        id: record.id,
        name: record.name.clone(),
        peer_ur_ls: record.peer_urls.clone(),
        client_ur_ls: record.client_urls.clone(),
        is_learner: record.is_learner,
    }
}

/// The id a member with these peer URLs gets, here and in `member add`.
pub fn member_id(peer_urls: &[String], cluster_token: &str) -> u64 {
    let mut urls = peer_urls.to_vec();
    urls.sort();
    let mut parts: Vec<&str> = urls.iter().map(String::as_str).collect();
    parts.push(cluster_token);
    stable_hash(&parts)
}

/// This member's place in the cluster. The live member list is in the
/// state machine (`records.rs`); `initial_members` is what
/// `--initial-cluster` said, used once to bootstrap a new cluster.
#[derive(Debug, Clone)]
pub struct Cluster {
    /// 0 until a member that joined an existing cluster has heard from it.
    pub cluster_id: ClusterId,
    pub local_id: u64,
    pub name: String,
    pub client_urls: Vec<String>,
    pub cluster_token: String,
    pub initial_members: Vec<Member>,
}

/// The cluster's id, shared by the server and the transport.
#[derive(Debug, Clone)]
pub struct ClusterId(Arc<AtomicU64>);

impl ClusterId {
    pub fn new(id: u64) -> Self {
        ClusterId(Arc::new(AtomicU64::new(id)))
    }

    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Acquire)
    }

    /// Accepts `id` from a peer. Only a member that does not know its
    /// cluster yet takes it (and persists it); others must match.
    pub fn adopt(
        &self,
        id: u64,
        backend: &dyn Backend,
        member_id: u64,
        name: &str,
    ) -> Result<bool> {
        if self.get() == id {
            return Ok(true);
        }
        if self
            .0
            .compare_exchange(0, id, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
        {
            return Ok(false);
        }
        let identity = MemberIdentity {
            member_id,
            cluster_id: id,
            name: name.to_string(),
        };
        let mut batch = WriteBatch::default();
        batch.put(IDENTITY_KEY.to_vec(), identity.encode_to_vec());
        backend.write(Space::Raft, batch)?;
        backend.flush()?;
        Ok(true)
    }
}

/// FNV-1a: a small hash whose output never changes between builds, so
/// member ids computed from the same flags agree everywhere.
fn stable_hash(parts: &[&str]) -> u64 {
    let mut hash: u64 = 0xcbf29ce484222325;
    for part in parts {
        for byte in part.bytes().chain(std::iter::once(0)) {
            hash ^= byte as u64;
            hash = hash.wrapping_mul(0x100000001b3);
        }
    }
    hash.max(1)
}

impl Cluster {
    /// Reads membership from the configuration; this member's identity is
    /// kept from its first start, as etcd keeps its member id.
    pub fn bootstrap(config: &StoreConfig, backend: &dyn Backend) -> Result<Cluster> {
        let members = parse_initial_cluster(config)?;
        let local = members
            .iter()
            .find(|m| m.name == config.name)
            .ok_or_else(|| {
                StoreError::Config(format!(
                    "--initial-cluster has no member named {:?}",
                    config.name
                ))
            })?;
        let mut ids: Vec<u64> = members.iter().map(|m| m.id).collect();
        ids.sort_unstable();
        let id_text: Vec<String> = ids.iter().map(u64::to_string).collect();
        let id_refs: Vec<&str> = id_text.iter().map(String::as_str).collect();
        // A member joining an existing cluster cannot compute its id from a
        // member list that has changed since; it adopts the id of the first
        // peer that contacts it (see `ClusterId::adopt`).
        let cluster_id = if config.initial_cluster_state == "new" {
            stable_hash(&id_refs)
        } else {
            0
        };
        let computed = MemberIdentity {
            member_id: local.id,
            cluster_id,
            name: config.name.clone(),
        };
        let identity = match backend.get(Space::Raft, IDENTITY_KEY)? {
            Some(bytes) => MemberIdentity::decode(bytes.as_slice())?,
            None => {
                let mut batch = WriteBatch::default();
                batch.put(IDENTITY_KEY.to_vec(), computed.encode_to_vec());
                backend.write(Space::Raft, batch)?;
                backend.flush()?;
                computed
            }
        };
        Ok(Cluster {
            cluster_id: ClusterId::new(identity.cluster_id),
            local_id: identity.member_id,
            name: config.name.clone(),
            client_urls: split_urls(&config.advertise_client_urls),
            cluster_token: config.initial_cluster_token.clone(),
            initial_members: members,
        })
    }

    pub fn initial_records(&self) -> Vec<MemberRecord> {
        self.initial_members.iter().map(Member::to_record).collect()
    }

    pub fn initial_voter_ids(&self) -> Vec<u64> {
        self.initial_members.iter().map(|m| m.id).collect()
    }
}

fn parse_initial_cluster(config: &StoreConfig) -> Result<Vec<Member>> {
    let mut members: Vec<Member> = Vec::new();
    for pair in split_urls(&config.initial_cluster) {
        let (name, url) = pair.split_once('=').ok_or_else(|| {
            StoreError::Config(format!("--initial-cluster entry {pair:?} is not name=url"))
        })?;
        match members.iter_mut().find(|m| m.name == name) {
            Some(member) => member.peer_urls.push(url.to_string()),
            None => members.push(Member {
                id: 0,
                name: name.to_string(),
                peer_urls: vec![url.to_string()],
                client_urls: Vec::new(),
            }),
        }
    }
    for member in &mut members {
        // Client URLs are not set here: every member must write identical
        // initial records; each publishes its own through raft.
        member.id = member_id(&member.peer_urls, &config.initial_cluster_token);
    }
    Ok(members)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Flags;

    #[test]
    fn ids_are_stable_and_distinct() {
        let flags = Flags {
            name: Some("a".into()),
            initial_cluster: Some("a=http://h1:2380,b=http://h2:2380,c=http://h3:2380".into()),
            ..Default::default()
        };
        let config = StoreConfig::load(&flags).unwrap();
        let members = parse_initial_cluster(&config).unwrap();
        assert_eq!(members.len(), 3);
        assert_ne!(members[0].id, members[1].id);
        assert_eq!(members, parse_initial_cluster(&config).unwrap());
        assert!(members.iter().all(|m| m.client_urls.is_empty()));
    }
}
