//! `etcdserverpb.KV`: reads are served locally (after a ReadIndex barrier
//! unless serializable); writes are proposed through raft.

use std::sync::Arc;

use capstan_proto::etcdserverpb::kv_server::Kv;
use capstan_proto::etcdserverpb::{
    CompactionRequest, CompactionResponse, DeleteRangeRequest, DeleteRangeResponse, PutRequest,
    PutResponse, RangeRequest, RangeResponse, TxnRequest, TxnResponse,
};
use capstan_proto::internal::raft_request::Request;
use tonic::{Request as GrpcRequest, Response, Status};

use super::context::Context;
use super::validate;
use crate::apply::range::execute_range;
use crate::error::Result;

pub struct KvService(pub Arc<Context>);

impl KvService {
    async fn range(&self, req: RangeRequest) -> Result<RangeResponse> {
        let ctx = &self.0;
        // No size check: the limit guards the raft log, which reads bypass.
        validate::check_range(&req)?;
        if !req.serializable {
            ctx.raft.read_barrier().await?;
        }
        let mut resp = execute_range(&*ctx.mvcc, &req)?;
        ctx.complete_header(&mut resp.header);
        Ok(resp)
    }

    async fn put(&self, req: PutRequest) -> Result<PutResponse> {
        let ctx = &self.0;
        ctx.check_size(&req)?;
        validate::check_put(&req)?;
        let request = Request::Put(req);
        ctx.check_quota(&request).await?;
        ctx.propose(request).await
    }

    async fn delete_range(&self, req: DeleteRangeRequest) -> Result<DeleteRangeResponse> {
        let ctx = &self.0;
        ctx.check_size(&req)?;
        validate::check_delete(&req)?;
        ctx.propose(Request::DeleteRange(req)).await
    }

    async fn txn(&self, req: TxnRequest) -> Result<TxnResponse> {
        let ctx = &self.0;
        ctx.check_size(&req)?;
        validate::check_txn(&req, ctx.limits.max_txn_ops)?;
        let request = Request::Txn(req);
        ctx.check_quota(&request).await?;
        ctx.propose(request).await
    }

    async fn compact(&self, req: CompactionRequest) -> Result<CompactionResponse> {
        let ctx = &self.0;
        // Refuse obviously bad revisions before they reach the log.
        if req.revision > ctx.mvcc.current_revision() {
            return Err(crate::error::StoreError::FutureRevision);
        }
        if req.revision <= ctx.mvcc.compact_revision() {
            return Err(crate::error::StoreError::Compacted);
        }
        let (at, physical) = (req.revision, req.physical);
        let response = ctx.propose(Request::Compaction(req)).await?;
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
        self.0
            .observe("Range", KvService::range(self, request.into_inner()))
            .await
    }

    async fn put(&self, request: GrpcRequest<PutRequest>) -> Result<Response<PutResponse>, Status> {
        self.0
            .observe("Put", KvService::put(self, request.into_inner()))
            .await
    }

    async fn delete_range(
        &self,
        request: GrpcRequest<DeleteRangeRequest>,
    ) -> Result<Response<DeleteRangeResponse>, Status> {
        self.0
            .observe(
                "DeleteRange",
                KvService::delete_range(self, request.into_inner()),
            )
            .await
    }

    async fn txn(&self, request: GrpcRequest<TxnRequest>) -> Result<Response<TxnResponse>, Status> {
        self.0
            .observe("Txn", KvService::txn(self, request.into_inner()))
            .await
    }

    async fn compact(
        &self,
        request: GrpcRequest<CompactionRequest>,
    ) -> Result<Response<CompactionResponse>, Status> {
        self.0
            .observe("Compact", KvService::compact(self, request.into_inner()))
            .await
    }
}
