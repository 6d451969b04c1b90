//! The availability controller (kube-aggregator's): every APIService's
//! `Available` condition. A Local one is always available; one with a
//! service is available once its Service resolves to an address and the
//! backend answers its discovery path (`/apis/<group>/<version>`) with a
//! 200, which is then the resource list discovery merges in. It follows
//! the APIServices' watch cache and probes again every few seconds, so
//! a backend that goes away is marked False and leaves discovery.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use serde_json::{json, Value};

use super::headers::{self, Identity};
use super::proxy::Outgoing;
use super::registration::Registration;
use super::resolve::resolve;
use super::tls::Trust;
use super::Aggregator;
use crate::cache::EventType;
use crate::error::ApiError;
use crate::object::{meta, time};
use crate::registry::catalog::Entry;
use crate::registry::flow::Part;
use crate::registry::kinds::apiregistration::{GROUP, RESOURCE};
use crate::registry::options::{ListOptions, WriteOptions};
use crate::registry::{actor, requests, Catalog};

const MANAGER: &str = "kube-aggregator";
/// How often backends are probed when nothing changes.
const RESYNC: Duration = Duration::from_secs(3);
/// A probe that takes longer fails (kube's is 5s).
const PROBE_TIMEOUT: Duration = Duration::from_secs(5);
/// The largest discovery document read from a backend.
const MAX_DOCUMENT: usize = 3 * 1024 * 1024;
/// Who the probes are from, as kube's controller says.
const PROBE_USER: &str = "system:kube-aggregator";

/// One probe's verdict: the condition's status, reason and message, and
/// the backend's resource list when it passed.
#[derive(Debug, PartialEq)]
pub struct Verdict {
    pub available: bool,
    pub reason: &'static str,
    pub message: String,
    pub document: Option<Value>,
}

/// Runs the controller until the process ends.
/// `fixed` are the group/versions served without a catalog entry (the
/// reviews), for the Local APIServices (`autoregister.rs`).
pub async fn run(
    catalog: Arc<Catalog>,
    aggregator: Arc<Aggregator>,
    fixed: Vec<(&'static str, &'static str)>,
) {
    loop {
        let (revision, written) = pass(&catalog, &aggregator, &fixed).await.unwrap_or((0, 0));
        wait_for_change(&catalog, revision, written).await;
    }
}

fn apiservices(catalog: &Catalog) -> Result<&Entry, ApiError> {
    catalog
        .find(GROUP, "v1", RESOURCE)
        .ok_or_else(|| ApiError::Internal("apiservices are not served".into()))
}

/// One look at every APIService: probe, write changed conditions, and
/// publish the routing table. The list's revision, and that of the last
/// status written.
async fn pass(
    catalog: &Catalog,
    aggregator: &Aggregator,
    fixed: &[(&'static str, &'static str)],
) -> Option<(i64, i64)> {
    let message = requests::List {
        namespace: None,
        options: ListOptions::default(),
    };
    let entry = apiservices(catalog).ok()?;
    let page = match entry.call(message).await {
        Ok(page) => page,
        other => {
            tracing::warn!(?other, "listing APIServices failed");
            return None;
        }
    };
    let objects: Vec<Value> = page.items.iter().map(|o| o.value()).collect();
    if let Err(err) = super::autoregister::sync(catalog, fixed, &objects).await {
        tracing::warn!(%err, "Local APIServices of custom resources");
    }
    let mut registrations = Vec::new();
    let mut written = 0;
    for obj in objects {
        let Some(mut registration) = Registration::of(&obj) else {
            continue;
        };
        let verdict = check(&registration, aggregator).await;
        registration.available = verdict.available;
        aggregator.set_document(&registration.name, verdict.document.clone());
        match write_condition(entry, &obj, &verdict).await {
            Ok(revision) => written = written.max(revision),
            Err(err) => {
                tracing::debug!(apiservice = %registration.name, %err, "availability status")
            }
        }
        registrations.push(registration);
    }
    aggregator.set_registrations(registrations);
    Some((page.revision, written))
}

/// Waits until the APIServices change after `revision` (other than by
/// this controller's own writes, up to `written`), or the resync.
async fn wait_for_change(catalog: &Catalog, revision: i64, written: i64) {
    let options = ListOptions {
        resource_version: Some(revision.to_string()),
        watch: true,
        ..ListOptions::default()
    };
    let watch = async {
        let Ok(entry) = apiservices(catalog) else {
            return tokio::time::sleep(RESYNC).await;
        };
        let message = actor::Watch {
            namespace: None,
            options,
        };
        let Ok(Ok(mut items)) = entry.actor.send(message).await else {
            return tokio::time::sleep(RESYNC).await;
        };
        while let Some(item) = items.recv().await {
            // Our own status writes would wake us at once for nothing.
            let ours = item.object.revision() <= written;
            if item.kind != EventType::Bookmark && !ours {
                return;
            }
        }
    };
    let _ = tokio::time::timeout(RESYNC, watch).await;
}

/// The verdict on one APIService.
pub async fn check(registration: &Registration, aggregator: &Aggregator) -> Verdict {
    let Some(service) = &registration.service else {
        return verdict(
            true,
            "Local",
            "Local APIServices are always available".into(),
        );
    };
    let backend = match resolve(service, aggregator.objects.as_ref()).await {
        Ok(backend) => backend,
        Err(err) => return verdict(false, err.reason(), err.to_string()),
    };
    let path = registration.discovery_path();
    let url = format!("https://{}{path}", backend.address);
    let failed = |why: String| {
        let message = format!("failing or missing response from {url}: {why}");
        verdict(false, "FailedDiscoveryCheck", message)
    };
    let probe = async {
        let answer = aggregator
            .proxy
            .send(&backend, &trust_of(registration), probe_request(&path))
            .await
            .map_err(|e| e.to_string())?;
        let body = read_all(answer.body).await?;
        match answer.status {
            200 => serde_json::from_slice::<Value>(&body).map_err(|e| e.to_string()),
            code => Err(format!("bad status from {url}: {code}")),
        }
    };
    match tokio::time::timeout(PROBE_TIMEOUT, probe).await {
        Err(_) => failed("context deadline exceeded".into()),
        Ok(Err(why)) => failed(why),
        Ok(Ok(document)) => Verdict {
            document: Some(document),
            ..verdict(true, "Passed", "all checks passed".into())
        },
    }
}

fn verdict(available: bool, reason: &'static str, message: String) -> Verdict {
    Verdict {
        available,
        reason,
        message,
        document: None,
    }
}

/// How a registration's backend is trusted.
pub fn trust_of(registration: &Registration) -> Trust {
    match registration.insecure_skip_verify {
        true => Trust::Insecure,
        false => Trust::Bundle(registration.ca_bundle.clone()),
    }
}

fn probe_request(path: &str) -> Outgoing {
    let groups = vec!["system:masters".to_string()];
    let extra = Default::default();
    let who = Identity {
        name: PROBE_USER,
        uid: "",
        groups: &groups,
        extra: &extra,
    };
    let accept: &[u8] = b"application/json";
    Outgoing {
        method: "GET".into(),
        path: path.to_string(),
        headers: headers::outgoing([("Accept", accept)].into_iter(), &who),
        body: bytes::Bytes::new(),
    }
}

async fn read_all(
    mut body: std::pin::Pin<
        Box<dyn futures::Stream<Item = Result<bytes::Bytes, super::proxy::ProxyError>> + Send>,
    >,
) -> Result<Vec<u8>, String> {
    let mut all = Vec::new();
    while let Some(chunk) = body.next().await {
        all.extend_from_slice(&chunk.map_err(|e| e.to_string())?);
        if all.len() > MAX_DOCUMENT {
            return Err("discovery document too large".into());
        }
    }
    Ok(all)
}

/// The object's status with `verdict` as its Available condition (the
/// transition time kept while the status stays the same), or None when
/// nothing changes.
pub fn with_condition(obj: &Value, verdict: &Verdict) -> Option<Value> {
    let status = if verdict.available { "True" } else { "False" };
    let conditions = obj["status"]["conditions"].as_array();
    let old = conditions
        .into_iter()
        .flatten()
        .find(|c| c["type"] == "Available");
    let same = |c: &&Value| {
        c["status"] == status && c["reason"] == verdict.reason && c["message"] == *verdict.message
    };
    if old.is_some_and(|c| same(&c)) {
        return None;
    }
    let since = match old {
        Some(c) if c["status"] == status => c["lastTransitionTime"].clone(),
        _ => json!(time::now_rfc3339()),
    };
    let mut next = obj.clone();
    next["status"] = json!({"conditions": [{"type": "Available", "status": status,
        "lastTransitionTime": since, "reason": verdict.reason, "message": verdict.message}]});
    Some(next)
}

/// Writes the condition if it changed; the revision written (0: none).
async fn write_condition(entry: &Entry, obj: &Value, verdict: &Verdict) -> Result<i64, ApiError> {
    let Some(next) = with_condition(obj, verdict) else {
        return Ok(0);
    };
    let message = requests::Update {
        namespace: String::new(),
        name: meta::name(obj).to_string(),
        part: Part::Status,
        body: next,
        options: WriteOptions::by(MANAGER),
    };
    let reply = entry.call(message).await?;
    let revision = meta::resource_version(&reply.body).parse().unwrap_or(0);
    Ok(revision)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_condition_changes_only_when_the_verdict_does() {
        let obj = json!({"metadata": {"name": "v1beta1.metrics.k8s.io"}});
        let down = verdict(false, "MissingEndpoints", "no endpoints".into());
        let once = with_condition(&obj, &down).unwrap();
        let condition = &once["status"]["conditions"][0];
        assert_eq!(
            (&condition["status"], &condition["reason"]),
            (&json!("False"), &json!("MissingEndpoints"))
        );
        assert_eq!(with_condition(&once, &down), None);
        let up = verdict(true, "Passed", "all checks passed".into());
        let twice = with_condition(&once, &up).unwrap();
        assert_eq!(twice["status"]["conditions"][0]["status"], "True");
    }
}
