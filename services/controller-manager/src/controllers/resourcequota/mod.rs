//! The resource-quota controller: each ResourceQuota's `status.hard`
//! follows its `spec.hard`, and `status.used` is recounted from the
//! namespace's objects, so deletions give usage back and objects made
//! before the quota count. Admission charges creates as they happen; this
//! controller corrects the rest.
//!
//! Wiring: a quota's changes enqueue its namespace; so do deletions of any
//! counted type (informers started for the types quotas count, shared with
//! the other controllers) and pods that finish; and every namespace with
//! quotas is recounted every five minutes (kube's
//! `--resource-quota-sync-period`), never on a tighter loop.

mod count;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use capstan_client::informer::{InformerEvent, InformerOptions, Store};
use capstan_client::queue::WorkQueue;
use capstan_quota::usage;
use k8s_openapi::api::core::v1::{Pod, ResourceQuota};
use kube::api::{Api, ApiResource, DynamicObject, PostParams};
use parking_lot::Mutex;

use crate::context::{Context, Reconciler};
use crate::error::{Error, Result};
use crate::pods;

pub const ACCOUNT: &str = "resourcequota-controller";
const QUEUE: &str = "resourcequota_primary";
const RESYNC: Duration = Duration::from_secs(5 * 60);

pub async fn run(ctx: Arc<Context>) -> Result<()> {
    let client = ctx.client_for(ACCOUNT).await?;
    let quotas = ctx.informers.get::<ResourceQuota>();
    let pods = ctx.informers.get::<Pod>();
    let queue = WorkQueue::<String>::new(QUEUE);
    let q = queue.clone();
    quotas.add_handler(move |event: &InformerEvent<ResourceQuota>| {
        if !matches!(event, InformerEvent::Deleted(_)) {
            q.add(
                event
                    .object()
                    .metadata
                    .namespace
                    .clone()
                    .unwrap_or_default(),
            );
        }
    });
    let (q, quota_store) = (queue.clone(), quotas.store());
    pods.add_handler(move |event: &InformerEvent<Pod>| {
        let released = match event {
            InformerEvent::Deleted(_) => true,
            InformerEvent::Updated { old, new } => {
                pods::is_active(old) != pods::is_active(new) || old.spec != new.spec
            }
            InformerEvent::Added(_) => false,
        };
        let namespace = event
            .object()
            .metadata
            .namespace
            .clone()
            .unwrap_or_default();
        if released && !quota_store.list_namespace(&namespace).is_empty() {
            q.add(namespace);
        }
    });
    if !ctx.until_synced(&[&quotas, &pods]).await {
        return Ok(());
    }
    tokio::spawn(resync(ctx.clone(), quotas.store(), queue.clone()));
    let syncer = Arc::new(Syncer {
        ctx: ctx.clone(),
        quotas: quotas.store(),
        client,
        queue: queue.clone(),
        seen: Mutex::new(HashMap::new()),
        types: Mutex::new(HashMap::new()),
        watched: Mutex::new(HashSet::new()),
    });
    let workers = ctx.settings.concurrent_resource_quota_syncs;
    ctx.serve(QUEUE, queue, workers, syncer).await;
    Ok(())
}

async fn resync(ctx: Arc<Context>, quotas: Store<ResourceQuota>, queue: WorkQueue<String>) {
    loop {
        tokio::select! {
            _ = ctx.stop.cancelled() => return,
            _ = tokio::time::sleep(RESYNC) => {}
        }
        let namespaces: HashSet<String> = quotas
            .list()
            .iter()
            .filter_map(|q| q.metadata.namespace.clone())
            .collect();
        for namespace in namespaces {
            queue.add(namespace);
        }
    }
}

pub struct Syncer {
    ctx: Arc<Context>,
    quotas: Store<ResourceQuota>,
    client: kube::Client,
    queue: WorkQueue<String>,
    /// Each quota's resourceVersion at its last recount, by UID.
    seen: Mutex<HashMap<String, String>>,
    /// Served types by (group, resource), looked up once.
    types: Mutex<HashMap<(String, String), Option<ApiResource>>>,
    /// Types whose deletions already enqueue their namespace.
    watched: Mutex<HashSet<(String, String)>>,
}

impl Reconciler for Syncer {
    /// Recounts every quota of `namespace`.
    async fn sync(&self, namespace: &str) -> Result<()> {
        for quota in self.quotas.list_namespace(namespace) {
            self.recount(&quota).await?;
        }
        Ok(())
    }
}

impl Syncer {
    async fn recount(&self, quota: &ResourceQuota) -> Result<()> {
        let value = serde_json::to_value(quota).unwrap_or_default();
        let uid = quota.metadata.uid.clone().unwrap_or_default();
        let version = quota.metadata.resource_version.clone().unwrap_or_default();
        let stable =
            self.seen.lock().insert(uid, version.clone()).as_deref() == Some(version.as_str());
        let tracked: Vec<String> = usage::parse(&value["spec"]["hard"])
            .keys()
            .cloned()
            .collect();
        let mut types = Vec::new();
        for (group, resource) in count::counted_types(&tracked) {
            if let Some(api_resource) = self.served(&group, &resource).await? {
                types.push((group, resource, api_resource));
            }
        }
        let namespace = quota.metadata.namespace.clone().unwrap_or_default();
        let counted = count::count(&self.client, &types, &value, &namespace, &tracked).await?;
        let Some(status) = count::next_status(&value, &counted, stable) else {
            if !stable {
                // A fall held back: look again once the quota settles.
                self.queue.add_after(namespace, Duration::from_secs(1));
            }
            return Ok(());
        };
        self.write(quota, status).await
    }

    /// A PUT conditional on the version counted against: a charge made by
    /// admission meanwhile is a conflict, and the namespace is recounted.
    async fn write(&self, quota: &ResourceQuota, status: serde_json::Value) -> Result<()> {
        let mut updated = quota.clone();
        updated.status = serde_json::from_value(status).ok();
        let namespace = quota.metadata.namespace.clone().unwrap_or_default();
        let api: Api<ResourceQuota> = Api::namespaced(self.client.clone(), &namespace);
        let name = quota.metadata.name.clone().unwrap_or_default();
        let body = serde_json::to_vec(&updated).map_err(|e| Error::Invalid(e.to_string()))?;
        match api
            .replace_status(&name, &PostParams::default(), body)
            .await
            .map_err(Error::from)
        {
            Ok(_) => Ok(()),
            Err(err) if err.is_conflict() => {
                self.queue.add_after(namespace, Duration::from_millis(200));
                Ok(())
            }
            Err(err) if err.is_not_found() => Ok(()),
            Err(err) => Err(err),
        }
    }

    /// The served type, looked up once; its deletions then wake the namespace.
    async fn served(&self, group: &str, resource: &str) -> Result<Option<ApiResource>> {
        let key = (group.to_string(), resource.to_string());
        if let Some(found) = self.types.lock().get(&key) {
            return Ok(found.clone());
        }
        let found = count::resolve(&self.client, group, resource).await?;
        self.types.lock().insert(key.clone(), found.clone());
        if let Some(api_resource) = &found {
            self.watch_deletions(key, api_resource);
        }
        Ok(found)
    }

    fn watch_deletions(&self, key: (String, String), resource: &ApiResource) {
        if key.1 == "pods" || !self.watched.lock().insert(key) {
            return;
        }
        let informer = self
            .ctx
            .informers
            .get_dynamic(resource, None, InformerOptions::default());
        let (queue, quotas) = (self.queue.clone(), self.quotas.clone());
        informer.add_handler(move |event: &InformerEvent<DynamicObject>| {
            if let InformerEvent::Deleted(object) = event {
                let namespace = object.metadata.namespace.clone().unwrap_or_default();
                if !quotas.list_namespace(&namespace).is_empty() {
                    queue.add(namespace);
                }
            }
        });
    }
}
