//! kube-controller-manager's service-account and root-CA publisher
//! controllers: every live namespace has a `default` ServiceAccount and,
//! when the cluster's CA is known, the `kube-root-ca.crt` ConfigMap with
//! it; either is made again if deleted, and the ConfigMap is put right if
//! its CA differs. Pods need both (the `ServiceAccount` admission plugin
//! waits a moment for `default`), so this looks often, at the watch
//! caches only, and writes only what is missing, through the resource
//! actors (the full flow, admission included). Several API servers may
//! run it: the second create is an AlreadyExists, ignored.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};

use crate::admission::objects::{Freshness, Objects, Resource, NAMESPACES, SERVICE_ACCOUNTS};
use crate::error::ApiError;
use crate::registry::actor;
use crate::registry::lookup::CachedObjects;
use crate::registry::options::WriteOptions;
use crate::registry::Catalog;

/// How often the namespaces are looked at.
const PERIOD: Duration = Duration::from_millis(200);

const CONFIG_MAPS: Resource = Resource {
    group: "",
    resource: "configmaps",
};
pub const ROOT_CA_CONFIG_MAP: &str = "kube-root-ca.crt";
const ROOT_CA_DESCRIPTION: &str = "Contains a CA bundle that can be used to verify the \
    kube-apiserver when using internal endpoints such as the internal service IP or \
    kubernetes.default.svc. No other usage is guaranteed across distributions of Kubernetes \
    clusters.";

/// Runs until the process ends; `root_ca` is the CA's PEM, if known.
pub async fn run(catalog: Arc<Catalog>, objects: Arc<CachedObjects>, root_ca: Option<String>) {
    loop {
        if let Err(err) = pass(&catalog, &*objects as &dyn Objects, root_ca.as_deref()).await {
            tracing::warn!(%err, "service-account controller");
        }
        tokio::time::sleep(PERIOD).await;
    }
}

async fn pass(
    catalog: &Catalog,
    objects: &dyn Objects,
    root_ca: Option<&str>,
) -> Result<(), ApiError> {
    let namespaces = objects.list(NAMESPACES, "", Freshness::Cached).await;
    let namespaces = namespaces.map_err(|e| ApiError::Unavailable(e.to_string()))?;
    for namespace in namespaces.iter().filter(|ns| live(ns)) {
        let name = namespace["metadata"]["name"].as_str().unwrap_or_default();
        let account = objects.get(SERVICE_ACCOUNTS, name, "default", Freshness::Cached);
        if account.await.ok().flatten().is_none() {
            let body = json!({"apiVersion": "v1", "kind": "ServiceAccount",
                "metadata": {"name": "default"}});
            create(catalog, "serviceaccounts", name, body).await;
        }
        if let Some(ca) = root_ca {
            publish_ca(catalog, objects, name, ca).await;
        }
    }
    Ok(())
}

fn live(namespace: &Value) -> bool {
    namespace["metadata"]["deletionTimestamp"].is_null()
        && namespace["status"]["phase"] != "Terminating"
}

fn root_ca_config_map(ca: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": ROOT_CA_CONFIG_MAP,
            "annotations": {"kubernetes.io/description": ROOT_CA_DESCRIPTION}},
        "data": {"ca.crt": ca}})
}

async fn publish_ca(catalog: &Catalog, objects: &dyn Objects, namespace: &str, ca: &str) {
    let found = objects.get(
        CONFIG_MAPS,
        namespace,
        ROOT_CA_CONFIG_MAP,
        Freshness::Cached,
    );
    match found.await.ok().flatten() {
        None => create(catalog, "configmaps", namespace, root_ca_config_map(ca)).await,
        Some(current) if current["data"]["ca.crt"] != ca => {
            let mut body = root_ca_config_map(ca);
            body["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"].clone();
            let entry = catalog
                .find("", "v1", "configmaps")
                .expect("configmaps are served");
            let update = actor::Update {
                namespace: namespace.into(),
                name: ROOT_CA_CONFIG_MAP.into(),
                part: crate::registry::flow::Part::Main,
                body,
                options: WriteOptions::by(super::MANAGER),
            };
            report(
                namespace,
                entry.actor.send(update).await.map(|r| r.map(|_| ())),
            );
        }
        Some(_) => {}
    }
}

async fn create(catalog: &Catalog, resource: &str, namespace: &str, body: Value) {
    let entry = catalog
        .find("", "v1", resource)
        .expect("core types are served");
    let create = actor::Create {
        namespace: namespace.into(),
        body,
        options: WriteOptions::by(super::MANAGER),
    };
    report(
        namespace,
        entry.actor.send(create).await.map(|r| r.map(|_| ())),
    );
}

/// AlreadyExists, Conflict: another API server's controller was first;
/// Forbidden: the namespace started going meanwhile.
fn report(namespace: &str, result: Result<Result<(), ApiError>, actix::MailboxError>) {
    match result {
        Ok(Ok(())) => tracing::debug!(%namespace, "service-account controller wrote"),
        Ok(Err(
            ApiError::AlreadyExists(_)
            | ApiError::Conflict(..)
            | ApiError::Forbidden(_)
            | ApiError::NotFound(_),
        )) => {}
        Ok(Err(err)) => tracing::warn!(%namespace, %err, "service-account controller"),
        Err(err) => tracing::warn!(%namespace, %err, "resource actor unavailable"),
    }
}
