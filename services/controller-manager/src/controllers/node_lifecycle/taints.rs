//! The taints the node lifecycle controller owns: NoSchedule taints that
//! mirror a node's conditions (and `spec.unschedulable`), put on at once,
//! and the NoExecute `unreachable` / `not-ready` taints that make the
//! taint-eviction controller move pods off, put on at the zone's rate.
//! Writes are merge patches of the taints with the resourceVersion read,
//! tried again on a conflict with a fresh read (kube's
//! `SwapNodeControllerTaint`).

use k8s_openapi::api::core::v1::{Node, Taint};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::chrono::Utc;
use kube::api::{Api, Patch, PatchParams};

use crate::error::{Error, Result};

pub const NOT_READY: &str = "node.kubernetes.io/not-ready";
pub const UNREACHABLE: &str = "node.kubernetes.io/unreachable";
pub const UNSCHEDULABLE: &str = "node.kubernetes.io/unschedulable";
pub const NO_SCHEDULE: &str = "NoSchedule";
pub const NO_EXECUTE: &str = "NoExecute";

/// Conditions and the status that puts a NoSchedule taint on the node.
const CONDITION_TAINTS: [(&str, &str, &str); 6] = [
    ("Ready", "False", NOT_READY),
    ("Ready", "Unknown", UNREACHABLE),
    (
        "MemoryPressure",
        "True",
        "node.kubernetes.io/memory-pressure",
    ),
    ("DiskPressure", "True", "node.kubernetes.io/disk-pressure"),
    (
        "NetworkUnavailable",
        "True",
        "node.kubernetes.io/network-unavailable",
    ),
    ("PIDPressure", "True", "node.kubernetes.io/pid-pressure"),
];

/// A taint of `key` with `effect` (no value, as kube's templates).
pub fn taint(key: &str, effect: &str) -> Taint {
    Taint {
        key: key.to_string(),
        effect: effect.to_string(),
        value: None,
        time_added: None,
    }
}

fn same(a: &Taint, b: &Taint) -> bool {
    a.key == b.key && a.effect == b.effect
}

pub fn taints_of(node: &Node) -> &[Taint] {
    node.spec
        .as_ref()
        .and_then(|s| s.taints.as_deref())
        .unwrap_or_default()
}

pub fn has(node: &Node, wanted: &Taint) -> bool {
    taints_of(node).iter().any(|t| same(t, wanted))
}

/// The condition taints the node should have and, of those this
/// controller manages, the ones to add and to remove.
pub fn no_schedule_diff(node: &Node) -> (Vec<Taint>, Vec<Taint>) {
    let conditions = node
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_deref())
        .unwrap_or_default();
    let mut wanted: Vec<Taint> = conditions
        .iter()
        .filter_map(|c| {
            let found = CONDITION_TAINTS
                .iter()
                .find(|(t, s, _)| *t == c.type_ && *s == c.status);
            found.map(|(_, _, key)| taint(key, NO_SCHEDULE))
        })
        .collect();
    if node
        .spec
        .as_ref()
        .and_then(|s| s.unschedulable)
        .unwrap_or(false)
    {
        wanted.push(taint(UNSCHEDULABLE, NO_SCHEDULE));
    }
    let managed = |t: &&Taint| {
        t.effect == NO_SCHEDULE
            && (t.key == UNSCHEDULABLE || CONDITION_TAINTS.iter().any(|(_, _, k)| *k == t.key))
    };
    let current: Vec<&Taint> = taints_of(node).iter().filter(managed).collect();
    let add = wanted
        .iter()
        .filter(|w| !current.iter().any(|c| same(c, w)))
        .cloned()
        .collect();
    let remove = current
        .into_iter()
        .filter(|c| !wanted.iter().any(|w| same(c, w)))
        .cloned()
        .collect();
    (add, remove)
}

/// The node's taints with `remove` taken off and `add` put on (NoExecute
/// ones stamped with the time added); None if nothing changes.
pub fn swapped(node: &Node, add: &[Taint], remove: &[Taint]) -> Option<Vec<Taint>> {
    let current = taints_of(node);
    let mut taints: Vec<Taint> = current
        .iter()
        .filter(|t| !remove.iter().any(|r| same(r, t)))
        .cloned()
        .collect();
    for wanted in add {
        if taints.iter().any(|t| same(t, wanted)) {
            continue;
        }
        let mut new = wanted.clone();
        if new.effect == NO_EXECUTE {
            new.time_added = Some(Time(Utc::now()));
        }
        taints.push(new);
    }
    (taints.len() != current.len() || taints.iter().zip(current).any(|(a, b)| !same(a, b)))
        .then_some(taints)
}

/// Swaps taints on the node `name`, starting from `cached` and reading
/// it again after a conflict; a node that is gone is not an error.
/// Returns whether the node was written.
pub async fn swap(
    client: &kube::Client,
    cached: &Node,
    add: &[Taint],
    remove: &[Taint],
) -> Result<bool> {
    let api: Api<Node> = Api::all(client.clone());
    let name = cached.metadata.name.clone().unwrap_or_default();
    let mut node = cached.clone();
    for attempt in 0..5 {
        let Some(taints) = swapped(&node, add, remove) else {
            return Ok(false);
        };
        // A merge patch of the taints alone, conditional on the version
        // read: a PUT of the cached copy would drop what the cache strips.
        let patch = serde_json::json!({
            "metadata": {"resourceVersion": node.metadata.resource_version},
            "spec": {"taints": taints},
        });
        match api
            .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map_err(Error::from)
        {
            Ok(_) => return Ok(true),
            Err(err) if err.is_not_found() => return Ok(false),
            Err(err) if err.is_conflict() && attempt < 4 => {}
            Err(err) => return Err(err),
        }
        match api.get_opt(&name).await? {
            Some(fresh) => node = fresh,
            None => return Ok(false),
        }
    }
    Ok(false)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testkit::object;
    use serde_json::json;

    fn node(conditions: serde_json::Value, taints: serde_json::Value, unschedulable: bool) -> Node {
        object(json!({"metadata": {"name": "n1"},
            "spec": {"taints": taints, "unschedulable": unschedulable},
            "status": {"conditions": conditions}}))
    }

    #[test]
    fn conditions_become_no_schedule_taints() {
        let n = node(
            json!([{"type": "Ready", "status": "Unknown"}, {"type": "DiskPressure", "status": "True"}]),
            json!([{"key": NOT_READY, "effect": "NoSchedule"}, {"key": "dedicated", "effect": "NoSchedule"}]),
            true,
        );
        let (add, remove) = no_schedule_diff(&n);
        let keys = |list: &[Taint]| list.iter().map(|t| t.key.clone()).collect::<Vec<_>>();
        assert_eq!(
            keys(&add),
            [
                UNREACHABLE,
                "node.kubernetes.io/disk-pressure",
                UNSCHEDULABLE
            ]
        );
        assert_eq!(
            keys(&remove),
            [NOT_READY],
            "the user's own taint is left alone"
        );
        let healthy = node(
            json!([{"type": "Ready", "status": "True"}]),
            json!([]),
            false,
        );
        assert_eq!(no_schedule_diff(&healthy), (vec![], vec![]));
    }

    #[test]
    fn swapping_stamps_no_execute_taints_and_notices_no_change() {
        let n = node(
            json!([]),
            json!([{"key": NOT_READY, "effect": "NoExecute"}]),
            false,
        );
        let swapped = swapped(
            &n,
            &[taint(UNREACHABLE, NO_EXECUTE)],
            &[taint(NOT_READY, NO_EXECUTE)],
        )
        .unwrap();
        assert_eq!(swapped.len(), 1);
        assert_eq!(swapped[0].key, UNREACHABLE);
        assert!(swapped[0].time_added.is_some());
        assert!(super::swapped(&n, &[taint(NOT_READY, NO_EXECUTE)], &[]).is_none());
    }
}
