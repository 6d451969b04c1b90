//! Checks a request must pass before it is proposed. They need no state, so
//! a bad request is refused at once and never reaches the raft log.

use std::collections::HashSet;

use capstan_proto::etcdserverpb::range_request::{SortOrder, SortTarget};
use capstan_proto::etcdserverpb::request_op::Request;
use capstan_proto::etcdserverpb::{
    DeleteRangeRequest, PutRequest, RangeRequest, RequestOp, TxnRequest,
};

use crate::error::{Result, StoreError};
use crate::mvcc::KeyRange;

pub fn check_range(req: &RangeRequest) -> Result<()> {
    if req.key.is_empty() {
        return Err(StoreError::EmptyKey);
    }
    if SortOrder::try_from(req.sort_order).is_err()
        || SortTarget::try_from(req.sort_target).is_err()
    {
        return Err(StoreError::InvalidSortOption);
    }
    Ok(())
}

pub fn check_put(req: &PutRequest) -> Result<()> {
    if req.key.is_empty() {
        return Err(StoreError::EmptyKey);
    }
    if req.ignore_value && !req.value.is_empty() {
        return Err(StoreError::ValueProvided);
    }
    if req.ignore_lease && req.lease != 0 {
        return Err(StoreError::LeaseProvided);
    }
    Ok(())
}

pub fn check_delete(req: &DeleteRangeRequest) -> Result<()> {
    if req.key.is_empty() {
        return Err(StoreError::EmptyKey);
    }
    Ok(())
}

pub fn check_txn(req: &TxnRequest, max_ops: usize) -> Result<()> {
    if req.compare.len() > max_ops || req.success.len() > max_ops || req.failure.len() > max_ops {
        return Err(StoreError::TooManyOps);
    }
    for compare in &req.compare {
        if compare.key.is_empty() {
            return Err(StoreError::EmptyKey);
        }
    }
    for op in req.success.iter().chain(&req.failure) {
        check_op(op, max_ops)?;
    }
    branch_writes(&req.success)?;
    branch_writes(&req.failure)?;
    Ok(())
}

fn check_op(op: &RequestOp, max_ops: usize) -> Result<()> {
    match &op.request {
        Some(Request::RequestRange(r)) => check_range(r),
        Some(Request::RequestPut(r)) => check_put(r),
        Some(Request::RequestDeleteRange(r)) => check_delete(r),
        Some(Request::RequestTxn(r)) => check_txn(r, max_ops),
        None => Ok(()),
    }
}

/// The keys a branch puts and the ranges it deletes.
#[derive(Default)]
struct Writes {
    puts: HashSet<Vec<u8>>,
    deletes: Vec<KeyRange>,
}

impl Writes {
    fn deletes_key(&self, key: &[u8]) -> bool {
        self.deletes.iter().any(|range| range.contains(key))
    }
}

/// A branch may not write one key twice. In etcd's order: the branch's own
/// deletes are known first; each nested txn's puts must not meet an earlier
/// put or a delete seen so far (but its two branches may overlap each other,
/// since only one runs); then its deletes join the set; finally the branch's
/// own puts must meet no put and no delete at all.
fn branch_writes(ops: &[RequestOp]) -> Result<Writes> {
    let mut writes = Writes::default();
    for op in ops {
        if let Some(Request::RequestDeleteRange(del)) = &op.request {
            writes.deletes.push(KeyRange::new(&del.key, &del.range_end));
        }
    }
    for op in ops {
        if let Some(Request::RequestTxn(txn)) = &op.request {
            let success = branch_writes(&txn.success)?;
            let failure = branch_writes(&txn.failure)?;
            for key in success
                .puts
                .iter()
                .chain(failure.puts.difference(&success.puts))
            {
                if writes.puts.contains(key) || writes.deletes_key(key) {
                    return Err(StoreError::DuplicateKey);
                }
            }
            writes
                .puts
                .extend(success.puts.into_iter().chain(failure.puts));
            writes
                .deletes
                .extend(success.deletes.into_iter().chain(failure.deletes));
        }
    }
    for op in ops {
        if let Some(Request::RequestPut(put)) = &op.request {
            if writes.deletes_key(&put.key) || !writes.puts.insert(put.key.clone()) {
                return Err(StoreError::DuplicateKey);
            }
        }
    }
    Ok(writes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn put(key: &str) -> RequestOp {
        RequestOp {
            request: Some(Request::RequestPut(PutRequest {
                key: key.into(),
                ..Default::default()
            })),
        }
    }

    fn delete(key: &str, end: &str) -> RequestOp {
        RequestOp {
            request: Some(Request::RequestDeleteRange(DeleteRangeRequest {
                key: key.into(),
                range_end: end.into(),
                ..Default::default()
            })),
        }
    }

    fn txn(success: Vec<RequestOp>) -> TxnRequest {
        TxnRequest {
            success,
            ..Default::default()
        }
    }

    #[test]
    fn the_same_key_twice_is_a_duplicate() {
        assert_eq!(
            check_txn(&txn(vec![put("a"), put("a")]), 128),
            Err(StoreError::DuplicateKey)
        );
        assert_eq!(
            check_txn(&txn(vec![put("ab"), delete("a", "b")]), 128),
            Err(StoreError::DuplicateKey)
        );
        assert!(check_txn(&txn(vec![put("b"), delete("a", "b")]), 128).is_ok());
    }

    #[test]
    fn nested_txn_writes_count_against_the_outer_branch() {
        let nested = RequestOp {
            request: Some(Request::RequestTxn(txn(vec![put("a")]))),
        };
        assert_eq!(
            check_txn(&txn(vec![put("a"), nested]), 128),
            Err(StoreError::DuplicateKey)
        );
    }

    #[test]
    fn a_nested_txn_may_put_in_one_branch_and_delete_in_the_other() {
        let nested = TxnRequest {
            success: vec![put("n")],
            failure: vec![delete("n", "")],
            ..Default::default()
        };
        let op = RequestOp {
            request: Some(Request::RequestTxn(nested)),
        };
        assert!(check_txn(&txn(vec![op]), 128).is_ok());
    }

    #[test]
    fn too_many_ops_and_empty_keys() {
        let ops = (0..3).map(|i| put(&i.to_string())).collect();
        assert_eq!(check_txn(&txn(ops), 2), Err(StoreError::TooManyOps));
        assert_eq!(check_put(&PutRequest::default()), Err(StoreError::EmptyKey));
        let ignore = PutRequest {
            key: b"k".to_vec(),
            value: b"v".to_vec(),
            ignore_value: true,
            ..Default::default()
        };
        assert_eq!(check_put(&ignore), Err(StoreError::ValueProvided));
    }
}
