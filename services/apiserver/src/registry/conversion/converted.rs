//! The storage of one served version: a view of the type's storage (its
//! Cacher) in which objects read are in this version and objects written
//! are converted to the storage version first. Revisions, keys,
//! preconditions and filters are the storage's own: conversion keeps
//! metadata.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use serde_json::Value;

use super::converter::{to_version, Converter};
use crate::storage::{
    Earlier, EventStream, FieldPaths, Freshness, Interface, ListRequest, Listing, Object,
    StorageError, StorageFuture, StoreEvent, Stored,
};

#[derive(Clone)]
pub struct Converted {
    inner: Arc<dyn Interface>,
    converter: Arc<dyn Converter>,
    /// The version this view serves, `group/version`.
    served: String,
    /// The version objects are written in.
    storage: String,
    /// The served version's selectable fields, indexed in list items.
    fields: FieldPaths,
}

impl Converted {
    pub fn new(
        inner: Arc<dyn Interface>,
        converter: Arc<dyn Converter>,
        served: String,
        storage: String,
        fields: FieldPaths,
    ) -> Converted {
        Converted {
            inner,
            converter,
            served,
            storage,
            fields,
        }
    }

    pub fn served(&self) -> &str {
        &self.served
    }

    /// `objects` in the served version.
    pub async fn read(&self, objects: Vec<Value>) -> Result<Vec<Value>, StorageError> {
        to_version(self.converter.as_ref(), objects, &self.served)
            .await
            .map_err(|e| StorageError::Conversion(e.0))
    }

    async fn read_one(&self, stored: Option<Stored>) -> Result<Option<Stored>, StorageError> {
        let Some(mut stored) = stored else {
            return Ok(None);
        };
        let object = std::mem::take(&mut stored.object);
        stored.object = self.read(vec![object]).await?.remove(0);
        Ok(Some(stored))
    }

    /// `object` in the storage version.
    async fn write(&self, object: &Value) -> Result<Value, StorageError> {
        let converted = to_version(self.converter.as_ref(), vec![object.clone()], &self.storage);
        let mut converted = converted.await.map_err(|e| StorageError::Conversion(e.0))?;
        Ok(converted.remove(0))
    }

    /// List items in the served version (one conversion for the page).
    async fn read_items(&self, items: Vec<Arc<Object>>) -> Result<Vec<Arc<Object>>, StorageError> {
        let same = items.iter().all(|o| in_version(o, &self.served));
        if same {
            return Ok(items);
        }
        let values = items.iter().map(|o| o.value()).collect();
        let converted = self.read(values).await?;
        let rebuilt = items.iter().zip(converted).map(|(old, value)| {
            Arc::new(Object::new(old.key(), value, old.revision(), self.fields))
        });
        Ok(rebuilt.collect())
    }

    async fn read_event(&self, mut event: StoreEvent) -> Result<StoreEvent, StorageError> {
        event.object = self.read_one(event.object.take()).await?;
        let previous = event.previous.take().and_then(|p| p.read().ok());
        event.previous = self.read_one(previous).await?.map(Earlier::decoded);
        Ok(event)
    }
}

/// Is `object` in `api_version`? Read from its text without building a
/// tree: at once when apiVersion is its first field (serde_json writes
/// the fields in order), else by reading the text through.
fn in_version(object: &Object, api_version: &str) -> bool {
    #[derive(serde::Deserialize)]
    struct Head {
        #[serde(rename = "apiVersion", default)]
        api_version: String,
    }
    let text = object.json().get();
    let first = format!("{{\"apiVersion\":{}", Value::from(api_version));
    if text.starts_with(&first) {
        let rest = &text[first.len()..];
        return rest.starts_with(',') || rest.starts_with('}');
    }
    serde_json::from_str::<Head>(text).is_ok_and(|h| h.api_version == api_version)
}

impl Interface for Converted {
    fn get<'a>(&'a self, key: &'a str) -> StorageFuture<'a, Option<Stored>> {
        Box::pin(async move { self.read_one(self.inner.get(key).await?).await })
    }

    fn get_at<'a>(
        &'a self,
        key: &'a str,
        at: crate::storage::ReadAt,
    ) -> StorageFuture<'a, Option<Stored>> {
        Box::pin(async move { self.read_one(self.inner.get_at(key, at).await?).await })
    }

    fn get_list<'a>(
        &'a self,
        prefix: &'a str,
        request: ListRequest<'a>,
    ) -> StorageFuture<'a, Listing> {
        Box::pin(async move {
            let mut listing = self.inner.get_list(prefix, request).await?;
            listing.items = self.read_items(std::mem::take(&mut listing.items)).await?;
            Ok(listing)
        })
    }

    fn count<'a>(&'a self, prefix: &'a str) -> StorageFuture<'a, i64> {
        self.inner.count(prefix)
    }

    fn freshness<'a>(&'a self, key: &'a str, prefix: bool) -> StorageFuture<'a, Freshness> {
        self.inner.freshness(key, prefix)
    }

    fn watch<'a>(&'a self, prefix: &'a str, from: i64) -> StorageFuture<'a, EventStream> {
        Box::pin(async move {
            let events = self.inner.watch(prefix, from).await?;
            let this = self.clone();
            let converted = events.then(move |batch| {
                let this = this.clone();
                async move {
                    let mut out = Vec::new();
                    for event in batch? {
                        out.push(this.read_event(event).await?);
                    }
                    Ok(out)
                }
            });
            Ok(converted.boxed())
        })
    }

    fn create_claiming<'a>(
        &'a self,
        key: &'a str,
        object: &'a Value,
        claims: &'a [String],
        ttl: Option<Duration>,
    ) -> StorageFuture<'a, i64> {
        Box::pin(async move {
            let object = self.write(object).await?;
            self.inner.create_claiming(key, &object, claims, ttl).await
        })
    }

    fn update_claiming<'a>(
        &'a self,
        key: &'a str,
        object: &'a Value,
        mod_revision: i64,
        claims: &'a [String],
        releases: &'a [String],
        ttl: Option<Duration>,
    ) -> StorageFuture<'a, i64> {
        Box::pin(async move {
            let object = self.write(object).await?;
            let inner = &self.inner;
            inner
                .update_claiming(key, &object, mod_revision, claims, releases, ttl)
                .await
        })
    }

    fn delete_releasing<'a>(
        &'a self,
        key: &'a str,
        mod_revision: i64,
        releases: &'a [String],
    ) -> StorageFuture<'a, i64> {
        self.inner.delete_releasing(key, mod_revision, releases)
    }

    fn current_revision(&self) -> StorageFuture<'_, i64> {
        self.inner.current_revision()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_version_is_read_from_the_text() {
        let first =
            Object::from_value(json!({"apiVersion": "x.io/v1", "kind": "K", "metadata": {}}));
        assert!(in_version(&first, "x.io/v1"));
        assert!(!in_version(&first, "x.io/v"));
        let text = r#"{"kind":"K","metadata":{"ownerReferences":[{"apiVersion":"x.io/v1"}]},"apiVersion":"x.io/v2"}"#;
        let later = Object::from_value(serde_json::from_str(text).unwrap());
        assert!(in_version(&later, "x.io/v2"));
        assert!(!in_version(&later, "x.io/v1"));
    }
}
