//! `ServiceAccount`: a pod runs as a ServiceAccount (`default` unless it
//! names one), which must exist, and gets the account's token, the
//! cluster's CA and its namespace as one projected volume mounted where
//! clients look for them, as kube's plugin does. The `default` accounts
//! are made by the controller manager's service-account controller; a pod
//! created right after its namespace may come before it, so a missing
//! `default` is looked up again a few times, as kube does.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};

use crate::admission::objects::{Freshness, Objects, SERVICE_ACCOUNTS};
use crate::admission::{AdmissionError, Admit, Attributes, Operation, Plugin};

/// Where the token, `ca.crt` and `namespace` are mounted in containers.
pub const TOKEN_MOUNT_PATH: &str = "/var/run/secrets/kubernetes.io/serviceaccount";
/// The ConfigMap with the cluster's CA in every namespace.
const ROOT_CA_CONFIG_MAP: &str = "kube-root-ca.crt";
/// A pod made by a kubelet from a file: no account, no token.
const MIRROR_ANNOTATION: &str = "kubernetes.io/config.mirror";
/// kube's token lifetime for the projected volume (an hour, plus a
/// little so it is told apart from tokens asked for explicitly).
const TOKEN_EXPIRATION_SECONDS: i64 = 3607;
/// Lookups of a missing `default` account before giving up.
const DEFAULT_ATTEMPTS: u32 = 10;

const NAME: &str = "ServiceAccount";

pub struct ServiceAccount {
    objects: Arc<dyn Objects>,
}

impl ServiceAccount {
    pub fn new(objects: Arc<dyn Objects>) -> ServiceAccount {
        ServiceAccount { objects }
    }

    /// The account, from the cache, else from the store (again, for a
    /// `default` the controller may not have made yet).
    async fn account(&self, namespace: &str, name: &str) -> Result<Value, AdmissionError> {
        let cached = self
            .objects
            .get(SERVICE_ACCOUNTS, namespace, name, Freshness::Cached);
        if let Some(found) = cached.await? {
            return Ok(found);
        }
        let attempts = if name == "default" {
            DEFAULT_ATTEMPTS
        } else {
            1
        };
        for attempt in 0..attempts {
            if attempt > 0 {
                let pause = 100 + rand::random_range(0..100);
                tokio::time::sleep(Duration::from_millis(pause)).await;
            }
            let current = self
                .objects
                .get(SERVICE_ACCOUNTS, namespace, name, Freshness::Current);
            if let Some(found) = current.await? {
                return Ok(found);
            }
        }
        Err(AdmissionError::denied(
            NAME,
            format!(
                "error looking up service account {namespace}/{name}: serviceaccount \"{name}\" not found"
            ),
        ))
    }

    async fn admit_pod(&self, namespace: &str, pod: &mut Value) -> Result<(), AdmissionError> {
        if !pod["metadata"]["annotations"][MIRROR_ANNOTATION].is_null() {
            return Ok(());
        }
        let spec = &mut pod["spec"];
        let named = spec["serviceAccountName"].as_str().unwrap_or_default();
        let name = match named {
            "" => spec["serviceAccount"].as_str().unwrap_or("default"),
            named => named,
        }
        .to_string();
        spec["serviceAccountName"] = name.clone().into();
        spec["serviceAccount"] = name.clone().into();
        let account = self.account(namespace, &name).await?;
        let automount = spec["automountServiceAccountToken"]
            .as_bool()
            .or(account["automountServiceAccountToken"].as_bool())
            .unwrap_or(true);
        if automount && !mounts_path(spec) {
            mount_token(spec);
        }
        Ok(())
    }
}

impl Plugin for ServiceAccount {
    fn name(&self) -> &str {
        NAME
    }

    fn mutate<'a>(&'a self, a: &'a Attributes<'a>, pod: &'a mut Value) -> Admit<'a> {
        Box::pin(async move {
            let is_pod = a.group.is_empty() && a.resource == "pods" && a.subresource.is_empty();
            if !is_pod || a.operation != Operation::Create {
                return Ok(());
            }
            self.admit_pod(a.namespace, pod).await
        })
    }
}

fn containers(spec: &mut Value) -> impl Iterator<Item = &mut Value> {
    let spec = spec.as_object_mut().into_iter().flat_map(|s| s.iter_mut());
    spec.filter(|(field, _)| *field == "containers" || *field == "initContainers")
        .filter_map(|(_, list)| list.as_array_mut())
        .flatten()
}

/// Some container mounts something at the token's path already (its own
/// volume wins, as in kube).
fn mounts_path(spec: &mut Value) -> bool {
    containers(spec).any(|c| {
        let mounts = c["volumeMounts"].as_array().into_iter().flatten();
        mounts
            .into_iter()
            .any(|m| m["mountPath"] == TOKEN_MOUNT_PATH)
    })
}

/// The projected volume kube adds (`kube-api-access-xxxxx`) and its
/// read-only mount in every container and init container.
fn mount_token(spec: &mut Value) {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let suffix: String = (0..5)
        .map(|_| ALPHABET[rand::random_range(0..ALPHABET.len())] as char)
        .collect();
    let volume_name = format!("kube-api-access-{suffix}");
    let volume = json!({
        "name": volume_name,
        "projected": {
            "defaultMode": 420,
            "sources": [
                {"serviceAccountToken": {"expirationSeconds": TOKEN_EXPIRATION_SECONDS, "path": "token"}},
                {"configMap": {"name": ROOT_CA_CONFIG_MAP, "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                {"downwardAPI": {"items": [{"path": "namespace",
                    "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}}
            ]
        }
    });
    match spec["volumes"].as_array_mut() {
        Some(volumes) => volumes.push(volume),
        None => spec["volumes"] = json!([volume]),
    }
    let mount = json!({"name": volume_name, "readOnly": true, "mountPath": TOKEN_MOUNT_PATH});
    for container in containers(spec) {
        match container["volumeMounts"].as_array_mut() {
            Some(mounts) => mounts.push(mount.clone()),
            None => container["volumeMounts"] = json!([mount]),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{attributes, Memory};
    use super::*;
    use crate::auth::UserInfo;

    fn plugin() -> ServiceAccount {
        let objects = Memory::default();
        objects.put(
            SERVICE_ACCOUNTS,
            json!({"metadata": {"name": "default", "namespace": "ns"}}),
        );
        objects.put(
            SERVICE_ACCOUNTS,
            json!({"metadata": {"name": "quiet", "namespace": "ns"}, "automountServiceAccountToken": false}),
        );
        ServiceAccount::new(Arc::new(objects))
    }

    fn pod(spec: Value) -> Value {
        json!({"metadata": {"name": "p", "namespace": "ns"}, "spec": spec})
    }

    #[tokio::test]
    async fn a_pod_gets_the_default_account_and_its_token_volume() {
        let user = UserInfo::anonymous();
        let create = attributes(Operation::Create, "pods", "ns", "p", &user);
        let mut p = pod(json!({"containers": [{"name": "a"}], "initContainers": [{"name": "i"}]}));
        plugin().mutate(&create, &mut p).await.unwrap();
        assert_eq!(p["spec"]["serviceAccountName"], "default");
        let volume = &p["spec"]["volumes"][0];
        let name = volume["name"].as_str().unwrap();
        assert!(
            name.starts_with("kube-api-access-") && name.len() == 21,
            "{name}"
        );
        let sources = &volume["projected"]["sources"];
        assert_eq!(sources[0]["serviceAccountToken"]["path"], "token");
        assert_eq!(sources[1]["configMap"]["name"], "kube-root-ca.crt");
        assert_eq!(
            sources[2]["downwardAPI"]["items"][0]["fieldRef"]["fieldPath"],
            "metadata.namespace"
        );
        for list in ["containers", "initContainers"] {
            let mount = &p["spec"][list][0]["volumeMounts"][0];
            assert_eq!(mount["name"], name);
            assert_eq!(mount["mountPath"], TOKEN_MOUNT_PATH);
            assert_eq!(mount["readOnly"], true);
        }
    }

    #[tokio::test]
    async fn automount_off_or_an_own_mount_means_no_volume() {
        let user = UserInfo::anonymous();
        let create = attributes(Operation::Create, "pods", "ns", "p", &user);
        let plugin = plugin();
        let mut quiet = pod(json!({"serviceAccountName": "quiet", "containers": [{"name": "a"}]}));
        plugin.mutate(&create, &mut quiet).await.unwrap();
        assert!(quiet["spec"]["volumes"].is_null());
        let mut off =
            pod(json!({"automountServiceAccountToken": false, "containers": [{"name": "a"}]}));
        plugin.mutate(&create, &mut off).await.unwrap();
        assert!(off["spec"]["volumes"].is_null());
        let own = json!([{"name": "mine", "mountPath": TOKEN_MOUNT_PATH}]);
        let mut p = pod(json!({"containers": [{"name": "a", "volumeMounts": own}]}));
        plugin.mutate(&create, &mut p).await.unwrap();
        assert!(p["spec"]["volumes"].is_null());
    }

    #[tokio::test]
    async fn a_missing_account_is_refused_with_kubes_message() {
        let user = UserInfo::anonymous();
        let create = attributes(Operation::Create, "pods", "ns", "p", &user);
        let mut p = pod(json!({"serviceAccountName": "ghost", "containers": [{"name": "a"}]}));
        let refused = plugin().mutate(&create, &mut p).await.unwrap_err();
        assert_eq!(
            refused,
            AdmissionError::denied(
                NAME,
                "error looking up service account ns/ghost: serviceaccount \"ghost\" not found"
            )
        );
    }
}
