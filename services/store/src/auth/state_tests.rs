use capstan_proto::authpb::permission::Type as PermissionType;
use capstan_proto::etcdserverpb::{AuthUserAddRequest, AuthUserGrantRoleRequest};

use super::*;
use crate::auth::permissions::Access;
use crate::auth::records::MemoryRecords;

fn add_user(state: &mut AuthState, records: &mut MemoryRecords, name: &str) -> Result<()> {
    let request = AuthUserAddRequest {
        name: name.into(),
        hashed_password: format!("hash-of-{name}"),
        ..Default::default()
    };
    state.user_add(records, &request)
}

fn grant_role(
    state: &mut AuthState,
    records: &mut MemoryRecords,
    user: &str,
    role: &str,
) -> Result<()> {
    let request = AuthUserGrantRoleRequest {
        user: user.into(),
        role: role.into(),
    };
    state.user_grant_role(records, &request)
}

fn grant_prefix(
    state: &mut AuthState,
    records: &mut MemoryRecords,
    role: &str,
    key: &str,
    end: &str,
) -> Result<()> {
    let request = AuthRoleGrantPermissionRequest {
        name: role.into(),
        perm: Some(Permission {
            perm_type: PermissionType::Readwrite as i32,
            key: key.as_bytes().to_vec(),
            range_end: end.as_bytes().to_vec(),
        }),
    };
    state.role_grant_permission(records, &request)
}

/// root with the root role, and auth on.
fn enabled() -> (AuthState, MemoryRecords) {
    let mut state = AuthState::default();
    let mut records = MemoryRecords::default();
    add_user(&mut state, &mut records, ROOT).unwrap();
    grant_role(&mut state, &mut records, ROOT, ROOT).unwrap();
    state.enable(&mut records).unwrap();
    (state, records)
}

#[test]
fn enabling_needs_root_with_the_root_role_and_does_not_bump_the_revision() {
    let mut state = AuthState::default();
    let mut records = MemoryRecords::default();
    assert_eq!(
        state.enable(&mut records),
        Err(StoreError::RootUserNotExist)
    );
    add_user(&mut state, &mut records, ROOT).unwrap();
    assert_eq!(
        state.enable(&mut records),
        Err(StoreError::RootRoleNotExist)
    );
    grant_role(&mut state, &mut records, ROOT, ROOT).unwrap();
    let before = state.revision;
    state.enable(&mut records).unwrap();
    assert!(state.enabled);
    assert_eq!(state.revision, before);
    state.disable(&mut records);
    assert!(!state.enabled);
    assert_eq!(state.revision, before + 1);
}

#[test]
fn root_can_not_be_taken_apart_while_auth_is_on() {
    let (mut state, mut records) = enabled();
    assert_eq!(
        state.user_delete(&mut records, ROOT),
        Err(StoreError::InvalidAuthMgmt)
    );
    assert_eq!(
        state.role_delete(&mut records, ROOT),
        Err(StoreError::InvalidAuthMgmt)
    );
    let revoke = AuthUserRevokeRoleRequest {
        name: ROOT.into(),
        role: ROOT.into(),
    };
    assert_eq!(
        state.user_revoke_role(&mut records, &revoke),
        Err(StoreError::InvalidAuthMgmt)
    );
    state.disable(&mut records);
    state.user_revoke_role(&mut records, &revoke).unwrap();
    assert!(!state.is_root(ROOT));
}

#[test]
fn users_and_roles_give_merged_permissions_and_every_change_bumps_the_revision() {
    let (mut state, mut records) = enabled();
    let start = state.revision;
    add_user(&mut state, &mut records, "apiserver").unwrap();
    state.role_add(&mut records, "registry").unwrap();
    grant_prefix(
        &mut state,
        &mut records,
        "registry",
        "/registry/",
        "/registry0",
    )
    .unwrap();
    grant_role(&mut state, &mut records, "apiserver", "registry").unwrap();
    assert_eq!(state.revision, start + 4);
    let perms = state.permissions("apiserver").unwrap();
    assert!(perms.allows(Access::Write, b"/registry/pods/a", b""));
    assert!(!perms.allows(Access::Read, b"/secret", b""));

    // Granting again changes nothing, not even the revision.
    grant_role(&mut state, &mut records, "apiserver", "registry").unwrap();
    assert_eq!(state.revision, start + 4);

    // Deleting the role takes it from the user.
    state.role_delete(&mut records, "registry").unwrap();
    assert!(state.user("apiserver").unwrap().roles.is_empty());
    assert!(!state.permissions("apiserver").unwrap().allows(
        Access::Read,
        b"/registry/pods/a",
        b""
    ));
}

#[test]
fn etcds_errors_for_bad_management() {
    let (mut state, mut records) = enabled();
    assert_eq!(
        add_user(&mut state, &mut records, ""),
        Err(StoreError::UserEmpty)
    );
    assert_eq!(
        add_user(&mut state, &mut records, ROOT),
        Err(StoreError::UserAlreadyExist)
    );
    assert_eq!(
        state.user_delete(&mut records, "nobody"),
        Err(StoreError::UserNotFound)
    );
    assert_eq!(state.role_add(&mut records, ""), Err(StoreError::RoleEmpty));
    state.role_add(&mut records, "r").unwrap();
    assert_eq!(
        state.role_add(&mut records, "r"),
        Err(StoreError::RoleAlreadyExist)
    );
    assert_eq!(
        grant_role(&mut state, &mut records, ROOT, "missing"),
        Err(StoreError::RoleNotFound)
    );
    assert_eq!(
        grant_prefix(&mut state, &mut records, "r", "b", "a"),
        Err(StoreError::InvalidAuthMgmt),
        "an empty range"
    );
    let no_perm = AuthRoleGrantPermissionRequest {
        name: "r".into(),
        perm: None,
    };
    assert_eq!(
        state.role_grant_permission(&mut records, &no_perm),
        Err(StoreError::PermissionNotGiven)
    );
    let revoke = AuthRoleRevokePermissionRequest {
        role: "r".into(),
        key: b"a".to_vec(),
        range_end: Vec::new(),
    };
    assert_eq!(
        state.role_revoke_permission(&mut records, &revoke),
        Err(StoreError::PermissionNotGranted)
    );
    let revoke_role = AuthUserRevokeRoleRequest {
        name: ROOT.into(),
        role: "r".into(),
    };
    assert_eq!(
        state.user_revoke_role(&mut records, &revoke_role),
        Err(StoreError::RoleNotGranted)
    );
}

#[test]
fn a_second_grant_on_the_same_range_changes_its_type() {
    let (mut state, mut records) = enabled();
    state.role_add(&mut records, "r").unwrap();
    grant_prefix(&mut state, &mut records, "r", "a", "c").unwrap();
    let read_only = AuthRoleGrantPermissionRequest {
        name: "r".into(),
        perm: Some(Permission {
            perm_type: PermissionType::Read as i32,
            key: b"a".to_vec(),
            range_end: b"c".to_vec(),
        }),
    };
    state
        .role_grant_permission(&mut records, &read_only)
        .unwrap();
    let role = state.role("r").unwrap();
    assert_eq!(role.key_permission.len(), 1);
    assert_eq!(
        role.key_permission[0].perm_type,
        PermissionType::Read as i32
    );
}

#[test]
fn a_user_without_a_password_keeps_none() {
    let (mut state, mut records) = enabled();
    let request = AuthUserAddRequest {
        name: "cn-user".into(),
        hashed_password: "ignored".into(),
        options: Some(UserAddOptions { no_password: true }),
        ..Default::default()
    };
    state.user_add(&mut records, &request).unwrap();
    assert!(state.user("cn-user").unwrap().password.is_empty());
}
