//! Store watches as [`StoreEvent`]s: the etcd watch responses decoded
//! here, so nothing above `storage/` sees etcd's types.

use etcd_client::{EventType, WatchResponse};
use futures::StreamExt;

use super::etcd::decode;
use super::interface::{Change, EventStream, StoreEvent, Stored};
use super::{StorageError, Store};

impl Store {
    /// Every change under `prefix` from `from` on, on whichever member
    /// answers first (see `Connection::watch`); `Compacted` at once when
    /// that history is gone.
    pub async fn watch(&self, prefix: &str, from: i64) -> Result<EventStream, StorageError> {
        let mut responses = self.connection().watch(prefix, from).await?;
        let first = responses.next().await;
        let first = match first.map(|r| batch(r, from)) {
            Some(Err(err)) => return Err(err),
            Some(Ok(batch)) => batch,
            None => Vec::new(),
        };
        let rest = responses
            .scan(false, move |ended, response| {
                // Nothing after the first error: the watch is over.
                let item = (!*ended).then(|| batch(response, from));
                *ended = item.as_ref().is_some_and(Result::is_err);
                futures::future::ready(item)
            })
            .filter(|item| futures::future::ready(!matches!(item, Ok(b) if b.is_empty())));
        let first = futures::stream::iter((!first.is_empty()).then_some(Ok(first)));
        Ok(first.chain(rest).boxed())
    }
}

/// One watch response's events; a cancelled or compacted watch is an
/// error (progress notifications are empty batches).
fn batch(
    response: Result<WatchResponse, etcd_client::Error>,
    from: i64,
) -> Result<Vec<StoreEvent>, StorageError> {
    let response = response?;
    if response.compact_revision() != 0 {
        return Err(StorageError::Compacted {
            requested: from,
            compacted: Some(response.compact_revision()),
        });
    }
    if response.canceled() {
        let reason = response.cancel_reason().to_string();
        return Err(StorageError::Unavailable(format!(
            "the store cancelled the watch: {reason}"
        )));
    }
    Ok(response.events().iter().filter_map(event_of).collect())
}

/// A store event; a put whose value does not decode is left out (the
/// object cannot be served, and its delete still comes through).
fn event_of(event: &etcd_client::Event) -> Option<StoreEvent> {
    let kv = event.kv()?;
    let key = String::from_utf8_lossy(kv.key()).to_string();
    let previous = event
        .prev_kv()
        .and_then(|p| decode(&key, p.value(), p.mod_revision()).ok());
    let (change, object): (Change, Option<Stored>) = match event.event_type() {
        EventType::Put => {
            let stored = match decode(&key, kv.value(), kv.mod_revision()) {
                Ok(stored) => stored,
                Err(err) => {
                    tracing::warn!(%err, "a stored value does not decode; its event is skipped");
                    return None;
                }
            };
            let change = match kv.create_revision() == kv.mod_revision() {
                true => Change::Created,
                false => Change::Updated,
            };
            (change, Some(stored))
        }
        EventType::Delete => (Change::Deleted, None),
    };
    Some(StoreEvent {
        change,
        key,
        object,
        previous,
        revision: kv.mod_revision(),
    })
}
