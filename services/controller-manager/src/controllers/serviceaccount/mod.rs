//! The service-account controller: every live namespace has a `default`
//! ServiceAccount, made again if deleted. A namespace's creation or the
//! account's deletion enqueues the namespace.

use std::sync::Arc;

use capstan_client::informer::{InformerEvent, Store};
use capstan_client::queue::WorkQueue;
use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use kube::api::{Api, ObjectMeta, PostParams};

use crate::context::{Context, Reconciler};
use crate::error::{Error, Result};

pub const ACCOUNT: &str = "service-account-controller";
const QUEUE: &str = "serviceaccount";
const DEFAULT: &str = "default";

/// Live: not being deleted (a terminating namespace refuses new objects).
pub fn live(namespace: &Namespace) -> bool {
    let phase = namespace.status.as_ref().and_then(|s| s.phase.as_deref());
    namespace.metadata.deletion_timestamp.is_none() && phase != Some("Terminating")
}

pub async fn run(ctx: Arc<Context>) -> Result<()> {
    let client = ctx.client_for(ACCOUNT).await?;
    let namespaces = ctx.informers.get::<Namespace>();
    let accounts = ctx.informers.get::<ServiceAccount>();
    let queue = WorkQueue::<String>::new(QUEUE);
    let q = queue.clone();
    namespaces.add_handler(move |event: &InformerEvent<Namespace>| {
        if let InformerEvent::Added(ns) | InformerEvent::Updated { new: ns, .. } = event {
            if live(ns) {
                q.add(event.key());
            }
        }
    });
    let q = queue.clone();
    accounts.add_handler(move |event: &InformerEvent<ServiceAccount>| {
        let account = event.object();
        if let (InformerEvent::Deleted(_), Some(DEFAULT)) =
            (event, account.metadata.name.as_deref())
        {
            q.add(account.metadata.namespace.clone().unwrap_or_default());
        }
    });
    if !ctx.until_synced(&[&namespaces, &accounts]).await {
        return Ok(());
    }
    let syncer = Arc::new(Syncer {
        namespaces: namespaces.store(),
        accounts: accounts.store(),
        client,
    });
    ctx.serve(QUEUE, queue, 2, syncer).await;
    Ok(())
}

pub struct Syncer {
    pub namespaces: Store<Namespace>,
    pub accounts: Store<ServiceAccount>,
    pub client: kube::Client,
}

impl Reconciler for Syncer {
    async fn sync(&self, namespace: &str) -> Result<()> {
        let Some(ns) = self.namespaces.get_by_key(namespace) else {
            return Ok(());
        };
        if !live(&ns) || self.accounts.get(Some(namespace), DEFAULT).is_some() {
            return Ok(());
        }
        let api: Api<ServiceAccount> = Api::namespaced(self.client.clone(), namespace);
        let account = ServiceAccount {
            metadata: ObjectMeta {
                name: Some(DEFAULT.into()),
                ..ObjectMeta::default()
            },
            ..ServiceAccount::default()
        };
        match api
            .create(&PostParams::default(), &account)
            .await
            .map_err(Error::from)
        {
            Ok(_) => Ok(()),
            // Made by another writer meanwhile, or the namespace is going.
            Err(err)
                if err.is_already_exists()
                    || err.is_namespace_terminating()
                    || err.is_not_found() =>
            {
                Ok(())
            }
            Err(err) => Err(err),
        }
    }
}
