//! Seeded generation of mutated API requests for the fuzz test: valid
//! ConfigMap bodies in every body and patch content type, then byte flips,
//! truncation, odd types in metadata and data, deep nesting, control
//! characters in field names, or random bytes.

use prost::encoding::{encode_key, encode_varint, WireType};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};

/// A fuzz run's knob from the environment (`CAPSTAN_FUZZ_SEED`,
/// `CAPSTAN_FUZZ_REQUESTS`, ...), or `default`.
pub fn fuzz_setting(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .map(|v| {
            v.parse()
                .unwrap_or_else(|_| panic!("{name}={v} is not a number"))
        })
        .unwrap_or(default)
}

/// One request to send: method, path, content type and body bytes.
#[derive(Clone)]
pub struct FuzzRequest {
    pub method: &'static str,
    pub path: String,
    pub content_type: &'static str,
    pub body: Vec<u8>,
    /// What was done to the body, for failure messages.
    pub mutation: String,
}

/// Short enough for a failure message: the body's start only.
impl std::fmt::Debug for FuzzRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let start = &self.body[..self.body.len().min(160)];
        write!(
            f,
            "{} {} ({}, {} bytes, mutation: {}) body starts {:?}",
            self.method,
            self.path,
            self.content_type,
            self.body.len(),
            self.mutation,
            String::from_utf8_lossy(start)
        )
    }
}

/// The request kinds: a create in each body encoding, a replace, and a
/// patch of each of the four types.
const SHAPES: [(&str, &str); 8] = [
    ("POST", "application/json"),
    ("POST", "application/yaml"),
    ("POST", "application/vnd.kubernetes.protobuf"),
    ("PUT", "application/json"),
    ("PATCH", "application/merge-patch+json"),
    ("PATCH", "application/strategic-merge-patch+json"),
    ("PATCH", "application/json-patch+json"),
    ("PATCH", "application/apply-patch+yaml"),
];

pub struct Mutator {
    rng: StdRng,
    namespace: String,
    /// Requests made so far: each valid body carries a new value.
    issued: u64,
}

impl Mutator {
    pub fn new(seed: u64, namespace: &str) -> Mutator {
        Mutator {
            rng: StdRng::seed_from_u64(seed),
            namespace: namespace.to_string(),
            issued: 0,
        }
    }

    /// The next request; `target` names an existing ConfigMap that PUT and
    /// PATCH requests address, `fresh` a name no object has yet.
    pub fn next(&mut self, target: &str, fresh: &str) -> FuzzRequest {
        let (method, content_type) = SHAPES[self.rng.random_range(0..SHAPES.len())];
        let collection = format!("/api/v1/namespaces/{}/configmaps", self.namespace);
        let (path, name) = match method {
            "POST" => (collection, fresh),
            "PATCH" if content_type.contains("apply") => (
                format!("{collection}/{target}?fieldManager=fuzz&force=true"),
                target,
            ),
            _ => (format!("{collection}/{target}"), target),
        };
        let mut object = self.valid_body(method, content_type, name);
        let mut mutation = String::from("none");
        if content_type != "application/json-patch+json" && self.rng.random_bool(0.5) {
            mutation = self.mutate_value(&mut object);
        }
        let mut body = encode(content_type, &object, &self.namespace);
        if self.rng.random_bool(0.5) {
            mutation = format!("{mutation}, then {}", self.mutate_bytes(&mut body));
        }
        FuzzRequest {
            method,
            path,
            content_type,
            body,
            mutation,
        }
    }

    fn valid_body(&mut self, method: &str, content_type: &str, name: &str) -> Value {
        self.issued += 1;
        let value = format!("v{}", self.issued);
        match (method, content_type) {
            (_, "application/json-patch+json") => {
                json!([{"op": "add", "path": "/data/fuzz", "value": value}])
            }
            ("PATCH", c) if !c.contains("apply") => json!({"data": {"fuzz": value}}),
            _ => json!({
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": name, "namespace": self.namespace, "labels": {"app": "fuzz"}},
                "data": {"fuzz": value},
            }),
        }
    }

    /// Changes the decoded value: an odd type, a strange field name, a
    /// deep nest, or a removed field.
    fn mutate_value(&mut self, object: &mut Value) -> String {
        let odd = [
            json!(null),
            json!(7),
            json!(-1.5e300),
            json!(true),
            json!([1, "x", null]),
            json!({"nested": {"deeper": []}}),
            json!("\u{0}\u{7f}\u{202e}"),
        ];
        let fields = [
            "metadata",
            "data",
            "kind",
            "apiVersion",
            "metadata.name",
            "metadata.namespace",
            "metadata.labels",
            "metadata.resourceVersion",
            "data.fuzz",
        ];
        let field = fields[self.rng.random_range(0..fields.len())];
        match self.rng.random_range(0..4) {
            0 => {
                let replacement = odd[self.rng.random_range(0..odd.len())].clone();
                set_field(object, field, replacement.clone());
                format!("{field} set to {replacement}")
            }
            1 => {
                let name = ["\u{7f}amespace", "a\nb", "x\"y\\z", "\u{1}", "ünï"]
                    [self.rng.random_range(0..5)];
                set_field(object, &format!("metadata.{name}"), json!("x"));
                format!("field named {name:?} in metadata")
            }
            2 => {
                let depth = self.rng.random_range(50..700);
                let mut nest = json!("bottom");
                for _ in 0..depth {
                    nest = json!({ "n": nest });
                }
                set_field(object, field, nest);
                format!("{field} nested {depth} deep")
            }
            _ => {
                remove_field(object, field);
                format!("{field} removed")
            }
        }
    }

    /// Changes the encoded bytes: flips, truncation, or random bytes.
    fn mutate_bytes(&mut self, body: &mut Vec<u8>) -> String {
        match self.rng.random_range(0..3) {
            0 if !body.is_empty() => {
                let flips = self.rng.random_range(1..8);
                for _ in 0..flips {
                    let at = self.rng.random_range(0..body.len());
                    body[at] ^= 1 << self.rng.random_range(0..8);
                }
                format!("{flips} bit flips")
            }
            1 if !body.is_empty() => {
                let keep = self.rng.random_range(0..body.len());
                body.truncate(keep);
                format!("truncated to {keep} bytes")
            }
            _ => {
                let length = self.rng.random_range(0..512);
                *body = (0..length).map(|_| self.rng.random()).collect();
                format!("{length} random bytes")
            }
        }
    }
}

/// Removes `path` (dot-separated) from `object`, if it is there.
fn remove_field(object: &mut Value, path: &str) {
    let (parent, last) = match path.rsplit_once('.') {
        Some((parent, last)) => (parent.split('.').collect::<Vec<_>>(), last),
        None => (Vec::new(), path),
    };
    let mut at = object;
    for part in parent {
        match at.get_mut(part) {
            Some(next) => at = next,
            None => return,
        }
    }
    if let Some(map) = at.as_object_mut() {
        map.remove(last);
    }
}

/// Sets `path` (dot-separated) in `object`, creating objects on the way.
fn set_field(object: &mut Value, path: &str, value: Value) {
    let mut at = object;
    let mut parts = path.split('.').peekable();
    while let Some(part) = parts.next() {
        if !at.is_object() {
            *at = json!({});
        }
        let map = at.as_object_mut().expect("made an object");
        if parts.peek().is_none() {
            map.insert(part.to_string(), value);
            return;
        }
        at = map.entry(part).or_insert_with(|| json!({}));
    }
}

/// The body in `content_type`'s encoding.
pub fn encode(content_type: &str, object: &Value, namespace: &str) -> Vec<u8> {
    match content_type {
        "application/yaml" | "application/apply-patch+yaml" => serde_yaml::to_string(object)
            .expect("YAML of a JSON value")
            .into_bytes(),
        "application/vnd.kubernetes.protobuf" => protobuf_config_map(object, namespace),
        _ => object.to_string().into_bytes(),
    }
}

/// A ConfigMap in Kubernetes' protobuf envelope (`k8s\0` + runtime.Unknown
/// holding a v1.ConfigMap), built from the JSON fields it understands so
/// that value mutations of strings still reach the protobuf decoder.
fn protobuf_config_map(object: &Value, namespace: &str) -> Vec<u8> {
    let text = |v: &Value| {
        v.as_str()
            .map(str::to_string)
            .unwrap_or_else(|| v.to_string())
    };
    let mut meta = Vec::new();
    put_bytes(&mut meta, 1, text(&object["metadata"]["name"]).as_bytes());
    put_bytes(&mut meta, 3, namespace.as_bytes());
    let mut config_map = Vec::new();
    put_bytes(&mut config_map, 1, &meta);
    if let Some(data) = object["data"].as_object() {
        for (key, value) in data {
            let mut entry = Vec::new();
            put_bytes(&mut entry, 1, key.as_bytes());
            put_bytes(&mut entry, 2, text(value).as_bytes());
            put_bytes(&mut config_map, 2, &entry);
        }
    }
    let mut type_meta = Vec::new();
    put_bytes(&mut type_meta, 1, b"v1");
    put_bytes(&mut type_meta, 2, b"ConfigMap");
    let mut unknown = b"k8s\0".to_vec();
    put_bytes(&mut unknown, 1, &type_meta);
    put_bytes(&mut unknown, 2, &config_map);
    unknown
}

fn put_bytes(out: &mut Vec<u8>, tag: u32, bytes: &[u8]) {
    encode_key(tag, WireType::LengthDelimited, out);
    encode_varint(bytes.len() as u64, out);
    out.extend_from_slice(bytes);
}

/// One seeded change to raw bytes: bits flipped, cut short, random bytes
/// appended, or replaced by random bytes.
pub fn mutate_bytes(rng: &mut StdRng, message: &mut Vec<u8>) {
    match rng.random_range(0..4) {
        0 if !message.is_empty() => {
            for _ in 0..rng.random_range(1..6) {
                let at = rng.random_range(0..message.len());
                message[at] ^= 1 << rng.random_range(0..8);
            }
        }
        1 if !message.is_empty() => message.truncate(rng.random_range(0..message.len())),
        2 => message.extend((0..rng.random_range(1..64)).map(|_| rng.random::<u8>())),
        _ => {
            *message = (0..rng.random_range(0..256))
                .map(|_| rng.random())
                .collect()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_seed_gives_the_same_requests() {
        let mut a = Mutator::new(7, "ns");
        let mut b = Mutator::new(7, "ns");
        for i in 0..50 {
            let (x, y) = (a.next("t", &i.to_string()), b.next("t", &i.to_string()));
            assert_eq!((x.path, x.body), (y.path, y.body));
        }
    }

    #[test]
    fn remove_field_follows_the_path() {
        let mut object = json!({"metadata": {"name": "a", "labels": {}}});
        remove_field(&mut object, "metadata.name");
        remove_field(&mut object, "data.missing");
        assert_eq!(object, json!({"metadata": {"labels": {}}}));
    }

    #[test]
    fn set_field_creates_the_path() {
        let mut object = json!({"metadata": 3});
        set_field(&mut object, "metadata.a", json!(1));
        assert_eq!(object, json!({"metadata": {"a": 1}}));
    }
}
