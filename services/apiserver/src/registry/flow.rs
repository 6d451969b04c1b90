//! The generic flow every resource type runs: create, guaranteed update
//! (read, change, compare-and-swap, retry), patch, delete and list, with
//! the type's strategy deciding the type-specific parts (deletion lives in
//! `deletion`, lists in `listing`). A write goes decode → defaults (the
//! strategy's `prepare_for_*`) → admission (mutating) → validation →
//! admission (validating) → storage (see `crate::admission`). These are plain
//! async functions over a [`Handle`]; the resource actor runs them as
//! futures so it never waits on the store.

use serde_json::{json, Value};

use super::admit::Admitted;
use super::claims::{self, ClaimFailure};
pub use super::deletion::{delete, delete_collection};
pub use super::handle::{render, Handle, Page, Part, Reply};
pub use super::listing::{check_fields, encode_token, list, list_metadata, matches};
use super::options::WriteOptions;
use crate::admission::Operation;
use crate::error::ApiError;
use crate::object::apply;
use crate::object::managed_fields::{self, Writer};
use crate::object::meta;
use crate::object::patch::{self, PatchType};
use crate::object::time::now_rfc3339;
use crate::storage::{StorageError, Stored};

/// `generateName` + 5 characters from Kubernetes' vowel-free alphabet.
fn generate_name(base: &str) -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let suffix: String = (0..5)
        .map(|_| ALPHABET[rand::random_range(0..ALPHABET.len())] as char)
        .collect();
    format!("{base}{suffix}")
}

pub async fn get(h: &Handle, namespace: &str, name: &str, part: Part) -> Result<Value, ApiError> {
    let stored = h.read(namespace, name).await?;
    Ok(render(h.strategy.as_ref(), stored.object, part))
}

pub async fn create(
    h: &Handle,
    namespace: &str,
    body: Value,
    options: WriteOptions,
) -> Result<Reply, ApiError> {
    create_as(h, namespace, body, options, true).await
}

/// A write as admission sees it (see `admit.rs`).
fn admitted<'a>(
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
fn writer<'a>(
    h: &'a Handle,
    options: &'a WriteOptions,
    part: Part,
    api_version: &'a str,
) -> Writer<'a> {
    Writer {
        manager: options.manager(),
        api_version,
        subresource: match part {
            Part::Main => "",
            Part::Status => "status",
            Part::Scale => "scale",
        },
        has_status: h.def().has_status(),
        shape: h.strategy.shape(),
    }
}

/// A create; `record` says whether it records its manager's fields (an
/// apply that creates has recorded them already).
async fn create_as(
    h: &Handle,
    namespace: &str,
    body: Value,
    options: WriteOptions,
    record: bool,
) -> Result<Reply, ApiError> {
    h.check_type(&body)?;
    let body_ns = meta::namespace(&body);
    if h.def().namespaced && !body_ns.is_empty() && body_ns != namespace {
        return Err(ApiError::BadRequest(
            "the namespace of the provided object does not match the namespace sent on the request"
                .into(),
        ));
    }
    if !meta::resource_version(&body).is_empty() {
        return Err(ApiError::BadRequest(
            "resourceVersion should not be set on objects to be created".into(),
        ));
    }
    let mut obj = h.decode(&body, &options)?;
    let mut warnings = Vec::new();
    prepare_create_metadata(h, &mut obj, namespace);
    h.strategy.prepare_for_create(&mut obj);
    let write = admitted(Operation::Create, namespace, Part::Main, &options);
    h.admit(&write, &mut obj, None).await?;
    if record {
        let api_version = h.def().api_version();
        let writer = writer(h, &options, Part::Main, &api_version);
        managed_fields::record_update(&json!({}), &mut obj, &writer);
    }
    let unpicked = obj.clone();
    h.strategy.allocate(&mut obj, None);
    h.validate(&obj, None)?;
    check_requester(h, &options, &obj, None)?;
    let name = meta::name(&obj).to_string();
    h.admit_validated(&write, &name, Some(&obj), None).await?;
    warnings.extend(write.feedback.warnings());
    h.check_namespace(namespace, &name).await?;
    if options.dry_run {
        return Ok(Reply {
            code: 201,
            body: obj,
            warnings,
            annotations: write.feedback.annotations(),
        });
    }
    let key = h.key(namespace, &name);
    let obj = match claims::create(h, &key, &unpicked, obj).await {
        Ok((mut obj, revision)) => {
            meta::set_resource_version(&mut obj, revision);
            obj
        }
        Err(ClaimFailure::Store(StorageError::Exists(_))) => {
            return own_retried_create(h, namespace, &name, &unpicked).await
        }
        Err(failure) => return Err(h.claim_error(&name, failure)),
    };
    Ok(Reply {
        code: 201,
        body: obj,
        warnings,
        annotations: write.feedback.annotations(),
    })
}

/// A create that reports "exists" may be our own write whose first answer
/// was lost (a store leader change); the uid tells.
async fn own_retried_create(
    h: &Handle,
    namespace: &str,
    name: &str,
    ours: &Value,
) -> Result<Reply, ApiError> {
    let existing = h.read(namespace, name).await?;
    if existing.object["metadata"]["uid"] == ours["metadata"]["uid"] {
        return Ok(Reply {
            code: 201,
            body: existing.object,
            warnings: Vec::new(),
            annotations: Default::default(),
        });
    }
    Err(ApiError::AlreadyExists(h.def().target(name)))
}

fn prepare_create_metadata(h: &Handle, obj: &mut Value, namespace: &str) {
    let def = h.def();
    // Only objects with a spec track generation (ConfigMaps do not).
    let has_spec = obj.get("spec").is_some();
    obj["kind"] = def.kind.into();
    obj["apiVersion"] = def.api_version().into();
    let metadata = meta::metadata_mut(obj);
    if metadata
        .get("name")
        .and_then(Value::as_str)
        .is_none_or(str::is_empty)
    {
        if let Some(base) = metadata
            .get("generateName")
            .and_then(Value::as_str)
            .filter(|b| !b.is_empty())
        {
            metadata.insert("name".into(), generate_name(base).into());
        }
    }
    if def.namespaced {
        metadata.insert("namespace".into(), namespace.into());
    } else {
        metadata.remove("namespace");
    }
    metadata.insert("uid".into(), uuid::Uuid::new_v4().to_string().into());
    metadata.insert("creationTimestamp".into(), now_rfc3339().into());
    if has_spec {
        metadata.insert("generation".into(), 1.into());
    }
    for server_owned in [
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "selfLink",
    ] {
        metadata.remove(server_owned);
    }
}

/// The read-modify-write primitive (Kubernetes' GuaranteedUpdate): read
/// the current object, let `change` build the new one, write it with a
/// compare on mod_revision, and start over if someone wrote in between,
/// unless the caller pinned a resourceVersion, which then is a Conflict.
/// `record`: the write records its manager's fields as an Update (an
/// apply brings its managedFields in the proposed object instead).
async fn guaranteed_update<F>(
    h: &Handle,
    namespace: &str,
    name: &str,
    part: Part,
    options: &WriteOptions,
    record: bool,
    change: F,
) -> Result<Reply, ApiError>
where
    F: Fn(&Stored) -> Result<(Value, bool), ApiError>,
{
    loop {
        let current = h.read(namespace, name).await?;
        let (proposed, pinned) = change(&current)?;
        let proposed_rv = meta::resource_version(&proposed);
        if pinned && proposed_rv != current.mod_revision.to_string() {
            return Err(ApiError::stale(h.def().target(name)));
        }
        if meta::name(&proposed) != name && !meta::name(&proposed).is_empty() {
            return Err(ApiError::BadRequest(format!(
                "the name of the object ({}) does not match the name on the URL ({name})",
                meta::name(&proposed)
            )));
        }
        h.check_type(&proposed)?;
        let applied_fields = proposed.pointer("/metadata/managedFields").cloned();
        let decoded = h.decode(&proposed, options)?;
        let mut warnings = Vec::new();
        let mut new = prepare_update(h, decoded, &current.object, part);
        let write = admitted(Operation::Update, namespace, part, options);
        h.admit(&write, &mut new, Some(&current.object)).await?;
        record_fields(
            h,
            options,
            part,
            record,
            applied_fields,
            &current.object,
            &mut new,
        );
        let requested = h.strategy.claims(&new);
        h.strategy.allocate(&mut new, Some(&current.object));
        if same_content(&new, &current.object) && !current.stale {
            warnings.extend(write.feedback.warnings());
            return Ok(Reply {
                code: 200,
                body: render(h.strategy.as_ref(), current.object, part),
                warnings,
                annotations: write.feedback.annotations(),
            });
        }
        h.validate(&new, Some(&current.object))?;
        check_requester(h, options, &new, Some(&current.object))?;
        h.admit_validated(&write, name, Some(&new), Some(&current.object))
            .await?;
        warnings.extend(write.feedback.warnings());
        if options.dry_run {
            return Ok(Reply {
                code: 200,
                body: render(h.strategy.as_ref(), new, part),
                warnings,
                annotations: write.feedback.annotations(),
            });
        }
        let key = h.key(namespace, name);
        if meta::has_finalizers(&current.object)
            && !meta::has_finalizers(&new)
            && !new["metadata"]["deletionTimestamp"].is_null()
        {
            // The last finalizer of a deleting object is gone: it goes.
            match claims::delete(h, &key, &current.object, current.mod_revision).await {
                Ok(_) => {
                    return Ok(Reply {
                        code: 200,
                        body: render(h.strategy.as_ref(), new, part),
                        warnings,
                        annotations: write.feedback.annotations(),
                    })
                }
                Err(StorageError::Conflict) if !pinned => continue,
                Err(e) => return Err(h.storage_error(name, e)),
            }
        }
        let written = claims::update(
            h,
            &key,
            &requested,
            &new,
            &current.object,
            current.mod_revision,
        );
        match written.await {
            Ok(revision) => {
                let mut new = new;
                meta::set_resource_version(&mut new, revision);
                return Ok(Reply {
                    code: 200,
                    body: render(h.strategy.as_ref(), new, part),
                    warnings,
                    annotations: write.feedback.annotations(),
                });
            }
            Err(ClaimFailure::Store(StorageError::Conflict)) if !pinned => continue,
            Err(ClaimFailure::Repick) => continue,
            Err(failure) => return Err(h.claim_error(name, failure)),
        }
    }
}

/// The strategy's rules about who may write `obj` (see
/// `Strategy::check_requester`).
fn check_requester(
    h: &Handle,
    options: &WriteOptions,
    obj: &Value,
    old: Option<&Value>,
) -> Result<(), ApiError> {
    match &options.authorizer {
        Some(authorizer) => {
            h.strategy
                .check_requester(obj, old, (&options.user, authorizer.as_ref()))
        }
        None => Ok(()),
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
    let strip = |v: &Value| {
        let mut v = v.clone();
        meta::metadata_mut(&mut v).remove("resourceVersion");
        v
    };
    strip(a) == strip(b)
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
    if new.get("spec").is_some() && spec_of(&new) != spec_of(old) {
        let generation = old_meta["generation"].as_i64().unwrap_or(0) + 1;
        meta::metadata_mut(&mut new).insert("generation".into(), generation.into());
    }
    h.strategy.prepare_for_update(&mut new, old);
    new
}

/// Everything but metadata and status: what bumps `generation`.
fn spec_of(obj: &Value) -> Value {
    let mut obj = obj.clone();
    if let Some(map) = obj.as_object_mut() {
        map.remove("metadata");
        map.remove("status");
    }
    obj
}

pub async fn update(
    h: &Handle,
    namespace: &str,
    name: &str,
    part: Part,
    body: Value,
    options: WriteOptions,
) -> Result<Reply, ApiError> {
    let pinned = !meta::resource_version(&body).is_empty();
    guaranteed_update(
        h,
        namespace,
        name,
        part,
        &options,
        true,
        |current| match part {
            Part::Scale => Ok((with_replicas(h, &current.object, &body)?, pinned)),
            _ => Ok((body.clone(), pinned)),
        },
    )
    .await
}

/// The parent object with the replicas a Scale asks for.
fn with_replicas(h: &Handle, parent: &Value, scale: &Value) -> Result<Value, ApiError> {
    let replicas = scale["spec"]["replicas"].as_i64().unwrap_or(0);
    let mut obj = parent.clone();
    h.strategy.set_replicas(&mut obj, replicas);
    if let Some(rv) = scale["metadata"]["resourceVersion"]
        .as_str()
        .filter(|rv| !rv.is_empty())
    {
        meta::metadata_mut(&mut obj).insert("resourceVersion".into(), rv.into());
    }
    Ok(obj)
}

pub async fn patch(
    h: &Handle,
    namespace: &str,
    name: &str,
    part: Part,
    kind: PatchType,
    patch: Value,
    options: WriteOptions,
) -> Result<Reply, ApiError> {
    options.check_patch(kind == PatchType::Apply)?;
    if kind == PatchType::Apply {
        return apply_patch(h, namespace, name, part, &patch, options).await;
    }
    let pinned = patch
        .pointer("/metadata/resourceVersion")
        .is_some_and(|rv| !rv.is_null());
    guaranteed_update(h, namespace, name, part, &options, true, |current| {
        let base = render(h.strategy.as_ref(), current.object.clone(), part);
        let patched = patch::apply(kind, &base, &patch)?;
        let rv_changed = meta::resource_version(&patched) != current.mod_revision.to_string();
        let new = match part {
            Part::Scale => with_replicas(h, &current.object, &patched)?,
            _ => patched,
        };
        Ok((new, pinned || rv_changed))
    })
    .await
}

/// Server-side apply: merges the configuration into the object (see
/// `object::apply`), creating it when there is none.
async fn apply_patch(
    h: &Handle,
    namespace: &str,
    name: &str,
    part: Part,
    body: &Value,
    options: WriteOptions,
) -> Result<Reply, ApiError> {
    let config = applied_config(h, name, part, body, &options)?;
    let api_version = h.def().api_version();
    let writer = writer(h, &options, part, &api_version);
    let force = options.force.unwrap_or(false);
    let pinned = !meta::resource_version(&config).is_empty();
    loop {
        match h.read(namespace, name).await {
            Ok(_) => break,
            Err(ApiError::NotFound(_)) if part == Part::Main => {
                let mut empty = json!({"apiVersion": api_version, "kind": h.def().kind,
                    "metadata": {"name": name}});
                if h.def().namespaced {
                    empty["metadata"]["namespace"] = namespace.into();
                }
                let obj = apply::apply(&empty, &config, &writer, force)?;
                match create_as(h, namespace, obj, options.clone(), false).await {
                    // Created meanwhile by someone else: apply to theirs.
                    Err(ApiError::AlreadyExists(_)) => continue,
                    Ok(reply) => return Ok(reply),
                    Err(e) => return Err(e),
                }
            }
            Err(e) => return Err(e),
        }
    }
    let reply = guaranteed_update(h, namespace, name, part, &options, false, |current| {
        let merged = apply::apply(&current.object, &config, &writer, force)?;
        Ok((merged, pinned))
    });
    reply.await
}

/// The applied configuration, checked and in the type's canonical form
/// (unknown fields dropped as `fieldValidation` says); for `/scale`, the
/// parent's `spec.replicas` it asks for.
fn applied_config(
    h: &Handle,
    name: &str,
    part: Part,
    body: &Value,
    options: &WriteOptions,
) -> Result<Value, ApiError> {
    let def = h.def();
    if !body.is_object() {
        return Err(ApiError::BadRequest(
            "an apply patch must be an object".into(),
        ));
    }
    if body
        .pointer("/metadata/managedFields")
        .is_some_and(|m| !m.is_null())
    {
        return Err(ApiError::BadRequest(
            "metadata.managedFields must be nil".into(),
        ));
    }
    let mut config = match part {
        Part::Scale => {
            let mut parent = json!({"apiVersion": def.api_version(), "kind": def.kind, "metadata": {"name": name}});
            if let Some(replicas) = body.pointer("/spec/replicas") {
                parent["spec"] = json!({ "replicas": replicas });
            }
            parent
        }
        _ => body.clone(),
    };
    for field in ["apiVersion", "kind"] {
        if config[field].as_str().is_none_or(str::is_empty) {
            return Err(ApiError::BadRequest(format!(
                "{field} is required in an apply patch (for {} {})",
                def.kind,
                def.api_version()
            )));
        }
    }
    h.check_type(&config)?;
    if meta::name(&config).is_empty() {
        meta::metadata_mut(&mut config).insert("name".into(), name.into());
    }
    let typed = h.decode(&config, options)?;
    Ok(apply::restrict_to_typed(&typed, &config))
}
