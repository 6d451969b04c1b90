//! One PolicyRule and whether it allows a request (Kubernetes'
//! `RuleAllows`): verbs, API groups, resources with subresources
//! (`pods/log`, `*/scale`), resource names, and non-resource URLs with a
//! trailing `*`.

use serde::{Deserialize, Serialize};
use serde_json::Value;

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

/// What a request asks, as RBAC sees it.
#[derive(Debug, Clone, Copy)]
pub enum Request<'a> {
    Resource {
        verb: &'a str,
        group: &'a str,
        resource: &'a str,
        subresource: Option<&'a str>,
        name: Option<&'a str>,
    },
    NonResource {
        verb: &'a str,
        path: &'a str,
    },
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

    pub fn allows(&self, request: &Request) -> bool {
        match *request {
            Request::Resource {
                verb,
                group,
                resource,
                subresource,
                name,
            } => {
                self.verb_matches(verb)
                    && has_or_all(&self.api_groups, group)
                    && self.resource_matches(resource, subresource)
                    && self.name_matches(name)
            }
            Request::NonResource { verb, path } => {
                self.verb_matches(verb)
                    && self
                        .non_resource_urls
                        .iter()
                        .any(|url| url_covers(url, path))
            }
        }
    }

    fn verb_matches(&self, verb: &str) -> bool {
        has_or_all(&self.verbs, verb)
    }

    /// `resource/subresource` exactly, `*`, or `*/subresource` (compared
    /// in place: a decision allocates nothing).
    fn resource_matches(&self, resource: &str, subresource: Option<&str>) -> bool {
        let sub = subresource.filter(|s| !s.is_empty());
        self.resources.iter().any(|r| {
            r == "*"
                || match sub {
                    None => r == resource,
                    Some(sub) => {
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
    fn name_matches(&self, name: Option<&str>) -> bool {
        self.resource_names.is_empty()
            || name.is_some_and(|n| !n.is_empty() && self.resource_names.iter().any(|r| r == n))
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
    use serde_json::json;

    fn rule(value: Value) -> PolicyRule {
        serde_json::from_value(value).unwrap()
    }

    fn resource<'a>(
        verb: &'a str,
        group: &'a str,
        resource: &'a str,
        sub: Option<&'a str>,
        name: Option<&'a str>,
    ) -> Request<'a> {
        Request::Resource {
            verb,
            group,
            resource,
            subresource: sub,
            name,
        }
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
        let cases: Vec<(&PolicyRule, Request, bool)> = vec![
            (&pods, resource("get", "", "pods", None, Some("p")), true),
            (&pods, resource("list", "", "pods", None, None), true),
            (&pods, resource("watch", "", "pods", None, None), false),
            (&pods, resource("get", "apps", "pods", None, None), false),
            (
                &pods,
                resource("get", "", "pods", Some("log"), Some("p")),
                true,
            ),
            (
                &pods,
                resource("get", "", "pods", Some("exec"), Some("p")),
                false,
            ),
            (
                &scale,
                resource("update", "apps", "deployments", Some("scale"), Some("d")),
                true,
            ),
            (
                &scale,
                resource("get", "apps", "deployments", None, Some("d")),
                false,
            ),
            (
                &named,
                resource("get", "", "configmaps", None, Some("app")),
                true,
            ),
            (
                &named,
                resource("get", "", "configmaps", None, Some("other")),
                false,
            ),
            (
                &named,
                resource("list", "", "configmaps", None, None),
                false,
            ),
            (
                &urls,
                Request::NonResource {
                    verb: "get",
                    path: "/healthz",
                },
                true,
            ),
            (
                &urls,
                Request::NonResource {
                    verb: "get",
                    path: "/healthz/etcd",
                },
                false,
            ),
            (
                &urls,
                Request::NonResource {
                    verb: "get",
                    path: "/apis/apps/v1",
                },
                true,
            ),
            (
                &urls,
                Request::NonResource {
                    verb: "post",
                    path: "/apis/x",
                },
                false,
            ),
            (
                &pods,
                Request::NonResource {
                    verb: "get",
                    path: "/healthz",
                },
                false,
            ),
            (&urls, resource("get", "", "pods", None, None), false),
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
