//! The root-CA publisher: every live namespace has the ConfigMap
//! `kube-root-ca.crt` holding the cluster's CA (`--root-ca-file`), which
//! service-account token volumes mount; made again if deleted, put right
//! if changed. Without `--root-ca-file` nothing is published.

use std::collections::BTreeMap;
use std::sync::Arc;

use capstan_client::informer::{InformerEvent, InformerOptions, Store};
use capstan_client::queue::WorkQueue;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, ObjectMeta, PostParams};

use super::serviceaccount::live;
use crate::context::{Context, Reconciler};
use crate::error::{Error, Result};

pub const ACCOUNT: &str = "root-ca-cert-publisher";
const QUEUE: &str = "root_ca_cert_publisher";
pub const NAME: &str = "kube-root-ca.crt";
const DESCRIPTION: &str = "Contains a CA bundle that can be used to verify the kube-apiserver \
    when using internal endpoints such as the internal service IP or kubernetes.default.svc. \
    No other usage is guaranteed across distributions of Kubernetes clusters.";

pub async fn run(ctx: Arc<Context>) -> Result<()> {
    let ca = match ctx.settings.root_ca_file.as_str() {
        "" => return Ok(()),
        file => std::fs::read_to_string(file)
            .map_err(|e| Error::Invalid(format!("--root-ca-file {file}: {e}")))?,
    };
    let client = ctx.client_for(ACCOUNT).await?;
    let namespaces = ctx.informers.get::<Namespace>();
    let options = InformerOptions::default().fields(&format!("metadata.name={NAME}"));
    let maps = ctx.informers.get_with::<ConfigMap>(options);
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
    maps.add_handler(move |event: &InformerEvent<ConfigMap>| {
        if !matches!(event, InformerEvent::Added(_)) {
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
    if !ctx.until_synced(&[&namespaces, &maps]).await {
        return Ok(());
    }
    let syncer = Arc::new(Syncer {
        namespaces: namespaces.store(),
        maps: maps.store(),
        client,
        ca,
    });
    ctx.serve(QUEUE, queue, 2, syncer).await;
    Ok(())
}

pub struct Syncer {
    pub namespaces: Store<Namespace>,
    pub maps: Store<ConfigMap>,
    pub client: kube::Client,
    pub ca: String,
}

impl Reconciler for Syncer {
    async fn sync(&self, namespace: &str) -> Result<()> {
        let Some(ns) = self.namespaces.get_by_key(namespace) else {
            return Ok(());
        };
        if !live(&ns) {
            return Ok(());
        }
        let api: Api<ConfigMap> = Api::namespaced(self.client.clone(), namespace);
        let result = match self.maps.get(Some(namespace), NAME) {
            None => api.create(&PostParams::default(), &self.wanted()).await,
            Some(current) => {
                let data = current.data.as_ref().and_then(|d| d.get("ca.crt"));
                if data == Some(&self.ca) {
                    return Ok(());
                }
                let mut fixed = self.wanted();
                fixed.metadata.resource_version = current.metadata.resource_version.clone();
                api.replace(NAME, &PostParams::default(), &fixed).await
            }
        };
        match result.map_err(Error::from) {
            Ok(_) => Ok(()),
            Err(err)
                if err.is_already_exists()
                    || err.is_conflict()
                    || err.is_namespace_terminating() =>
            {
                Ok(())
            }
            Err(err) if err.is_not_found() => Ok(()),
            Err(err) => Err(err),
        }
    }
}

impl Syncer {
    fn wanted(&self) -> ConfigMap {
        ConfigMap {
            metadata: ObjectMeta {
                name: Some(NAME.into()),
                annotations: Some(BTreeMap::from([(
                    "kubernetes.io/description".into(),
                    DESCRIPTION.into(),
                )])),
                ..ObjectMeta::default()
            },
            data: Some(BTreeMap::from([("ca.crt".into(), self.ca.clone())])),
            ..ConfigMap::default()
        }
    }
}
