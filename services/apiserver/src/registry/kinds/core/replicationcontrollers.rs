//! core/v1 ReplicationController: the oldest replicated workload, whose
//! selector is a plain label map and may be left to the template's labels.

use std::sync::Arc;

use k8s_openapi::api::core::v1::ReplicationController;

use super::workload::{self, replicated};
use crate::registry::definition::ResourceDef;
use crate::registry::kinds::common::simple::{def, Simple};
use crate::registry::strategy::Strategy;

pub fn replication_controllers() -> Arc<dyn Strategy> {
    Arc::new(Simple::<ReplicationController> {
        def: ResourceDef {
            short_names: &["rc"],
            ..replicated::<ReplicationController>(def(
                "",
                "replicationcontrollers",
                "ReplicationController",
                "replicationcontroller",
            ))
            .def
        },
        validate: |o| workload::validate(o, false),
        ..replicated(def(
            "",
            "replicationcontrollers",
            "ReplicationController",
            "replicationcontroller",
        ))
    })
}
