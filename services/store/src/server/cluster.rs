//! `etcdserverpb.Cluster`: the member list and membership changes, which
//! are raft configuration changes (a learner first, if the caller asks).
//! With auth on, changing the membership is root's (as in etcd 3.5 and
//! later); anyone may list the members, which clients do before they log in.

use std::sync::Arc;

use capstan_proto::etcdserverpb::cluster_server::Cluster;
use capstan_proto::etcdserverpb::{
    Member, MemberAddRequest, MemberAddResponse, MemberListRequest, MemberListResponse,
    MemberPromoteRequest, MemberPromoteResponse, MemberRemoveRequest, MemberRemoveResponse,
    MemberUpdateRequest, MemberUpdateResponse,
};
use capstan_proto::internal::{Caller, MemberRecord};
use capstan_proto::peer::LearnerInSyncRequest;
use raft::eraftpb::{ConfChangeSingle, ConfChangeType, ConfChangeV2};
use tonic::{Request, Response, Status};

use super::context::Context;
use crate::apply::ApplyOutcome;
use crate::error::{Result, StoreError};
use crate::membership::identity::{member_id, to_wire};
use crate::membership::records;

pub struct ClusterService(pub Arc<Context>);

fn single_change(kind: ConfChangeType, node_id: u64) -> ConfChangeV2 {
    let mut change = ConfChangeSingle::default();
    change.set_change_type(kind);
    change.node_id = node_id;
    let mut v2 = ConfChangeV2::default();
    v2.set_changes(vec![change].into());
    v2
}

impl ClusterService {
    fn members(&self) -> Result<Vec<MemberRecord>> {
        records::load_members(&**self.0.mvcc.backend())
    }

    fn wire_members(&self) -> Result<Vec<Member>> {
        Ok(self.members()?.iter().map(to_wire).collect())
    }

    async fn change(&self, kind: ConfChangeType, record: MemberRecord) -> Result<Vec<Member>> {
        match self
            .0
            .raft
            .change_membership(single_change(kind, record.id), record)
            .await?
        {
            ApplyOutcome::Members(members) => Ok(members.iter().map(to_wire).collect()),
            other => Err(crate::apply::unexpected(&other)),
        }
    }

    async fn add(&self, req: MemberAddRequest) -> Result<MemberAddResponse> {
        let existing = self.members()?;
        let id = member_id(&req.peer_ur_ls, &self.0.cluster.cluster_token);
        if existing.iter().any(|m| m.id == id) {
            return Err(StoreError::MemberExists);
        }
        if existing
            .iter()
            .any(|m| m.peer_urls.iter().any(|u| req.peer_ur_ls.contains(u)))
        {
            return Err(StoreError::PeerUrlExists);
        }
        let record = MemberRecord {
            id,
            peer_urls: req.peer_ur_ls.clone(),
            is_learner: req.is_learner,
            ..Default::default()
        };
        let kind = if req.is_learner {
            ConfChangeType::AddLearnerNode
        } else {
            ConfChangeType::AddNode
        };
        let members = self.change(kind, record.clone()).await?;
        Ok(MemberAddResponse {
            header: Some(self.0.header(self.0.mvcc.current_revision())),
            member: Some(to_wire(&record)),
            members,
        })
    }

    fn known(&self, id: u64) -> Result<MemberRecord> {
        self.members()?
            .into_iter()
            .find(|m| m.id == id)
            .ok_or(StoreError::MemberNotFound)
    }

    async fn remove(&self, req: MemberRemoveRequest) -> Result<MemberRemoveResponse> {
        let record = self.known(req.id)?;
        let members = self.change(ConfChangeType::RemoveNode, record).await?;
        Ok(MemberRemoveResponse {
            header: Some(self.0.header(self.0.mvcc.current_revision())),
            members,
        })
    }

    async fn promote(&self, req: MemberPromoteRequest) -> Result<MemberPromoteResponse> {
        let record = self.known(req.id)?;
        if !record.is_learner {
            return Err(StoreError::NotLearner);
        }
        if self.learner_in_sync(record.id).await? == Some(false) {
            return Err(StoreError::LearnerNotReady);
        }
        let members = self.change(ConfChangeType::AddNode, record).await?;
        Ok(MemberPromoteResponse {
            header: Some(self.0.header(self.0.mvcc.current_revision())),
            members,
        })
    }

    /// New peer URLs for a member (it moved): an ordinary proposal, not a
    /// configuration change, as in etcd; every member's transport follows
    /// once it is applied.
    async fn update(
        &self,
        caller: Caller,
        req: MemberUpdateRequest,
    ) -> Result<MemberUpdateResponse> {
        self.known(req.id)?;
        let taken = self
            .members()?
            .into_iter()
            .any(|m| m.id != req.id && m.peer_urls.iter().any(|u| req.peer_ur_ls.contains(u)));
        if taken {
            return Err(StoreError::PeerUrlExists);
        }
        let update = MemberRecord {
            id: req.id,
            peer_urls: req.peer_ur_ls,
            ..Default::default()
        };
        let request = capstan_proto::internal::raft_request::Request::MemberPeerUrls(update);
        let outcome = self.0.raft.propose_as(Some(caller), request).await?;
        let members = match outcome {
            ApplyOutcome::Members(members) => members.iter().map(to_wire).collect(),
            other => return Err(crate::apply::unexpected(&other)),
        };
        Ok(MemberUpdateResponse {
            header: Some(self.0.header(self.0.mvcc.current_revision())),
            members,
        })
    }

    /// Only the leader knows how far a learner got: a follower asks it
    /// over the peer service. None when the leader does not track it.
    async fn learner_in_sync(&self, id: u64) -> Result<Option<bool>> {
        if self.0.raft.status().is_leader() {
            return self.0.raft.learner_in_sync(id).await;
        }
        let mut leader = self.0.leader_client()?;
        let answer = leader
            .learner_in_sync(LearnerInSyncRequest {
                member_id: id,
                cluster_id: self.0.cluster.cluster_id.get(),
            })
            .await
            .map_err(|_| StoreError::NoLeader)?
            .into_inner();
        if answer.not_leader {
            return Err(StoreError::LeaderChanged);
        }
        Ok(answer.in_sync)
    }

    async fn list(&self, req: MemberListRequest) -> Result<MemberListResponse> {
        if req.linearizable {
            self.0.raft.read_barrier().await?;
        }
        Ok(MemberListResponse {
            header: Some(self.0.header(self.0.mvcc.current_revision())),
            members: self.wire_members()?,
        })
    }
}

/// Root only, when auth is on.
fn admin(ctx: &Context, caller: &Caller) -> Result<()> {
    ctx.auth.checker(caller).admin()
}

#[tonic::async_trait]
impl Cluster for ClusterService {
    async fn member_add(
        &self,
        request: Request<MemberAddRequest>,
    ) -> std::result::Result<Response<MemberAddResponse>, Status> {
        let work = |caller: Caller, req| async move {
            admin(&self.0, &caller)?;
            self.add(req).await
        };
        self.0.serve("MemberAdd", request, work).await
    }

    async fn member_remove(
        &self,
        request: Request<MemberRemoveRequest>,
    ) -> std::result::Result<Response<MemberRemoveResponse>, Status> {
        let work = |caller: Caller, req| async move {
            admin(&self.0, &caller)?;
            self.remove(req).await
        };
        self.0.serve("MemberRemove", request, work).await
    }

    async fn member_update(
        &self,
        request: Request<MemberUpdateRequest>,
    ) -> std::result::Result<Response<MemberUpdateResponse>, Status> {
        let work = |caller: Caller, req| async move {
            admin(&self.0, &caller)?;
            self.update(caller, req).await
        };
        self.0.serve("MemberUpdate", request, work).await
    }

    async fn member_list(
        &self,
        request: Request<MemberListRequest>,
    ) -> std::result::Result<Response<MemberListResponse>, Status> {
        self.0
            .observe("MemberList", self.list(request.into_inner()))
            .await
    }

    async fn member_promote(
        &self,
        request: Request<MemberPromoteRequest>,
    ) -> std::result::Result<Response<MemberPromoteResponse>, Status> {
        let work = |caller: Caller, req| async move {
            admin(&self.0, &caller)?;
            self.promote(req).await
        };
        self.0.serve("MemberPromote", request, work).await
    }
}
