//! kube's PodSecurityConfiguration (pod-security.admission.config.k8s.io
//! v1, given through `--admission-control-config-file`): the levels of
//! namespaces that set no labels (`defaults`, each mode and version as
//! the labels spell them), and who is never checked (`exemptions`:
//! requesting users, namespaces, and pods of a runtime class).

use std::collections::{BTreeMap, BTreeSet};

use serde::Deserialize;
use serde_json::Value;

use super::levels::{Policy, PREFIX};

const API_VERSIONS: [&str; 3] = [
    "pod-security.admission.config.k8s.io/v1",
    "pod-security.admission.config.k8s.io/v1beta1",
    "pod-security.admission.config.k8s.io/v1alpha1",
];

#[derive(Debug, Clone, Default)]
pub struct PodSecurityConfig {
    pub defaults: Policy,
    pub exemptions: Exemptions,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Exemptions {
    #[serde(default)]
    pub usernames: BTreeSet<String>,
    #[serde(default)]
    pub namespaces: BTreeSet<String>,
    #[serde(default)]
    pub runtime_classes: BTreeSet<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Document {
    api_version: String,
    kind: String,
    #[serde(default)]
    defaults: BTreeMap<String, String>,
    #[serde(default)]
    exemptions: Exemptions,
}

/// Why an exemption applies: kube's `pod-security.kubernetes.io/exempt`
/// audit annotation value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exempt {
    Namespace,
    User,
    RuntimeClass,
}

impl Exempt {
    pub fn as_str(self) -> &'static str {
        match self {
            Exempt::Namespace => "namespace",
            Exempt::User => "user",
            Exempt::RuntimeClass => "runtimeClass",
        }
    }
}

impl PodSecurityConfig {
    /// Reads the plugin's `configuration`; an unknown version or kind, an
    /// unknown field or a default that does not parse is an error.
    pub fn parse(configuration: &Value) -> Result<PodSecurityConfig, String> {
        let document = Document::deserialize(configuration).map_err(|e| e.to_string())?;
        if !API_VERSIONS.contains(&document.api_version.as_str())
            || document.kind != "PodSecurityConfiguration"
        {
            return Err(format!(
                "expected pod-security.admission.config.k8s.io/v1 PodSecurityConfiguration, got {}/{}",
                document.api_version, document.kind
            ));
        }
        let labels = document
            .defaults
            .iter()
            .map(|(mode, value)| (format!("{PREFIX}{mode}"), value.clone()))
            .collect();
        let known = ["enforce", "audit", "warn"]
            .iter()
            .flat_map(|m| [m.to_string(), format!("{m}-version")])
            .collect::<Vec<_>>();
        if let Some(unknown) = document.defaults.keys().find(|k| !known.contains(k)) {
            return Err(format!("defaults.{unknown}: unknown field"));
        }
        let (defaults, bad) = Policy::default().overridden_by(&labels);
        if let Some(bad) = bad.first() {
            let field = bad.label.trim_start_matches(PREFIX);
            return Err(format!("defaults.{field}: {:?}: {}", bad.value, bad.why));
        }
        Ok(PodSecurityConfig {
            defaults,
            exemptions: document.exemptions,
        })
    }

    /// Whether a request by `user` in `namespace` for a pod of
    /// `runtime_class` is exempt, and why (kube's order).
    pub fn exempt(
        &self,
        namespace: &str,
        user: &str,
        runtime_class: Option<&str>,
    ) -> Option<Exempt> {
        let e = &self.exemptions;
        if e.namespaces.contains(namespace) {
            Some(Exempt::Namespace)
        } else if e.usernames.contains(user) {
            Some(Exempt::User)
        } else if runtime_class.is_some_and(|rc| e.runtime_classes.contains(rc)) {
            Some(Exempt::RuntimeClass)
        } else {
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn defaults_and_exemptions_read_as_kube_writes_them() {
        let config = PodSecurityConfig::parse(&json!({
            "apiVersion": "pod-security.admission.config.k8s.io/v1",
            "kind": "PodSecurityConfiguration",
            "defaults": {"enforce": "baseline", "enforce-version": "v1.30", "warn": "restricted"},
            "exemptions": {"usernames": ["system:serviceaccount:kube-system:ci"],
                           "namespaces": ["kube-system"], "runtimeClasses": ["kata"]}
        }))
        .unwrap();
        assert_eq!(config.defaults.enforce.to_string(), "baseline:v1.30");
        assert_eq!(config.defaults.warn.to_string(), "restricted:latest");
        assert_eq!(config.defaults.audit.to_string(), "privileged:latest");
        let ci = "system:serviceaccount:kube-system:ci";
        assert_eq!(
            config.exempt("kube-system", "alice", None),
            Some(Exempt::Namespace)
        );
        assert_eq!(config.exempt("apps", ci, None), Some(Exempt::User));
        assert_eq!(
            config.exempt("apps", "alice", Some("kata")),
            Some(Exempt::RuntimeClass)
        );
        assert_eq!(config.exempt("apps", "alice", Some("runc")), None);
    }

    #[test]
    fn a_bad_configuration_says_what_is_wrong() {
        let base = |extra: Value| {
            let mut doc = json!({"apiVersion": "pod-security.admission.config.k8s.io/v1",
                                 "kind": "PodSecurityConfiguration"});
            doc.as_object_mut()
                .unwrap()
                .extend(extra.as_object().unwrap().clone());
            PodSecurityConfig::parse(&doc).unwrap_err()
        };
        assert!(base(json!({"defaults": {"enforce": "strict"}}))
            .starts_with("defaults.enforce: \"strict\": "));
        assert_eq!(
            base(json!({"defaults": {"enfoce": "baseline"}})),
            "defaults.enfoce: unknown field"
        );
        assert!(base(json!({"exemptions": {"users": []}})).contains("unknown field `users`"));
        let wrong = PodSecurityConfig::parse(&json!({"apiVersion": "v1", "kind": "ConfigMap"}))
            .unwrap_err();
        assert!(
            wrong.starts_with("expected pod-security.admission.config.k8s.io/v1"),
            "{wrong}"
        );
    }
}
