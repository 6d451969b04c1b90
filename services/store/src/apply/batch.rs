//! [`ApplyBatch`]: a run of committed entries applied as one backend write.
//!
//! Per entry the state machine used to write its own batch, rewriting the
//! current-revision and applied-index records each time; a Ready carries
//! tens of entries, so that was most of the backend's work. The batch is
//! not synced (the raft log is what makes an entry durable; the state is
//! replayed from it after a crash), so grouping changes nothing on disk but
//! the number of writes.

use capstan_proto::internal::raft_request::Request;
use capstan_proto::internal::RaftRequest;
use prost::Message;

use super::applier::Applier;
use super::outcome::Applied;
use crate::error::Result;
use crate::mvcc::{Committed, WriteGroup};

pub struct ApplyBatch<'a> {
    applier: &'a Applier,
    /// Open until committed; holds the MVCC write lock meanwhile.
    group: Option<WriteGroup<'a>>,
    /// Revisions written but not yet announced to the watchers.
    committed: Vec<Committed>,
    outcomes: Vec<Applied>,
}

impl<'a> ApplyBatch<'a> {
    /// Starts applying a run of committed entries as one backend batch.
    pub fn new(applier: &'a Applier) -> ApplyBatch<'a> {
        ApplyBatch {
            applier,
            group: None,
            committed: Vec::new(),
            outcomes: Vec::new(),
        }
    }

    /// Applies the entry at raft `index` (no data: a new leader's empty
    /// entry, which only advances the applied index). Returns the request
    /// id it carried; its outcome comes from [`ApplyBatch::commit`].
    pub fn apply(&mut self, index: u64, data: &[u8]) -> Result<Option<u64>> {
        let request = if data.is_empty() {
            None
        } else {
            match RaftRequest::decode(data) {
                Ok(request) => Some(request),
                Err(err) => panic!("raft entry {index} is not a RaftRequest: {err}"),
            }
        };
        let inner = request.as_ref().and_then(|r| r.request.as_ref());
        // Membership records are read from the backend itself, so what
        // earlier entries wrote must be there first, and what this one
        // writes before the next reads it.
        let reads_backend = matches!(
            inner,
            Some(Request::MemberAttributes(_) | Request::MemberPeerUrls(_))
        );
        if reads_backend {
            self.write_group()?;
        }
        let group = match self.group.take() {
            Some(group) => group,
            None => self.applier.mvcc().write_group(),
        };
        let mut view = group.view();
        let caller = request.as_ref().and_then(|r| r.caller.as_ref());
        let result = inner.map(|inner| self.applier.dispatch(&mut view, index, caller, inner));
        self.group = Some(view.end(index));
        if reads_backend {
            self.write_group()?;
        }
        let Some(request) = request else {
            return Ok(None);
        };
        if let Some(result) = result {
            self.outcomes.push(Applied {
                request_id: request.id,
                result,
            });
        }
        Ok(Some(request.id))
    }

    fn write_group(&mut self) -> Result<()> {
        if let Some(group) = self.group.take() {
            self.committed.extend(group.commit()?);
        }
        Ok(())
    }

    /// Writes what is left in one batch, hands every revision's events to
    /// the watchers in order, and returns the outcomes to answer.
    pub fn commit(mut self) -> Result<Vec<Applied>> {
        self.write_group()?;
        for committed in self.committed.drain(..) {
            if !committed.events.is_empty() {
                (self.applier.hub()).notify(committed.revision, committed.events);
            }
        }
        Ok(std::mem::take(&mut self.outcomes))
    }
}
