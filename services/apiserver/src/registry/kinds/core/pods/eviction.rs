//! `pods/<name>/eviction`: a delete that honours PodDisruptionBudgets, as
//! `kubectl drain` uses it. A pod that no budget covers, or that runs no
//! longer (finished, pending, already deleting), is deleted at once; a
//! covered one only while its budget allows a disruption, which the
//! eviction spends (`disruptionsAllowed` down by one, the pod recorded in
//! `disruptedPods` for the disruption controller) before the pod gets the
//! `DisruptionTarget` condition and is deleted with the request's
//! deleteOptions. A budget with none to spare is a 429 the client retries.
//! The Eviction is admitted first, as a CREATE of `pods/eviction`
//! (webhooks, policies, and NodeRestriction: a node evicts only its own
//! pods), before any budget is spent or the pod marked.

use futures::future::BoxFuture;
use serde_json::{json, Map, Value};

use crate::admission::objects::{Freshness, Resource};
use crate::error::{ApiError, Cause};
use crate::object::meta;
use crate::object::selector::LabelSelector;
use crate::object::time::now_rfc3339;
use crate::registry::options::DeleteOptions;
use crate::registry::storage_errors::{self, Reading};
use crate::registry::subresource::{Answer, Call, Handler, ResponseKind, Serve, Subresource};
use crate::storage::StorageError;

/// The `eviction` entry of the pods' table.
pub const EVICTION: Subresource = Subresource {
    name: "eviction",
    response: Some(ResponseKind {
        group: "policy",
        version: "v1",
        kind: "Eviction",
    }),
    verbs: &["create"],
    serve: Serve::Create(&Eviction),
    collection: None,
};

const BUDGETS: Resource = Resource {
    group: "policy",
    resource: "poddisruptionbudgets",
};

/// kube's answer when a budget has no disruption to spare.
const VIOLATES: &str = "Cannot evict pod as it would violate the pod's disruption budget.";
/// kube's cap on `disruptedPods`: past it the controller is behind.
const MAX_DISRUPTED_PODS: usize = 2000;
/// How often a budget's compare-and-swap is retried against writers.
const ATTEMPTS: usize = 5;

pub struct Eviction;

impl Handler for Eviction {
    fn serve<'a>(&'a self, call: Call<'a>) -> BoxFuture<'a, Result<Answer, ApiError>> {
        Box::pin(evict(call))
    }
}

/// The request's Eviction, checked as kube-apiserver checks it.
fn checked_eviction(body: &Value, pod_name: &str) -> Result<(), ApiError> {
    let kind_ok = body["kind"].as_str().is_none_or(|k| k == "Eviction");
    let version_ok = body["apiVersion"]
        .as_str()
        .is_none_or(|v| v == "policy/v1" || v == "policy/v1beta1");
    if !body.is_object() || !kind_ok || !version_ok {
        return Err(ApiError::BadRequest(
            "the body of the request is not a policy/v1 Eviction".into(),
        ));
    }
    let named = meta::name(body);
    if !named.is_empty() && named != pod_name {
        return Err(ApiError::BadRequest(format!(
            "name in URL does not match name in Eviction object: {pod_name} != {named}"
        )));
    }
    Ok(())
}

/// The Eviction's deleteOptions, for the request's user.
fn delete_options(call: &Call<'_>, body: &Value) -> Result<DeleteOptions, ApiError> {
    let given = &body["deleteOptions"];
    let dry_run = match &given["dryRun"] {
        Value::Null => false,
        Value::Array(v) if v.iter().all(|d| d == "All") => !v.is_empty(),
        _ => {
            let cause = Cause::invalid("deleteOptions.dryRun", "", "supported values: \"All\"");
            return Err(ApiError::invalid(
                call.target.clone(),
                "Eviction",
                vec![cause],
            ));
        }
    };
    let text = |v: &Value| v.as_str().map(str::to_string);
    Ok(DeleteOptions {
        dry_run: dry_run || call.options.dry_run,
        grace_period: given["gracePeriodSeconds"].as_i64(),
        propagation: text(&given["propagationPolicy"]),
        uid: text(&given["preconditions"]["uid"]),
        resource_version: text(&given["preconditions"]["resourceVersion"]),
        user: call.options.user.clone(),
        feedback: call.options.feedback.clone(),
    })
}

/// Whether a pod's eviction needs no budget's leave: it runs no longer,
/// has not started, or is already going.
fn ignores_budgets(pod: &Value) -> bool {
    let phase = pod["status"]["phase"].as_str().unwrap_or("");
    matches!(phase, "Succeeded" | "Failed" | "Pending")
        || !pod["metadata"]["deletionTimestamp"].is_null()
}

fn is_ready(pod: &Value) -> bool {
    let conditions = pod["status"]["conditions"].as_array();
    conditions
        .into_iter()
        .flatten()
        .any(|c| c["type"] == "Ready" && c["status"] == "True")
}

async fn evict(call: Call<'_>) -> Result<Answer, ApiError> {
    let body = call.body.clone().unwrap_or_default();
    checked_eviction(&body, call.name)?;
    let mut body = call.admissible(body, "policy/v1", "Eviction");
    call.admit_create(EVICTION.name, &mut body).await?;
    let options = delete_options(&call, &body)?;
    let pod = current_pod(&call).await?;
    if let Some(uid) = options.uid.as_deref() {
        if meta::uid(&pod) != uid {
            return Err(ApiError::Conflict(
                call.target.clone(),
                format!(
                    "Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
                    meta::uid(&pod)
                ),
            ));
        }
    }
    if !ignores_budgets(&pod) {
        spend_budget(&call, &pod, options.dry_run).await?;
    }
    if !options.dry_run && pod["metadata"]["deletionTimestamp"].is_null() {
        mark_disruption_target(&call).await?;
    }
    call.deleter
        .delete(call.namespace, call.name, options)
        .await?;
    let body = json!({"kind": "Status", "apiVersion": "v1", "metadata": {},
                      "status": "Success", "code": 201});
    Ok(Answer { code: 201, body })
}

async fn current_pod(call: &Call<'_>) -> Result<Value, ApiError> {
    let storage_error = |e| storage_errors::api_error(e, call.target.clone(), Reading::Plain);
    let found = call.store.get(&call.key).await.map_err(storage_error)?;
    Ok(found
        .ok_or_else(|| ApiError::NotFound(call.target.clone()))?
        .object)
}

/// The budgets of the pod's namespace whose selectors take it.
async fn budgets_of(call: &Call<'_>, pod: &Value) -> Result<Vec<Value>, ApiError> {
    let all = call
        .services
        .objects
        .list(BUDGETS, call.namespace, Freshness::Current)
        .await
        .map_err(|e| ApiError::Internal(format!("reading PodDisruptionBudgets: {e}")))?;
    let labels = pod["metadata"]["labels"].as_object();
    Ok(all
        .into_iter()
        .filter(|pdb| {
            LabelSelector::from_object(&pdb["spec"]["selector"]).is_ok_and(|s| s.matches(labels))
        })
        .collect())
}

/// Takes one disruption from the pod's budget, if it has one to give.
async fn spend_budget(call: &Call<'_>, pod: &Value, dry_run: bool) -> Result<(), ApiError> {
    for _ in 0..ATTEMPTS {
        let budgets = budgets_of(call, pod).await?;
        let pdb = match budgets.as_slice() {
            [] => return Ok(()),
            [one] => one,
            _ => {
                return Err(ApiError::Internal(
                    "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.".into(),
                ))
            }
        };
        let Some(spent) = spent(pdb, pod, call.name)? else {
            return Ok(());
        };
        if dry_run {
            return Ok(());
        }
        let written = call.services.objects.swap(BUDGETS, &spent);
        if written
            .await
            .map_err(|e| ApiError::Internal(e.to_string()))?
        {
            return Ok(());
        }
    }
    Err(too_many_requests(
        "the PodDisruptionBudget kept changing; try again".into(),
    ))
}

/// The budget with one disruption spent on `pod_name`; None when the
/// eviction needs none (an unready pod the policy lets go).
fn spent(pdb: &Value, pod: &Value, pod_name: &str) -> Result<Option<Value>, ApiError> {
    let status = &pdb["status"];
    let generation = pdb["metadata"]["generation"].as_i64().unwrap_or(0);
    if status["observedGeneration"].as_i64().unwrap_or(0) < generation {
        return Err(too_many_requests(format!(
            "{VIOLATES} The disruption budget {} is still being processed by the server.",
            meta::name(pdb)
        )));
    }
    if !is_ready(pod) && unready_may_go(pdb) {
        return Ok(None);
    }
    let allowed = status["disruptionsAllowed"].as_i64().unwrap_or(0);
    let disrupted = status["disruptedPods"].as_object().map_or(0, Map::len);
    if allowed < 0 {
        return Err(forbidden(pdb, "pdb disruptions allowed is negative"));
    }
    if disrupted > MAX_DISRUPTED_PODS {
        return Err(forbidden(
            pdb,
            "DisruptedPods map too big - too many evictions not confirmed by PDB controller",
        ));
    }
    if allowed == 0 {
        return Err(too_many_requests(VIOLATES.into()));
    }
    let mut spent = pdb.clone();
    spent["status"]["disruptionsAllowed"] = (allowed - 1).into();
    if !spent["status"]["disruptedPods"].is_object() {
        spent["status"]["disruptedPods"] = json!({});
    }
    spent["status"]["disruptedPods"][pod_name] = now_rfc3339().into();
    Ok(Some(spent))
}

/// kube's unhealthyPodEvictionPolicy: an unready pod goes without a
/// disruption always (`AlwaysAllow`), or while the budget is met
/// (`IfHealthyBudget`, the default).
fn unready_may_go(pdb: &Value) -> bool {
    let status = &pdb["status"];
    match pdb["spec"]["unhealthyPodEvictionPolicy"].as_str() {
        Some("AlwaysAllow") => true,
        _ => {
            let healthy = status["currentHealthy"].as_i64().unwrap_or(0);
            let desired = status["desiredHealthy"].as_i64().unwrap_or(0);
            desired > 0 && healthy >= desired
        }
    }
}

fn too_many_requests(message: String) -> ApiError {
    ApiError::Status {
        code: 429,
        reason: "TooManyRequests".into(),
        message,
    }
}

fn forbidden(pdb: &Value, why: &str) -> ApiError {
    ApiError::Status {
        code: 403,
        reason: "Forbidden".into(),
        message: format!(
            "poddisruptionbudgets.policy \"{}\" is forbidden: {why}",
            meta::name(pdb)
        ),
    }
}

/// The pod's `DisruptionTarget` condition, as kube sets it before the
/// delete, so the pod's owner and its readers see why it went.
async fn mark_disruption_target(call: &Call<'_>) -> Result<(), ApiError> {
    let storage_error = |e| storage_errors::api_error(e, call.target.clone(), Reading::Plain);
    for _ in 0..ATTEMPTS {
        let found = call.store.get(&call.key).await.map_err(storage_error)?;
        let Some(current) = found else {
            return Ok(());
        };
        let mut pod = current.object.clone();
        let condition = json!({"type": "DisruptionTarget", "status": "True",
            "reason": "EvictionByEvictionAPI", "message": "Eviction API: evicting",
            "lastProbeTime": null, "lastTransitionTime": now_rfc3339()});
        let mut conditions = pod["status"]["conditions"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        conditions.retain(|c| c["type"] != "DisruptionTarget");
        conditions.push(condition);
        pod["status"]["conditions"] = conditions.into();
        match call
            .store
            .update(&call.key, &pod, current.mod_revision)
            .await
        {
            Ok(_) => return Ok(()),
            Err(StorageError::Conflict) => continue,
            Err(e) => return Err(storage_error(e)),
        }
    }
    Err(ApiError::Conflict(
        call.target.clone(),
        "the pod kept changing while it was marked for eviction".into(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn budget(allowed: i64, generation: i64, observed: i64) -> Value {
        json!({"metadata": {"name": "web", "generation": generation, "resourceVersion": "7"},
               "spec": {"selector": {"matchLabels": {"app": "web"}}},
               "status": {"disruptionsAllowed": allowed, "observedGeneration": observed,
                          "currentHealthy": 3, "desiredHealthy": 3}})
    }

    fn ready_pod() -> Value {
        json!({"metadata": {"name": "p"}, "status": {"phase": "Running",
               "conditions": [{"type": "Ready", "status": "True"}]}})
    }

    #[test]
    fn an_eviction_names_its_pod() {
        let ok = json!({"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "p"}});
        assert!(checked_eviction(&ok, "p").is_ok());
        assert!(matches!(
            checked_eviction(&ok, "q"),
            Err(ApiError::BadRequest(_))
        ));
        let wrong = json!({"apiVersion": "v1", "kind": "Binding"});
        assert!(matches!(
            checked_eviction(&wrong, "p"),
            Err(ApiError::BadRequest(_))
        ));
    }

    #[test]
    fn a_budget_with_room_gives_one_disruption_and_records_the_pod() {
        let spent = spent(&budget(2, 1, 1), &ready_pod(), "p").unwrap().unwrap();
        assert_eq!(spent["status"]["disruptionsAllowed"], 1);
        assert!(spent["status"]["disruptedPods"]["p"].is_string());
    }

    #[test]
    fn a_spent_or_unprocessed_budget_is_a_429() {
        for pdb in [budget(0, 1, 1), budget(1, 2, 1)] {
            match spent(&pdb, &ready_pod(), "p") {
                Err(ApiError::Status { code, message, .. }) => {
                    assert_eq!(code, 429);
                    assert!(message.starts_with(VIOLATES), "{message}");
                }
                other => panic!("{other:?}"),
            }
        }
    }

    #[test]
    fn unready_pods_go_while_the_budget_is_met() {
        let unready = json!({"status": {"phase": "Running"}});
        assert!(spent(&budget(0, 1, 1), &unready, "p").unwrap().is_none());
        let mut short = budget(0, 1, 1);
        short["status"]["currentHealthy"] = 2.into();
        assert!(spent(&short, &unready, "p").is_err());
        short["spec"]["unhealthyPodEvictionPolicy"] = "AlwaysAllow".into();
        assert!(spent(&short, &unready, "p").unwrap().is_none());
    }

    #[test]
    fn finished_pending_and_deleting_pods_need_no_budget() {
        assert!(ignores_budgets(&json!({"status": {"phase": "Succeeded"}})));
        assert!(ignores_budgets(&json!({"status": {"phase": "Pending"}})));
        let deleting =
            json!({"metadata": {"deletionTimestamp": "x"}, "status": {"phase": "Running"}});
        assert!(ignores_budgets(&deleting));
        assert!(!ignores_budgets(&ready_pod()));
    }
}
