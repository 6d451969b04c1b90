//! `DefaultTolerationSeconds`: a pod created without a toleration for the
//! `node.kubernetes.io/not-ready` or `node.kubernetes.io/unreachable`
//! NoExecute taint gets one for `--default-not-ready-toleration-seconds`
//! / `--default-unreachable-toleration-seconds` (300 s each), so a node
//! that stops answering has its pods evicted after five minutes instead
//! of at once: a short network blip does not move every pod.

use serde_json::{json, Value};

use crate::admission::config_file::DefaultTolerations;
use crate::admission::{Admit, Attributes, Operation, Plugin};

const NAME: &str = "DefaultTolerationSeconds";
pub const NOT_READY: &str = "node.kubernetes.io/not-ready";
pub const UNREACHABLE: &str = "node.kubernetes.io/unreachable";
const NO_EXECUTE: &str = "NoExecute";

pub struct DefaultTolerationSeconds {
    seconds: DefaultTolerations,
}

impl DefaultTolerationSeconds {
    pub fn new(seconds: DefaultTolerations) -> DefaultTolerationSeconds {
        DefaultTolerationSeconds { seconds }
    }
}

/// kube's test: a toleration with this key (or none, matching every key)
/// and effect NoExecute (or none, matching every effect) counts, whatever
/// its operator, value and seconds.
fn tolerates(tolerations: &[Value], key: &str) -> bool {
    tolerations.iter().any(|t| {
        let key_matches = matches!(t["key"].as_str(), None | Some("")) || t["key"] == key;
        let effect = t["effect"].as_str().unwrap_or("");
        key_matches && (effect.is_empty() || effect == NO_EXECUTE)
    })
}

impl Plugin for DefaultTolerationSeconds {
    fn name(&self) -> &str {
        NAME
    }

    fn mutate<'a>(&'a self, a: &'a Attributes<'a>, pod: &'a mut Value) -> Admit<'a> {
        let is_pod_create = a.group.is_empty()
            && a.resource == "pods"
            && a.subresource.is_empty()
            && a.operation == Operation::Create;
        if is_pod_create && pod["spec"].is_object() {
            let existing = pod["spec"]["tolerations"].as_array().cloned();
            let existing = existing.unwrap_or_default();
            let mut added = Vec::new();
            for (key, seconds) in [
                (NOT_READY, self.seconds.not_ready_seconds),
                (UNREACHABLE, self.seconds.unreachable_seconds),
            ] {
                if !tolerates(&existing, key) {
                    added.push(json!({"key": key, "operator": "Exists",
                        "effect": NO_EXECUTE, "tolerationSeconds": seconds}));
                }
            }
            if !added.is_empty() {
                pod["spec"]["tolerations"] = Value::Array([existing, added].concat());
            }
        }
        crate::admission::allow()
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::attributes;
    use super::*;
    use crate::auth::UserInfo;

    async fn admitted(pod: Value, operation: Operation) -> Value {
        let plugin = DefaultTolerationSeconds::new(DefaultTolerations {
            not_ready_seconds: 300,
            unreachable_seconds: 60,
        });
        let user = UserInfo::anonymous();
        let create = attributes(operation, "pods", "ns", "p", &user);
        let mut pod = pod;
        plugin.mutate(&create, &mut pod).await.unwrap();
        pod["spec"]["tolerations"].clone()
    }

    #[tokio::test]
    async fn a_pod_without_them_gets_both_with_the_flags_seconds() {
        let tolerations = admitted(json!({"spec": {"containers": []}}), Operation::Create).await;
        assert_eq!(
            tolerations,
            json!([
                {"key": NOT_READY, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
                {"key": UNREACHABLE, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 60},
            ])
        );
    }

    #[tokio::test]
    async fn tolerations_the_pod_has_are_kept_and_count() {
        let own = json!([{"key": UNREACHABLE, "operator": "Exists", "effect": "NoExecute",
            "tolerationSeconds": 5}, {"key": "dedicated", "value": "db", "effect": "NoSchedule"}]);
        let tolerations = admitted(json!({"spec": {"tolerations": own}}), Operation::Create).await;
        let keys: Vec<&str> = tolerations
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["key"].as_str().unwrap())
            .collect();
        assert_eq!(keys, [UNREACHABLE, "dedicated", NOT_READY]);
        assert_eq!(
            tolerations[0]["tolerationSeconds"], 5,
            "the pod's own stays"
        );
        // A toleration of every key and effect covers both.
        let all = json!({"spec": {"tolerations": [{"operator": "Exists"}]}});
        assert_eq!(
            admitted(all, Operation::Create).await,
            json!([{"operator": "Exists"}])
        );
        // A NoSchedule toleration of the key does not.
        let no_schedule = json!({"spec": {"tolerations": [
            {"key": NOT_READY, "operator": "Exists", "effect": "NoSchedule"}]}});
        assert_eq!(
            admitted(no_schedule, Operation::Create)
                .await
                .as_array()
                .unwrap()
                .len(),
            3
        );
    }

    #[tokio::test]
    async fn updates_are_left_alone() {
        let pod = json!({"spec": {"containers": []}});
        assert!(admitted(pod, Operation::Update).await.is_null());
    }
}
