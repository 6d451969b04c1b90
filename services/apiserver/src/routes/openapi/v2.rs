//! OpenAPI v2 (`/openapi/v2`, Swagger 2.0 JSON), for the tools that still
//! read it: the v3 documents of every served group-version (built-in and
//! custom) merged into one, their schemas under `definitions` and their
//! operations in v2's shape. The built-in half is converted once; the
//! whole is rebuilt only when the custom types change. Served with an
//! ETag, and 304 to a matching If-None-Match, as kube does.
//!
//! It is also served as protobuf (gnostic's OpenAPIv2 messages, see
//! `v2_proto.rs`) to a client that asks for that first, as kubectl
//! does; a client accepting neither gets 406.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex, OnceLock};

use actix_web::http::header;
use actix_web::HttpRequest;
use serde_json::{json, Map, Value};

/// Definitions and paths, merged from v3 documents.
#[derive(Default, Clone)]
pub struct Parts {
    definitions: Map<String, Value>,
    paths: Map<String, Value>,
}

/// A built document: its JSON text, its ETag, and its protobuf form,
/// encoded the first time a client asks for it.
pub struct Document {
    pub(super) json: String,
    pub(super) etag: String,
    protobuf: OnceLock<Vec<u8>>,
}

type Built = Arc<Document>;

/// The forms `/openapi/v2` is served in.
#[derive(Debug, PartialEq)]
pub(super) enum Form {
    Json,
    Protobuf,
}

const PROTOBUF: &str = "application/com.github.proto-openapi.spec.v2";
pub(super) const PROTOBUF_CONTENT_TYPE: &str =
    "application/com.github.proto-openapi.spec.v2.v1.0+protobuf";

/// What the v2 document is built from and the last one built.
#[derive(Default)]
pub struct Cache {
    builtin: OnceLock<Parts>,
    /// The custom documents' hashes the last body was built with, the
    /// body and its ETag.
    last: Mutex<Option<(String, Built)>>,
}

impl Document {
    pub(super) fn protobuf(&self) -> &[u8] {
        self.protobuf.get_or_init(|| {
            let json: Value = serde_json::from_str(&self.json).unwrap_or(Value::Null);
            super::v2_proto::encode(&json)
        })
    }
}

/// The first form the Accept header names that is served here (kubectl
/// asks for gnostic protobuf alone; JSON clients for JSON or anything).
pub(super) fn form_asked(request: &HttpRequest) -> Option<Form> {
    let Some(accept) = request.headers().get(header::ACCEPT) else {
        return Some(Form::Json);
    };
    let accept = accept.to_str().unwrap_or_default().to_ascii_lowercase();
    accept.split(',').find_map(|t| {
        let media = t.split(';').next().unwrap_or_default().trim();
        match media {
            "application/json" | "application/*" | "*/*" | "" => Some(Form::Json),
            media if media.starts_with(PROTOBUF) => Some(Form::Protobuf),
            _ => None,
        }
    })
}

impl Cache {
    /// The document for the built-in v3 `documents` and the custom ones.
    pub fn get(
        &self,
        builtin: &HashMap<String, (String, String)>,
        custom: &HashMap<String, (String, String)>,
    ) -> Built {
        let mut key: Vec<&str> = custom.values().map(|(_, hash)| hash.as_str()).collect();
        key.sort_unstable();
        let key = key.join(",");
        let mut last = self.last.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((built_for, built)) = last.as_ref() {
            if *built_for == key {
                return built.clone();
            }
        }
        let mut parts = self.builtin.get_or_init(|| merged(builtin)).clone();
        let added = merged(custom);
        parts.definitions.extend(added.definitions);
        parts.paths.extend(added.paths);
        let body = json!({
            "swagger": "2.0",
            "info": {"title": "Kubernetes", "version": "v1.32.0"},
            "paths": parts.paths,
            "definitions": parts.definitions,
        })
        .to_string();
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        body.hash(&mut hasher);
        let built = Arc::new(Document {
            json: body,
            etag: format!("{:016X}", hasher.finish()),
            protobuf: OnceLock::new(),
        });
        *last = Some((key, built.clone()));
        built
    }
}

/// The v3 `documents` (rendered text by path) as v2 parts.
fn merged(documents: &HashMap<String, (String, String)>) -> Parts {
    let mut parts = Parts::default();
    for (text, _) in documents.values() {
        let Ok(mut document) = serde_json::from_str::<Value>(text) else {
            continue;
        };
        rewrite_refs(&mut document);
        if let Some(Value::Object(schemas)) =
            document["components"].get_mut("schemas").map(Value::take)
        {
            parts
                .definitions
                .extend(schemas.into_iter().map(|(k, mut v)| {
                    nullable_as_extension(&mut v);
                    (k, v)
                }));
        }
        if let Some(Value::Object(paths)) = document.get_mut("paths").map(Value::take) {
            for (path, item) in paths {
                parts.paths.insert(path, path_item(item));
            }
        }
    }
    parts
}

/// `#/components/schemas/X` is `#/definitions/X` in v2.
fn rewrite_refs(value: &mut Value) {
    match value {
        Value::Object(map) => {
            if let Some(Value::String(target)) = map.get_mut("$ref") {
                if let Some(name) = target.strip_prefix("#/components/schemas/") {
                    *target = format!("#/definitions/{name}");
                }
            }
            map.values_mut().for_each(rewrite_refs);
        }
        Value::Array(items) => items.iter_mut().for_each(rewrite_refs),
        _ => {}
    }
}

/// v3's `nullable` is kube's `x-nullable` extension in v2.
fn nullable_as_extension(value: &mut Value) {
    match value {
        Value::Object(map) => {
            if let Some(nullable) = map.remove("nullable") {
                map.insert("x-nullable".into(), nullable);
            }
            map.values_mut().for_each(nullable_as_extension);
        }
        Value::Array(items) => items.iter_mut().for_each(nullable_as_extension),
        _ => {}
    }
}

/// A v3 path item's operations in v2's shape: the request body is a
/// `body` parameter, parameters carry their type inline, responses
/// their schema.
fn path_item(item: Value) -> Value {
    let Value::Object(operations) = item else {
        return item;
    };
    let converted: Map<String, Value> = operations
        .into_iter()
        .map(|(method, op)| (method, operation(op)))
        .collect();
    Value::Object(converted)
}

fn operation(mut op: Value) -> Value {
    let mut parameters: Vec<Value> = op["parameters"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|p| {
            let mut v2 = json!({"name": p["name"], "in": p["in"]});
            if let Some(Value::Object(schema)) = p.get("schema") {
                v2.as_object_mut()
                    .expect("an object")
                    .extend(schema.clone());
            }
            v2
        })
        .collect();
    if let Some(body) = op.get_mut("requestBody").map(Value::take) {
        let schema = body["content"]
            .as_object()
            .and_then(|c| c.values().next())
            .map(|c| c["schema"].clone())
            .unwrap_or(json!({}));
        parameters.push(json!({"name": "body", "in": "body", "required": true, "schema": schema}));
        let consumes: Vec<&String> = body["content"]
            .as_object()
            .into_iter()
            .flat_map(|c| c.keys())
            .collect();
        op["consumes"] = json!(consumes);
    }
    if let Some(map) = op.as_object_mut() {
        map.remove("requestBody");
        if !parameters.is_empty() {
            map.insert("parameters".into(), Value::from(parameters));
        }
    }
    if let Some(Value::Object(responses)) = op.get_mut("responses") {
        for response in responses.values_mut() {
            let schema = response["content"]
                .as_object()
                .and_then(|c| c.values().next())
                .map(|c| c["schema"].clone());
            if let Some(map) = response.as_object_mut() {
                map.remove("content");
                if let Some(schema) = schema {
                    map.insert("schema".into(), schema);
                }
            }
        }
    }
    op["produces"] = json!(["application/json", "application/yaml"]);
    op["schemes"] = json!(["https"]);
    op
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn v3_documents_become_one_v2_document() {
        let v3 = json!({"openapi": "3.0.0", "paths": {"/api/v1/namespaces/{namespace}/configmaps": {
            "post": {"parameters": [{"name": "dryRun", "in": "query", "schema": {"type": "string", "uniqueItems": true}}],
                     "requestBody": {"content": {"*/*": {"schema": {"$ref": "#/components/schemas/ConfigMap"}}}},
                     "responses": {"200": {"description": "OK", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ConfigMap"}}}}}}}},
            "components": {"schemas": {"ConfigMap": {"type": "object", "properties": {"data": {"type": "object", "nullable": true}}}}}});
        let documents = HashMap::from([("api/v1".to_string(), (v3.to_string(), "h".to_string()))]);
        let cache = Cache::default();
        let built = cache.get(&documents, &HashMap::new());
        let v2: Value = serde_json::from_str(&built.json).unwrap();
        assert_eq!(v2["swagger"], "2.0");
        assert_eq!(
            v2["definitions"]["ConfigMap"]["properties"]["data"]["x-nullable"],
            true
        );
        let post = &v2["paths"]["/api/v1/namespaces/{namespace}/configmaps"]["post"];
        assert_eq!(
            post["parameters"][0],
            json!({"name": "dryRun", "in": "query", "type": "string", "uniqueItems": true})
        );
        assert_eq!(
            post["parameters"][1]["schema"]["$ref"],
            "#/definitions/ConfigMap"
        );
        assert_eq!(
            post["responses"]["200"]["schema"]["$ref"],
            "#/definitions/ConfigMap"
        );
        assert!(
            Arc::ptr_eq(&built, &cache.get(&documents, &HashMap::new())),
            "built once"
        );
    }

    #[test]
    fn the_first_form_accepted_is_served() {
        use actix_web::test::TestRequest;
        let with = |accept: &str| {
            form_asked(
                &TestRequest::default()
                    .insert_header((header::ACCEPT, accept))
                    .to_http_request(),
            )
        };
        let kubectl = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf";
        assert_eq!(with(kubectl), Some(Form::Protobuf));
        assert_eq!(with("application/json, */*"), Some(Form::Json));
        assert_eq!(
            with(&format!("{kubectl}, application/json")),
            Some(Form::Protobuf)
        );
        assert_eq!(with("application/yaml"), None);
        let no_accept = TestRequest::default().to_http_request();
        assert_eq!(form_asked(&no_accept), Some(Form::Json));
    }
}
