//! Taints and tolerations, with kube's matching rules.

use k8s_openapi::api::core::v1::{Taint, Toleration};

pub const NO_SCHEDULE: &str = "NoSchedule";
pub const PREFER_NO_SCHEDULE: &str = "PreferNoSchedule";
pub const NO_EXECUTE: &str = "NoExecute";

/// The taint a cordoned node carries (`kubectl cordon`).
pub const UNSCHEDULABLE_TAINT_KEY: &str = "node.kubernetes.io/unschedulable";

pub use capstan_component_helpers::tolerations::tolerates;

/// Whether any of `tolerations` tolerates `taint`.
pub fn tolerated_by(taint: &Taint, tolerations: &[Toleration]) -> bool {
    tolerations.iter().any(|t| tolerates(t, taint))
}

/// The first taint with one of `effects` that no toleration tolerates.
pub fn first_untolerated<'a>(
    taints: &'a [Taint],
    tolerations: &[Toleration],
    effects: &[&str],
) -> Option<&'a Taint> {
    taints
        .iter()
        .find(|taint| effects.contains(&taint.effect.as_str()) && !tolerated_by(taint, tolerations))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn taint(key: &str, value: &str, effect: &str) -> Taint {
        Taint {
            key: key.into(),
            value: Some(value.into()),
            effect: effect.into(),
            time_added: None,
        }
    }

    fn toleration(key: &str, operator: &str, value: &str, effect: &str) -> Toleration {
        let some = |s: &str| (!s.is_empty()).then(|| s.to_string());
        Toleration {
            key: some(key),
            operator: some(operator),
            value: some(value),
            effect: some(effect),
            toleration_seconds: None,
        }
    }

    #[test]
    fn toleration_table() {
        let gpu = taint("gpu", "true", NO_SCHEDULE);
        let cases = [
            (
                "equal key, value and effect",
                toleration("gpu", "Equal", "true", NO_SCHEDULE),
                true,
            ),
            (
                "default operator is Equal",
                toleration("gpu", "", "true", ""),
                true,
            ),
            (
                "different value",
                toleration("gpu", "Equal", "false", ""),
                false,
            ),
            (
                "exists on the key",
                toleration("gpu", "Exists", "", ""),
                true,
            ),
            (
                "exists with no key tolerates everything",
                toleration("", "Exists", "", ""),
                true,
            ),
            (
                "other effect",
                toleration("gpu", "Exists", "", NO_EXECUTE),
                false,
            ),
            ("other key", toleration("tpu", "Exists", "", ""), false),
        ];
        for (name, t, want) in cases {
            assert_eq!(tolerates(&t, &gpu), want, "{name}");
        }
    }

    #[test]
    fn first_untolerated_skips_other_effects() {
        let taints = vec![
            taint("soft", "", PREFER_NO_SCHEDULE),
            taint("hard", "x", NO_SCHEDULE),
        ];
        let found = first_untolerated(&taints, &[], &[NO_SCHEDULE, NO_EXECUTE]);
        assert_eq!(found.map(|t| t.key.as_str()), Some("hard"));
    }
}
