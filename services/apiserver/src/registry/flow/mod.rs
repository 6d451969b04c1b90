//! The generic flow every kind runs: create, guaranteed update (read,
//! change, compare-and-swap, retry), patch, delete and list, with the
//! kind's strategy and definition deciding the kind-specific parts. A
//! write goes decode → defaults (the strategy's `prepare_for_*`) →
//! admission (mutating) → validation → admission (validating) → storage
//! (see `crate::admission`). These are plain async functions over a
//! [`Handle`], run on the asking task (`registry::requests`).
//!
//! - `handle.rs`: what the flow works on, and the shapes of its answers;
//! - `create.rs`, `update.rs`, `patch.rs`: the writes;
//! - `deletion.rs`, `listing.rs`: deletes and lists;
//! - `claims.rs`: the claim step of kinds with unique values;
//! - `admit.rs`: where admission is called.

#[cfg(test)]
mod admission_tests;
mod admit;
mod claims;
mod create;
pub mod deletion;
mod handle;
mod listing;
mod patch;
#[cfg(test)]
pub(crate) mod tests;
mod update;
mod write;

use serde_json::Value;

use crate::error::ApiError;

pub use create::create;
pub use deletion::{delete, delete_collection};
pub use handle::{render, Handle, NamespaceContents, Page, Part, Reply};
pub use listing::{check_fields, encode_token, list, list_metadata, matches};
pub use patch::{patch, update};

pub async fn get(h: &Handle, namespace: &str, name: &str, part: Part) -> Result<Value, ApiError> {
    let stored = h.read(namespace, name).await?;
    Ok(render(h.strategy.as_ref(), stored.object, part))
}
