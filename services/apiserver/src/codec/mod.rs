//! Request bodies: JSON (also when no Content-Type is given), YAML, and
//! Kubernetes protobuf for the types kubectl's generators send that way.

pub mod protobuf;

use serde_json::Value;

use crate::error::ApiError;

pub const ACCEPTED: &str =
    "application/json, application/yaml, application/vnd.kubernetes.protobuf";

pub fn decode_body(content_type: Option<&str>, bytes: &[u8]) -> Result<Value, ApiError> {
    let media = content_type
        .unwrap_or("application/json")
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    match media.as_str() {
        "" | "application/json" | "*/*" => serde_json::from_slice(bytes)
            .map_err(|e| ApiError::BadRequest(format!("error decoding JSON body: {e}"))),
        "application/yaml" | "application/apply-patch+yaml" => serde_yaml::from_slice(bytes)
            .map_err(|e| ApiError::BadRequest(format!("error decoding YAML body: {e}"))),
        "application/vnd.kubernetes.protobuf" => protobuf::decode(bytes),
        _ => Err(ApiError::UnsupportedMediaType(ACCEPTED.into())),
    }
}
