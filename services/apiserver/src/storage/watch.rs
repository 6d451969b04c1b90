//! Store watches as [`StoreEvent`]s: the etcd watch responses decoded
//! here, so nothing above `storage/` sees etcd's types.

use etcd_client::{EventType, WatchResponse};
use futures::StreamExt;

use super::etcd::open;
use super::interface::{Change, Earlier, EventStream, StoreEvent};
use super::{StorageError, Store};

impl Store {
    /// Every change under `prefix` from `from` on, on whichever member
    /// answers first (see `Connection::watch`); `Compacted` at once when
    /// that history is gone.
    pub async fn watch(&self, prefix: &str, from: i64) -> Result<EventStream, StorageError> {
        let mut responses = self.connection().watch(prefix, from).await?;
        let first = responses.next().await;
        let first = match first.map(|r| self.batch(r, from)) {
            Some(Err(err)) => return Err(err),
            Some(Ok(batch)) => batch,
            None => Vec::new(),
        };
        let store = self.clone();
        let rest = responses
            .scan(false, move |ended, response| {
                // Nothing after the first error: the watch is over.
                let item = (!*ended).then(|| store.batch(response, from));
                *ended = item.as_ref().is_some_and(Result::is_err);
                futures::future::ready(item)
            })
            .filter(|item| futures::future::ready(!matches!(item, Ok(b) if b.is_empty())));
        let first = futures::stream::iter((!first.is_empty()).then_some(Ok(first)));
        Ok(first.chain(rest).boxed())
    }

    /// One watch response's events; a cancelled or compacted watch is an
    /// error (progress notifications are empty batches).
    fn batch(
        &self,
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
        Ok(response
            .events()
            .iter()
            .filter_map(|e| self.event_of(e))
            .collect())
    }

    /// A store event; a put whose value does not decode (or decrypt)
    /// comes with the error instead of the object, so the cache answers
    /// it for that key (the object cannot be served).
    fn event_of(&self, event: &etcd_client::Event) -> Option<StoreEvent> {
        let kv = event.kv()?;
        let key = String::from_utf8_lossy(kv.key()).to_string();
        let previous = event.prev_kv().map(|p| {
            let (values, key) = (self.values.clone(), key.clone());
            let (value, revision) = (p.value().to_vec(), p.mod_revision());
            Earlier::encoded(revision, move || open(&values, &key, &value, revision))
        });
        let (change, read) = match event.event_type() {
            EventType::Put => {
                let change = match kv.create_revision() == kv.mod_revision() {
                    true => Change::Created,
                    false => Change::Updated,
                };
                (change, Some(self.open(&key, kv.value(), kv.mod_revision())))
            }
            EventType::Delete => (Change::Deleted, None),
        };
        let (object, unreadable) = match read {
            Some(Ok(stored)) => (Some(stored), None),
            Some(Err(err)) => {
                tracing::warn!(%err, "a stored value cannot be read");
                (None, Some(err))
            }
            None => (None, None),
        };
        Some(StoreEvent {
            change,
            key,
            object,
            previous,
            revision: kv.mod_revision(),
            unreadable,
        })
    }
}
