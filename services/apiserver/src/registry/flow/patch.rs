//! Update (PUT), patch, and server-side apply, over the guaranteed
//! update; for `/scale`, the parent object's replicas.

use serde_json::{json, Value};

use super::create::create_as;
use super::handle::{render, Handle, Part, Reply};
use super::update::guaranteed_update;
use super::write::writer;
use crate::auth::{Attributes, Decision};
use crate::error::ApiError;
use crate::object::apply;
use crate::object::meta;
use crate::object::patch::{self, PatchType};
use crate::registry::options::WriteOptions;

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
                authorize_create(h, namespace, name, &options)?;
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

/// An apply that creates is a create, and the chain authorized only a
/// patch: as kube's patch handler, ask the authorizer about `create` too
/// (else `patch` rights would create objects, pods running as any
/// ServiceAccount among them). The server's own writes carry no
/// authorizer and are trusted.
fn authorize_create(
    h: &Handle,
    namespace: &str,
    name: &str,
    options: &WriteOptions,
) -> Result<(), ApiError> {
    let Some(authorizer) = &options.authorizer else {
        return Ok(());
    };
    let def = h.def();
    let attributes = Attributes::for_resource(&options.user, "create", def.group, def.resource)
        .with_namespace(namespace)
        .with_name(name);
    match authorizer.authorize(&attributes) {
        Decision::Allow => Ok(()),
        refused => Err(ApiError::Forbidden(attributes.forbidden(refused.reason()))),
    }
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
