//! Authorizers: may this user do this? Each answers Allow, Deny or no
//! opinion (kube's `Decision`); a [`Union`] of them, in
//! `--authorization-mode` order, takes the first answer that is not
//! "no opinion".

use std::sync::{Arc, OnceLock};

use super::{Attributes, PolicyRule, UserInfo};

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    Allow,
    /// Denied, and why.
    Deny(String),
    /// Neither allowed nor denied; the reason, if any, is shown with a denial.
    NoOpinion(String),
}

impl Decision {
    pub fn is_allowed(&self) -> bool {
        matches!(self, Decision::Allow)
    }

    /// Why it was not allowed (empty when allowed or when nobody said).
    pub fn reason(&self) -> &str {
        match self {
            Decision::Allow => "",
            Decision::Deny(reason) | Decision::NoOpinion(reason) => reason,
        }
    }
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

    /// What `user` may do in `namespace` (kube's rule resolution);
    /// authorizers that cannot list their rules say the list is incomplete.
    fn rules_for(&self, _user: &UserInfo, _namespace: &str) -> RuleList {
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

impl std::fmt::Debug for dyn Authorizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Authorizer")
    }
}

/// An authorizer that start-up builds after the parts that ask it (the
/// admission plugins are installed before the authorizers that read the
/// registry): empty until then.
pub type AuthorizerSlot = Arc<OnceLock<Arc<dyn Authorizer>>>;

pub struct AlwaysAllow;

impl Authorizer for AlwaysAllow {
    fn authorize(&self, _attributes: &Attributes) -> Decision {
        Decision::Allow
    }

    fn rules_for(&self, _user: &UserInfo, _namespace: &str) -> RuleList {
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

    fn rules_for(&self, _user: &UserInfo, _namespace: &str) -> RuleList {
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

    fn rules_for(&self, user: &UserInfo, namespace: &str) -> RuleList {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::MASTERS;

    #[test]
    fn the_union_takes_the_first_opinion() {
        let alice = UserInfo::named("alice", &["system:authenticated"]);
        let masters = Arc::new(PrivilegedGroups(vec![MASTERS.into()]));
        let deny_all = Union(vec![masters.clone(), Arc::new(AlwaysDeny)]);
        let asked = Attributes::for_resource(&alice, "get", "", "configmaps")
            .with_namespace("a")
            .with_name("b");
        assert_eq!(
            deny_all.authorize(&asked),
            Decision::NoOpinion("Everything is forbidden.".into())
        );
        let allow = Union(vec![masters, Arc::new(AlwaysAllow)]);
        assert_eq!(allow.authorize(&asked), Decision::Allow);
    }
}
