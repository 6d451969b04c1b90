//! Keeps the configuration objects in place and the engine in step with
//! them, as kube's config producer and consumer do: the mandatory
//! objects are re-created whenever they are missing, the suggested ones
//! created when the server starts; both are set back to the server's
//! spec unless annotated `apf.kubernetes.io/autoupdate-spec: "false"`.
//! Whenever the objects change the engine takes them, and each
//! FlowSchema's Dangling condition says whether its level exists.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::flowcontrol::v1::{FlowSchema, PriorityLevelConfiguration};
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::{json, Value};

use crate::error::ApiError;
use crate::flowcontrol::bootstrap::{self, AUTO_UPDATE};
use crate::flowcontrol::config::SchemaStatus;
use crate::flowcontrol::FlowControl;
use crate::object::time::now_rfc3339;
use crate::registry::catalog::Entry;
use crate::registry::flow::Part;
use crate::registry::options::{ListOptions, WriteOptions};
use crate::registry::requests::{self, Create, Update};
use crate::registry::Catalog;

use super::flowschemas::GROUP;

/// How often the objects are looked at.
const PERIOD: Duration = Duration::from_secs(1);
/// kube's field managers for the two jobs.
const PRODUCER: &str = "api-priority-and-fairness-config-producer-v1";
const CONSUMER: &str = "api-priority-and-fairness-config-consumer-v1";

/// Runs until the process ends.
pub async fn run(catalog: Arc<Catalog>, engine: Arc<FlowControl>) {
    let mut seen = String::new();
    let mut first = true;
    loop {
        match pass(&catalog, &engine, first, &mut seen).await {
            Ok(()) => first = false,
            Err(err) => tracing::warn!(error = %err, "flow control configuration pass failed"),
        }
        tokio::time::sleep(PERIOD).await;
    }
}

/// One look: objects put back, the engine reconfigured if anything
/// changed since `seen`, conditions published.
async fn pass(
    catalog: &Catalog,
    engine: &FlowControl,
    first: bool,
    seen: &mut String,
) -> Result<(), ApiError> {
    let (Some(levels), Some(schemas)) = (
        entry(catalog, "prioritylevelconfigurations"),
        entry(catalog, "flowschemas"),
    ) else {
        return Ok(());
    };
    ensure(&levels, &bootstrap::mandatory_levels(), true).await?;
    ensure(&schemas, &bootstrap::mandatory_schemas(), true).await?;
    ensure(&levels, &bootstrap::suggested_levels(), first).await?;
    ensure(&schemas, &bootstrap::suggested_schemas(), first).await?;
    let stored_levels: Vec<(Value, PriorityLevelConfiguration)> = snapshot(&levels).await;
    let stored_schemas: Vec<(Value, FlowSchema)> = snapshot(&schemas).await;
    let fingerprint = fingerprint(
        stored_levels
            .iter()
            .map(|(v, _)| v)
            .chain(stored_schemas.iter().map(|(v, _)| v)),
    );
    if fingerprint == *seen {
        return Ok(());
    }
    let typed_levels: Vec<_> = stored_levels.into_iter().map(|(_, l)| l).collect();
    let typed_schemas: Vec<_> = stored_schemas.iter().map(|(_, s)| s.clone()).collect();
    let statuses = engine.configure(&typed_levels, &typed_schemas);
    publish_dangling(&schemas, &stored_schemas, &statuses).await?;
    *seen = fingerprint;
    Ok(())
}

fn entry(catalog: &Catalog, resource: &str) -> Option<Entry> {
    catalog.find(GROUP, "v1", resource).cloned()
}

/// The stored objects (a consistent list), as stored and typed; any
/// that does not read as its type is left out.
async fn snapshot<T: DeserializeOwned>(entry: &Entry) -> Vec<(Value, T)> {
    let list = requests::List {
        namespace: None,
        options: ListOptions::default(),
    };
    let objects = match entry.call(list).await {
        Ok(page) => page.items,
        _ => Vec::new(),
    };
    objects
        .iter()
        .filter_map(|o| {
            let value: Value = serde_json::from_str(o.json().get()).ok()?;
            let typed: T = serde_json::from_value(value.clone()).ok()?;
            Some((value, typed))
        })
        .collect()
}

/// Names and resourceVersions: changes whenever an object does.
fn fingerprint<'a>(objects: impl Iterator<Item = &'a Value>) -> String {
    let mut versions: Vec<String> = objects
        .map(|o| {
            format!(
                "{}@{}",
                o["metadata"]["name"], o["metadata"]["resourceVersion"]
            )
        })
        .collect();
    versions.sort();
    versions.join(",")
}

/// Creates what is missing of `wanted` (if `create`) and sets back the
/// spec of what may be updated.
async fn ensure<T: Serialize + Named>(
    entry: &Entry,
    wanted: &[T],
    create: bool,
) -> Result<(), ApiError> {
    let stored: Vec<(Value, Value)> = snapshot(entry).await;
    for object in wanted {
        let mut body =
            serde_json::to_value(object).map_err(|e| ApiError::Internal(e.to_string()))?;
        let def = entry.strategy.def();
        body["apiVersion"] = json!(def.api_version());
        body["kind"] = json!(def.kind);
        match stored
            .iter()
            .find(|(v, _)| v["metadata"]["name"] == object.name())
        {
            None if create => create_object(entry, body).await?,
            None => {}
            Some((current, _)) if updatable(current) && current["spec"] != body["spec"] => {
                let mut updated = current.clone();
                updated["spec"] = body["spec"].clone();
                write(entry, Part::Main, updated, PRODUCER).await?;
            }
            Some(_) => {}
        }
    }
    Ok(())
}

/// Unless a user said otherwise.
fn updatable(current: &Value) -> bool {
    current["metadata"]["annotations"][AUTO_UPDATE] != "false"
}

async fn create_object(entry: &Entry, body: Value) -> Result<(), ApiError> {
    let create = Create {
        namespace: String::new(),
        body,
        options: WriteOptions::by(PRODUCER),
    };
    match entry.call(create).await {
        Ok(_) | Err(ApiError::AlreadyExists(_)) => Ok(()),
        Err(err) => Err(err),
    }
}

/// An update conditional on the resourceVersion read; a conflict means
/// someone else wrote first and the next pass looks again.
async fn write(entry: &Entry, part: Part, body: Value, manager: &str) -> Result<(), ApiError> {
    let name = body["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let update = Update {
        namespace: String::new(),
        name,
        part,
        body,
        options: WriteOptions::by(manager),
    };
    match entry.call(update).await {
        Ok(_) | Err(ApiError::Conflict(..)) | Err(ApiError::NotFound(_)) => Ok(()),
        Err(err) => Err(err),
    }
}

/// Sets each schema's Dangling condition where it says otherwise.
async fn publish_dangling(
    entry: &Entry,
    stored: &[(Value, FlowSchema)],
    statuses: &[SchemaStatus],
) -> Result<(), ApiError> {
    for status in statuses {
        let Some((current, _)) = stored
            .iter()
            .find(|(v, _)| v["metadata"]["name"] == status.schema)
        else {
            continue;
        };
        let wanted = dangling(status);
        let conditions = current["status"]["conditions"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let old = conditions.iter().find(|c| c["type"] == "Dangling");
        let same = old.is_some_and(|c| {
            ["status", "reason", "message"]
                .iter()
                .all(|k| c[k] == wanted[k])
        });
        if same {
            continue;
        }
        let mut kept: Vec<Value> = conditions
            .into_iter()
            .filter(|c| c["type"] != "Dangling")
            .collect();
        kept.push(wanted);
        let mut updated = current.clone();
        updated["status"]["conditions"] = Value::Array(kept);
        write(entry, Part::Status, updated, CONSUMER).await?;
    }
    Ok(())
}

fn dangling(status: &SchemaStatus) -> Value {
    let level = &status.level;
    let (value, reason, message) = if status.dangling {
        let message = format!("This FlowSchema references the PriorityLevelConfiguration object named {level:?} but there is no such object");
        ("True", "NotFound", message)
    } else {
        let message = format!("This FlowSchema references the PriorityLevelConfiguration object named {level:?} and it exists");
        ("False", "Found", message)
    };
    json!({"type": "Dangling", "status": value, "reason": reason, "message": message,
           "lastTransitionTime": now_rfc3339()})
}

/// The name of a bootstrap object.
pub trait Named {
    fn name(&self) -> &str;
}

impl Named for FlowSchema {
    fn name(&self) -> &str {
        self.metadata.name.as_deref().unwrap_or_default()
    }
}

impl Named for PriorityLevelConfiguration {
    fn name(&self) -> &str {
        self.metadata.name.as_deref().unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conditions_say_whether_the_level_exists() {
        let status = SchemaStatus {
            schema: "s".into(),
            level: "gone".into(),
            dangling: true,
        };
        let condition = dangling(&status);
        assert_eq!(
            (condition["status"].as_str(), condition["reason"].as_str()),
            (Some("True"), Some("NotFound"))
        );
        assert_eq!(
            condition["message"],
            "This FlowSchema references the PriorityLevelConfiguration object named \"gone\" but there is no such object"
        );
        let found = dangling(&SchemaStatus {
            dangling: false,
            ..status
        });
        assert_eq!(found["reason"], "Found");
    }

    #[test]
    fn only_objects_not_annotated_otherwise_are_updated() {
        assert!(updatable(
            &json!({"metadata": {"annotations": {AUTO_UPDATE: "true"}}})
        ));
        assert!(updatable(&json!({"metadata": {}})));
        assert!(!updatable(
            &json!({"metadata": {"annotations": {AUTO_UPDATE: "false"}}})
        ));
        let a = json!({"metadata": {"name": "a", "resourceVersion": "2"}});
        let b = json!({"metadata": {"name": "b", "resourceVersion": "7"}});
        assert_eq!(fingerprint([&b, &a].into_iter()), "\"a\"@\"2\",\"b\"@\"7\"");
    }
}
