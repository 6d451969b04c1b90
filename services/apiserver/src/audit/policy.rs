//! The audit policy (`--audit-policy-file`, an audit.k8s.io/v1 `Policy`):
//! which requests are recorded, at what level, and which stages are left
//! out. Rules are tried in order and the first that matches decides, as in
//! kube-apiserver's policy checker; a request no rule matches is not
//! recorded.

use std::path::Path;

use serde::Deserialize;
use serde_json::Value;

use super::event::{Event, Level, Stage};

#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    #[error("{path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("{path}: {reason}")]
    Invalid { path: String, reason: String },
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Policy {
    #[serde(default)]
    api_version: String,
    #[serde(default)]
    kind: String,
    #[serde(default, rename = "metadata")]
    _metadata: Option<serde_yaml::Value>,
    #[serde(default)]
    pub rules: Vec<Rule>,
    /// Stages no event is written for, whatever rule matched.
    #[serde(default)]
    pub omit_stages: Vec<Stage>,
    #[serde(default)]
    pub omit_managed_fields: bool,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Rule {
    pub level: Level,
    #[serde(default)]
    pub users: Vec<String>,
    #[serde(default)]
    pub user_groups: Vec<String>,
    #[serde(default)]
    pub verbs: Vec<String>,
    #[serde(default)]
    pub resources: Vec<GroupResources>,
    /// Namespaces matched; "" is a cluster-scoped resource.
    #[serde(default)]
    pub namespaces: Vec<String>,
    #[serde(default, rename = "nonResourceURLs")]
    pub non_resource_urls: Vec<String>,
    #[serde(default)]
    pub omit_stages: Vec<Stage>,
    pub omit_managed_fields: Option<bool>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GroupResources {
    #[serde(default)]
    pub group: String,
    /// `res`, `res/sub`, `*`, `*/sub` or `res/*`; empty is every resource.
    #[serde(default)]
    pub resources: Vec<String>,
    #[serde(default)]
    pub resource_names: Vec<String>,
}

/// What the policy says for one request.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    pub level: Level,
    pub omit_stages: Vec<Stage>,
    pub omit_managed_fields: bool,
}

impl Decision {
    pub fn records(&self, stage: Stage) -> bool {
        self.level > Level::None && !self.omit_stages.contains(&stage)
    }

    /// An object as recorded: without managedFields when the policy says
    /// so (a list's items too).
    pub fn trim(&self, mut object: Value) -> Value {
        if self.omit_managed_fields {
            let strip = |o: &mut Value| {
                if let Some(meta) = o.get_mut("metadata").and_then(Value::as_object_mut) {
                    meta.remove("managedFields");
                }
            };
            strip(&mut object);
            if let Some(items) = object.get_mut("items").and_then(Value::as_array_mut) {
                items.iter_mut().for_each(strip);
            }
        }
        object
    }
}

const API_VERSIONS: [&str; 3] = [
    "audit.k8s.io/v1",
    "audit.k8s.io/v1beta1",
    "audit.k8s.io/v1alpha1",
];

impl Policy {
    pub fn load(path: &Path) -> Result<Policy, PolicyError> {
        let shown = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| PolicyError::Read {
            path: shown.clone(),
            source,
        })?;
        Policy::parse(&text).map_err(|reason| PolicyError::Invalid {
            path: shown,
            reason,
        })
    }

    /// A policy from its YAML (or JSON) text, checked as kube checks it.
    pub fn parse(text: &str) -> Result<Policy, String> {
        let policy: Policy = serde_yaml::from_str(text).map_err(|e| e.to_string())?;
        if policy.kind != "Policy" || !API_VERSIONS.contains(&policy.api_version.as_str()) {
            return Err(format!(
                "expected kind Policy of apiVersion audit.k8s.io/v1, got kind {:?} of {:?}",
                policy.kind, policy.api_version
            ));
        }
        for (i, rule) in policy.rules.iter().enumerate() {
            rule.validate()
                .map_err(|why| format!("rules[{i}]: {why}"))?;
        }
        Ok(policy)
    }

    /// The first matching rule's level and stages; `None` when none match.
    pub fn decide(&self, event: &Event) -> Decision {
        let rule = self.rules.iter().find(|rule| rule.matches(event));
        let Some(rule) = rule else {
            return Decision {
                level: Level::None,
                omit_stages: Vec::new(),
                omit_managed_fields: false,
            };
        };
        let mut omit_stages = self.omit_stages.clone();
        omit_stages.extend(rule.omit_stages.iter().copied());
        Decision {
            level: rule.level,
            omit_stages,
            omit_managed_fields: rule.omit_managed_fields.unwrap_or(self.omit_managed_fields),
        }
    }
}

impl Rule {
    fn validate(&self) -> Result<(), String> {
        let resource_rule = !self.resources.is_empty() || !self.namespaces.is_empty();
        if resource_rule && !self.non_resource_urls.is_empty() {
            return Err(
                "rules cannot apply to both regular resources and non-resource URLs".into(),
            );
        }
        for url in &self.non_resource_urls {
            let stem = url.strip_suffix('*').unwrap_or(url);
            if stem.contains('*') {
                return Err(format!(
                    "nonResourceURLs: {url:?}: '*' is only allowed at the end"
                ));
            }
        }
        for group in &self.resources {
            for resource in &group.resources {
                if resource.contains('*') && !group.resource_names.is_empty() {
                    return Err(format!(
                        "resources: {resource:?}: resourceNames need named resources"
                    ));
                }
            }
        }
        Ok(())
    }

    fn matches(&self, event: &Event) -> bool {
        let user = &event.user;
        if !self.users.is_empty() && !self.users.contains(&user.username) {
            return false;
        }
        if !self.user_groups.is_empty() && !user.groups.iter().any(|g| self.user_groups.contains(g))
        {
            return false;
        }
        if !self.verbs.is_empty() && !self.verbs.contains(&event.verb) {
            return false;
        }
        if !self.namespaces.is_empty() || !self.resources.is_empty() {
            return self.matches_resource(event);
        }
        if !self.non_resource_urls.is_empty() {
            return event.object_ref.is_none()
                && self
                    .non_resource_urls
                    .iter()
                    .any(|spec| path_matches(event.path(), spec));
        }
        true
    }

    fn matches_resource(&self, event: &Event) -> bool {
        let Some(object) = &event.object_ref else {
            return false;
        };
        if !self.namespaces.is_empty() && !self.namespaces.contains(&object.namespace) {
            return false;
        }
        self.resources.is_empty()
            || self
                .resources
                .iter()
                .filter(|group| group.group == object.api_group)
                .any(|group| group.matches(object))
    }
}

impl GroupResources {
    fn matches(&self, object: &super::event::ObjectReference) -> bool {
        if self.resources.is_empty() {
            return true;
        }
        if !self.resource_names.is_empty() && !self.resource_names.contains(&object.name) {
            return false;
        }
        let sub = object.subresource.as_str();
        let combined = match sub {
            "" => object.resource.clone(),
            sub => format!("{}/{sub}", object.resource),
        };
        self.resources.iter().any(|spec| {
            spec == "*"
                || *spec == combined
                || (!sub.is_empty() && spec.strip_prefix("*/") == Some(sub))
                || spec.strip_suffix("/*") == Some(object.resource.as_str())
        })
    }
}

/// kube's non-resource URL match: `*`, the exact path, or a prefix
/// ending in `*`.
fn path_matches(path: &str, spec: &str) -> bool {
    match spec.strip_suffix('*') {
        _ if spec == path => true,
        Some(prefix) => path.starts_with(prefix),
        None => false,
    }
}

#[cfg(test)]
#[path = "policy_tests.rs"]
mod tests;
