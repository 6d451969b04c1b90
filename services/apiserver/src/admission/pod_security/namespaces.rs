//! The namespace side of PodSecurity: labels that do not parse are a 422
//! on the namespace's create or update, and an update that makes the
//! enforce level stricter warns about the namespace's existing pods that
//! the new level would refuse (kube's `EvaluatePodsInNamespace`).

use std::collections::BTreeMap;

use serde_json::Value;

use super::checks::{evaluate, reasons};
use super::levels::{labels_of, Level, LevelVersion, Policy};
use super::pod::PodView;
use crate::admission::objects::{Freshness, Objects, PODS};
use crate::admission::{AdmissionError, Attributes, BadField, Operation};

/// kube checks at most this many existing pods.
const MAX_PODS: usize = 3000;

/// Refuses a namespace whose PodSecurity labels do not parse; on an
/// update that tightens enforce, warns about the pods already there
/// (unless the namespace is exempt).
pub async fn validate(
    objects: &dyn Objects,
    attributes: &Attributes<'_>,
    namespace: &Value,
    exempt: bool,
) -> Result<(), AdmissionError> {
    let (policy, bad) = Policy::from_labels(&labels_of(namespace));
    if !bad.is_empty() {
        let fields = bad.into_iter().map(|b| BadField {
            field: format!("metadata.labels[{}]", b.label),
            value: b.value,
            why: b.why,
        });
        return Err(AdmissionError::Invalid(fields.collect()));
    }
    // An exempt namespace's pods are never checked, so neither warned about.
    let Some(old) = attributes
        .old_object
        .filter(|_| attributes.operation == Operation::Update && !exempt)
    else {
        return Ok(());
    };
    let (before, _) = Policy::from_labels(&labels_of(old));
    if !tightened(before.enforce, policy.enforce) {
        return Ok(());
    }
    let pods = objects
        .list(PODS, attributes.name, Freshness::Cached)
        .await?;
    for warning in existing_pods(attributes.name, policy.enforce, &pods) {
        attributes.feedback.warn(warning);
    }
    Ok(())
}

/// Whether the pods already there need a look: kube skips it when enforce
/// is unchanged, privileged, or the same version at a level no stricter.
fn tightened(before: LevelVersion, after: LevelVersion) -> bool {
    after != before
        && after.level != Level::Privileged
        && !(after.version == before.version && after.level <= before.level)
}

/// kube's warnings: one line naming the new level, then one per distinct
/// set of reasons, with the first pod's name (by name) and how many
/// others share it, sorted.
fn existing_pods(namespace: &str, enforce: LevelVersion, pods: &[Value]) -> Vec<String> {
    let mut by_reasons: BTreeMap<String, (String, usize)> = BTreeMap::new();
    let checked = pods.len().min(MAX_PODS);
    for pod in &pods[..checked] {
        let found = evaluate(enforce, &PodView::of_pod(pod));
        if found.is_empty() {
            continue;
        }
        let name = crate::object::meta::name(pod).to_string();
        let entry = by_reasons
            .entry(reasons(&found))
            .or_insert((name.clone(), 0));
        entry.0 = entry.0.clone().min(name);
        entry.1 += 1;
    }
    let mut warnings = Vec::new();
    if checked < pods.len() {
        warnings.push(format!(
            "new PodSecurity enforce level only checked against the first {checked} of {} existing pods",
            pods.len()
        ));
    }
    if by_reasons.is_empty() {
        return warnings;
    }
    warnings.push(format!(
        "existing pods in namespace {namespace:?} violate the new PodSecurity enforce level \"{enforce}\""
    ));
    let mut per_pod: Vec<String> = by_reasons
        .into_iter()
        .map(|(reasons, (first, count))| match count {
            1 => format!("{first}: {reasons}"),
            2 => format!("{first} (and 1 other pod): {reasons}"),
            n => format!("{first} (and {} other pods): {reasons}", n - 1),
        })
        .collect();
    per_pod.sort();
    warnings.extend(per_pod);
    warnings
}

#[cfg(test)]
mod tests {
    use super::super::levels::Version;
    use super::*;
    use serde_json::json;

    fn lv(level: Level, version: Version) -> LevelVersion {
        LevelVersion { level, version }
    }

    #[test]
    fn only_a_stricter_or_different_version_enforce_is_looked_at() {
        let latest = Version::Latest;
        let baseline = lv(Level::Baseline, latest);
        assert!(tightened(baseline, lv(Level::Restricted, latest)));
        assert!(!tightened(baseline, baseline));
        assert!(!tightened(baseline, lv(Level::Privileged, latest)));
        assert!(!tightened(lv(Level::Restricted, latest), baseline));
        assert!(tightened(baseline, lv(Level::Baseline, Version::Minor(20))));
    }

    #[test]
    fn existing_pods_are_grouped_by_their_reasons() {
        let pod = |name: &str, spec: Value| json!({"metadata": {"name": name}, "spec": spec});
        let host = json!({"hostNetwork": true, "containers": [{"name": "c"}]});
        let pods = [
            pod("web-2", host.clone()),
            pod("web-1", host.clone()),
            pod(
                "db",
                json!({"hostPID": true, "containers": [{"name": "c", "securityContext": {"privileged": true}}]}),
            ),
            pod("fine", json!({"containers": [{"name": "c"}]})),
        ];
        let warnings = existing_pods("ns", lv(Level::Baseline, Version::Latest), &pods);
        assert_eq!(
            warnings,
            [
                "existing pods in namespace \"ns\" violate the new PodSecurity enforce level \"baseline:latest\"",
                "db: host namespaces, privileged",
                "web-1 (and 1 other pod): host namespaces",
            ]
        );
        assert!(existing_pods("ns", lv(Level::Baseline, Version::Latest), &pods[3..]).is_empty());
    }
}
