//! RBAC's escalation prevention, as type rules of the RBAC kinds: nobody
//! writes a Role or ClusterRole granting more than they hold unless they
//! may `escalate` it, and nobody binds a role granting more than they
//! hold unless they may `bind` it. Members of `system:masters` may do
//! both, as in kube-apiserver. The rules held come from the authorizer's
//! rule resolution (the requester's).

use serde_json::Value;

use super::super::strategy::Requester;
use crate::error::ApiError;
use crate::object::meta;
use crate::rbac::covers::{self, go_quoted};
use crate::rbac::rule::PolicyRule;

const GROUP: &str = "rbac.authorization.k8s.io";
const MASTERS: &str = "system:masters";

fn privileged(requester: &dyn Requester) -> bool {
    requester.groups().iter().any(|g| g == MASTERS)
}

fn forbidden(resource: &str, obj: &Value, why: &str) -> ApiError {
    ApiError::Forbidden(format!(
        "{resource}.{GROUP} {:?} is forbidden: {why}",
        meta::name(obj)
    ))
}

/// kube's ConfirmNoEscalation: the requester's rules in the object's
/// namespace must cover `wanted`.
fn confirm_no_escalation(
    requester: &dyn Requester,
    namespace: &str,
    wanted: &[PolicyRule],
) -> Result<(), String> {
    let (held, errors) = requester.rules(namespace);
    let lacking = covers::missing(&held, wanted);
    if lacking.is_empty() {
        return Ok(());
    }
    let mut why = format!(
        "user {:?} (groups={}) is attempting to grant RBAC permissions not currently held:\n{}",
        requester.name(),
        go_quoted(requester.groups()),
        covers::describe(&lacking)
    );
    if !errors.is_empty() {
        why.push_str(&format!("; resolution errors: [{}]", errors.join(" ")));
    }
    Err(why)
}

/// A Role (`resource` "roles") or ClusterRole ("clusterroles") write.
pub fn check_role(
    resource: &'static str,
    obj: &Value,
    old: Option<&Value>,
    requester: &dyn Requester,
) -> Result<(), ApiError> {
    if privileged(requester) {
        return Ok(());
    }
    let namespace = meta::namespace(obj);
    // kube asks with the request's name, which a create does not have.
    let name = old.map_or("", |_| meta::name(obj));
    if requester.may("escalate", GROUP, resource, namespace, name) {
        return Ok(());
    }
    confirm_no_escalation(requester, namespace, &PolicyRule::all_of(obj))
        .map_err(|why| forbidden(resource, obj, &why))?;
    if !obj["aggregationRule"].is_null() {
        // An aggregation rule can gather anything: it takes * on *.
        let everything: Vec<PolicyRule> = serde_json::from_value(serde_json::json!([
            {"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]},
            {"verbs": ["*"], "nonResourceURLs": ["*"]}]))
        .unwrap_or_default();
        confirm_no_escalation(requester, namespace, &everything).map_err(|_| {
            forbidden(
                resource,
                obj,
                "must have cluster-admin privileges to use the aggregationRule",
            )
        })?;
    }
    Ok(())
}

/// A RoleBinding (`resource` "rolebindings") or ClusterRoleBinding write.
pub fn check_binding(
    resource: &'static str,
    obj: &Value,
    _old: Option<&Value>,
    requester: &dyn Requester,
) -> Result<(), ApiError> {
    if privileged(requester) {
        return Ok(());
    }
    let namespace = meta::namespace(obj);
    let role_ref = &obj["roleRef"];
    let role_name = role_ref["name"].as_str().unwrap_or("");
    let (role_resource, role_namespace) = match role_ref["kind"].as_str() {
        Some("Role") => ("roles", namespace),
        _ => ("clusterroles", ""),
    };
    if requester.may("bind", GROUP, role_resource, namespace, role_name) {
        return Ok(());
    }
    let rules = requester
        .role_rules(role_resource, role_namespace, role_name)
        .map_err(|why| forbidden(resource, obj, &why))?;
    confirm_no_escalation(requester, namespace, &rules)
        .map_err(|why| forbidden(resource, obj, &why))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Holds `rules` in every namespace; may `escalate`/`bind` nothing.
    #[derive(Debug)]
    struct Holder {
        groups: Vec<String>,
        rules: Vec<PolicyRule>,
        may: bool,
    }

    impl Requester for Holder {
        fn name(&self) -> &str {
            "alice"
        }
        fn groups(&self) -> &[String] {
            &self.groups
        }
        fn may(&self, _: &str, _: &str, _: &str, _: &str, _: &str) -> bool {
            self.may
        }
        fn rules(&self, _: &str) -> (Vec<PolicyRule>, Vec<String>) {
            (self.rules.clone(), Vec::new())
        }
        fn role_rules(&self, _: &str, _: &str, name: &str) -> Result<Vec<PolicyRule>, String> {
            match name {
                "reader" => Ok(self.rules.clone()),
                "root" => Ok(serde_json::from_value(
                    json!([{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}]),
                )
                .unwrap()),
                _ => Err(format!(
                    "clusterrole.rbac.authorization.k8s.io {name:?} not found"
                )),
            }
        }
    }

    fn alice(may: bool, groups: &[&str]) -> Holder {
        Holder {
            groups: groups.iter().map(|g| g.to_string()).collect(),
            rules: serde_json::from_value(
                json!([{"verbs": ["get", "list"], "apiGroups": [""], "resources": ["pods"]}]),
            )
            .unwrap(),
            may,
        }
    }

    #[test]
    fn grants_beyond_what_is_held_need_escalate_bind_or_system_masters() {
        let role = |verbs: Value| {
            json!({"metadata": {"name": "r", "namespace": "a"},
            "rules": [{"verbs": verbs, "apiGroups": [""], "resources": ["pods"]}]})
        };
        let plain = alice(false, &["system:authenticated"]);
        assert!(check_role("roles", &role(json!(["get"])), None, &plain).is_ok());
        let Err(ApiError::Forbidden(message)) =
            check_role("roles", &role(json!(["get", "delete"])), None, &plain)
        else {
            panic!("an escalation was allowed");
        };
        assert_eq!(
            message,
            "roles.rbac.authorization.k8s.io \"r\" is forbidden: user \"alice\" (groups=[\"system:authenticated\"]) \
             is attempting to grant RBAC permissions not currently held:\n{APIGroups:[\"\"], Resources:[\"pods\"], Verbs:[\"delete\"]}"
        );
        assert!(check_role("roles", &role(json!(["*"])), None, &alice(true, &[])).is_ok());
        assert!(check_role(
            "roles",
            &role(json!(["*"])),
            None,
            &alice(false, &[MASTERS])
        )
        .is_ok());
        let mut aggregated = role(json!(["get"]));
        aggregated["aggregationRule"] = json!({"clusterRoleSelectors": []});
        assert!(check_role("clusterroles", &aggregated, None, &plain).is_err());

        let binding = |role: &str| {
            json!({"metadata": {"name": "b", "namespace": "a"},
            "roleRef": {"kind": "ClusterRole", "name": role}, "subjects": []})
        };
        assert!(check_binding("rolebindings", &binding("reader"), None, &plain).is_ok());
        assert!(check_binding("rolebindings", &binding("root"), None, &plain).is_err());
        assert!(check_binding("rolebindings", &binding("root"), None, &alice(true, &[])).is_ok());
        let Err(ApiError::Forbidden(missing)) =
            check_binding("rolebindings", &binding("gone"), None, &plain)
        else {
            panic!("a binding to a missing role was allowed");
        };
        assert_eq!(
            missing,
            "rolebindings.rbac.authorization.k8s.io \"b\" is forbidden: clusterrole.rbac.authorization.k8s.io \"gone\" not found"
        );
    }
}
