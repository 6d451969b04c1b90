//! The baseline level's checks on security profiles: AppArmor (the
//! fields and the older per-container annotations), SELinux options and
//! seccomp (baseline only forbids an explicit `Unconfined`; restricted's
//! stricter seccomp check is in `restricted.rs`).

use std::collections::BTreeSet;

use serde_json::Value;

use super::super::levels::Level;
use super::super::pod::{containers_named, join_quoted, name, plural, security, PodView};
use super::check::{Check, Violation};

pub const APP_ARMOR: Check = Check {
    id: "appArmorProfile",
    level: Level::Baseline,
    overlap: false,
    since: 0,
    run: app_armor,
};

pub const SELINUX: Check = Check {
    id: "seLinuxOptions",
    level: Level::Baseline,
    overlap: false,
    since: 0,
    run: selinux,
};

pub const SECCOMP_BASELINE: Check = Check {
    id: "seccompProfile_baseline",
    level: Level::Baseline,
    overlap: true,
    since: 0,
    run: seccomp_baseline,
};

const APP_ARMOR_ANNOTATION: &str = "container.apparmor.security.beta.kubernetes.io/";
const SELINUX_TYPES: &[&str] = &["", "container_t", "container_init_t", "container_kvm_t"];

/// Who set a forbidden value: `pod`, `container "a"`, joined by "and".
fn setters(pod_bad: bool, containers: &[String]) -> Vec<String> {
    let mut who = Vec::new();
    if pod_bad {
        who.push("pod".to_string());
    }
    if !containers.is_empty() {
        who.push(containers_named(containers));
    }
    who
}

/// The pod's and each container's verdict on one securityContext field.
fn bad_contexts(pod: &PodView, bad: impl Fn(&Value) -> bool) -> (bool, Vec<String>) {
    let containers = pod.containers().filter(|c| bad(security(c))).map(name);
    (bad(pod.security()), containers.collect())
}

fn app_armor(pod: &PodView) -> Option<Violation> {
    let unconfined = |sc: &Value| sc["appArmorProfile"]["type"] == "Unconfined";
    let (pod_bad, containers) = bad_contexts(pod, unconfined);
    let mut annotations: Vec<String> = pod
        .annotations()
        .filter(|(key, value)| key.starts_with(APP_ARMOR_ANNOTATION) && !allowed_app_armor(value))
        .map(|(key, value)| format!("{key}={value:?}"))
        .collect();
    annotations.sort();
    let who = setters(pod_bad, &containers);
    let count = who.len() + annotations.len();
    let mut parts = Vec::new();
    if !who.is_empty() {
        parts.push(format!(
            "{} must not set AppArmor profile type to \"Unconfined\"",
            who.join(" and ")
        ));
    }
    if !annotations.is_empty() {
        parts.push(format!(
            "annotations must not set AppArmor profile type to {}",
            join_quoted(&annotations)
        ));
    }
    if parts.is_empty() {
        return None;
    }
    let reason = plural(
        "forbidden AppArmor profile",
        "forbidden AppArmor profiles",
        count,
    );
    Violation::new(reason, parts.join("; "))
}

fn allowed_app_armor(profile: &str) -> bool {
    profile.is_empty() || profile == "runtime/default" || profile.starts_with("localhost/")
}

fn selinux(pod: &PodView) -> Option<Violation> {
    let mut types = BTreeSet::new();
    let (mut user, mut role) = (false, false);
    let mut check = |sc: &Value| {
        let options = &sc["seLinuxOptions"];
        if !options.is_object() {
            return false;
        }
        let text = |field: &str| options[field].as_str().unwrap_or_default().to_string();
        let kind = text("type");
        let bad_type = !SELINUX_TYPES.contains(&kind.as_str());
        if bad_type {
            types.insert(kind);
        }
        user |= !text("user").is_empty();
        role |= !text("role").is_empty();
        bad_type || !text("user").is_empty() || !text("role").is_empty()
    };
    let pod_bad = check(pod.security());
    let containers: Vec<String> = pod
        .containers()
        .filter(|c| check(security(c)))
        .map(name)
        .collect();
    let who = setters(pod_bad, &containers);
    if who.is_empty() {
        return None;
    }
    let mut what = Vec::new();
    if !types.is_empty() {
        let types: Vec<String> = types.into_iter().collect();
        what.push(format!(
            "{} {}",
            plural("type", "types", types.len()),
            join_quoted(&types)
        ));
    }
    if user {
        what.push("user may not be set".into());
    }
    if role {
        what.push("role may not be set".into());
    }
    Violation::new(
        "seLinuxOptions",
        format!(
            "{} set forbidden securityContext.seLinuxOptions: {}",
            who.join(" and "),
            what.join("; ")
        ),
    )
}

/// A seccomp profile type the standards accept.
pub fn confined(kind: &Value) -> bool {
    kind == "RuntimeDefault" || kind == "Localhost"
}

fn seccomp_baseline(pod: &PodView) -> Option<Violation> {
    let mut kinds = BTreeSet::new();
    let mut explicit_bad = |sc: &Value| {
        let profile = &sc["seccompProfile"];
        let bad = profile.is_object() && !confined(&profile["type"]);
        if bad {
            kinds.insert(profile["type"].as_str().unwrap_or_default().to_string());
        }
        bad
    };
    let pod_bad = explicit_bad(pod.security());
    let containers: Vec<String> = pod
        .containers()
        .filter(|c| explicit_bad(security(c)))
        .map(name)
        .collect();
    let who = setters(pod_bad, &containers);
    if who.is_empty() {
        return None;
    }
    let kinds: Vec<String> = kinds.into_iter().collect();
    Violation::new(
        "seccompProfile",
        format!(
            "{} must not set securityContext.seccompProfile.type to {}",
            who.join(" and "),
            join_quoted(&kinds)
        ),
    )
}

/// The part of a seccomp detail that names explicit bad setters, shared
/// with restricted's check: the setters and the bad types, if any.
pub fn explicit_seccomp(pod: &PodView) -> Option<Violation> {
    seccomp_baseline(pod)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn detail(check: &Check, pod: Value) -> Option<(String, String)> {
        (check.run)(&PodView::of_pod(&pod)).map(|v| (v.reason, v.detail))
    }

    #[test]
    fn app_armor_unconfined_fields_and_annotations() {
        let pod = json!({"spec": {"securityContext": {"appArmorProfile": {"type": "Unconfined"}},
            "containers": [{"name": "c", "securityContext": {"appArmorProfile": {"type": "RuntimeDefault"}}}]}});
        assert_eq!(
            detail(&APP_ARMOR, pod),
            Some((
                "forbidden AppArmor profile".into(),
                "pod must not set AppArmor profile type to \"Unconfined\"".into()
            ))
        );
        let pod = json!({"metadata": {"annotations": {
            "container.apparmor.security.beta.kubernetes.io/a": "runtime/default",
            "container.apparmor.security.beta.kubernetes.io/e": "unconfined",
            "container.apparmor.security.beta.kubernetes.io/d": "localhost/foo",
            "container.apparmor.security.beta.kubernetes.io/f": "unknown"}}, "spec": {}});
        assert_eq!(
            detail(&APP_ARMOR, pod),
            Some((
                "forbidden AppArmor profiles".into(),
                "annotations must not set AppArmor profile type to \
             \"container.apparmor.security.beta.kubernetes.io/e=\"unconfined\"\", \
             \"container.apparmor.security.beta.kubernetes.io/f=\"unknown\"\""
                    .into()
            ))
        );
        assert_eq!(detail(&APP_ARMOR, json!({"spec": {}})), None);
    }

    #[test]
    fn selinux_types_users_and_roles() {
        let pod = json!({"spec": {"securityContext": {"seLinuxOptions": {"type": "spc_t"}},
            "containers": [{"name": "c", "securityContext": {"seLinuxOptions": {"user": "root", "type": "container_t"}}},
                           {"name": "ok", "securityContext": {"seLinuxOptions": {"level": "s0:c1"}}}]}});
        assert_eq!(detail(&SELINUX, pod).unwrap().1,
            "pod and container \"c\" set forbidden securityContext.seLinuxOptions: type \"spc_t\"; user may not be set");
    }

    #[test]
    fn seccomp_baseline_refuses_only_an_explicit_unconfined() {
        assert_eq!(
            detail(
                &SECCOMP_BASELINE,
                json!({"spec": {"containers": [{"name": "c"}]}})
            ),
            None
        );
        let pod = json!({"spec": {"containers": [{"name": "c",
            "securityContext": {"seccompProfile": {"type": "Unconfined"}}}]}});
        assert_eq!(
            detail(&SECCOMP_BASELINE, pod).unwrap().1,
            "container \"c\" must not set securityContext.seccompProfile.type to \"Unconfined\""
        );
    }
}
