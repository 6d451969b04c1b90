//! core/v1 Event: what happened to an object; events expire after the
//! server's event TTL, as kube-apiserver's do.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Event;

use crate::registry::definition::ResourceDef;
use crate::registry::kinds::common::simple::{def, simple, Simple};
use crate::registry::strategy::{age_cell, Column, Strategy, AGE};

pub fn events() -> Arc<dyn Strategy> {
    Arc::new(Simple::<Event> {
        def: ResourceDef {
            short_names: &["ev"],
            expires: true,
            ..def("", "events", "Event", "event")
        },
        columns: || {
            vec![
                Column::new("Type", "string", "Type of this event."),
                Column::new("Reason", "string", "Why the event happened."),
                Column::new("Object", "string", "The object this event is about."),
                Column::new("Message", "string", "A human-readable description."),
                AGE,
            ]
        },
        cells: |o| {
            let object = format!(
                "{}/{}",
                o["involvedObject"]["kind"]
                    .as_str()
                    .unwrap_or("")
                    .to_lowercase(),
                o["involvedObject"]["name"].as_str().unwrap_or("")
            );
            vec![
                o["type"].clone(),
                o["reason"].clone(),
                object.into(),
                o["message"].clone(),
                age_cell(o),
            ]
        },
        fields: &[
            ("involvedObject.kind", "/involvedObject/kind"),
            ("involvedObject.namespace", "/involvedObject/namespace"),
            ("involvedObject.name", "/involvedObject/name"),
            ("involvedObject.uid", "/involvedObject/uid"),
            ("involvedObject.apiVersion", "/involvedObject/apiVersion"),
            (
                "involvedObject.resourceVersion",
                "/involvedObject/resourceVersion",
            ),
            ("involvedObject.fieldPath", "/involvedObject/fieldPath"),
            ("reason", "/reason"),
            ("reportingComponent", "/reportingComponent"),
            ("source", "/source/component"),
            ("type", "/type"),
        ],
        ..simple(def("", "events", "Event", "event"))
    })
}
