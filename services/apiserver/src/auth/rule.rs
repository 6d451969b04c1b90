//! One rule an authorizer can say it allows: rbac.authorization.k8s.io's
//! PolicyRule, which is also what rules reviews list (kube's resource and
//! non-resource rule infos), and whether it allows a request (Kubernetes'
//! `RuleAllows`): verbs, API groups, resources with subresources
//! (`pods/log`, `*/scale`), resource names, and non-resource URLs with a
//! trailing `*`.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::Attributes;

/// rbac.authorization.k8s.io/v1 PolicyRule.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PolicyRule {
    #[serde(default)]
    pub verbs: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub api_groups: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resources: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resource_names: Vec<String>,
    #[serde(
        default,
        rename = "nonResourceURLs",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub non_resource_urls: Vec<String>,
}

impl PolicyRule {
    /// The rules of a Role or ClusterRole (`rules`, absent or null: none);
    /// a rule that does not parse grants nothing.
    pub fn all_of(role: &Value) -> Vec<PolicyRule> {
        role["rules"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|rule| serde_json::from_value(rule.clone()).ok())
            .collect()
    }

    /// Whether this rule allows what `asked` asks (kube's `RuleAllows`).
    pub fn allows(&self, asked: &Attributes) -> bool {
        if !self.verb_matches(asked.verb) {
            return false;
        }
        match asked.resource_request {
            true => {
                has_or_all(&self.api_groups, asked.group)
                    && self.resource_matches(asked.resource, asked.subresource)
                    && self.name_matches(asked.name)
            }
            false => self
                .non_resource_urls
                .iter()
                .any(|url| url_covers(url, asked.path)),
        }
    }

    fn verb_matches(&self, verb: &str) -> bool {
        has_or_all(&self.verbs, verb)
    }

    /// `resource/subresource` exactly, `*`, or `*/subresource` (compared
    /// in place: a decision allocates nothing).
    fn resource_matches(&self, resource: &str, subresource: &str) -> bool {
        self.resources.iter().any(|r| {
            r == "*"
                || match subresource {
                    "" => r == resource,
                    sub => {
                        r.strip_prefix(resource)
                            .and_then(|rest| rest.strip_prefix('/'))
                            == Some(sub)
                            || r.strip_prefix("*/") == Some(sub)
                    }
                }
        })
    }

    /// No names in the rule: any name (and none); else the request's name
    /// must be listed, so a rule with names never allows a list or create.
    fn name_matches(&self, name: &str) -> bool {
        self.resource_names.is_empty()
            || (!name.is_empty() && self.resource_names.iter().any(|r| r == name))
    }
}

fn has_or_all(set: &[String], wanted: &str) -> bool {
    set.iter().any(|s| s == "*" || s == wanted)
}

/// A rule's URL covers a path exactly, or as a prefix when it ends in `*`.
pub fn url_covers(rule_url: &str, path: &str) -> bool {
    rule_url == "*"
        || rule_url == path
        || rule_url
            .strip_suffix('*')
            .is_some_and(|prefix| path.starts_with(prefix))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::UserInfo;
    use serde_json::json;

    fn rule(value: Value) -> PolicyRule {
        serde_json::from_value(value).unwrap()
    }

    static ALICE: std::sync::LazyLock<UserInfo> =
        std::sync::LazyLock::new(|| UserInfo::named("alice", &[]));

    fn resource<'a>(
        verb: &'a str,
        group: &'a str,
        resource: &'a str,
        sub: &'a str,
        name: &'a str,
    ) -> Attributes<'a> {
        Attributes::for_resource(&ALICE, verb, group, resource)
            .with_subresource(sub)
            .with_name(name)
    }

    fn path<'a>(verb: &'a str, path: &'a str) -> Attributes<'a> {
        Attributes::for_path(&ALICE, verb, path)
    }

    #[test]
    fn a_table_of_rules_and_requests() {
        let pods = rule(
            json!({"verbs": ["get", "list"], "apiGroups": [""], "resources": ["pods", "pods/log"]}),
        );
        let scale = rule(json!({"verbs": ["*"], "apiGroups": ["apps"], "resources": ["*/scale"]}));
        let named = rule(
            json!({"verbs": ["get", "update"], "apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["app"]}),
        );
        let urls = rule(json!({"verbs": ["get"], "nonResourceURLs": ["/healthz", "/apis/*"]}));
        let cases: Vec<(&PolicyRule, Attributes, bool)> = vec![
            (&pods, resource("get", "", "pods", "", "p"), true),
            (&pods, resource("list", "", "pods", "", ""), true),
            (&pods, resource("watch", "", "pods", "", ""), false),
            (&pods, resource("get", "apps", "pods", "", ""), false),
            (&pods, resource("get", "", "pods", "log", "p"), true),
            (&pods, resource("get", "", "pods", "exec", "p"), false),
            (
                &scale,
                resource("update", "apps", "deployments", "scale", "d"),
                true,
            ),
            (
                &scale,
                resource("get", "apps", "deployments", "", "d"),
                false,
            ),
            (&named, resource("get", "", "configmaps", "", "app"), true),
            (
                &named,
                resource("get", "", "configmaps", "", "other"),
                false,
            ),
            (&named, resource("list", "", "configmaps", "", ""), false),
            (&urls, path("get", "/healthz"), true),
            (&urls, path("get", "/healthz/etcd"), false),
            (&urls, path("get", "/apis/apps/v1"), true),
            (&urls, path("post", "/apis/x"), false),
            (&pods, path("get", "/healthz"), false),
            (&urls, resource("get", "", "pods", "", ""), false),
        ];
        for (i, (rule, request, expected)) in cases.iter().enumerate() {
            assert_eq!(rule.allows(request), *expected, "case {i}: {request:?}");
        }
    }

    #[test]
    fn rules_parse_from_a_role_and_bad_ones_grant_nothing() {
        let role = json!({"rules": [{"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]},
                                    {"verbs": "get"}]});
        assert_eq!(PolicyRule::all_of(&role).len(), 1);
        assert!(PolicyRule::all_of(&json!({"rules": null})).is_empty());
    }
}
