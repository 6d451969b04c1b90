//! Sets of field paths and their `fieldsV1` encoding, how a path names a
//! list element (by the list's kind, `shape.rs`), and the fields no
//! manager owns.

use std::collections::BTreeMap;

use super::shape::{ListKind, Shape};
use serde_json::{Map, Value};

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

/// The path element naming `item` of a list of `kind`.
pub fn item_element(kind: &ListKind, item: &Value, index: usize) -> String {
    match kind {
        ListKind::Keyed(keys) => {
            let mut id = Map::new();
            for key in keys {
                match item.get(key.as_str()) {
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
pub fn to_field_set(obj: &Value, shape: Shape) -> FieldSet {
    let mut set = FieldSet::default();
    if let Value::Object(map) = obj {
        walk_map(map, &mut set, shape);
    }
    set
}

fn walk_map(map: &Map<String, Value>, node: &mut FieldSet, shape: Shape) {
    for (key, value) in map {
        let child = node.children.entry(field(key)).or_default();
        walk_value(key, value, child, shape.member(key));
    }
}

/// `shape` is the value's own.
fn walk_value(field: &str, value: &Value, node: &mut FieldSet, shape: Shape) {
    match value {
        Value::Object(map) if map.is_empty() || shape.is_atomic_map(field) => node.member = true,
        Value::Object(map) => walk_map(map, node, shape),
        Value::Array(items) if items.is_empty() => node.member = true,
        Value::Array(items) => match shape.list_kind(field, items) {
            ListKind::Atomic => node.member = true,
            kind => {
                for (i, item) in items.iter().enumerate() {
                    let child = node
                        .children
                        .entry(item_element(&kind, item, i))
                        .or_default();
                    child.member = true;
                    if let Value::Object(map) = item {
                        walk_map(map, child, shape.items());
                    }
                }
            }
        },
        _ => node.member = true,
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

/// Whether the field `key` of the map at `parent` is one nobody owns.
pub fn is_ignored(parent: &[String], key: &str) -> bool {
    IGNORED.iter().any(|ignored| {
        let Some((last, above)) = ignored.split_last() else {
            return false;
        };
        above.len() == parent.len()
            && above.iter().zip(parent).all(|(a, b)| *a == b)
            && last.strip_prefix("f:") == Some(key)
    })
}

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
