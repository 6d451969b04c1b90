//! Access control in the apply path, as etcd's auth applier does it: a
//! request a client sent is checked against the rules in force at its
//! entry, identically on every member, before it changes anything; and
//! the entries that change the rules are applied here.

use capstan_proto::etcdserverpb::alarm_request::AlarmAction;
use capstan_proto::etcdserverpb::request_op::Request as Op;
use capstan_proto::etcdserverpb::{
    AlarmRequest, DeleteRangeRequest, PutRequest, RangeRequest, TxnRequest,
};
use capstan_proto::internal::raft_request::Request;
use capstan_proto::internal::{AuthenticateRecord, Caller};

use super::outcome::ApplyOutcome;
use crate::auth::{Access, AuthStore, Checker};
use crate::error::{Result, StoreError};
use crate::lease::Lessor;
use crate::mvcc::WriteView;

/// Whether `caller` may make `request` under the rules as they are now.
pub(super) fn check(
    auth: &AuthStore,
    lessor: &Lessor,
    caller: &Caller,
    request: &Request,
) -> Result<()> {
    let checker = auth.checker(caller);
    if !checker.enabled() {
        return Ok(());
    }
    match request {
        Request::Put(put) => check_put(&checker, lessor, put),
        Request::DeleteRange(delete) => check_delete(&checker, delete),
        Request::Txn(txn) => check_txn(&checker, lessor, txn),
        // etcd lets anyone compact and grant leases; here an identity is
        // needed at least, so that no anonymous client can drop history.
        Request::Compaction(_) | Request::LeaseGrant(_) => checker.identified(),
        Request::LeaseRevoke(revoke) => {
            check_lease_keys(&checker, lessor, revoke.id, Access::Write)
        }
        Request::Alarm(alarm) => check_alarm(&checker, alarm),
        Request::Authenticate(_) => Ok(()),
        // Member records and the rules themselves: root only.
        _ => checker.admin(),
    }
}

fn check_put(checker: &Checker, lessor: &Lessor, put: &PutRequest) -> Result<()> {
    checker.allows(Access::Write, &put.key, b"")?;
    if put.lease != 0 {
        // Whoever attaches a key to a lease must be able to write every key
        // on it, or they could revoke someone else's keys with the lease.
        check_lease_keys(checker, lessor, put.lease, Access::Write)?;
    }
    if put.prev_kv {
        checker.allows(Access::Read, &put.key, b"")?;
    }
    Ok(())
}

fn check_delete(checker: &Checker, delete: &DeleteRangeRequest) -> Result<()> {
    checker.allows(Access::Write, &delete.key, &delete.range_end)?;
    if delete.prev_kv {
        checker.allows(Access::Read, &delete.key, &delete.range_end)?;
    }
    Ok(())
}

/// Every compare is a read; every op in both branches is checked, nested
/// txns too (etcd 3.4 checks only the top level).
fn check_txn(checker: &Checker, lessor: &Lessor, txn: &TxnRequest) -> Result<()> {
    for compare in &txn.compare {
        checker.allows(Access::Read, &compare.key, &compare.range_end)?;
    }
    for op in txn.success.iter().chain(&txn.failure) {
        match &op.request {
            Some(Op::RequestRange(range)) => check_range(checker, range)?,
            Some(Op::RequestPut(put)) => check_put(checker, lessor, put)?,
            Some(Op::RequestDeleteRange(delete)) => check_delete(checker, delete)?,
            Some(Op::RequestTxn(nested)) => check_txn(checker, lessor, nested)?,
            None => {}
        }
    }
    Ok(())
}

fn check_range(checker: &Checker, range: &RangeRequest) -> Result<()> {
    checker.allows(Access::Read, &range.key, &range.range_end)
}

/// `access` to every key attached to a lease, root aside: writing them
/// to revoke or renew it, reading them to look at it (as newer etcds).
pub fn check_lease_keys(
    checker: &Checker,
    lessor: &Lessor,
    lease: i64,
    access: Access,
) -> Result<()> {
    checker.identified()?;
    if !checker.enabled() || checker.is_root() {
        return Ok(());
    }
    for key in lessor.keys(lease) {
        checker.allows(access, key, b"")?;
    }
    Ok(())
}

/// Raising or clearing an alarm is root's; listing them any user's.
fn check_alarm(checker: &Checker, alarm: &AlarmRequest) -> Result<()> {
    match alarm.action() {
        AlarmAction::Get => checker.identified(),
        AlarmAction::Activate | AlarmAction::Deactivate => checker.admin(),
    }
}

/// Applies an entry that changes the rules (or authenticates), at raft
/// `index`. Any other request is not the apply layer's to send here.
pub(super) fn apply(
    auth: &AuthStore,
    view: &mut WriteView,
    index: u64,
    request: &Request,
) -> Result<ApplyOutcome> {
    let changed = match request {
        Request::Authenticate(record) => return authenticate(auth, record, index),
        Request::AuthEnable(_) => auth.change(|state| state.enable(view)),
        Request::AuthDisable(_) => {
            auth.change(|state| {
                state.disable(view);
                Ok(())
            })?;
            auth.tokens().clear();
            Ok(())
        }
        Request::AuthUserAdd(add) => auth.change(|state| state.user_add(view, add)),
        Request::AuthUserDelete(delete) => {
            auth.change(|state| state.user_delete(view, &delete.name))?;
            auth.tokens().invalidate_user(&delete.name);
            Ok(())
        }
        Request::AuthUserChangePassword(change) => {
            auth.change(|state| state.user_change_password(view, change))?;
            auth.tokens().invalidate_user(&change.name);
            Ok(())
        }
        Request::AuthUserGrantRole(grant) => {
            auth.change(|state| state.user_grant_role(view, grant))
        }
        Request::AuthUserRevokeRole(revoke) => {
            auth.change(|state| state.user_revoke_role(view, revoke))
        }
        Request::AuthRoleAdd(add) => auth.change(|state| state.role_add(view, &add.name)),
        Request::AuthRoleDelete(delete) => {
            auth.change(|state| state.role_delete(view, &delete.role))
        }
        Request::AuthRoleGrantPermission(grant) => {
            auth.change(|state| state.role_grant_permission(view, grant))
        }
        Request::AuthRoleRevokePermission(revoke) => {
            auth.change(|state| state.role_revoke_permission(view, revoke))
        }
        other => {
            return Err(StoreError::Corrupt(format!(
                "not an access control request: {other:?}"
            )))
        }
    };
    changed.map(|()| ApplyOutcome::AuthChanged)
}

fn authenticate(auth: &AuthStore, record: &AuthenticateRecord, index: u64) -> Result<ApplyOutcome> {
    auth.authenticate(&record.name, &record.simple_token_prefix, index)
        .map(ApplyOutcome::Authenticated)
}
