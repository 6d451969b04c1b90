//! The comparison of two objects that tells which fields a write set,
//! changed or removed.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::field_set::{field, is_ignored, item_element, strip_ignored, FieldSet};
use super::shape::{ListKind, Shape};

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
pub fn compare(old: &Value, new: &Value, shape: Shape) -> Comparison {
    let mut out = Comparison::default();
    let (old, new) = (old.as_object(), new.as_object());
    compare_maps(old, new, &mut Vec::new(), &mut out, shape);
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
    shape: Shape,
) {
    let keys: std::collections::BTreeSet<&String> =
        old.into_iter().chain(new).flat_map(Map::keys).collect();
    // Fields nobody owns are not walked (managedFields is most of an
    // object's metadata); `strip_ignored` drops what is left of them.
    for key in keys {
        if is_ignored(path, key) {
            continue;
        }
        path.push(field(key));
        let l = present(old.and_then(|m| m.get(key)));
        let r = present(new.and_then(|m| m.get(key)));
        compare_value(key, l, r, path, out, shape.member(key));
        path.pop();
    }
}

/// `shape` is the values' own.
fn compare_value(
    field: &str,
    l: Option<&Value>,
    r: Option<&Value>,
    path: &mut Vec<String>,
    out: &mut Comparison,
    shape: Shape,
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
    if objects && !shape.is_atomic_map(field) {
        compare_maps(
            l.and_then(Value::as_object),
            r.and_then(Value::as_object),
            path,
            out,
            shape,
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
        let kind = shape.list_kind(field, &all);
        if kind != ListKind::Atomic {
            compare_items(&kind, li, ri, path, out, shape.items());
            return presence(l, r, path, out);
        }
    }
    leaf(l, r, path, out)
}

fn compare_items<'a>(
    kind: &ListKind,
    old: &'a [Value],
    new: &'a [Value],
    path: &mut Vec<String>,
    out: &mut Comparison,
    shape: Shape,
) {
    let index = |items: &'a [Value]| -> BTreeMap<String, &'a Value> {
        let mut map = BTreeMap::new();
        for (i, item) in items.iter().enumerate() {
            map.entry(item_element(kind, item, i)).or_insert(item);
        }
        map
    };
    let (l, r) = (index(old), index(new));
    let elements: std::collections::BTreeSet<&String> = l.keys().chain(r.keys()).collect();
    for element in elements {
        path.push(element.clone());
        let (left, right) = (l.get(element).copied(), r.get(element).copied());
        compare_value("", left, right, path, out, shape);
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
