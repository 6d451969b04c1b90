//! The store's error type and its mapping onto etcd's gRPC status codes and
//! message texts. etcd clients match errors by code *and* exact text, so the
//! strings below are part of the wire contract.

use tonic::{Code, Status};

/// Everything a store request can fail with.
#[derive(Debug, Clone, thiserror::Error, PartialEq)]
pub enum StoreError {
    #[error("etcdserver: key is not provided")]
    EmptyKey,
    #[error("etcdserver: key not found")]
    KeyNotFound,
    #[error("etcdserver: value is provided")]
    ValueProvided,
    #[error("etcdserver: lease is provided")]
    LeaseProvided,
    #[error("etcdserver: too many operations in txn request")]
    TooManyOps,
    #[error("etcdserver: duplicate key given in txn request")]
    DuplicateKey,
    #[error("etcdserver: request is too large")]
    RequestTooLarge,
    #[error("etcdserver: invalid sort option")]
    InvalidSortOption,
    #[error("etcdserver: mvcc: required revision has been compacted")]
    Compacted,
    #[error("etcdserver: mvcc: required revision is a future revision")]
    FutureRevision,
    #[error("etcdserver: mvcc: database space exceeded")]
    NoSpace,
    #[error("etcdserver: requested lease not found")]
    LeaseNotFound,
    #[error("etcdserver: lease already exists")]
    LeaseExists,
    #[error("etcdserver: too large lease TTL")]
    LeaseTtlTooLarge,
    #[error("etcdserver: no leader")]
    NoLeader,
    #[error("etcdserver: leader changed")]
    LeaderChanged,
    #[error("etcdserver: request timed out")]
    Timeout,
    #[error("etcdserver: server stopped")]
    Stopped,
    #[error("etcdserver: member not found")]
    MemberNotFound,
    #[error("etcdserver: member ID already exist")]
    MemberExists,
    #[error("etcdserver: Peer URLs already exists")]
    PeerUrlExists,
    #[error("etcdserver: can only promote a learner member")]
    NotLearner,
    #[error("etcdserver: can only promote a learner member which is in sync with leader")]
    LearnerNotReady,
    #[error("etcdserver: bad leader transferee")]
    BadLeaderTransferee,
    #[error("etcdserver: not leader")]
    NotLeader,
    #[error("etcdserver: {0}")]
    Unimplemented(&'static str),
    /// A setting that cannot work.
    #[error("configuration: {0}")]
    Config(String),
    /// A local storage failure. The member cannot go on safely after one.
    #[error("etcdserver: storage error: {0}")]
    Storage(String),
    #[error("etcdserver: corrupt record: {0}")]
    Corrupt(String),
}

impl StoreError {
    /// The gRPC code etcd uses for this error.
    pub fn code(&self) -> Code {
        use StoreError::*;
        match self {
            EmptyKey | KeyNotFound | ValueProvided | LeaseProvided | TooManyOps | DuplicateKey
            | RequestTooLarge | InvalidSortOption => Code::InvalidArgument,
            Compacted | FutureRevision | LeaseTtlTooLarge => Code::OutOfRange,
            LeaseNotFound | MemberNotFound => Code::NotFound,
            LeaseExists | MemberExists | PeerUrlExists | NotLearner | LearnerNotReady
            | BadLeaderTransferee | NotLeader => Code::FailedPrecondition,
            NoLeader | LeaderChanged | Timeout | Stopped => Code::Unavailable,
            NoSpace => Code::ResourceExhausted,
            Unimplemented(_) => Code::Unimplemented,
            Storage(_) | Corrupt(_) | Config(_) => Code::Internal,
        }
    }
}

impl From<StoreError> for Status {
    fn from(err: StoreError) -> Status {
        Status::new(err.code(), err.to_string())
    }
}

impl From<sled::Error> for StoreError {
    fn from(err: sled::Error) -> StoreError {
        StoreError::Storage(err.to_string())
    }
}

impl From<prost::DecodeError> for StoreError {
    fn from(err: prost::DecodeError) -> StoreError {
        StoreError::Corrupt(err.to_string())
    }
}

pub type Result<T, E = StoreError> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compacted_error_matches_etcd_wire_text() {
        let status = Status::from(StoreError::Compacted);
        assert_eq!(status.code(), Code::OutOfRange);
        assert_eq!(
            status.message(),
            "etcdserver: mvcc: required revision has been compacted"
        );
    }

    #[test]
    fn lease_not_found_is_not_found() {
        let status = Status::from(StoreError::LeaseNotFound);
        assert_eq!(status.code(), Code::NotFound);
        assert_eq!(status.message(), "etcdserver: requested lease not found");
    }
}
