//! The policy checker against a table of rules and requests.

use super::*;
use crate::audit::event::{ObjectReference, UserInfo};

const POLICY: &str = r#"
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
  - level: None
    users: ["system:kube-proxy"]
    verbs: ["watch"]
  - level: None
    userGroups: ["system:nodes"]
  - level: None
    nonResourceURLs: ["/healthz*", "/version"]
  - level: RequestResponse
    resources:
      - group: ""
        resources: ["secrets"]
        resourceNames: ["keep"]
  - level: Request
    resources:
      - group: ""
        resources: ["pods/log", "*/status"]
  - level: Request
    resources:
      - group: "apps"
        resources: ["deployments/*"]
    omitStages: ["ResponseStarted"]
  - level: Metadata
    namespaces: ["kube-system"]
  - level: RequestResponse
    verbs: ["create", "update"]
    resources:
      - group: ""
  - level: Metadata
    nonResourceURLs: ["*"]
"#;

fn user(name: &str, groups: &[&str]) -> UserInfo {
    UserInfo {
        username: name.into(),
        groups: groups.iter().map(|g| g.to_string()).collect(),
        ..UserInfo::default()
    }
}

/// A resource request: `path` is `group/resource[/sub]` and `at` is
/// `namespace/name`.
fn resource(who: UserInfo, verb: &str, path: &str, at: &str) -> Event {
    let mut parts = path.splitn(3, '/');
    let group = parts.next().unwrap_or_default();
    let resource = parts.next().unwrap_or_default();
    let sub = parts.next().unwrap_or_default();
    let (namespace, name) = at.split_once('/').unwrap_or(("", ""));
    let mut event = Event::received("id".into(), format!("/x/{path}"), verb.into(), who);
    event.object_ref = Some(ObjectReference {
        resource: resource.into(),
        subresource: sub.into(),
        namespace: namespace.into(),
        name: name.into(),
        api_group: group.into(),
        api_version: "v1".into(),
    });
    event
}

fn non_resource(who: UserInfo, verb: &str, uri: &str) -> Event {
    Event::received("id".into(), uri.into(), verb.into(), who)
}

#[test]
fn the_first_matching_rule_decides() {
    let policy = Policy::parse(POLICY).unwrap();
    let alice = || user("alice", &["dev", "system:authenticated"]);
    let cases = [
        // users and verbs must both match
        (
            resource(user("system:kube-proxy", &[]), "watch", "/endpoints", "a/"),
            Level::None,
        ),
        (
            resource(user("system:kube-proxy", &[]), "list", "/endpoints", "a/"),
            Level::None,
        ),
        // any of the user's groups
        (
            resource(user("n1", &["x", "system:nodes"]), "get", "/pods", "a/p"),
            Level::None,
        ),
        // nonResourceURLs: prefix and exact
        (
            non_resource(alice(), "get", "/healthz/etcd?verbose=1"),
            Level::None,
        ),
        (non_resource(alice(), "get", "/version"), Level::None),
        (non_resource(alice(), "get", "/versions"), Level::Metadata),
        // resourceNames
        (
            resource(alice(), "get", "/secrets", "a/keep"),
            Level::RequestResponse,
        ),
        (resource(alice(), "get", "/secrets", "a/other"), Level::None),
        // subresources: exact, */sub and res/*
        (resource(alice(), "get", "/pods/log", "a/p"), Level::Request),
        (
            resource(alice(), "update", "/pods/status", "a/p"),
            Level::Request,
        ),
        (
            resource(alice(), "update", "apps/deployments/scale", "a/d"),
            Level::Request,
        ),
        // `res/*` also matches the resource itself, as in kube
        (
            resource(alice(), "get", "apps/deployments", "a/d"),
            Level::Request,
        ),
        // namespaces, then a group with no resources listed
        (
            resource(alice(), "get", "apps/replicasets", "kube-system/r"),
            Level::Metadata,
        ),
        (
            resource(alice(), "create", "/configmaps", "a/"),
            Level::RequestResponse,
        ),
        (
            resource(alice(), "delete", "/configmaps", "a/c"),
            Level::None,
        ),
        // a nonResourceURLs rule never matches a resource request
        (resource(alice(), "get", "/configmaps", "a/c"), Level::None),
    ];
    for (i, (event, level)) in cases.iter().enumerate() {
        assert_eq!(policy.decide(event).level, *level, "case {i}: {event:?}");
    }
}

#[test]
fn stages_are_omitted_by_the_policy_and_the_rule() {
    let policy = Policy::parse(POLICY).unwrap();
    let scale = resource(user("a", &[]), "update", "apps/deployments/scale", "a/d");
    let decision = policy.decide(&scale);
    assert!(!decision.records(Stage::RequestReceived));
    assert!(!decision.records(Stage::ResponseStarted));
    assert!(decision.records(Stage::ResponseComplete));
    let dropped = resource(user("a", &[]), "get", "/configmaps", "a/c");
    assert!(!policy.decide(&dropped).records(Stage::ResponseComplete));
}

#[test]
fn bad_policies_are_refused_with_the_reason() {
    let bad = [
        ("kind: Policy\napiVersion: v1\nrules: []", "apiVersion"),
        ("kind: Policy\napiVersion: audit.k8s.io/v1\nrules: [{level: Loud}]", "Loud"),
        (
            "kind: Policy\napiVersion: audit.k8s.io/v1\nrules: [{level: None, nonResourceURLs: ['/a'], namespaces: ['b']}]",
            "both",
        ),
        (
            "kind: Policy\napiVersion: audit.k8s.io/v1\nrules: [{level: None, nonResourceURLs: ['/a*b']}]",
            "only allowed at the end",
        ),
        (
            "kind: Policy\napiVersion: audit.k8s.io/v1\nrules: [{level: None, verb: [get]}]",
            "verb",
        ),
        (
            "kind: Policy\napiVersion: audit.k8s.io/v1\nomitStages: [Later]\nrules: []",
            "Later",
        ),
    ];
    for (text, why) in bad {
        let err = Policy::parse(text).expect_err(text);
        assert!(err.contains(why), "{text}: {err}");
    }
    let empty = Policy::parse("apiVersion: audit.k8s.io/v1\nkind: Policy\n").unwrap();
    assert_eq!(
        empty
            .decide(&non_resource(user("a", &[]), "get", "/"))
            .level,
        Level::None
    );
}
