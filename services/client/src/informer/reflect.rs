//! An informer's task: kube-runtime's `watcher` (list, watch, resume,
//! relist on 410, bookmarks, backoff between failures) feeding the
//! shared cache and handlers until the factory shuts down.

use std::collections::HashMap;
use std::fmt::Debug;
use std::sync::Arc;

use futures::StreamExt;
use kube::runtime::watcher::{self, Event};
use kube::runtime::WatchStreamExt;
use kube::{Api, Resource};
use serde::de::DeserializeOwned;
use tokio_util::sync::CancellationToken;

use super::shared::Shared;
use super::store::key_of;
use super::transform::TransformFn;

/// Runs one informer until `stop` is cancelled.
pub(super) async fn run<K>(
    api: Api<K>,
    config: watcher::Config,
    shared: Arc<Shared<K>>,
    transform: TransformFn<K>,
    stop: CancellationToken,
) where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    let stream = watcher::watcher(api, config).default_backoff();
    futures::pin_mut!(stream);
    let mut listing: Option<HashMap<String, Arc<K>>> = None;
    let mut lists = 0u64;
    loop {
        let next = tokio::select! {
            _ = stop.cancelled() => return,
            next = stream.next() => next,
        };
        let event = match next {
            Some(Ok(event)) => event,
            Some(Err(error)) => {
                shared.failed();
                tracing::debug!(%error, "informer list/watch failed; retrying with backoff");
                continue;
            }
            None => return,
        };
        match event {
            Event::Init => {
                if lists > 0 {
                    shared.relisted();
                }
                lists += 1;
                listing = Some(HashMap::new());
            }
            Event::InitApply(mut object) => {
                transform(&mut object);
                listing
                    .get_or_insert_with(HashMap::new)
                    .insert(key_of(&object), Arc::new(object));
            }
            Event::InitDone => shared.replace(listing.take().unwrap_or_default(), None),
            Event::Apply(mut object) => {
                transform(&mut object);
                shared.apply(object);
            }
            Event::Delete(mut object) => {
                transform(&mut object);
                shared.delete(object);
            }
        }
    }
}
