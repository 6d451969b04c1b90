//! The built-in plugins by kube's names: which exist, which run by
//! default, their order, and `--enable-admission-plugins` /
//! `--disable-admission-plugins`. kube runs the enabled plugins in one
//! fixed order whatever order the flags list them in; so does this.

mod default_storage_class;
mod default_toleration_seconds;
mod limit_ranger;
mod namespace_lifecycle;
mod node_restriction;
mod priority;
mod resource_quota;
mod service_account;

use std::sync::Arc;

pub use super::config_file::DefaultTolerations;
pub use default_storage_class::DefaultStorageClass;
pub use default_toleration_seconds::DefaultTolerationSeconds;
pub use limit_ranger::LimitRanger;
pub use namespace_lifecycle::{NamespaceLifecycle, IMMORTAL_NAMESPACES};
pub use node_restriction::NodeRestriction;
pub use priority::{Priority, SYSTEM_CLASSES};
pub use resource_quota::ResourceQuota;
pub use service_account::{ServiceAccount, TOKEN_MOUNT_PATH};

use super::config_file::PluginConfigurations;
use super::objects::Objects;
use super::pod_security::PodSecurity;
use super::policy::ValidatingAdmissionPolicy;
use super::webhook::{MutatingWebhooks, ValidatingWebhooks, WebhookMetrics};
use super::Plugin;
use crate::auth::AuthorizerSlot;

/// Every admission plugin kube-apiserver knows, in the order it runs
/// them (kube's `AllOrderedPlugins`): webhooks, policies and quota last.
pub const KUBE_ORDER: &[&str] = &[
    "AlwaysAdmit",
    "NamespaceAutoProvision",
    "NamespaceLifecycle",
    "NamespaceExists",
    "LimitPodHardAntiAffinityTopology",
    "LimitRanger",
    "ServiceAccount",
    "NodeRestriction",
    "TaintNodesByCondition",
    "AlwaysPullImages",
    "ImagePolicyWebhook",
    "PodSecurity",
    "PodNodeSelector",
    "Priority",
    "DefaultTolerationSeconds",
    "PodTolerationRestriction",
    "EventRateLimit",
    "ExtendedResourceToleration",
    "DefaultStorageClass",
    "StorageObjectInUseProtection",
    "OwnerReferencesPermissionEnforcement",
    "PersistentVolumeClaimResize",
    "RuntimeClass",
    "CertificateApproval",
    "CertificateSigning",
    "ClusterTrustBundleAttest",
    "CertificateSubjectRestriction",
    "DefaultIngressClass",
    "DenyServiceExternalIPs",
    "PodTopologyLabels",
    "MutatingAdmissionPolicy",
    "MutatingAdmissionWebhook",
    "ValidatingAdmissionPolicy",
    "ValidatingAdmissionWebhook",
    "ResourceQuota",
    "AlwaysDeny",
];

/// Plugins kube leaves off but every cluster that runs the Node
/// authorizer turns on (kubeadm, k3s), so Capstan runs them by default.
pub const ALSO_ON_BY_DEFAULT: &[&str] = &["NodeRestriction"];

/// kube-apiserver's default set (`DefaultOffAdmissionPlugins`' complement).
pub const KUBE_DEFAULTS: &[&str] = &[
    "NamespaceLifecycle",
    "LimitRanger",
    "ServiceAccount",
    "TaintNodesByCondition",
    "PodSecurity",
    "Priority",
    "DefaultTolerationSeconds",
    "DefaultStorageClass",
    "StorageObjectInUseProtection",
    "PersistentVolumeClaimResize",
    "RuntimeClass",
    "CertificateApproval",
    "CertificateSigning",
    "ClusterTrustBundleAttest",
    "CertificateSubjectRestriction",
    "DefaultIngressClass",
    "MutatingAdmissionWebhook",
    "ValidatingAdmissionPolicy",
    "ValidatingAdmissionWebhook",
    "ResourceQuota",
];

/// The plugins this server has.
pub const IMPLEMENTED: &[&str] = &[
    "NamespaceLifecycle",
    "LimitRanger",
    "ServiceAccount",
    "NodeRestriction",
    "PodSecurity",
    "Priority",
    "DefaultTolerationSeconds",
    "DefaultStorageClass",
    "MutatingAdmissionWebhook",
    "ValidatingAdmissionPolicy",
    "ValidatingAdmissionWebhook",
    "ResourceQuota",
];

/// The plugins to run, in kube's order: kube's defaults that are
/// implemented here, plus `enable`, minus `disable`. A name kube does not
/// know, or one enabled that is not implemented here, is an error (the
/// message says which flag and which name).
pub fn select(enable: &[String], disable: &[String]) -> Result<Vec<&'static str>, String> {
    for (flag, names) in [
        ("enable-admission-plugins", enable),
        ("disable-admission-plugins", disable),
    ] {
        if let Some(unknown) = names.iter().find(|n| !KUBE_ORDER.contains(&n.as_str())) {
            return Err(format!("{flag} plugin {unknown:?} is unknown"));
        }
    }
    if let Some(missing) = enable.iter().find(|n| !IMPLEMENTED.contains(&n.as_str())) {
        return Err(format!(
            "enable-admission-plugins plugin {missing:?} is not implemented by capstan-apiserver \
             (implemented: {})",
            IMPLEMENTED.join(", ")
        ));
    }
    let both: Vec<&String> = enable.iter().filter(|n| disable.contains(n)).collect();
    if !both.is_empty() {
        return Err(format!(
            "{both:?} in enable-admission-plugins and disable-admission-plugins overlapped"
        ));
    }
    let wanted = |name: &&str| {
        let enabled = enable.iter().any(|n| n == name)
            || (KUBE_DEFAULTS.contains(name) && IMPLEMENTED.contains(name))
            || ALSO_ON_BY_DEFAULT.contains(name);
        enabled && !disable.iter().any(|n| n == name)
    };
    Ok(KUBE_ORDER.iter().copied().filter(wanted).collect())
}

/// The plugins named (as [`select`] gave them), on `objects`, configured
/// by `--admission-control-config-file`; the webhook plugins observe
/// their calls in `webhooks`; policies' CEL `authorizer` asks
/// `authorizer`.
pub fn build(
    names: &[&str],
    objects: Arc<dyn Objects>,
    webhooks: &WebhookMetrics,
    configurations: &PluginConfigurations,
    authorizer: &AuthorizerSlot,
) -> Vec<Arc<dyn Plugin>> {
    names
        .iter()
        .filter_map(|name| -> Option<Arc<dyn Plugin>> {
            match *name {
                "NamespaceLifecycle" => Some(Arc::new(NamespaceLifecycle::new(objects.clone()))),
                "LimitRanger" => Some(Arc::new(LimitRanger::new(objects.clone()))),
                "ServiceAccount" => Some(Arc::new(ServiceAccount::new(objects.clone()))),
                "NodeRestriction" => Some(Arc::new(NodeRestriction::new(objects.clone()))),
                "PodSecurity" => Some(Arc::new(PodSecurity::configured(
                    objects.clone(),
                    configurations.pod_security.clone(),
                ))),
                "Priority" => Some(Arc::new(Priority::new(objects.clone()))),
                "DefaultTolerationSeconds" => Some(Arc::new(DefaultTolerationSeconds::new(
                    configurations.default_tolerations,
                ))),
                "DefaultStorageClass" => Some(Arc::new(DefaultStorageClass::new(objects.clone()))),
                "ValidatingAdmissionPolicy" => Some(Arc::new(
                    ValidatingAdmissionPolicy::new(objects.clone()).authorized(authorizer.clone()),
                )),
                "ResourceQuota" => Some(Arc::new(ResourceQuota::new(objects.clone()))),
                "MutatingAdmissionWebhook" => Some(Arc::new(MutatingWebhooks::new(
                    objects.clone(),
                    webhooks.clone(),
                ))),
                "ValidatingAdmissionWebhook" => Some(Arc::new(ValidatingWebhooks::new(
                    objects.clone(),
                    webhooks.clone(),
                ))),
                _ => None,
            }
        })
        .collect()
}

#[cfg(test)]
pub(crate) mod testing;

#[cfg(test)]
mod tests {
    use super::*;

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|n| n.to_string()).collect()
    }

    #[test]
    fn defaults_are_kubes_that_exist_here_in_kubes_order() {
        assert_eq!(
            select(&[], &[]).unwrap(),
            [
                "NamespaceLifecycle",
                "LimitRanger",
                "ServiceAccount",
                "NodeRestriction",
                "PodSecurity",
                "Priority",
                "DefaultTolerationSeconds",
                "DefaultStorageClass",
                "MutatingAdmissionWebhook",
                "ValidatingAdmissionPolicy",
                "ValidatingAdmissionWebhook",
                "ResourceQuota"
            ]
        );
        let some = select(&[], &names(&["ServiceAccount"])).unwrap();
        assert_eq!(
            some,
            [
                "NamespaceLifecycle",
                "LimitRanger",
                "NodeRestriction",
                "PodSecurity",
                "Priority",
                "DefaultTolerationSeconds",
                "DefaultStorageClass",
                "MutatingAdmissionWebhook",
                "ValidatingAdmissionPolicy",
                "ValidatingAdmissionWebhook",
                "ResourceQuota"
            ]
        );
        // Enabling a default again changes nothing, nor does the flag's order.
        let again = select(&names(&["ServiceAccount", "NamespaceLifecycle"]), &[]).unwrap();
        assert_eq!(again, select(&[], &[]).unwrap());
    }

    #[test]
    fn unknown_unimplemented_and_contradictory_names_are_refused() {
        let unknown = select(&names(&["NoSuchPlugin"]), &[]).unwrap_err();
        assert_eq!(
            unknown,
            "enable-admission-plugins plugin \"NoSuchPlugin\" is unknown"
        );
        let unknown = select(&[], &names(&["Nope"])).unwrap_err();
        assert!(unknown.starts_with("disable-admission-plugins plugin \"Nope\""));
        let missing = select(&names(&["AlwaysPullImages"]), &[]).unwrap_err();
        assert!(
            missing.contains("\"AlwaysPullImages\" is not implemented"),
            "{missing}"
        );
        // Disabling a plugin kube has and this server lacks is harmless.
        assert!(select(&[], &names(&["RuntimeClass"])).is_ok());
        let both = select(&names(&["ServiceAccount"]), &names(&["ServiceAccount"])).unwrap_err();
        assert!(both.contains("overlapped"), "{both}");
    }
}
