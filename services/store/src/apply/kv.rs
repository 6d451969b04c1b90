//! Put, DeleteRange and Txn applied to one MVCC write view.
//!
//! A txn is applied as etcd does: first every compare (nested ones too) is
//! evaluated against the state before the txn, fixing the path through the
//! branches; then the chosen ops are checked; only then is anything changed,
//! so a failing request leaves the store as it was.

use capstan_proto::etcdserverpb::compare::{CompareResult, CompareTarget, TargetUnion};
use capstan_proto::etcdserverpb::request_op::Request;
use capstan_proto::etcdserverpb::response_op::Response;
use capstan_proto::etcdserverpb::{
    Compare, DeleteRangeRequest, DeleteRangeResponse, PutRequest, PutResponse, RangeRequest,
    RequestOp, ResponseHeader, ResponseOp, TxnRequest, TxnResponse,
};
use capstan_proto::mvccpb::KeyValue;

use super::range::execute_range;
use crate::error::{Result, StoreError};
use crate::lease::Lessor;
use crate::mvcc::{KeyRange, WriteView};

fn header(revision: i64) -> Option<ResponseHeader> {
    Some(ResponseHeader {
        revision,
        ..Default::default()
    })
}

/// Checks a put against the current state without changing anything.
fn check_put_state(view: &WriteView, lessor: &Lessor, req: &PutRequest) -> Result<()> {
    if req.lease != 0 && !lessor.exists(req.lease) {
        return Err(StoreError::LeaseNotFound);
    }
    if (req.ignore_value || req.ignore_lease) && view.live(&req.key).is_none() {
        return Err(StoreError::KeyNotFound);
    }
    Ok(())
}

fn check_range_state(view: &WriteView, req: &RangeRequest) -> Result<()> {
    if req.revision > view.revision() {
        return Err(StoreError::FutureRevision);
    }
    if req.revision > 0 && req.revision < view.compact_revision() {
        return Err(StoreError::Compacted);
    }
    Ok(())
}

pub fn put(view: &mut WriteView, lessor: &mut Lessor, req: &PutRequest) -> Result<PutResponse> {
    check_put_state(view, lessor, req)?;
    Ok(put_checked(view, lessor, req))
}

fn put_checked(view: &mut WriteView, lessor: &mut Lessor, req: &PutRequest) -> PutResponse {
    // The current value is read first only when the put keeps part of it;
    // the put itself hands back the value it replaced.
    let existing = if req.ignore_value || req.ignore_lease {
        view.get(&req.key).ok().flatten()
    } else {
        None
    };
    let value = match (&existing, req.ignore_value) {
        (Some(prev), true) => prev.value.clone(),
        _ => req.value.clone(),
    };
    let lease = match (&existing, req.ignore_lease) {
        (Some(prev), true) => prev.lease,
        _ => req.lease,
    };
    let prev = view
        .put(&req.key, value, lease)
        .expect("storage failure while applying a put");
    move_lease(
        lessor,
        &req.key,
        prev.as_ref().map_or(0, |kv| kv.lease),
        lease,
    );
    PutResponse {
        header: header(view.revision()),
        prev_kv: if req.prev_kv { prev } else { None },
    }
}

fn move_lease(lessor: &mut Lessor, key: &[u8], old: i64, new: i64) {
    if old == new {
        return;
    }
    if old != 0 {
        lessor.detach(old, key);
    }
    if new != 0 {
        lessor.attach(new, key);
    }
}

pub fn delete_range(
    view: &mut WriteView,
    lessor: &mut Lessor,
    req: &DeleteRangeRequest,
) -> Result<DeleteRangeResponse> {
    let range = KeyRange::new(&req.key, &req.range_end);
    let keys: Vec<Vec<u8>> = view.live_in(&range).into_iter().map(|(k, _)| k).collect();
    let mut prev_kvs = Vec::new();
    for key in &keys {
        if let Some(prev) = view.delete(key)? {
            if prev.lease != 0 {
                lessor.detach(prev.lease, key);
            }
            prev_kvs.push(prev);
        }
    }
    Ok(DeleteRangeResponse {
        header: header(view.revision()),
        deleted: keys.len() as i64,
        prev_kvs: if req.prev_kv { prev_kvs } else { Vec::new() },
    })
}

/// Deletes the keys of a revoked lease (already detached).
pub fn delete_keys(view: &mut WriteView, keys: &[Vec<u8>]) -> Result<()> {
    for key in keys {
        view.delete(key)?;
    }
    Ok(())
}

/// Which branch each txn on the path takes, in the order they are met.
type TxnPath = Vec<bool>;

pub fn txn(view: &mut WriteView, lessor: &mut Lessor, req: &TxnRequest) -> Result<TxnResponse> {
    let mut path = TxnPath::new();
    choose_path(view, req, &mut path)?;
    check_path(view, lessor, req, &path, &mut 0)?;
    let response = execute(view, lessor, req, &path, &mut 0)?;
    Ok(response)
}

fn choose_path(view: &WriteView, req: &TxnRequest, path: &mut TxnPath) -> Result<()> {
    let mut succeeded = true;
    for compare in &req.compare {
        if !evaluate(view, compare)? {
            succeeded = false;
            break;
        }
    }
    path.push(succeeded);
    let ops = if succeeded {
        &req.success
    } else {
        &req.failure
    };
    for op in ops {
        if let Some(Request::RequestTxn(nested)) = &op.request {
            choose_path(view, nested, path)?;
        }
    }
    Ok(())
}

fn branch<'a>(req: &'a TxnRequest, path: &TxnPath, step: &mut usize) -> (bool, &'a [RequestOp]) {
    let succeeded = path[*step];
    *step += 1;
    let ops = if succeeded {
        &req.success
    } else {
        &req.failure
    };
    (succeeded, ops)
}

fn check_path(
    view: &WriteView,
    lessor: &Lessor,
    req: &TxnRequest,
    path: &TxnPath,
    step: &mut usize,
) -> Result<()> {
    let (_, ops) = branch(req, path, step);
    for op in ops {
        match &op.request {
            Some(Request::RequestPut(put)) => check_put_state(view, lessor, put)?,
            Some(Request::RequestRange(range)) => check_range_state(view, range)?,
            Some(Request::RequestTxn(nested)) => check_path(view, lessor, nested, path, step)?,
            Some(Request::RequestDeleteRange(_)) | None => {}
        }
    }
    Ok(())
}

fn execute(
    view: &mut WriteView,
    lessor: &mut Lessor,
    req: &TxnRequest,
    path: &TxnPath,
    step: &mut usize,
) -> Result<TxnResponse> {
    let (succeeded, ops) = branch(req, path, step);
    let mut responses = Vec::with_capacity(ops.len());
    for op in ops {
        let response = match &op.request {
            Some(Request::RequestRange(r)) => Response::ResponseRange(execute_range(&*view, r)?),
            Some(Request::RequestPut(r)) => Response::ResponsePut(put_checked(view, lessor, r)),
            Some(Request::RequestDeleteRange(r)) => {
                Response::ResponseDeleteRange(delete_range(view, lessor, r)?)
            }
            Some(Request::RequestTxn(r)) => {
                Response::ResponseTxn(execute(view, lessor, r, path, step)?)
            }
            None => continue,
        };
        responses.push(ResponseOp {
            response: Some(response),
        });
    }
    Ok(TxnResponse {
        header: header(view.revision()),
        succeeded,
        responses,
    })
}

/// One compare; a range compare must hold for every key in the range.
fn evaluate(view: &WriteView, compare: &Compare) -> Result<bool> {
    let target = CompareTarget::try_from(compare.target).unwrap_or(CompareTarget::Version);
    let kvs: Vec<KeyValue> = if compare.range_end.is_empty() {
        view.get(&compare.key)?.into_iter().collect()
    } else {
        let range = KeyRange::new(&compare.key, &compare.range_end);
        view.range(&range, 0, 0)?.kvs
    };
    if kvs.is_empty() {
        // A missing key has version, revisions and lease 0; a value compare fails.
        return Ok(target != CompareTarget::Value && holds(compare, &KeyValue::default()));
    }
    Ok(kvs.iter().all(|kv| holds(compare, kv)))
}

fn holds(compare: &Compare, kv: &KeyValue) -> bool {
    let result = CompareResult::try_from(compare.result).unwrap_or(CompareResult::Equal);
    let ordering = match compare.target_union.as_ref() {
        Some(TargetUnion::Value(value)) => kv.value.as_slice().cmp(value.as_slice()),
        Some(TargetUnion::Version(v)) => kv.version.cmp(v),
        Some(TargetUnion::CreateRevision(v)) => kv.create_revision.cmp(v),
        Some(TargetUnion::ModRevision(v)) => kv.mod_revision.cmp(v),
        Some(TargetUnion::Lease(v)) => kv.lease.cmp(v),
        None => return int_target(compare, kv).cmp(&0) == std::cmp::Ordering::Equal,
    };
    match result {
        CompareResult::Equal => ordering.is_eq(),
        CompareResult::NotEqual => !ordering.is_eq(),
        CompareResult::Greater => ordering.is_gt(),
        CompareResult::Less => ordering.is_lt(),
    }
}

/// With no target value given, etcd compares the target field against zero.
fn int_target(compare: &Compare, kv: &KeyValue) -> i64 {
    match CompareTarget::try_from(compare.target).unwrap_or(CompareTarget::Version) {
        CompareTarget::Version => kv.version,
        CompareTarget::Create => kv.create_revision,
        CompareTarget::Mod => kv.mod_revision,
        CompareTarget::Lease => kv.lease,
        CompareTarget::Value => kv.value.len() as i64,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cmp(target: CompareTarget, result: CompareResult, union: TargetUnion) -> Compare {
        Compare {
            result: result as i32,
            target: target as i32,
            key: b"k".to_vec(),
            target_union: Some(union),
            range_end: vec![],
        }
    }

    #[test]
    fn compares() {
        let kv = KeyValue {
            key: b"k".to_vec(),
            value: b"b".to_vec(),
            version: 3,
            mod_revision: 9,
            create_revision: 2,
            lease: 0,
        };
        assert!(holds(
            &cmp(
                CompareTarget::Value,
                CompareResult::Equal,
                TargetUnion::Value(b"b".to_vec())
            ),
            &kv
        ));
        assert!(holds(
            &cmp(
                CompareTarget::Value,
                CompareResult::Greater,
                TargetUnion::Value(b"a".to_vec())
            ),
            &kv
        ));
        assert!(holds(
            &cmp(
                CompareTarget::Version,
                CompareResult::Less,
                TargetUnion::Version(4)
            ),
            &kv
        ));
        assert!(holds(
            &cmp(
                CompareTarget::Mod,
                CompareResult::NotEqual,
                TargetUnion::ModRevision(8)
            ),
            &kv
        ));
        assert!(!holds(
            &cmp(
                CompareTarget::Create,
                CompareResult::Equal,
                TargetUnion::CreateRevision(3)
            ),
            &kv
        ));
    }
}
