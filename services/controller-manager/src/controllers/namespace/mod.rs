//! The namespace controller. The API server deletes a namespace's
//! contents when the namespace is deleted and removes it once they are
//! gone; contents held by finalizers, or an API server that stopped part
//! way, leave it Terminating. This controller watches namespaces and, for
//! each terminating one, asks again (a DELETE resumes the removal) until
//! it is gone, looking again every few seconds while it waits.

use std::sync::Arc;
use std::time::Duration;

use capstan_client::informer::{InformerEvent, Store};
use capstan_client::queue::WorkQueue;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, DeleteParams, Preconditions};

use crate::context::{Context, Reconciler};
use crate::error::{Error, Result};

pub const ACCOUNT: &str = "namespace-controller";
const QUEUE: &str = "namespace";
/// How long a terminating namespace waits before it is asked again.
const RECHECK: Duration = Duration::from_secs(2);

pub async fn run(ctx: Arc<Context>) -> Result<()> {
    let client = ctx.client_for(ACCOUNT).await?;
    let namespaces = ctx.informers.get::<Namespace>();
    let queue = WorkQueue::<String>::new(QUEUE);
    let q = queue.clone();
    namespaces.add_handler(move |event: &InformerEvent<Namespace>| {
        let terminating = event.object().metadata.deletion_timestamp.is_some();
        if terminating && !matches!(event, InformerEvent::Deleted(_)) {
            q.add(event.key());
        }
    });
    if !ctx.until_synced(&[&namespaces]).await {
        return Ok(());
    }
    let syncer = Arc::new(Syncer {
        namespaces: namespaces.store(),
        client,
        queue: queue.clone(),
    });
    let workers = ctx.settings.concurrent_namespace_syncs;
    ctx.serve(QUEUE, queue, workers, syncer).await;
    Ok(())
}

pub struct Syncer {
    pub namespaces: Store<Namespace>,
    pub client: kube::Client,
    pub queue: WorkQueue<String>,
}

impl Reconciler for Syncer {
    async fn sync(&self, name: &str) -> Result<()> {
        let Some(namespace) = self.namespaces.get_by_key(name) else {
            return Ok(());
        };
        if namespace.metadata.deletion_timestamp.is_none() {
            return Ok(());
        }
        let api: Api<Namespace> = Api::all(self.client.clone());
        let params = DeleteParams {
            preconditions: Some(Preconditions {
                uid: namespace.metadata.uid.clone(),
                resource_version: None,
            }),
            ..DeleteParams::default()
        };
        match api.delete(name, &params).await.map_err(Error::from) {
            Ok(_) => {}
            Err(err) if err.is_not_found() || err.is_conflict() => return Ok(()),
            Err(err) => return Err(err),
        }
        // Still there until its contents are gone: look again.
        self.queue.add_after(name.to_string(), RECHECK);
        Ok(())
    }
}
