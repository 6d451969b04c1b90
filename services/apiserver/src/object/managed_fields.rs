//! Field ownership as server-side apply tracks it in
//! `metadata.managedFields`: sets of field paths, their `fieldsV1`
//! encoding, the comparison of two objects that tells which fields a
//! write set, changed or removed, and the per-manager entries.
//!
//! Kubernetes decides the shape of each list and map from the OpenAPI
//! schema (`x-kubernetes-list-type`, `-list-map-keys`, `-map-type`).
//! Capstan serves built-in types only, so the few shapes that matter are
//! named here by field, like the strategic merge keys in
//! [`super::strategic`] (which supplies the primary keys).

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::strategic;
use super::time::now_rfc3339;

/// A set of field paths, as a trie. Path elements are kept in their
/// `fieldsV1` spelling (`f:name`, `k:{"name":"x"}`, `v:"a"`, `i:0`), which
/// also orders them as Kubernetes prints them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FieldSet {
    /// The path ending here is in the set (`.` in fieldsV1).
    member: bool,
    children: BTreeMap<String, FieldSet>,
}

impl FieldSet {
    pub fn is_empty(&self) -> bool {
        !self.member && self.children.values().all(FieldSet::is_empty)
    }

    pub fn is_member(&self) -> bool {
        self.member
    }

    pub fn children(&self) -> impl Iterator<Item = (&String, &FieldSet)> {
        self.children.iter()
    }

    pub fn child(&self, element: &str) -> Option<&FieldSet> {
        self.children.get(element)
    }

    pub fn insert(&mut self, path: &[String]) {
        match path.split_first() {
            None => self.member = true,
            Some((head, rest)) => self.children.entry(head.clone()).or_default().insert(rest),
        }
    }

    pub fn has(&self, path: &[String]) -> bool {
        match path.split_first() {
            None => self.member,
            Some((head, rest)) => self.children.get(head).is_some_and(|c| c.has(rest)),
        }
    }

    pub fn union(&mut self, other: &FieldSet) {
        self.member |= other.member;
        for (element, child) in &other.children {
            self.children
                .entry(element.clone())
                .or_default()
                .union(child);
        }
    }

    /// The members of `self` that are not members of `other` (member by
    /// member, as structured-merge-diff's `Difference`).
    pub fn difference(&self, other: &FieldSet) -> FieldSet {
        let children = self
            .children
            .iter()
            .map(|(element, child)| match other.children.get(element) {
                Some(theirs) => (element.clone(), child.difference(theirs)),
                None => (element.clone(), child.clone()),
            })
            .filter(|(_, child)| !child.is_empty())
            .collect();
        FieldSet {
            member: self.member && !other.member,
            children,
        }
    }

    pub fn intersection(&self, other: &FieldSet) -> FieldSet {
        let children = self
            .children
            .iter()
            .filter_map(|(element, child)| {
                let theirs = other.children.get(element)?;
                Some((element.clone(), child.intersection(theirs)))
            })
            .filter(|(_, child)| !child.is_empty())
            .collect();
        FieldSet {
            member: self.member && other.member,
            children,
        }
    }

    /// Drops everything at and under `path`.
    pub fn remove_subtree(&mut self, path: &[String]) {
        match path {
            [] => *self = FieldSet::default(),
            [last] => {
                self.children.remove(last);
            }
            [head, rest @ ..] => {
                if let Some(child) = self.children.get_mut(head) {
                    child.remove_subtree(rest);
                    if child.is_empty() {
                        self.children.remove(head);
                    }
                }
            }
        }
    }

    /// Every member path, in order.
    pub fn paths(&self) -> Vec<Vec<String>> {
        let mut out = Vec::new();
        self.collect_paths(&mut Vec::new(), &mut out);
        out
    }

    fn collect_paths(&self, prefix: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
        if self.member {
            out.push(prefix.clone());
        }
        for (element, child) in &self.children {
            prefix.push(element.clone());
            child.collect_paths(prefix, out);
            prefix.pop();
        }
    }

    /// The `fieldsV1` object: a member with children says so with `.`.
    pub fn to_fields_v1(&self) -> Value {
        let mut map = Map::new();
        if self.member && !self.children.is_empty() {
            map.insert(".".into(), Value::Object(Map::new()));
        }
        for (element, child) in &self.children {
            if !child.is_empty() {
                map.insert(element.clone(), child.to_fields_v1());
            }
        }
        Value::Object(map)
    }

    /// Reads `fieldsV1`; None when it is not that format.
    pub fn from_fields_v1(value: &Value) -> Option<FieldSet> {
        let map = value.as_object()?;
        let mut set = FieldSet {
            member: map.is_empty(),
            children: BTreeMap::new(),
        };
        for (element, child) in map {
            if element == "." {
                set.member = true;
                continue;
            }
            if !["f:", "k:", "v:", "i:"]
                .iter()
                .any(|p| element.starts_with(p))
            {
                return None;
            }
            set.children
                .insert(element.clone(), FieldSet::from_fields_v1(child)?);
        }
        Some(set)
    }
}

/// A path as conflict messages spell it: `.spec.containers[name="app"].image`.
pub fn describe(path: &[String]) -> String {
    path.iter().map(|e| describe_element(e)).collect()
}

fn describe_element(element: &str) -> String {
    let (kind, rest) = element.split_at(2.min(element.len()));
    match kind {
        "f:" => format!(".{rest}"),
        "i:" => format!("[{rest}]"),
        "v:" => format!("[={rest}]"),
        "k:" => match serde_json::from_str::<Map<String, Value>>(rest) {
            Ok(keys) => {
                let parts: Vec<String> = keys.iter().map(|(k, v)| format!("{k}={v}")).collect();
                format!("[{}]", parts.join(","))
            }
            Err(_) => format!("[{rest}]"),
        },
        _ => element.to_string(),
    }
}

pub fn field(name: &str) -> String {
    format!("f:{name}")
}

/// How the elements of a list are identified.
#[derive(Debug, Clone, PartialEq)]
pub enum ListKind {
    /// Replaced and owned as a whole.
    Atomic,
    /// Scalars identified by value (`finalizers`).
    Set,
    /// Objects identified by these key fields (`containers` by `name`).
    Keyed(Vec<&'static str>),
}

pub fn list_kind(field: &str, items: &[Value]) -> ListKind {
    if field == "finalizers" && items.iter().all(|i| !i.is_object() && !i.is_array()) {
        return ListKind::Set;
    }
    if !items.iter().all(Value::is_object) {
        return ListKind::Atomic;
    }
    match strategic::merge_key(field, items) {
        // Ports are keyed by port and protocol in the schema, which the
        // strategic merge key leaves out.
        Some(key) if field == "ports" => ListKind::Keyed(vec![key, "protocol"]),
        Some(key) if field == "topologySpreadConstraints" => {
            ListKind::Keyed(vec![key, "whenUnsatisfiable"])
        }
        Some(key) => ListKind::Keyed(vec![key]),
        None => ListKind::Atomic,
    }
}

/// Maps and structs the schema marks `x-kubernetes-map-type: atomic`
/// (label selectors, object references): replaced and owned whole.
pub fn is_atomic_map(field: &str) -> bool {
    matches!(
        field,
        "selector"
            | "labelSelector"
            | "namespaceSelector"
            | "configMapKeyRef"
            | "secretKeyRef"
            | "fieldRef"
            | "resourceFieldRef"
            | "configMapRef"
            | "secretRef"
            | "targetRef"
            | "claimRef"
            | "scaleTargetRef"
            | "dataSource"
            | "dataSourceRef"
    )
}

/// The path element naming `item` of a list of `kind`.
pub fn item_element(kind: &ListKind, item: &Value, index: usize) -> String {
    match kind {
        ListKind::Keyed(keys) => {
            let mut id = Map::new();
            for key in keys {
                match item.get(*key) {
                    Some(v) if !v.is_null() => {
                        id.insert(key.to_string(), v.clone());
                    }
                    // The schema defaults a port's protocol to TCP.
                    _ if *key == "protocol" => {
                        id.insert(key.to_string(), "TCP".into());
                    }
                    _ => {}
                }
            }
            format!("k:{}", Value::Object(id))
        }
        ListKind::Set => format!("v:{item}"),
        ListKind::Atomic => format!("i:{index}"),
    }
}

/// The fields an applied configuration sets (structured-merge-diff's
/// `ToFieldSet`): scalars, atomic values, empty maps, list elements.
pub fn to_field_set(obj: &Value) -> FieldSet {
    let mut set = FieldSet::default();
    if let Value::Object(map) = obj {
        walk_map(map, &mut set);
    }
    set
}

fn walk_map(map: &Map<String, Value>, node: &mut FieldSet) {
    for (key, value) in map {
        let child = node.children.entry(field(key)).or_default();
        walk_value(key, value, child);
    }
}

fn walk_value(field: &str, value: &Value, node: &mut FieldSet) {
    match value {
        Value::Object(map) if map.is_empty() || is_atomic_map(field) => node.member = true,
        Value::Object(map) => walk_map(map, node),
        Value::Array(items) if items.is_empty() => node.member = true,
        Value::Array(items) => match list_kind(field, items) {
            ListKind::Atomic => node.member = true,
            kind => {
                for (i, item) in items.iter().enumerate() {
                    let child = node
                        .children
                        .entry(item_element(&kind, item, i))
                        .or_default();
                    child.member = true;
                    if let Value::Object(map) = item {
                        walk_map(map, child);
                    }
                }
            }
        },
        _ => node.member = true,
    }
}

/// What changed between two versions of an object, as field sets.
#[derive(Debug, Default, PartialEq)]
pub struct Comparison {
    pub added: FieldSet,
    pub modified: FieldSet,
    pub removed: FieldSet,
}

impl Comparison {
    /// Added or modified: what the writer set.
    pub fn changed(&self) -> FieldSet {
        let mut set = self.added.clone();
        set.union(&self.modified);
        set
    }
}

/// Compares two objects field by field (structured-merge-diff's
/// `Compare`), leaving out the fields no one owns (see [`strip_ignored`]).
pub fn compare(old: &Value, new: &Value) -> Comparison {
    let mut out = Comparison::default();
    compare_maps(old.as_object(), new.as_object(), &mut Vec::new(), &mut out);
    strip_ignored(&mut out.added);
    strip_ignored(&mut out.modified);
    strip_ignored(&mut out.removed);
    out
}

fn present(value: Option<&Value>) -> Option<&Value> {
    value.filter(|v| !v.is_null())
}

fn compare_maps(
    old: Option<&Map<String, Value>>,
    new: Option<&Map<String, Value>>,
    path: &mut Vec<String>,
    out: &mut Comparison,
) {
    let keys: std::collections::BTreeSet<&String> =
        old.into_iter().chain(new).flat_map(Map::keys).collect();
    for key in keys {
        path.push(field(key));
        let l = present(old.and_then(|m| m.get(key)));
        let r = present(new.and_then(|m| m.get(key)));
        compare_value(key, l, r, path, out);
        path.pop();
    }
}

fn compare_value(
    field: &str,
    l: Option<&Value>,
    r: Option<&Value>,
    path: &mut Vec<String>,
    out: &mut Comparison,
) {
    let is_empty = |v: Option<&Value>| match v {
        None => true,
        Some(Value::Object(m)) => m.is_empty(),
        Some(Value::Array(a)) => a.is_empty(),
        Some(_) => false,
    };
    let objects = l.is_none_or(Value::is_object) && r.is_none_or(Value::is_object);
    let arrays = l.is_none_or(Value::is_array) && r.is_none_or(Value::is_array);
    if (l.is_none() && r.is_none()) || (is_empty(l) && is_empty(r)) {
        return leaf(l, r, path, out);
    }
    if objects && !is_atomic_map(field) {
        compare_maps(
            l.and_then(Value::as_object),
            r.and_then(Value::as_object),
            path,
            out,
        );
        return presence(l, r, path, out);
    }
    if arrays {
        let empty = Vec::new();
        let (li, ri) = (
            l.and_then(Value::as_array).unwrap_or(&empty),
            r.and_then(Value::as_array).unwrap_or(&empty),
        );
        let all: Vec<Value> = li.iter().chain(ri).cloned().collect();
        let kind = list_kind(field, &all);
        if kind != ListKind::Atomic {
            compare_items(&kind, li, ri, path, out);
            return presence(l, r, path, out);
        }
    }
    leaf(l, r, path, out)
}

fn compare_items(
    kind: &ListKind,
    old: &[Value],
    new: &[Value],
    path: &mut Vec<String>,
    out: &mut Comparison,
) {
    let index = |items: &[Value]| -> BTreeMap<String, Value> {
        let mut map = BTreeMap::new();
        for (i, item) in items.iter().enumerate() {
            map.entry(item_element(kind, item, i))
                .or_insert_with(|| item.clone());
        }
        map
    };
    let (l, r) = (index(old), index(new));
    let elements: std::collections::BTreeSet<&String> = l.keys().chain(r.keys()).collect();
    for element in elements {
        path.push(element.clone());
        compare_value("", l.get(element), r.get(element), path, out);
        path.pop();
    }
}

fn leaf(l: Option<&Value>, r: Option<&Value>, path: &[String], out: &mut Comparison) {
    match (l, r) {
        (None, Some(_)) => out.added.insert(path),
        (Some(_), None) => out.removed.insert(path),
        (Some(a), Some(b)) if a != b => out.modified.insert(path),
        _ => {}
    }
}

/// A map or list that appeared or went is itself in the change, except
/// the structs every object of the type has anyway (Go zero values), so
/// that `f:spec` is not owned as a whole by whoever created the object.
fn presence(l: Option<&Value>, r: Option<&Value>, path: &[String], out: &mut Comparison) {
    const ALWAYS_THERE: &[&[&str]] = &[
        &["f:metadata"],
        &["f:spec"],
        &["f:status"],
        &["f:spec", "f:template"],
        &["f:spec", "f:template", "f:metadata"],
        &["f:spec", "f:template", "f:spec"],
        &["f:spec", "f:strategy"],
        &["f:spec", "f:updateStrategy"],
    ];
    if l.is_none() && !ALWAYS_THERE.iter().any(|p| p.iter().eq(path.iter())) {
        out.added.insert(path);
    } else if r.is_none() {
        out.removed.insert(path);
    }
}

/// Fields the server sets, which nobody owns (Kubernetes' stripMeta).
const IGNORED: &[&[&str]] = &[
    &["f:apiVersion"],
    &["f:kind"],
    &["f:metadata", "f:name"],
    &["f:metadata", "f:namespace"],
    &["f:metadata", "f:creationTimestamp"],
    &["f:metadata", "f:selfLink"],
    &["f:metadata", "f:uid"],
    &["f:metadata", "f:generation"],
    &["f:metadata", "f:managedFields"],
    &["f:metadata", "f:resourceVersion"],
];

pub fn strip_ignored(set: &mut FieldSet) {
    for path in IGNORED {
        let path: Vec<String> = path.iter().map(|s| s.to_string()).collect();
        set.remove_subtree(&path);
    }
    if let Some(metadata) = set.children.get_mut("f:metadata") {
        metadata.member = false;
    }
    set.children.retain(|_, c| !c.is_empty());
}

/// Keeps only what a write through a subresource (or the main resource
/// of a type with a status subresource) may own: Kubernetes' reset fields.
pub fn restrict_to_part(set: &mut FieldSet, subresource: &str, has_status: bool) {
    match subresource {
        "status" => set.children.retain(|k, _| k == "f:status"),
        "scale" => {
            let replicas = set
                .child("f:spec")
                .and_then(|s| s.child("f:replicas"))
                .cloned();
            *set = FieldSet::default();
            if let Some(replicas) = replicas {
                set.children
                    .entry("f:spec".into())
                    .or_default()
                    .children
                    .insert("f:replicas".into(), replicas);
            }
        }
        _ if has_status => {
            set.children.remove("f:status");
        }
        _ => {}
    }
}

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
    let mut old = old.clone();
    if let Some(metadata) = old.get_mut("metadata").and_then(Value::as_object_mut) {
        metadata.remove("managedFields");
    }
    let comparison = compare(&old, new);
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
    let without = |v: &Value| {
        let mut v = v.clone();
        if let Some(metadata) = v.get_mut("metadata").and_then(Value::as_object_mut) {
            metadata.remove("managedFields");
            metadata.remove("resourceVersion");
        }
        v
    };
    if without(old) != without(new) {
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
        let set = to_field_set(&config);
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
        let c = compare(&old, &new);
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
        let c = compare(&json!({}), &new);
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
