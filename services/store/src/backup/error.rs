//! The backup layer's error, and its translation into the store's.

use crate::error::StoreError;

/// What can go wrong reading or writing a backup.
#[derive(Debug, thiserror::Error)]
pub enum BackupError {
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("{0}")]
    Invalid(String),
    #[error("a record does not decode: {0}")]
    Decode(#[from] prost::DecodeError),
    #[error("keys out of order in a bucket at {0:?}")]
    Unsorted(Vec<u8>),
    #[error("a pair outside any bucket")]
    NoBucket,
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl From<BackupError> for StoreError {
    fn from(err: BackupError) -> StoreError {
        match err {
            BackupError::Store(err) => err,
            other => StoreError::Storage(format!("snapshot: {other}")),
        }
    }
}
