//! `etcdserverpb.Auth`: turning access control on and off, logging in,
//! and managing users and roles. Changes are raft proposals, checked for
//! root when applied (`apply/auth.rs`); listings are read locally after a
//! read barrier, checked here. Passwords are hashed before they are
//! proposed, so the log holds only bcrypt hashes.

use std::sync::Arc;

use capstan_proto::etcdserverpb::auth_server::Auth;
use capstan_proto::etcdserverpb::*;
use capstan_proto::internal::raft_request::Request as RaftRequest;
use capstan_proto::internal::{AuthenticateRecord, Caller};
use tonic::{Request, Response, Status};

use super::context::Context;
use crate::apply::{unexpected, ApplyOutcome};
use crate::error::{Result, StoreError};

/// A password checked under rules that changed before the login was
/// applied is checked again, this many times at most.
const AUTHENTICATE_ATTEMPTS: usize = 3;

pub struct AuthService(pub Arc<Context>);

impl AuthService {
    /// Proposes a change of the rules; the header of its answer.
    async fn change(&self, caller: Caller, request: RaftRequest) -> Result<Option<ResponseHeader>> {
        let ctx = &self.0;
        match ctx.raft.propose_as(Some(caller), request).await? {
            ApplyOutcome::AuthChanged => Ok(Some(ctx.header(ctx.mvcc.current_revision()))),
            other => Err(unexpected(&other)),
        }
    }

    async fn authenticate(
        &self,
        caller: Caller,
        req: AuthenticateRequest,
    ) -> Result<AuthenticateResponse> {
        let ctx = &self.0;
        // Like etcd, check the password against the latest rules.
        ctx.raft.read_barrier().await?;
        for _ in 0..AUTHENTICATE_ATTEMPTS {
            let checked = ctx
                .auth
                .check_password(&req.name, req.password.clone())
                .await?;
            let record = AuthenticateRecord {
                name: req.name.clone(),
                simple_token_prefix: ctx.auth.tokens().new_prefix(),
            };
            let request = RaftRequest::Authenticate(record);
            let applied = match ctx.raft.propose_as(Some(caller.clone()), request).await? {
                ApplyOutcome::Authenticated(applied) => applied,
                other => return Err(unexpected(&other)),
            };
            if applied.revision != checked {
                continue; // the password may have changed meanwhile
            }
            let token = match applied.simple_token {
                Some(token) => token,
                None => ctx
                    .auth
                    .tokens()
                    .sign(&applied.user, applied.revision)?
                    .unwrap_or_default(),
            };
            return Ok(AuthenticateResponse {
                header: Some(ctx.header(ctx.mvcc.current_revision())),
                token,
            });
        }
        Err(StoreError::AuthOldRevision)
    }

    /// Hashes the password of a new user (none for a user without one)
    /// once the caller is known to be root: hashing is costly.
    async fn user_add(
        &self,
        caller: Caller,
        mut req: AuthUserAddRequest,
    ) -> Result<AuthUserAddResponse> {
        let ctx = &self.0;
        ctx.auth.checker(&caller).admin()?;
        let password = std::mem::take(&mut req.password);
        req.hashed_password = match req.options.as_ref().is_some_and(|o| o.no_password) {
            true => String::new(),
            false => ctx.auth.passwords().hash(password).await?,
        };
        let header = self.change(caller, RaftRequest::AuthUserAdd(req)).await?;
        Ok(AuthUserAddResponse { header })
    }

    async fn user_change_password(
        &self,
        caller: Caller,
        mut req: AuthUserChangePasswordRequest,
    ) -> Result<AuthUserChangePasswordResponse> {
        let ctx = &self.0;
        ctx.auth.checker(&caller).admin()?;
        let password = std::mem::take(&mut req.password);
        req.hashed_password = ctx.auth.passwords().hash(password).await?;
        let header = self
            .change(caller, RaftRequest::AuthUserChangePassword(req))
            .await?;
        Ok(AuthUserChangePasswordResponse { header })
    }

    /// A user's roles: root may read any user, a user itself.
    async fn user_get(
        &self,
        caller: Caller,
        req: AuthUserGetRequest,
    ) -> Result<AuthUserGetResponse> {
        let ctx = &self.0;
        ctx.raft.read_barrier().await?;
        let checker = ctx.auth.checker(&caller);
        if let Err(err) = checker.admin() {
            if req.name != caller.username {
                return Err(err);
            }
        }
        drop(checker);
        let state = ctx.auth.read();
        let user = state.user(&req.name).ok_or(StoreError::UserNotFound)?;
        Ok(AuthUserGetResponse {
            header: Some(ctx.header(ctx.mvcc.current_revision())),
            roles: user.roles.clone(),
        })
    }

    /// A role's permissions: root may read any role, a user those it holds.
    async fn role_get(
        &self,
        caller: Caller,
        req: AuthRoleGetRequest,
    ) -> Result<AuthRoleGetResponse> {
        let ctx = &self.0;
        ctx.raft.read_barrier().await?;
        let checker = ctx.auth.checker(&caller);
        if let Err(err) = checker.admin() {
            if !checker.caller_holds_role(&req.role) {
                return Err(err);
            }
        }
        drop(checker);
        let state = ctx.auth.read();
        let role = state.role(&req.role).ok_or(StoreError::RoleNotFound)?;
        Ok(AuthRoleGetResponse {
            header: Some(ctx.header(ctx.mvcc.current_revision())),
            perm: role.key_permission.clone(),
        })
    }

    /// Every user or role name, for root.
    async fn names(
        &self,
        caller: Caller,
        users: bool,
    ) -> Result<(Option<ResponseHeader>, Vec<String>)> {
        let ctx = &self.0;
        ctx.raft.read_barrier().await?;
        ctx.auth.checker(&caller).admin()?;
        let state = ctx.auth.read();
        let names = if users {
            state.user_names()
        } else {
            state.role_names()
        };
        Ok((Some(ctx.header(ctx.mvcc.current_revision())), names))
    }
}

type Answer<T> = std::result::Result<Response<T>, Status>;

#[tonic::async_trait]
impl Auth for AuthService {
    async fn auth_enable(&self, request: Request<AuthEnableRequest>) -> Answer<AuthEnableResponse> {
        self.0
            .serve("AuthEnable", request, |caller: Caller, req| async move {
                let header = self.change(caller, RaftRequest::AuthEnable(req)).await?;
                Ok(AuthEnableResponse { header })
            })
            .await
    }

    async fn auth_disable(
        &self,
        request: Request<AuthDisableRequest>,
    ) -> Answer<AuthDisableResponse> {
        self.0
            .serve("AuthDisable", request, |caller: Caller, req| async move {
                let header = self.change(caller, RaftRequest::AuthDisable(req)).await?;
                Ok(AuthDisableResponse { header })
            })
            .await
    }

    async fn auth_status(&self, request: Request<AuthStatusRequest>) -> Answer<AuthStatusResponse> {
        let ctx = &self.0;
        let _ = request;
        let work = async {
            Ok(AuthStatusResponse {
                header: Some(ctx.header(ctx.mvcc.current_revision())),
                enabled: ctx.auth.is_enabled(),
                auth_revision: ctx.auth.revision(),
            })
        };
        ctx.observe("AuthStatus", work).await
    }

    async fn authenticate(
        &self,
        request: Request<AuthenticateRequest>,
    ) -> Answer<AuthenticateResponse> {
        self.0
            .serve("Authenticate", request, |caller: Caller, req| {
                self.authenticate(caller, req)
            })
            .await
    }

    async fn user_add(&self, request: Request<AuthUserAddRequest>) -> Answer<AuthUserAddResponse> {
        self.0
            .serve("UserAdd", request, |caller: Caller, req| {
                self.user_add(caller, req)
            })
            .await
    }

    async fn user_get(&self, request: Request<AuthUserGetRequest>) -> Answer<AuthUserGetResponse> {
        self.0
            .serve("UserGet", request, |caller: Caller, req| {
                self.user_get(caller, req)
            })
            .await
    }

    async fn user_list(
        &self,
        request: Request<AuthUserListRequest>,
    ) -> Answer<AuthUserListResponse> {
        self.0
            .serve("UserList", request, |caller: Caller, _req| async move {
                let (header, users) = self.names(caller, true).await?;
                Ok(AuthUserListResponse { header, users })
            })
            .await
    }

    async fn user_delete(
        &self,
        request: Request<AuthUserDeleteRequest>,
    ) -> Answer<AuthUserDeleteResponse> {
        self.0
            .serve("UserDelete", request, |caller: Caller, req| async move {
                let header = self
                    .change(caller, RaftRequest::AuthUserDelete(req))
                    .await?;
                Ok(AuthUserDeleteResponse { header })
            })
            .await
    }

    async fn user_change_password(
        &self,
        request: Request<AuthUserChangePasswordRequest>,
    ) -> Answer<AuthUserChangePasswordResponse> {
        self.0
            .serve("UserChangePassword", request, |caller: Caller, req| {
                self.user_change_password(caller, req)
            })
            .await
    }

    async fn user_grant_role(
        &self,
        request: Request<AuthUserGrantRoleRequest>,
    ) -> Answer<AuthUserGrantRoleResponse> {
        self.0
            .serve("UserGrantRole", request, |caller: Caller, req| async move {
                let header = self
                    .change(caller, RaftRequest::AuthUserGrantRole(req))
                    .await?;
                Ok(AuthUserGrantRoleResponse { header })
            })
            .await
    }

    async fn user_revoke_role(
        &self,
        request: Request<AuthUserRevokeRoleRequest>,
    ) -> Answer<AuthUserRevokeRoleResponse> {
        self.0
            .serve(
                "UserRevokeRole",
                request,
                |caller: Caller, req| async move {
                    let header = self
                        .change(caller, RaftRequest::AuthUserRevokeRole(req))
                        .await?;
                    Ok(AuthUserRevokeRoleResponse { header })
                },
            )
            .await
    }

    async fn role_add(&self, request: Request<AuthRoleAddRequest>) -> Answer<AuthRoleAddResponse> {
        self.0
            .serve("RoleAdd", request, |caller: Caller, req| async move {
                let header = self.change(caller, RaftRequest::AuthRoleAdd(req)).await?;
                Ok(AuthRoleAddResponse { header })
            })
            .await
    }

    async fn role_get(&self, request: Request<AuthRoleGetRequest>) -> Answer<AuthRoleGetResponse> {
        self.0
            .serve("RoleGet", request, |caller: Caller, req| {
                self.role_get(caller, req)
            })
            .await
    }

    async fn role_list(
        &self,
        request: Request<AuthRoleListRequest>,
    ) -> Answer<AuthRoleListResponse> {
        self.0
            .serve("RoleList", request, |caller: Caller, _req| async move {
                let (header, roles) = self.names(caller, false).await?;
                Ok(AuthRoleListResponse { header, roles })
            })
            .await
    }

    async fn role_delete(
        &self,
        request: Request<AuthRoleDeleteRequest>,
    ) -> Answer<AuthRoleDeleteResponse> {
        self.0
            .serve("RoleDelete", request, |caller: Caller, req| async move {
                let header = self
                    .change(caller, RaftRequest::AuthRoleDelete(req))
                    .await?;
                Ok(AuthRoleDeleteResponse { header })
            })
            .await
    }

    async fn role_grant_permission(
        &self,
        request: Request<AuthRoleGrantPermissionRequest>,
    ) -> Answer<AuthRoleGrantPermissionResponse> {
        self.0
            .serve(
                "RoleGrantPermission",
                request,
                |caller: Caller, req| async move {
                    let header = self
                        .change(caller, RaftRequest::AuthRoleGrantPermission(req))
                        .await?;
                    Ok(AuthRoleGrantPermissionResponse { header })
                },
            )
            .await
    }

    async fn role_revoke_permission(
        &self,
        request: Request<AuthRoleRevokePermissionRequest>,
    ) -> Answer<AuthRoleRevokePermissionResponse> {
        self.0
            .serve(
                "RoleRevokePermission",
                request,
                |caller: Caller, req| async move {
                    let header = self
                        .change(caller, RaftRequest::AuthRoleRevokePermission(req))
                        .await?;
                    Ok(AuthRoleRevokePermissionResponse { header })
                },
            )
            .await
    }
}
