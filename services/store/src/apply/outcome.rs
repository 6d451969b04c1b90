//! What applying an entry gives back: the response to its request, before
//! the server adds the member's part of the header.

use capstan_proto::etcdserverpb::{
    AlarmResponse, CompactionResponse, DeleteRangeResponse, LeaseGrantResponse,
    LeaseRevokeResponse, PutResponse, TxnResponse,
};
use capstan_proto::internal::MemberRecord;

use crate::auth::Authenticated;
use crate::error::{Result, StoreError};

/// The response to an applied request, before the server adds its header.
#[derive(Debug, Clone)]
pub enum ApplyOutcome {
    Put(PutResponse),
    DeleteRange(DeleteRangeResponse),
    Txn(TxnResponse),
    Compaction(CompactionResponse),
    LeaseGrant(LeaseGrantResponse),
    LeaseRevoke(LeaseRevokeResponse),
    /// The member list after a membership change or attribute update.
    Members(Vec<MemberRecord>),
    Alarm(AlarmResponse),
    /// The access rules changed (or were already as asked).
    AuthChanged,
    Authenticated(Authenticated),
}

/// What applying one entry produced.
pub struct Applied {
    /// The proposer's request id, to wake its waiting client.
    pub request_id: u64,
    pub result: Result<ApplyOutcome>,
}

/// Fails loudly if an outcome does not match the request kind; used by the
/// server to unwrap the response it expects.
pub fn unexpected(outcome: &ApplyOutcome) -> StoreError {
    StoreError::Corrupt(format!("unexpected apply outcome {outcome:?}"))
}
