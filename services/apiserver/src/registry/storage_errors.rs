//! Where the registry meets storage: a storage error becomes the API
//! error its request answers with (Kubernetes' `storage.Interpret*Error`).

use crate::error::{ApiError, Target};
use crate::storage::StorageError;

/// What a failed store read was doing, where that changes the answer.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Reading {
    /// A read of one object, a write, or a list from its start.
    Plain,
    /// A list resuming from a continue token.
    Continue,
}

/// The one place a storage error becomes an API error; `target` names
/// the object (for lists, the collection with no name).
pub fn api_error(err: StorageError, target: Target, reading: Reading) -> ApiError {
    match err {
        StorageError::Exists(_) => ApiError::AlreadyExists(target),
        StorageError::NotFound(_) => ApiError::NotFound(target),
        StorageError::Conflict => ApiError::stale(target),
        StorageError::Precondition { .. } => ApiError::Conflict(target, err.to_string()),
        StorageError::Compacted { .. } if reading == Reading::Continue => ApiError::Expired(
            "The provided continue parameter is too old to display a consistent list result. \
             You can start a new list without the continue parameter."
                .into(),
        ),
        StorageError::Compacted { requested, .. } => {
            ApiError::Expired(format!("too old resource version: {requested}"))
        }
        StorageError::FutureRevision { requested, current } => {
            ApiError::TooLargeResourceVersion(requested, current)
        }
        StorageError::Corrupt { .. } => ApiError::Internal(err.to_string()),
        StorageError::Transform { .. } => {
            ApiError::Internal(format!("Internal error occurred: {err}"))
        }
        StorageError::Unavailable(_) => ApiError::Unavailable(err.to_string()),
        StorageError::CacheBehind(message) => ApiError::CacheBehind(message),
        // Only a write of a kind with unique values takes claims, and its
        // flow answers for the claims taken before this.
        StorageError::Taken(_) => ApiError::Internal(err.to_string()),
        StorageError::Conversion(why) => {
            ApiError::Internal(format!("Internal error occurred: {why}"))
        }
    }
}
