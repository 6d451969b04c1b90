//! The restricted level's checks: what a hardened pod must say about
//! itself (no privilege escalation, all capabilities dropped, a non-root
//! user, a seccomp profile) and the volume types it may use.

use std::collections::BTreeSet;

use serde_json::Value;

use super::super::levels::Level;
use super::super::pod::{containers_named, join_quoted, name, security, PodView};
use super::check::{Check, Violation};
use super::profiles::{confined, explicit_seccomp};

const fn restricted(id: &'static str, since: u32, run: fn(&PodView) -> Option<Violation>) -> Check {
    Check {
        id,
        level: Level::Restricted,
        overlap: false,
        since,
        run,
    }
}

pub const ALLOW_PRIVILEGE_ESCALATION: Check =
    restricted("allowPrivilegeEscalation", 8, allow_privilege_escalation);
pub const CAPABILITIES: Check = restricted("capabilities_restricted", 22, capabilities);
pub const VOLUMES: Check = restricted("restrictedVolumes", 0, volumes);
pub const RUN_AS_NON_ROOT: Check = restricted("runAsNonRoot", 0, run_as_non_root);
pub const RUN_AS_USER: Check = restricted("runAsUser", 23, run_as_user);
pub const SECCOMP: Check = restricted("seccompProfile_restricted", 19, seccomp);

/// The volume types a restricted pod may use.
const ALLOWED_VOLUMES: &[&str] = &[
    "configMap",
    "csi",
    "downwardAPI",
    "emptyDir",
    "ephemeral",
    "persistentVolumeClaim",
    "projected",
    "secret",
];

fn allow_privilege_escalation(pod: &PodView) -> Option<Violation> {
    let bad = pod.containers_where(|s| s["allowPrivilegeEscalation"].as_bool() != Some(false));
    if bad.is_empty() {
        return None;
    }
    Violation::new(
        "allowPrivilegeEscalation != false",
        format!(
            "{} must set securityContext.allowPrivilegeEscalation=false",
            containers_named(&bad)
        ),
    )
}

fn capabilities(pod: &PodView) -> Option<Violation> {
    let mut missing_drop = Vec::new();
    let mut adding = Vec::new();
    let mut added = BTreeSet::new();
    for container in pod.containers() {
        let capabilities = &security(container)["capabilities"];
        if !capabilities.is_object() {
            missing_drop.push(name(container));
            continue;
        }
        let list = |field: &str| -> Vec<String> {
            let items = capabilities[field].as_array().into_iter().flatten();
            items
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        };
        if !list("drop").iter().any(|c| c == "ALL") {
            missing_drop.push(name(container));
        }
        let extra: Vec<String> = list("add")
            .into_iter()
            .filter(|c| c != "NET_BIND_SERVICE")
            .collect();
        if !extra.is_empty() {
            adding.push(name(container));
            added.extend(extra);
        }
    }
    let mut details = Vec::new();
    if !missing_drop.is_empty() {
        details.push(format!(
            "{} must set securityContext.capabilities.drop=[\"ALL\"]",
            containers_named(&missing_drop)
        ));
    }
    if !adding.is_empty() {
        let added: Vec<String> = added.into_iter().collect();
        details.push(format!(
            "{} must not include {} in securityContext.capabilities.add",
            containers_named(&adding),
            join_quoted(&added)
        ));
    }
    if details.is_empty() {
        return None;
    }
    Violation::new("unrestricted capabilities", details.join("; "))
}

fn volumes(pod: &PodView) -> Option<Violation> {
    let bad: BTreeSet<String> = pod.spec["volumes"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|v| {
            !ALLOWED_VOLUMES
                .iter()
                .any(|kind| v.get(*kind).is_some_and(|s| !s.is_null()))
        })
        .map(name)
        .collect();
    if bad.is_empty() {
        return None;
    }
    // Go's %q of a string slice: ["a" "b"].
    let quoted: Vec<String> = bad.iter().map(|n| format!("{n:?}")).collect();
    Violation::new(
        "restricted volume types",
        format!("volumes [{}] have restricted types", quoted.join(" ")),
    )
}

fn run_as_non_root(pod: &PodView) -> Option<Violation> {
    let pod_setting = pod.security()["runAsNonRoot"].as_bool();
    let mut setters = Vec::new();
    if pod_setting == Some(false) {
        setters.push("pod".to_string());
    }
    let mut explicit = Vec::new();
    let mut implicit = Vec::new();
    for container in pod.containers() {
        match security(container)["runAsNonRoot"].as_bool() {
            Some(false) => explicit.push(name(container)),
            Some(true) => {}
            None if pod_setting != Some(true) => implicit.push(name(container)),
            None => {}
        }
    }
    if !explicit.is_empty() {
        setters.push(containers_named(&explicit));
    }
    let reason = "runAsNonRoot != true";
    if !setters.is_empty() {
        let detail = format!(
            "{} must not set securityContext.runAsNonRoot=false",
            setters.join(" and ")
        );
        return Violation::new(reason, detail);
    }
    if implicit.is_empty() {
        return None;
    }
    Violation::new(
        reason,
        format!(
            "pod or {} must set securityContext.runAsNonRoot=true",
            containers_named(&implicit)
        ),
    )
}

fn run_as_user(pod: &PodView) -> Option<Violation> {
    let root = |sc: &Value| sc["runAsUser"].as_i64() == Some(0);
    let mut setters = Vec::new();
    if root(pod.security()) {
        setters.push("pod".to_string());
    }
    let bad = pod.containers_where(root);
    if !bad.is_empty() {
        setters.push(containers_named(&bad));
    }
    if setters.is_empty() {
        return None;
    }
    Violation::new(
        "runAsUser=0",
        format!("{} must not set runAsUser=0", setters.join(" and ")),
    )
}

fn seccomp(pod: &PodView) -> Option<Violation> {
    if let Some(explicit) = explicit_seccomp(pod) {
        return Some(explicit);
    }
    let pod_set = confined(&pod.security()["seccompProfile"]["type"]);
    let implicit: Vec<String> = pod
        .containers()
        .filter(|c| !pod_set && !security(c)["seccompProfile"].is_object())
        .map(name)
        .collect();
    if implicit.is_empty() {
        return None;
    }
    Violation::new(
        "seccompProfile",
        format!(
            "pod or {} must set securityContext.seccompProfile.type to \"RuntimeDefault\" or \"Localhost\"",
            containers_named(&implicit)
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn detail(check: &Check, spec: Value) -> Option<String> {
        let pod = json!({"metadata": {}, "spec": spec});
        (check.run)(&PodView::of_pod(&pod)).map(|v| v.detail)
    }

    #[test]
    fn privilege_escalation_must_be_off_explicitly() {
        let spec = json!({"containers": [{"name": "a"}, {"name": "b", "securityContext": {"allowPrivilegeEscalation": true}},
            {"name": "c", "securityContext": {"allowPrivilegeEscalation": false}}]});
        assert_eq!(
            detail(&ALLOW_PRIVILEGE_ESCALATION, spec).unwrap(),
            "containers \"a\", \"b\" must set securityContext.allowPrivilegeEscalation=false"
        );
    }

    #[test]
    fn capabilities_drop_all_and_add_only_net_bind_service() {
        let spec = json!({"containers": [{"name": "a"},
            {"name": "b", "securityContext": {"capabilities": {"drop": ["ALL"], "add": ["NET_BIND_SERVICE", "CHOWN"]}}},
            {"name": "c", "securityContext": {"capabilities": {"drop": ["ALL"], "add": ["NET_BIND_SERVICE"]}}}]});
        assert_eq!(
            detail(&CAPABILITIES, spec).unwrap(),
            "container \"a\" must set securityContext.capabilities.drop=[\"ALL\"]; \
             container \"b\" must not include \"CHOWN\" in securityContext.capabilities.add"
        );
    }

    #[test]
    fn only_ephemeral_and_projected_kinds_of_volumes() {
        let spec = json!({"volumes": [{"name": "z", "hostPath": {"path": "/"}}, {"name": "n", "nfs": {}},
            {"name": "ok", "configMap": {"name": "c"}}]});
        assert_eq!(
            detail(&VOLUMES, spec).unwrap(),
            "volumes [\"n\" \"z\"] have restricted types"
        );
    }

    #[test]
    fn non_root_from_the_pod_or_every_container() {
        let pod_level =
            json!({"securityContext": {"runAsNonRoot": true}, "containers": [{"name": "a"}]});
        assert_eq!(detail(&RUN_AS_NON_ROOT, pod_level), None);
        let mixed = json!({"containers": [{"name": "a", "securityContext": {"runAsNonRoot": true}}, {"name": "b"}]});
        assert_eq!(
            detail(&RUN_AS_NON_ROOT, mixed).unwrap(),
            "pod or container \"b\" must set securityContext.runAsNonRoot=true"
        );
        let explicit = json!({"securityContext": {"runAsNonRoot": false},
            "containers": [{"name": "a", "securityContext": {"runAsNonRoot": false}}]});
        assert_eq!(
            detail(&RUN_AS_NON_ROOT, explicit).unwrap(),
            "pod and container \"a\" must not set securityContext.runAsNonRoot=false"
        );
        let root = json!({"securityContext": {"runAsUser": 0}, "containers": [{"name": "a", "securityContext": {"runAsUser": 1000}}]});
        assert_eq!(
            detail(&RUN_AS_USER, root).unwrap(),
            "pod must not set runAsUser=0"
        );
    }

    #[test]
    fn seccomp_from_the_pod_or_every_container() {
        let pod_level = json!({"securityContext": {"seccompProfile": {"type": "RuntimeDefault"}}, "containers": [{"name": "a"}]});
        assert_eq!(detail(&SECCOMP, pod_level), None);
        let unset = json!({"containers": [{"name": "a", "securityContext": {"seccompProfile": {"type": "Localhost"}}}, {"name": "b"}]});
        assert_eq!(detail(&SECCOMP, unset).unwrap(),
            "pod or container \"b\" must set securityContext.seccompProfile.type to \"RuntimeDefault\" or \"Localhost\"");
        let unconfined = json!({"securityContext": {"seccompProfile": {"type": "Unconfined"}}, "containers": [{"name": "a"}]});
        assert_eq!(
            detail(&SECCOMP, unconfined).unwrap(),
            "pod must not set securityContext.seccompProfile.type to \"Unconfined\""
        );
    }
}
