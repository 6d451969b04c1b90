//! Where the access rules live in the backend: in the MVCC space beside
//! the data they guard, written in the same batch as the entry that
//! changed them, so that they are as durable as the data, travel in raft
//! snapshots and backups, and are read back at start and after a
//! snapshot install. Users and roles are stored as etcd stores them
//! (`authpb.User`, `authpb.Role`).
//!
//! - `u` + user name → `authpb.User`
//! - `o` + role name → `authpb.Role`
//! - `m/auth_enabled` → one byte, 1 when on
//! - `m/auth_revision` → the auth revision, 8 bytes big-endian

#[cfg(test)]
use std::collections::BTreeMap;

use capstan_proto::authpb::{Role, User};
use prost::Message;

use crate::mvcc::WriteView;

pub const USER_PREFIX: u8 = b'u';
pub const ROLE_PREFIX: u8 = b'o';
pub const META_AUTH_ENABLED: &[u8] = b"m/auth_enabled";
pub const META_AUTH_REVISION: &[u8] = b"m/auth_revision";

/// Where a change to the rules is written: the write view of the entry
/// that made it.
pub trait Records {
    fn put(&mut self, key: Vec<u8>, value: Vec<u8>);
    fn delete(&mut self, key: Vec<u8>);

    fn put_user(&mut self, user: &User) {
        self.put(user_key(&user.name), user.encode_to_vec());
    }

    fn delete_user(&mut self, name: &str) {
        self.delete(user_key(name.as_bytes()));
    }

    fn put_role(&mut self, role: &Role) {
        self.put(role_key(&role.name), role.encode_to_vec());
    }

    fn delete_role(&mut self, name: &str) {
        self.delete(role_key(name.as_bytes()));
    }

    fn put_enabled(&mut self, enabled: bool) {
        self.put(META_AUTH_ENABLED.to_vec(), vec![u8::from(enabled)]);
    }

    fn put_revision(&mut self, revision: u64) {
        self.put(META_AUTH_REVISION.to_vec(), revision.to_be_bytes().to_vec());
    }
}

impl Records for WriteView<'_> {
    fn put(&mut self, key: Vec<u8>, value: Vec<u8>) {
        self.put_record(key, value);
    }

    fn delete(&mut self, key: Vec<u8>) {
        self.delete_record(key);
    }
}

/// Where user `name` is kept.
pub fn user_key(name: &[u8]) -> Vec<u8> {
    prefixed(USER_PREFIX, name)
}

/// Where role `name` is kept.
pub fn role_key(name: &[u8]) -> Vec<u8> {
    prefixed(ROLE_PREFIX, name)
}

fn prefixed(prefix: u8, name: &[u8]) -> Vec<u8> {
    let mut key = Vec::with_capacity(name.len() + 1);
    key.push(prefix);
    key.extend_from_slice(name);
    key
}

/// Records kept in memory, for tests of the rules alone.
#[cfg(test)]
#[derive(Default, Debug)]
pub struct MemoryRecords {
    pub written: BTreeMap<Vec<u8>, Option<Vec<u8>>>,
}

#[cfg(test)]
impl Records for MemoryRecords {
    fn put(&mut self, key: Vec<u8>, value: Vec<u8>) {
        self.written.insert(key, Some(value));
    }

    fn delete(&mut self, key: Vec<u8>) {
        self.written.insert(key, None);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use capstan_proto::etcdserverpb::{AuthUserAddRequest, AuthUserGrantRoleRequest};

    use crate::auth::state::AuthState;
    use crate::mvcc::MvccStore;
    use crate::storage::{Backend, SledBackend};

    #[test]
    fn the_rules_are_written_with_their_entry_and_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let backend: Arc<dyn Backend> = Arc::new(SledBackend::open(dir.path()).unwrap());
        let mvcc = MvccStore::open(backend.clone()).unwrap();
        let fresh = AuthState::load(&*backend).unwrap();
        assert_eq!((fresh.enabled, fresh.revision), (false, 1));

        let mut state = fresh;
        let mut view = mvcc.write();
        let add = AuthUserAddRequest {
            name: "root".into(),
            hashed_password: "$2a$04$hash".into(),
            ..Default::default()
        };
        state.user_add(&mut view, &add).unwrap();
        let grant = AuthUserGrantRoleRequest {
            user: "root".into(),
            role: "root".into(),
        };
        state.user_grant_role(&mut view, &grant).unwrap();
        state.enable(&mut view).unwrap();
        view.finish(7).unwrap();

        let loaded = AuthState::load(&*backend).unwrap();
        assert!(loaded.enabled);
        assert_eq!(loaded.revision, 3);
        assert!(loaded.is_root("root"));
        assert_eq!(loaded.user("root").unwrap().password, b"$2a$04$hash");
        assert_eq!(
            mvcc.current_revision(),
            1,
            "no key revision for auth changes"
        );
    }
}
