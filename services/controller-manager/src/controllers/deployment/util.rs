//! The deployment controller's arithmetic and bookkeeping, kube's
//! `deploymentutil`: surge and unavailability fenceposts, the
//! pod-template-hash, revision annotations, and sums over ReplicaSets.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use crate::intstr::scaled_value;

pub const REVISION: &str = "deployment.kubernetes.io/revision";
pub const REVISION_HISTORY: &str = "deployment.kubernetes.io/revision-history";
pub const DESIRED_REPLICAS: &str = "deployment.kubernetes.io/desired-replicas";
pub const MAX_REPLICAS: &str = "deployment.kubernetes.io/max-replicas";
pub const POD_TEMPLATE_HASH: &str = "pod-template-hash";
const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";
const ROLLBACK_TO: &str = "deprecated.deployment.rollback.to";
/// Longest revision-history annotation kept.
const MAX_REVISION_HISTORY_CHARS: usize = 2000;

pub fn replicas(d: &Deployment) -> i32 {
    d.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1)
}

pub fn is_rolling_update(d: &Deployment) -> bool {
    let strategy = d.spec.as_ref().and_then(|s| s.strategy.as_ref());
    strategy
        .and_then(|s| s.type_.as_deref())
        .unwrap_or("RollingUpdate")
        == "RollingUpdate"
}

pub fn is_paused(d: &Deployment) -> bool {
    d.spec.as_ref().and_then(|s| s.paused).unwrap_or(false)
}

pub fn min_ready_seconds(d: &Deployment) -> i32 {
    d.spec
        .as_ref()
        .and_then(|s| s.min_ready_seconds)
        .unwrap_or(0)
}

/// progressDeadlineSeconds, unless it is absent or "never" (MaxInt32).
pub fn progress_deadline(d: &Deployment) -> Option<i32> {
    let seconds = d.spec.as_ref().and_then(|s| s.progress_deadline_seconds)?;
    (seconds != i32::MAX).then_some(seconds)
}

pub fn revision_history_limit(d: &Deployment) -> Option<i32> {
    d.spec.as_ref().and_then(|s| s.revision_history_limit)
}

/// kube's `ResolveFenceposts`: maxSurge rounded up and maxUnavailable
/// rounded down against `desired`; both zero would stall the rollout, so
/// unavailability is then 1.
pub fn resolve_fenceposts(
    max_surge: Option<&IntOrString>,
    max_unavailable: Option<&IntOrString>,
    desired: i32,
) -> Result<(i32, i32), String> {
    let zero = IntOrString::Int(0);
    let surge = scaled_value(max_surge.unwrap_or(&zero), desired, true)?;
    let unavailable = scaled_value(max_unavailable.unwrap_or(&zero), desired, false)?;
    if surge == 0 && unavailable == 0 {
        return Ok((0, 1));
    }
    Ok((surge, unavailable))
}

fn fenceposts(d: &Deployment) -> (i32, i32) {
    let rolling = d
        .spec
        .as_ref()
        .and_then(|s| s.strategy.as_ref())
        .and_then(|s| s.rolling_update.as_ref());
    let default = IntOrString::String("25%".into());
    let surge = rolling
        .and_then(|r| r.max_surge.as_ref())
        .unwrap_or(&default);
    let unavailable = rolling
        .and_then(|r| r.max_unavailable.as_ref())
        .unwrap_or(&default);
    // The API server validates both: an invalid value cannot be stored.
    resolve_fenceposts(Some(surge), Some(unavailable), replicas(d)).unwrap_or((0, 1))
}

/// How many pods above the desired count a rolling update may run.
pub fn max_surge(d: &Deployment) -> i32 {
    match is_rolling_update(d) {
        true => fenceposts(d).0,
        false => 0,
    }
}

/// How many of the desired pods may be unavailable during a rolling update.
pub fn max_unavailable(d: &Deployment) -> i32 {
    let desired = replicas(d);
    if !is_rolling_update(d) || desired == 0 {
        return 0;
    }
    fenceposts(d).1.min(desired)
}

pub fn rs_replicas(rs: &ReplicaSet) -> i32 {
    rs.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1)
}

fn rs_status(rs: &ReplicaSet) -> (i32, i32, i32) {
    let status = rs.status.as_ref();
    (
        status.map_or(0, |s| s.replicas),
        status.and_then(|s| s.ready_replicas).unwrap_or(0),
        status.and_then(|s| s.available_replicas).unwrap_or(0),
    )
}

/// Sum of the ReplicaSets' desired replicas.
pub fn spec_replicas<'a>(sets: impl IntoIterator<Item = &'a ReplicaSet>) -> i32 {
    sets.into_iter().map(rs_replicas).sum()
}

/// Sum of the ReplicaSets' observed pods.
pub fn actual_replicas<'a>(sets: impl IntoIterator<Item = &'a ReplicaSet>) -> i32 {
    sets.into_iter().map(|rs| rs_status(rs).0).sum()
}

pub fn ready_replicas<'a>(sets: impl IntoIterator<Item = &'a ReplicaSet>) -> i32 {
    sets.into_iter().map(|rs| rs_status(rs).1).sum()
}

pub fn available_replicas<'a>(sets: impl IntoIterator<Item = &'a ReplicaSet>) -> i32 {
    sets.into_iter().map(|rs| rs_status(rs).2).sum()
}

pub fn available(rs: &ReplicaSet) -> i32 {
    rs_status(rs).2
}

pub fn annotation<'a>(meta: &'a kube::api::ObjectMeta, key: &str) -> Option<&'a str> {
    meta.annotations.as_ref()?.get(key).map(String::as_str)
}

/// An object's revision annotation; 0 if absent or unreadable.
pub fn revision(meta: &kube::api::ObjectMeta) -> i64 {
    annotation(meta, REVISION)
        .and_then(|r| r.parse().ok())
        .unwrap_or(0)
}

pub fn max_revision<'a>(sets: impl IntoIterator<Item = &'a ReplicaSet>) -> i64 {
    sets.into_iter()
        .map(|rs| revision(&rs.metadata))
        .max()
        .unwrap_or(0)
}

/// The template without its pod-template-hash label, for comparing.
fn without_hash(template: &PodTemplateSpec) -> serde_json::Value {
    let mut value = serde_json::to_value(template).unwrap_or_default();
    if let Some(labels) = value["metadata"]["labels"].as_object_mut() {
        labels.remove(POD_TEMPLATE_HASH);
        if labels.is_empty() {
            value["metadata"]
                .as_object_mut()
                .map(|m| m.remove("labels"));
        }
    }
    value
}

/// kube's `EqualIgnoreHash`.
pub fn equal_ignore_hash(a: &PodTemplateSpec, b: &PodTemplateSpec) -> bool {
    without_hash(a) == without_hash(b)
}

/// The ReplicaSet whose template is the deployment's, oldest first when
/// several are (kube's `FindNewReplicaSet`).
pub fn find_new<'a>(d: &Deployment, sets: &'a [ReplicaSet]) -> Option<&'a ReplicaSet> {
    let template = &d.spec.as_ref()?.template;
    let mut matching: Vec<&ReplicaSet> = sets
        .iter()
        .filter(|rs| {
            let rs_template = rs.spec.as_ref().and_then(|s| s.template.as_ref());
            rs_template.is_some_and(|t| equal_ignore_hash(t, template))
        })
        .collect();
    matching.sort_by(|a, b| creation_order(a, b));
    matching.first().copied()
}

/// Oldest first, then by name (kube's `ReplicaSetsByCreationTimestamp`).
pub fn creation_order(a: &ReplicaSet, b: &ReplicaSet) -> std::cmp::Ordering {
    let at = |rs: &ReplicaSet| rs.metadata.creation_timestamp.as_ref().map(|t| t.0);
    at(a)
        .cmp(&at(b))
        .then_with(|| a.metadata.name.cmp(&b.metadata.name))
}

/// The pod-template-hash of `template` with `collisions`: FNV-1a, its
/// decimal digits spelled in kube's safe alphabet (no vowels, so no words).
pub fn pod_template_hash(template: &PodTemplateSpec, collisions: Option<i32>) -> String {
    let bytes = serde_json::to_vec(template).unwrap_or_default();
    safe_encode(&fnv32a(&bytes, collisions).to_string())
}

fn fnv32a(bytes: &[u8], collisions: Option<i32>) -> u32 {
    let mut hash: u32 = 0x811c_9dc5;
    let mut feed = |byte: u8| {
        hash ^= u32::from(byte);
        hash = hash.wrapping_mul(0x0100_0193);
    };
    bytes.iter().copied().for_each(&mut feed);
    if let Some(count) = collisions {
        count.to_le_bytes().into_iter().for_each(feed);
    }
    hash
}

/// kube's `rand.SafeEncodeString`.
fn safe_encode(text: &str) -> String {
    const ALPHANUMS: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    text.bytes()
        .map(|b| ALPHANUMS[b as usize % ALPHANUMS.len()] as char)
        .collect()
}

/// `labels` plus the hash label.
pub fn with_hash_label(
    labels: Option<&BTreeMap<String, String>>,
    hash: &str,
) -> BTreeMap<String, String> {
    let mut labels = labels.cloned().unwrap_or_default();
    labels.insert(POD_TEMPLATE_HASH.into(), hash.into());
    labels
}

fn skip_copy(key: &str) -> bool {
    matches!(
        key,
        LAST_APPLIED | REVISION | REVISION_HISTORY | DESIRED_REPLICAS | MAX_REPLICAS | ROLLBACK_TO
    )
}

/// Copies the deployment's own annotations (kubernetes.io/change-cause,
/// ...) onto the ReplicaSet; true if anything changed.
fn copy_annotations(d: &Deployment, rs: &mut ReplicaSet) -> bool {
    let annotations = rs.metadata.annotations.get_or_insert_with(BTreeMap::new);
    let mut changed = false;
    for (key, value) in d.metadata.annotations.iter().flatten() {
        if skip_copy(key) || annotations.get(key) == Some(value) {
            continue;
        }
        annotations.insert(key.clone(), value.clone());
        changed = true;
    }
    changed
}

/// Sets desired-replicas and max-replicas; true if they changed.
pub fn set_replicas_annotations(rs: &mut ReplicaSet, desired: i32, max: i32) -> bool {
    let annotations = rs.metadata.annotations.get_or_insert_with(BTreeMap::new);
    let mut changed = false;
    for (key, value) in [(DESIRED_REPLICAS, desired), (MAX_REPLICAS, max)] {
        let value = value.to_string();
        if annotations.get(key) != Some(&value) {
            annotations.insert(key.to_string(), value);
            changed = true;
        }
    }
    changed
}

/// kube's `SetNewReplicaSetAnnotations`: the deployment's annotations,
/// the revision (only ever raised; a raised one that existed goes to the
/// revision history: a rollback), and, for a new ReplicaSet, the replica
/// annotations. True if anything changed.
pub fn set_new_rs_annotations(
    d: &Deployment,
    rs: &mut ReplicaSet,
    new_revision: i64,
    exists: bool,
) -> bool {
    let mut changed = copy_annotations(d, rs);
    let annotations = rs.metadata.annotations.get_or_insert_with(BTreeMap::new);
    let old = annotations.get(REVISION).cloned();
    let old_number = match old.as_deref().map(str::parse::<i64>) {
        None => 0,
        Some(Ok(n)) => n,
        Some(Err(_)) => return changed,
    };
    if old_number < new_revision {
        annotations.insert(REVISION.into(), new_revision.to_string());
        changed = true;
        if let Some(old) = old {
            record_history(annotations, &old);
        }
    }
    if !exists && set_replicas_annotations(rs, replicas(d), replicas(d) + max_surge(d)) {
        changed = true;
    }
    changed
}

/// Appends `old` to the revision history, dropping the oldest entries
/// past the length limit.
fn record_history(annotations: &mut BTreeMap<String, String>, old: &str) {
    let history = annotations
        .get(REVISION_HISTORY)
        .cloned()
        .unwrap_or_default();
    let mut entries: Vec<&str> = history.split(',').filter(|e| !e.is_empty()).collect();
    entries.push(old);
    while entries.join(",").len() > MAX_REVISION_HISTORY_CHARS && entries.len() > 1 {
        entries.remove(0);
    }
    annotations.insert(REVISION_HISTORY.into(), entries.join(","));
}

/// Whether the new ReplicaSet has all the deployment's pods, available.
pub fn is_saturated(d: &Deployment, rs: Option<&ReplicaSet>) -> bool {
    let Some(rs) = rs else { return false };
    let desired = annotation(&rs.metadata, DESIRED_REPLICAS).and_then(|v| v.parse::<i32>().ok());
    rs_replicas(rs) == replicas(d) && desired == Some(replicas(d)) && available(rs) == replicas(d)
}

/// The replicas a rolling update (or Recreate) gives the new ReplicaSet
/// next (kube's `NewRSNewReplicas`).
pub fn new_rs_new_replicas(d: &Deployment, all: &[&ReplicaSet], new_rs_replicas: i32) -> i32 {
    if !is_rolling_update(d) {
        return replicas(d);
    }
    let max_total = replicas(d) + max_surge(d);
    let current = spec_replicas(all.iter().copied());
    if current >= max_total {
        return new_rs_replicas;
    }
    let scale_up = (max_total - current).min(replicas(d) - new_rs_replicas);
    new_rs_replicas + scale_up
}

/// Every desired pod updated, present and available, and this generation seen.
pub fn deployment_complete(
    d: &Deployment,
    status: &k8s_openapi::api::apps::v1::DeploymentStatus,
) -> bool {
    let want = replicas(d);
    status.updated_replicas.unwrap_or(0) == want
        && status.replicas.unwrap_or(0) == want
        && status.available_replicas.unwrap_or(0) == want
        && status.observed_generation.unwrap_or(0) >= d.metadata.generation.unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> IntOrString {
        IntOrString::String(s.into())
    }

    /// kube's table for ResolveFenceposts and its neighbours.
    #[test]
    fn fenceposts_round_surge_up_and_unavailable_down() {
        let cases: Vec<(IntOrString, IntOrString, i32, (i32, i32))> = vec![
            (p("0%"), p("0%"), 0, (0, 1)),
            (p("39%"), p("39%"), 10, (4, 3)),
            (p("25%"), p("25%"), 10, (3, 2)),
            (p("25%"), p("25%"), 1, (1, 0)),
            (p("25%"), p("25%"), 3, (1, 0)),
            (p("25%"), p("25%"), 4, (1, 1)),
            (IntOrString::Int(0), p("25%"), 3, (0, 1)),
            (p("50%"), IntOrString::Int(0), 1, (1, 0)),
            (p("100%"), p("100%"), 5, (5, 5)),
            (IntOrString::Int(1), IntOrString::Int(1), 0, (1, 1)),
            (IntOrString::Int(5), IntOrString::Int(1), 3, (5, 1)),
            (p("1%"), IntOrString::Int(0), 10, (1, 0)),
        ];
        for (surge, unavailable, desired, want) in cases {
            let got = resolve_fenceposts(Some(&surge), Some(&unavailable), desired).unwrap();
            assert_eq!(
                got, want,
                "surge {surge:?} unavailable {unavailable:?} desired {desired}"
            );
        }
        assert!(resolve_fenceposts(Some(&p("oops")), None, 10).is_err());
        assert!(resolve_fenceposts(Some(&p("55%")), Some(&p("urg")), 10).is_err());
    }

    fn deployment(replicas: i32, surge: &str, unavailable: &str) -> Deployment {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "d"},
            "spec": {"replicas": replicas, "selector": {}, "template": {},
                "strategy": {"type": "RollingUpdate",
                    "rollingUpdate": {"maxSurge": surge, "maxUnavailable": unavailable}}},
        }))
        .unwrap()
    }

    #[test]
    fn max_unavailable_never_exceeds_replicas() {
        assert_eq!(max_unavailable(&deployment(2, "0%", "100%")), 2);
        assert_eq!(max_unavailable(&deployment(0, "25%", "25%")), 0);
        assert_eq!(max_unavailable(&deployment(10, "25%", "25%")), 2);
        assert_eq!(max_surge(&deployment(10, "25%", "25%")), 3);
    }

    #[test]
    fn the_hash_ignores_nothing_but_collisions_change_it() {
        let template: PodTemplateSpec = serde_json::from_value(serde_json::json!({
            "metadata": {"labels": {"app": "web"}},
            "spec": {"containers": [{"name": "c", "image": "nginx:1"}]}}))
        .unwrap();
        let a = pod_template_hash(&template, None);
        assert_eq!(a, pod_template_hash(&template, None));
        assert_ne!(a, pod_template_hash(&template, Some(1)));
        let mut other = template.clone();
        other.spec.as_mut().unwrap().containers[0].image = Some("nginx:2".into());
        assert_ne!(a, pod_template_hash(&other, None));
        assert!(a.chars().all(|c| c.is_ascii_alphanumeric()));
        let mut hashed = template.clone();
        hashed.metadata.as_mut().unwrap().labels = Some(with_hash_label(
            template.metadata.as_ref().unwrap().labels.as_ref(),
            &a,
        ));
        assert!(equal_ignore_hash(&template, &hashed));
        assert!(!equal_ignore_hash(&template, &other));
    }

    #[test]
    fn a_rollback_records_the_revision_it_replaces() {
        let d = deployment(3, "25%", "25%");
        let mut rs: ReplicaSet = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "rs", "annotations": {REVISION: "1"}}}))
        .unwrap();
        assert!(set_new_rs_annotations(&d, &mut rs, 3, true));
        let annotations = rs.metadata.annotations.as_ref().unwrap();
        assert_eq!(annotations[REVISION], "3");
        assert_eq!(annotations[REVISION_HISTORY], "1");
        // Never lowered.
        assert!(!set_new_rs_annotations(&d, &mut rs, 2, true));
        assert!(set_new_rs_annotations(&d, &mut rs, 5, true));
        assert_eq!(
            rs.metadata.annotations.as_ref().unwrap()[REVISION_HISTORY],
            "1,3"
        );
    }

    #[test]
    fn new_replica_sets_grow_within_the_surge() {
        let d = deployment(10, "25%", "25%");
        let old: ReplicaSet = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "old"}, "spec": {"replicas": 10, "selector": {}}}))
        .unwrap();
        let new: ReplicaSet = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "new"}, "spec": {"replicas": 0, "selector": {}}}))
        .unwrap();
        assert_eq!(new_rs_new_replicas(&d, &[&old, &new], 0), 3);
    }
}
