//! The access rules as every member holds them: whether auth is on, the
//! auth revision, users, roles, and each user's merged permissions. Each
//! change is applied from a committed raft entry, identically on every
//! member, and handed to [`Records`] to be written with that entry.
//!
//! The rules are etcd's: `root` must exist and hold the `root` role before
//! auth is turned on, and while it is on neither can be removed; a user
//! holding `root` may do anything; every change bumps the auth revision
//! (turning auth on does not, as in etcd), so that a request checked
//! under older rules is refused and its client authenticates again.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use capstan_proto::authpb::{Permission, Role, User, UserAddOptions};
use capstan_proto::etcdserverpb::{
    AuthRoleGrantPermissionRequest, AuthRoleRevokePermissionRequest, AuthUserAddRequest,
    AuthUserChangePasswordRequest, AuthUserGrantRoleRequest, AuthUserRevokeRoleRequest,
};

use prost::Message;

use super::permissions::{is_valid_range, RangePermissions};
use super::records::{Records, META_AUTH_ENABLED, META_AUTH_REVISION, ROLE_PREFIX, USER_PREFIX};
use crate::error::{Result, StoreError};
use crate::storage::{Backend, Space};

/// The user and the role that may do anything.
pub const ROOT: &str = "root";

#[derive(Debug, Clone)]
pub struct AuthState {
    pub enabled: bool,
    /// Bumped by every change; 1 in a store that never changed its rules
    /// (as etcd starts it), so that 0 can mean "no identity".
    pub revision: u64,
    pub(super) users: BTreeMap<String, User>,
    pub(super) roles: BTreeMap<String, Role>,
    permissions: HashMap<String, Arc<RangePermissions>>,
}

impl Default for AuthState {
    fn default() -> Self {
        AuthState {
            enabled: false,
            revision: 1,
            users: BTreeMap::new(),
            roles: BTreeMap::new(),
            permissions: HashMap::new(),
        }
    }
}

impl AuthState {
    /// The rules as the backend holds them (see `records.rs`; the
    /// defaults in a new store).
    pub fn load(backend: &dyn Backend) -> Result<AuthState> {
        let enabled = backend
            .get(Space::Mvcc, META_AUTH_ENABLED)?
            .is_some_and(|value| value == [1]);
        let revision = match backend.get(Space::Mvcc, META_AUTH_REVISION)? {
            Some(value) => u64::from_be_bytes(
                value
                    .as_slice()
                    .try_into()
                    .map_err(|_| StoreError::Corrupt("auth revision record".into()))?,
            ),
            None => 1,
        };
        let mut users = BTreeMap::new();
        for (key, value) in backend.scan(Space::Mvcc, &[USER_PREFIX], Some(&[USER_PREFIX + 1]))? {
            users.insert(name_of(&key), User::decode(value.as_slice())?);
        }
        let mut roles = BTreeMap::new();
        for (key, value) in backend.scan(Space::Mvcc, &[ROLE_PREFIX], Some(&[ROLE_PREFIX + 1]))? {
            roles.insert(name_of(&key), Role::decode(value.as_slice())?);
        }
        Ok(AuthState::from_parts(enabled, revision, users, roles))
    }

    fn from_parts(
        enabled: bool,
        revision: u64,
        users: BTreeMap<String, User>,
        roles: BTreeMap<String, Role>,
    ) -> AuthState {
        let mut state = AuthState {
            enabled,
            revision: revision.max(1),
            users,
            roles,
            permissions: HashMap::new(),
        };
        state.merge_permissions();
        state
    }

    pub fn user(&self, name: &str) -> Option<&User> {
        self.users.get(name)
    }

    pub fn role(&self, name: &str) -> Option<&Role> {
        self.roles.get(name)
    }

    pub fn user_names(&self) -> Vec<String> {
        self.users.keys().cloned().collect()
    }

    pub fn role_names(&self) -> Vec<String> {
        self.roles.keys().cloned().collect()
    }

    pub fn is_root(&self, user: &str) -> bool {
        self.users.get(user).is_some_and(has_root_role)
    }

    pub fn permissions(&self, user: &str) -> Option<&RangePermissions> {
        self.permissions.get(user).map(|p| &**p)
    }

    /// Rebuilds every user's merged permissions; run after each change,
    /// as etcd refreshes its whole cache (changes are rare and admin-only).
    fn merge_permissions(&mut self) {
        let roles = &self.roles;
        self.permissions = self
            .users
            .iter()
            .map(|(name, user)| {
                let granted = user
                    .roles
                    .iter()
                    .filter_map(|role| roles.get(role))
                    .flat_map(|role| role.key_permission.iter());
                (name.clone(), Arc::new(RangePermissions::merge(granted)))
            })
            .collect();
    }

    /// Ends a change: the revision goes up and is written with it.
    fn changed(&mut self, records: &mut dyn Records) {
        self.revision += 1;
        records.put_revision(self.revision);
        self.merge_permissions();
    }

    pub fn enable(&mut self, records: &mut dyn Records) -> Result<()> {
        if self.enabled {
            return Ok(());
        }
        let root = self.users.get(ROOT).ok_or(StoreError::RootUserNotExist)?;
        if !has_root_role(root) {
            return Err(StoreError::RootRoleNotExist);
        }
        self.enabled = true;
        records.put_enabled(true);
        Ok(())
    }

    pub fn disable(&mut self, records: &mut dyn Records) {
        if !self.enabled {
            return;
        }
        self.enabled = false;
        records.put_enabled(false);
        self.changed(records);
    }

    /// Adds a user; `request.hashed_password` is the bcrypt hash the
    /// proposer made (the clear password never reaches the log).
    pub fn user_add(
        &mut self,
        records: &mut dyn Records,
        request: &AuthUserAddRequest,
    ) -> Result<()> {
        if request.name.is_empty() {
            return Err(StoreError::UserEmpty);
        }
        if self.users.contains_key(&request.name) {
            return Err(StoreError::UserAlreadyExist);
        }
        let options = request
            .options
            .unwrap_or(UserAddOptions { no_password: false });
        let password = if options.no_password {
            Vec::new()
        } else {
            request.hashed_password.as_bytes().to_vec()
        };
        let user = User {
            name: request.name.as_bytes().to_vec(),
            password,
            roles: Vec::new(),
            options: Some(options),
        };
        self.put_user(records, user);
        self.changed(records);
        Ok(())
    }

    pub fn user_delete(&mut self, records: &mut dyn Records, name: &str) -> Result<()> {
        if self.enabled && name == ROOT {
            return Err(StoreError::InvalidAuthMgmt);
        }
        if self.users.remove(name).is_none() {
            return Err(StoreError::UserNotFound);
        }
        records.delete_user(name);
        self.changed(records);
        Ok(())
    }

    pub fn user_change_password(
        &mut self,
        records: &mut dyn Records,
        request: &AuthUserChangePasswordRequest,
    ) -> Result<()> {
        let mut user = self
            .users
            .get(&request.name)
            .cloned()
            .ok_or(StoreError::UserNotFound)?;
        user.password = request.hashed_password.as_bytes().to_vec();
        self.put_user(records, user);
        self.changed(records);
        Ok(())
    }

    pub fn user_grant_role(
        &mut self,
        records: &mut dyn Records,
        request: &AuthUserGrantRoleRequest,
    ) -> Result<()> {
        let mut user = self
            .users
            .get(&request.user)
            .cloned()
            .ok_or(StoreError::UserNotFound)?;
        // `root` may be granted before a role of that name exists, as in
        // etcd: it is what makes a user root, not a set of permissions.
        if request.role != ROOT && !self.roles.contains_key(&request.role) {
            return Err(StoreError::RoleNotFound);
        }
        let Err(at) = user.roles.binary_search(&request.role) else {
            return Ok(()); // already granted: nothing changes
        };
        user.roles.insert(at, request.role.clone());
        self.put_user(records, user);
        self.changed(records);
        Ok(())
    }

    pub fn user_revoke_role(
        &mut self,
        records: &mut dyn Records,
        request: &AuthUserRevokeRoleRequest,
    ) -> Result<()> {
        if self.enabled && request.name == ROOT && request.role == ROOT {
            return Err(StoreError::InvalidAuthMgmt);
        }
        let mut user = self
            .users
            .get(&request.name)
            .cloned()
            .ok_or(StoreError::UserNotFound)?;
        let at = user
            .roles
            .binary_search(&request.role)
            .map_err(|_| StoreError::RoleNotGranted)?;
        user.roles.remove(at);
        self.put_user(records, user);
        self.changed(records);
        Ok(())
    }

    pub fn role_add(&mut self, records: &mut dyn Records, name: &str) -> Result<()> {
        if name.is_empty() {
            return Err(StoreError::RoleEmpty);
        }
        if self.roles.contains_key(name) {
            return Err(StoreError::RoleAlreadyExist);
        }
        let role = Role {
            name: name.as_bytes().to_vec(),
            key_permission: Vec::new(),
        };
        self.put_role(records, role);
        self.changed(records);
        Ok(())
    }

    /// Deletes a role and takes it from every user that held it.
    pub fn role_delete(&mut self, records: &mut dyn Records, name: &str) -> Result<()> {
        if self.enabled && name == ROOT {
            return Err(StoreError::InvalidAuthMgmt);
        }
        if self.roles.remove(name).is_none() {
            return Err(StoreError::RoleNotFound);
        }
        records.delete_role(name);
        let holders: Vec<User> = self
            .users
            .values()
            .filter(|user| user.roles.iter().any(|role| role == name))
            .cloned()
            .collect();
        for mut user in holders {
            user.roles.retain(|role| role != name);
            self.put_user(records, user);
        }
        self.changed(records);
        Ok(())
    }

    /// Grants a permission, or changes the type of the one already granted
    /// on the same range.
    pub fn role_grant_permission(
        &mut self,
        records: &mut dyn Records,
        request: &AuthRoleGrantPermissionRequest,
    ) -> Result<()> {
        let granted = request
            .perm
            .as_ref()
            .ok_or(StoreError::PermissionNotGiven)?;
        if !is_valid_range(&granted.key, &granted.range_end) {
            return Err(StoreError::InvalidAuthMgmt);
        }
        let mut role = self
            .roles
            .get(&request.name)
            .cloned()
            .ok_or(StoreError::RoleNotFound)?;
        let order = |p: &Permission| (p.key.clone(), p.range_end.clone());
        match role
            .key_permission
            .binary_search_by_key(&order(granted), order)
        {
            Ok(at) => role.key_permission[at].perm_type = granted.perm_type,
            Err(at) => role.key_permission.insert(at, granted.clone()),
        }
        self.put_role(records, role);
        self.changed(records);
        Ok(())
    }

    pub fn role_revoke_permission(
        &mut self,
        records: &mut dyn Records,
        request: &AuthRoleRevokePermissionRequest,
    ) -> Result<()> {
        let mut role = self
            .roles
            .get(&request.role)
            .cloned()
            .ok_or(StoreError::RoleNotFound)?;
        let before = role.key_permission.len();
        role.key_permission
            .retain(|p| p.key != request.key || p.range_end != request.range_end);
        if role.key_permission.len() == before {
            return Err(StoreError::PermissionNotGranted);
        }
        self.put_role(records, role);
        self.changed(records);
        Ok(())
    }

    fn put_user(&mut self, records: &mut dyn Records, user: User) {
        records.put_user(&user);
        let name = String::from_utf8_lossy(&user.name).into_owned();
        self.users.insert(name, user);
    }

    fn put_role(&mut self, records: &mut dyn Records, role: Role) {
        records.put_role(&role);
        let name = String::from_utf8_lossy(&role.name).into_owned();
        self.roles.insert(name, role);
    }
}

/// The name in a user's or role's record key.
fn name_of(key: &[u8]) -> String {
    String::from_utf8_lossy(&key[1..]).into_owned()
}

/// Whether a user holds the `root` role (its roles are kept sorted).
pub fn has_root_role(user: &User) -> bool {
    user.roles
        .binary_search_by(|r| r.as_str().cmp(ROOT))
        .is_ok()
}

#[cfg(test)]
#[path = "state_tests.rs"]
mod tests;
