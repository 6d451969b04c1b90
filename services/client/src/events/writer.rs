//! The writer task: correlates each event and writes it, retrying a
//! failed write a bounded number of times (client-go: 12 tries, 10 s
//! apart) so a short API outage loses nothing and a long one drops.

use std::time::Duration;

use k8s_openapi::api::core::v1::Event;
use kube::api::{Patch, PatchParams, PostParams};
use kube::Api;
use serde_json::json;
use tokio::sync::mpsc;

use super::correlator::{Correlated, Correlator};
use super::metrics;

const TRIES: u32 = 12;
const RETRY_PAUSE: Duration = Duration::from_secs(10);

pub(super) async fn run(client: kube::Client, mut events: mpsc::Receiver<Event>) {
    let mut correlator = Correlator::default();
    while let Some(event) = events.recv().await {
        match correlator.correlate(event) {
            Correlated::Drop => metrics::filtered(),
            Correlated::Create(event) => write(&client, event, false).await,
            Correlated::Patch(event) => write(&client, event, true).await,
        }
    }
}

async fn write(client: &kube::Client, event: Event, patch: bool) {
    let namespace = event.metadata.namespace.clone().unwrap_or_default();
    let api: Api<Event> = Api::namespaced(client.clone(), &namespace);
    for attempt in 1..=TRIES {
        match write_once(&api, &event, patch).await {
            Ok(()) => return,
            Err(kube::Error::Api(status)) if status.code == 409 => return, // already there
            Err(error) if attempt == TRIES => {
                metrics::failed();
                tracing::warn!(%error, reason = ?event.reason, "could not write an event; giving up");
            }
            Err(error) => {
                tracing::debug!(%error, attempt, "writing an event failed; retrying");
                tokio::time::sleep(RETRY_PAUSE).await;
            }
        }
    }
}

async fn write_once(api: &Api<Event>, event: &Event, patch: bool) -> kube::Result<()> {
    let name = event.metadata.name.clone().unwrap_or_default();
    if patch {
        let body = json!({
            "count": event.count,
            "lastTimestamp": event.last_timestamp,
            "message": event.message,
        });
        match api
            .patch(&name, &PatchParams::default(), &Patch::Merge(&body))
            .await
        {
            Ok(_) => {
                metrics::patched();
                return Ok(());
            }
            // The event was deleted (or expired): write it anew.
            Err(kube::Error::Api(status)) if status.code == 404 => {}
            Err(error) => return Err(error),
        }
    }
    let mut fresh = event.clone();
    fresh.metadata.resource_version = None;
    api.create(&PostParams::default(), &fresh).await?;
    metrics::created();
    Ok(())
}
