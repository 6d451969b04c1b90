//! Which flow schema a request falls under, and which flow within it.
//! A schema matches when one of its rules does: a subject names the user
//! (by name, group or service account) and a resource rule (verb, group,
//! resource or resource/subresource, namespace or cluster scope) or a
//! non-resource rule (verb, path or path prefix) names the request.

use k8s_openapi::api::flowcontrol::v1::{
    NonResourcePolicyRule, PolicyRulesWithSubjects, ResourcePolicyRule, Subject,
};

use super::config::{Distinguisher, SchemaSpec};
use super::digest::{RequestDigest, ResourceTarget, Target};

const ALL: &str = "*";
const SERVICE_ACCOUNT_PREFIX: &str = "system:serviceaccount:";

/// The first of `schemas` (already in matching order) that matches.
pub fn classify<'a>(schemas: &'a [SchemaSpec], digest: &RequestDigest) -> Option<&'a SchemaSpec> {
    schemas
        .iter()
        .find(|s| s.rules.iter().any(|r| matches_rule(digest, r)))
}

/// What tells the flows of a schema apart: the user, the namespace, or
/// nothing (one flow).
pub fn flow_distinguisher(schema: &SchemaSpec, digest: &RequestDigest) -> String {
    match schema.distinguisher {
        Distinguisher::None => String::new(),
        Distinguisher::ByUser => digest.user.clone(),
        Distinguisher::ByNamespace => digest.namespace().to_string(),
    }
}

pub fn matches_rule(digest: &RequestDigest, rule: &PolicyRulesWithSubjects) -> bool {
    if !rule.subjects.iter().any(|s| matches_subject(digest, s)) {
        return false;
    }
    match &digest.target {
        Target::Resource(target) => rule
            .resource_rules
            .iter()
            .flatten()
            .any(|r| matches_resource(&digest.verb, target, r)),
        Target::NonResource { path } => rule
            .non_resource_rules
            .iter()
            .flatten()
            .any(|r| matches_non_resource(&digest.verb, path, r)),
    }
}

fn matches_subject(digest: &RequestDigest, subject: &Subject) -> bool {
    match subject.kind.as_str() {
        "User" => subject
            .user
            .as_ref()
            .is_some_and(|u| u.name == ALL || u.name == digest.user),
        "Group" => subject
            .group
            .as_ref()
            .is_some_and(|g| g.name == ALL || digest.groups.contains(&g.name)),
        "ServiceAccount" => subject.service_account.as_ref().is_some_and(|sa| {
            let Some((namespace, name)) = service_account(&digest.user) else {
                return false;
            };
            sa.namespace == namespace && (sa.name == ALL || sa.name == name)
        }),
        _ => false,
    }
}

/// The namespace and name of a service account's user name.
fn service_account(user: &str) -> Option<(&str, &str)> {
    let rest = user.strip_prefix(SERVICE_ACCOUNT_PREFIX)?;
    let (namespace, name) = rest.split_once(':')?;
    (!namespace.is_empty() && !name.is_empty() && !name.contains(':')).then_some((namespace, name))
}

fn matches_resource(verb: &str, target: &ResourceTarget, rule: &ResourcePolicyRule) -> bool {
    let named = |list: &[String], value: &str| list.iter().any(|x| x == ALL || x == value);
    let resource = match &target.subresource {
        Some(sub) => format!("{}/{sub}", target.resource),
        None => target.resource.clone(),
    };
    let scoped = if target.namespace.is_empty() {
        rule.cluster_scope.unwrap_or(false)
    } else {
        named(
            rule.namespaces.as_deref().unwrap_or_default(),
            &target.namespace,
        )
    };
    scoped
        && named(&rule.verbs, verb)
        && named(&rule.api_groups, &target.api_group)
        && named(&rule.resources, &resource)
}

fn matches_non_resource(verb: &str, path: &str, rule: &NonResourcePolicyRule) -> bool {
    let verb_named = rule.verbs.iter().any(|v| v == ALL || v == verb);
    verb_named
        && rule
            .non_resource_urls
            .iter()
            .any(|url| matches_path(url, path))
}

/// `*` is every path, `/apis/*` is `/apis` and everything under it, any
/// other pattern is the path itself.
fn matches_path(pattern: &str, path: &str) -> bool {
    if pattern == ALL || pattern == path {
        return true;
    }
    match pattern.strip_suffix(ALL) {
        Some(prefix) => path.starts_with(prefix) || Some(path) == prefix.strip_suffix('/'),
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flowcontrol::bootstrap::{mandatory_levels, suggested_levels, suggested_schemas};
    use crate::flowcontrol::config::digest;

    fn schemas() -> Vec<SchemaSpec> {
        let levels: Vec<_> = suggested_levels()
            .into_iter()
            .chain(mandatory_levels())
            .collect();
        digest(&levels, &suggested_schemas()).schemas
    }

    fn pick(digest: RequestDigest) -> String {
        classify(&schemas(), &digest)
            .map(|s| s.name.clone())
            .unwrap_or_default()
    }

    fn lease(user: &str, groups: &[&str], namespace: &str) -> RequestDigest {
        RequestDigest::resource(
            user,
            groups,
            "update",
            "coordination.k8s.io",
            "leases",
            namespace,
        )
    }

    #[test]
    fn kube_defaults_put_each_client_where_kube_does() {
        let authed = "system:authenticated";
        let kcm = "system:kube-controller-manager";
        let sa = |ns: &str, name: &str| format!("system:serviceaccount:{ns}:{name}");
        let sa_groups = [
            "system:serviceaccounts",
            "system:serviceaccounts:kube-system",
            authed,
        ];
        let node_groups = ["system:nodes", authed];
        let table: Vec<(RequestDigest, &str)> = vec![
            (
                RequestDigest::resource(
                    "admin",
                    &["system:masters", authed],
                    "list",
                    "",
                    "pods",
                    "",
                ),
                "exempt",
            ),
            (
                RequestDigest::non_resource("bob", &[authed], "get", "/healthz"),
                "probes",
            ),
            (
                RequestDigest::non_resource(
                    "system:anonymous",
                    &["system:unauthenticated"],
                    "get",
                    "/readyz",
                ),
                "probes",
            ),
            (
                lease(kcm, &[authed], "kube-system"),
                "system-leader-election",
            ),
            (
                lease("system:kube-scheduler", &[authed], "kube-system"),
                "system-leader-election",
            ),
            (
                lease(&sa("kube-system", "my-operator"), &sa_groups, "apps"),
                "system-leader-election",
            ),
            (
                RequestDigest::resource(kcm, &[authed], "update", "", "endpoints", "default"),
                "endpoint-controller",
            ),
            (
                lease("system:node:n1", &node_groups, "kube-node-lease"),
                "system-node-high",
            ),
            (
                RequestDigest::resource("system:node:n1", &node_groups, "patch", "", "nodes", ""),
                "system-node-high",
            ),
            (
                RequestDigest::resource("system:node:n1", &node_groups, "get", "", "pods", "a"),
                "system-nodes",
            ),
            (
                RequestDigest::resource(kcm, &[authed], "create", "", "pods", "a"),
                "kube-controller-manager",
            ),
            (
                RequestDigest::resource(
                    "system:kube-scheduler",
                    &[authed],
                    "create",
                    "",
                    "pods",
                    "a",
                ),
                "kube-scheduler",
            ),
            (
                RequestDigest::resource(
                    &sa("kube-system", "x"),
                    &sa_groups,
                    "list",
                    "apps",
                    "deployments",
                    "",
                ),
                "kube-system-service-accounts",
            ),
            (
                RequestDigest::resource(
                    &sa("team", "ci"),
                    &["system:serviceaccounts", authed],
                    "list",
                    "",
                    "pods",
                    "team",
                ),
                "service-accounts",
            ),
            (
                RequestDigest::resource("alice", &[authed], "list", "", "pods", "a"),
                "global-default",
            ),
            (
                RequestDigest::non_resource("alice", &[authed], "get", "/metrics"),
                "global-default",
            ),
            // Nobody is in no group, but the catch-all is there for it.
            (
                RequestDigest::resource("ghost", &[], "get", "", "pods", "a"),
                "",
            ),
        ];
        for (digest, expected) in table {
            assert_eq!(pick(digest.clone()), expected, "{digest:?}");
        }
    }

    #[test]
    fn subresources_namespaces_and_paths_match_as_written() {
        let rule = |resources: &[&str], namespaces: &[&str], cluster: bool| ResourcePolicyRule {
            verbs: vec!["get".into()],
            api_groups: vec!["".into()],
            resources: resources.iter().map(|r| r.to_string()).collect(),
            namespaces: Some(namespaces.iter().map(|r| r.to_string()).collect()),
            cluster_scope: Some(cluster),
        };
        let mut status = ResourceTarget {
            resource: "pods".into(),
            namespace: "a".into(),
            ..Default::default()
        };
        status.subresource = Some("status".into());
        assert!(!matches_resource(
            "get",
            &status,
            &rule(&["pods"], &["a"], false)
        ));
        assert!(matches_resource(
            "get",
            &status,
            &rule(&["pods/status"], &["a"], false)
        ));
        assert!(matches_resource(
            "get",
            &status,
            &rule(&["*"], &["*"], false)
        ));
        assert!(!matches_resource(
            "get",
            &status,
            &rule(&["*"], &["b"], true)
        ));
        assert!(!matches_resource(
            "list",
            &status,
            &rule(&["*"], &["a"], false)
        ));
        let nodes = ResourceTarget {
            resource: "nodes".into(),
            ..Default::default()
        };
        assert!(!matches_resource(
            "get",
            &nodes,
            &rule(&["nodes"], &["*"], false)
        ));
        assert!(matches_resource(
            "get",
            &nodes,
            &rule(&["nodes"], &[], true)
        ));
        assert!(matches_path("/apis/*", "/apis"));
        assert!(matches_path("/apis/*", "/apis/apps/v1"));
        assert!(!matches_path("/apis/*", "/apisx"));
        assert!(!matches_path("/healthz", "/healthz/etcd"));
        assert!(matches_path("*", "/anything"));
    }

    #[test]
    fn service_account_subjects_read_the_user_name() {
        assert_eq!(
            service_account("system:serviceaccount:ns:sa"),
            Some(("ns", "sa"))
        );
        assert_eq!(service_account("system:serviceaccount:ns"), None);
        assert_eq!(service_account("system:serviceaccount::sa"), None);
        assert_eq!(service_account("alice"), None);
    }

    #[test]
    fn flows_are_told_apart_by_user_or_namespace() {
        let schemas = schemas();
        let by_namespace = schemas.iter().find(|s| s.name == "kube-scheduler").unwrap();
        let by_user = schemas.iter().find(|s| s.name == "global-default").unwrap();
        let exempt = schemas.iter().find(|s| s.name == "exempt").unwrap();
        let request = RequestDigest::resource("alice", &[], "get", "", "pods", "team-a");
        assert_eq!(flow_distinguisher(by_namespace, &request), "team-a");
        assert_eq!(flow_distinguisher(by_user, &request), "alice");
        assert_eq!(flow_distinguisher(exempt, &request), "");
    }
}
