//! The configuration every cluster starts with, as data: the mandatory
//! objects (`exempt` and `catch-all`, which the server supplies even when
//! they are deleted) and the suggested ones that put nodes, leader
//! election, controllers and service accounts at their own levels.
//! Each carries `apf.kubernetes.io/autoupdate-spec: "true"`: the server
//! keeps it up to date until a user sets the annotation to `"false"`.

use std::collections::BTreeMap;

use k8s_openapi::api::flowcontrol::v1::{
    ExemptPriorityLevelConfiguration, FlowDistinguisherMethod, FlowSchema, FlowSchemaSpec,
    GroupSubject, LimitResponse, LimitedPriorityLevelConfiguration, NonResourcePolicyRule,
    PolicyRulesWithSubjects, PriorityLevelConfiguration, PriorityLevelConfigurationReference,
    PriorityLevelConfigurationSpec, QueuingConfiguration, ResourcePolicyRule,
    ServiceAccountSubject, Subject, UserSubject,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

/// Whether the server may rewrite an object's spec.
pub const AUTO_UPDATE: &str = "apf.kubernetes.io/autoupdate-spec";
pub const EXEMPT: &str = "exempt";
pub const CATCH_ALL: &str = "catch-all";

const KCM: &str = "system:kube-controller-manager";
const SCHEDULER: &str = "system:kube-scheduler";
const NODES: &str = "system:nodes";
const AUTHENTICATED: &str = "system:authenticated";
const UNAUTHENTICATED: &str = "system:unauthenticated";
const MASTERS: &str = "system:masters";
const SERVICE_ACCOUNTS: &str = "system:serviceaccounts";
const BY_USER: &str = "ByUser";
const BY_NAMESPACE: &str = "ByNamespace";

/// Levels that always exist.
pub fn mandatory_levels() -> Vec<PriorityLevelConfiguration> {
    vec![exempt_level(), limited(CATCH_ALL, 5, 0, None)]
}

/// Schemas that always exist.
pub fn mandatory_schemas() -> Vec<FlowSchema> {
    vec![
        schema(EXEMPT, EXEMPT, 1, None, everything(groups(&[MASTERS]))),
        schema(CATCH_ALL, CATCH_ALL, 10000, Some(BY_USER), everyone()),
    ]
}

/// Levels a new cluster gets, kept up to date unless annotated.
pub fn suggested_levels() -> Vec<PriorityLevelConfiguration> {
    vec![
        limited("system", 30, 33, Some((64, 6, 50))),
        limited("node-high", 40, 25, Some((64, 6, 50))),
        limited("leader-election", 10, 0, Some((16, 4, 50))),
        limited("workload-high", 40, 50, Some((128, 6, 50))),
        limited("workload-low", 100, 90, Some((128, 6, 50))),
        limited("global-default", 20, 50, Some((128, 6, 50))),
    ]
}

/// Schemas a new cluster gets, kept up to date unless annotated.
pub fn suggested_schemas() -> Vec<FlowSchema> {
    let nodes = || groups(&[NODES]);
    let kube_system = || vec![kube_system_account("*")];
    let (high, low) = ("workload-high", "workload-low");
    #[rustfmt::skip]
    let table = [
        ("probes", EXEMPT, 2, None, probes()),
        ("system-leader-election", "leader-election", 100, Some(BY_USER), system_election()),
        ("endpoint-controller", high, 150, Some(BY_USER), endpoint_controller()),
        ("workload-leader-election", "leader-election", 200, Some(BY_USER), workload_election()),
        ("system-node-high", "node-high", 400, Some(BY_USER), node_heartbeats(nodes())),
        ("system-nodes", "system", 500, Some(BY_USER), everything(nodes())),
        ("kube-controller-manager", high, 800, Some(BY_NAMESPACE), everything(users(&[KCM]))),
        ("kube-scheduler", high, 800, Some(BY_NAMESPACE), everything(users(&[SCHEDULER]))),
        ("kube-system-service-accounts", high, 900, Some(BY_NAMESPACE), everything(kube_system())),
        ("service-accounts", low, 9000, Some(BY_USER), everything(groups(&[SERVICE_ACCOUNTS]))),
        ("global-default", "global-default", 9900, Some(BY_USER), everyone()),
    ];
    table
        .into_iter()
        .map(|(name, level, precedence, method, rule)| {
            schema(name, level, precedence, method, rule)
        })
        .collect()
}

/// Leader election of the control plane's own components: Leases
/// anywhere, and the older Endpoints and ConfigMaps locks in
/// kube-system.
fn system_election() -> PolicyRulesWithSubjects {
    let mut subjects = users(&[KCM, SCHEDULER]);
    subjects.push(kube_system_account("*"));
    rules(subjects, election_rules("kube-system"), vec![])
}

/// Leader election of controllers running as kube-system service
/// accounts, in any namespace.
fn workload_election() -> PolicyRulesWithSubjects {
    rules(vec![kube_system_account("*")], election_rules("*"), vec![])
}

fn election_rules(lock_namespace: &str) -> Vec<ResourcePolicyRule> {
    let verbs = ["get", "create", "update"];
    vec![
        resource_rule(&verbs, "", &["endpoints", "configmaps"], lock_namespace),
        resource_rule(&verbs, "coordination.k8s.io", &["leases"], "*"),
    ]
}

/// The controllers that write Endpoints.
fn endpoint_controller() -> PolicyRulesWithSubjects {
    let mut subjects = users(&[KCM]);
    subjects.push(kube_system_account("endpoint-controller"));
    subjects.push(kube_system_account("endpointslicemirroring-controller"));
    let endpoints = resource_rule(&["get", "create", "update"], "", &["endpoints"], "*");
    rules(subjects, vec![endpoints], vec![])
}

/// Node status and the node Leases: heartbeats that must never wait
/// behind a node's other traffic.
fn node_heartbeats(nodes: Vec<Subject>) -> PolicyRulesWithSubjects {
    let mut node_objects = resource_rule(&["*"], "", &["nodes", "nodes/status"], "*");
    node_objects.cluster_scope = Some(true);
    let leases = resource_rule(&["*"], "coordination.k8s.io", &["leases"], "*");
    rules(nodes, vec![node_objects, leases], vec![])
}

fn probes() -> PolicyRulesWithSubjects {
    let paths = ["/healthz", "/readyz", "/livez"].map(String::from).to_vec();
    let probe = NonResourcePolicyRule {
        verbs: vec!["get".into()],
        non_resource_urls: paths,
    };
    rules(
        groups(&[UNAUTHENTICATED, AUTHENTICATED]),
        vec![],
        vec![probe],
    )
}

fn exempt_level() -> PriorityLevelConfiguration {
    level(
        EXEMPT,
        PriorityLevelConfigurationSpec {
            type_: "Exempt".into(),
            exempt: Some(ExemptPriorityLevelConfiguration {
                nominal_concurrency_shares: Some(0),
                lendable_percent: Some(0),
            }),
            limited: None,
        },
    )
}

/// A limited level; `queuing` is (queues, handSize, queueLengthLimit),
/// none for one that rejects rather than queues.
fn limited(
    name: &str,
    shares: i32,
    lendable: i32,
    queuing: Option<(i32, i32, i32)>,
) -> PriorityLevelConfiguration {
    let limit_response = match queuing {
        Some((queues, hand_size, queue_length_limit)) => LimitResponse {
            type_: "Queue".into(),
            queuing: Some(QueuingConfiguration {
                queues: Some(queues),
                hand_size: Some(hand_size),
                queue_length_limit: Some(queue_length_limit),
            }),
        },
        None => LimitResponse {
            type_: "Reject".into(),
            queuing: None,
        },
    };
    level(
        name,
        PriorityLevelConfigurationSpec {
            type_: "Limited".into(),
            limited: Some(LimitedPriorityLevelConfiguration {
                nominal_concurrency_shares: Some(shares),
                lendable_percent: Some(lendable),
                borrowing_limit_percent: None,
                limit_response: Some(limit_response),
            }),
            exempt: None,
        },
    )
}

fn level(name: &str, spec: PriorityLevelConfigurationSpec) -> PriorityLevelConfiguration {
    PriorityLevelConfiguration {
        metadata: meta(name),
        spec: Some(spec),
        status: None,
    }
}

fn schema(
    name: &str,
    level: &str,
    precedence: i32,
    method: Option<&str>,
    rule: PolicyRulesWithSubjects,
) -> FlowSchema {
    FlowSchema {
        metadata: meta(name),
        spec: Some(FlowSchemaSpec {
            priority_level_configuration: PriorityLevelConfigurationReference {
                name: level.into(),
            },
            matching_precedence: Some(precedence),
            distinguisher_method: method.map(|m| FlowDistinguisherMethod { type_: m.into() }),
            rules: Some(vec![rule]),
        }),
        status: None,
    }
}

fn meta(name: &str) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.into()),
        annotations: Some(BTreeMap::from([(
            AUTO_UPDATE.to_string(),
            "true".to_string(),
        )])),
        ..ObjectMeta::default()
    }
}

/// Every request of the subjects, resource or not.
fn everything(subjects: Vec<Subject>) -> PolicyRulesWithSubjects {
    let mut all = resource_rule(&["*"], "*", &["*"], "*");
    all.cluster_scope = Some(true);
    let any_path = NonResourcePolicyRule {
        verbs: vec!["*".into()],
        non_resource_urls: vec!["*".into()],
    };
    rules(subjects, vec![all], vec![any_path])
}

/// Every request of every user, authenticated or not.
fn everyone() -> PolicyRulesWithSubjects {
    everything(groups(&[UNAUTHENTICATED, AUTHENTICATED]))
}

fn rules(
    subjects: Vec<Subject>,
    resource: Vec<ResourcePolicyRule>,
    non_resource: Vec<NonResourcePolicyRule>,
) -> PolicyRulesWithSubjects {
    PolicyRulesWithSubjects {
        subjects,
        resource_rules: (!resource.is_empty()).then_some(resource),
        non_resource_rules: (!non_resource.is_empty()).then_some(non_resource),
    }
}

fn resource_rule(
    verbs: &[&str],
    group: &str,
    resources: &[&str],
    namespace: &str,
) -> ResourcePolicyRule {
    ResourcePolicyRule {
        verbs: verbs.iter().map(|v| v.to_string()).collect(),
        api_groups: vec![group.to_string()],
        resources: resources.iter().map(|r| r.to_string()).collect(),
        namespaces: Some(vec![namespace.to_string()]),
        cluster_scope: None,
    }
}

fn groups(names: &[&str]) -> Vec<Subject> {
    let group = |name: &&str| Subject {
        kind: "Group".into(),
        group: Some(GroupSubject {
            name: name.to_string(),
        }),
        ..Subject::default()
    };
    names.iter().map(group).collect()
}

fn users(names: &[&str]) -> Vec<Subject> {
    let user = |name: &&str| Subject {
        kind: "User".into(),
        user: Some(UserSubject {
            name: name.to_string(),
        }),
        ..Subject::default()
    };
    names.iter().map(user).collect()
}

fn kube_system_account(name: &str) -> Subject {
    Subject {
        kind: "ServiceAccount".into(),
        service_account: Some(ServiceAccountSubject {
            name: name.into(),
            namespace: "kube-system".into(),
        }),
        ..Subject::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_schema_names_a_level_that_exists() {
        let levels: Vec<String> = mandatory_levels()
            .into_iter()
            .chain(suggested_levels())
            .map(|l| l.metadata.name.unwrap())
            .collect();
        assert_eq!(levels.len(), 8);
        for fs in mandatory_schemas().into_iter().chain(suggested_schemas()) {
            let level = fs.spec.unwrap().priority_level_configuration.name;
            assert!(levels.contains(&level), "{level}");
        }
    }

    #[test]
    fn objects_are_marked_for_automatic_update() {
        for fs in suggested_schemas() {
            let annotations = fs.metadata.annotations.unwrap();
            assert_eq!(
                annotations.get(AUTO_UPDATE).map(String::as_str),
                Some("true")
            );
        }
        assert_eq!(suggested_schemas().len(), 11);
    }
}
