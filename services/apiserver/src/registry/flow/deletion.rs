//! Deletion as Kubernetes does it. An object goes at once, unless
//! something must happen first; then it is marked (deletionTimestamp) and
//! goes when that is done:
//! - finalizers: their owners remove them with updates;
//! - propagationPolicy Foreground or Orphan: the garbage collector
//!   (in `capstan-controller-manager`) removes the dependents or lets go
//!   of them, then the `foregroundDeletion` or `orphan` finalizer;
//! - a grace period (the kind's `Deletion::grace_period`, a pod on a
//!   node's): kubelet's part, the simulated nodes', or for a node that
//!   does not exist the controller manager's pod termination, when it ends;
//! - a kind that holds contents (namespaces): they are deleted first.

use serde_json::{json, Value};

use super::admit::Admitted;
use super::claims;
use super::handle::{Handle, Part, Reply};
use super::listing::list;
use crate::admission::Operation;
use crate::error::ApiError;
use crate::object::meta;
use crate::object::time::{now_rfc3339, rfc3339_in};
use crate::registry::options::{DeleteOptions, ListOptions};
use crate::storage::{StorageError, Stored};

pub const FOREGROUND: &str = "foregroundDeletion";
pub const ORPHAN: &str = "orphan";

/// What a delete request does to the object as it is now.
#[derive(Debug, PartialEq)]
enum Plan {
    Remove,
    /// Write this marked object and keep it.
    Mark(Value),
}

fn add_finalizer(obj: &mut Value, finalizer: &str) {
    let metadata = meta::metadata_mut(obj);
    let list = metadata.entry("finalizers").or_insert_with(|| json!([]));
    if let Some(list) = list.as_array_mut() {
        if !list.iter().any(|f| f == finalizer) {
            list.push(finalizer.into());
        }
    }
}

/// Decides, without side effects, what deleting `obj` means.
fn plan(h: &Handle, obj: &Value, options: &DeleteOptions) -> Plan {
    let mut marked = obj.clone();
    match options.propagation.as_deref() {
        Some("Foreground") => add_finalizer(&mut marked, FOREGROUND),
        Some("Orphan") => add_finalizer(&mut marked, ORPHAN),
        _ => {}
    }
    let rules = h.def().deletion;
    for finalizer in rules.finalizers {
        add_finalizer(&mut marked, finalizer);
    }
    let deleting = !obj["metadata"]["deletionTimestamp"].is_null();
    let grace = rules
        .grace_period
        .map_or(0, |grace| grace(obj, options.grace_period));
    let held = rules.holds_contents || meta::has_finalizers(&marked);
    if !held && grace == 0 {
        return Plan::Remove;
    }
    if !deleting || shortens(obj, grace) {
        let at = if grace > 0 {
            rfc3339_in(grace)
        } else {
            now_rfc3339()
        };
        let metadata = meta::metadata_mut(&mut marked);
        metadata.insert("deletionTimestamp".into(), at.into());
        metadata.insert("deletionGracePeriodSeconds".into(), grace.into());
        if grace > 0 {
            let generation = obj["metadata"]["generation"].as_i64().unwrap_or(0) + 1;
            metadata.insert("generation".into(), generation.into());
        }
    }
    h.strategy.prepare_for_delete(&mut marked);
    Plan::Mark(marked)
}

/// A second delete may only shorten a grace period that is running.
fn shortens(obj: &Value, grace: i64) -> bool {
    let running = obj["metadata"]["deletionGracePeriodSeconds"].as_i64();
    running.is_some_and(|r| grace < r)
}

pub async fn delete(
    h: &Handle,
    namespace: &str,
    name: &str,
    options: DeleteOptions,
) -> Result<Reply, ApiError> {
    // The watch cache's copy first (kube's cached existing object): what
    // is decided on it stands only when the store's write agrees, so a
    // refusal, a no-op or a dry run on it is decided again on a read.
    let mut suggested = h.store.suggestion(&h.key(namespace, name));
    loop {
        let read = suggested.is_none();
        let current = match suggested.take() {
            Some(copy) => copy,
            None => h.read(namespace, name).await?,
        };
        match delete_from(h, namespace, name, &options, current, read).await {
            Ok(Attempt::Done(written)) => return written,
            Ok(Attempt::Again) => continue,
            Err(_) if !read => continue,
            Err(refused) => return Err(refused),
        }
    }
}

/// How one attempt of a delete ended, when it was not refused.
enum Attempt {
    /// The write was made (or failed in the store: not tried again).
    Done(Result<Reply, ApiError>),
    /// Start over from the store's copy.
    Again,
}

/// One attempt of a delete from `current` (`read`: as the store has it
/// now); an error is a refusal of the request on `current`.
async fn delete_from(
    h: &Handle,
    namespace: &str,
    name: &str,
    options: &DeleteOptions,
    current: Stored,
    read: bool,
) -> Result<Attempt, ApiError> {
    check_preconditions(h, &current, options)?;
    let write = Admitted {
        operation: Operation::Delete,
        namespace,
        part: Part::Main,
        dry_run: options.dry_run,
        user: &options.user,
        feedback: options.feedback.clone(),
    };
    h.admit_validated(&write, name, None, Some(&current.object))
        .await?;
    let (warnings, annotations) = (write.feedback.warnings(), write.feedback.annotations());
    let reply = |body| Reply {
        code: 200,
        body,
        warnings,
        annotations,
    };
    let plan = plan(h, &current.object, options);
    let unchanged = matches!(&plan, Plan::Mark(marked) if *marked == current.object);
    if (options.dry_run || unchanged) && !read {
        return Ok(Attempt::Again);
    }
    if options.dry_run {
        return Ok(Attempt::Done(Ok(reply(match plan {
            Plan::Remove => current.object,
            Plan::Mark(marked) => marked,
        }))));
    }
    let key = h.key(namespace, name);
    let written = match &plan {
        Plan::Remove => claims::delete(h, &key, &current.object, current.mod_revision).await,
        Plan::Mark(_) if unchanged => Ok(current.mod_revision),
        Plan::Mark(marked) => h.store.update(&key, marked, current.mod_revision).await,
    };
    let revision = match written {
        Ok(revision) => revision,
        Err(StorageError::Conflict) => return Ok(Attempt::Again),
        Err(e) => return Ok(Attempt::Done(Err(h.storage_error(name, e)))),
    };
    Ok(Attempt::Done(Ok(reply(match plan {
        // As kube-apiserver: the object as it was, at the deletion's
        // resourceVersion (the one its DELETED event carries).
        Plan::Remove => {
            let mut gone = current.object;
            meta::set_resource_version(&mut gone, revision);
            gone
        }
        Plan::Mark(mut marked) => {
            meta::set_resource_version(&mut marked, revision);
            if h.def().deletion.holds_contents {
                spawn_namespace_cleanup(h, name);
            }
            marked
        }
    }))))
}

fn check_preconditions(
    h: &Handle,
    current: &Stored,
    options: &DeleteOptions,
) -> Result<(), ApiError> {
    let conflict = |what: &str, want: &str, have: &str| {
        let message = format!(
            "Precondition failed: {what} in precondition: {want}, {what} in object meta: {have}"
        );
        Err(ApiError::Conflict(
            h.strategy.def().target(meta::name(&current.object)),
            message,
        ))
    };
    if let Some(uid) = &options.uid {
        let have = current.object["metadata"]["uid"].as_str().unwrap_or("");
        if uid != have {
            return conflict("UID", uid, have);
        }
    }
    if let Some(rv) = &options.resource_version {
        if *rv != current.mod_revision.to_string() {
            return conflict("ResourceVersion", rv, &current.mod_revision.to_string());
        }
    }
    Ok(())
}

fn spawn_namespace_cleanup(h: &Handle, name: &str) {
    let (handle, name) = (h.clone(), name.to_string());
    actix_rt::spawn(async move {
        if let Err(err) = finish_namespace(&handle, &name).await {
            tracing::warn!(namespace = %name, %err, "namespace cleanup failed; it is retried");
        }
    });
}

/// Deletes a terminating namespace's contents through each type's own
/// deletion (so their finalizers and claims are honoured), and the
/// namespace itself once nothing is left in it. Returns whether it went;
/// a namespace whose contents are still held is tried again later.
pub async fn finish_namespace(h: &Handle, name: &str) -> Result<bool, ApiError> {
    let mut left = 0;
    for contents in &h.namespace_contents.types() {
        let everything = ListOptions::default();
        delete_collection(contents, Some(name), everything, DeleteOptions::default()).await?;
        let page = list(
            contents,
            Some(name),
            ListOptions {
                limit: 1,
                ..Default::default()
            },
        )
        .await?;
        left += page.items.len();
    }
    if left > 0 {
        return Ok(false);
    }
    let Some(current) = h
        .store
        .get(&h.key("", name))
        .await
        .map_err(|e| h.storage_error(name, e))?
    else {
        return Ok(true);
    };
    let marked = !current.object["metadata"]["deletionTimestamp"].is_null();
    if !marked || meta::has_finalizers(&current.object) {
        return Ok(false);
    }
    match h
        .store
        .delete_at(&h.key("", name), current.mod_revision)
        .await
    {
        Ok(_) | Err(StorageError::Conflict) => Ok(true),
        Err(e) => Err(h.storage_error(name, e)),
    }
}

pub async fn delete_collection(
    h: &Handle,
    namespace: Option<&str>,
    list_options: ListOptions,
    options: DeleteOptions,
) -> Result<Vec<Value>, ApiError> {
    let page = list(
        h,
        namespace,
        ListOptions {
            limit: 0,
            continue_token: None,
            ..list_options
        },
    )
    .await?;
    let mut deleted = Vec::new();
    for item in page.items {
        match delete(h, item.namespace(), item.name(), options.clone()).await {
            Ok(reply) => deleted.push(reply.body),
            Err(ApiError::NotFound(_)) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(deleted)
}
