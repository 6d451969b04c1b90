//! The read-modify-write of every update, on the storage's guaranteed
//! update.

use std::sync::Mutex;

use serde_json::Value;

use super::admit::Admitted;
use super::claims;
use super::handle::{render, Handle, Part, Reply};
use super::write::{admitted, check_requester, writer};
use crate::admission::Operation;
use crate::error::ApiError;
use crate::object::managed_fields;
use crate::object::meta;
use crate::registry::definition::Claim;
use crate::registry::options::WriteOptions;
use crate::storage::{GuaranteedUpdate, Preconditions, Proposed, StorageError, Stored};

/// The read-modify-write of every update (Kubernetes' GuaranteedUpdate,
/// [`storage::GuaranteedUpdate`]): read the current object, let `change`
/// build the new one, admit and validate it, and write it with a compare
/// on the revision read, starting over if someone wrote in between,
/// unless the caller pinned a resourceVersion, which then is a Conflict.
/// `record`: the write records its manager's fields as an Update (an
/// apply brings its managedFields in the proposed object instead).
pub(super) async fn guaranteed_update<F>(
    h: &Handle,
    namespace: &str,
    name: &str,
    part: Part,
    options: &WriteOptions,
    record: bool,
    change: F,
) -> Result<Reply, ApiError>
where
    F: Fn(&Stored) -> Result<(Value, bool), ApiError> + Sync,
{
    let update = Update {
        h,
        name,
        part,
        options,
        record,
        write: admitted(Operation::Update, namespace, part, options),
    };
    let key = h.key(namespace, name);
    let none = Preconditions::default();
    loop {
        let requested = Mutex::new(Vec::new());
        let propose = |current| update.propose(current, &change, &requested);
        let outcome = h.store.guaranteed_update(&key, &none, propose).await;
        let stop = match outcome {
            Ok(written) => return Ok(update.reply(written.object)),
            Err(stop) => stop,
        };
        match stop {
            Stop::Answer(reply) => return Ok(reply),
            Stop::Refused(err) => return Err(err),
            Stop::Emptied { current, new } => {
                // The last finalizer of a deleting object is gone: it goes.
                let deleted = claims::delete(h, &key, &current.object, current.mod_revision);
                match deleted.await {
                    Ok(_) => return Ok(update.reply(new)),
                    Err(StorageError::Conflict) => continue,
                    Err(e) => return Err(h.storage_error(name, e)),
                }
            }
            Stop::Store(StorageError::Taken(taken)) => {
                let requested = requested.into_inner().unwrap_or_else(|e| e.into_inner());
                match claims::refused(h, name, &requested, &taken) {
                    Some(err) => return Err(err),
                    // A value the server picked is taken: read and pick again.
                    None => continue,
                }
            }
            Stop::Store(e) => return Err(h.storage_error(name, e)),
        }
    }
}

/// Why an update's proposal ends before the write.
enum Stop {
    /// Nothing to write: the answer is this (a no-op, a dry run).
    Answer(Reply),
    Refused(ApiError),
    /// The proposal removes the last finalizer of a deleting object, which
    /// then goes instead.
    Emptied {
        current: Stored,
        new: Value,
    },
    Store(StorageError),
}

impl From<StorageError> for Stop {
    fn from(err: StorageError) -> Stop {
        Stop::Store(err)
    }
}

impl From<ApiError> for Stop {
    fn from(err: ApiError) -> Stop {
        Stop::Refused(err)
    }
}

/// One update request, as each attempt of it sees it.
struct Update<'a> {
    h: &'a Handle,
    name: &'a str,
    part: Part,
    options: &'a WriteOptions,
    record: bool,
    write: Admitted<'a>,
}

impl Update<'_> {
    fn reply(&self, obj: Value) -> Reply {
        self.write
            .reply(200, render(self.h.strategy.as_ref(), obj, self.part))
    }

    /// What to write in place of `current`: the change, checked, with
    /// the kind's rules and admission applied, and the claims it takes
    /// and gives up (those it asked for go to `requested`).
    async fn propose<F>(
        &self,
        current: Stored,
        change: &F,
        requested: &Mutex<Vec<Claim>>,
    ) -> Result<Proposed, Stop>
    where
        F: Fn(&Stored) -> Result<(Value, bool), ApiError>,
    {
        let h = self.h;
        let (proposed, pinned) = change(&current)?;
        self.check_proposed(&proposed, pinned, &current)?;
        let applied_fields = proposed.pointer("/metadata/managedFields").cloned();
        let decoded = h.decode(&proposed, self.options)?;
        let old = &current.object;
        let mut new = prepare_update(h, decoded, old, self.part);
        h.admit(&self.write, &mut new, Some(old)).await?;
        record_fields(
            h,
            self.options,
            self.part,
            self.record,
            applied_fields,
            old,
            &mut new,
        );
        if let Some(unique) = h.def().unique {
            *requested.lock().unwrap_or_else(|e| e.into_inner()) = unique.claims(&new);
            unique.allocate(&mut new, Some(old));
        }
        if same_content(&new, old) && !current.stale {
            return Err(Stop::Answer(self.reply(current.object)));
        }
        h.validate(&new, Some(old))?;
        check_requester(h, self.options, &new, Some(old))?;
        h.admit_validated(&self.write, self.name, Some(&new), Some(old))
            .await?;
        if self.options.dry_run {
            return Err(Stop::Answer(self.reply(new)));
        }
        let emptied = meta::has_finalizers(old) && !meta::has_finalizers(&new);
        if emptied && !new["metadata"]["deletionTimestamp"].is_null() {
            return Err(Stop::Emptied { current, new });
        }
        let (take, release) = claims::delta(h, &new, old);
        Ok(Proposed {
            object: new,
            take,
            release,
            ttl: h.expiry,
        })
    }

    /// A pinned resourceVersion must be the current one, the name the
    /// URL's, the kind the handle's.
    fn check_proposed(&self, proposed: &Value, pinned: bool, current: &Stored) -> Result<(), Stop> {
        let (h, name) = (self.h, self.name);
        if pinned && meta::resource_version(proposed) != current.mod_revision.to_string() {
            return Err(Stop::Refused(ApiError::stale(h.def().target(name))));
        }
        let named = meta::name(proposed);
        if named != name && !named.is_empty() {
            return Err(Stop::Refused(ApiError::BadRequest(format!(
                "the name of the object ({named}) does not match the name on the URL ({name})"
            ))));
        }
        h.check_type(proposed)?;
        Ok(())
    }
}

/// Puts the managedFields of a write into `new`: an Update's computed
/// from the change, an apply's as it computed them.
fn record_fields(
    h: &Handle,
    options: &WriteOptions,
    part: Part,
    record: bool,
    applied: Option<Value>,
    old: &Value,
    new: &mut Value,
) {
    if record {
        let api_version = h.def().api_version();
        managed_fields::record_update(old, new, &writer(h, options, part, &api_version));
    } else {
        let metadata = meta::metadata_mut(new);
        match applied {
            Some(fields) => metadata.insert("managedFields".into(), fields),
            None => metadata.remove("managedFields"),
        };
    }
    managed_fields::keep_old_times(old, new);
}

/// Equal apart from resourceVersion: a no-op write stores nothing.
fn same_content(a: &Value, b: &Value) -> bool {
    meta::equal_but_for(a, b, &["resourceVersion"])
}

/// Keeps what a write through `part` may not change.
fn prepare_update(h: &Handle, mut new: Value, old: &Value, part: Part) -> Value {
    if part == Part::Status {
        let mut kept = old.clone();
        kept["status"] = new["status"].clone();
        return kept;
    }
    if h.def().has_status() {
        // An absent status stays absent (not null: a schema may refuse null).
        match old.get("status") {
            Some(status) => new["status"] = status.clone(),
            None => {
                new.as_object_mut().map(|map| map.remove("status"));
            }
        }
    }
    let old_meta = &old["metadata"];
    let metadata = meta::metadata_mut(&mut new);
    for field in [
        "name",
        "namespace",
        "uid",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "generation",
    ] {
        match &old_meta[field] {
            Value::Null => metadata.remove(field),
            value => metadata.insert(field.into(), value.clone()),
        };
    }
    // Everything but metadata and status is what bumps `generation`.
    let unchanged = |new: &Value| meta::equal_leaving_out(new, old, &["metadata", "status"]);
    if new.get("spec").is_some() && !unchanged(&new) {
        let generation = old_meta["generation"].as_i64().unwrap_or(0) + 1;
        meta::metadata_mut(&mut new).insert("generation".into(), generation.into());
    }
    h.strategy.prepare_for_update(&mut new, old);
    new
}
