//! An object as lists and the watch cache hold it: its JSON text (with
//! its `resourceVersion`), encoded once, plus the few fields that keys,
//! label and field selectors need, parsed once. Shared behind an `Arc` by
//! the cache's current state, its event window, every watcher and every
//! list page, so each version of an object is in memory once, and a list
//! is written out by copying texts rather than serialising trees of
//! `serde_json::Value` (which take about ten times the JSON's size).

use serde_json::value::RawValue;
use serde_json::Value;

use crate::object::meta;

/// Field paths and the JSON pointers they read (a strategy's
/// `selectable_fields`).
pub type FieldPaths = &'static [(&'static str, &'static str)];

#[derive(Debug)]
pub struct Object {
    json: Box<RawValue>,
    key: Box<str>,
    name: Box<str>,
    namespace: Box<str>,
    uid: Box<str>,
    labels: Box<[(Box<str>, Box<str>)]>,
    /// The values of the selectable fields it was built with, by path.
    fields: Box<[(&'static str, Box<str>)]>,
    revision: i64,
}

impl Object {
    /// Encodes `object` (stored under `key`, last written at `revision`)
    /// with that revision as its `resourceVersion`, indexing `fields`.
    pub fn new(key: &str, mut object: Value, revision: i64, fields: FieldPaths) -> Object {
        meta::set_resource_version(&mut object, revision);
        Object::encode(key, object, revision, fields)
    }

    /// An object not read from a store (a reply's), as it is.
    pub fn from_value(object: Value) -> Object {
        let revision = meta::resource_version(&object).parse().unwrap_or(0);
        Object::encode("", object, revision, &[])
    }

    fn encode(key: &str, object: Value, revision: i64, fields: FieldPaths) -> Object {
        let labels = meta::labels(&object)
            .into_iter()
            .flatten()
            .filter_map(|(k, v)| Some((k.as_str().into(), v.as_str()?.into())))
            .collect();
        let fields = fields
            .iter()
            .map(|(path, pointer)| (*path, text_at(&object, pointer).into()))
            .collect();
        let text = serde_json::to_string(&object).expect("JSON values always serialise");
        Object {
            key: key.into(),
            name: meta::name(&object).into(),
            namespace: meta::namespace(&object).into(),
            uid: meta::uid(&object).into(),
            labels,
            fields,
            revision,
            json: RawValue::from_string(text).expect("serde_json writes valid JSON"),
        }
    }

    /// The object as a tree, parsed from its text (for the one object a
    /// get or a watch event renders).
    pub fn value(&self) -> Value {
        serde_json::from_str(self.json.get()).expect("the text was written from a Value")
    }

    /// Its JSON text, to be written out as it is.
    pub fn json(&self) -> &RawValue {
        &self.json
    }

    pub fn key(&self) -> &str {
        &self.key
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    pub fn uid(&self) -> &str {
        &self.uid
    }

    /// The revision of its last write (its `resourceVersion`).
    pub fn revision(&self) -> i64 {
        self.revision
    }

    pub fn label(&self, key: &str) -> Option<&str> {
        self.labels
            .iter()
            .find(|(k, _)| k.as_ref() == key)
            .map(|(_, v)| v.as_ref())
    }

    /// The value of a selectable field it was built with; None when it
    /// was not indexed (then the caller reads it from [`Object::value`]).
    pub fn field(&self, path: &str) -> Option<&str> {
        match path {
            "metadata.name" => Some(&self.name),
            "metadata.namespace" => Some(&self.namespace),
            _ => self
                .fields
                .iter()
                .find(|(p, _)| *p == path)
                .map(|(_, v)| v.as_ref()),
        }
    }

    /// The same object, deleted at `revision`: a DELETED event carries the
    /// last state with the delete's revision as its `resourceVersion`.
    pub fn deleted_at(&self, revision: i64, fields: FieldPaths) -> Object {
        Object::new(&self.key, self.value(), revision, fields)
    }
}

/// A field's value as a field selector compares it: strings as they are,
/// absent as empty, anything else as its JSON text.
pub fn text_at(object: &Value, pointer: &str) -> String {
    match object.pointer(pointer) {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Null) | None => String::new(),
        Some(other) => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn keeps_the_text_and_the_selected_fields() {
        let value = json!({"metadata": {"name": "a", "namespace": "ns",
            "labels": {"app": "web"}}, "spec": {"nodeName": "n1"}});
        let fields: FieldPaths = &[("spec.nodeName", "/spec/nodeName")];
        let object = Object::new("/registry/pods/ns/a", value, 7, fields);
        assert_eq!(object.value()["metadata"]["resourceVersion"], "7");
        assert_eq!((object.name(), object.namespace()), ("a", "ns"));
        assert_eq!(object.label("app"), Some("web"));
        assert_eq!(object.label("tier"), None);
        assert_eq!(object.field("spec.nodeName"), Some("n1"));
        assert_eq!(object.field("status.phase"), None);
        let gone = object.deleted_at(9, fields);
        assert_eq!((gone.revision(), gone.key()), (9, "/registry/pods/ns/a"));
        assert_eq!(gone.value()["metadata"]["resourceVersion"], "9");
    }
}
