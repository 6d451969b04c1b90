//! The CRD controller (kube's naming, establishing and finalizing
//! controllers in one): keeps each CustomResourceDefinition's names and
//! conditions, serves the type of every established one (a resource
//! actor with its own Cacher, started through the catalog), and on
//! deletion removes its instances, stops serving and lets the
//! definition go by dropping the cleanup finalizer. It follows the CRDs'
//! watch cache, and looks again on its own every few seconds.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use serde_json::{json, Value};

use crate::cache::EventType;
use crate::error::ApiError;
use crate::object::meta;
use crate::object::patch::PatchType;
use crate::registry::catalog::Entry;
use crate::registry::flow::Part;
use crate::registry::kinds::apiextensions::{
    self as crd, status, CLEANUP_FINALIZER, GROUP, RESOURCE,
};
use crate::registry::kinds::custom::{storage_prefix, Custom};
use crate::registry::lookup::CachedObjects;
use crate::registry::options::{DeleteOptions, ListOptions, WriteOptions};
use crate::registry::Catalog;
use crate::registry::{actor, requests};

const MANAGER: &str = "apiextensions-controller";

/// How long the controller waits for a change before it looks anyway;
/// shorter while a deletion waits for instances to go.
const RESYNC: Duration = Duration::from_secs(5);
const CLEANUP_RESYNC: Duration = Duration::from_millis(500);

/// The controller's memory: which definition is served as what.
#[derive(Default)]
pub struct Controller {
    /// CRD name → (group, resource, the uid and generation served).
    served: HashMap<String, (String, String, String)>,
}

/// Serves the CRDs already stored (so a restarted server serves them
/// before it answers), then keeps following them in the background.
pub async fn start(catalog: Arc<Catalog>, prefix: String) {
    let mut controller = Controller::default();
    let first = controller.pass(&catalog, &prefix).await;
    actix_rt::spawn(async move {
        let mut next = first;
        loop {
            let (revision, busy) = next.unwrap_or((0, true));
            let wait = if busy { CLEANUP_RESYNC } else { RESYNC };
            wait_for_change(&catalog, revision, wait).await;
            next = controller.pass(&catalog, &prefix).await;
        }
    });
}

fn crds(catalog: &Catalog) -> Result<&Entry, ApiError> {
    catalog
        .find(GROUP, "v1", RESOURCE)
        .ok_or_else(|| ApiError::Internal("customresourcedefinitions are not served".into()))
}

/// Waits until the CRDs change after `revision`, or `wait` passes.
async fn wait_for_change(catalog: &Catalog, revision: i64, wait: Duration) {
    let options = ListOptions {
        resource_version: Some(revision.to_string()),
        watch: true,
        ..ListOptions::default()
    };
    let watch = async {
        let Ok(entry) = crds(catalog) else { return };
        let message = actor::Watch {
            namespace: None,
            options,
        };
        let Ok(Ok(mut items)) = entry.actor.send(message).await else {
            // Do not spin on a watch that cannot start: wait out the pause.
            tokio::time::sleep(wait).await;
            return;
        };
        while let Some(item) = items.recv().await {
            if item.kind != EventType::Bookmark {
                return;
            }
        }
    };
    let _ = tokio::time::timeout(wait, watch).await;
}

impl Controller {
    /// One look at every CRD: the list's revision, and whether a deletion
    /// is still waiting (None when the list failed).
    async fn pass(&mut self, catalog: &Catalog, prefix: &str) -> Option<(i64, bool)> {
        let message = requests::List {
            namespace: None,
            options: ListOptions::default(),
        };
        let page = match crds(catalog).ok()?.call(message).await {
            Ok(page) => page,
            other => {
                tracing::warn!(?other, "listing CRDs failed");
                return None;
            }
        };
        let objects: Vec<Value> = page.items.iter().map(|o| o.value()).collect();
        let typed: Vec<CustomResourceDefinition> = objects.iter().filter_map(crd::typed).collect();
        let mut busy = false;
        for obj in &objects {
            let result = match obj["metadata"]["deletionTimestamp"].is_null() {
                true => self.keep(catalog, prefix, obj, &typed).await,
                false => self
                    .finalize(catalog, prefix, obj)
                    .await
                    .map(|done| busy |= !done),
            };
            if let Err(err) = result {
                tracing::warn!(crd = meta::name(obj), %err, "CRD controller");
                busy = true;
            }
        }
        self.forget_gone(catalog, &objects);
        Some((page.revision, busy))
    }

    /// Brings the status up to date and serves the type once established.
    async fn keep(
        &mut self,
        catalog: &Catalog,
        prefix: &str,
        obj: &Value,
        all: &[CustomResourceDefinition],
    ) -> Result<(), ApiError> {
        let next = status::reconciled(obj, all);
        let current = match next == *obj {
            true => obj.clone(),
            false => write_status(catalog, next).await?,
        };
        let established = status::has_condition(&current, "Established")
            && status::has_condition(&current, "NamesAccepted");
        if established {
            self.serve(catalog, prefix, &current).await?;
        }
        Ok(())
    }

    async fn serve(
        &mut self,
        catalog: &Catalog,
        prefix: &str,
        obj: &Value,
    ) -> Result<(), ApiError> {
        let name = meta::name(obj).to_string();
        let generation = obj["metadata"]["generation"].as_i64().unwrap_or(0);
        let served_as = format!("{}/{generation}", meta::uid(obj));
        if self
            .served
            .get(&name)
            .is_some_and(|(_, _, s)| *s == served_as)
        {
            return Ok(());
        }
        let Some(typed) = crd::typed(obj) else {
            return Ok(());
        };
        let objects = Arc::new(CachedObjects::of(catalog).await);
        let Some((versions, conversion)) = Custom::versions(&typed, objects) else {
            return Ok(());
        };
        let storage = storage_prefix(prefix, &typed);
        catalog
            .serve_versions(versions, Some(conversion), &storage)
            .await
            .map_err(|e| ApiError::Internal(e.to_string()))?;
        tracing::info!(crd = %name, "serving custom resource");
        let entry = (typed.spec.group, typed.spec.names.plural, served_as);
        self.served.insert(name, entry);
        Ok(())
    }

    /// Deletes the instances of a CRD being deleted; once none is left,
    /// stops serving and drops the finalizer. Says whether it is done.
    async fn finalize(
        &mut self,
        catalog: &Catalog,
        prefix: &str,
        obj: &Value,
    ) -> Result<bool, ApiError> {
        if !meta_has_finalizer(obj, CLEANUP_FINALIZER) {
            return Ok(true);
        }
        // Instances can only be found through their type's actor.
        self.serve(catalog, prefix, obj).await.ok();
        if let Some((group, resource, _)) = self.served.get(meta::name(obj)) {
            // The storage version's entry, served or not.
            let primary = catalog.primary_entries().into_iter().find(|e| {
                let def = e.strategy.def();
                def.group == group && def.resource == resource
            });
            if let Some(entry) = primary {
                if !delete_instances(&entry).await? {
                    return Ok(false);
                }
            }
            catalog.withdraw(group, resource);
        }
        self.served.remove(meta::name(obj));
        drop_finalizer(catalog, obj).await?;
        Ok(true)
    }

    /// Stops serving the types of definitions that are gone.
    fn forget_gone(&mut self, catalog: &Catalog, objects: &[Value]) {
        let present: Vec<&str> = objects.iter().map(meta::name).collect();
        self.served.retain(|name, (group, resource, _)| {
            let keep = present.contains(&name.as_str());
            if !keep {
                catalog.withdraw(group, resource);
            }
            keep
        });
    }
}

fn meta_has_finalizer(obj: &Value, finalizer: &str) -> bool {
    let list = obj["metadata"]["finalizers"].as_array();
    list.into_iter().flatten().any(|f| f == finalizer)
}

/// Asks every instance to go; true when none is left.
async fn delete_instances(entry: &Entry) -> Result<bool, ApiError> {
    let message = requests::DeleteCollection {
        namespace: None,
        list: ListOptions::default(),
        options: DeleteOptions::default(),
    };
    entry.call(message).await?;
    let message = requests::List {
        namespace: None,
        options: ListOptions::default(),
    };
    let left = entry.call(message).await?;
    Ok(left.items.is_empty())
}

async fn write_status(catalog: &Catalog, next: Value) -> Result<Value, ApiError> {
    let message = requests::Update {
        namespace: String::new(),
        name: meta::name(&next).to_string(),
        part: Part::Status,
        body: next,
        options: WriteOptions::by(MANAGER),
    };
    let reply = crds(catalog)?.call(message).await?;
    Ok(reply.body)
}

async fn drop_finalizer(catalog: &Catalog, obj: &Value) -> Result<(), ApiError> {
    let list = obj["metadata"]["finalizers"].as_array();
    let kept: Vec<&Value> = list
        .into_iter()
        .flatten()
        .filter(|f| *f != CLEANUP_FINALIZER)
        .collect();
    let kept = match kept.is_empty() {
        true => Value::Null,
        false => json!(kept),
    };
    let message = requests::Patch {
        namespace: String::new(),
        name: meta::name(obj).to_string(),
        part: Part::Main,
        kind: PatchType::Merge,
        patch: json!({"metadata": {"finalizers": kept, "resourceVersion": meta::resource_version(obj)}}),
        options: WriteOptions::by(MANAGER),
    };
    crds(catalog)?.call(message).await?;
    Ok(())
}
