//! `etcdserverpb.KV`: reads are served locally (after a ReadIndex barrier
//! unless serializable), checked against the access rules here; writes
//! are proposed through raft and checked as they are applied.

use std::sync::Arc;

use capstan_proto::etcdserverpb::kv_server::Kv;
use capstan_proto::etcdserverpb::{
    CompactionRequest, CompactionResponse, DeleteRangeRequest, DeleteRangeResponse, PutRequest,
    PutResponse, RangeRequest, RangeResponse, TxnRequest, TxnResponse,
};
use capstan_proto::internal::raft_request::Request;
use capstan_proto::internal::Caller;
use tonic::{Request as GrpcRequest, Response, Status};

use super::context::Context;
use super::validate;
use crate::apply::range::execute_range;
use crate::auth::Access;
use crate::error::{Result, StoreError};

pub struct KvService(pub Arc<Context>);

impl KvService {
    async fn range(&self, caller: Caller, req: RangeRequest) -> Result<RangeResponse> {
        let ctx = &self.0;
        // No size check: the limit guards the raft log, which reads bypass.
        validate::check_range(&req)?;
        if !req.serializable {
            ctx.raft.read_barrier().await?;
        }
        (ctx.auth.checker(&caller)).allows(Access::Read, &req.key, &req.range_end)?;
        let mut resp = execute_range(&*ctx.mvcc, &req)?;
        // As etcd: rules that changed during the read may not have
        // allowed it; the client checks again with a fresh token.
        if caller.auth_revision != 0 && caller.auth_revision != ctx.auth.revision() {
            return Err(StoreError::AuthOldRevision);
        }
        ctx.complete_header(&mut resp.header);
        Ok(resp)
    }

    async fn put(&self, caller: Caller, req: PutRequest) -> Result<PutResponse> {
        let ctx = &self.0;
        ctx.check_size(&req)?;
        validate::check_put(&req)?;
        let request = Request::Put(req);
        ctx.check_quota(&request).await?;
        let response = ctx.propose(&caller, request).await?;
        if ctx
            .failpoints
            .as_ref()
            .is_some_and(|f| f.fails_applied_put())
        {
            return Err(StoreError::Failpoint(
                "put-error-every: the put was applied",
            ));
        }
        Ok(response)
    }

    async fn delete_range(
        &self,
        caller: Caller,
        req: DeleteRangeRequest,
    ) -> Result<DeleteRangeResponse> {
        let ctx = &self.0;
        ctx.check_size(&req)?;
        validate::check_delete(&req)?;
        ctx.propose(&caller, Request::DeleteRange(req)).await
    }

    async fn txn(&self, caller: Caller, req: TxnRequest) -> Result<TxnResponse> {
        let ctx = &self.0;
        ctx.check_size(&req)?;
        validate::check_txn(&req, ctx.limits.max_txn_ops)?;
        let request = Request::Txn(req);
        ctx.check_quota(&request).await?;
        ctx.propose(&caller, request).await
    }

    async fn compact(&self, caller: Caller, req: CompactionRequest) -> Result<CompactionResponse> {
        let ctx = &self.0;
        // Refuse obviously bad revisions before they reach the log.
        if req.revision > ctx.mvcc.current_revision() {
            return Err(StoreError::FutureRevision);
        }
        if req.revision <= ctx.mvcc.compact_revision() {
            return Err(StoreError::Compacted);
        }
        let (at, physical) = (req.revision, req.physical);
        let response = ctx.propose(&caller, Request::Compaction(req)).await?;
        if physical {
            // As etcd: the answer waits until the old records are gone from
            // this member's backend, not only from its index.
            ctx.mvcc.wait_compacted(at).await;
        }
        Ok(response)
    }
}

#[tonic::async_trait]
impl Kv for KvService {
    async fn range(
        &self,
        request: GrpcRequest<RangeRequest>,
    ) -> Result<Response<RangeResponse>, Status> {
        let work = |caller, req| KvService::range(self, caller, req);
        self.0.serve("Range", request, work).await
    }

    async fn put(&self, request: GrpcRequest<PutRequest>) -> Result<Response<PutResponse>, Status> {
        let work = |caller, req| KvService::put(self, caller, req);
        self.0.serve("Put", request, work).await
    }

    async fn delete_range(
        &self,
        request: GrpcRequest<DeleteRangeRequest>,
    ) -> Result<Response<DeleteRangeResponse>, Status> {
        let work = |caller, req| KvService::delete_range(self, caller, req);
        self.0.serve("DeleteRange", request, work).await
    }

    async fn txn(&self, request: GrpcRequest<TxnRequest>) -> Result<Response<TxnResponse>, Status> {
        let work = |caller, req| KvService::txn(self, caller, req);
        self.0.serve("Txn", request, work).await
    }

    async fn compact(
        &self,
        request: GrpcRequest<CompactionRequest>,
    ) -> Result<Response<CompactionResponse>, Status> {
        let work = |caller, req| KvService::compact(self, caller, req);
        self.0.serve("Compact", request, work).await
    }
}
