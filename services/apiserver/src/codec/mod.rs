//! Request bodies: JSON (also when no Content-Type is given), YAML, and
//! Kubernetes protobuf for the types kubectl's generators send that way.
//! JSON and YAML are decoded by [`bounded`]: no deeper than
//! [`MAX_DEPTH`](crate::object::limits::MAX_DEPTH) levels, and YAML's aliases expand to no more than a small
//! multiple of the body.

mod bounded;
pub mod protobuf;

use serde::de::DeserializeSeed;
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
        "" | "application/json" | "*/*" => decode_json(bytes),
        "application/yaml" | "application/apply-patch+yaml" => decode_yaml(bytes),
        "application/vnd.kubernetes.protobuf" => protobuf::decode(bytes),
        _ => Err(ApiError::UnsupportedMediaType(ACCEPTED.into())),
    }
}

/// A JSON body, no deeper than the objects the server keeps.
pub fn decode_json(bytes: &[u8]) -> Result<Value, ApiError> {
    let allowance = bounded::Allowance::for_body(bytes.len());
    let mut decoder = serde_json::Deserializer::from_slice(bytes);
    let decoded = allowance
        .seed()
        .deserialize(&mut decoder)
        .and_then(|value| decoder.end().map(|()| value));
    decoded.map_err(|e| match allowance.passed() {
        Some(limit) => ApiError::BadRequest(format!("error decoding JSON: {limit}")),
        None => ApiError::BadRequest(format!("error decoding JSON body: {e}")),
    })
}

/// A YAML body (JSON is YAML too), no deeper than a JSON one, whose
/// aliases expand to no more than a few times its size.
pub fn decode_yaml(bytes: &[u8]) -> Result<Value, ApiError> {
    let allowance = bounded::Allowance::for_body(bytes.len());
    let decoder = serde_yaml::Deserializer::from_slice(bytes);
    allowance.seed().deserialize(decoder).map_err(|e| {
        let why = allowance.passed().map_or(e.to_string(), |l| l.to_string());
        ApiError::BadRequest(format!("error decoding YAML: {why}"))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::object::limits::MAX_DEPTH;

    #[test]
    fn bodies_decode_and_report_why_not() {
        let json = decode_body(None, br#"{"a": [1, "b"]}"#).unwrap();
        assert_eq!(json, serde_json::json!({"a": [1, "b"]}));
        let yaml = decode_body(Some("application/yaml"), b"a: [1, b]\n").unwrap();
        assert_eq!(yaml, serde_json::json!({"a": [1, "b"]}));
        let deep = format!("{}{}", "[".repeat(MAX_DEPTH + 1), "]".repeat(MAX_DEPTH + 1));
        let err = decode_body(None, deep.as_bytes()).unwrap_err();
        assert_eq!(err.code(), 400);
        assert!(
            err.to_string().contains("nested more than 100 levels"),
            "{err}"
        );
        let err = decode_body(None, b"{\"a\": 1} trailing").unwrap_err();
        assert!(err.to_string().contains("trailing characters"), "{err}");
        let err = decode_yaml(b"a: *missing").unwrap_err();
        assert!(
            err.to_string().starts_with("error decoding YAML: "),
            "{err}"
        );
    }
}
