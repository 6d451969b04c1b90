//! What can go wrong talking to the store, before it means anything to an
//! API client (the registry turns these into Status errors per verb).

#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    /// Create found the key already there.
    #[error("key exists")]
    Exists,
    /// The compare on mod_revision failed: someone wrote in between.
    #[error("the object was modified concurrently")]
    Conflict,
    /// The requested revision has been compacted away.
    #[error("required revision has been compacted (oldest available: {0})")]
    Compacted(i64),
    /// The requested revision is newer than the store's.
    #[error("required revision {0} is a future revision")]
    FutureRevision(i64),
    /// A stored value is not a JSON object.
    #[error("stored object at {key} does not decode: {reason}")]
    Corrupt { key: String, reason: String },
    #[error("store unavailable: {0}")]
    Unavailable(String),
}

impl From<etcd_client::Error> for StorageError {
    fn from(err: etcd_client::Error) -> Self {
        if let etcd_client::Error::GRpcStatus(status) = &err {
            let message = status.message();
            if message.contains("compacted") {
                return StorageError::Compacted(0);
            }
            if message.contains("future revision") {
                return StorageError::FutureRevision(0);
            }
        }
        StorageError::Unavailable(err.to_string())
    }
}
