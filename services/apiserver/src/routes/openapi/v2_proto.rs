//! `/openapi/v2` as protobuf, the form kubectl asks for (for example to
//! apply a `kind: List`): the Swagger 2.0 JSON document re-encoded as
//! gnostic's `openapi.v2.Document`. No crate carries those messages, so the
//! part of them clients read is declared here: the document, its
//! definitions and every schema field; paths are left empty, since the
//! clients that read this form build their models from the definitions.
//! Values that are free JSON (defaults, enums, examples, `x-` extensions)
//! travel as gnostic's `Any` with their YAML text; JSON text is YAML.

use prost::Message;
use serde_json::Value;

#[derive(Clone, PartialEq, Message)]
pub struct Document {
    #[prost(string, tag = "1")]
    pub swagger: String,
    #[prost(message, optional, tag = "2")]
    pub info: Option<Info>,
    #[prost(message, optional, tag = "8")]
    pub paths: Option<Paths>,
    #[prost(message, optional, tag = "9")]
    pub definitions: Option<Definitions>,
}

#[derive(Clone, PartialEq, Message)]
pub struct Info {
    #[prost(string, tag = "1")]
    pub title: String,
    #[prost(string, tag = "2")]
    pub version: String,
}

#[derive(Clone, PartialEq, Message)]
pub struct Paths {}

#[derive(Clone, PartialEq, Message)]
pub struct Definitions {
    #[prost(message, repeated, tag = "1")]
    pub additional_properties: Vec<NamedSchema>,
}

#[derive(Clone, PartialEq, Message)]
pub struct NamedSchema {
    #[prost(string, tag = "1")]
    pub name: String,
    #[prost(message, optional, tag = "2")]
    pub value: Option<Schema>,
}

/// gnostic's `Any`: only its YAML text is used.
#[derive(Clone, PartialEq, Message)]
pub struct Any {
    #[prost(string, tag = "2")]
    pub yaml: String,
}

#[derive(Clone, PartialEq, Message)]
pub struct NamedAny {
    #[prost(string, tag = "1")]
    pub name: String,
    #[prost(message, optional, tag = "2")]
    pub value: Option<Any>,
}

#[derive(Clone, PartialEq, Message)]
pub struct Schema {
    #[prost(string, tag = "1")]
    pub r#ref: String,
    #[prost(string, tag = "2")]
    pub format: String,
    #[prost(string, tag = "3")]
    pub title: String,
    #[prost(string, tag = "4")]
    pub description: String,
    #[prost(message, optional, tag = "5")]
    pub default: Option<Any>,
    #[prost(double, tag = "6")]
    pub multiple_of: f64,
    #[prost(double, tag = "7")]
    pub maximum: f64,
    #[prost(bool, tag = "8")]
    pub exclusive_maximum: bool,
    #[prost(double, tag = "9")]
    pub minimum: f64,
    #[prost(bool, tag = "10")]
    pub exclusive_minimum: bool,
    #[prost(int64, tag = "11")]
    pub max_length: i64,
    #[prost(int64, tag = "12")]
    pub min_length: i64,
    #[prost(string, tag = "13")]
    pub pattern: String,
    #[prost(int64, tag = "14")]
    pub max_items: i64,
    #[prost(int64, tag = "15")]
    pub min_items: i64,
    #[prost(bool, tag = "16")]
    pub unique_items: bool,
    #[prost(int64, tag = "17")]
    pub max_properties: i64,
    #[prost(int64, tag = "18")]
    pub min_properties: i64,
    #[prost(string, repeated, tag = "19")]
    pub required: Vec<String>,
    #[prost(message, repeated, tag = "20")]
    pub r#enum: Vec<Any>,
    #[prost(message, optional, tag = "21")]
    pub additional_properties: Option<AdditionalPropertiesItem>,
    #[prost(message, optional, tag = "22")]
    pub r#type: Option<TypeItem>,
    #[prost(message, optional, tag = "23")]
    pub items: Option<ItemsItem>,
    #[prost(message, repeated, tag = "24")]
    pub all_of: Vec<Schema>,
    #[prost(message, optional, tag = "25")]
    pub properties: Option<Properties>,
    #[prost(string, tag = "26")]
    pub discriminator: String,
    #[prost(bool, tag = "27")]
    pub read_only: bool,
    #[prost(message, optional, tag = "30")]
    pub example: Option<Any>,
    #[prost(message, repeated, tag = "31")]
    pub vendor_extension: Vec<NamedAny>,
}

#[derive(Clone, PartialEq, Message)]
pub struct AdditionalPropertiesItem {
    #[prost(oneof = "AdditionalProperties", tags = "1, 2")]
    pub oneof: Option<AdditionalProperties>,
}

#[derive(Clone, PartialEq, prost::Oneof)]
pub enum AdditionalProperties {
    #[prost(message, boxed, tag = "1")]
    Schema(Box<Schema>),
    #[prost(bool, tag = "2")]
    Boolean(bool),
}

#[derive(Clone, PartialEq, Message)]
pub struct TypeItem {
    #[prost(string, repeated, tag = "1")]
    pub value: Vec<String>,
}

#[derive(Clone, PartialEq, Message)]
pub struct ItemsItem {
    #[prost(message, repeated, tag = "1")]
    pub schema: Vec<Schema>,
}

#[derive(Clone, PartialEq, Message)]
pub struct Properties {
    #[prost(message, repeated, tag = "1")]
    pub additional_properties: Vec<NamedSchema>,
}

/// The protobuf form of a Swagger 2.0 JSON document.
pub fn encode(document: &Value) -> Vec<u8> {
    let text = |key: &str| document[key].as_str().unwrap_or_default().to_string();
    let info = &document["info"];
    let definitions = document["definitions"]
        .as_object()
        .map(|all| all.iter().map(|(name, s)| named(name, s)).collect())
        .unwrap_or_default();
    Document {
        swagger: text("swagger"),
        info: Some(Info {
            title: info["title"].as_str().unwrap_or_default().to_string(),
            version: info["version"].as_str().unwrap_or_default().to_string(),
        }),
        paths: Some(Paths {}),
        definitions: Some(Definitions {
            additional_properties: definitions,
        }),
    }
    .encode_to_vec()
}

fn named(name: &str, schema: &Value) -> NamedSchema {
    NamedSchema {
        name: name.to_string(),
        value: Some(schema_of(schema)),
    }
}

fn any(value: &Value) -> Any {
    Any {
        yaml: value.to_string(),
    }
}

fn schema_of(json: &Value) -> Schema {
    let text = |key: &str| json[key].as_str().unwrap_or_default().to_string();
    let number = |key: &str| json[key].as_f64().unwrap_or_default();
    let integer = |key: &str| json[key].as_i64().unwrap_or_default();
    let flag = |key: &str| json[key].as_bool().unwrap_or_default();
    let schemas = |value: &Value| -> Vec<Schema> {
        match value {
            Value::Array(all) => all.iter().map(schema_of).collect(),
            Value::Object(_) => vec![schema_of(value)],
            _ => Vec::new(),
        }
    };
    Schema {
        r#ref: text("$ref"),
        format: text("format"),
        title: text("title"),
        description: text("description"),
        default: json.get("default").map(any),
        multiple_of: number("multipleOf"),
        maximum: number("maximum"),
        exclusive_maximum: flag("exclusiveMaximum"),
        minimum: number("minimum"),
        exclusive_minimum: flag("exclusiveMinimum"),
        max_length: integer("maxLength"),
        min_length: integer("minLength"),
        pattern: text("pattern"),
        max_items: integer("maxItems"),
        min_items: integer("minItems"),
        unique_items: flag("uniqueItems"),
        max_properties: integer("maxProperties"),
        min_properties: integer("minProperties"),
        required: strings(&json["required"]),
        r#enum: json["enum"]
            .as_array()
            .map_or_else(Vec::new, |v| v.iter().map(any).collect()),
        additional_properties: additional(&json["additionalProperties"]),
        r#type: type_of(&json["type"]),
        items: json.get("items").map(|items| ItemsItem {
            schema: schemas(items),
        }),
        all_of: schemas(&json["allOf"]),
        properties: json["properties"].as_object().map(|all| Properties {
            additional_properties: all.iter().map(|(name, s)| named(name, s)).collect(),
        }),
        discriminator: text("discriminator"),
        read_only: flag("readOnly"),
        example: json.get("example").map(any),
        vendor_extension: extensions(json),
    }
}

fn strings(value: &Value) -> Vec<String> {
    value.as_array().map_or_else(Vec::new, |all| {
        all.iter()
            .filter_map(|v| v.as_str().map(str::to_string))
            .collect()
    })
}

fn type_of(value: &Value) -> Option<TypeItem> {
    match value {
        Value::String(one) => Some(TypeItem {
            value: vec![one.clone()],
        }),
        Value::Array(_) => Some(TypeItem {
            value: strings(value),
        }),
        _ => None,
    }
}

fn additional(value: &Value) -> Option<AdditionalPropertiesItem> {
    let oneof = match value {
        Value::Bool(allowed) => AdditionalProperties::Boolean(*allowed),
        Value::Object(_) => AdditionalProperties::Schema(Box::new(schema_of(value))),
        _ => return None,
    };
    Some(AdditionalPropertiesItem { oneof: Some(oneof) })
}

/// `x-` keys, in the document's order.
fn extensions(json: &Value) -> Vec<NamedAny> {
    json.as_object().map_or_else(Vec::new, |all| {
        all.iter()
            .filter(|(key, _)| key.starts_with("x-"))
            .map(|(key, value)| NamedAny {
                name: key.clone(),
                value: Some(any(value)),
            })
            .collect()
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn definitions_and_their_fields_survive_the_round_trip() {
        let document = json!({
            "swagger": "2.0",
            "info": {"title": "Kubernetes", "version": "v1.32.0"},
            "definitions": {"io.k8s.api.core.v1.ConfigMap": {
                "type": "object",
                "required": ["data"],
                "properties": {
                    "data": {"type": "object", "additionalProperties": {"type": "string"}},
                    "items": {"type": "array", "items": {"$ref": "#/definitions/x"}},
                },
                "x-kubernetes-group-version-kind": [{"group": "", "kind": "ConfigMap", "version": "v1"}],
            }},
        });
        let decoded = Document::decode(encode(&document).as_slice()).unwrap();
        assert_eq!(decoded.swagger, "2.0");
        let definitions = decoded.definitions.unwrap().additional_properties;
        let config_map = definitions[0].value.as_ref().unwrap();
        assert_eq!(definitions[0].name, "io.k8s.api.core.v1.ConfigMap");
        assert_eq!(config_map.r#type.as_ref().unwrap().value, ["object"]);
        assert_eq!(config_map.required, ["data"]);
        let extension = &config_map.vendor_extension[0];
        assert_eq!(extension.name, "x-kubernetes-group-version-kind");
        let yaml = &extension.value.as_ref().unwrap().yaml;
        assert_eq!(
            serde_json::from_str::<Value>(yaml).unwrap(),
            document["definitions"]["io.k8s.api.core.v1.ConfigMap"]
                ["x-kubernetes-group-version-kind"]
        );
        let properties = &config_map
            .properties
            .as_ref()
            .unwrap()
            .additional_properties;
        let data = properties.iter().find(|p| p.name == "data").unwrap();
        let values = data.value.as_ref().unwrap().additional_properties.as_ref();
        assert!(matches!(
            values.and_then(|v| v.oneof.as_ref()),
            Some(AdditionalProperties::Schema(s)) if s.r#type.as_ref().unwrap().value == ["string"]
        ));
        let items = properties.iter().find(|p| p.name == "items").unwrap();
        let item = &items.value.as_ref().unwrap().items.as_ref().unwrap().schema[0];
        assert_eq!(item.r#ref, "#/definitions/x");
    }
}
