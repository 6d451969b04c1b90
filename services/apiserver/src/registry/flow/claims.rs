//! Writes of kinds whose objects hold values alone across the cluster
//! (see `ResourceDef::unique` and `storage::claims`): the claim keys an
//! object holds, a create that picks again while a pick collides, the
//! claims an update takes and gives up, and which taken claims are the
//! client's error. Kinds without unique values never come here.

use std::collections::BTreeSet;

use serde_json::Value;

use super::handle::Handle;
use crate::error::{ApiError, Cause};
use crate::object::meta;
use crate::registry::definition::{Claim, UniqueValues};
use crate::storage::{StorageError, CLAIMS};

/// Why a write of a kind with unique values did not happen.
#[derive(Debug)]
pub enum Failure {
    Store(StorageError),
    /// A value the client asked for is another object's.
    Refused(ApiError),
}

impl Handle {
    pub(crate) fn claim_error(&self, name: &str, failure: Failure) -> ApiError {
        match failure {
            Failure::Store(e) => self.storage_error(name, e),
            Failure::Refused(e) => e,
        }
    }
}

/// How many times a server-picked value that turned out taken is picked
/// again before the request fails.
const PICKS: usize = 32;

/// The claim keys `obj` holds, without repeats (none for a kind without
/// unique values).
pub fn held(h: &Handle, obj: &Value) -> Vec<String> {
    match h.def().unique {
        Some(unique) => keys(h, &unique.claims(obj)),
        None => Vec::new(),
    }
}

fn keys(h: &Handle, claims: &[Claim]) -> Vec<String> {
    let names: BTreeSet<&str> = claims.iter().map(|c| c.name.as_str()).collect();
    names
        .into_iter()
        .map(|name| format!("{}/{CLAIMS}/{name}", h.prefix))
        .collect()
}

/// Taken claims the client asked for are its error to fix (422); taken
/// server picks are picked again (None).
pub fn refused(h: &Handle, name: &str, requested: &[Claim], taken: &[String]) -> Option<ApiError> {
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
    let def = h.def();
    Some(ApiError::invalid(def.target(name), def.kind, causes))
}

/// Creates `unpicked` after letting `unique` pick its values (`obj` is
/// the first pick), picking again while a pick collides; the object
/// written and its revision.
pub async fn create(
    h: &Handle,
    unique: &dyn UniqueValues,
    key: &str,
    unpicked: &Value,
    mut obj: Value,
) -> Result<(Value, i64), Failure> {
    let requested = unique.claims(unpicked);
    for _ in 0..PICKS {
        let claims = keys(h, &unique.claims(&obj));
        match h.store.create_claiming(key, &obj, &claims, h.expiry).await {
            Ok(revision) => return Ok((obj, revision)),
            Err(StorageError::Taken(taken)) => {
                if let Some(err) = refused(h, meta::name(&obj), &requested, &taken) {
                    return Err(Failure::Refused(err));
                }
                obj = unpicked.clone();
                unique.allocate(&mut obj, None);
            }
            Err(other) => return Err(Failure::Store(other)),
        }
    }
    Err(Failure::Store(StorageError::Unavailable(
        "no free value left to allocate".into(),
    )))
}

/// The claims replacing `old` by `new` takes (those only `new` holds) and
/// gives up (those only `old` held).
pub fn delta(h: &Handle, new: &Value, old: &Value) -> (Vec<String>, Vec<String>) {
    let (held, holding) = (held(h, old), held(h, new));
    let take = holding
        .iter()
        .filter(|k| !held.contains(k))
        .cloned()
        .collect();
    let release = held
        .iter()
        .filter(|k| !holding.contains(k))
        .cloned()
        .collect();
    (take, release)
}

/// Deletes `obj` (last written at `mod_revision`) with its claims.
pub async fn delete(
    h: &Handle,
    key: &str,
    obj: &Value,
    mod_revision: i64,
) -> Result<i64, StorageError> {
    let releases = held(h, obj);
    h.store.delete_releasing(key, mod_revision, &releases).await
}
