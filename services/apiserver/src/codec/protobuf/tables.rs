//! The field tables: each message's fields by number, name and wire
//! type, transcribed from the upstream `generated.proto` files.

#[derive(Clone, Copy)]
pub(super) enum Ty {
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
pub(super) struct Field {
    pub(super) number: u64,
    pub(super) name: &'static str,
    pub(super) ty: Ty,
    pub(super) repeated: bool,
}

pub(super) const fn f(number: u64, name: &'static str, ty: Ty) -> Field {
    Field {
        number,
        name,
        ty,
        repeated: false,
    }
}

pub(super) const fn list(number: u64, name: &'static str, ty: Ty) -> Field {
    Field {
        number,
        name,
        ty,
        repeated: true,
    }
}

pub(super) const TYPE_META: &[Field] = &[f(1, "apiVersion", Ty::Str), f(2, "kind", Ty::Str)];
pub(super) const UNKNOWN: &[Field] = &[
    f(1, "typeMeta", Ty::Msg(TYPE_META)),
    f(2, "raw", Ty::Bytes),
    f(3, "contentEncoding", Ty::Str),
    f(4, "contentType", Ty::Str),
];

pub(super) const OWNER_REFERENCE: &[Field] = &[
    f(1, "kind", Ty::Str),
    f(3, "name", Ty::Str),
    f(4, "uid", Ty::Str),
    f(5, "apiVersion", Ty::Str),
    f(6, "controller", Ty::Bool),
    f(7, "blockOwnerDeletion", Ty::Bool),
];
pub(super) const OBJECT_META: &[Field] = &[
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

pub(super) const CONFIG_MAP: &[Field] = &[
    f(1, "metadata", Ty::Msg(OBJECT_META)),
    f(2, "data", Ty::MapStr),
    f(3, "binaryData", Ty::MapBytes),
    f(4, "immutable", Ty::Bool),
];
pub(super) const SECRET: &[Field] = &[
    f(1, "metadata", Ty::Msg(OBJECT_META)),
    f(2, "data", Ty::MapBytes),
    f(3, "type", Ty::Str),
    f(4, "stringData", Ty::MapStr),
    f(5, "immutable", Ty::Bool),
];
pub(super) const NAMESPACE_SPEC: &[Field] = &[list(1, "finalizers", Ty::Str)];
pub(super) const NAMESPACE_STATUS: &[Field] = &[f(1, "phase", Ty::Str)];
pub(super) const NAMESPACE: &[Field] = &[
    f(1, "metadata", Ty::Msg(OBJECT_META)),
    f(2, "spec", Ty::Msg(NAMESPACE_SPEC)),
    f(3, "status", Ty::Msg(NAMESPACE_STATUS)),
];

pub(super) const REQUIREMENT: &[Field] = &[
    f(1, "key", Ty::Str),
    f(2, "operator", Ty::Str),
    list(3, "values", Ty::Str),
];
pub(super) const LABEL_SELECTOR: &[Field] = &[
    f(1, "matchLabels", Ty::MapStr),
    list(2, "matchExpressions", Ty::Msg(REQUIREMENT)),
];
pub(super) const CONTAINER_PORT: &[Field] = &[
    f(1, "name", Ty::Str),
    f(2, "hostPort", Ty::Count),
    f(3, "containerPort", Ty::Int),
    f(4, "protocol", Ty::Str),
    f(5, "hostIP", Ty::Str),
];
pub(super) const ENV_VAR: &[Field] = &[f(1, "name", Ty::Str), f(2, "value", Ty::Str)];
pub(super) const RESOURCES: &[Field] = &[
    f(1, "limits", Ty::MapQuantity),
    f(2, "requests", Ty::MapQuantity),
];
pub(super) const CONTAINER: &[Field] = &[
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
pub(super) const POD_SPEC: &[Field] = &[
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
pub(super) const POD_TEMPLATE: &[Field] = &[
    f(1, "metadata", Ty::Msg(OBJECT_META)),
    f(2, "spec", Ty::Msg(POD_SPEC)),
];
pub(super) const ROLLING_UPDATE: &[Field] = &[
    f(1, "maxUnavailable", Ty::IntOrString),
    f(2, "maxSurge", Ty::IntOrString),
];
pub(super) const DEPLOYMENT_STRATEGY: &[Field] = &[
    f(1, "type", Ty::Str),
    f(2, "rollingUpdate", Ty::Msg(ROLLING_UPDATE)),
];
pub(super) const DEPLOYMENT_SPEC: &[Field] = &[
    f(1, "replicas", Ty::Int),
    f(2, "selector", Ty::Msg(LABEL_SELECTOR)),
    f(3, "template", Ty::Msg(POD_TEMPLATE)),
    f(4, "strategy", Ty::Msg(DEPLOYMENT_STRATEGY)),
    f(5, "minReadySeconds", Ty::Count),
    f(6, "revisionHistoryLimit", Ty::Int),
    f(7, "paused", Ty::Flag),
    f(9, "progressDeadlineSeconds", Ty::Int),
];
pub(super) const DEPLOYMENT: &[Field] = &[
    f(1, "metadata", Ty::Msg(OBJECT_META)),
    f(2, "spec", Ty::Msg(DEPLOYMENT_SPEC)),
    f(3, "status", Ty::Ignored),
];
pub(super) const SERVICE_PORT: &[Field] = &[
    f(1, "name", Ty::Str),
    f(2, "protocol", Ty::Str),
    f(3, "port", Ty::Int),
    f(4, "targetPort", Ty::IntOrString),
    f(5, "nodePort", Ty::Count),
    f(6, "appProtocol", Ty::Str),
];
pub(super) const SERVICE_SPEC: &[Field] = &[
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
pub(super) const SERVICE: &[Field] = &[
    f(1, "metadata", Ty::Msg(OBJECT_META)),
    f(2, "spec", Ty::Msg(SERVICE_SPEC)),
    f(3, "status", Ty::Ignored),
];

// authorization.k8s.io/v1 and authentication.k8s.io/v1, as `kubectl auth
// can-i` and `kubectl auth whoami` send them (their status is the server's).
pub(super) const SELECTOR_REQUIREMENT: &[Field] = &[
    f(1, "key", Ty::Str),
    f(2, "operator", Ty::Str),
    list(3, "values", Ty::Str),
];
pub(super) const SELECTOR_ATTRIBUTES: &[Field] = &[
    f(1, "rawSelector", Ty::Str),
    list(2, "requirements", Ty::Msg(SELECTOR_REQUIREMENT)),
];
pub(super) const RESOURCE_ATTRIBUTES: &[Field] = &[
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
pub(super) const NON_RESOURCE_ATTRIBUTES: &[Field] =
    &[f(1, "path", Ty::Str), f(2, "verb", Ty::Str)];
pub(super) const ACCESS_REVIEW_SPEC: &[Field] = &[
    f(1, "resourceAttributes", Ty::Msg(RESOURCE_ATTRIBUTES)),
    f(2, "nonResourceAttributes", Ty::Msg(NON_RESOURCE_ATTRIBUTES)),
];
pub(super) const SELF_SUBJECT_ACCESS_REVIEW: &[Field] = &[
    f(1, "metadata", Ty::Msg(OBJECT_META)),
    f(2, "spec", Ty::Msg(ACCESS_REVIEW_SPEC)),
    f(3, "status", Ty::Ignored),
];
pub(super) const SELF_SUBJECT_RULES_REVIEW: &[Field] = &[
    f(1, "metadata", Ty::Msg(OBJECT_META)),
    f(2, "spec", Ty::Msg(&[f(1, "namespace", Ty::Str)])),
    f(3, "status", Ty::Ignored),
];
pub(super) const SELF_SUBJECT_REVIEW: &[Field] = &[
    f(1, "metadata", Ty::Msg(OBJECT_META)),
    f(2, "status", Ty::Ignored),
];
// core/v1 ServiceAccount, as `kubectl create serviceaccount` sends it.
pub(super) const SERVICE_ACCOUNT: &[Field] = &[
    f(1, "metadata", Ty::Msg(OBJECT_META)),
    list(
        2,
        "secrets",
        Ty::Msg(&[
            f(1, "kind", Ty::Str),
            f(2, "namespace", Ty::Str),
            f(3, "name", Ty::Str),
            f(4, "uid", Ty::Str),
            f(5, "apiVersion", Ty::Str),
            f(6, "resourceVersion", Ty::Str),
            f(7, "fieldPath", Ty::Str),
        ]),
    ),
    list(3, "imagePullSecrets", Ty::Msg(&[f(1, "name", Ty::Str)])),
    f(4, "automountServiceAccountToken", Ty::Bool),
];
// authentication.k8s.io/v1, as `kubectl create token` sends it.
pub(super) const TOKEN_REQUEST: &[Field] = &[
    f(1, "metadata", Ty::Msg(OBJECT_META)),
    f(
        2,
        "spec",
        Ty::Msg(&[
            list(1, "audiences", Ty::Str),
            f(
                3,
                "boundObjectRef",
                Ty::Msg(&[
                    f(1, "kind", Ty::Str),
                    f(2, "apiVersion", Ty::Str),
                    f(3, "name", Ty::Str),
                    f(4, "uid", Ty::Str),
                ]),
            ),
            f(4, "expirationSeconds", Ty::Int),
        ]),
    ),
    f(3, "status", Ty::Ignored),
];
pub(super) const TOKEN_REVIEW: &[Field] = &[
    f(1, "metadata", Ty::Msg(OBJECT_META)),
    f(
        2,
        "spec",
        Ty::Msg(&[f(1, "token", Ty::Str), list(2, "audiences", Ty::Str)]),
    ),
    f(3, "status", Ty::Ignored),
];

// batch/v1, rbac.authorization.k8s.io/v1 and networking.k8s.io/v1 Ingress,
// as `kubectl create job|cronjob|role|rolebinding|clusterrole|
// clusterrolebinding|ingress` send them.
pub(super) const JOB_SPEC: &[Field] = &[
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
pub(super) const JOB: &[Field] = &[
    f(1, "metadata", Ty::Msg(OBJECT_META)),
    f(2, "spec", Ty::Msg(JOB_SPEC)),
    f(3, "status", Ty::Ignored),
];
pub(super) const JOB_TEMPLATE: &[Field] = &[
    f(1, "metadata", Ty::Msg(OBJECT_META)),
    f(2, "spec", Ty::Msg(JOB_SPEC)),
];
pub(super) const CRON_JOB_SPEC: &[Field] = &[
    f(1, "schedule", Ty::Str),
    f(2, "startingDeadlineSeconds", Ty::Int),
    f(3, "concurrencyPolicy", Ty::Str),
    f(4, "suspend", Ty::Bool),
    f(5, "jobTemplate", Ty::Msg(JOB_TEMPLATE)),
    f(6, "successfulJobsHistoryLimit", Ty::Int),
    f(7, "failedJobsHistoryLimit", Ty::Int),
    f(8, "timeZone", Ty::Str),
];
pub(super) const CRON_JOB: &[Field] = &[
    f(1, "metadata", Ty::Msg(OBJECT_META)),
    f(2, "spec", Ty::Msg(CRON_JOB_SPEC)),
    f(3, "status", Ty::Ignored),
];
pub(super) const POLICY_RULE: &[Field] = &[
    list(1, "verbs", Ty::Str),
    list(2, "apiGroups", Ty::Str),
    list(3, "resources", Ty::Str),
    list(4, "resourceNames", Ty::Str),
    list(5, "nonResourceURLs", Ty::Str),
];
pub(super) const ROLE: &[Field] = &[
    f(1, "metadata", Ty::Msg(OBJECT_META)),
    list(2, "rules", Ty::Msg(POLICY_RULE)),
];
pub(super) const CLUSTER_ROLE: &[Field] = &[
    f(1, "metadata", Ty::Msg(OBJECT_META)),
    list(2, "rules", Ty::Msg(POLICY_RULE)),
    f(
        3,
        "aggregationRule",
        Ty::Msg(&[list(1, "clusterRoleSelectors", Ty::Msg(LABEL_SELECTOR))]),
    ),
];
pub(super) const SUBJECT: &[Field] = &[
    f(1, "kind", Ty::Str),
    f(2, "apiGroup", Ty::Str),
    f(3, "name", Ty::Str),
    f(4, "namespace", Ty::Str),
];
pub(super) const ROLE_REF: &[Field] = &[
    f(1, "apiGroup", Ty::Str),
    f(2, "kind", Ty::Str),
    f(3, "name", Ty::Str),
];
pub(super) const ROLE_BINDING: &[Field] = &[
    f(1, "metadata", Ty::Msg(OBJECT_META)),
    list(2, "subjects", Ty::Msg(SUBJECT)),
    f(3, "roleRef", Ty::Msg(ROLE_REF)),
];
pub(super) const SERVICE_BACKEND_PORT: &[Field] =
    &[f(1, "name", Ty::Str), f(2, "number", Ty::Count)];
pub(super) const LOCAL_OBJECT_REFERENCE: &[Field] = &[
    f(1, "apiGroup", Ty::Str),
    f(2, "kind", Ty::Str),
    f(3, "name", Ty::Str),
];
pub(super) const INGRESS_BACKEND: &[Field] = &[
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
pub(super) const HTTP_INGRESS_PATH: &[Field] = &[
    f(1, "path", Ty::Str),
    f(2, "backend", Ty::Msg(INGRESS_BACKEND)),
    f(3, "pathType", Ty::Str),
];
pub(super) const INGRESS_RULE_VALUE: &[Field] = &[f(
    1,
    "http",
    Ty::Msg(&[list(1, "paths", Ty::Msg(HTTP_INGRESS_PATH))]),
)];
pub(super) const INGRESS_RULE: &[Field] = &[
    f(1, "host", Ty::Str),
    f(2, "ingressRuleValue", Ty::Inline(INGRESS_RULE_VALUE)),
];
pub(super) const INGRESS_SPEC: &[Field] = &[
    f(1, "defaultBackend", Ty::Msg(INGRESS_BACKEND)),
    list(
        2,
        "tls",
        Ty::Msg(&[list(1, "hosts", Ty::Str), f(2, "secretName", Ty::Str)]),
    ),
    list(3, "rules", Ty::Msg(INGRESS_RULE)),
    f(4, "ingressClassName", Ty::Str),
];
pub(super) const INGRESS: &[Field] = &[
    f(1, "metadata", Ty::Msg(OBJECT_META)),
    f(2, "spec", Ty::Msg(INGRESS_SPEC)),
    f(3, "status", Ty::Ignored),
];

// `kubectl create quota|pdb|priorityclass`.
pub(super) const SCOPED_RESOURCE_REQUIREMENT: &[Field] = &[
    f(1, "scopeName", Ty::Str),
    f(2, "operator", Ty::Str),
    list(3, "values", Ty::Str),
];
pub(super) const RESOURCE_QUOTA_SPEC: &[Field] = &[
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
pub(super) const RESOURCE_QUOTA: &[Field] = &[
    f(1, "metadata", Ty::Msg(OBJECT_META)),
    f(2, "spec", Ty::Msg(RESOURCE_QUOTA_SPEC)),
    f(3, "status", Ty::Ignored),
];
pub(super) const PDB_SPEC: &[Field] = &[
    f(1, "minAvailable", Ty::IntOrString),
    f(2, "selector", Ty::Msg(LABEL_SELECTOR)),
    f(3, "maxUnavailable", Ty::IntOrString),
    f(4, "unhealthyPodEvictionPolicy", Ty::Str),
];
pub(super) const POD_DISRUPTION_BUDGET: &[Field] = &[
    f(1, "metadata", Ty::Msg(OBJECT_META)),
    f(2, "spec", Ty::Msg(PDB_SPEC)),
    f(3, "status", Ty::Ignored),
];
pub(super) const PRIORITY_CLASS: &[Field] = &[
    f(1, "metadata", Ty::Msg(OBJECT_META)),
    f(2, "value", Ty::Int),
    f(3, "globalDefault", Ty::Flag),
    f(4, "description", Ty::Str),
    f(5, "preemptionPolicy", Ty::Str),
];

// autoscaling/v1, as `kubectl autoscale` sends it.
pub(super) const CROSS_VERSION_OBJECT_REFERENCE: &[Field] = &[
    f(1, "kind", Ty::Str),
    f(2, "name", Ty::Str),
    f(3, "apiVersion", Ty::Str),
];
pub(super) const HPA_V1_SPEC: &[Field] = &[
    f(1, "scaleTargetRef", Ty::Msg(CROSS_VERSION_OBJECT_REFERENCE)),
    f(2, "minReplicas", Ty::Int),
    f(3, "maxReplicas", Ty::Count),
    f(4, "targetCPUUtilizationPercentage", Ty::Int),
];
pub(super) const HPA_V1: &[Field] = &[
    f(1, "metadata", Ty::Msg(OBJECT_META)),
    f(2, "spec", Ty::Msg(HPA_V1_SPEC)),
    f(3, "status", Ty::Ignored),
];

pub(super) fn schema_of(api_version: &str, kind: &str) -> Option<&'static [Field]> {
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
        ("authentication.k8s.io/v1", "TokenRequest") => TOKEN_REQUEST,
        ("v1", "ServiceAccount") => SERVICE_ACCOUNT,
        ("authentication.k8s.io/v1", "TokenReview") => TOKEN_REVIEW,
        ("v1", "ResourceQuota") => RESOURCE_QUOTA,
        ("policy/v1", "PodDisruptionBudget") => POD_DISRUPTION_BUDGET,
        ("scheduling.k8s.io/v1", "PriorityClass") => PRIORITY_CLASS,
        ("autoscaling/v1", "HorizontalPodAutoscaler") => HPA_V1,
        _ => return None,
    })
}
