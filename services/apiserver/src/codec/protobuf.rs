//! Kubernetes protobuf bodies (`application/vnd.kubernetes.protobuf`), as
//! `kubectl create configmap|secret|namespace|deployment|service` sends
//! them: the `k8s\0` magic, a `runtime.Unknown` envelope naming the type,
//! and the `k8s.io/api` message in `raw`. Messages are decoded to JSON by
//! field tables transcribed from the upstream `generated.proto` files; a
//! field outside the tables is refused, never dropped.

mod tables;

use base64::Engine;
use serde_json::{Map, Value};

use crate::error::ApiError;
use tables::{f, schema_of, Field, Ty, UNKNOWN};

const MAGIC: &[u8] = b"k8s\0";

#[derive(Debug, thiserror::Error)]
enum WireError {
    #[error("truncated message")]
    Truncated,
    #[error("unsupported wire type {0}")]
    WireType(u64),
    #[error("field {0} is not supported")]
    UnknownField(String),
    #[error("invalid UTF-8 in field {0}")]
    Utf8(&'static str),
}

/// Decodes an enveloped body into the JSON object it stands for.
pub fn decode(bytes: &[u8]) -> Result<Value, ApiError> {
    let body = bytes.strip_prefix(MAGIC).ok_or_else(|| {
        ApiError::BadRequest("protobuf body does not start with the k8s magic".into())
    })?;
    let envelope = message(body, UNKNOWN)
        .map_err(|e| ApiError::BadRequest(format!("protobuf envelope: {e}")))?;
    let api_version = envelope["typeMeta"]["apiVersion"]
        .as_str()
        .unwrap_or("")
        .to_string();
    let kind = envelope["typeMeta"]["kind"]
        .as_str()
        .unwrap_or("")
        .to_string();
    let schema = schema_of(&api_version, &kind)
        .ok_or_else(|| ApiError::UnsupportedMediaType(format!("application/json (protobuf is accepted for ConfigMap, Secret, Namespace, Service, Deployment, Job, CronJob, Ingress, autoscaling/v1 HorizontalPodAutoscaler, RBAC types, ServiceAccount, TokenRequest and the reviews, not {api_version} {kind})")))?;
    let raw = base64::engine::general_purpose::STANDARD
        .decode(envelope["raw"].as_str().unwrap_or(""))
        .unwrap_or_default();
    let mut object = message(&raw, schema)
        .map_err(|e| ApiError::BadRequest(format!("{kind} in protobuf: {e}")))?;
    object["apiVersion"] = api_version.into();
    object["kind"] = kind.into();
    Ok(object)
}

struct Reader<'a> {
    bytes: &'a [u8],
}

impl<'a> Reader<'a> {
    fn varint(&mut self) -> Result<u64, WireError> {
        let mut value = 0u64;
        for shift in (0..64).step_by(7) {
            let (&byte, rest) = self.bytes.split_first().ok_or(WireError::Truncated)?;
            self.bytes = rest;
            value |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(WireError::Truncated)
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], WireError> {
        if self.bytes.len() < n {
            return Err(WireError::Truncated);
        }
        let (head, rest) = self.bytes.split_at(n);
        self.bytes = rest;
        Ok(head)
    }
}

fn message(bytes: &[u8], schema: &[Field]) -> Result<Value, WireError> {
    let mut reader = Reader { bytes };
    let mut out = Map::new();
    while !reader.bytes.is_empty() {
        let tag = reader.varint()?;
        let (number, wire) = (tag >> 3, tag & 7);
        let field = schema.iter().find(|f| f.number == number).ok_or_else(|| {
            WireError::UnknownField(format!(
                "{number} (next to {})",
                schema.iter().map(|f| f.name).collect::<Vec<_>>().join(", ")
            ))
        })?;
        let value = match wire {
            0 => scalar(field, reader.varint()?),
            2 => {
                let len = reader.varint()? as usize;
                let payload = reader.take(len)?;
                delimited(field, payload)?
            }
            1 => {
                reader.take(8)?;
                continue;
            }
            5 => {
                reader.take(4)?;
                continue;
            }
            other => return Err(WireError::WireType(other)),
        };
        insert(&mut out, field, value);
    }
    Ok(Value::Object(out))
}

fn scalar(field: &Field, raw: u64) -> Value {
    match field.ty {
        Ty::Bool => Value::Bool(raw != 0),
        Ty::Flag if raw == 0 => Value::Null,
        Ty::Flag => Value::Bool(true),
        Ty::Count if raw == 0 => Value::Null,
        Ty::Ignored => Value::Null,
        _ => Value::from(raw as i64),
    }
}

fn delimited(field: &Field, payload: &[u8]) -> Result<Value, WireError> {
    let text = || {
        std::str::from_utf8(payload)
            .map(|s| Value::String(s.to_string()))
            .map_err(|_| WireError::Utf8(field.name))
    };
    match field.ty {
        Ty::Str => text(),
        Ty::Bytes => Ok(base64::engine::general_purpose::STANDARD
            .encode(payload)
            .into()),
        Ty::Msg(schema) | Ty::Inline(schema) => message(payload, schema),
        Ty::MapStr => map_entry(payload, Ty::Str),
        Ty::MapBytes => map_entry(payload, Ty::Bytes),
        Ty::MapQuantity => map_entry(payload, Ty::Quantity),
        Ty::Time => {
            let time = message(payload, &[f(1, "seconds", Ty::Int), f(2, "nanos", Ty::Int)])?;
            let seconds = time["seconds"].as_i64().unwrap_or(0).max(0) as u64;
            if seconds == 0 {
                return Ok(Value::Null);
            }
            let at = std::time::UNIX_EPOCH + std::time::Duration::from_secs(seconds);
            Ok(humantime::format_rfc3339_seconds(at).to_string().into())
        }
        Ty::IntOrString => {
            let v = message(
                payload,
                &[
                    f(1, "type", Ty::Int),
                    f(2, "intVal", Ty::Int),
                    f(3, "strVal", Ty::Str),
                ],
            )?;
            Ok(if v["type"] == 1 {
                v["strVal"].clone()
            } else {
                v["intVal"].as_i64().unwrap_or(0).into()
            })
        }
        Ty::Quantity => Ok(message(payload, &[f(1, "string", Ty::Str)])?["string"].clone()),
        Ty::Ignored => Ok(Value::Null),
        Ty::Bool | Ty::Int | Ty::Flag | Ty::Count => Err(WireError::WireType(2)),
    }
}

/// A map entry is a message {key = 1, value = 2}; returns {key: value}.
fn map_entry(payload: &[u8], value_ty: Ty) -> Result<Value, WireError> {
    let entry = message(payload, &[f(1, "key", Ty::Str), f(2, "value", value_ty)])?;
    let key = entry["key"].as_str().unwrap_or("").to_string();
    let value = match (&entry["value"], value_ty) {
        (Value::Null, Ty::Bytes | Ty::Str) => Value::String(String::new()),
        (v, _) => v.clone(),
    };
    Ok(Value::Object([(key, value)].into_iter().collect()))
}

fn insert(out: &mut Map<String, Value>, field: &Field, value: Value) {
    // Go's generated marshallers write unset strings and times as empty
    // values; JSON leaves them out, and so do we.
    let unset = value.is_null() || value.as_str() == Some("");
    if unset && !field.repeated {
        return;
    }
    if let (Ty::Inline(_), Value::Object(fields)) = (field.ty, &value) {
        out.extend(fields.clone());
        return;
    }
    let slot = out.entry(field.name);
    match (field.ty, field.repeated) {
        (Ty::MapStr | Ty::MapBytes | Ty::MapQuantity, _) => {
            let map = slot.or_insert_with(|| Value::Object(Map::new()));
            if let (Value::Object(map), Value::Object(entry)) = (map, value) {
                map.extend(entry);
            }
        }
        (_, true) => {
            if let Value::Array(items) = slot.or_insert_with(|| Value::Array(Vec::new())) {
                items.push(value);
            }
        }
        _ => {
            out.insert(field.name.to_string(), value);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field(number: u64, payload: &[u8]) -> Vec<u8> {
        let mut out = vec![(number << 3 | 2) as u8, payload.len() as u8];
        out.extend_from_slice(payload);
        out
    }

    #[test]
    fn configmap_from_kubectl_create() {
        let meta = field(1, b"x");
        let entry = [field(1, b"a"), field(2, b"b")].concat();
        let raw = [field(1, &meta), field(2, &entry)].concat();
        let type_meta = [field(1, b"v1"), field(2, b"ConfigMap")].concat();
        let body = [MAGIC.to_vec(), field(1, &type_meta), field(2, &raw)].concat();
        let object = decode(&body).unwrap();
        assert_eq!(
            object,
            serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}, "data": {"a": "b"}})
        );
    }

    #[test]
    fn unknown_fields_are_refused() {
        let raw = field(9, b"?");
        let type_meta = [field(1, b"v1"), field(2, b"ConfigMap")].concat();
        let body = [MAGIC.to_vec(), field(1, &type_meta), field(2, &raw)].concat();
        assert_eq!(decode(&body).unwrap_err().code(), 400);
    }
}
