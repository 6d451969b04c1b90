//! Turning the endpoints a Service (or a mirrored Endpoints) should have
//! into the fewest EndpointSlice writes, kube's reconciler in outline:
//! endpoints already in a slice stay there (updated in place when their
//! conditions change), gone ones are removed, new ones fill slices that
//! are being written anyway before any other, then one unchanged slice
//! with room for them all, then new slices of at most `max` each. Slices
//! left empty are deleted; when nothing at all is left, one empty
//! placeholder slice per address type stays, so consumers can tell "no
//! endpoints" from "not synced yet".
//!
//! This module is shared with the mirroring controller: it knows nothing
//! of Services or pods, only of groups of endpoints and a template for
//! the slices' metadata.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::discovery::v1::{Endpoint, EndpointPort, EndpointSlice};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::ObjectMeta;

/// Endpoints of one address type serving one port set.
#[derive(Clone, Debug, PartialEq)]
pub struct Group {
    pub address_type: String,
    pub ports: Vec<EndpointPort>,
    pub endpoints: Vec<Endpoint>,
}

/// What every slice of one owner carries.
#[derive(Clone, Debug)]
pub struct Template {
    pub namespace: String,
    pub generate_name: String,
    pub labels: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
    pub owner: OwnerReference,
}

/// The writes that bring the slices to the desired state.
#[derive(Debug, Default)]
pub struct Plan {
    pub create: Vec<EndpointSlice>,
    pub update: Vec<EndpointSlice>,
    pub delete: Vec<Arc<EndpointSlice>>,
}

impl Plan {
    pub fn is_empty(&self) -> bool {
        self.create.is_empty() && self.update.is_empty() && self.delete.is_empty()
    }
}

/// A port set as text, the same for the same ports in any order.
pub fn ports_key(ports: &[EndpointPort]) -> String {
    let mut parts: Vec<String> = ports
        .iter()
        .map(|p| {
            format!(
                "{}/{}/{}/{}",
                p.name.as_deref().unwrap_or(""),
                p.port.unwrap_or(0),
                p.protocol.as_deref().unwrap_or("TCP"),
                p.app_protocol.as_deref().unwrap_or("")
            )
        })
        .collect();
    parts.sort();
    parts.join(",")
}

/// An endpoint's identity across syncs: its addresses and what it points to.
pub fn endpoint_key(endpoint: &Endpoint) -> String {
    let target = endpoint.target_ref.as_ref();
    let name = target.and_then(|t| t.name.as_deref()).unwrap_or("");
    format!("{}|{name}", endpoint.addresses.join(","))
}

fn group_key(address_type: &str, ports: &[EndpointPort]) -> (String, String) {
    (address_type.to_string(), ports_key(ports))
}

fn slice_key(slice: &EndpointSlice) -> (String, String) {
    group_key(
        &slice.address_type,
        slice.ports.as_deref().unwrap_or_default(),
    )
}

/// The plan for `existing` (this owner's slices) to carry `desired`, at
/// most `max` endpoints a slice; `address_types` are those a placeholder
/// is kept for when there is nothing to carry.
pub fn plan(
    existing: &[Arc<EndpointSlice>],
    desired: Vec<Group>,
    template: &Template,
    max: usize,
    address_types: &[&str],
) -> Plan {
    let mut plan = Plan::default();
    let mut by_group: BTreeMap<(String, String), Vec<Arc<EndpointSlice>>> = BTreeMap::new();
    for slice in existing {
        by_group
            .entry(slice_key(slice))
            .or_default()
            .push(slice.clone());
    }
    let total: usize = desired.iter().map(|g| g.endpoints.len()).sum();
    for group in desired {
        let slices = by_group
            .remove(&group_key(&group.address_type, &group.ports))
            .unwrap_or_default();
        plan_group(&mut plan, &slices, group, template, max);
    }
    plan.delete.extend(by_group.into_values().flatten());
    if total == 0 {
        keep_placeholders(&mut plan, template, address_types);
    }
    plan
}

/// An existing slice being brought up to date.
struct Working {
    slice: EndpointSlice,
    changed: bool,
}

fn plan_group(
    plan: &mut Plan,
    slices: &[Arc<EndpointSlice>],
    group: Group,
    template: &Template,
    max: usize,
) {
    let mut wanted: BTreeMap<String, Endpoint> = group
        .endpoints
        .into_iter()
        .map(|e| (endpoint_key(&e), e))
        .collect();
    let mut working: Vec<Working> = Vec::new();
    for slice in slices {
        let mut kept = Vec::new();
        let mut changed = !metadata_current(slice, template);
        for endpoint in &slice.endpoints {
            match wanted.remove(&endpoint_key(endpoint)) {
                Some(want) => {
                    changed |= &want != endpoint;
                    kept.push(want);
                }
                None => changed = true,
            }
        }
        if kept.is_empty() {
            plan.delete.push(slice.clone());
            continue;
        }
        let mut slice = (**slice).clone();
        slice.endpoints = kept;
        working.push(Working { slice, changed });
    }
    let mut fresh: Vec<Endpoint> = wanted.into_values().collect();
    fill_changed(&mut working, &mut fresh, max);
    fill_one_unchanged(&mut working, &mut fresh, max);
    for working in working {
        if working.changed {
            let mut slice = working.slice;
            apply_metadata(&mut slice.metadata, template);
            plan.update.push(slice);
        }
    }
    for chunk in fresh.chunks(max.max(1)) {
        plan.create.push(new_slice(
            template,
            &group.address_type,
            &group.ports,
            chunk.to_vec(),
        ));
    }
}

/// New endpoints go first into slices being written anyway.
fn fill_changed(working: &mut [Working], fresh: &mut Vec<Endpoint>, max: usize) {
    for slot in working.iter_mut().filter(|w| w.changed) {
        while slot.slice.endpoints.len() < max {
            let Some(endpoint) = fresh.pop() else { return };
            slot.slice.endpoints.push(endpoint);
        }
    }
}

/// Then all of what is left into the unchanged slice with the least room
/// that still takes them all, rather than a new slice.
fn fill_one_unchanged(working: &mut [Working], fresh: &mut Vec<Endpoint>, max: usize) {
    if fresh.is_empty() {
        return;
    }
    let room = |w: &Working| max.saturating_sub(w.slice.endpoints.len());
    let best = working
        .iter_mut()
        .filter(|w| !w.changed && room(w) >= fresh.len())
        .min_by_key(|w| room(w));
    if let Some(slot) = best {
        slot.slice.endpoints.append(fresh);
        slot.changed = true;
    }
}

/// Keeps one empty slice per address type when there is nothing to carry:
/// an existing placeholder is kept (not deleted), a missing one created.
fn keep_placeholders(plan: &mut Plan, template: &Template, address_types: &[&str]) {
    for address_type in address_types {
        let is_placeholder = |s: &Arc<EndpointSlice>| {
            s.address_type == *address_type
                && s.endpoints.is_empty()
                && s.ports.as_ref().is_none_or(|p| p.is_empty())
        };
        if let Some(position) = plan.delete.iter().position(is_placeholder) {
            let kept = plan.delete.remove(position);
            if !metadata_current(&kept, template) {
                let mut slice = (*kept).clone();
                apply_metadata(&mut slice.metadata, template);
                plan.update.push(slice);
            }
            continue;
        }
        plan.create
            .push(new_slice(template, address_type, &[], Vec::new()));
    }
}

fn new_slice(
    template: &Template,
    address_type: &str,
    ports: &[EndpointPort],
    endpoints: Vec<Endpoint>,
) -> EndpointSlice {
    let mut metadata = ObjectMeta {
        namespace: Some(template.namespace.clone()),
        generate_name: Some(template.generate_name.clone()),
        ..ObjectMeta::default()
    };
    apply_metadata(&mut metadata, template);
    EndpointSlice {
        metadata,
        address_type: address_type.to_string(),
        endpoints,
        ports: Some(ports.to_vec()),
    }
}

fn metadata_current(slice: &EndpointSlice, template: &Template) -> bool {
    let meta = &slice.metadata;
    let labels = meta.labels.clone().unwrap_or_default();
    let annotations = meta.annotations.clone().unwrap_or_default();
    let owned = meta
        .owner_references
        .iter()
        .flatten()
        .any(|r| r.uid == template.owner.uid && r.controller == Some(true));
    labels == template.labels && annotations == template.annotations && owned
}

fn apply_metadata(meta: &mut ObjectMeta, template: &Template) {
    meta.labels = Some(template.labels.clone());
    meta.annotations = (!template.annotations.is_empty()).then(|| template.annotations.clone());
    meta.owner_references = Some(vec![template.owner.clone()]);
}
