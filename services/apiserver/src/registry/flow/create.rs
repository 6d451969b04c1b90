//! Create: metadata the server sets, defaults, admission, validation,
//! and the write (with its claims for kinds with unique values).

use serde_json::{json, Value};

use super::claims::{self, Failure};
use super::handle::{Handle, Part, Reply};
use super::write::{admitted, check_requester, writer};
use crate::admission::Operation;
use crate::error::ApiError;
use crate::object::managed_fields;
use crate::object::meta;
use crate::object::time::now_rfc3339;
use crate::registry::options::WriteOptions;
use crate::storage::StorageError;

pub async fn create(
    h: &Handle,
    namespace: &str,
    body: Value,
    options: WriteOptions,
) -> Result<Reply, ApiError> {
    create_as(h, namespace, body, options, true).await
}

/// A create; `record` says whether it records its manager's fields (an
/// apply that creates has recorded them already).
pub(super) async fn create_as(
    h: &Handle,
    namespace: &str,
    body: Value,
    options: WriteOptions,
    record: bool,
) -> Result<Reply, ApiError> {
    check_new(h, namespace, &body)?;
    let mut obj = h.decode(&body, &options)?;
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
    if let Some(unique) = h.def().unique {
        unique.allocate(&mut obj, None);
    }
    h.validate(&obj, None)?;
    check_requester(h, &options, &obj, None)?;
    let name = meta::name(&obj).to_string();
    h.admit_validated(&write, &name, Some(&obj), None).await?;
    let reply = |body| write.reply(201, body);
    if options.dry_run {
        return Ok(reply(obj));
    }
    let key = h.key(namespace, &name);
    match store_new(h, &key, &unpicked, obj).await {
        Ok(obj) => Ok(reply(obj)),
        Err(Failure::Store(StorageError::Exists(_))) => {
            own_retried_create(h, namespace, &name, &unpicked).await
        }
        Err(failure) => Err(h.claim_error(&name, failure)),
    }
}

/// What a create's body may not say: another namespace than the
/// request's, or a resourceVersion.
fn check_new(h: &Handle, namespace: &str, body: &Value) -> Result<(), ApiError> {
    h.check_type(body)?;
    let body_ns = meta::namespace(body);
    if h.def().namespaced && !body_ns.is_empty() && body_ns != namespace {
        return Err(ApiError::BadRequest(
            "the namespace of the provided object does not match the namespace sent on the request"
                .into(),
        ));
    }
    if !meta::resource_version(body).is_empty() {
        return Err(ApiError::BadRequest(
            "resourceVersion should not be set on objects to be created".into(),
        ));
    }
    Ok(())
}

/// Writes a new object: with its claims for a kind with unique values
/// (picking again while a pick collides), else as it is. The object as
/// written, with its resourceVersion.
async fn store_new(h: &Handle, key: &str, unpicked: &Value, obj: Value) -> Result<Value, Failure> {
    let (mut obj, revision) = match h.def().unique {
        Some(unique) => claims::create(h, unique, key, unpicked, obj).await?,
        None => {
            let written = h.store.create(key, &obj, h.expiry).await;
            let revision = written.map_err(Failure::Store)?;
            (obj, revision)
        }
    };
    meta::set_resource_version(&mut obj, revision);
    Ok(obj)
}

/// A create that reports "exists" may be our own write whose first answer
/// was lost (a store leader change); the uid tells.
async fn own_retried_create(
    h: &Handle,
    namespace: &str,
    name: &str,
    ours: &Value,
) -> Result<Reply, ApiError> {
    let existing = match h.read(namespace, name).await {
        Ok(existing) => existing,
        // Deleted since the store said it exists: still a create that
        // found the name taken, as kube-apiserver answers it.
        Err(ApiError::NotFound(_)) => return Err(ApiError::AlreadyExists(h.def().target(name))),
        Err(other) => return Err(other),
    };
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

/// `generateName` + 5 characters from Kubernetes' vowel-free alphabet.
fn generate_name(base: &str) -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let suffix: String = (0..5)
        .map(|_| ALPHABET[rand::random_range(0..ALPHABET.len())] as char)
        .collect();
    format!("{base}{suffix}")
}
