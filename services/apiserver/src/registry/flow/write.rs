//! What the writes share: the write as admission sees it, who its fields
//! belong to, and the kind's rules about who may write.

use serde_json::Value;

use super::admit::Admitted;
use super::handle::{Handle, Part};
use crate::admission::Operation;
use crate::error::ApiError;
use crate::object::managed_fields::Writer;
use crate::registry::options::WriteOptions;

/// A write as admission sees it (see `admit.rs`).
pub(super) fn admitted<'a>(
    operation: Operation,
    namespace: &'a str,
    part: Part,
    options: &'a WriteOptions,
) -> Admitted<'a> {
    Admitted {
        operation,
        namespace,
        part,
        dry_run: options.dry_run,
        user: &options.user,
        feedback: options.feedback.clone(),
    }
}

/// Who a write's fields belong to (see `object::managed_fields`).
pub(super) fn writer<'a>(
    h: &'a Handle,
    options: &'a WriteOptions,
    part: Part,
    api_version: &'a str,
) -> Writer<'a> {
    Writer {
        manager: options.manager(),
        api_version,
        subresource: part.subresource(),
        has_status: h.def().has_status(),
        shape: h.strategy.shape(),
    }
}

/// The kind's rules about who may write `obj` (its `write_check`), for
/// requests; the server's own writes are trusted.
pub(super) fn check_requester(
    h: &Handle,
    options: &WriteOptions,
    obj: &Value,
    old: Option<&Value>,
) -> Result<(), ApiError> {
    match (h.def().write_check, &options.authorizer) {
        (Some(check), Some(authorizer)) => check(obj, old, (&options.user, authorizer.as_ref())),
        _ => Ok(()),
    }
}
