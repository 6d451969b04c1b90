//! The store client: typed operations over the store's KV API.

use capstan_proto::etcdserverpb::range_request::{SortOrder, SortTarget};
use capstan_proto::etcdserverpb::{RangeRequest, RangeResponse, TxnRequest, TxnResponse};
use etcd_client::DeleteOptions;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use super::compactor::COMPACT_REV_KEY;
use super::connection::{Call, Connection};
use super::encryption::Encryption;
use super::interface::{
    EventStream, Freshness, Interface, ListRequest, Listing, StorageFuture, Stored,
};
use super::kv::{self, revision_of};
use super::{Leases, Object, StorageError};
use crate::object::meta;

#[derive(Clone)]
pub struct Store {
    connection: Connection,
    /// For creates with a time to live.
    pub(super) leases: Arc<Leases>,
    /// Encryption at rest: every value written and read goes through it.
    pub(super) values: Arc<Encryption>,
}

impl Store {
    pub fn new(connection: &Connection) -> Store {
        Store {
            connection: connection.clone(),
            leases: Arc::new(Leases::new(connection)),
            values: Arc::new(Encryption::none()),
        }
    }

    /// This store with values encrypted at rest as `encryption` says.
    pub fn with_encryption(self, encryption: Arc<Encryption>) -> Store {
        Store {
            values: encryption,
            ..self
        }
    }

    /// The value stored for `object` at `key`: its JSON, encrypted if
    /// the key's resource is.
    pub(super) fn seal(&self, key: &str, object: &Value) -> Vec<u8> {
        self.values.for_key(key).to_storage(encode(object), key)
    }

    /// The object stored at `key`, decrypted if it was encrypted.
    pub(super) fn open(
        &self,
        key: &str,
        value: &[u8],
        mod_revision: i64,
    ) -> Result<Stored, StorageError> {
        open(&self.values, key, value, mod_revision)
    }

    /// The lease to write under for objects that live `ttl`.
    async fn lease(&self, ttl: Option<Duration>) -> Result<Option<i64>, StorageError> {
        match ttl {
            Some(ttl) => self.leases.for_ttl(ttl).await.map(Some),
            None => Ok(None),
        }
    }

    /// The members, for what the typed operations here do not cover.
    pub fn connection(&self) -> &Connection {
        &self.connection
    }

    /// A range read, on whichever member answers.
    pub(super) async fn range(&self, request: RangeRequest) -> Result<RangeResponse, StorageError> {
        self.connection
            .kv(Call::Read, |kv| kv.range(request.clone()))
            .await
    }

    pub async fn get(&self, key: &str) -> Result<Option<Stored>, StorageError> {
        let response = self.range(kv::key_alone(key)).await?;
        response
            .kvs
            .first()
            .map(|kv| self.open(key, &kv.value, kv.mod_revision))
            .transpose()
    }

    /// The store's current revision, by a linearizable read. It reads the
    /// one key outside the object prefix the server uses anyway (to order
    /// compactions), so that a store with access control need grant its
    /// identity nothing more than that key and the prefix.
    pub async fn current_revision(&self) -> Result<i64, StorageError> {
        let request = RangeRequest {
            count_only: true,
            ..kv::key_alone(COMPACT_REV_KEY)
        };
        Ok(revision_of(&self.range(request).await?.header))
    }

    /// A linearizable read of `key` alone, or of every key under it when
    /// `prefix` (newest first by mod_revision, one key, keys only).
    pub async fn freshness(&self, key: &str, prefix: bool) -> Result<Freshness, StorageError> {
        let request = match prefix {
            false => kv::key_alone(key),
            true => RangeRequest {
                sort_target: SortTarget::Mod as i32,
                sort_order: SortOrder::Descend as i32,
                limit: 1,
                ..kv::prefix_range(key, key)
            },
        };
        let response = self
            .range(RangeRequest {
                keys_only: true,
                ..request
            })
            .await?;
        let revision = revision_of(&response.header);
        let newest = response.kvs.first().map_or(0, |kv| kv.mod_revision);
        let count = match prefix {
            true => response.count,
            false => response.kvs.len() as i64,
        };
        Ok(Freshness {
            revision,
            newest,
            count,
        })
    }

    /// Objects under `prefix` from `request.start` on (inclusive), as
    /// `request.at` says (only `Exact` reads the past), at most
    /// `request.limit` keys read (0 = all), those that pass its filter kept.
    pub async fn list(
        &self,
        prefix: &str,
        request: ListRequest<'_>,
    ) -> Result<Listing, StorageError> {
        let revision = request.at.exact();
        let from = request.start.unwrap_or(prefix);
        let range = RangeRequest {
            revision,
            limit: request.limit.max(0),
            ..kv::prefix_range(prefix, from)
        };
        let response = match self.range(range).await {
            Ok(response) => response,
            Err(StorageError::FutureRevision { .. }) => {
                let current = self.current_revision().await?;
                return Err(StorageError::FutureRevision {
                    requested: revision,
                    current,
                });
            }
            Err(e) => return Err(e.at_revision(revision)),
        };
        let revision = response.header.as_ref().map_or(revision, |h| h.revision);
        request.at.check(revision)?;
        let mut items = Vec::with_capacity(response.kvs.len());
        let mut unreadable = Vec::new();
        for kv in &response.kvs {
            let key = String::from_utf8_lossy(&kv.key);
            let stored = match self.open(&key, &kv.value, kv.mod_revision) {
                Ok(stored) => stored,
                Err(err) if request.keep_unreadable => {
                    unreadable.push((key.to_string(), err));
                    continue;
                }
                Err(err) => return Err(err),
            };
            let object = Object::new(&key, stored.object, kv.mod_revision, &[]);
            if request.filter.is_none_or(|f| f.matches(&object)) {
                items.push(Arc::new(object));
            }
        }
        let next_key = match response.more {
            true => response
                .kvs
                .last()
                .map(|kv| format!("{}\0", String::from_utf8_lossy(&kv.key))),
            false => None,
        };
        let remaining = (response.count - response.kvs.len() as i64).max(0);
        Ok(Listing {
            items,
            revision,
            next_key,
            remaining,
            unreadable,
        })
    }

    /// Writes `object` only if `key` does not exist; the new revision.
    pub async fn create(&self, key: &str, object: &Value) -> Result<i64, StorageError> {
        let txn = kv::txn(
            vec![kv::create_revision_is(key, 0)],
            vec![kv::put(key, self.seal(key, object), None)],
            Vec::new(),
        );
        self.commit(txn, StorageError::Exists(key.to_string()))
            .await
    }

    /// Writes `object` only if `key` was last written at `mod_revision`.
    pub async fn update(
        &self,
        key: &str,
        object: &Value,
        mod_revision: i64,
    ) -> Result<i64, StorageError> {
        let txn = kv::txn(
            vec![kv::mod_revision_is(key, mod_revision)],
            vec![kv::put(key, self.seal(key, object), None)],
            Vec::new(),
        );
        self.commit(txn, StorageError::Conflict).await
    }

    /// Deletes `key` only if it was last written at `mod_revision`.
    pub async fn delete(&self, key: &str, mod_revision: i64) -> Result<i64, StorageError> {
        let txn = kv::txn(
            vec![kv::mod_revision_is(key, mod_revision)],
            vec![kv::delete(key)],
            Vec::new(),
        );
        self.commit(txn, StorageError::Conflict).await
    }

    /// Deletes every key under `prefix` (a namespace's contents).
    pub async fn delete_prefix(&self, prefix: &str) -> Result<i64, StorageError> {
        // Deleting a range twice is harmless, so it may be sent again.
        let options = DeleteOptions::new().with_range(kv::prefix_end(prefix));
        let response = self
            .connection
            .unary(Call::Read, |client| {
                let options = options.clone();
                async move { client.kv_client().delete(prefix, Some(options)).await }
            })
            .await?;
        Ok(response.header().map(|h| h.revision()).unwrap_or(0))
    }

    /// Runs a transaction as it is (for writes that claim or release
    /// other keys with the object, see `claims.rs`).
    /// A write: sent again on another member only when it never left.
    pub(super) async fn txn(&self, txn: TxnRequest) -> Result<TxnResponse, StorageError> {
        self.connection
            .kv(Call::Write, |kv| kv.txn(txn.clone()))
            .await
    }

    async fn commit(
        &self,
        txn: TxnRequest,
        on_failed_compare: StorageError,
    ) -> Result<i64, StorageError> {
        let response = self.txn(txn).await?;
        if !response.succeeded {
            return Err(on_failed_compare);
        }
        Ok(revision_of(&response.header))
    }
}

pub fn encode(object: &Value) -> Vec<u8> {
    let mut object = object.clone();
    // The revision is the store's to say; a stored copy would go stale.
    if let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.remove("resourceVersion");
    }
    serde_json::to_vec(&object).expect("JSON values always serialise")
}

pub fn decode(key: &str, bytes: &[u8], mod_revision: i64) -> Result<Stored, StorageError> {
    let mut object: Value = serde_json::from_slice(bytes).map_err(|e| StorageError::Corrupt {
        key: key.to_string(),
        reason: e.to_string(),
    })?;
    if !object.is_object() {
        return Err(StorageError::Corrupt {
            key: key.to_string(),
            reason: "not a JSON object".into(),
        });
    }
    meta::set_resource_version(&mut object, mod_revision);
    Ok(Stored {
        object,
        mod_revision,
        stale: false,
    })
}

/// The object a stored value holds, decrypted by `values` and decoded.
pub(super) fn open(
    values: &Encryption,
    key: &str,
    value: &[u8],
    mod_revision: i64,
) -> Result<Stored, StorageError> {
    let (plain, stale) =
        values
            .for_key(key)
            .from_storage(value, key)
            .map_err(|e| StorageError::Transform {
                key: key.to_string(),
                reason: e.to_string(),
            })?;
    let stored = decode(key, &plain, mod_revision)?;
    Ok(Stored { stale, ..stored })
}

impl Interface for Store {
    fn get<'a>(&'a self, key: &'a str) -> StorageFuture<'a, Option<Stored>> {
        Box::pin(Store::get(self, key))
    }

    fn get_list<'a>(
        &'a self,
        prefix: &'a str,
        request: ListRequest<'a>,
    ) -> StorageFuture<'a, Listing> {
        Box::pin(self.list(prefix, request))
    }

    fn count<'a>(&'a self, prefix: &'a str) -> StorageFuture<'a, i64> {
        Box::pin(async move {
            let request = RangeRequest {
                count_only: true,
                ..kv::prefix_range(prefix, prefix)
            };
            Ok(self.range(request).await?.count)
        })
    }

    fn freshness<'a>(&'a self, key: &'a str, prefix: bool) -> StorageFuture<'a, Freshness> {
        Box::pin(Store::freshness(self, key, prefix))
    }

    fn watch<'a>(&'a self, prefix: &'a str, from: i64) -> StorageFuture<'a, EventStream> {
        Box::pin(Store::watch(self, prefix, from))
    }

    fn create_claiming<'a>(
        &'a self,
        key: &'a str,
        object: &'a Value,
        claims: &'a [String],
        ttl: Option<Duration>,
    ) -> StorageFuture<'a, i64> {
        Box::pin(async move {
            let lease = self.lease(ttl).await?;
            Store::create_claiming(self, key, object, claims, lease).await
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
            let lease = self.lease(ttl).await?;
            Store::update_claiming(self, key, object, mod_revision, claims, releases, lease).await
        })
    }

    fn delete_releasing<'a>(
        &'a self,
        key: &'a str,
        mod_revision: i64,
        releases: &'a [String],
    ) -> StorageFuture<'a, i64> {
        Box::pin(Store::delete_releasing(self, key, mod_revision, releases))
    }
}
