//! The `PodSecurity` plugin: a validating step that evaluates pods (all
//! three modes) and workloads' pod templates (warn and audit only)
//! against their namespace's policy, and checks namespaces' labels.

use std::sync::Arc;

use serde_json::Value;

use super::checks::{details, evaluate};
use super::config::PodSecurityConfig;
use super::levels::{labels_of, LevelVersion, Policy, PREFIX};
use super::namespaces;
use super::pod::PodView;
use crate::admission::objects::{Freshness, Objects, NAMESPACES};
use crate::admission::{AdmissionError, Admit, Attributes, Operation, Plugin};

pub struct PodSecurity {
    objects: Arc<dyn Objects>,
    config: PodSecurityConfig,
}

impl PodSecurity {
    pub fn new(objects: Arc<dyn Objects>) -> PodSecurity {
        PodSecurity::configured(objects, PodSecurityConfig::default())
    }

    /// With the defaults and exemptions of a PodSecurityConfiguration.
    pub fn configured(objects: Arc<dyn Objects>, config: PodSecurityConfig) -> PodSecurity {
        PodSecurity { objects, config }
    }

    async fn admit(&self, a: &Attributes<'_>, object: &Value) -> Result<(), AdmissionError> {
        let core = a.group.is_empty();
        match a.resource {
            "namespaces" if core && a.subresource.is_empty() => {
                let exempt = self.config.exemptions.namespaces.contains(a.name);
                namespaces::validate(self.objects.as_ref(), a, object, exempt).await
            }
            "pods" if core && a.subresource.is_empty() => {
                if a.old_object
                    .is_some_and(|old| !significant_update(object, old))
                {
                    return Ok(());
                }
                self.evaluate(a, PodView::of_pod(object), true).await
            }
            _ if a.subresource.is_empty() => {
                match PodView::of_template(a.group, a.resource, object) {
                    Some(template) => self.evaluate(a, template, false).await,
                    None => Ok(()),
                }
            }
            _ => Ok(()),
        }
    }

    /// The namespace's policy; none (nothing to check) when the namespace
    /// is not there: NamespaceLifecycle answers for that.
    async fn policy(&self, namespace: &str) -> Result<Option<Policy>, AdmissionError> {
        let found = self
            .objects
            .get(NAMESPACES, "", namespace, Freshness::Cached)
            .await?;
        let defaults = self.config.defaults;
        Ok(found.map(|ns| defaults.overridden_by(&labels_of(&ns)).0))
    }

    /// kube's `EvaluatePod`: enforce (pods only) refuses; audit leaves an
    /// annotation; warn, unless refused already, a warning.
    async fn evaluate(
        &self,
        a: &Attributes<'_>,
        pod: PodView<'_>,
        enforce: bool,
    ) -> Result<(), AdmissionError> {
        if let Some(why) = self
            .config
            .exempt(a.namespace, &a.user.name, pod.runtime_class())
        {
            a.feedback.annotate(format!("{PREFIX}exempt"), why.as_str());
            return Ok(());
        }
        let Some(policy) = self.policy(a.namespace).await? else {
            return Ok(());
        };
        if policy.is_open() {
            return Ok(());
        }
        let violations = |lv: LevelVersion| details(&evaluate(lv, &pod));
        if enforce {
            a.feedback.annotate(
                format!("{PREFIX}enforce-policy"),
                policy.enforce.to_string(),
            );
            let found = violations(policy.enforce);
            if !found.is_empty() {
                let why = format!("violates PodSecurity \"{}\": {found}", policy.enforce);
                return Err(AdmissionError::denied(self.name(), why));
            }
        }
        let audited = violations(policy.audit);
        if !audited.is_empty() {
            let note = format!("would violate PodSecurity \"{}\": {audited}", policy.audit);
            a.feedback
                .annotate(format!("{PREFIX}audit-violations"), note);
        }
        let warned = violations(policy.warn);
        if !warned.is_empty() {
            a.feedback.warn(format!(
                "would violate PodSecurity \"{}\": {warned}",
                policy.warn
            ));
        }
        Ok(())
    }
}

impl Plugin for PodSecurity {
    fn name(&self) -> &str {
        "PodSecurity"
    }

    fn validate<'a>(&'a self, a: &'a Attributes<'a>, object: Option<&'a Value>) -> Admit<'a> {
        Box::pin(async move {
            match (a.operation, object) {
                (Operation::Create | Operation::Update, Some(object)) => {
                    self.admit(a, object).await
                }
                _ => Ok(()),
            }
        })
    }
}

/// kube looks at a pod update again only when what the standards judge
/// may have changed: its containers or their images (the rest of a
/// pod's spec cannot change after creation).
fn significant_update(new: &Value, old: &Value) -> bool {
    let images = |pod: &Value, field: &str| -> Vec<(Value, Value)> {
        let containers = pod["spec"][field].as_array().into_iter().flatten();
        containers
            .map(|c| (c["name"].clone(), c["image"].clone()))
            .collect()
    };
    ["initContainers", "containers", "ephemeralContainers"]
        .iter()
        .any(|field| images(new, field) != images(old, field))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admission::objects::Resource;
    use crate::admission::plugins::testing::{attributes, Memory};
    use crate::auth::UserInfo;
    use serde_json::json;

    fn namespace(labels: Value) -> Value {
        json!({"metadata": {"name": "ns", "labels": labels}})
    }

    fn plugin(labels: Value) -> PodSecurity {
        let memory = Memory::default();
        memory.put(NAMESPACES, namespace(labels));
        PodSecurity::new(Arc::new(memory))
    }

    fn privileged_pod() -> Value {
        json!({"metadata": {"name": "p", "namespace": "ns"},
            "spec": {"containers": [{"name": "c", "image": "i", "securityContext": {"privileged": true}}]}})
    }

    #[tokio::test]
    async fn enforce_refuses_with_kubes_message_and_records_the_policy() {
        let user = UserInfo::anonymous();
        let plugin = plugin(json!({"pod-security.kubernetes.io/enforce": "baseline"}));
        let create = attributes(Operation::Create, "pods", "ns", "p", &user);
        let refused = plugin.validate(&create, Some(&privileged_pod())).await;
        assert_eq!(
            refused.unwrap_err(),
            AdmissionError::denied(
                "PodSecurity",
                "violates PodSecurity \"baseline:latest\": privileged (container \"c\" must not set securityContext.privileged=true)"
            )
        );
        assert_eq!(
            create.feedback.annotations()["pod-security.kubernetes.io/enforce-policy"],
            "baseline:latest"
        );
        assert!(
            create.feedback.warnings().is_empty(),
            "no warning on a refusal"
        );
    }

    #[tokio::test]
    async fn warn_and_audit_let_it_in_and_say_why() {
        let user = UserInfo::anonymous();
        let plugin = plugin(json!({"pod-security.kubernetes.io/warn": "baseline",
            "pod-security.kubernetes.io/audit": "baseline", "pod-security.kubernetes.io/audit-version": "v1.30"}));
        let create = attributes(Operation::Create, "pods", "ns", "p", &user);
        assert_eq!(
            plugin.validate(&create, Some(&privileged_pod())).await,
            Ok(())
        );
        let why = "privileged (container \"c\" must not set securityContext.privileged=true)";
        assert_eq!(
            create.feedback.warnings(),
            [format!(
                "would violate PodSecurity \"baseline:latest\": {why}"
            )]
        );
        assert_eq!(
            create.feedback.annotations()["pod-security.kubernetes.io/audit-violations"],
            format!("would violate PodSecurity \"baseline:v1.30\": {why}")
        );
    }

    #[tokio::test]
    async fn workloads_only_warn_and_insignificant_pod_updates_pass() {
        let user = UserInfo::anonymous();
        let plugin = plugin(json!({"pod-security.kubernetes.io/enforce": "baseline",
            "pod-security.kubernetes.io/warn": "baseline"}));
        let deployment = json!({"metadata": {"name": "d"}, "spec": {"template": privileged_pod()}});
        let mut create = attributes(Operation::Create, "deployments", "ns", "d", &user);
        create.group = "apps";
        assert_eq!(plugin.validate(&create, Some(&deployment)).await, Ok(()));
        assert_eq!(create.feedback.warnings().len(), 1);
        let mut update = attributes(Operation::Update, "pods", "ns", "p", &user);
        let old = privileged_pod();
        update.old_object = Some(&old);
        let mut labelled = privileged_pod();
        labelled["metadata"]["labels"] = json!({"a": "b"});
        assert_eq!(plugin.validate(&update, Some(&labelled)).await, Ok(()));
        let mut new_image = privileged_pod();
        new_image["spec"]["containers"][0]["image"] = "j".into();
        assert!(plugin.validate(&update, Some(&new_image)).await.is_err());
    }

    #[tokio::test]
    async fn namespaces_with_bad_labels_are_invalid_and_tightening_warns() {
        let user = UserInfo::anonymous();
        let memory = Arc::new(Memory::default());
        let pods = Resource {
            group: "",
            resource: "pods",
        };
        memory.put(pods, privileged_pod());
        let plugin = PodSecurity::new(memory);
        let bad = namespace(json!({"pod-security.kubernetes.io/enforce": "strict"}));
        let create = attributes(Operation::Create, "namespaces", "", "ns", &user);
        let refused = plugin.validate(&create, Some(&bad)).await.unwrap_err();
        assert_eq!(
            refused.to_string(),
            "metadata.labels[pod-security.kubernetes.io/enforce]: Invalid value: \"strict\": must be one of privileged, baseline, restricted"
        );
        let old = namespace(json!({}));
        let mut update = attributes(Operation::Update, "namespaces", "", "ns", &user);
        update.old_object = Some(&old);
        let stricter = namespace(json!({"pod-security.kubernetes.io/enforce": "baseline"}));
        assert_eq!(plugin.validate(&update, Some(&stricter)).await, Ok(()));
        assert_eq!(
            update.feedback.warnings().len(),
            2,
            "{:?}",
            update.feedback.warnings()
        );
        assert_eq!(update.feedback.warnings()[1], "p: privileged");
    }
}
