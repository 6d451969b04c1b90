//! apps/v1 ReplicaSets, StatefulSets and DaemonSets: data over their pod
//! templates (see `core::workload`).

use std::sync::Arc;

use k8s_openapi::api::apps::v1::{DaemonSet, ReplicaSet, StatefulSet};
use serde_json::{json, Value};

use crate::registry::definition::ResourceDef;
use crate::registry::kinds::common::cells::map_string;
use crate::registry::kinds::common::defaults::default_at;
use crate::registry::kinds::common::simple::{def, simple, Simple};
use crate::registry::kinds::core::pods::strategy::default_template;
use crate::registry::kinds::core::workload::{self, replicated};
use crate::registry::strategy::{age_cell, Column, Strategy, AGE};
use crate::registry::subresource::STATUS;

pub fn replica_sets() -> Arc<dyn Strategy> {
    Arc::new(replicated::<ReplicaSet>(ResourceDef {
        short_names: &["rs"],
        ..def("apps", "replicasets", "ReplicaSet", "replicaset")
    }))
}

pub fn stateful_sets() -> Arc<dyn Strategy> {
    Arc::new(Simple {
        defaults: stateful_set_defaults,
        ..replicated::<StatefulSet>(ResourceDef {
            short_names: &["sts"],
            ..def("apps", "statefulsets", "StatefulSet", "statefulset")
        })
    })
}

/// apps/v1's defaults: what `kubectl rollout status` and the controller
/// read when the client left them out.
fn stateful_set_defaults(obj: &mut Value) {
    default_template(obj);
    default_at(obj, &["spec", "replicas"], json!(1));
    default_at(obj, &["spec", "podManagementPolicy"], json!("OrderedReady"));
    default_at(obj, &["spec", "revisionHistoryLimit"], json!(10));
    let retention = ["spec", "persistentVolumeClaimRetentionPolicy"];
    default_at(
        obj,
        &[retention[0], retention[1], "whenDeleted"],
        json!("Retain"),
    );
    default_at(
        obj,
        &[retention[0], retention[1], "whenScaled"],
        json!("Retain"),
    );
    default_at(
        obj,
        &["spec", "updateStrategy", "type"],
        json!("RollingUpdate"),
    );
    if obj["spec"]["updateStrategy"]["type"] == "RollingUpdate" {
        let partition = ["spec", "updateStrategy", "rollingUpdate", "partition"];
        default_at(obj, &partition, json!(0));
    }
}

/// apps/v1's defaults: RollingUpdate one node at a time, ten revisions.
fn daemon_set_defaults(obj: &mut Value) {
    default_template(obj);
    default_at(obj, &["spec", "revisionHistoryLimit"], json!(10));
    default_at(
        obj,
        &["spec", "updateStrategy", "type"],
        json!("RollingUpdate"),
    );
    if obj["spec"]["updateStrategy"]["type"] == "RollingUpdate" {
        let rolling = ["spec", "updateStrategy", "rollingUpdate"];
        default_at(
            obj,
            &[rolling[0], rolling[1], rolling[2], "maxUnavailable"],
            json!(1),
        );
        default_at(
            obj,
            &[rolling[0], rolling[1], rolling[2], "maxSurge"],
            json!(0),
        );
    }
}

/// kubectl's columns for DaemonSets.
fn daemon_set_columns() -> Vec<Column> {
    let count = |name, description| Column::new(name, "integer", description);
    vec![
        count("Desired", "The desired number of pods."),
        count("Current", "The current number of pods."),
        count("Ready", "The number of pods ready."),
        count("Up-to-date", "The number of pods updated."),
        count("Available", "The number of pods ready and available."),
        Column::new(
            "Node Selector",
            "string",
            "Which nodes should the pods run on.",
        ),
        AGE,
    ]
}

fn daemon_set_cells(obj: &Value) -> Vec<Value> {
    let selector = &obj["spec"]["template"]["spec"]["nodeSelector"];
    let selector = match selector.as_object().is_some_and(|s| !s.is_empty()) {
        true => map_string(selector),
        false => "<none>".to_string(),
    };
    vec![
        workload::count(obj, "/status/desiredNumberScheduled"),
        workload::count(obj, "/status/currentNumberScheduled"),
        workload::count(obj, "/status/numberReady"),
        workload::count(obj, "/status/updatedNumberScheduled"),
        workload::count(obj, "/status/numberAvailable"),
        selector.into(),
        age_cell(obj),
    ]
}

pub fn daemon_sets() -> Arc<dyn Strategy> {
    Arc::new(Simple::<DaemonSet> {
        def: ResourceDef {
            short_names: &["ds"],
            categories: &["all"],
            subresources: &[STATUS],
            ..def("apps", "daemonsets", "DaemonSet", "daemonset")
        },
        columns: daemon_set_columns,
        cells: daemon_set_cells,
        validate: |o| workload::validate(o, true),
        defaults: daemon_set_defaults,
        ..simple(def("apps", "daemonsets", "DaemonSet", "daemonset"))
    })
}
