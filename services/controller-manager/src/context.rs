//! What every controller is started with: the process's shared
//! informers, the settings, the clients (one identity per controller),
//! and the token that stops it (leadership lost or shutdown).

use std::future::Future;
use std::sync::Arc;

use capstan_client::events::EventRecorder;
use capstan_client::informer::{all_synced, Informers, Syncable};
use capstan_client::queue::{run_workers, WorkQueue};
use tokio_util::sync::CancellationToken;

use crate::config::Settings;
use crate::error::Result;
use crate::identity::Clients;
use crate::metrics;

/// A controller's work on one key of its queue: bring what the key
/// names to its wanted state, or fail (the key is retried with backoff).
pub trait Reconciler: Send + Sync + 'static {
    fn sync(&self, key: &str) -> impl Future<Output = Result<()>> + Send;
}

/// One leadership term's view of the world. Dropped when the term ends,
/// so the next term rebuilds its caches (and expectations) from the API.
#[derive(Clone)]
pub struct Context {
    pub informers: Informers,
    pub settings: Arc<Settings>,
    pub clients: Arc<Clients>,
    pub stop: CancellationToken,
}

impl Context {
    /// The client the controller acting as service account `account` writes with.
    pub async fn client_for(&self, account: &str) -> Result<kube::Client> {
        self.clients.for_controller(account).await
    }

    /// An event recorder writing as `client`, for component `component`
    /// (kube's controllers name themselves, e.g. `replicaset-controller`).
    pub fn recorder(&self, client: &kube::Client, component: &str) -> EventRecorder {
        EventRecorder::new(client.clone(), component, None)
    }

    /// Waits until every one of `informers` has its first listing: true
    /// then, false if the context stopped first.
    pub async fn until_synced(&self, informers: &[&dyn Syncable]) -> bool {
        tokio::select! {
            _ = self.stop.cancelled() => false,
            _ = all_synced(informers) => true,
        }
    }

    /// Runs `workers` workers syncing `queue`'s keys with `reconciler`
    /// until the context stops (see [`Context::run_workers`]).
    pub async fn serve<R: Reconciler>(
        &self,
        controller: &'static str,
        queue: WorkQueue<String>,
        workers: usize,
        reconciler: Arc<R>,
    ) {
        self.run_workers(controller, queue, workers, move |key| {
            let reconciler = reconciler.clone();
            async move { reconciler.sync(&key).await }
        })
        .await
    }

    /// Runs `workers` workers over `queue` until the context stops, then
    /// shuts the queue down. A worker's error or panic requeues its key
    /// with backoff; the other keys go on. Stopping aborts syncs in
    /// flight: losing leadership must stop every write at once.
    pub async fn run_workers<F, Fut>(
        &self,
        controller: &'static str,
        queue: WorkQueue<String>,
        workers: usize,
        sync: F,
    ) where
        F: Fn(String) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<()>> + Send + 'static,
    {
        let sync = Arc::new(sync);
        let counted = move |key: String| {
            let sync = sync.clone();
            async move {
                let result = sync(key).await;
                metrics::sync(controller, result.is_ok());
                result
            }
        };
        tokio::select! {
            _ = self.stop.cancelled() => {}
            _ = run_workers(queue.clone(), workers, counted) => {}
        }
        queue.shutdown();
    }
}
