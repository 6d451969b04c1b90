//! What can go wrong talking to the store, before it means anything to an
//! API client. `registry::storage_errors` is the one place these
//! become API errors.

/// etcd's texts for its typed errors (etcd's `rpctypes`): a gRPC status
/// is one of these when its code and its message both match, as etcd's
/// own client decides (the message is the error's identity there).
const COMPACTED: &str = "etcdserver: mvcc: required revision has been compacted";
const FUTURE_REVISION: &str = "etcdserver: mvcc: required revision is a future revision";
/// gRPC's OutOfRange, which etcd gives both of the above.
const OUT_OF_RANGE: i32 = 11;

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum StorageError {
    /// Create found the key already there.
    #[error("key {0} exists")]
    Exists(String),
    /// Delete or update of a key that is not there.
    #[error("key {0} not found")]
    NotFound(String),
    /// The compare on mod_revision failed: someone wrote in between.
    #[error("the object was modified concurrently")]
    Conflict,
    /// A write's claims that another object holds (full keys, see
    /// `claims.rs`).
    #[error("already claimed: {0:?}")]
    Taken(Vec<String>),
    /// A delete's or update's precondition (uid, resourceVersion) does not
    /// hold: what was asked, and what the object has.
    #[error("Precondition failed: {what} in precondition: {want}, {what} in object meta: {have}")]
    Precondition {
        what: &'static str,
        want: String,
        have: String,
    },
    /// The requested revision has been compacted away: the revision asked
    /// for (0 when the store did not say) and the compaction's revision
    /// when the store told it (a watch does, a range read does not).
    #[error("required revision {requested} has been compacted (compacted at {compacted:?})")]
    Compacted {
        requested: i64,
        compacted: Option<i64>,
    },
    /// The requested revision is newer than the store's current one.
    #[error("required revision {requested} is a future revision (current: {current})")]
    FutureRevision { requested: i64, current: i64 },
    /// A stored value is not a JSON object.
    #[error("stored object at {key} does not decode: {reason}")]
    Corrupt { key: String, reason: String },
    /// A stored value that cannot be decrypted (a key no longer
    /// configured, a wrong key, tampered data).
    #[error("unable to transform key {key:?}: {reason}")]
    Transform { key: String, reason: String },
    #[error("store unavailable: {0}")]
    Unavailable(String),
    /// A cache in front of the store did not catch up with it in time.
    #[error("{0}")]
    CacheBehind(String),
    /// An object could not be converted between the versions of its type
    /// (a type served in several versions, `registry::conversion`).
    #[error("{0}")]
    Conversion(String),
}

impl StorageError {
    /// Fills in the revision a read asked for, which the store's answer
    /// does not carry.
    pub fn at_revision(self, revision: i64) -> StorageError {
        match self {
            StorageError::Compacted { compacted, .. } => StorageError::Compacted {
                requested: revision,
                compacted,
            },
            StorageError::FutureRevision { current, .. } => StorageError::FutureRevision {
                requested: revision,
                current,
            },
            other => other,
        }
    }
}

impl From<etcd_client::Error> for StorageError {
    fn from(err: etcd_client::Error) -> Self {
        if let etcd_client::Error::GRpcStatus(status) = &err {
            if let Some(typed) = etcd_error(status.code() as i32, status.message()) {
                return typed;
            }
        }
        StorageError::Unavailable(err.to_string())
    }
}

/// The typed error an etcd answer stands for, by gRPC code and etcd text.
fn etcd_error(code: i32, message: &str) -> Option<StorageError> {
    match (code, message) {
        (OUT_OF_RANGE, COMPACTED) => Some(StorageError::Compacted {
            requested: 0,
            compacted: None,
        }),
        (OUT_OF_RANGE, FUTURE_REVISION) => Some(StorageError::FutureRevision {
            requested: 0,
            current: 0,
        }),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn etcd_errors_are_matched_by_code_and_text() {
        assert!(matches!(
            etcd_error(OUT_OF_RANGE, COMPACTED),
            Some(StorageError::Compacted { .. })
        ));
        assert!(matches!(
            etcd_error(OUT_OF_RANGE, FUTURE_REVISION),
            Some(StorageError::FutureRevision { .. })
        ));
        // The same text under another code is not etcd's typed error.
        assert_eq!(etcd_error(2, COMPACTED), None);
        let revision = StorageError::from(etcd_client::Error::InvalidArgs("x".into()));
        assert!(matches!(revision, StorageError::Unavailable(_)));
        let filled = etcd_error(OUT_OF_RANGE, COMPACTED).unwrap().at_revision(7);
        assert_eq!(
            filled,
            StorageError::Compacted {
                requested: 7,
                compacted: None
            }
        );
    }
}
