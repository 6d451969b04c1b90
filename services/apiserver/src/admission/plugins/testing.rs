//! An in-memory [`Objects`] for the plugins' unit tests: objects by
//! resource, namespace and name, with a counter for resourceVersions so
//! compare-and-swap behaves as the store's does.

use std::collections::BTreeMap;
use std::sync::Mutex;

use serde_json::Value;

use crate::admission::objects::{Freshness, Lookup, LookupError, Objects, Resource, ServedKind};
use crate::admission::{Attributes, Operation};
use crate::auth::UserInfo;

type Key = (Resource, String, String);

pub const CONFIG_MAPS: Resource = Resource {
    group: "",
    resource: "configmaps",
};

#[derive(Default)]
pub struct Memory {
    objects: Mutex<(BTreeMap<Key, Value>, i64)>,
}

impl Memory {
    /// Stores `object` under its namespace and name, at a new version.
    pub fn put(&self, resource: Resource, mut object: Value) -> &Self {
        let mut guard = self.objects.lock().unwrap();
        guard.1 += 1;
        object["metadata"]["resourceVersion"] = guard.1.to_string().into();
        let key = key(resource, &object);
        guard.0.insert(key, object);
        self
    }

    pub fn read(&self, resource: Resource, namespace: &str, name: &str) -> Option<Value> {
        let guard = self.objects.lock().unwrap();
        let key = (resource, namespace.to_string(), name.to_string());
        guard.0.get(&key).cloned()
    }
}

fn key(resource: Resource, object: &Value) -> Key {
    let text = |field: &str| {
        object["metadata"][field]
            .as_str()
            .unwrap_or_default()
            .to_string()
    };
    (resource, text("namespace"), text("name"))
}

impl Objects for Memory {
    fn get<'a>(
        &'a self,
        resource: Resource,
        namespace: &'a str,
        name: &'a str,
        _: Freshness,
    ) -> Lookup<'a, Option<Value>> {
        Box::pin(async move { Ok(self.read(resource, namespace, name)) })
    }

    fn list<'a>(
        &'a self,
        resource: Resource,
        namespace: &'a str,
        _: Freshness,
    ) -> Lookup<'a, Vec<Value>> {
        let guard = self.objects.lock().unwrap();
        let found = guard
            .0
            .iter()
            .filter(|((r, ns, _), _)| *r == resource && (namespace.is_empty() || ns == namespace))
            .map(|(_, v)| v.clone())
            .collect();
        Box::pin(async move { Ok(found) })
    }

    /// ConfigMaps are the one parameter kind the tests use.
    fn served_kind(&self, api_version: &str, kind: &str) -> Option<ServedKind> {
        (api_version == "v1" && kind == "ConfigMap").then_some(ServedKind {
            resource: CONFIG_MAPS,
            namespaced: true,
        })
    }

    fn swap<'a>(&'a self, resource: Resource, object: &'a Value) -> Lookup<'a, bool> {
        let key = key(resource, object);
        let current = self.objects.lock().unwrap().0.get(&key).cloned();
        let Some(current) = current else {
            return Box::pin(async { Err(LookupError::Unavailable("gone".into())) });
        };
        let same = current["metadata"]["resourceVersion"] == object["metadata"]["resourceVersion"];
        if same {
            self.put(resource, object.clone());
        }
        Box::pin(async move { Ok(same) })
    }
}

/// A create (or `operation`) of `resource` "`name`" in `namespace`.
pub fn attributes<'a>(
    operation: Operation,
    resource: &'a str,
    namespace: &'a str,
    name: &'a str,
    user: &'a UserInfo,
) -> Attributes<'a> {
    Attributes {
        operation,
        old_object: None,
        namespace,
        name,
        group: "",
        version: "v1",
        resource,
        subresource: "",
        dry_run: false,
        user,
        // Tests are short-lived; each gets its own collector to read back.
        feedback: Box::leak(Box::default()),
    }
}
