//! RBAC's escalation prevention, as type rules of the RBAC kinds: nobody
//! writes a Role or ClusterRole granting more than they hold unless they
//! may `escalate` it, and nobody binds a role granting more than they
//! hold unless they may `bind` it. Members of `system:masters` may do
//! both, as in kube-apiserver. The rules held come from the authorizer's
//! rule resolution (the requester's).

use serde_json::Value;

use crate::auth::{Attributes, Authorizer, PolicyRule, UserInfo, MASTERS};
use crate::error::ApiError;
use crate::object::meta;
use crate::registry::kinds::rbac::covers::{self as covers, go_quoted};

const GROUP: &str = "rbac.authorization.k8s.io";

/// May `user` do `verb` on `resource` of RBAC named `name` (may be
/// empty) in `namespace` (empty: cluster)?
fn may(
    authorizer: &dyn Authorizer,
    user: &UserInfo,
    verb: &str,
    resource: &str,
    (namespace, name): (&str, &str),
) -> bool {
    let asked = Attributes::for_resource(user, verb, GROUP, resource)
        .with_namespace(namespace)
        .with_name(name);
    authorizer.authorize(&asked).is_allowed()
}

/// The rules of the Role (`resource` "roles") or ClusterRole `name`.
fn role_rules(
    authorizer: &dyn Authorizer,
    resource: &str,
    namespace: &str,
    name: &str,
) -> Result<Vec<PolicyRule>, String> {
    let kind = match resource {
        "roles" => "role",
        _ => "clusterrole",
    };
    authorizer
        .role_rules(resource, namespace, name)
        .unwrap_or_else(|| Err(format!("{kind}.{GROUP} {name:?} not found")))
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
    user: &UserInfo,
    authorizer: &dyn Authorizer,
    namespace: &str,
    wanted: &[PolicyRule],
) -> Result<(), String> {
    let held = authorizer.rules_for(user, namespace);
    let (held, errors) = (held.rules, held.errors);
    let lacking = covers::missing(&held, wanted);
    if lacking.is_empty() {
        return Ok(());
    }
    let mut why = format!(
        "user {:?} (groups={}) is attempting to grant RBAC permissions not currently held:\n{}",
        user.name,
        go_quoted(&user.groups),
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
    (user, authorizer): (&UserInfo, &dyn Authorizer),
) -> Result<(), ApiError> {
    if user.in_group(MASTERS) {
        return Ok(());
    }
    let namespace = meta::namespace(obj);
    // kube asks with the request's name, which a create does not have.
    let name = old.map_or("", |_| meta::name(obj));
    if may(authorizer, user, "escalate", resource, (namespace, name)) {
        return Ok(());
    }
    confirm_no_escalation(user, authorizer, namespace, &PolicyRule::all_of(obj))
        .map_err(|why| forbidden(resource, obj, &why))?;
    if !obj["aggregationRule"].is_null() {
        // An aggregation rule can gather anything: it takes * on *.
        let everything: Vec<PolicyRule> = serde_json::from_value(serde_json::json!([
            {"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]},
            {"verbs": ["*"], "nonResourceURLs": ["*"]}]))
        .unwrap_or_default();
        confirm_no_escalation(user, authorizer, namespace, &everything).map_err(|_| {
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
    (user, authorizer): (&UserInfo, &dyn Authorizer),
) -> Result<(), ApiError> {
    if user.in_group(MASTERS) {
        return Ok(());
    }
    let namespace = meta::namespace(obj);
    let role_ref = &obj["roleRef"];
    let role_name = role_ref["name"].as_str().unwrap_or("");
    let (role_resource, role_namespace) = match role_ref["kind"].as_str() {
        Some("Role") => ("roles", namespace),
        _ => ("clusterroles", ""),
    };
    if may(
        authorizer,
        user,
        "bind",
        role_resource,
        (namespace, role_name),
    ) {
        return Ok(());
    }
    let rules = role_rules(authorizer, role_resource, role_namespace, role_name)
        .map_err(|why| forbidden(resource, obj, &why))?;
    confirm_no_escalation(user, authorizer, namespace, &rules)
        .map_err(|why| forbidden(resource, obj, &why))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    use crate::auth::{Decision, RuleList};

    /// Gives everyone `rules` in every namespace, and allows
    /// `escalate`/`bind` when `may`.
    struct Holder {
        rules: Vec<PolicyRule>,
        may: bool,
    }

    impl Authorizer for Holder {
        fn authorize(&self, _: &Attributes) -> Decision {
            match self.may {
                true => Decision::Allow,
                false => Decision::NoOpinion(String::new()),
            }
        }
        fn rules_for(&self, _: &UserInfo, _: &str) -> RuleList {
            RuleList {
                rules: self.rules.clone(),
                ..RuleList::default()
            }
        }
        fn role_rules(
            &self,
            _: &str,
            _: &str,
            name: &str,
        ) -> Option<Result<Vec<PolicyRule>, String>> {
            match name {
                "reader" => Some(Ok(self.rules.clone())),
                "root" => Some(Ok(serde_json::from_value(
                    json!([{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}]),
                )
                .unwrap())),
                _ => None,
            }
        }
    }

    /// Alice in `groups`, and an authorizer that gives her `get` and
    /// `list` on pods and `escalate`/`bind` when `may`.
    fn alice(may: bool, groups: &[&str]) -> (UserInfo, Holder) {
        let holder = Holder {
            rules: serde_json::from_value(
                json!([{"verbs": ["get", "list"], "apiGroups": [""], "resources": ["pods"]}]),
            )
            .unwrap(),
            may,
        };
        (UserInfo::named("alice", groups), holder)
    }

    fn asker((user, holder): &(UserInfo, Holder)) -> (&UserInfo, &dyn Authorizer) {
        (user, holder)
    }

    #[test]
    fn grants_beyond_what_is_held_need_escalate_bind_or_system_masters() {
        let role = |verbs: Value| {
            json!({"metadata": {"name": "r", "namespace": "a"},
            "rules": [{"verbs": verbs, "apiGroups": [""], "resources": ["pods"]}]})
        };
        let plain = alice(false, &["system:authenticated"]);
        assert!(check_role("roles", &role(json!(["get"])), None, asker(&plain)).is_ok());
        let Err(ApiError::Forbidden(message)) = check_role(
            "roles",
            &role(json!(["get", "delete"])),
            None,
            asker(&plain),
        ) else {
            panic!("an escalation was allowed");
        };
        assert_eq!(
            message,
            "roles.rbac.authorization.k8s.io \"r\" is forbidden: user \"alice\" (groups=[\"system:authenticated\"]) \
             is attempting to grant RBAC permissions not currently held:\n{APIGroups:[\"\"], Resources:[\"pods\"], Verbs:[\"delete\"]}"
        );
        assert!(check_role("roles", &role(json!(["*"])), None, asker(&alice(true, &[]))).is_ok());
        assert!(check_role(
            "roles",
            &role(json!(["*"])),
            None,
            asker(&alice(false, &[MASTERS]))
        )
        .is_ok());
        let mut aggregated = role(json!(["get"]));
        aggregated["aggregationRule"] = json!({"clusterRoleSelectors": []});
        assert!(check_role("clusterroles", &aggregated, None, asker(&plain)).is_err());

        let binding = |role: &str| {
            json!({"metadata": {"name": "b", "namespace": "a"},
            "roleRef": {"kind": "ClusterRole", "name": role}, "subjects": []})
        };
        assert!(check_binding("rolebindings", &binding("reader"), None, asker(&plain)).is_ok());
        assert!(check_binding("rolebindings", &binding("root"), None, asker(&plain)).is_err());
        assert!(check_binding(
            "rolebindings",
            &binding("root"),
            None,
            asker(&alice(true, &[]))
        )
        .is_ok());
        let Err(ApiError::Forbidden(missing)) =
            check_binding("rolebindings", &binding("gone"), None, asker(&plain))
        else {
            panic!("a binding to a missing role was allowed");
        };
        assert_eq!(
            missing,
            "rolebindings.rbac.authorization.k8s.io \"b\" is forbidden: clusterrole.rbac.authorization.k8s.io \"gone\" not found"
        );
    }
}
