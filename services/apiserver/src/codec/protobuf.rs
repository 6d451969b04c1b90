//! Kubernetes protobuf bodies (`application/vnd.kubernetes.protobuf`), as
//! `kubectl create configmap|secret|namespace|deployment|service` sends
//! them: the `k8s\0` magic, a `runtime.Unknown` envelope naming the type,
//! and the `k8s.io/api` message in `raw`. Messages are decoded to JSON by
//! field tables transcribed from the upstream `generated.proto` files; a
//! field outside the tables is refused, never dropped.

use base64::Engine;
use serde_json::{Map, Value};

use crate::error::ApiError;

const MAGIC: &[u8] = b"k8s\0";

#[derive(Clone, Copy)]
enum Ty {
    Str,
    /// `bytes`, shown base64 in JSON.
    Bytes,
    Bool,
    Int,
    /// A non-pointer Go bool: always written, false means unset.
    Flag,
    /// A non-pointer Go integer: always written, 0 means unset.
    Count,
    /// Read and dropped (status, which create ignores anyway).
    Ignored,
    Msg(&'static [Field]),
    MapStr,
    MapBytes,
    /// map<string, resource.Quantity>.
    MapQuantity,
    /// metav1.Time {seconds = 1, nanos = 2} as RFC 3339.
    Time,
    /// intstr.IntOrString {type = 1, intVal = 2, strVal = 3}.
    IntOrString,
    /// resource.Quantity {string = 1}.
    Quantity,
    /// An embedded Go struct (`json:",inline"`): its fields land in the
    /// enclosing object.
    Inline(&'static [Field]),
}

#[derive(Clone, Copy)]
struct Field {
    number: u64,
    name: &'static str,
    ty: Ty,
    repeated: bool,
}

const fn f(number: u64, name: &'static str, ty: Ty) -> Field {
    Field {
        number,
        name,
        ty,
        repeated: false,
    }
}

const fn list(number: u64, name: &'static str, ty: Ty) -> Field {
    Field {
        number,
        name,
        ty,
        repeated: true,
    }
}

const TYPE_META: &[Field] = &[f(1, "apiVersion", Ty::Str), f(2, "kind", Ty::Str)];
const UNKNOWN: &[Field] = &[
    f(1, "typeMeta", Ty::Msg(TYPE_META)),
    f(2, "raw", Ty::Bytes),
    f(3, "contentEncoding", Ty::Str),
    f(4, "contentType", Ty::Str),
];

const OWNER_REFERENCE: &[Field] = &[
    f(1, "kind", Ty::Str),
    f(3, "name", Ty::Str),
    f(4, "uid", Ty::Str),
    f(5, "apiVersion", Ty::Str),
    f(6, "controller", Ty::Bool),
    f(7, "blockOwnerDeletion", Ty::Bool),
];
const OBJECT_META: &[Field] = &[
    f(1, "name", Ty::Str),
    f(2, "generateName", Ty::Str),
    f(3, "namespace", Ty::Str),
    f(4, "selfLink", Ty::Str),
    f(5, "uid", Ty::Str),
    f(6, "resourceVersion", Ty::Str),
    f(7, "generation", Ty::Count),
    f(8, "creationTimestamp", Ty::Time),
    f(9, "deletionTimestamp", Ty::Time),
    f(10, "deletionGracePeriodSeconds", Ty::Int),
    f(11, "labels", Ty::MapStr),
    f(12, "annotations", Ty::MapStr),
    list(13, "ownerReferences", Ty::Msg(OWNER_REFERENCE)),
    list(14, "finalizers", Ty::Str),
];

const CONFIG_MAP: &[Field] = &[
    f(1, "metadata", Ty::Msg(OBJECT_META)),
    f(2, "data", Ty::MapStr),
    f(3, "binaryData", Ty::MapBytes),
    f(4, "immutable", Ty::Bool),
];
const SECRET: &[Field] = &[
    f(1, "metadata", Ty::Msg(OBJECT_META)),
    f(2, "data", Ty::MapBytes),
    f(3, "type", Ty::Str),
    f(4, "stringData", Ty::MapStr),
    f(5, "immutable", Ty::Bool),
];
const NAMESPACE_SPEC: &[Field] = &[list(1, "finalizers", Ty::Str)];
const NAMESPACE_STATUS: &[Field] = &[f(1, "phase", Ty::Str)];
const NAMESPACE: &[Field] = &[
    f(1, "metadata", Ty::Msg(OBJECT_META)),
    f(2, "spec", Ty::Msg(NAMESPACE_SPEC)),
    f(3, "status", Ty::Msg(NAMESPACE_STATUS)),
];

const REQUIREMENT: &[Field] = &[
    f(1, "key", Ty::Str),
    f(2, "operator", Ty::Str),
    list(3, "values", Ty::Str),
];
const LABEL_SELECTOR: &[Field] = &[
    f(1, "matchLabels", Ty::MapStr),
    list(2, "matchExpressions", Ty::Msg(REQUIREMENT)),
];
const CONTAINER_PORT: &[Field] = &[
    f(1, "name", Ty::Str),
    f(2, "hostPort", Ty::Count),
    f(3, "containerPort", Ty::Int),
    f(4, "protocol", Ty::Str),
    f(5, "hostIP", Ty::Str),
];
const ENV_VAR: &[Field] = &[f(1, "name", Ty::Str), f(2, "value", Ty::Str)];
const RESOURCES: &[Field] = &[
    f(1, "limits", Ty::MapQuantity),
    f(2, "requests", Ty::MapQuantity),
];
const CONTAINER: &[Field] = &[
    f(1, "name", Ty::Str),
    f(2, "image", Ty::Str),
    list(3, "command", Ty::Str),
    list(4, "args", Ty::Str),
    f(5, "workingDir", Ty::Str),
    list(6, "ports", Ty::Msg(CONTAINER_PORT)),
    list(7, "env", Ty::Msg(ENV_VAR)),
    f(8, "resources", Ty::Msg(RESOURCES)),
    f(13, "terminationMessagePath", Ty::Str),
    f(14, "imagePullPolicy", Ty::Str),
    f(16, "stdin", Ty::Flag),
    f(17, "stdinOnce", Ty::Flag),
    f(18, "tty", Ty::Flag),
    f(20, "terminationMessagePolicy", Ty::Str),
];
const POD_SPEC: &[Field] = &[
    list(2, "containers", Ty::Msg(CONTAINER)),
    f(3, "restartPolicy", Ty::Str),
    f(4, "terminationGracePeriodSeconds", Ty::Int),
    f(5, "activeDeadlineSeconds", Ty::Int),
    f(6, "dnsPolicy", Ty::Str),
    f(7, "nodeSelector", Ty::MapStr),
    f(8, "serviceAccountName", Ty::Str),
    f(9, "serviceAccount", Ty::Str),
    f(10, "nodeName", Ty::Str),
    f(11, "hostNetwork", Ty::Flag),
    f(12, "hostPID", Ty::Flag),
    f(13, "hostIPC", Ty::Flag),
    f(16, "hostname", Ty::Str),
    f(17, "subdomain", Ty::Str),
    f(24, "priorityClassName", Ty::Str),
    f(19, "schedulerName", Ty::Str),
    list(20, "initContainers", Ty::Msg(CONTAINER)),
];
const POD_TEMPLATE: &[Field] = &[
    f(1, "metadata", Ty::Msg(OBJECT_META)),
    f(2, "spec", Ty::Msg(POD_SPEC)),
];
const ROLLING_UPDATE: &[Field] = &[
    f(1, "maxUnavailable", Ty::IntOrString),
    f(2, "maxSurge", Ty::IntOrString),
];
const DEPLOYMENT_STRATEGY: &[Field] = &[
    f(1, "type", Ty::Str),
    f(2, "rollingUpdate", Ty::Msg(ROLLING_UPDATE)),
];
const DEPLOYMENT_SPEC: &[Field] = &[
    f(1, "replicas", Ty::Int),
    f(2, "selector", Ty::Msg(LABEL_SELECTOR)),
    f(3, "template", Ty::Msg(POD_TEMPLATE)),
    f(4, "strategy", Ty::Msg(DEPLOYMENT_STRATEGY)),
    f(5, "minReadySeconds", Ty::Count),
    f(6, "revisionHistoryLimit", Ty::Int),
    f(7, "paused", Ty::Flag),
    f(9, "progressDeadlineSeconds", Ty::Int),
];
const DEPLOYMENT: &[Field] = &[
    f(1, "metadata", Ty::Msg(OBJECT_META)),
    f(2, "spec", Ty::Msg(DEPLOYMENT_SPEC)),
    f(3, "status", Ty::Ignored),
];
const SERVICE_PORT: &[Field] = &[
    f(1, "name", Ty::Str),
    f(2, "protocol", Ty::Str),
    f(3, "port", Ty::Int),
    f(4, "targetPort", Ty::IntOrString),
    f(5, "nodePort", Ty::Count),
    f(6, "appProtocol", Ty::Str),
];
const SERVICE_SPEC: &[Field] = &[
    list(1, "ports", Ty::Msg(SERVICE_PORT)),
    f(2, "selector", Ty::MapStr),
    f(3, "clusterIP", Ty::Str),
    f(4, "type", Ty::Str),
    list(5, "externalIPs", Ty::Str),
    f(7, "sessionAffinity", Ty::Str),
    f(8, "loadBalancerIP", Ty::Str),
    f(10, "externalName", Ty::Str),
    f(11, "externalTrafficPolicy", Ty::Str),
    f(12, "healthCheckNodePort", Ty::Count),
    f(13, "publishNotReadyAddresses", Ty::Flag),
    list(18, "clusterIPs", Ty::Str),
];
const SERVICE: &[Field] = &[
    f(1, "metadata", Ty::Msg(OBJECT_META)),
    f(2, "spec", Ty::Msg(SERVICE_SPEC)),
    f(3, "status", Ty::Ignored),
];

// authorization.k8s.io/v1 and authentication.k8s.io/v1, as `kubectl auth
// can-i` and `kubectl auth whoami` send them (their status is the server's).
const SELECTOR_REQUIREMENT: &[Field] = &[
    f(1, "key", Ty::Str),
    f(2, "operator", Ty::Str),
    list(3, "values", Ty::Str),
];
const SELECTOR_ATTRIBUTES: &[Field] = &[
    f(1, "rawSelector", Ty::Str),
    list(2, "requirements", Ty::Msg(SELECTOR_REQUIREMENT)),
];
const RESOURCE_ATTRIBUTES: &[Field] = &[
    f(1, "namespace", Ty::Str),
    f(2, "verb", Ty::Str),
    f(3, "group", Ty::Str),
    f(4, "version", Ty::Str),
    f(5, "resource", Ty::Str),
    f(6, "subresource", Ty::Str),
    f(7, "name", Ty::Str),
    f(8, "fieldSelector", Ty::Msg(SELECTOR_ATTRIBUTES)),
    f(9, "labelSelector", Ty::Msg(SELECTOR_ATTRIBUTES)),
];
const NON_RESOURCE_ATTRIBUTES: &[Field] = &[f(1, "path", Ty::Str), f(2, "verb", Ty::Str)];
const ACCESS_REVIEW_SPEC: &[Field] = &[
    f(1, "resourceAttributes", Ty::Msg(RESOURCE_ATTRIBUTES)),
    f(2, "nonResourceAttributes", Ty::Msg(NON_RESOURCE_ATTRIBUTES)),
];
const SELF_SUBJECT_ACCESS_REVIEW: &[Field] = &[
    f(1, "metadata", Ty::Msg(OBJECT_META)),
    f(2, "spec", Ty::Msg(ACCESS_REVIEW_SPEC)),
    f(3, "status", Ty::Ignored),
];
const SELF_SUBJECT_RULES_REVIEW: &[Field] = &[
    f(1, "metadata", Ty::Msg(OBJECT_META)),
    f(2, "spec", Ty::Msg(&[f(1, "namespace", Ty::Str)])),
    f(3, "status", Ty::Ignored),
];
const SELF_SUBJECT_REVIEW: &[Field] = &[
    f(1, "metadata", Ty::Msg(OBJECT_META)),
    f(2, "status", Ty::Ignored),
];

// batch/v1, rbac.authorization.k8s.io/v1 and networking.k8s.io/v1 Ingress,
// as `kubectl create job|cronjob|role|rolebinding|clusterrole|
// clusterrolebinding|ingress` send them.
const JOB_SPEC: &[Field] = &[
    f(1, "parallelism", Ty::Int),
    f(2, "completions", Ty::Int),
    f(3, "activeDeadlineSeconds", Ty::Int),
    f(4, "selector", Ty::Msg(LABEL_SELECTOR)),
    f(5, "manualSelector", Ty::Bool),
    f(6, "template", Ty::Msg(POD_TEMPLATE)),
    f(7, "backoffLimit", Ty::Int),
    f(8, "ttlSecondsAfterFinished", Ty::Int),
    f(9, "completionMode", Ty::Str),
    f(10, "suspend", Ty::Bool),
    f(12, "backoffLimitPerIndex", Ty::Int),
    f(13, "maxFailedIndexes", Ty::Int),
    f(14, "podReplacementPolicy", Ty::Str),
    f(15, "managedBy", Ty::Str),
];
const JOB: &[Field] = &[
    f(1, "metadata", Ty::Msg(OBJECT_META)),
    f(2, "spec", Ty::Msg(JOB_SPEC)),
    f(3, "status", Ty::Ignored),
];
const JOB_TEMPLATE: &[Field] = &[
    f(1, "metadata", Ty::Msg(OBJECT_META)),
    f(2, "spec", Ty::Msg(JOB_SPEC)),
];
const CRON_JOB_SPEC: &[Field] = &[
    f(1, "schedule", Ty::Str),
    f(2, "startingDeadlineSeconds", Ty::Int),
    f(3, "concurrencyPolicy", Ty::Str),
    f(4, "suspend", Ty::Bool),
    f(5, "jobTemplate", Ty::Msg(JOB_TEMPLATE)),
    f(6, "successfulJobsHistoryLimit", Ty::Int),
    f(7, "failedJobsHistoryLimit", Ty::Int),
    f(8, "timeZone", Ty::Str),
];
const CRON_JOB: &[Field] = &[
    f(1, "metadata", Ty::Msg(OBJECT_META)),
    f(2, "spec", Ty::Msg(CRON_JOB_SPEC)),
    f(3, "status", Ty::Ignored),
];
const POLICY_RULE: &[Field] = &[
    list(1, "verbs", Ty::Str),
    list(2, "apiGroups", Ty::Str),
    list(3, "resources", Ty::Str),
    list(4, "resourceNames", Ty::Str),
    list(5, "nonResourceURLs", Ty::Str),
];
const ROLE: &[Field] = &[
    f(1, "metadata", Ty::Msg(OBJECT_META)),
    list(2, "rules", Ty::Msg(POLICY_RULE)),
];
const CLUSTER_ROLE: &[Field] = &[
    f(1, "metadata", Ty::Msg(OBJECT_META)),
    list(2, "rules", Ty::Msg(POLICY_RULE)),
    f(
        3,
        "aggregationRule",
        Ty::Msg(&[list(1, "clusterRoleSelectors", Ty::Msg(LABEL_SELECTOR))]),
    ),
];
const SUBJECT: &[Field] = &[
    f(1, "kind", Ty::Str),
    f(2, "apiGroup", Ty::Str),
    f(3, "name", Ty::Str),
    f(4, "namespace", Ty::Str),
];
const ROLE_REF: &[Field] = &[
    f(1, "apiGroup", Ty::Str),
    f(2, "kind", Ty::Str),
    f(3, "name", Ty::Str),
];
const ROLE_BINDING: &[Field] = &[
    f(1, "metadata", Ty::Msg(OBJECT_META)),
    list(2, "subjects", Ty::Msg(SUBJECT)),
    f(3, "roleRef", Ty::Msg(ROLE_REF)),
];
const SERVICE_BACKEND_PORT: &[Field] = &[f(1, "name", Ty::Str), f(2, "number", Ty::Count)];
const LOCAL_OBJECT_REFERENCE: &[Field] = &[
    f(1, "apiGroup", Ty::Str),
    f(2, "kind", Ty::Str),
    f(3, "name", Ty::Str),
];
const INGRESS_BACKEND: &[Field] = &[
    f(3, "resource", Ty::Msg(LOCAL_OBJECT_REFERENCE)),
    f(
        4,
        "service",
        Ty::Msg(&[
            f(1, "name", Ty::Str),
            f(2, "port", Ty::Msg(SERVICE_BACKEND_PORT)),
        ]),
    ),
];
const HTTP_INGRESS_PATH: &[Field] = &[
    f(1, "path", Ty::Str),
    f(2, "backend", Ty::Msg(INGRESS_BACKEND)),
    f(3, "pathType", Ty::Str),
];
const INGRESS_RULE_VALUE: &[Field] = &[f(
    1,
    "http",
    Ty::Msg(&[list(1, "paths", Ty::Msg(HTTP_INGRESS_PATH))]),
)];
const INGRESS_RULE: &[Field] = &[
    f(1, "host", Ty::Str),
    f(2, "ingressRuleValue", Ty::Inline(INGRESS_RULE_VALUE)),
];
const INGRESS_SPEC: &[Field] = &[
    f(1, "defaultBackend", Ty::Msg(INGRESS_BACKEND)),
    list(
        2,
        "tls",
        Ty::Msg(&[list(1, "hosts", Ty::Str), f(2, "secretName", Ty::Str)]),
    ),
    list(3, "rules", Ty::Msg(INGRESS_RULE)),
    f(4, "ingressClassName", Ty::Str),
];
const INGRESS: &[Field] = &[
    f(1, "metadata", Ty::Msg(OBJECT_META)),
    f(2, "spec", Ty::Msg(INGRESS_SPEC)),
    f(3, "status", Ty::Ignored),
];

// `kubectl create quota|pdb|priorityclass`.
const SCOPED_RESOURCE_REQUIREMENT: &[Field] = &[
    f(1, "scopeName", Ty::Str),
    f(2, "operator", Ty::Str),
    list(3, "values", Ty::Str),
];
const RESOURCE_QUOTA_SPEC: &[Field] = &[
    f(1, "hard", Ty::MapQuantity),
    list(2, "scopes", Ty::Str),
    f(
        3,
        "scopeSelector",
        Ty::Msg(&[list(
            1,
            "matchExpressions",
            Ty::Msg(SCOPED_RESOURCE_REQUIREMENT),
        )]),
    ),
];
const RESOURCE_QUOTA: &[Field] = &[
    f(1, "metadata", Ty::Msg(OBJECT_META)),
    f(2, "spec", Ty::Msg(RESOURCE_QUOTA_SPEC)),
    f(3, "status", Ty::Ignored),
];
const PDB_SPEC: &[Field] = &[
    f(1, "minAvailable", Ty::IntOrString),
    f(2, "selector", Ty::Msg(LABEL_SELECTOR)),
    f(3, "maxUnavailable", Ty::IntOrString),
    f(4, "unhealthyPodEvictionPolicy", Ty::Str),
];
const POD_DISRUPTION_BUDGET: &[Field] = &[
    f(1, "metadata", Ty::Msg(OBJECT_META)),
    f(2, "spec", Ty::Msg(PDB_SPEC)),
    f(3, "status", Ty::Ignored),
];
const PRIORITY_CLASS: &[Field] = &[
    f(1, "metadata", Ty::Msg(OBJECT_META)),
    f(2, "value", Ty::Int),
    f(3, "globalDefault", Ty::Flag),
    f(4, "description", Ty::Str),
    f(5, "preemptionPolicy", Ty::Str),
];

fn schema_of(api_version: &str, kind: &str) -> Option<&'static [Field]> {
    Some(match (api_version, kind) {
        ("v1", "ConfigMap") => CONFIG_MAP,
        ("v1", "Secret") => SECRET,
        ("v1", "Namespace") => NAMESPACE,
        ("v1", "Service") => SERVICE,
        ("apps/v1", "Deployment") => DEPLOYMENT,
        ("batch/v1", "Job") => JOB,
        ("batch/v1", "CronJob") => CRON_JOB,
        ("rbac.authorization.k8s.io/v1", "Role") => ROLE,
        ("rbac.authorization.k8s.io/v1", "ClusterRole") => CLUSTER_ROLE,
        ("rbac.authorization.k8s.io/v1", "RoleBinding" | "ClusterRoleBinding") => ROLE_BINDING,
        ("networking.k8s.io/v1", "Ingress") => INGRESS,
        ("authorization.k8s.io/v1", "SelfSubjectAccessReview") => SELF_SUBJECT_ACCESS_REVIEW,
        ("authorization.k8s.io/v1", "SelfSubjectRulesReview") => SELF_SUBJECT_RULES_REVIEW,
        ("authentication.k8s.io/v1", "SelfSubjectReview") => SELF_SUBJECT_REVIEW,
        ("v1", "ResourceQuota") => RESOURCE_QUOTA,
        ("policy/v1", "PodDisruptionBudget") => POD_DISRUPTION_BUDGET,
        ("scheduling.k8s.io/v1", "PriorityClass") => PRIORITY_CLASS,
        _ => return None,
    })
}

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
        .ok_or_else(|| ApiError::UnsupportedMediaType(format!("application/json (protobuf is accepted for ConfigMap, Secret, Namespace, Service, Deployment, Job, CronJob, Ingress, RBAC types and the self-subject reviews, not {api_version} {kind})")))?;
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
