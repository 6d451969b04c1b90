//! Field ownership as server-side apply tracks it in
//! `metadata.managedFields`: sets of field paths, their `fieldsV1`
//! encoding, the comparison of two objects that tells which fields a
//! write set, changed or removed, and the per-manager entries.
//!
//! Kubernetes decides the shape of each list and map from the OpenAPI
//! schema (`x-kubernetes-list-type`, `-list-map-keys`, `-map-type`).
//! For built-in types the few shapes that matter are named here by
//! field, like the strategic merge keys in [`super::strategic`] (which
//! supplies the primary keys); a custom resource's come from its
//! structural schema ([`Shape`]).

mod compare;
mod field_set;
mod shape;

use serde_json::{Map, Value};

use super::time::now_rfc3339;

pub use compare::{compare, Comparison};
pub use field_set::{
    describe, field, item_element, restrict_to_part, strip_ignored, to_field_set, FieldSet,
};
pub use shape::{is_atomic_map, list_kind, ListKind, Shape};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operation {
    Apply,
    Update,
}

impl Operation {
    fn as_str(self) -> &'static str {
        match self {
            Operation::Apply => "Apply",
            Operation::Update => "Update",
        }
    }
}

/// One `managedFields` entry.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    pub manager: String,
    pub operation: Operation,
    pub api_version: String,
    pub time: Option<String>,
    pub subresource: String,
    pub fields: FieldSet,
}

impl Entry {
    fn is(&self, manager: &str, operation: Operation, subresource: &str) -> bool {
        self.manager == manager && self.operation == operation && self.subresource == subresource
    }

    /// As conflict messages name a manager.
    pub fn label(&self) -> String {
        let mut label = Value::from(self.manager.as_str()).to_string();
        if !self.subresource.is_empty() {
            label.push_str(&format!(
                " with subresource {}",
                Value::from(self.subresource.as_str())
            ));
        }
        if self.operation == Operation::Update {
            label.push_str(&format!(" using {}", self.api_version));
        }
        label
    }

    fn decode(value: &Value) -> Option<Entry> {
        let operation = match value["operation"].as_str()? {
            "Apply" => Operation::Apply,
            "Update" => Operation::Update,
            _ => return None,
        };
        if value["fieldsType"]
            .as_str()
            .is_some_and(|t| t != "FieldsV1")
        {
            return None;
        }
        let fields = match value.get("fieldsV1") {
            None | Some(Value::Null) => FieldSet::default(),
            Some(v) => FieldSet::from_fields_v1(v)?,
        };
        let text = |key: &str| value[key].as_str().unwrap_or("").to_string();
        Some(Entry {
            manager: text("manager"),
            operation,
            api_version: text("apiVersion"),
            time: value["time"].as_str().map(str::to_string),
            subresource: text("subresource"),
            fields,
        })
    }

    fn encode(&self) -> Value {
        let mut map = Map::new();
        map.insert("manager".into(), self.manager.clone().into());
        map.insert("operation".into(), self.operation.as_str().into());
        map.insert("apiVersion".into(), self.api_version.clone().into());
        if let Some(time) = &self.time {
            map.insert("time".into(), time.clone().into());
        }
        map.insert("fieldsType".into(), "FieldsV1".into());
        map.insert("fieldsV1".into(), self.fields.to_fields_v1());
        if !self.subresource.is_empty() {
            map.insert("subresource".into(), self.subresource.clone().into());
        }
        Value::Object(map)
    }
}

/// Every manager's entry of one object.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Managed(pub Vec<Entry>);

impl Managed {
    /// The object's entries; None when they cannot be read.
    pub fn decode(obj: &Value) -> Option<Managed> {
        match obj.pointer("/metadata/managedFields") {
            None | Some(Value::Null) => Some(Managed::default()),
            Some(Value::Array(items)) => items
                .iter()
                .map(Entry::decode)
                .collect::<Option<_>>()
                .map(Managed),
            Some(_) => None,
        }
    }

    /// Writes the entries into `obj`, sorted as Kubernetes sorts them
    /// (Apply first, then oldest first); no entries, no field.
    pub fn encode_into(&self, obj: &mut Value) {
        let mut entries: Vec<&Entry> = self.0.iter().filter(|e| !e.fields.is_empty()).collect();
        entries.sort_by(|a, b| {
            (a.operation.as_str(), &a.time, &a.manager, &a.subresource).cmp(&(
                b.operation.as_str(),
                &b.time,
                &b.manager,
                &b.subresource,
            ))
        });
        let metadata = super::meta::metadata_mut(obj);
        if entries.is_empty() {
            metadata.remove("managedFields");
        } else {
            let list = entries.iter().map(|e| e.encode()).collect();
            metadata.insert("managedFields".into(), Value::Array(list));
        }
    }

    pub fn position(
        &self,
        manager: &str,
        operation: Operation,
        subresource: &str,
    ) -> Option<usize> {
        self.0
            .iter()
            .position(|e| e.is(manager, operation, subresource))
    }

    /// Everything anyone owns.
    pub fn owned(&self) -> FieldSet {
        let mut all = FieldSet::default();
        for entry in &self.0 {
            all.union(&entry.fields);
        }
        all
    }

    pub fn drop_empty(&mut self) {
        self.0.retain(|e| !e.fields.is_empty());
    }
}

/// Who is writing, and through which part of the object.
#[derive(Debug, Clone)]
pub struct Writer<'a> {
    pub manager: &'a str,
    pub api_version: &'a str,
    /// `""`, `"status"` or `"scale"`.
    pub subresource: &'a str,
    /// The type has a status subresource, so the main resource's writes
    /// own nothing under `status`.
    pub has_status: bool,
    /// How the type's lists and maps merge (a custom resource's schema).
    pub shape: Shape<'a>,
}

/// `[]` or `[{}]`: the client asks for the entries to be cleared.
fn is_reset(obj: &Value) -> bool {
    match obj.pointer("/metadata/managedFields") {
        Some(Value::Array(items)) => {
            items.is_empty()
                || (items.len() == 1 && items[0].as_object().is_some_and(Map::is_empty))
        }
        _ => false,
    }
}

/// The entries a non-apply write starts from: the ones the client sent
/// (so they can be edited, as kubectl does to migrate client-side apply),
/// unless it sent none or through a subresource; then the live ones.
fn starting_entries(old: &Value, new: &Value, subresource: &str) -> Managed {
    let live = || Managed::decode(old).unwrap_or_default();
    if !subresource.is_empty() {
        return live();
    }
    if is_reset(new) {
        return Managed::default();
    }
    match Managed::decode(new) {
        Some(sent) if !sent.0.is_empty() => sent,
        _ => live(),
    }
}

/// Records a create, update or non-apply patch (operation Update): the
/// writer now owns what it set or changed, nobody owns what it removed.
/// `old` is the live object (`{}` for a create); `new` gets the entries.
pub fn record_update(old: &Value, new: &mut Value, writer: &Writer) {
    let mut managed = starting_entries(old, new, writer.subresource);
    if let Some(metadata) = new.get_mut("metadata").and_then(Value::as_object_mut) {
        metadata.remove("managedFields");
    }
    // The old entries are not compared: nobody owns managedFields.
    let comparison = compare(old, new, writer.shape);
    let mut changed = comparison.changed();
    restrict_to_part(&mut changed, writer.subresource, writer.has_status);
    for entry in &mut managed.0 {
        entry.fields = entry.fields.difference(&comparison.removed);
        if !entry.is(writer.manager, Operation::Update, writer.subresource) {
            entry.fields = entry.fields.difference(&changed);
        }
    }
    if !changed.is_empty() {
        match managed.position(writer.manager, Operation::Update, writer.subresource) {
            Some(i) => {
                managed.0[i].fields.union(&changed);
                managed.0[i].time = Some(now_rfc3339());
                managed.0[i].api_version = writer.api_version.to_string();
            }
            None => managed.0.push(Entry {
                manager: writer.manager.to_string(),
                operation: Operation::Update,
                api_version: writer.api_version.to_string(),
                time: Some(now_rfc3339()),
                subresource: writer.subresource.to_string(),
                fields: changed,
            }),
        }
    }
    managed.drop_empty();
    cap_update_managers(&mut managed);
    managed.encode_into(new);
}

/// Kubernetes keeps at most this many Update entries; older ones are
/// merged into one `ancient-changes` entry.
const MAX_UPDATE_MANAGERS: usize = 10;

fn cap_update_managers(managed: &mut Managed) {
    let updates = |m: &Managed| {
        m.0.iter()
            .filter(|e| e.operation == Operation::Update)
            .count()
    };
    while updates(managed) > MAX_UPDATE_MANAGERS {
        let oldest = managed
            .0
            .iter()
            .enumerate()
            .filter(|(_, e)| e.operation == Operation::Update && e.manager != "ancient-changes")
            .min_by(|a, b| a.1.time.cmp(&b.1.time))
            .map(|(i, _)| i);
        let Some(oldest) = oldest else { return };
        let entry = managed.0.remove(oldest);
        match managed.position("ancient-changes", Operation::Update, "") {
            Some(i) => managed.0[i].fields.union(&entry.fields),
            None => managed.0.push(Entry {
                manager: "ancient-changes".into(),
                subresource: String::new(),
                ..entry
            }),
        }
    }
}

/// A write that changes nothing but managedFields timestamps keeps the
/// old entries, so it stays a no-op (Kubernetes'
/// IgnoreManagedFieldsTimestampsTransformer).
pub fn keep_old_times(old: &Value, new: &mut Value) {
    if !super::meta::equal_but_for(old, new, &["managedFields", "resourceVersion"]) {
        return;
    }
    let untimed = |v: &Value| {
        Managed::decode(v).map(|mut m| {
            m.0.iter_mut().for_each(|e| e.time = None);
            m.0.sort_by(|a, b| {
                (&a.manager, a.operation.as_str()).cmp(&(&b.manager, b.operation.as_str()))
            });
            m
        })
    };
    if untimed(old) == untimed(new) {
        match old.pointer("/metadata/managedFields") {
            Some(entries) => {
                super::meta::metadata_mut(new).insert("managedFields".into(), entries.clone());
            }
            None => {
                super::meta::metadata_mut(new).remove("managedFields");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn path(elements: &[&str]) -> Vec<String> {
        elements.iter().map(|e| e.to_string()).collect()
    }

    #[test]
    fn fields_v1_round_trip_marks_members_with_children() {
        let v1 = json!({"f:metadata": {"f:labels": {".": {}, "f:app": {}}},
            "f:spec": {"f:containers": {"k:{\"name\":\"app\"}": {".": {}, "f:image": {}, "f:name": {}}}}});
        let set = FieldSet::from_fields_v1(&v1).unwrap();
        assert!(set.has(&path(&["f:metadata", "f:labels"])));
        assert!(!set.has(&path(&["f:metadata"])));
        assert!(set.has(&path(&[
            "f:spec",
            "f:containers",
            "k:{\"name\":\"app\"}",
            "f:image"
        ])));
        assert_eq!(set.to_fields_v1(), v1);
        assert!(FieldSet::from_fields_v1(&json!({"x": {}})).is_none());
    }

    #[test]
    fn set_operations_are_member_wise() {
        let mut a = FieldSet::default();
        a.insert(&path(&["f:spec", "f:replicas"]));
        a.insert(&path(&["f:spec", "f:paused"]));
        let mut b = FieldSet::default();
        b.insert(&path(&["f:spec", "f:replicas"]));
        let d = a.difference(&b);
        assert_eq!(d.paths(), vec![path(&["f:spec", "f:paused"])]);
        assert_eq!(
            a.intersection(&b).paths(),
            vec![path(&["f:spec", "f:replicas"])]
        );
        assert!(a.difference(&a).is_empty());
    }

    #[test]
    fn applied_config_field_set_uses_keys_and_values() {
        let config = json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "labels": {"app": "x"}, "finalizers": ["a/b"]},
            "spec": {"containers": [{"name": "c", "image": "i", "ports": [{"containerPort": 80}]}],
                     "nodeSelector": {}}});
        let set = to_field_set(&config, Shape::Builtin);
        let container = "k:{\"name\":\"c\"}";
        assert!(set.has(&path(&["f:spec", "f:containers", container])));
        assert!(set.has(&path(&[
            "f:spec",
            "f:containers",
            container,
            "f:ports",
            "k:{\"containerPort\":80,\"protocol\":\"TCP\"}",
            "f:containerPort"
        ])));
        assert!(set.has(&path(&["f:metadata", "f:finalizers", "v:\"a/b\""])));
        assert!(set.has(&path(&["f:spec", "f:nodeSelector"])));
        assert!(!set.has(&path(&["f:spec"])));
    }

    #[test]
    fn compare_finds_added_modified_removed() {
        let old = json!({"metadata": {"name": "d", "labels": {"a": "1"}}, "spec": {"replicas": 1,
            "template": {"spec": {"containers": [{"name": "c", "image": "i1"}, {"name": "gone", "image": "x"}]}}}});
        let new = json!({"metadata": {"name": "d", "labels": {"a": "1", "b": "2"}}, "spec": {"replicas": 2,
            "template": {"spec": {"containers": [{"name": "c", "image": "i2"}]}}}});
        let c = compare(&old, &new, Shape::Builtin);
        assert_eq!(
            c.added.paths(),
            vec![path(&["f:metadata", "f:labels", "f:b"])]
        );
        let containers = ["f:spec", "f:template", "f:spec", "f:containers"];
        let mut image = path(&containers);
        image.extend(path(&["k:{\"name\":\"c\"}", "f:image"]));
        assert!(c.modified.has(&image));
        assert!(c.modified.has(&path(&["f:spec", "f:replicas"])));
        let mut gone = path(&containers);
        gone.push("k:{\"name\":\"gone\"}".into());
        assert!(c.removed.has(&gone));
    }

    #[test]
    fn create_owns_new_maps_but_not_the_spec_struct() {
        let new = json!({"metadata": {"name": "d", "uid": "u", "labels": {"a": "1"}},
            "spec": {"replicas": 1, "strategy": {"rollingUpdate": {"maxSurge": 1}}}});
        let c = compare(&json!({}), &new, Shape::Builtin);
        assert!(c.added.has(&path(&["f:metadata", "f:labels"])));
        assert!(!c.added.has(&path(&["f:spec"])));
        assert!(!c.added.has(&path(&["f:spec", "f:strategy"])));
        assert!(c
            .added
            .has(&path(&["f:spec", "f:strategy", "f:rollingUpdate"])));
        assert!(!c.added.has(&path(&["f:metadata", "f:uid"])));
    }

    #[test]
    fn updates_take_fields_from_other_managers() {
        let writer = |m| Writer {
            manager: m,
            api_version: "v1",
            subresource: "",
            has_status: false,
            shape: Shape::Builtin,
        };
        let mut obj = json!({"metadata": {"name": "c"}, "data": {"a": "1", "b": "2"}});
        record_update(&json!({}), &mut obj, &writer("creator"));
        let mut next = obj.clone();
        next["data"]["a"] = "9".into();
        record_update(&obj, &mut next, &writer("editor"));
        let managed = Managed::decode(&next).unwrap();
        let creator = &managed.0[managed.position("creator", Operation::Update, "").unwrap()];
        // The creator made the map, so it owns the map itself too.
        assert_eq!(
            creator.fields.paths(),
            vec![path(&["f:data"]), path(&["f:data", "f:b"])]
        );
        let editor = &managed.0[managed.position("editor", Operation::Update, "").unwrap()];
        assert_eq!(editor.fields.paths(), vec![path(&["f:data", "f:a"])]);
        // An update that leaves managedFields out starts from the live
        // entries (as a node's Lease renewal does).
        let mut bare = next.clone();
        bare["metadata"]
            .as_object_mut()
            .unwrap()
            .remove("managedFields");
        bare["data"]["b"] = "3".into();
        record_update(&next, &mut bare, &writer("creator"));
        let kept = Managed::decode(&bare).unwrap();
        let editor = &kept.0[kept.position("editor", Operation::Update, "").unwrap()];
        assert_eq!(editor.fields.paths(), vec![path(&["f:data", "f:a"])]);
        // Sending [] or [{}] clears the entries.
        let mut reset = next.clone();
        reset["metadata"]["managedFields"] = json!([{}]);
        record_update(&next, &mut reset, &writer("editor"));
        assert!(reset["metadata"].get("managedFields").is_none());
    }

    #[test]
    fn describes_paths_like_kubernetes() {
        let p = path(&["f:spec", "f:containers", "k:{\"name\":\"app\"}", "f:image"]);
        assert_eq!(describe(&p), ".spec.containers[name=\"app\"].image");
        assert_eq!(
            describe(&path(&["f:metadata", "f:finalizers", "v:\"x\""])),
            ".metadata.finalizers[=\"x\"]"
        );
    }
}
