//! Types whose strategy is data: a definition, table columns, selectable
//! fields and an optional validation, over the typed Kubernetes object.

use std::marker::PhantomData;
use std::sync::Arc;

use k8s_openapi::api::apps::v1::{DaemonSet, ReplicaSet, StatefulSet};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Endpoints, Event, Node, ReplicationController};
use schemars::gen::SchemaGenerator;
use schemars::schema::Schema;
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;

use super::super::conversion::Conversion;
use super::super::strategy::{age_cell, Column, ResourceDef, Strategy, AGE};
use super::super::typed::{decode, Decoded};
use super::workload;
use crate::auth::{Authorizer, UserInfo};
use crate::error::{ApiError, Cause};
use crate::object::meta::NameRule;

/// Rules about who may write an object (see `Strategy::check_requester`).
pub type CheckRequester =
    fn(&Value, Option<&Value>, (&UserInfo, &dyn Authorizer)) -> Result<(), ApiError>;

pub struct Simple<K> {
    pub def: ResourceDef,
    pub columns: fn() -> Vec<Column>,
    pub cells: fn(&Value) -> Vec<Value>,
    pub fields: &'static [(&'static str, &'static str)],
    pub validate: fn(&Value) -> Vec<Cause>,
    /// Update-only checks (immutable fields), on top of `validate`.
    pub validate_update: fn(&Value, &Value) -> Vec<Cause>,
    /// Defaults, applied on create and on update.
    pub defaults: fn(&mut Value),
    /// Create-only preparation, after `defaults` (status reset, generated
    /// labels).
    pub on_create: fn(&mut Value),
    /// The `Name` cell of a Table row.
    pub name_cell: fn(&Value) -> Value,
    /// Objects expire after the server's event TTL.
    pub expires: bool,
    /// Rules about who may write an object (see `Strategy::check_requester`).
    pub check_requester: CheckRequester,
    /// For a type served in several versions (see `Strategy::conversion`).
    pub conversion: Option<fn() -> Conversion>,
    pub kind: PhantomData<fn() -> K>,
}

impl<K> Strategy for Simple<K>
where
    K: DeserializeOwned + Serialize + JsonSchema + 'static,
{
    fn def(&self) -> &ResourceDef {
        &self.def
    }

    fn decode(&self, value: &Value) -> Result<Decoded, String> {
        decode::<K>(value)
    }

    fn schema(&self, generator: &mut SchemaGenerator) -> Schema {
        generator.subschema_for::<K>()
    }

    fn prepare_for_create(&self, obj: &mut Value) {
        (self.defaults)(obj);
        (self.on_create)(obj);
    }

    fn prepare_for_update(&self, new: &mut Value, _old: &Value) {
        (self.defaults)(new);
    }

    fn validate(&self, obj: &Value) -> Vec<Cause> {
        (self.validate)(obj)
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<Cause> {
        let mut causes = (self.validate)(new);
        causes.extend((self.validate_update)(new, old));
        causes
    }

    fn name_cell(&self, obj: &Value) -> Value {
        (self.name_cell)(obj)
    }

    fn columns(&self) -> Vec<Column> {
        (self.columns)()
    }

    fn cells(&self, obj: &Value) -> Vec<Value> {
        (self.cells)(obj)
    }

    fn selectable_fields(&self) -> &'static [(&'static str, &'static str)] {
        self.fields
    }

    fn expires(&self) -> bool {
        self.expires
    }

    fn scale_of(&self, obj: &Value) -> Option<Value> {
        self.def.scale.then(|| workload::scale_of(obj))
    }

    fn check_requester(
        &self,
        obj: &Value,
        old: Option<&Value>,
        requester: (&UserInfo, &dyn Authorizer),
    ) -> Result<(), ApiError> {
        (self.check_requester)(obj, old, requester)
    }

    fn conversion(&self) -> Option<Conversion> {
        self.conversion.map(|conversion| conversion())
    }
}

pub fn def(
    group: &'static str,
    resource: &'static str,
    kind: &'static str,
    singular: &'static str,
) -> ResourceDef {
    versioned(group, "v1", resource, kind, singular)
}

/// A namespaced resource definition at `group/version`, no subresources.
pub fn versioned(
    group: &'static str,
    version: &'static str,
    resource: &'static str,
    kind: &'static str,
    singular: &'static str,
) -> ResourceDef {
    ResourceDef {
        group,
        version,
        resource,
        kind,
        singular,
        namespaced: true,
        short_names: &[],
        categories: &[],
        status: false,
        scale: false,
        name_rule: NameRule::Subdomain,
    }
}

pub fn simple<K>(def: ResourceDef) -> Simple<K> {
    Simple {
        def,
        columns: || vec![AGE],
        cells: |o| vec![age_cell(o)],
        fields: &[],
        validate: |_| Vec::new(),
        validate_update: |_, _| Vec::new(),
        defaults: |_| {},
        on_create: |_| {},
        name_cell: |o| o["metadata"]["name"].clone(),
        expires: false,
        check_requester: |_, _, _| Ok(()),
        conversion: None,
        kind: PhantomData,
    }
}

fn replicated<K>(def: ResourceDef) -> Simple<K> {
    Simple {
        def: ResourceDef {
            status: true,
            scale: true,
            categories: &["all"],
            ..def
        },
        columns: || {
            vec![
                Column::new("Desired", "integer", "Number of desired pods."),
                Column::new("Current", "integer", "Number of actual replicas."),
                Column::new("Ready", "integer", "Number of ready replicas."),
                AGE,
            ]
        },
        cells: |o| {
            vec![
                workload::count(o, "/spec/replicas"),
                workload::count(o, "/status/replicas"),
                workload::count(o, "/status/readyReplicas"),
                age_cell(o),
            ]
        },
        fields: &[("status.replicas", "/status/replicas")],
        validate: |o| workload::validate(o, true),
        defaults: super::pod::default_template,
        ..simple(def)
    }
}

pub fn all() -> Vec<Arc<dyn Strategy>> {
    let nodes = Simple::<Node> {
        def: ResourceDef {
            namespaced: false,
            short_names: &["no"],
            status: true,
            ..def("", "nodes", "Node", "node")
        },
        columns: || {
            vec![
                Column::new("Status", "string", "The status of the node"),
                AGE,
            ]
        },
        cells: |o| vec![node_status(o).into(), age_cell(o)],
        fields: &[("spec.unschedulable", "/spec/unschedulable")],
        ..simple(def("", "nodes", "Node", "node"))
    };
    let events = Simple::<Event> {
        def: ResourceDef {
            short_names: &["ev"],
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
        expires: true,
        ..simple(def("", "events", "Event", "event"))
    };
    let replication_controllers = Simple::<ReplicationController> {
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
    };
    vec![
        Arc::new(nodes),
        Arc::new(events),
        Arc::new(simple::<Endpoints>(ResourceDef {
            short_names: &["ep"],
            ..def("", "endpoints", "Endpoints", "endpoints")
        })),
        Arc::new(replication_controllers),
        Arc::new(replicated::<ReplicaSet>(ResourceDef {
            short_names: &["rs"],
            ..def("apps", "replicasets", "ReplicaSet", "replicaset")
        })),
        Arc::new(replicated::<StatefulSet>(ResourceDef {
            short_names: &["sts"],
            ..def("apps", "statefulsets", "StatefulSet", "statefulset")
        })),
        Arc::new(Simple::<DaemonSet> {
            def: ResourceDef {
                short_names: &["ds"],
                categories: &["all"],
                status: true,
                ..def("apps", "daemonsets", "DaemonSet", "daemonset")
            },
            validate: |o| workload::validate(o, true),
            defaults: super::pod::default_template,
            ..simple(def("apps", "daemonsets", "DaemonSet", "daemonset"))
        }),
        Arc::new(simple::<Lease>(def(
            "coordination.k8s.io",
            "leases",
            "Lease",
            "lease",
        ))),
    ]
}

fn node_status(node: &Value) -> String {
    let conditions = node["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten();
    let ready = conditions
        .filter(|c| c["type"] == "Ready")
        .map(|c| c["status"] == "True")
        .next();
    match ready {
        Some(true) => "Ready".into(),
        Some(false) => "NotReady".into(),
        None => "Unknown".into(),
    }
}
