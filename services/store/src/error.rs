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
    #[error("etcdserver: too many requests")]
    TooManyRequests,
    #[error("etcdserver: root user does not exist")]
    RootUserNotExist,
    #[error("etcdserver: root user does not have root role")]
    RootRoleNotExist,
    #[error("etcdserver: user name already exists")]
    UserAlreadyExist,
    #[error("etcdserver: user name is empty")]
    UserEmpty,
    #[error("etcdserver: user name not found")]
    UserNotFound,
    #[error("etcdserver: role name already exists")]
    RoleAlreadyExist,
    #[error("etcdserver: role name not found")]
    RoleNotFound,
    #[error("etcdserver: role name is empty")]
    RoleEmpty,
    #[error("etcdserver: permission not given")]
    PermissionNotGiven,
    #[error("etcdserver: authentication failed, invalid user ID or password")]
    AuthFailed,
    #[error("etcdserver: permission denied")]
    PermissionDenied,
    #[error("etcdserver: role is not granted to the user")]
    RoleNotGranted,
    #[error("etcdserver: permission is not granted to the role")]
    PermissionNotGranted,
    #[error("etcdserver: authentication is not enabled")]
    AuthNotEnabled,
    #[error("etcdserver: invalid auth token")]
    InvalidAuthToken,
    #[error("etcdserver: invalid auth management")]
    InvalidAuthMgmt,
    #[error("etcdserver: revision of auth store is old")]
    AuthOldRevision,
    /// bcrypt reads 72 bytes of a password; etcd's Go bcrypt refuses more
    /// rather than ignore the rest, and so does this store.
    #[error("etcdserver: password is longer than 72 bytes")]
    PasswordTooLong,
    /// Only a public key was configured for JWT tokens.
    #[error("etcdserver: auth: token signing attempted with verify-only key")]
    VerifyOnly,
    /// A setting that cannot work.
    #[error("configuration: {0}")]
    Config(String),
    /// A local storage failure. The member cannot go on safely after one.
    #[error("etcdserver: storage error: {0}")]
    Storage(String),
    #[error("etcdserver: corrupt record: {0}")]
    Corrupt(String),
    /// A test-only failure (`failpoints.rs`), never without
    /// `--experimental-enable-failpoints`.
    #[error("etcdserver: failpoint {0}")]
    Failpoint(&'static str),
}

impl StoreError {
    /// The gRPC code etcd uses for this error.
    pub fn code(&self) -> Code {
        use StoreError::*;
        match self {
            EmptyKey | KeyNotFound | ValueProvided | LeaseProvided | TooManyOps | DuplicateKey
            | RequestTooLarge | InvalidSortOption => Code::InvalidArgument,
            UserEmpty | RoleEmpty | PermissionNotGiven | AuthFailed | InvalidAuthMgmt
            | AuthOldRevision | PasswordTooLong => Code::InvalidArgument,
            RootUserNotExist | RootRoleNotExist | UserAlreadyExist | UserNotFound
            | RoleAlreadyExist | RoleNotFound | RoleNotGranted | PermissionNotGranted
            | AuthNotEnabled | VerifyOnly => Code::FailedPrecondition,
            PermissionDenied => Code::PermissionDenied,
            InvalidAuthToken => Code::Unauthenticated,
            TooManyRequests => Code::ResourceExhausted,
            Compacted | FutureRevision | LeaseTtlTooLarge => Code::OutOfRange,
            LeaseNotFound | MemberNotFound => Code::NotFound,
            LeaseExists | MemberExists | PeerUrlExists | NotLearner | LearnerNotReady
            | BadLeaderTransferee | NotLeader => Code::FailedPrecondition,
            NoLeader | LeaderChanged | Timeout | Stopped => Code::Unavailable,
            NoSpace => Code::ResourceExhausted,
            Unimplemented(_) => Code::Unimplemented,
            Storage(_) | Corrupt(_) | Config(_) | Failpoint(_) => Code::Internal,
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
    fn auth_errors_carry_etcds_codes_and_texts() {
        let cases = [
            (
                StoreError::PermissionDenied,
                Code::PermissionDenied,
                "etcdserver: permission denied",
            ),
            (
                StoreError::UserEmpty,
                Code::InvalidArgument,
                "etcdserver: user name is empty",
            ),
            (
                StoreError::InvalidAuthToken,
                Code::Unauthenticated,
                "etcdserver: invalid auth token",
            ),
            (
                StoreError::AuthOldRevision,
                Code::InvalidArgument,
                "etcdserver: revision of auth store is old",
            ),
            (
                StoreError::RootRoleNotExist,
                Code::FailedPrecondition,
                "etcdserver: root user does not have root role",
            ),
        ];
        for (err, code, text) in cases {
            let status = Status::from(err);
            assert_eq!((status.code(), status.message()), (code, text));
        }
    }

    #[test]
    fn lease_not_found_is_not_found() {
        let status = Status::from(StoreError::LeaseNotFound);
        assert_eq!(status.code(), Code::NotFound);
        assert_eq!(status.message(), "etcdserver: requested lease not found");
    }
}
