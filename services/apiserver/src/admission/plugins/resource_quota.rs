//! `ResourceQuota`: a create that would take a namespace past one of its
//! ResourceQuotas' `spec.hard` is refused with kube's 403 (`exceeded
//! quota: NAME, requested: ..., used: ..., limited: ...`); one that fits
//! is charged to every quota tracking what it uses, by a compare-and-
//! swap of the quota's `status.used`, as kube's plugin does. Two API
//! servers admitting at once both read `used`, and only one swap wins;
//! the other reads again and decides again, so together they never go
//! past `hard`. A charge whose object then fails to be stored stays
//! until the quota controller recounts. A quota with scopes counts only
//! the pods in them (`quota_scopes`).

use std::sync::Arc;

use serde_json::Value;

use crate::admission::objects::{Freshness, Objects, RESOURCE_QUOTAS};
use crate::admission::quota_scopes;
use crate::admission::usage::{self, Usage};
use crate::admission::{AdmissionError, Admit, Attributes, Operation, Plugin};

const NAME: &str = "ResourceQuota";
/// Swaps lost to other writers before giving up (kube retries too).
const ATTEMPTS: usize = 50;

pub struct ResourceQuota {
    objects: Arc<dyn Objects>,
}

impl ResourceQuota {
    pub fn new(objects: Arc<dyn Objects>) -> ResourceQuota {
        ResourceQuota { objects }
    }

    /// The namespace's quotas that count `object`.
    async fn quotas(
        &self,
        a: &Attributes<'_>,
        object: &Value,
        freshness: Freshness,
    ) -> Result<Vec<Value>, AdmissionError> {
        let all = self
            .objects
            .list(RESOURCE_QUOTAS, a.namespace, freshness)
            .await?;
        let counting = |q: &Value| quota_scopes::counts(q, a.group, a.resource, object);
        Ok(all.into_iter().filter(counting).collect())
    }

    /// Checks `object` against every quota of the namespace and charges
    /// it; a lost swap starts over from the store's current quotas.
    async fn charge(&self, a: &Attributes<'_>, object: &Value) -> Result<(), AdmissionError> {
        let mut freshness = Freshness::Cached;
        for _ in 0..ATTEMPTS {
            let quotas = self.quotas(a, object, freshness).await?;
            let mut all_swapped = true;
            for quota in &quotas {
                let Some(charged) = admit(a, object, quota)? else {
                    continue;
                };
                if a.dry_run {
                    continue;
                }
                if !self.objects.swap(RESOURCE_QUOTAS, &charged).await? {
                    all_swapped = false;
                    break;
                }
            }
            if all_swapped {
                return Ok(());
            }
            freshness = Freshness::Current;
        }
        Err(AdmissionError::Unavailable(format!(
            "quota usage of namespace {} changed too often to be updated",
            a.namespace
        )))
    }
}

/// `quota` with `object`'s use added to `status.used`, when the quota
/// tracks any of it; a refusal when that would pass `hard`.
fn admit(
    a: &Attributes<'_>,
    object: &Value,
    quota: &Value,
) -> Result<Option<Value>, AdmissionError> {
    let quota_name = quota["metadata"]["name"].as_str().unwrap_or_default();
    let hard = usage::parse(&quota["spec"]["hard"]);
    let tracked: Vec<String> = hard.keys().cloned().collect();
    if a.group.is_empty() && a.resource == "pods" && !usage::terminal(object) {
        require_specified(quota_name, object, &tracked)?;
    }
    let requested = usage::of_object(a.group, a.resource, object, &tracked);
    if requested.is_empty() {
        return Ok(None);
    }
    let used = usage::parse(&quota["status"]["used"]);
    require_known(quota_name, &requested, &used)?;
    let mut new_used = used.clone();
    for (name, amount) in &requested {
        *new_used.entry(name.clone()).or_default() += amount;
    }
    refuse_excess(quota_name, &requested, &used, &new_used, &hard)?;
    let mut charged = quota.clone();
    let mut stored_used = quota["status"]["used"].clone();
    for name in requested.keys() {
        stored_used[name] = usage::format(new_used[name]).into();
    }
    charged["status"]["used"] = stored_used;
    Ok(Some(charged))
}

/// A pod must state every compute resource the quota limits.
fn require_specified(
    quota_name: &str,
    pod: &Value,
    tracked: &[String],
) -> Result<(), AdmissionError> {
    let missing = usage::unspecified(&pod["spec"], tracked);
    if missing.is_empty() {
        return Ok(());
    }
    Err(AdmissionError::denied(
        NAME,
        format!(
            "failed quota: {quota_name}: must specify {}",
            missing.join(",")
        ),
    ))
}

/// The quota's controller must have counted what is requested.
fn require_known(quota_name: &str, requested: &Usage, used: &Usage) -> Result<(), AdmissionError> {
    let unknown: Vec<&str> = requested
        .keys()
        .filter(|name| !used.contains_key(*name))
        .map(String::as_str)
        .collect();
    if unknown.is_empty() {
        return Ok(());
    }
    Err(AdmissionError::denied(
        NAME,
        format!(
            "status unknown for quota: {quota_name}, resources: {}",
            unknown.join(",")
        ),
    ))
}

/// kube's refusal, naming only the resources `new_used` would take past
/// `hard`.
fn refuse_excess(
    quota_name: &str,
    requested: &Usage,
    used: &Usage,
    new_used: &Usage,
    hard: &Usage,
) -> Result<(), AdmissionError> {
    let exceeded: Vec<&String> = requested
        .keys()
        .filter(|name| new_used[*name] > hard[*name])
        .collect();
    if exceeded.is_empty() {
        return Ok(());
    }
    let only = |u: &Usage| -> Usage {
        exceeded
            .iter()
            .map(|n| ((*n).clone(), u.get(*n).copied().unwrap_or(0.0)))
            .collect()
    };
    Err(AdmissionError::denied(
        NAME,
        format!(
            "exceeded quota: {quota_name}, requested: {}, used: {}, limited: {}",
            usage::pretty(&only(requested)),
            usage::pretty(&only(used)),
            usage::pretty(&only(hard))
        ),
    ))
}

impl Plugin for ResourceQuota {
    fn name(&self) -> &str {
        NAME
    }

    fn validate<'a>(&'a self, a: &'a Attributes<'a>, object: Option<&'a Value>) -> Admit<'a> {
        Box::pin(async move {
            // Only creates add usage here; updates and deletes are the
            // controller's to recount.
            let Some(object) = object else {
                return Ok(());
            };
            if a.operation != Operation::Create
                || a.namespace.is_empty()
                || !a.subresource.is_empty()
            {
                return Ok(());
            }
            self.charge(a, object).await
        })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::testing::{attributes, Memory};
    use super::*;
    use crate::auth::UserInfo;

    fn quota(hard: Value, used: Value) -> Value {
        json!({"metadata": {"name": "q", "namespace": "ns"}, "spec": {"hard": hard},
               "status": {"hard": hard, "used": used}})
    }

    fn pod(cpu: &str) -> Value {
        json!({"metadata": {"name": "p", "namespace": "ns"}, "spec": {"containers": [
            {"name": "a", "resources": {"requests": {"cpu": cpu}}}]}})
    }

    #[tokio::test]
    async fn creates_are_charged_until_the_quota_is_full() {
        let objects = Arc::new(Memory::default());
        objects.put(
            RESOURCE_QUOTAS,
            quota(json!({"pods": "2"}), json!({"pods": "0"})),
        );
        let plugin = ResourceQuota::new(objects.clone());
        let user = UserInfo::anonymous();
        let create = attributes(Operation::Create, "pods", "ns", "p", &user);
        for _ in 0..2 {
            plugin.validate(&create, Some(&pod("1"))).await.unwrap();
        }
        let stored = objects.read(RESOURCE_QUOTAS, "ns", "q").unwrap();
        assert_eq!(stored["status"]["used"]["pods"], "2");
        let refused = plugin.validate(&create, Some(&pod("1"))).await.unwrap_err();
        assert_eq!(
            refused,
            AdmissionError::denied(
                NAME,
                "exceeded quota: q, requested: pods=1, used: pods=2, limited: pods=2"
            )
        );
        // Other kinds are not counted by a pods quota.
        let map = attributes(Operation::Create, "configmaps", "ns", "c", &user);
        plugin.validate(&map, Some(&json!({}))).await.unwrap();
    }

    #[tokio::test]
    async fn a_scoped_quota_charges_only_the_pods_in_its_scope() {
        let objects = Arc::new(Memory::default());
        let mut scoped = quota(json!({"pods": "1"}), json!({"pods": "0"}));
        scoped["spec"]["scopes"] = json!(["BestEffort"]);
        objects.put(RESOURCE_QUOTAS, scoped);
        let plugin = ResourceQuota::new(objects.clone());
        let user = UserInfo::anonymous();
        let create = attributes(Operation::Create, "pods", "ns", "p", &user);
        // Pods with requests are not best effort: not counted, never refused.
        for _ in 0..3 {
            plugin.validate(&create, Some(&pod("1"))).await.unwrap();
        }
        let best_effort = json!({"spec": {"containers": [{"name": "a"}]}});
        plugin.validate(&create, Some(&best_effort)).await.unwrap();
        let refused = plugin
            .validate(&create, Some(&best_effort))
            .await
            .unwrap_err();
        assert_eq!(
            refused.to_string(),
            "ResourceQuota: exceeded quota: q, requested: pods=1, used: pods=1, limited: pods=1"
        );
    }

    #[tokio::test]
    async fn compute_quotas_need_requests_and_limit_their_sum() {
        let objects = Arc::new(Memory::default());
        let hard = json!({"requests.cpu": "1"});
        objects.put(
            RESOURCE_QUOTAS,
            quota(hard, json!({"requests.cpu": "500m"})),
        );
        let plugin = ResourceQuota::new(objects.clone());
        let user = UserInfo::anonymous();
        let create = attributes(Operation::Create, "pods", "ns", "p", &user);
        plugin.validate(&create, Some(&pod("250m"))).await.unwrap();
        let refused = plugin.validate(&create, Some(&pod("500m"))).await;
        assert_eq!(
            refused.unwrap_err().to_string(),
            "ResourceQuota: exceeded quota: q, requested: requests.cpu=500m, \
             used: requests.cpu=750m, limited: requests.cpu=1"
        );
        let bare = json!({"spec": {"containers": [{"name": "a"}]}});
        let refused = plugin.validate(&create, Some(&bare)).await.unwrap_err();
        assert_eq!(
            refused.to_string(),
            "ResourceQuota: failed quota: q: must specify requests.cpu"
        );
    }

    #[tokio::test]
    async fn a_quota_not_counted_yet_refuses_and_dry_runs_charge_nothing() {
        let objects = Arc::new(Memory::default());
        objects.put(RESOURCE_QUOTAS, quota(json!({"pods": "1"}), json!({})));
        let plugin = ResourceQuota::new(objects.clone());
        let user = UserInfo::anonymous();
        let mut create = attributes(Operation::Create, "pods", "ns", "p", &user);
        let refused = plugin.validate(&create, Some(&pod("1"))).await.unwrap_err();
        assert_eq!(
            refused.to_string(),
            "ResourceQuota: status unknown for quota: q, resources: pods"
        );
        objects.put(
            RESOURCE_QUOTAS,
            quota(json!({"pods": "1"}), json!({"pods": "0"})),
        );
        create.dry_run = true;
        plugin.validate(&create, Some(&pod("1"))).await.unwrap();
        let stored = objects.read(RESOURCE_QUOTAS, "ns", "q").unwrap();
        assert_eq!(stored["status"]["used"]["pods"], "0");
    }
}
