//! core/v1 LimitRanges and ResourceQuotas: the limits admission
//! enforces (see `admission::plugins`).

use std::sync::Arc;

use k8s_openapi::api::core::v1::{LimitRange, ResourceQuota};
use serde_json::{json, Value};

use crate::error::Cause;
use crate::registry::definition::ResourceDef;
use crate::registry::kinds::common::cells::{self, CREATED_AT};
use crate::registry::kinds::common::simple::{def, simple, Simple};
use crate::registry::kinds::common::validation::{self, items};
use crate::registry::strategy::{age_cell, Column, Strategy, AGE};
use crate::registry::subresource::STATUS;

pub fn all() -> Vec<Arc<dyn Strategy>> {
    vec![
        Arc::new(Simple::<LimitRange> {
            columns: || vec![CREATED_AT],
            cells: |o| vec![cells::created_at_cell(o)],
            validate: validate_limit_range,
            ..simple(ResourceDef {
                short_names: &["limits"],
                ..def("", "limitranges", "LimitRange", "limitrange")
            })
        }),
        Arc::new(Simple::<ResourceQuota> {
            columns: quota_columns,
            cells: quota_cells,
            validate: validate_quota,
            on_create: |o| o["status"] = json!({}),
            ..simple(ResourceDef {
                short_names: &["quota"],
                subresources: &[STATUS],
                ..def("", "resourcequotas", "ResourceQuota", "resourcequota")
            })
        }),
    ]
}

fn validate_limit_range(obj: &Value) -> Vec<Cause> {
    let mut causes = Vec::new();
    let kinds = ["Container", "Pod", "PersistentVolumeClaim"];
    for (i, limit) in items(&obj["spec"]["limits"]) {
        let field = format!("spec.limits[{i}].type");
        match limit["type"].as_str() {
            Some(kind) if kinds.contains(&kind) => {}
            _ => causes.push(validation::unsupported(field, &limit["type"], &kinds)),
        }
    }
    causes
}

fn validate_quota(obj: &Value) -> Vec<Cause> {
    let mut causes = Vec::new();
    let scopes = [
        "BestEffort",
        "CrossNamespacePodAffinity",
        "NotBestEffort",
        "NotTerminating",
        "PriorityClass",
        "Terminating",
    ];
    for (i, scope) in items(&obj["spec"]["scopes"]) {
        if !scope.as_str().is_some_and(|s| scopes.contains(&s)) {
            causes.push(validation::unsupported(
                format!("spec.scopes[{i}]"),
                scope,
                &scopes,
            ));
        }
    }
    causes
}

fn quota_columns() -> Vec<Column> {
    vec![
        Column::new("Request", "string", "Request represents a minimum amount of cpu/memory that a container may consume."),
        Column::new("Limit", "string", "Limits control the maximum amount of cpu/memory that a container may use independent of contention on the node."),
        AGE,
    ]
}

/// `resource: used/hard` for each hard limit, sorted, `limits.*` in the
/// Limit column and the rest in Request.
fn quota_cells(obj: &Value) -> Vec<Value> {
    let (mut requests, mut limits) = (Vec::new(), Vec::new());
    for (name, hard) in obj["spec"]["hard"].as_object().into_iter().flatten() {
        let used = obj["status"]["used"][name].as_str().unwrap_or("0");
        let entry = format!("{name}: {used}/{}", hard.as_str().unwrap_or(""));
        match name.split_once('.') {
            Some(("limits", _)) => limits.push(entry),
            _ => requests.push(entry),
        }
    }
    vec![
        requests.join(", ").into(),
        limits.join(", ").into(),
        age_cell(obj),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotas_split_requests_and_limits() {
        let obj = json!({"metadata": {"name": "q"}, "spec": {"hard": {"limits.cpu": "4", "pods": "10", "requests.cpu": "2"}},
                         "status": {"used": {"pods": "3"}}});
        assert_eq!(
            quota_cells(&obj)[..2],
            [
                json!("pods: 3/10, requests.cpu: 0/2"),
                json!("limits.cpu: 0/4")
            ]
        );
        let bad = json!({"spec": {"scopes": ["Sometimes"]}});
        assert_eq!(validate_quota(&bad)[0].field, "spec.scopes[0]");
    }

    #[test]
    fn limit_ranges_name_known_types() {
        let range = json!({"spec": {"limits": [{"type": "Container"}, {"type": "Node"}]}});
        assert_eq!(validate_limit_range(&range)[0].field, "spec.limits[1].type");
    }
}
