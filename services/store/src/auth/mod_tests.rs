use capstan_proto::authpb::permission::Type as PermissionType;
use capstan_proto::authpb::Permission;
use capstan_proto::etcdserverpb::{
    AuthRoleGrantPermissionRequest, AuthUserAddRequest, AuthUserGrantRoleRequest,
};

use super::records::MemoryRecords;
use super::*;
use crate::storage::SledBackend;

fn caller(name: &str, revision: u64) -> Caller {
    Caller {
        username: name.into(),
        auth_revision: revision,
    }
}

/// A store with `root` (password "rootpw") and `app`, which may read and
/// write `/app/`; auth on when `enable`.
async fn store(enable: bool) -> (tempfile::TempDir, AuthStore) {
    let dir = tempfile::tempdir().unwrap();
    let backend = SledBackend::open(dir.path()).unwrap();
    let settings = AuthSettings {
        bcrypt_cost: MIN_COST,
        ..AuthSettings::default()
    };
    let auth = AuthStore::open(&backend, &settings).unwrap();
    let hash = auth.passwords().hash("rootpw".into()).await.unwrap();
    let mut records = MemoryRecords::default();
    auth.change(|state| {
        for name in [ROOT, "app"] {
            let add = AuthUserAddRequest {
                name: name.into(),
                hashed_password: hash.clone(),
                ..Default::default()
            };
            state.user_add(&mut records, &add)?;
        }
        state.role_add(&mut records, "app-role")?;
        let grant = AuthRoleGrantPermissionRequest {
            name: "app-role".into(),
            perm: Some(Permission {
                perm_type: PermissionType::Readwrite as i32,
                key: b"/app/".to_vec(),
                range_end: b"/app0".to_vec(),
            }),
        };
        state.role_grant_permission(&mut records, &grant)?;
        for (user, role) in [(ROOT, ROOT), ("app", "app-role")] {
            let grant = AuthUserGrantRoleRequest {
                user: user.into(),
                role: role.into(),
            };
            state.user_grant_role(&mut records, &grant)?;
        }
        if enable {
            state.enable(&mut records)?;
        }
        Ok(())
    })
    .unwrap();
    (dir, auth)
}

#[tokio::test]
async fn with_auth_off_everything_is_allowed() {
    let (_dir, auth) = store(false).await;
    let anonymous = caller("", 0);
    let checker = auth.checker(&anonymous);
    assert_eq!(checker.allows(Access::Write, b"/etc", b""), Ok(()));
    assert_eq!(checker.admin(), Ok(()));
    assert_eq!(
        auth.check_password("root", "rootpw".into()).await,
        Err(StoreError::AuthNotEnabled)
    );
}

#[tokio::test]
async fn a_user_is_held_to_its_roles_and_root_to_nothing() {
    let (_dir, auth) = store(true).await;
    let now = auth.revision();
    let app = caller("app", now);
    let checker = auth.checker(&app);
    assert_eq!(checker.allows(Access::Write, b"/app/x", b""), Ok(()));
    assert_eq!(checker.allows(Access::Read, b"/app/", b"/app0"), Ok(()));
    assert_eq!(
        checker.allows(Access::Read, b"/other", b""),
        Err(StoreError::PermissionDenied)
    );
    assert_eq!(checker.admin(), Err(StoreError::PermissionDenied));
    drop(checker);

    let root = caller(ROOT, now);
    assert_eq!(
        auth.checker(&root).allows(Access::Write, b"\0", b"\0"),
        Ok(())
    );
    assert_eq!(auth.checker(&root).admin(), Ok(()));

    let anonymous = caller("", 0);
    assert_eq!(
        auth.checker(&anonymous)
            .allows(Access::Read, b"/app/x", b""),
        Err(StoreError::UserEmpty)
    );
    let stale = caller("app", now - 1);
    assert_eq!(
        auth.checker(&stale).allows(Access::Read, b"/app/x", b""),
        Err(StoreError::AuthOldRevision)
    );
    let unknown = caller("ghost", now);
    assert_eq!(
        auth.checker(&unknown).admin(),
        Err(StoreError::UserNotFound)
    );
    assert_eq!(
        auth.checker(&unknown).allows(Access::Read, b"/app/x", b""),
        Err(StoreError::PermissionDenied)
    );
}

#[tokio::test]
async fn passwords_are_checked_and_failures_counted() {
    let (_dir, auth) = store(true).await;
    assert_eq!(
        auth.check_password("app", "rootpw".into()).await,
        Ok(auth.revision())
    );
    assert_eq!(
        auth.check_password("app", "wrong".into()).await,
        Err(StoreError::AuthFailed)
    );
    assert_eq!(
        auth.check_password("nobody", "rootpw".into()).await,
        Err(StoreError::AuthFailed)
    );
    assert_eq!(auth.metrics().failed_authentications.get(), 2);
}

#[tokio::test]
async fn an_applied_authentication_makes_a_token_that_names_the_user() {
    let (_dir, auth) = store(true).await;
    let prefix = auth.tokens().new_prefix();
    let applied = auth.authenticate("app", &prefix, 33).unwrap();
    let token = applied.simple_token.unwrap();
    assert_eq!(token, format!("{prefix}.33"));
    assert_eq!(
        auth.caller_from_token(&token),
        Ok(caller("app", auth.revision()))
    );
    assert_eq!(
        auth.caller_from_token("forged.33"),
        Err(StoreError::InvalidAuthToken)
    );
    assert_eq!(
        auth.authenticate("ghost", &prefix, 34),
        Err(StoreError::AuthFailed)
    );
}

#[tokio::test]
async fn the_rules_come_back_from_the_backend() {
    let dir = tempfile::tempdir().unwrap();
    let backend: std::sync::Arc<dyn Backend> =
        std::sync::Arc::new(SledBackend::open(dir.path()).unwrap());
    let mvcc = crate::mvcc::MvccStore::open(backend.clone()).unwrap();
    let auth = AuthStore::open(&*backend, &AuthSettings::default()).unwrap();
    let mut view = mvcc.write();
    auth.change(|state| state.role_add(&mut view, "r")).unwrap();
    view.finish(2).unwrap();
    assert_eq!(auth.metrics().revision.get(), 2);
    let reopened = AuthStore::open(&*backend, &AuthSettings::default()).unwrap();
    assert_eq!(reopened.revision(), 2);
    assert!(reopened.read().role("r").is_some());
}
