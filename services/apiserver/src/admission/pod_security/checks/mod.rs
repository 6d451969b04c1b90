//! The Pod Security Standards' checks, in kube's order, and what a pod
//! evaluated against a level and version violates. The baseline checks
//! run at both levels except the ones the restricted level replaces with
//! stricter versions of its own (`overlap`: capabilities, hostPath
//! volumes, seccomp), which run at baseline only.

mod baseline;
mod check;
mod profiles;
mod restricted;

use super::levels::{Level, LevelVersion};
use super::pod::PodView;

pub use check::{Check, Violation};

/// Every check, in the order kube registers them (its files' names).
const ORDER: [&Check; 17] = [
    &restricted::ALLOW_PRIVILEGE_ESCALATION,
    &profiles::APP_ARMOR,
    &baseline::CAPABILITIES,
    &restricted::CAPABILITIES,
    &baseline::HOST_NAMESPACES,
    &baseline::HOST_PATH_VOLUMES,
    &baseline::HOST_PORTS,
    &baseline::PRIVILEGED,
    &baseline::PROC_MOUNT,
    &restricted::VOLUMES,
    &restricted::RUN_AS_NON_ROOT,
    &restricted::RUN_AS_USER,
    &profiles::SELINUX,
    &profiles::SECCOMP_BASELINE,
    &restricted::SECCOMP,
    &baseline::SYSCTLS,
    &baseline::WINDOWS_HOST_PROCESS,
];

fn all() -> impl Iterator<Item = &'static Check> {
    ORDER.into_iter()
}

/// What `pod` violates at `policy` (nothing at privileged): the baseline
/// checks first, then the overlapping baseline ones or the restricted
/// ones, each group in kube's order.
pub fn evaluate(policy: LevelVersion, pod: &PodView) -> Vec<Violation> {
    let applies = |c: &&Check| policy.version.includes(c.since);
    let group = |keep: &dyn Fn(&Check) -> bool| -> Vec<Violation> {
        all()
            .filter(|c| keep(c))
            .filter(applies)
            .filter_map(|c| (c.run)(pod))
            .collect()
    };
    match policy.level {
        Level::Privileged => Vec::new(),
        Level::Baseline => {
            let mut found = group(&|c| c.level == Level::Baseline && !c.overlap);
            found.extend(group(&|c| c.level == Level::Baseline && c.overlap));
            found
        }
        Level::Restricted => {
            let mut found = group(&|c| c.level == Level::Baseline && !c.overlap);
            found.extend(group(&|c| c.level == Level::Restricted));
            found
        }
    }
}

/// kube's `ForbiddenDetail` of all violations: `reason (detail), ...`.
pub fn details(violations: &[Violation]) -> String {
    violations
        .iter()
        .map(|v| match v.detail.is_empty() {
            true => v.reason.clone(),
            false => format!("{} ({})", v.reason, v.detail),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// kube's `ForbiddenReason`: the reasons only.
pub fn reasons(violations: &[Violation]) -> String {
    let reasons: Vec<&str> = violations.iter().map(|v| v.reason.as_str()).collect();
    reasons.join(", ")
}

#[cfg(test)]
mod tests {
    use super::super::levels::Version;
    use super::*;
    use serde_json::json;

    fn at(level: Level) -> LevelVersion {
        LevelVersion {
            level,
            version: Version::Latest,
        }
    }

    #[test]
    fn a_bare_pod_passes_baseline_and_fails_restricted_as_kube_says() {
        let pod = json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "i"}]}});
        let view = PodView::of_pod(&pod);
        assert!(evaluate(at(Level::Baseline), &view).is_empty());
        assert!(evaluate(at(Level::Privileged), &view).is_empty());
        let found = evaluate(at(Level::Restricted), &view);
        assert_eq!(
            details(&found),
            "allowPrivilegeEscalation != false (container \"c\" must set securityContext.allowPrivilegeEscalation=false), \
             unrestricted capabilities (container \"c\" must set securityContext.capabilities.drop=[\"ALL\"]), \
             runAsNonRoot != true (pod or container \"c\" must set securityContext.runAsNonRoot=true), \
             seccompProfile (pod or container \"c\" must set securityContext.seccompProfile.type to \"RuntimeDefault\" or \"Localhost\")"
        );
        assert_eq!(
            reasons(&found),
            "allowPrivilegeEscalation != false, unrestricted capabilities, runAsNonRoot != true, seccompProfile"
        );
    }

    #[test]
    fn a_compliant_pod_passes_restricted() {
        let pod = json!({"spec": {
            "securityContext": {"runAsNonRoot": true, "seccompProfile": {"type": "RuntimeDefault"}},
            "containers": [{"name": "c", "securityContext": {"allowPrivilegeEscalation": false,
                "capabilities": {"drop": ["ALL"], "add": ["NET_BIND_SERVICE"]}}}],
            "volumes": [{"name": "v", "emptyDir": {}}, {"name": "s", "secret": {"secretName": "x"}}]}});
        assert_eq!(evaluate(at(Level::Restricted), &PodView::of_pod(&pod)), []);
    }

    #[test]
    fn baseline_failures_come_first_and_overlapping_checks_run_at_one_level_only() {
        let pod = json!({"spec": {"hostNetwork": true,
            "containers": [{"name": "c", "securityContext": {"privileged": true,
                "capabilities": {"add": ["SYS_ADMIN"]}}}]}});
        let view = PodView::of_pod(&pod);
        let baseline = evaluate(at(Level::Baseline), &view);
        assert_eq!(
            details(&baseline),
            "host namespaces (hostNetwork=true), privileged (container \"c\" must not set securityContext.privileged=true), \
             non-default capabilities (container \"c\" must not include \"SYS_ADMIN\" in securityContext.capabilities.add)"
        );
        let restricted = evaluate(at(Level::Restricted), &view);
        let reasons = reasons(&restricted);
        assert!(reasons.starts_with("host namespaces, privileged, allowPrivilegeEscalation != false, unrestricted capabilities"), "{reasons}");
        assert!(!reasons.contains("non-default capabilities"), "{reasons}");
    }

    #[test]
    fn a_pinned_version_skips_checks_newer_than_it() {
        let pod = json!({"spec": {"securityContext": {"runAsNonRoot": true, "seccompProfile": {"type": "RuntimeDefault"}},
            "containers": [{"name": "c", "securityContext": {"allowPrivilegeEscalation": false}}]}});
        let view = PodView::of_pod(&pod);
        let old = LevelVersion {
            level: Level::Restricted,
            version: Version::Minor(21),
        };
        assert_eq!(
            evaluate(old, &view),
            [],
            "capabilities are restricted since v1.22"
        );
        assert_eq!(evaluate(at(Level::Restricted), &view).len(), 1);
    }
}
