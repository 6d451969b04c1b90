//! The index a decision reads: role rules by name, and bindings by the
//! user or group they bind, cluster-wide and per namespace. Built once per
//! change of the RBAC objects (they change rarely), so a decision is a few
//! hash lookups and a walk over the rules that apply, never a list of
//! bindings.

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::Value;

use super::objects::{Kind, Objects};
use crate::auth::PolicyRule;

/// One subject of one binding, and the role it is granted.
#[derive(Debug)]
pub struct Grant {
    binding: Kind,
    /// `name`, or `namespace/name` for a RoleBinding (kube's description).
    binding_name: String,
    role_kind: Kind,
    role_name: String,
    /// Where a Role lives (a RoleBinding's namespace).
    role_namespace: String,
    subject: String,
}

impl Grant {
    /// What kube-apiserver names as the reason of an allowed request.
    pub fn describe(&self) -> String {
        format!(
            "{} {:?} of {} {:?} to {}",
            self.binding.name(),
            self.binding_name,
            self.role_kind.name(),
            self.role_name,
            self.subject
        )
    }
}

/// The grants of one scope, by subject.
#[derive(Debug, Default)]
struct Subjects {
    users: HashMap<String, Vec<Arc<Grant>>>,
    groups: HashMap<String, Vec<Arc<Grant>>>,
}

impl Subjects {
    fn of<'a>(&'a self, user: &str, groups: &'a [String]) -> impl Iterator<Item = &'a Arc<Grant>> {
        let by_user = self.users.get(user).into_iter().flatten();
        let by_group = groups.iter().filter_map(|g| self.groups.get(g)).flatten();
        by_user.chain(by_group)
    }
}

#[derive(Debug, Default)]
pub struct Index {
    cluster_roles: HashMap<String, Arc<Vec<PolicyRule>>>,
    roles: HashMap<(String, String), Arc<Vec<PolicyRule>>>,
    cluster: Subjects,
    namespaces: HashMap<String, Subjects>,
}

/// A role a binding names that does not exist, as kube words it.
pub fn missing_role(kind: Kind, name: &str) -> String {
    let singular = kind.name().to_lowercase();
    format!("{singular}.rbac.authorization.k8s.io {name:?} not found")
}

impl Index {
    pub fn build(objects: &Objects) -> Index {
        let mut index = Index::default();
        for ((_, name), role) in objects.of(Kind::ClusterRole) {
            let rules = Arc::new(PolicyRule::all_of(role));
            index.cluster_roles.insert(name.clone(), rules);
        }
        for (key, role) in objects.of(Kind::Role) {
            index
                .roles
                .insert(key.clone(), Arc::new(PolicyRule::all_of(role)));
        }
        for binding in objects.of(Kind::ClusterRoleBinding).values() {
            add_binding(&mut index.cluster, Kind::ClusterRoleBinding, binding, "");
        }
        for ((namespace, _), binding) in objects.of(Kind::RoleBinding) {
            let scope = index.namespaces.entry(namespace.clone()).or_default();
            add_binding(scope, Kind::RoleBinding, binding, namespace);
        }
        index
    }

    /// Calls `visit` with every grant that applies to the user in
    /// `namespace` (cluster bindings, then the namespace's), with the
    /// granted role's rules or why they could not be found, until `visit`
    /// returns false.
    pub fn visit(
        &self,
        user: &str,
        groups: &[String],
        namespace: &str,
        mut visit: impl FnMut(&Grant, Result<&[PolicyRule], String>) -> bool,
    ) {
        let local = self
            .namespaces
            .get(namespace)
            .filter(|_| !namespace.is_empty());
        let grants = self
            .cluster
            .of(user, groups)
            .chain(local.into_iter().flat_map(|s| s.of(user, groups)));
        for grant in grants {
            let rules = self.role_rules(grant.role_kind, &grant.role_namespace, &grant.role_name);
            if !visit(
                grant,
                rules.as_ref().map(|r| r.as_slice()).map_err(Clone::clone),
            ) {
                return;
            }
        }
    }

    /// The rules of a role a binding refers to.
    pub fn role_rules(
        &self,
        kind: Kind,
        namespace: &str,
        name: &str,
    ) -> Result<Arc<Vec<PolicyRule>>, String> {
        let found = match kind {
            Kind::Role => self.roles.get(&(namespace.to_string(), name.to_string())),
            _ => self.cluster_roles.get(name),
        };
        found.cloned().ok_or_else(|| missing_role(kind, name))
    }

    /// Every rule the user holds in `namespace`, and the errors met.
    pub fn rules_for(
        &self,
        user: &str,
        groups: &[String],
        namespace: &str,
    ) -> (Vec<PolicyRule>, Vec<String>) {
        let (mut rules, mut errors) = (Vec::new(), Vec::new());
        self.visit(user, groups, namespace, |_, found| {
            match found {
                Ok(found) => rules.extend(found.iter().cloned()),
                Err(err) => errors.push(err),
            }
            true
        });
        (rules, errors)
    }
}

/// The role kind a roleRef names (a RoleBinding may name either).
pub fn role_kind(role_ref: &Value) -> Kind {
    match role_ref["kind"].as_str() {
        Some("Role") => Kind::Role,
        _ => Kind::ClusterRole,
    }
}

fn add_binding(scope: &mut Subjects, kind: Kind, binding: &Value, namespace: &str) {
    let name = binding["metadata"]["name"].as_str().unwrap_or("");
    let role_ref = &binding["roleRef"];
    let binding_name = match kind {
        Kind::RoleBinding => format!("{name}/{namespace}"),
        _ => name.to_string(),
    };
    for subject in binding["subjects"].as_array().into_iter().flatten() {
        let subject_name = subject["name"].as_str().unwrap_or("");
        let (map, key, described) = match subject["kind"].as_str() {
            Some("User") => (
                &mut scope.users,
                subject_name.to_string(),
                format!("User {subject_name:?}"),
            ),
            Some("Group") => (
                &mut scope.groups,
                subject_name.to_string(),
                format!("Group {subject_name:?}"),
            ),
            Some("ServiceAccount") => {
                // A RoleBinding's own namespace stands in for a missing one.
                let sa_namespace = subject["namespace"]
                    .as_str()
                    .filter(|n| !n.is_empty())
                    .unwrap_or(namespace);
                if sa_namespace.is_empty() {
                    continue;
                }
                let user = crate::auth::service_account_user(sa_namespace, subject_name);
                (
                    &mut scope.users,
                    user,
                    format!("ServiceAccount \"{sa_namespace}/{subject_name}\""),
                )
            }
            _ => continue,
        };
        let grant = Grant {
            binding: kind,
            binding_name: binding_name.clone(),
            role_kind: role_kind(role_ref),
            role_name: role_ref["name"].as_str().unwrap_or("").to_string(),
            role_namespace: namespace.to_string(),
            subject: described,
        };
        map.entry(key).or_default().push(Arc::new(grant));
    }
}
