//! The RBAC objects the server holds, by kind and (namespace, name): what
//! the informer keeps current from the registry's watches, and what the
//! index and the aggregation controller are built from.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::Value;

use crate::object::meta;

pub const GROUP: &str = "rbac.authorization.k8s.io";
pub const VERSION: &str = "v1";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    ClusterRole,
    Role,
    ClusterRoleBinding,
    RoleBinding,
}

impl Kind {
    pub const ALL: [Kind; 4] = [
        Kind::ClusterRole,
        Kind::Role,
        Kind::ClusterRoleBinding,
        Kind::RoleBinding,
    ];

    pub fn resource(self) -> &'static str {
        match self {
            Kind::ClusterRole => "clusterroles",
            Kind::Role => "roles",
            Kind::ClusterRoleBinding => "clusterrolebindings",
            Kind::RoleBinding => "rolebindings",
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Kind::ClusterRole => "ClusterRole",
            Kind::Role => "Role",
            Kind::ClusterRoleBinding => "ClusterRoleBinding",
            Kind::RoleBinding => "RoleBinding",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// (namespace, name); the namespace is empty for cluster objects.
pub type Key = (String, String);

pub fn key_of(obj: &Value) -> Key {
    (
        meta::namespace(obj).to_string(),
        meta::name(obj).to_string(),
    )
}

#[derive(Debug, Clone, Default)]
pub struct Objects {
    by_kind: [BTreeMap<Key, Arc<Value>>; 4],
}

impl Objects {
    pub fn of(&self, kind: Kind) -> &BTreeMap<Key, Arc<Value>> {
        &self.by_kind[kind.index()]
    }

    pub fn get(&self, kind: Kind, namespace: &str, name: &str) -> Option<&Arc<Value>> {
        self.of(kind)
            .get(&(namespace.to_string(), name.to_string()))
    }

    pub fn put(&mut self, kind: Kind, obj: Arc<Value>) {
        self.by_kind[kind.index()].insert(key_of(&obj), obj);
    }

    pub fn remove(&mut self, kind: Kind, obj: &Value) {
        self.by_kind[kind.index()].remove(&key_of(obj));
    }

    pub fn replace(&mut self, kind: Kind, objects: impl IntoIterator<Item = Arc<Value>>) {
        self.by_kind[kind.index()] = objects.into_iter().map(|o| (key_of(&o), o)).collect();
    }
}
