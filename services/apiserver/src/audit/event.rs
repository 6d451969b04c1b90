//! One audit record as kube-apiserver writes it: an audit.k8s.io/v1
//! `Event`, serialised with the same field names and omissions.

use std::collections::BTreeMap;
use std::time::SystemTime;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// How much of a request is recorded, least first (so levels compare).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Level {
    None,
    Metadata,
    Request,
    RequestResponse,
}

/// The moments of a request an event can describe.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Stage {
    RequestReceived,
    /// Only for long-running requests (watches): the headers are sent.
    ResponseStarted,
    ResponseComplete,
    Panic,
}

/// Kubernetes' authentication.k8s.io UserInfo.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct UserInfo {
    pub username: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub uid: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<String>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub extra: BTreeMap<String, Vec<String>>,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectReference {
    #[serde(skip_serializing_if = "String::is_empty")]
    pub resource: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub name: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub api_group: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub api_version: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub subresource: String,
}

/// The bounded part of the answer's `Status` kube copies into every event
/// whatever its level (code always; the rest for failures).
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct ResponseStatus {
    pub metadata: BTreeMap<String, String>,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub status: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub message: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub reason: String,
    pub code: u16,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Event {
    pub kind: &'static str,
    pub api_version: &'static str,
    pub level: Level,
    #[serde(rename = "auditID")]
    pub audit_id: String,
    pub stage: Stage,
    #[serde(rename = "requestURI")]
    pub request_uri: String,
    pub verb: String,
    pub user: UserInfo,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub impersonated_user: Option<UserInfo>,
    #[serde(rename = "sourceIPs", skip_serializing_if = "Vec::is_empty")]
    pub source_ips: Vec<String>,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub user_agent: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub object_ref: Option<ObjectReference>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub response_status: Option<ResponseStatus>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub request_object: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub response_object: Option<Value>,
    pub request_received_timestamp: String,
    pub stage_timestamp: String,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

impl Event {
    /// A new event at RequestReceived, stamped now.
    pub fn received(audit_id: String, request_uri: String, verb: String, user: UserInfo) -> Event {
        let now = micro_time(SystemTime::now());
        Event {
            kind: "Event",
            api_version: "audit.k8s.io/v1",
            level: Level::Metadata,
            audit_id,
            stage: Stage::RequestReceived,
            request_uri,
            verb,
            user,
            impersonated_user: None,
            source_ips: Vec::new(),
            user_agent: String::new(),
            object_ref: None,
            response_status: None,
            request_object: None,
            response_object: None,
            stage_timestamp: now.clone(),
            request_received_timestamp: now,
            annotations: BTreeMap::new(),
        }
    }

    /// The request's path without its query (what nonResourceURLs match).
    pub fn path(&self) -> &str {
        self.request_uri
            .split_once('?')
            .map_or(self.request_uri.as_str(), |(path, _)| path)
    }

    /// Moves the event to `stage`, stamped now.
    pub fn at(&mut self, stage: Stage) {
        self.stage = stage;
        self.stage_timestamp = micro_time(SystemTime::now());
    }
}

/// metav1.MicroTime's form: RFC 3339 in UTC with microseconds.
pub fn micro_time(at: SystemTime) -> String {
    humantime::format_rfc3339_micros(at).to_string()
}

/// Audit annotations a handler leaves on its response (admission's:
/// PodSecurity's, ValidatingAdmissionPolicy's) for the request's event.
#[derive(Debug, Clone, Default)]
pub struct Annotations(pub BTreeMap<String, String>);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serialises_as_kube_writes_it() {
        let user = UserInfo {
            username: "alice".into(),
            groups: vec!["dev".into()],
            ..UserInfo::default()
        };
        let mut event = Event::received(
            "id-1".into(),
            "/api/v1/namespaces/a/configmaps?limit=5".into(),
            "list".into(),
            user,
        );
        event.object_ref = Some(ObjectReference {
            resource: "configmaps".into(),
            namespace: "a".into(),
            api_version: "v1".into(),
            ..ObjectReference::default()
        });
        event.at(Stage::ResponseComplete);
        let json = serde_json::to_value(&event).unwrap();
        assert_eq!(json["apiVersion"], "audit.k8s.io/v1");
        assert_eq!(json["auditID"], "id-1");
        assert_eq!(json["stage"], "ResponseComplete");
        assert_eq!(
            json["requestURI"],
            "/api/v1/namespaces/a/configmaps?limit=5"
        );
        assert_eq!(
            json["user"],
            serde_json::json!({"username": "alice", "groups": ["dev"]})
        );
        assert_eq!(
            json["objectRef"],
            serde_json::json!({"resource": "configmaps", "namespace": "a", "apiVersion": "v1"})
        );
        assert!(json.get("impersonatedUser").is_none());
        let stamp = json["stageTimestamp"].as_str().unwrap();
        assert!(stamp.ends_with('Z') && stamp.len() == "2024-01-02T03:04:05.123456Z".len());
        assert_eq!(event.path(), "/api/v1/namespaces/a/configmaps");
    }
}
