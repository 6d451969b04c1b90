//! Writes that take or give up claims (unique values such as cluster IPs,
//! see `storage::claims`): the generic flow calls these instead of the
//! plain store writes, and a type without claims gets a plain write.

use std::collections::BTreeSet;

use serde_json::Value;

use super::handle::Handle;
use super::strategy::Claim;
use crate::error::{ApiError, Cause};
use crate::object::meta;
use crate::storage::{ClaimError, StorageError, CLAIMS};

/// Why a claiming write did not happen.
#[derive(Debug)]
pub enum ClaimFailure {
    Store(StorageError),
    /// A value the client asked for is another object's.
    Refused(ApiError),
    /// A value the server picked is another object's: read and pick again.
    Repick,
}

impl From<ClaimError> for ClaimFailure {
    fn from(err: ClaimError) -> Self {
        match err {
            ClaimError::Storage(e) => ClaimFailure::Store(e),
            ClaimError::Taken(_) => ClaimFailure::Repick,
        }
    }
}

impl Handle {
    pub(crate) fn claim_error(&self, name: &str, failure: ClaimFailure) -> ApiError {
        match failure {
            ClaimFailure::Store(e) => self.storage_error(name, e),
            ClaimFailure::Refused(e) => e,
            ClaimFailure::Repick => ApiError::Internal("a unique value could not be picked".into()),
        }
    }
}

/// How many times a server-picked value that turned out taken is picked
/// again before the request fails.
const PICKS: usize = 32;

/// The claim keys an object holds, without repeats.
pub fn keys(h: &Handle, obj: &Value) -> Vec<String> {
    let names: BTreeSet<String> = h.strategy.claims(obj).into_iter().map(|c| c.name).collect();
    names
        .into_iter()
        .map(|name| format!("{}/{CLAIMS}/{name}", h.prefix))
        .collect()
}

/// Taken claims the client asked for are its error to fix (422); taken
/// server picks are picked again (None).
fn refuse_requested(
    h: &Handle,
    obj: &Value,
    requested: &[Claim],
    taken: &[String],
) -> Option<ApiError> {
    let causes: Vec<Cause> = requested
        .iter()
        .filter(|c| {
            let key = format!("{}/{CLAIMS}/{}", h.prefix, c.name);
            taken.contains(&key)
        })
        .map(|c| Cause::invalid(c.field.clone(), &c.value, c.taken))
        .collect();
    if causes.is_empty() {
        return None;
    }
    let def = h.strategy.def();
    Some(ApiError::invalid(
        def.target(meta::name(obj)),
        def.kind,
        causes,
    ))
}

/// Creates `unpicked` after letting the strategy pick its unique values,
/// picking again while a pick collides; the object written and its
/// revision.
pub async fn create(
    h: &Handle,
    key: &str,
    unpicked: &Value,
    mut obj: Value,
) -> Result<(Value, i64), ClaimFailure> {
    let requested = h.strategy.claims(unpicked);
    for _ in 0..PICKS {
        let claims = keys(h, &obj);
        match h.store.create_claiming(key, &obj, &claims, h.expiry).await {
            Ok(revision) => return Ok((obj, revision)),
            Err(ClaimError::Taken(taken)) => {
                if let Some(err) = refuse_requested(h, &obj, &requested, &taken) {
                    return Err(ClaimFailure::Refused(err));
                }
                obj = unpicked.clone();
                h.strategy.allocate(&mut obj, None);
            }
            Err(other) => return Err(other.into()),
        }
    }
    Err(ClaimFailure::Store(StorageError::Unavailable(
        "no free value left to allocate".into(),
    )))
}

/// Replaces `old` (last written at `mod_revision`) by `new`, taking the
/// claims only `new` holds and dropping those only `old` held. A taken
/// server pick reports `Taken` so the caller reads and picks again.
pub async fn update(
    h: &Handle,
    key: &str,
    requested: &[Claim],
    new: &Value,
    old: &Value,
    mod_revision: i64,
) -> Result<i64, ClaimFailure> {
    let (held, holding) = (keys(h, old), keys(h, new));
    let take: Vec<String> = holding
        .iter()
        .filter(|k| !held.contains(k))
        .cloned()
        .collect();
    let release: Vec<String> = held
        .iter()
        .filter(|k| !holding.contains(k))
        .cloned()
        .collect();
    match h
        .store
        .update_claiming(key, new, mod_revision, &take, &release, h.expiry)
        .await
    {
        Ok(revision) => Ok(revision),
        Err(ClaimError::Taken(taken)) => match refuse_requested(h, new, requested, &taken) {
            Some(err) => Err(ClaimFailure::Refused(err)),
            None => Err(ClaimFailure::Repick),
        },
        Err(ClaimError::Storage(e)) => Err(ClaimFailure::Store(e)),
    }
}

/// Deletes `obj` (last written at `mod_revision`) with its claims.
pub async fn delete(
    h: &Handle,
    key: &str,
    obj: &Value,
    mod_revision: i64,
) -> Result<i64, StorageError> {
    let releases = keys(h, obj);
    h.store.delete_releasing(key, mod_revision, &releases).await
}
