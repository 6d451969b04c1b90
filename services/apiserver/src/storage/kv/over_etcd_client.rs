//! etcd's messages over etcd-client, which speaks them in builders and
//! wrappers of its own: a request is rebuilt with its builders, an answer
//! read back into the messages. Only what etcd-client can send is
//! carried; a request it cannot express is refused (`InvalidArgs`).

use capstan_proto::etcdserverpb::compare::TargetUnion;
use capstan_proto::etcdserverpb::request_op::Request;
use capstan_proto::etcdserverpb::response_op::Response;
use capstan_proto::etcdserverpb::{
    Compare, DeleteRangeRequest, DeleteRangeResponse, PutRequest, PutResponse, RangeRequest,
    RangeResponse, RequestOp, ResponseHeader, ResponseOp, TxnRequest, TxnResponse,
};
use capstan_proto::mvccpb::KeyValue;
use etcd_client::{
    CompareOp, DeleteOptions, Error, GetOptions, PutOptions, SortOrder, SortTarget, Txn, TxnOp,
    TxnOpResponse,
};

pub async fn range(
    client: &mut etcd_client::KvClient,
    request: RangeRequest,
) -> Result<RangeResponse, Error> {
    let (key, options) = get_options(request)?;
    let response = client.get(key, Some(options)).await?;
    Ok(range_response(response))
}

pub async fn txn(
    client: &mut etcd_client::KvClient,
    request: TxnRequest,
) -> Result<TxnResponse, Error> {
    let response = client.txn(to_txn(request)?).await?;
    Ok(txn_response(&response))
}

fn invalid(what: &str, value: i32) -> Error {
    Error::InvalidArgs(format!("{what} {value} is not one etcd knows"))
}

fn get_options(r: RangeRequest) -> Result<(Vec<u8>, GetOptions), Error> {
    let mut options = GetOptions::new();
    if !r.range_end.is_empty() {
        options = options.with_range(r.range_end);
    }
    if r.limit > 0 {
        options = options.with_limit(r.limit);
    }
    if r.revision > 0 {
        options = options.with_revision(r.revision);
    }
    let order =
        SortOrder::try_from(r.sort_order).map_err(|_| invalid("sort order", r.sort_order))?;
    let target =
        SortTarget::try_from(r.sort_target).map_err(|_| invalid("sort target", r.sort_target))?;
    if order != SortOrder::None {
        options = options.with_sort(target, order);
    }
    let flags = [
        (
            r.serializable,
            GetOptions::with_serializable as fn(GetOptions) -> GetOptions,
        ),
        (r.keys_only, GetOptions::with_keys_only),
        (r.count_only, GetOptions::with_count_only),
    ];
    for (set, with) in flags {
        if set {
            options = with(options);
        }
    }
    let bounds = [
        (
            r.min_mod_revision,
            GetOptions::with_min_mod_revision as fn(GetOptions, i64) -> GetOptions,
        ),
        (r.max_mod_revision, GetOptions::with_max_mod_revision),
        (r.min_create_revision, GetOptions::with_min_create_revision),
        (r.max_create_revision, GetOptions::with_max_create_revision),
    ];
    for (revision, with) in bounds {
        if revision > 0 {
            options = with(options, revision);
        }
    }
    Ok((r.key, options))
}

fn to_txn(request: TxnRequest) -> Result<Txn, Error> {
    let compares = request.compare.into_iter().map(to_compare);
    let ops = |ops: Vec<RequestOp>| ops.into_iter().map(to_op).collect::<Result<Vec<_>, _>>();
    Ok(Txn::new()
        .when(compares.collect::<Result<Vec<_>, _>>()?)
        .and_then(ops(request.success)?)
        .or_else(ops(request.failure)?))
}

fn to_compare(c: Compare) -> Result<etcd_client::Compare, Error> {
    let op = CompareOp::try_from(c.result).map_err(|_| invalid("compare result", c.result))?;
    let key = c.key;
    let compare = match c.target_union {
        Some(TargetUnion::Version(v)) => etcd_client::Compare::version(key, op, v),
        Some(TargetUnion::CreateRevision(r)) => etcd_client::Compare::create_revision(key, op, r),
        Some(TargetUnion::ModRevision(r)) => etcd_client::Compare::mod_revision(key, op, r),
        Some(TargetUnion::Value(v)) => etcd_client::Compare::value(key, op, v),
        Some(TargetUnion::Lease(l)) => etcd_client::Compare::lease(key, op, l),
        None => return Err(Error::InvalidArgs("a compare without a value".into())),
    };
    Ok(match c.range_end.is_empty() {
        true => compare,
        false => compare.with_range(c.range_end),
    })
}

fn to_op(op: RequestOp) -> Result<TxnOp, Error> {
    Ok(match op.request {
        Some(Request::RequestPut(put)) => {
            let options = put_options(&put);
            TxnOp::put(put.key, put.value, Some(options))
        }
        Some(Request::RequestRange(range)) => {
            let (key, options) = get_options(range)?;
            TxnOp::get(key, Some(options))
        }
        Some(Request::RequestDeleteRange(delete)) => {
            let options = delete_options(&delete);
            TxnOp::delete(delete.key, Some(options))
        }
        Some(Request::RequestTxn(txn)) => TxnOp::txn(to_txn(txn)?),
        None => {
            return Err(Error::InvalidArgs(
                "a transaction step that does nothing".into(),
            ))
        }
    })
}

fn put_options(put: &PutRequest) -> PutOptions {
    let mut options = PutOptions::new();
    if put.lease != 0 {
        options = options.with_lease(put.lease);
    }
    if put.prev_kv {
        options = options.with_prev_key();
    }
    if put.ignore_value {
        options = options.with_ignore_value();
    }
    if put.ignore_lease {
        options = options.with_ignore_lease();
    }
    options
}

fn delete_options(delete: &DeleteRangeRequest) -> DeleteOptions {
    let mut options = DeleteOptions::new();
    if !delete.range_end.is_empty() {
        options = options.with_range(delete.range_end.clone());
    }
    if delete.prev_kv {
        options = options.with_prev_key();
    }
    options
}

fn header(header: Option<&etcd_client::ResponseHeader>) -> Option<ResponseHeader> {
    header.map(|h| ResponseHeader {
        cluster_id: h.cluster_id(),
        member_id: h.member_id(),
        revision: h.revision(),
        raft_term: h.raft_term(),
    })
}

fn key_value(kv: etcd_client::KeyValue) -> KeyValue {
    let (create_revision, mod_revision) = (kv.create_revision(), kv.mod_revision());
    let (version, lease) = (kv.version(), kv.lease());
    let (key, value) = kv.into_key_value();
    KeyValue {
        key,
        create_revision,
        mod_revision,
        version,
        value,
        lease,
    }
}

fn range_response(mut response: etcd_client::GetResponse) -> RangeResponse {
    RangeResponse {
        header: header(response.header()),
        more: response.more(),
        count: response.count(),
        kvs: response.take_kvs().into_iter().map(key_value).collect(),
    }
}

fn txn_response(response: &etcd_client::TxnResponse) -> TxnResponse {
    let responses = response.op_responses().into_iter().map(|op| {
        let response = match op {
            TxnOpResponse::Put(put) => Response::ResponsePut(PutResponse {
                header: header(put.header()),
                prev_kv: put.prev_key().cloned().map(key_value),
            }),
            TxnOpResponse::Get(get) => Response::ResponseRange(range_response(get)),
            TxnOpResponse::Delete(mut delete) => {
                Response::ResponseDeleteRange(DeleteRangeResponse {
                    header: header(delete.header()),
                    deleted: delete.deleted(),
                    prev_kvs: delete.take_prev_kvs().into_iter().map(key_value).collect(),
                })
            }
            TxnOpResponse::Txn(txn) => Response::ResponseTxn(txn_response(&txn)),
        };
        ResponseOp {
            response: Some(response),
        }
    });
    TxnResponse {
        header: header(response.header()),
        succeeded: response.succeeded(),
        responses: responses.collect(),
    }
}
