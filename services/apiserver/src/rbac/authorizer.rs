//! The RBAC authorizer: a request is allowed when some rule of some role
//! bound to the user (by name, by group, or as a service account) allows
//! it; otherwise it has no opinion, with the resolution errors met (a
//! binding to a role that does not exist) as its reason.

use std::sync::Arc;

use super::index::Index;
use super::informer::{Shared, Snapshot};
use super::objects::Kind;
use crate::auth::{Attributes, Authorizer, Decision, PolicyRule, RuleList, UserInfo};

pub struct Rbac {
    shared: Shared,
}

impl Rbac {
    pub fn new(shared: Shared) -> Rbac {
        Rbac { shared }
    }

    fn snapshot(&self) -> Arc<Snapshot> {
        self.shared.borrow().clone()
    }
}

impl Authorizer for Rbac {
    fn authorize(&self, attributes: &Attributes) -> Decision {
        decide(&self.snapshot().index, attributes)
    }

    fn rules_for(&self, user: &UserInfo, namespace: &str) -> RuleList {
        let (rules, errors) = self
            .snapshot()
            .index
            .rules_for(&user.name, &user.groups, namespace);
        RuleList {
            rules,
            incomplete: !errors.is_empty(),
            errors,
        }
    }

    fn role_rules(
        &self,
        resource: &str,
        namespace: &str,
        name: &str,
    ) -> Option<Result<Vec<PolicyRule>, String>> {
        let kind = match resource {
            "roles" => Kind::Role,
            _ => Kind::ClusterRole,
        };
        let index = &self.snapshot().index;
        Some(
            index
                .role_rules(kind, namespace, name)
                .map(|r| r.as_ref().clone()),
        )
    }
}

/// The decision `index` gives.
pub fn decide(index: &Index, attributes: &Attributes) -> Decision {
    let (mut allowed, mut errors) = (false, Vec::new());
    let user = attributes.user;
    index.visit(
        &user.name,
        &user.groups,
        attributes.namespace,
        |_, rules| match rules {
            Ok(rules) if rules.iter().any(|rule| rule.allows(attributes)) => {
                allowed = true;
                false
            }
            Ok(_) => true,
            Err(err) => {
                errors.push(err);
                true
            }
        },
    );
    match (allowed, errors.len()) {
        (true, _) => Decision::Allow,
        (false, 0) => Decision::NoOpinion(String::new()),
        // kube's error aggregate: one error alone, several in brackets.
        (false, 1) => Decision::NoOpinion(format!("RBAC: {}", errors[0])),
        (false, _) => Decision::NoOpinion(format!("RBAC: [{}]", errors.join(", "))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rbac::aggregation;
    use crate::rbac::objects::Objects;
    use crate::rbac::policy;
    use serde_json::{json, Value};

    /// The bootstrap policy, aggregated, plus a team's own grants.
    fn index() -> Index {
        let mut objects = Objects::default();
        for role in policy::cluster_roles() {
            objects.put(Kind::ClusterRole, Arc::new(role));
        }
        for binding in policy::cluster_role_bindings() {
            objects.put(Kind::ClusterRoleBinding, Arc::new(binding));
        }
        for _ in 0..4 {
            for role in aggregation::pending(&objects) {
                objects.put(Kind::ClusterRole, Arc::new(role));
            }
        }
        let role = json!({"metadata": {"name": "app-config", "namespace": "team"}, "rules": [
            {"verbs": ["get", "update"], "apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["app"]}]});
        objects.put(Kind::Role, Arc::new(role));
        let binding = |name: &str, ns: &str, kind: &str, role: &str, subject: Value| {
            json!({"metadata": {"name": name, "namespace": ns},
                   "roleRef": {"kind": kind, "name": role}, "subjects": [subject]})
        };
        let user = |name: &str| json!({"kind": "User", "name": name});
        for rb in [
            binding("edit", "team", "ClusterRole", "edit", user("alice")),
            binding("cfg", "team", "Role", "app-config", user("bob")),
            binding(
                "sa",
                "team",
                "ClusterRole",
                "view",
                json!({"kind": "ServiceAccount", "name": "ci"}),
            ),
            binding("gone", "team", "Role", "missing", user("carol")),
        ] {
            objects.put(Kind::RoleBinding, Arc::new(rb));
        }
        Index::build(&objects)
    }

    fn user(name: &str, groups: &[&str]) -> UserInfo {
        UserInfo {
            name: name.into(),
            groups: groups.iter().map(|g| g.to_string()).collect(),
            ..UserInfo::default()
        }
    }

    fn resource<'a>(
        user: &'a UserInfo,
        verb: &'a str,
        gr: (&'a str, &'a str),
        sub: Option<&'a str>,
        ns: Option<&'a str>,
        name: Option<&'a str>,
    ) -> Attributes<'a> {
        Attributes::for_resource(user, verb, gr.0, gr.1)
            .with_subresource(sub.unwrap_or(""))
            .with_namespace(ns.unwrap_or(""))
            .with_name(name.unwrap_or(""))
    }

    #[test]
    fn a_table_of_requests_against_the_bootstrap_policy_and_a_team() {
        let index = index();
        let alice = user("alice", &["system:authenticated"]);
        let bob = user("bob", &["system:authenticated"]);
        let carol = user("carol", &["system:authenticated"]);
        let admin = user("admin", &["system:masters"]);
        let ci = user("system:serviceaccount:team:ci", &["system:serviceaccounts"]);
        let anonymous = UserInfo::anonymous();
        let core = |r| ("", r);
        let team = Some("team");
        let path = |user, verb, path| Attributes::for_path(user, verb, path);
        let cases: Vec<(Attributes, bool)> = vec![
            // `edit`, aggregated from system:aggregate-to-edit and -view.
            (
                resource(&alice, "create", core("configmaps"), None, team, None),
                true,
            ),
            (
                resource(&alice, "list", core("secrets"), None, team, None),
                true,
            ),
            (
                resource(&alice, "watch", core("pods"), None, team, None),
                true,
            ),
            (
                resource(&alice, "get", core("pods"), Some("log"), team, Some("p")),
                true,
            ),
            (
                resource(
                    &alice,
                    "update",
                    ("apps", "deployments"),
                    Some("scale"),
                    team,
                    Some("d"),
                ),
                true,
            ),
            (
                resource(
                    &alice,
                    "list",
                    core("configmaps"),
                    None,
                    Some("other"),
                    None,
                ),
                false,
            ),
            (
                resource(&alice, "list", core("configmaps"), None, None, None),
                false,
            ),
            (
                resource(
                    &alice,
                    "create",
                    ("rbac.authorization.k8s.io", "rolebindings"),
                    None,
                    team,
                    None,
                ),
                false,
            ),
            (
                resource(
                    &alice,
                    "update",
                    core("resourcequotas"),
                    None,
                    team,
                    Some("q"),
                ),
                false,
            ),
            // resourceNames.
            (
                resource(&bob, "get", core("configmaps"), None, team, Some("app")),
                true,
            ),
            (
                resource(&bob, "get", core("configmaps"), None, team, Some("db")),
                false,
            ),
            (
                resource(&bob, "list", core("configmaps"), None, team, None),
                false,
            ),
            // A service account bound by a RoleBinding without a namespace.
            (
                resource(&ci, "list", ("apps", "deployments"), None, team, None),
                true,
            ),
            (
                resource(
                    &ci,
                    "delete",
                    ("apps", "deployments"),
                    None,
                    team,
                    Some("d"),
                ),
                false,
            ),
            // Non-resource URLs: discovery for the authenticated only.
            (path(&alice, "get", "/apis/apps/v1"), true),
            (path(&anonymous, "get", "/apis/apps/v1"), false),
            (path(&anonymous, "get", "/healthz"), true),
            (path(&anonymous, "get", "/version"), true),
            (path(&anonymous, "get", "/metrics"), false),
            (path(&alice, "post", "/healthz"), false),
            (path(&admin, "get", "/metrics"), true),
            (
                resource(&admin, "delete", core("nodes"), None, None, Some("n")),
                true,
            ),
            (
                resource(&carol, "get", core("pods"), None, team, None),
                false,
            ),
        ];
        for (i, (attributes, allowed)) in cases.iter().enumerate() {
            let decision = decide(&index, attributes);
            assert_eq!(
                decision == Decision::Allow,
                *allowed,
                "case {i}: {attributes:?} -> {decision:?}"
            );
        }
        let carol_asks = resource(&carol, "get", core("pods"), None, team, None);
        assert_eq!(
            decide(&index, &carol_asks),
            Decision::NoOpinion(
                "RBAC: role.rbac.authorization.k8s.io \"missing\" not found".into()
            )
        );
    }
}
