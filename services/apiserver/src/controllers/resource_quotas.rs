//! kube-controller-manager's resource-quota controller: every quota's
//! `status.hard` follows its `spec.hard`, and `status.used` is recounted
//! from the objects of its namespace (linearizable lists), so deletes
//! give usage back and objects made before the quota are counted. A
//! recount lower than `used` may be an admitted create whose object is
//! not stored yet (admission charges first): it is written only when the
//! quota has not changed since the previous pass. Every write is a
//! compare-and-swap on the quota's resourceVersion, so a charge made
//! meanwhile by admission is never overwritten.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use crate::admission::objects::{Freshness, LookupError, Objects, RESOURCE_QUOTAS};
use crate::admission::quota_scopes;
use crate::admission::usage::{self, Usage};
use crate::registry::lookup::CachedObjects;

const PERIOD: Duration = Duration::from_secs(1);

/// Runs until the process ends.
pub async fn run(objects: Arc<CachedObjects>) {
    // Each quota's resourceVersion at the previous pass, by uid.
    let mut seen: HashMap<String, String> = HashMap::new();
    loop {
        match pass(&objects, &seen).await {
            Ok(now) => seen = now,
            Err(err) => tracing::warn!(%err, "resource-quota controller"),
        }
        tokio::time::sleep(PERIOD).await;
    }
}

async fn pass(
    objects: &CachedObjects,
    seen: &HashMap<String, String>,
) -> Result<HashMap<String, String>, LookupError> {
    let quotas = objects
        .list(RESOURCE_QUOTAS, "", Freshness::Current)
        .await?;
    let mut now = HashMap::new();
    for quota in quotas {
        let uid = quota["metadata"]["uid"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let rv = quota["metadata"]["resourceVersion"]
            .as_str()
            .unwrap_or_default();
        let stable = seen.get(&uid).is_some_and(|before| before == rv);
        now.insert(uid, rv.to_string());
        let Some(updated) = recount(objects, &quota, stable).await? else {
            continue;
        };
        if !objects.swap(RESOURCE_QUOTAS, &updated).await? {
            tracing::debug!("quota changed while recounted; next pass");
        }
    }
    Ok(now)
}

/// The quota with its status made current, when it needs writing.
async fn recount(
    objects: &CachedObjects,
    quota: &Value,
    stable: bool,
) -> Result<Option<Value>, LookupError> {
    let namespace = quota["metadata"]["namespace"].as_str().unwrap_or_default();
    let hard = &quota["spec"]["hard"];
    let tracked: Vec<String> = usage::parse(hard).keys().cloned().collect();
    let counted = count(objects, quota, namespace, &tracked).await?;
    let used = usage::parse(&quota["status"]["used"]);
    let fresh = quota["status"]["hard"] != *hard || tracked.iter().any(|n| !used.contains_key(n));
    let higher = counted
        .iter()
        .any(|(n, v)| used.get(n).is_none_or(|u| v > u));
    let lower = counted
        .iter()
        .any(|(n, v)| used.get(n).is_some_and(|u| v < u));
    if !(fresh || higher || (lower && stable)) {
        return Ok(None);
    }
    let mut updated = quota.clone();
    updated["status"]["hard"] = hard.clone();
    updated["status"]["used"] = usage::to_json(&counted);
    Ok(Some(updated))
}

/// What the namespace's objects that `quota` counts (by its scopes) use
/// of `tracked` (zero for every name).
async fn count(
    objects: &CachedObjects,
    quota: &Value,
    namespace: &str,
    tracked: &[String],
) -> Result<Usage, LookupError> {
    let mut total: Usage = tracked.iter().map(|n| (n.clone(), 0.0)).collect();
    let mut types: Vec<(String, String)> = Vec::new();
    for name in tracked {
        let counted_type = match name.strip_prefix("count/") {
            Some(rest) => match rest.split_once('.') {
                Some((resource, group)) => (group.to_string(), resource.to_string()),
                None => (String::new(), rest.to_string()),
            },
            // Legacy counts and compute resources are about core types.
            None if usage::count_names("", name).len() > 1 => (String::new(), name.clone()),
            None => (String::new(), "pods".to_string()),
        };
        if !types.contains(&counted_type) {
            types.push(counted_type);
        }
    }
    for (group, resource) in types {
        let list = objects.list_of(&group, &resource, namespace, Freshness::Current);
        for object in list.await? {
            if !quota_scopes::counts(quota, &group, &resource, &object) {
                continue;
            }
            for (name, amount) in usage::of_object(&group, &resource, &object, tracked) {
                *total.entry(name).or_default() += amount;
            }
        }
    }
    Ok(total)
}
