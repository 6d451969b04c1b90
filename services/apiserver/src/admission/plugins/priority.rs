//! `Priority`: a pod's `priorityClassName` becomes its `priority` (and
//! `preemptionPolicy`), from the PriorityClass of that name, which must
//! exist; a pod naming none gets the `globalDefault` class's, or 0. As in
//! kube, a pod may not state a priority of its own that differs, and only
//! one PriorityClass may be the global default. The two system classes
//! are made at start (`startup`).

use std::sync::Arc;

use serde_json::Value;

use crate::admission::objects::{Freshness, Objects, PRIORITY_CLASSES};
use crate::admission::{AdmissionError, Admit, Attributes, Operation, Plugin};

const NAME: &str = "Priority";

/// The classes every cluster has: (name, value, description).
pub const SYSTEM_CLASSES: [(&str, i64, &str); 2] = [
    (
        "system-node-critical",
        2_000_001_000,
        "Used for system critical pods that must not be moved from their current node.",
    ),
    (
        "system-cluster-critical",
        2_000_000_000,
        "Used for system critical pods that must run in the cluster, but can be moved to another node if necessary.",
    ),
];

pub struct Priority {
    objects: Arc<dyn Objects>,
}

impl Priority {
    pub fn new(objects: Arc<dyn Objects>) -> Priority {
        Priority { objects }
    }

    async fn class(&self, name: &str) -> Result<Option<Value>, AdmissionError> {
        let cached = self
            .objects
            .get(PRIORITY_CLASSES, "", name, Freshness::Cached);
        if let Some(found) = cached.await? {
            return Ok(Some(found));
        }
        Ok(self
            .objects
            .get(PRIORITY_CLASSES, "", name, Freshness::Current)
            .await?)
    }

    async fn global_default(&self) -> Result<Option<Value>, AdmissionError> {
        let all = self.objects.list(PRIORITY_CLASSES, "", Freshness::Cached);
        let defaults = all
            .await?
            .into_iter()
            .filter(|c| c["globalDefault"] == true);
        // The lowest, as kube picks when several were made at once.
        Ok(defaults.min_by_key(|c| c["value"].as_i64().unwrap_or(0)))
    }

    async fn admit_pod(&self, pod: &mut Value) -> Result<(), AdmissionError> {
        let named = pod["spec"]["priorityClassName"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let class = match named.as_str() {
            "" => self.global_default().await?,
            name => Some(self.class(name).await?.ok_or_else(|| {
                AdmissionError::denied(NAME, format!("no PriorityClass with name {name} was found"))
            })?),
        };
        let (value, policy) = match &class {
            Some(c) => (
                c["value"].as_i64().unwrap_or(0),
                c["preemptionPolicy"]
                    .as_str()
                    .unwrap_or("PreemptLowerPriority")
                    .to_string(),
            ),
            None => (0, "PreemptLowerPriority".to_string()),
        };
        let spec = &mut pod["spec"];
        if let Some(given) = spec["priority"].as_i64().filter(|given| *given != value) {
            return Err(AdmissionError::denied(
                NAME,
                format!(
                    "the integer value of priority ({given}) must not be provided in pod spec; \
                     priority admission controller computed {value} from the given PriorityClass name"
                ),
            ));
        }
        if let Some(c) = &class {
            spec["priorityClassName"] = c["metadata"]["name"].clone();
        }
        spec["priority"] = value.into();
        spec["preemptionPolicy"] = policy.into();
        Ok(())
    }

    /// Only one class may be the global default.
    async fn check_class(&self, a: &Attributes<'_>, class: &Value) -> Result<(), AdmissionError> {
        if class["globalDefault"] != true {
            return Ok(());
        }
        match self.global_default().await? {
            Some(other) if other["metadata"]["name"] != a.name => Err(AdmissionError::denied(
                NAME,
                format!(
                    "PriorityClass {} is already marked as default. Only one default can exist",
                    other["metadata"]["name"].as_str().unwrap_or_default()
                ),
            )),
            _ => Ok(()),
        }
    }
}

impl Plugin for Priority {
    fn name(&self) -> &str {
        NAME
    }

    fn mutate<'a>(&'a self, a: &'a Attributes<'a>, pod: &'a mut Value) -> Admit<'a> {
        Box::pin(async move {
            let is_pod = a.group.is_empty() && a.resource == "pods" && a.subresource.is_empty();
            match is_pod && a.operation == Operation::Create {
                true => self.admit_pod(pod).await,
                false => Ok(()),
            }
        })
    }

    fn validate<'a>(&'a self, a: &'a Attributes<'a>, object: Option<&'a Value>) -> Admit<'a> {
        Box::pin(async move {
            let is_class =
                a.group == PRIORITY_CLASSES.group && a.resource == PRIORITY_CLASSES.resource;
            match (object, is_class, a.operation) {
                (Some(class), true, Operation::Create | Operation::Update) => {
                    self.check_class(a, class).await
                }
                _ => Ok(()),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::testing::{attributes, Memory};
    use super::*;
    use crate::auth::UserInfo;

    fn objects() -> Arc<Memory> {
        let objects = Arc::new(Memory::default());
        objects.put(
            PRIORITY_CLASSES,
            json!({"metadata": {"name": "high"}, "value": 1000,
            "preemptionPolicy": "Never"}),
        );
        objects
    }

    fn pod(spec: Value) -> Value {
        json!({"metadata": {"name": "p"}, "spec": spec})
    }

    #[tokio::test]
    async fn a_class_name_becomes_a_priority() {
        let objects = objects();
        let plugin = Priority::new(objects.clone());
        let user = UserInfo::anonymous();
        let create = attributes(Operation::Create, "pods", "ns", "p", &user);
        let mut p = pod(json!({"priorityClassName": "high"}));
        plugin.mutate(&create, &mut p).await.unwrap();
        assert_eq!(p["spec"]["priority"], 1000);
        assert_eq!(p["spec"]["preemptionPolicy"], "Never");
        let mut plain = pod(json!({}));
        plugin.mutate(&create, &mut plain).await.unwrap();
        assert_eq!(plain["spec"]["priority"], 0);
        let mut ghost = pod(json!({"priorityClassName": "ghost"}));
        let refused = plugin.mutate(&create, &mut ghost).await.unwrap_err();
        assert_eq!(
            refused,
            AdmissionError::denied(NAME, "no PriorityClass with name ghost was found")
        );
        let mut own = pod(json!({"priorityClassName": "high", "priority": 5}));
        let refused = plugin.mutate(&create, &mut own).await.unwrap_err();
        assert!(refused
            .to_string()
            .contains("must not be provided in pod spec"));
    }

    #[tokio::test]
    async fn one_global_default_gives_pods_its_priority() {
        let objects = objects();
        objects.put(
            PRIORITY_CLASSES,
            json!({"metadata": {"name": "usual"}, "value": 10,
            "globalDefault": true}),
        );
        let plugin = Priority::new(objects.clone());
        let user = UserInfo::anonymous();
        let create = attributes(Operation::Create, "pods", "ns", "p", &user);
        let mut plain = pod(json!({}));
        plugin.mutate(&create, &mut plain).await.unwrap();
        assert_eq!(plain["spec"]["priority"], 10);
        assert_eq!(plain["spec"]["priorityClassName"], "usual");
        let mut second = attributes(Operation::Create, "priorityclasses", "", "other", &user);
        second.group = "scheduling.k8s.io";
        let class = json!({"metadata": {"name": "other"}, "value": 5, "globalDefault": true});
        let refused = plugin.validate(&second, Some(&class)).await.unwrap_err();
        assert_eq!(
            refused.to_string(),
            "Priority: PriorityClass usual is already marked as default. Only one default can exist"
        );
    }
}
