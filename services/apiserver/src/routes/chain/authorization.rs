//! Authorization: may this user do this verb on this resource or path?
//! Authorizers answer Allow, Deny or no opinion (kube's Decision); a union
//! of them, in `--authorization-mode` order, takes the first answer that
//! is not "no opinion". A request nobody allows is a 403 whose message
//! has kube-apiserver's form.

use std::sync::Arc;

use super::authentication::User;
use crate::error::ApiError;
use crate::rbac::rule::PolicyRule;
use crate::routes::request_info::RequestInfo;

#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    Allow,
    /// Denied, and why.
    Deny(String),
    /// Neither allowed nor denied; the reason, if any, is shown with a denial.
    NoOpinion(String),
}

/// What is asked, in the terms of Kubernetes' authorizer.Attributes.
#[derive(Debug, Clone, Copy)]
pub struct Attributes<'a> {
    pub user: &'a User,
    pub verb: &'a str,
    pub group: &'a str,
    pub resource: &'a str,
    pub subresource: Option<&'a str>,
    pub namespace: Option<&'a str>,
    pub name: Option<&'a str>,
    /// Set for a request that is not for a resource (`/healthz`, `/api`).
    pub path: Option<&'a str>,
}

/// The rules a user holds in a namespace (SelfSubjectRulesReview).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RuleList {
    pub rules: Vec<PolicyRule>,
    /// Some authorizer could not say everything it allows.
    pub incomplete: bool,
    pub errors: Vec<String>,
}

pub trait Authorizer: Send + Sync {
    fn authorize(&self, attributes: &Attributes) -> Decision;

    /// What `user` may do in `namespace`; authorizers that cannot list
    /// their rules say the list is incomplete.
    fn rules_for(&self, _user: &User, _namespace: &str) -> RuleList {
        RuleList {
            incomplete: true,
            ..RuleList::default()
        }
    }

    /// The rules of a Role (`resource` "roles") or ClusterRole, for
    /// authorizers that hold roles; None from the others.
    fn role_rules(
        &self,
        _resource: &str,
        _namespace: &str,
        _name: &str,
    ) -> Option<Result<Vec<PolicyRule>, String>> {
        None
    }
}

pub struct AlwaysAllow;

impl Authorizer for AlwaysAllow {
    fn authorize(&self, _attributes: &Attributes) -> Decision {
        Decision::Allow
    }

    fn rules_for(&self, _user: &User, _namespace: &str) -> RuleList {
        let everything = |urls: bool| PolicyRule {
            verbs: vec!["*".into()],
            api_groups: if urls { vec![] } else { vec!["*".into()] },
            resources: if urls { vec![] } else { vec!["*".into()] },
            non_resource_urls: if urls { vec!["*".into()] } else { vec![] },
            ..PolicyRule::default()
        };
        RuleList {
            rules: vec![everything(false), everything(true)],
            ..RuleList::default()
        }
    }
}

pub struct AlwaysDeny;

impl Authorizer for AlwaysDeny {
    fn authorize(&self, _attributes: &Attributes) -> Decision {
        Decision::NoOpinion("Everything is forbidden.".into())
    }
}

/// Members of these groups may do anything (kube-apiserver puts
/// `system:masters` first whenever a real authorizer is on).
pub struct PrivilegedGroups(pub Vec<String>);

impl Authorizer for PrivilegedGroups {
    fn authorize(&self, attributes: &Attributes) -> Decision {
        match attributes.user.groups.iter().any(|g| self.0.contains(g)) {
            true => Decision::Allow,
            false => Decision::NoOpinion(String::new()),
        }
    }

    fn rules_for(&self, _user: &User, _namespace: &str) -> RuleList {
        RuleList::default()
    }
}

/// Authorizers asked in order; the first that is not "no opinion" decides.
pub struct Union(pub Vec<Arc<dyn Authorizer>>);

impl Authorizer for Union {
    fn authorize(&self, attributes: &Attributes) -> Decision {
        let mut reasons = Vec::new();
        for authorizer in &self.0 {
            match authorizer.authorize(attributes) {
                Decision::NoOpinion(reason) if !reason.is_empty() => reasons.push(reason),
                Decision::NoOpinion(_) => {}
                decided => return decided,
            }
        }
        Decision::NoOpinion(reasons.join("\n"))
    }

    fn rules_for(&self, user: &User, namespace: &str) -> RuleList {
        let mut all = RuleList::default();
        for authorizer in &self.0 {
            let list = authorizer.rules_for(user, namespace);
            all.rules.extend(list.rules);
            all.errors.extend(list.errors);
            all.incomplete |= list.incomplete;
        }
        all
    }

    fn role_rules(
        &self,
        resource: &str,
        namespace: &str,
        name: &str,
    ) -> Option<Result<Vec<PolicyRule>, String>> {
        self.0
            .iter()
            .find_map(|a| a.role_rules(resource, namespace, name))
    }
}

/// One `--authorization-mode` entry.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Mode {
    AlwaysAllow,
    AlwaysDeny,
    Rbac,
}

/// `--authorization-mode`: a comma list of kube's mode names; `Node`,
/// `ABAC` and `Webhook` are kube's too but not served here.
pub fn parse_modes(text: &str) -> Result<Vec<Mode>, String> {
    let mut modes = Vec::new();
    for name in text.split(',').map(str::trim).filter(|m| !m.is_empty()) {
        let mode = match name {
            "AlwaysAllow" => Mode::AlwaysAllow,
            "AlwaysDeny" => Mode::AlwaysDeny,
            "RBAC" => Mode::Rbac,
            "Node" | "ABAC" | "Webhook" => {
                return Err(format!(
                    "authorization mode {name:?} is not supported by capstan"
                ))
            }
            other => return Err(format!("unknown authorization mode {other:?}")),
        };
        if modes.contains(&mode) {
            return Err(format!("authorization mode {name:?} is given twice"));
        }
        modes.push(mode);
    }
    if modes.is_empty() {
        return Err("at least one authorization mode is needed".into());
    }
    Ok(modes)
}

/// The attributes of a request described by `info`.
pub fn attributes<'a>(user: &'a User, info: &'a RequestInfo) -> Attributes<'a> {
    Attributes {
        user,
        verb: info.verb.as_str(),
        group: &info.group,
        resource: &info.resource,
        subresource: info.subresource.as_deref(),
        namespace: info.namespace.as_deref(),
        name: info.name.as_deref(),
        path: None,
    }
}

/// 403 unless `authorizer` allows the request.
pub fn check(authorizer: &dyn Authorizer, attributes: &Attributes) -> Result<(), ApiError> {
    match authorizer.authorize(attributes) {
        Decision::Allow => Ok(()),
        Decision::Deny(reason) | Decision::NoOpinion(reason) => {
            Err(ApiError::Forbidden(forbidden(attributes, &reason)))
        }
    }
}

/// kube-apiserver's denial message: `pods "p" is forbidden: User "u"
/// cannot get resource "pods/log" in API group "" in the namespace "ns"`,
/// `... at the cluster scope`, or `forbidden: User "u" cannot get path
/// "/metrics"`, with the authorizer's reason after a colon.
pub fn forbidden(attributes: &Attributes, reason: &str) -> String {
    let user = &attributes.user.name;
    let verb = attributes.verb;
    let message = match attributes.path {
        Some(path) => format!("forbidden: User {user:?} cannot {verb} path {path:?}"),
        None => {
            let mut resource = attributes.resource.to_string();
            if let Some(sub) = attributes.subresource.filter(|s| !s.is_empty()) {
                resource = format!("{resource}/{sub}");
            }
            let group = attributes.group;
            let scope = match attributes.namespace.filter(|n| !n.is_empty()) {
                Some(ns) => format!("in the namespace {ns:?}"),
                None => "at the cluster scope".to_string(),
            };
            let mut qualified = attributes.resource.to_string();
            if !group.is_empty() {
                qualified = format!("{qualified}.{group}");
            }
            let subject = match attributes.name.filter(|n| !n.is_empty()) {
                Some(name) => format!("{qualified} {name:?}"),
                None => qualified,
            };
            format!(
                "{subject} is forbidden: User {user:?} cannot {verb} resource {resource:?} \
                 in API group {group:?} {scope}"
            )
        }
    };
    match reason.is_empty() {
        true => message,
        false => format!("{message}: {reason}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn alice() -> User {
        User {
            name: "alice".into(),
            groups: vec!["system:authenticated".into()],
            ..User::default()
        }
    }

    fn ask<'a>(
        user: &'a User,
        verb: &'a str,
        ns: Option<&'a str>,
        name: Option<&'a str>,
    ) -> Attributes<'a> {
        Attributes {
            user,
            verb,
            group: "",
            resource: "configmaps",
            subresource: None,
            namespace: ns,
            name,
            path: None,
        }
    }

    #[test]
    fn denials_read_as_kube_apiserver_writes_them() {
        let alice = alice();
        assert_eq!(
            forbidden(&ask(&alice, "list", Some("team"), None), ""),
            "configmaps is forbidden: User \"alice\" cannot list resource \"configmaps\" in API group \"\" in the namespace \"team\""
        );
        let mut scale = ask(&alice, "update", None, Some("web"));
        (scale.group, scale.resource, scale.subresource) = ("apps", "deployments", Some("scale"));
        assert_eq!(
            forbidden(&scale, "RBAC: role.rbac.authorization.k8s.io \"x\" not found"),
            "deployments.apps \"web\" is forbidden: User \"alice\" cannot update resource \"deployments/scale\" in API group \"apps\" at the cluster scope: RBAC: role.rbac.authorization.k8s.io \"x\" not found"
        );
        let metrics = Attributes {
            path: Some("/metrics"),
            ..ask(&alice, "get", None, None)
        };
        assert_eq!(
            forbidden(&metrics, ""),
            "forbidden: User \"alice\" cannot get path \"/metrics\""
        );
    }

    #[test]
    fn the_union_takes_the_first_opinion_and_modes_parse_as_kube_names_them() {
        let alice = alice();
        let masters = Arc::new(PrivilegedGroups(vec!["system:masters".into()]));
        let deny_all: Union = Union(vec![masters.clone(), Arc::new(AlwaysDeny)]);
        let asked = ask(&alice, "get", Some("a"), Some("b"));
        assert_eq!(
            deny_all.authorize(&asked),
            Decision::NoOpinion("Everything is forbidden.".into())
        );
        let allow = Union(vec![masters, Arc::new(AlwaysAllow)]);
        assert_eq!(allow.authorize(&asked), Decision::Allow);
        assert_eq!(
            parse_modes("RBAC, AlwaysAllow").unwrap(),
            [Mode::Rbac, Mode::AlwaysAllow]
        );
        assert!(parse_modes("Node,RBAC")
            .unwrap_err()
            .contains("not supported"));
        assert!(parse_modes("").is_err());
        assert!(parse_modes("RBAC,RBAC").is_err());
    }
}
