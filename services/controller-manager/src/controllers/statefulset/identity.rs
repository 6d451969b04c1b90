//! A StatefulSet pod's stable identity, kube's rules: the name
//! `<set>-<ordinal>`, the hostname and subdomain, the pod-name and
//! pod-index labels, and one PersistentVolumeClaim per claim template,
//! `<template>-<set>-<ordinal>`, mounted in place of a like-named volume.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{
    PersistentVolumeClaim, PersistentVolumeClaimVolumeSource, Pod, PodTemplateSpec, Volume,
};
use kube::api::ObjectMeta;

use crate::history::with_revision_label;
use crate::ownership::controller_ref;

pub const POD_NAME_LABEL: &str = "statefulset.kubernetes.io/pod-name";
pub const POD_INDEX_LABEL: &str = "apps.kubernetes.io/pod-index";

pub fn set_name(set: &StatefulSet) -> &str {
    set.metadata.name.as_deref().unwrap_or_default()
}

/// The ordinal in a pod's name if it is `<set>-<ordinal>`.
pub fn ordinal_of(set: &StatefulSet, pod: &Pod) -> Option<i32> {
    let name = pod.metadata.name.as_deref()?;
    let rest = name.strip_prefix(set_name(set))?.strip_prefix('-')?;
    let ordinal: i32 = rest.parse().ok()?;
    (ordinal >= 0 && ordinal.to_string() == rest).then_some(ordinal)
}

pub fn pod_name(set: &StatefulSet, ordinal: i32) -> String {
    format!("{}-{ordinal}", set_name(set))
}

/// The claim templates of the set.
pub fn claim_templates(set: &StatefulSet) -> &[PersistentVolumeClaim] {
    set.spec
        .as_ref()
        .and_then(|s| s.volume_claim_templates.as_deref())
        .unwrap_or_default()
}

pub fn claim_name(template: &PersistentVolumeClaim, set: &StatefulSet, ordinal: i32) -> String {
    let template_name = template.metadata.name.as_deref().unwrap_or_default();
    format!("{template_name}-{}-{ordinal}", set_name(set))
}

/// The claims the pod with `ordinal` mounts, as they are created: the
/// template's spec, the set's selector labels on top of the template's.
pub fn claims_for(set: &StatefulSet, ordinal: i32) -> Vec<PersistentVolumeClaim> {
    let selector_labels = set
        .spec
        .as_ref()
        .and_then(|s| s.selector.match_labels.clone())
        .unwrap_or_default();
    claim_templates(set)
        .iter()
        .map(|template| {
            let mut labels = template.metadata.labels.clone().unwrap_or_default();
            labels.extend(selector_labels.clone());
            PersistentVolumeClaim {
                metadata: ObjectMeta {
                    name: Some(claim_name(template, set, ordinal)),
                    namespace: set.metadata.namespace.clone(),
                    labels: Some(labels),
                    annotations: template.metadata.annotations.clone(),
                    ..ObjectMeta::default()
                },
                spec: template.spec.clone(),
                status: None,
            }
        })
        .collect()
}

/// The pod with `ordinal` made from `template` (the set's own or a
/// revision's), labelled with `revision`.
pub fn new_pod(set: &StatefulSet, template: &PodTemplateSpec, ordinal: i32, revision: &str) -> Pod {
    let name = pod_name(set, ordinal);
    let from = template.metadata.clone().unwrap_or_default();
    let mut labels: BTreeMap<String, String> = with_revision_label(from.labels.as_ref(), revision);
    labels.insert(POD_NAME_LABEL.into(), name.clone());
    labels.insert(POD_INDEX_LABEL.into(), ordinal.to_string());
    let mut spec = template.spec.clone().unwrap_or_default();
    spec.hostname = Some(name.clone());
    spec.subdomain = set
        .spec
        .as_ref()
        .and_then(|s| s.service_name.clone())
        .filter(|s| !s.is_empty());
    let mut volumes: Vec<Volume> = spec.volumes.take().unwrap_or_default();
    for template in claim_templates(set) {
        let volume_name = template.metadata.name.clone().unwrap_or_default();
        volumes.retain(|v| v.name != volume_name);
        volumes.push(Volume {
            name: volume_name,
            persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                claim_name: claim_name(template, set, ordinal),
                read_only: None,
            }),
            ..Volume::default()
        });
    }
    spec.volumes = (!volumes.is_empty()).then_some(volumes);
    Pod {
        metadata: ObjectMeta {
            name: Some(name),
            namespace: set.metadata.namespace.clone(),
            labels: Some(labels),
            annotations: from.annotations,
            finalizers: from.finalizers,
            owner_references: Some(vec![controller_ref(set)]),
            ..ObjectMeta::default()
        },
        spec: Some(spec),
        status: None,
    }
}

/// The revision label of a pod.
pub fn revision_of(pod: &Pod) -> &str {
    pod.metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(crate::history::CONTROLLER_REVISION_HASH))
        .map_or("", String::as_str)
}
