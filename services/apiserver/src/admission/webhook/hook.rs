//! A webhook as the plugins use it: one entry of a configuration's
//! `webhooks`, read (typed, with kube's defaults already stored) from the
//! configurations' watch cache, so a request never reads the store.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::admissionregistration::v1::{
    MatchCondition, RuleWithOperations, WebhookClientConfig,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use serde::Deserialize;
use serde_json::Value;

use super::super::objects::{Freshness, LookupError, Objects, Resource};

pub const MUTATING: Resource = Resource {
    group: "admissionregistration.k8s.io",
    resource: "mutatingwebhookconfigurations",
};
pub const VALIDATING: Resource = Resource {
    group: "admissionregistration.k8s.io",
    resource: "validatingwebhookconfigurations",
};

/// kube's default when `timeoutSeconds` is unset.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

/// One webhook (the fields both configuration kinds share, and the
/// mutating one's reinvocationPolicy).
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Hook {
    pub name: String,
    pub client_config: WebhookClientConfig,
    #[serde(default)]
    pub rules: Vec<RuleWithOperations>,
    pub failure_policy: Option<String>,
    pub match_policy: Option<String>,
    pub namespace_selector: Option<LabelSelector>,
    pub object_selector: Option<LabelSelector>,
    #[serde(default)]
    pub side_effects: String,
    pub timeout_seconds: Option<i32>,
    pub reinvocation_policy: Option<String>,
    #[serde(default)]
    pub admission_review_versions: Vec<String>,
    #[serde(default)]
    pub match_conditions: Vec<MatchCondition>,
}

impl Hook {
    /// failurePolicy Ignore lets a request through when the call fails.
    pub fn ignores_failure(&self) -> bool {
        self.failure_policy.as_deref() == Some("Ignore")
    }

    /// matchPolicy Exact matches only the versions the rules name.
    pub fn exact(&self) -> bool {
        self.match_policy.as_deref() == Some("Exact")
    }

    pub fn reinvoke_if_needed(&self) -> bool {
        self.reinvocation_policy.as_deref() == Some("IfNeeded")
    }

    /// Whether a dry run may call it (kube's `sideEffects` check).
    pub fn dry_run_safe(&self) -> bool {
        matches!(self.side_effects.as_str(), "None" | "NoneOnDryRun")
    }

    pub fn timeout(&self) -> Duration {
        match self.timeout_seconds {
            Some(s) if s > 0 => Duration::from_secs(s as u64),
            _ => DEFAULT_TIMEOUT,
        }
    }

    /// The AdmissionReview version to speak: v1 when the webhook takes
    /// it, else v1beta1 (the same shape under another apiVersion).
    pub fn review_version(&self) -> &'static str {
        let takes = |v: &str| self.admission_review_versions.iter().any(|x| x == v);
        if !takes("v1") && takes("v1beta1") {
            "v1beta1"
        } else {
            "v1"
        }
    }
}

/// Where one kind of configuration is read from.
#[derive(Clone)]
pub struct Source {
    objects: Arc<dyn Objects>,
    resource: Resource,
}

impl Source {
    pub fn new(objects: Arc<dyn Objects>, resource: Resource) -> Source {
        Source { objects, resource }
    }

    pub fn objects(&self) -> &dyn Objects {
        self.objects.as_ref()
    }

    /// Every webhook, configurations by name (kube's order) and each
    /// configuration's webhooks in their order. A webhook this server
    /// cannot read (stored by another writer) is left out and logged.
    pub async fn hooks(&self) -> Result<Vec<Hook>, LookupError> {
        let mut configs = self
            .objects
            .list(self.resource, "", Freshness::Cached)
            .await?;
        configs.sort_by(|a, b| name(a).cmp(name(b)));
        Ok(configs.iter().flat_map(hooks_of).collect())
    }
}

fn name(config: &Value) -> &str {
    config["metadata"]["name"].as_str().unwrap_or("")
}

fn hooks_of(config: &Value) -> Vec<Hook> {
    let listed = config["webhooks"].as_array().into_iter().flatten();
    listed
        .filter_map(|hook| match Hook::deserialize(hook) {
            Ok(hook) => Some(hook),
            Err(err) => {
                tracing::warn!(configuration = name(config), %err, "unreadable webhook left out");
                None
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn webhooks_read_with_their_policies() {
        let config = json!({"metadata": {"name": "c"}, "webhooks": [
            {"name": "a.example.com", "clientConfig": {"url": "https://x/"}, "sideEffects": "None",
             "failurePolicy": "Ignore", "timeoutSeconds": 2, "admissionReviewVersions": ["v1beta1"],
             "reinvocationPolicy": "IfNeeded", "matchPolicy": "Exact"},
            {"name": "b.example.com", "clientConfig": {}, "sideEffects": "Some"},
            {"name": 7}
        ]});
        let hooks = hooks_of(&config);
        assert_eq!(hooks.len(), 2, "the unreadable one is left out");
        let (a, b) = (&hooks[0], &hooks[1]);
        assert!(a.ignores_failure() && a.exact() && a.reinvoke_if_needed() && a.dry_run_safe());
        assert_eq!(
            (a.timeout(), a.review_version()),
            (Duration::from_secs(2), "v1beta1")
        );
        assert!(!b.ignores_failure() && !b.exact() && !b.reinvoke_if_needed() && !b.dry_run_safe());
        assert_eq!((b.timeout(), b.review_version()), (DEFAULT_TIMEOUT, "v1"));
    }
}
