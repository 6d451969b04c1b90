//! The requests the storage layer sends, built from etcd's own messages,
//! and what it reads from the answers.

use capstan_proto::etcdserverpb::compare::{CompareResult, CompareTarget, TargetUnion};
use capstan_proto::etcdserverpb::request_op::Request;
use capstan_proto::etcdserverpb::{
    Compare, DeleteRangeRequest, PutRequest, RangeRequest, RequestOp, ResponseHeader, TxnRequest,
};

fn compare(key: &str, target: CompareTarget, value: TargetUnion) -> Compare {
    Compare {
        result: CompareResult::Equal as i32,
        target: target as i32,
        key: key.as_bytes().to_vec(),
        target_union: Some(value),
        ..Default::default()
    }
}

/// `key` was created at `revision` (0: it does not exist).
pub fn create_revision_is(key: &str, revision: i64) -> Compare {
    let value = TargetUnion::CreateRevision(revision);
    compare(key, CompareTarget::Create, value)
}

/// `key` was last written at `revision`.
pub fn mod_revision_is(key: &str, revision: i64) -> Compare {
    compare(key, CompareTarget::Mod, TargetUnion::ModRevision(revision))
}

/// `key` has been written `version` times since it was created.
pub fn version_is(key: &str, version: i64) -> Compare {
    compare(key, CompareTarget::Version, TargetUnion::Version(version))
}

/// Writes `value` at `key`, under `lease` if there is one.
pub fn put(key: &str, value: Vec<u8>, lease: Option<i64>) -> RequestOp {
    let put = PutRequest {
        key: key.as_bytes().to_vec(),
        value,
        lease: lease.unwrap_or(0),
        ..Default::default()
    };
    RequestOp {
        request: Some(Request::RequestPut(put)),
    }
}

/// Deletes `key`.
pub fn delete(key: &str) -> RequestOp {
    let delete = DeleteRangeRequest {
        key: key.as_bytes().to_vec(),
        ..Default::default()
    };
    RequestOp {
        request: Some(Request::RequestDeleteRange(delete)),
    }
}

/// A read of `key` alone.
pub fn key_alone(key: &str) -> RangeRequest {
    RangeRequest {
        key: key.as_bytes().to_vec(),
        ..Default::default()
    }
}

/// Reads `key`, in a transaction.
pub fn get(key: &str) -> RequestOp {
    RequestOp {
        request: Some(Request::RequestRange(key_alone(key))),
    }
}

/// `success` if every compare holds, else `failure`.
pub fn txn(compare: Vec<Compare>, success: Vec<RequestOp>, failure: Vec<RequestOp>) -> TxnRequest {
    TxnRequest {
        compare,
        success,
        failure,
    }
}

/// A read of every key under `prefix` from `from` on (`from` is the
/// prefix itself for all of them).
pub fn prefix_range(prefix: &str, from: &str) -> RangeRequest {
    RangeRequest {
        key: from.as_bytes().to_vec(),
        range_end: prefix_end(prefix),
        ..Default::default()
    }
}

/// The store revision an answer was given at (0 without a header).
pub fn revision_of(header: &Option<ResponseHeader>) -> i64 {
    header.as_ref().map_or(0, |h| h.revision)
}

/// The first key after every key that starts with `prefix`.
pub fn prefix_end(prefix: &str) -> Vec<u8> {
    let mut end = prefix.as_bytes().to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return end;
        }
    }
    vec![0]
}
