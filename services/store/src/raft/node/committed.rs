//! The Ready loop's step that hands committed entries on to the applier
//! (`crate::apply`): runs of normal entries as one backend batch, membership
//! changes one by one between them (raft's configuration first, then the
//! member records); then their proposers are answered.

use prost::Message as _;
use protobuf::Message as _;
use raft::eraftpb::{ConfChange, ConfChangeV2, Entry, EntryType};
use raft_proto::ConfChangeI;

use capstan_proto::internal::{raft_request, RaftRequest};

use super::{peer_list, Node};
use crate::apply::{ApplyBatch, ApplyOutcome};
use crate::error::{Result, StoreError};

impl Node {
    /// Hands committed entries to the applier: each run of normal entries
    /// as one backend batch, membership changes one by one between them.
    pub(super) fn hand_on_committed(&mut self, entries: Vec<Entry>) -> Result<()> {
        let mut rest = &entries[..];
        while let Some(first) = rest.first() {
            let normal = rest
                .iter()
                .take_while(|e| e.get_entry_type() == EntryType::EntryNormal)
                .count();
            if normal > 0 {
                self.hand_on_normal(&rest[..normal])?;
                rest = &rest[normal..];
                continue;
            }
            let applied_id = match first.get_entry_type() {
                EntryType::EntryConfChange => {
                    let change = ConfChange::parse_from_bytes(&first.data)
                        .map_err(|err| StoreError::Corrupt(err.to_string()))?;
                    self.hand_on_conf_change(first, &change)?
                }
                _ => {
                    let change = ConfChangeV2::parse_from_bytes(&first.data)
                        .map_err(|err| StoreError::Corrupt(err.to_string()))?;
                    self.hand_on_conf_change(first, &change)?
                }
            };
            self.settle_proposal(first.index, applied_id);
            self.applied = first.index;
            rest = &rest[1..];
        }
        Ok(())
    }

    /// Has normal entries applied in one backend batch, then answers their
    /// proposers.
    fn hand_on_normal(&mut self, entries: &[Entry]) -> Result<()> {
        let mut batch = ApplyBatch::new(&self.applier);
        let mut ids = Vec::with_capacity(entries.len());
        for entry in entries {
            ids.push((entry.index, batch.apply(entry.index, &entry.data)?));
        }
        for applied in batch.commit()? {
            if let Ok(ApplyOutcome::Members(members)) = &applied.result {
                // A member's peer URLs may have changed (`member update`).
                self.set_peers(peer_list(members));
            }
            if let Some(waiter) = self.waiters.remove(&applied.request_id) {
                self.answers.push(waiter.reply, applied.result);
            }
        }
        self.answers.send();
        for (index, applied_id) in ids {
            self.settle_proposal(index, applied_id);
            self.applied = index;
        }
        Ok(())
    }

    /// If this member proposed an entry at `index` but another one was
    /// applied there, the proposal was lost: its client is told at once.
    fn settle_proposal(&mut self, index: u64, applied_id: Option<u64>) {
        let lost = self.proposal_index.remove(&index);
        if let Some(lost) = lost.filter(|id| Some(*id) != applied_id) {
            if let Some(waiter) = self.waiters.remove(&lost) {
                let _ = waiter.reply.done.send(Err(StoreError::LeaderChanged));
            }
        }
    }

    /// Changes raft's configuration, then has the member records follow.
    fn hand_on_conf_change(
        &mut self,
        entry: &Entry,
        change: &impl ConfChangeI,
    ) -> Result<Option<u64>> {
        let v2 = change.as_v2();
        let conf_state = match self.raw.apply_conf_change(change) {
            Ok(conf_state) => conf_state,
            Err(err) => {
                // An invalid change (e.g. removing the last voter) is skipped
                // the same way on every member; the entry still counts as applied.
                tracing::warn!(%err, "membership change rejected");
                let mut batch = ApplyBatch::new(&self.applier);
                batch.apply(entry.index, &[])?;
                batch.commit()?;
                return Ok(None);
            }
        };
        self.log.set_conf_state(&conf_state)?;
        let context = RaftRequest::decode(entry.context.as_ref()).ok();
        let record = context.as_ref().and_then(|c| match &c.request {
            Some(raft_request::Request::MemberAttributes(record)) => Some(record),
            _ => None,
        });
        let mut members = Vec::new();
        for single in v2.changes.iter() {
            members = self.applier.apply_member_change(
                entry.index,
                single.get_change_type(),
                single.node_id,
                record,
            )?;
        }
        self.set_peers(peer_list(&members));
        let id = context.map(|c| c.id);
        if let Some(waiter) = id.and_then(|id| self.waiters.remove(&id)) {
            let _ = waiter.reply.done.send(Ok(ApplyOutcome::Members(members)));
        }
        Ok(id)
    }
}
