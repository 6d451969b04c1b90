//! apps/v1 ReplicaSets, StatefulSets and DaemonSets: data over their pod
//! templates (see `core::workload`).

use std::sync::Arc;

use k8s_openapi::api::apps::v1::{DaemonSet, ReplicaSet, StatefulSet};

use crate::registry::definition::ResourceDef;
use crate::registry::kinds::common::simple::{def, simple, Simple};
use crate::registry::kinds::core::pods::strategy::default_template;
use crate::registry::kinds::core::workload::{self, replicated};
use crate::registry::strategy::Strategy;
use crate::registry::subresource::STATUS;

pub fn replica_sets() -> Arc<dyn Strategy> {
    Arc::new(replicated::<ReplicaSet>(ResourceDef {
        short_names: &["rs"],
        ..def("apps", "replicasets", "ReplicaSet", "replicaset")
    }))
}

pub fn stateful_sets() -> Arc<dyn Strategy> {
    Arc::new(replicated::<StatefulSet>(ResourceDef {
        short_names: &["sts"],
        ..def("apps", "statefulsets", "StatefulSet", "statefulset")
    }))
}

pub fn daemon_sets() -> Arc<dyn Strategy> {
    Arc::new(Simple::<DaemonSet> {
        def: ResourceDef {
            short_names: &["ds"],
            categories: &["all"],
            subresources: &[STATUS],
            ..def("apps", "daemonsets", "DaemonSet", "daemonset")
        },
        validate: |o| workload::validate(o, true),
        defaults: default_template,
        ..simple(def("apps", "daemonsets", "DaemonSet", "daemonset"))
    })
}
