//! `LimitRanger`: a namespace's LimitRanges give a new pod's containers
//! the requests and limits they leave out (`defaultRequest`, `default`),
//! noted in the `kubernetes.io/limit-ranger` annotation, and refuse pods
//! whose containers, or the pod as a whole, fall outside `min`/`max` or
//! `maxLimitRequestRatio`, with kube's messages. Pods only, on create
//! (kube skips updates: containers cannot change their resources then).

use std::sync::Arc;

use serde_json::{Map, Value};

use crate::admission::objects::{Freshness, Objects, LIMIT_RANGES};
use crate::admission::{AdmissionError, Admit, Attributes, Operation, Plugin};
use crate::object::quantity;

const NAME: &str = "LimitRanger";
const ANNOTATION: &str = "kubernetes.io/limit-ranger";

pub struct LimitRanger {
    objects: Arc<dyn Objects>,
}

impl LimitRanger {
    pub fn new(objects: Arc<dyn Objects>) -> LimitRanger {
        LimitRanger { objects }
    }

    /// The `spec.limits` items of the namespace's LimitRanges of `kind`.
    async fn items(&self, namespace: &str, kind: &str) -> Result<Vec<Value>, AdmissionError> {
        let ranges = self
            .objects
            .list(LIMIT_RANGES, namespace, Freshness::Cached);
        let items = ranges.await?.into_iter().flat_map(|range| {
            range["spec"]["limits"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        });
        Ok(items.filter(|item| item["type"] == kind).collect())
    }
}

fn is_pod_create(a: &Attributes<'_>) -> bool {
    a.group.is_empty()
        && a.resource == "pods"
        && a.subresource.is_empty()
        && a.operation == Operation::Create
}

impl Plugin for LimitRanger {
    fn name(&self) -> &str {
        NAME
    }

    fn mutate<'a>(&'a self, a: &'a Attributes<'a>, pod: &'a mut Value) -> Admit<'a> {
        Box::pin(async move {
            if !is_pod_create(a) {
                return Ok(());
            }
            let items = self.items(a.namespace, "Container").await?;
            set_defaults(pod, &items);
            Ok(())
        })
    }

    fn validate<'a>(&'a self, a: &'a Attributes<'a>, pod: Option<&'a Value>) -> Admit<'a> {
        Box::pin(async move {
            let Some(pod) = pod.filter(|_| is_pod_create(a)) else {
                return Ok(());
            };
            let mut errors = Vec::new();
            for item in self.items(a.namespace, "Container").await? {
                for (_, container) in containers(&pod["spec"]) {
                    let resources = &container["resources"];
                    errors.extend(check(
                        &item,
                        "Container",
                        &resources["requests"],
                        &resources["limits"],
                    ));
                }
            }
            for item in self.items(a.namespace, "Pod").await? {
                let (requests, limits) = pod_totals(&pod["spec"]);
                errors.extend(check(&item, "Pod", &requests, &limits));
            }
            match errors.len() {
                0 => Ok(()),
                1 => Err(AdmissionError::denied(NAME, errors.remove(0))),
                _ => Err(AdmissionError::denied(
                    NAME,
                    format!("[{}]", errors.join(", ")),
                )),
            }
        })
    }
}

/// Containers and init containers, with kube's word for each.
fn containers(spec: &Value) -> Vec<(&'static str, &Value)> {
    let list = |field: &'static str, word: &'static str| {
        let items = spec[field].as_array().into_iter().flatten();
        items.map(move |c| (word, c))
    };
    list("containers", "container")
        .chain(list("initContainers", "init container"))
        .collect()
}

/// Fills in each container's missing requests and limits from the
/// items' `defaultRequest` and `default`, and notes what it set.
fn set_defaults(pod: &mut Value, items: &[Value]) {
    let mut notes = Vec::new();
    for field in ["containers", "initContainers"] {
        let word = if field == "containers" {
            "container"
        } else {
            "init container"
        };
        // `pointer_mut`, not indexing: indexing a missing key would write
        // a `null` into the pod, which a later update sees as a change.
        let Some(list) = pod
            .pointer_mut(&format!("/spec/{field}"))
            .and_then(Value::as_array_mut)
        else {
            continue;
        };
        for container in list {
            let name = container["name"].as_str().unwrap_or_default().to_string();
            for (kind, default_field, what) in [
                ("requests", "defaultRequest", "request"),
                ("limits", "default", "limit"),
            ] {
                let set = fill(container, kind, items, default_field);
                if !set.is_empty() {
                    notes.push(format!("{} {what} for {word} {name}", set.join(", ")));
                }
            }
        }
    }
    if !notes.is_empty() {
        let text = format!("LimitRanger plugin set: {}", notes.join("; "));
        pod["metadata"]["annotations"][ANNOTATION] = text.into();
    }
}

/// Sets in the container's `resources.<kind>` each resource an item's
/// `field` has and the container lacks (the first item wins); the names
/// set. Nothing is written, not even an empty map, when nothing lacks.
fn fill(container: &mut Value, kind: &str, items: &[Value], field: &str) -> Vec<String> {
    let mut missing: Vec<(String, Value)> = Vec::new();
    for item in items {
        for (resource, amount) in item[field].as_object().into_iter().flatten() {
            let present = container["resources"][kind]
                .get(resource)
                .is_some_and(|v| !v.is_null());
            if !present && !missing.iter().any(|(name, _)| name == resource) {
                missing.push((resource.clone(), amount.clone()));
            }
        }
    }
    if missing.is_empty() {
        return Vec::new();
    }
    if !container["resources"].is_object() {
        container["resources"] = Value::Object(Map::new());
    }
    let list = &mut container["resources"][kind];
    if !list.is_object() {
        *list = Value::Object(Map::new());
    }
    missing
        .into_iter()
        .map(|(resource, amount)| {
            list[resource.as_str()] = amount;
            resource
        })
        .collect()
}

/// The pod's requests and limits summed over its containers.
fn pod_totals(spec: &Value) -> (Value, Value) {
    let mut totals = [Map::new(), Map::new()];
    for (i, kind) in ["requests", "limits"].into_iter().enumerate() {
        let mut sums: std::collections::BTreeMap<String, f64> = Default::default();
        for (_, container) in containers(spec) {
            let entries = container["resources"][kind]
                .as_object()
                .into_iter()
                .flatten();
            for (resource, amount) in entries {
                let value = amount.as_str().and_then(quantity::parse).unwrap_or(0.0);
                *sums.entry(resource.clone()).or_default() += value;
            }
        }
        for (resource, sum) in sums {
            totals[i].insert(resource, crate::admission::usage::format(sum).into());
        }
    }
    let [requests, limits] = totals;
    (Value::Object(requests), Value::Object(limits))
}

fn amount(list: &Value, resource: &str) -> Option<(f64, String)> {
    let text = list[resource].as_str()?;
    Some((quantity::parse(text)?, text.to_string()))
}

/// kube's min, max and ratio checks of one item on one container (or
/// the pod's totals), each failure in kube's words.
fn check(item: &Value, kind: &str, requests: &Value, limits: &Value) -> Vec<String> {
    let mut errors = Vec::new();
    let bounds = |field: &str| item[field].as_object().cloned().unwrap_or_default();
    for (resource, min) in bounds("min") {
        let min = min.as_str().unwrap_or_default();
        let floor = quantity::parse(min).unwrap_or(0.0);
        match (amount(requests, &resource), amount(limits, &resource)) {
            (None, _) => errors.push(format!(
                "minimum {resource} usage per {kind} is {min}.  No request is specified"
            )),
            (Some((r, text)), _) if r < floor => errors.push(format!(
                "minimum {resource} usage per {kind} is {min}, but request is {text}"
            )),
            (_, Some((l, text))) if l < floor => errors.push(format!(
                "minimum {resource} usage per {kind} is {min}, but limit is {text}"
            )),
            _ => {}
        }
    }
    for (resource, max) in bounds("max") {
        let max = max.as_str().unwrap_or_default();
        let ceiling = quantity::parse(max).unwrap_or(f64::MAX);
        match (amount(requests, &resource), amount(limits, &resource)) {
            (_, None) => errors.push(format!(
                "maximum {resource} usage per {kind} is {max}.  No limit is specified"
            )),
            (_, Some((l, text))) if l > ceiling => errors.push(format!(
                "maximum {resource} usage per {kind} is {max}, but limit is {text}"
            )),
            (Some((r, text)), _) if r > ceiling => errors.push(format!(
                "maximum {resource} usage per {kind} is {max}, but request is {text}"
            )),
            _ => {}
        }
    }
    for (resource, ratio) in bounds("maxLimitRequestRatio") {
        let ratio_text = ratio.as_str().unwrap_or_default();
        let most = quantity::parse(ratio_text).unwrap_or(f64::MAX);
        if let (Some((r, _)), Some((l, _))) =
            (amount(requests, &resource), amount(limits, &resource))
        {
            if r > 0.0 && l / r > most {
                errors.push(format!(
                    "{resource} max limit to request ratio per {kind} is {ratio_text}, but provided ratio is {:.6}",
                    l / r
                ));
            }
        }
    }
    errors
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::testing::{attributes, Memory};
    use super::*;
    use crate::auth::UserInfo;

    fn plugin(limits: Value) -> LimitRanger {
        let objects = Memory::default();
        objects.put(
            LIMIT_RANGES,
            json!({"metadata": {"name": "lr", "namespace": "ns"}, "spec": {"limits": limits}}),
        );
        LimitRanger::new(Arc::new(objects))
    }

    #[tokio::test]
    async fn defaults_fill_what_containers_leave_out() {
        let plugin = plugin(json!([{"type": "Container",
            "default": {"cpu": "500m", "memory": "128Mi"}, "defaultRequest": {"cpu": "100m"}}]));
        let user = UserInfo::anonymous();
        let create = attributes(Operation::Create, "pods", "ns", "p", &user);
        let mut pod = json!({"metadata": {"name": "p"}, "spec": {"containers": [
            {"name": "web", "resources": {"limits": {"memory": "64Mi"}}}]}});
        plugin.mutate(&create, &mut pod).await.unwrap();
        let resources = &pod["spec"]["containers"][0]["resources"];
        assert_eq!(resources["requests"], json!({"cpu": "100m"}));
        assert_eq!(
            resources["limits"],
            json!({"cpu": "500m", "memory": "64Mi"})
        );
        assert_eq!(
            pod["metadata"]["annotations"][ANNOTATION],
            "LimitRanger plugin set: cpu request for container web; cpu limit for container web"
        );
        plugin.validate(&create, Some(&pod)).await.unwrap();
    }

    #[tokio::test]
    async fn min_and_max_refuse_with_kubes_words() {
        let plugin = plugin(json!([
            {"type": "Container", "max": {"cpu": "1"}, "min": {"memory": "10Mi"}},
            {"type": "Pod", "max": {"cpu": "3"}}]));
        let user = UserInfo::anonymous();
        let create = attributes(Operation::Create, "pods", "ns", "p", &user);
        let container = |cpu: &str| {
            json!({"name": "c", "resources": {
            "requests": {"memory": "20Mi"}, "limits": {"cpu": cpu}}})
        };
        let fits = json!({"spec": {"containers": [container("1"), container("1")]}});
        plugin.validate(&create, Some(&fits)).await.unwrap();
        let big = json!({"spec": {"containers": [container("2")]}});
        let refused = plugin.validate(&create, Some(&big)).await.unwrap_err();
        assert_eq!(
            refused,
            AdmissionError::denied(NAME, "maximum cpu usage per Container is 1, but limit is 2")
        );
        let many = json!({"spec": {"containers": [container("1"), container("1"), container("1"), container("1")]}});
        let refused = plugin.validate(&create, Some(&many)).await.unwrap_err();
        assert_eq!(
            refused.to_string(),
            "LimitRanger: maximum cpu usage per Pod is 3, but limit is 4"
        );
        let small = json!({"spec": {"containers": [{"name": "c", "resources": {
            "requests": {"memory": "1Mi"}, "limits": {"cpu": "1"}}}]}});
        let refused = plugin.validate(&create, Some(&small)).await.unwrap_err();
        assert_eq!(
            refused.to_string(),
            "LimitRanger: minimum memory usage per Container is 10Mi, but request is 1Mi"
        );
    }
}
