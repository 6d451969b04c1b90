//! `etcdserverpb.Cluster`: the member list. Membership changes arrive with
//! replication (issue 3) and are refused until then.

use std::sync::Arc;

use capstan_proto::etcdserverpb::cluster_server::Cluster;
use capstan_proto::etcdserverpb::{
    MemberAddRequest, MemberAddResponse, MemberListRequest, MemberListResponse,
    MemberPromoteRequest, MemberPromoteResponse, MemberRemoveRequest, MemberRemoveResponse,
    MemberUpdateRequest, MemberUpdateResponse,
};
use tonic::{Request, Response, Status};

use super::Context;
use crate::error::StoreError;

pub struct ClusterService(pub Arc<Context>);

const NO_MEMBERSHIP_CHANGES: StoreError =
    StoreError::Unimplemented("membership changes are not supported by this member yet");

#[tonic::async_trait]
impl Cluster for ClusterService {
    async fn member_add(
        &self,
        _request: Request<MemberAddRequest>,
    ) -> Result<Response<MemberAddResponse>, Status> {
        Err(NO_MEMBERSHIP_CHANGES.into())
    }

    async fn member_remove(
        &self,
        _request: Request<MemberRemoveRequest>,
    ) -> Result<Response<MemberRemoveResponse>, Status> {
        Err(NO_MEMBERSHIP_CHANGES.into())
    }

    async fn member_update(
        &self,
        _request: Request<MemberUpdateRequest>,
    ) -> Result<Response<MemberUpdateResponse>, Status> {
        Err(NO_MEMBERSHIP_CHANGES.into())
    }

    async fn member_list(
        &self,
        _request: Request<MemberListRequest>,
    ) -> Result<Response<MemberListResponse>, Status> {
        let ctx = &self.0;
        let members = ctx.cluster.members.iter().map(|m| m.to_wire()).collect();
        let work = async {
            Ok(MemberListResponse {
                header: Some(ctx.header(ctx.mvcc.current_revision())),
                members,
            })
        };
        ctx.observe("MemberList", work).await
    }

    async fn member_promote(
        &self,
        _request: Request<MemberPromoteRequest>,
    ) -> Result<Response<MemberPromoteResponse>, Status> {
        Err(NO_MEMBERSHIP_CHANGES.into())
    }
}
