//! Who may act as the simulated nodes. The process reaches the API with
//! one identity of its own (kube's API servers know `system:capstan-nodes`)
//! and writes as each node, `system:node:<name>` in `system:nodes`, by
//! impersonation, so the Node authorizer and NodeRestriction hold every
//! write to that node's objects. RBAC matches names exactly, so the right
//! to impersonate is granted for the node users by name, by someone who
//! may grant it (an admin), before the nodes start: `capstan` does it for
//! its embedded nodes, `capstan-nodes --grant-impersonation-to USER` for a
//! separate process.

use std::time::Duration;

use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, PolicyRule, RoleRef, Subject};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Patch, PatchParams};
use kube::Api;

use crate::error::{api_code, Error};
use crate::runtime::fleet::node_user;

/// The user a simulated-nodes process authenticates as.
pub const SIMULATOR_USER: &str = "system:capstan-nodes";
const RBAC_GROUP: &str = "rbac.authorization.k8s.io";
const MANAGER: &str = "capstan-nodes";

/// The name of the ClusterRole (and binding) for nodes named from `prefix`:
/// one per prefix, so processes with different prefixes keep their own.
pub fn role_name(prefix: &str) -> String {
    format!("capstan-nodes:impersonate:{prefix}")
}

/// A ClusterRole allowing impersonation of exactly the users of `nodes`.
pub fn role(name: &str, nodes: &[String]) -> ClusterRole {
    ClusterRole {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..ObjectMeta::default()
        },
        rules: Some(vec![PolicyRule {
            api_groups: Some(vec![String::new()]),
            resources: Some(vec!["users".into()]),
            resource_names: Some(nodes.iter().map(|n| node_user(n)).collect()),
            verbs: vec!["impersonate".into()],
            ..PolicyRule::default()
        }]),
        ..ClusterRole::default()
    }
}

/// Its binding to `user`.
pub fn binding(name: &str, user: &str) -> ClusterRoleBinding {
    ClusterRoleBinding {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..ObjectMeta::default()
        },
        role_ref: RoleRef {
            api_group: RBAC_GROUP.into(),
            kind: "ClusterRole".into(),
            name: name.into(),
        },
        subjects: Some(vec![Subject {
            api_group: Some(RBAC_GROUP.into()),
            kind: "User".into(),
            name: user.into(),
            namespace: None,
        }]),
    }
}

/// Lets `user` impersonate the users of `nodes` (applied server-side with
/// `client`'s rights, which must include granting them), under `role_name`.
pub async fn grant(
    client: &kube::Client,
    role_name: &str,
    user: &str,
    nodes: &[String],
) -> Result<(), Error> {
    let params = PatchParams::apply(MANAGER).force();
    Api::<ClusterRole>::all(client.clone())
        .patch(role_name, &params, &Patch::Apply(role(role_name, nodes)))
        .await
        .map_err(Error::api(format!("apply ClusterRole {role_name}")))?;
    Api::<ClusterRoleBinding>::all(client.clone())
        .patch(role_name, &params, &Patch::Apply(binding(role_name, user)))
        .await
        .map_err(Error::api(format!("apply ClusterRoleBinding {role_name}")))?;
    Ok(())
}

/// [`grant`], retried while the API server starts (no answer, or a 5xx
/// or 429), for at most `within`; a refusal (403 when the kubeconfig may
/// not grant it) ends it at once.
pub async fn grant_when_ready(
    client: &kube::Client,
    role_name: &str,
    user: &str,
    nodes: &[String],
    within: Duration,
) -> Result<(), Error> {
    let what = "grant the nodes' impersonation";
    let attempts = async {
        let mut delay = Duration::from_millis(200);
        loop {
            match grant(client, role_name, user, nodes).await {
                Err(Error::Api { source, .. }) if refused(&source) => {
                    return Err(Error::api(what)(*source))
                }
                Err(error) => tracing::info!(%error, retry_in = ?delay, "could not {what} yet"),
                done => return done,
            }
            tokio::time::sleep(delay).await;
            delay = (delay * 2).min(Duration::from_secs(5));
        }
    };
    tokio::time::timeout(within, attempts)
        .await
        .map_err(|_| Error::Unanswered { what, within })?
}

fn refused(error: &kube::Error) -> bool {
    api_code(error).is_some_and(|code| code < 500 && code != 429)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_nodes_named_may_be_impersonated() {
        let role = role("r", &["a".into(), "b".into()]);
        let rule = &role.rules.unwrap()[0];
        assert_eq!(rule.resources, Some(vec!["users".to_string()]));
        assert_eq!(
            rule.resource_names,
            Some(vec![
                "system:node:a".to_string(),
                "system:node:b".to_string()
            ])
        );
        assert_eq!(rule.verbs, ["impersonate"]);
        let binding = binding("r", SIMULATOR_USER);
        assert_eq!(binding.subjects.unwrap()[0].name, SIMULATOR_USER);
        assert_eq!(binding.role_ref.name, "r");
    }
}
