//! An in-memory [`Interface`] for unit tests: etcd's data model (one
//! revision counter, every version of every key kept until compaction,
//! watches replayed from history and then fed live) in a mutex, with the
//! same encoding as the etcd one, so the two answer alike (the
//! conformance table checks that). A `ttl` is accepted and ignored:
//! nothing expires here.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use serde_json::Value;
use tokio::sync::mpsc;

use super::claims::owner_of;
use super::etcd::{decode, encode};
use super::interface::{
    Change, Earlier, EventStream, Freshness, Interface, ListRequest, Listing, StorageFuture,
    StoreEvent, Stored,
};
use super::{Object, StorageError};

#[derive(Default)]
pub struct MemoryStorage {
    state: Mutex<State>,
}

type Batch = Result<Vec<StoreEvent>, StorageError>;

#[derive(Default)]
struct State {
    revision: i64,
    /// Reads and watches before this revision are refused.
    compacted: i64,
    keys: BTreeMap<String, Vec<Version>>,
    /// Every event from `compacted` on, in revision order.
    events: Vec<StoreEvent>,
    watchers: Vec<(String, mpsc::UnboundedSender<Batch>)>,
    /// Claim keys and their owners (see `claims.rs`); written with the
    /// objects that take them, but not watched or listed.
    claims: BTreeMap<String, String>,
}

struct Version {
    mod_revision: i64,
    /// None: deleted at `mod_revision`.
    value: Option<Vec<u8>>,
}

/// What a write expects of its key.
enum Expect {
    Absent,
    At(i64),
}

impl State {
    /// The key's version live at `revision`.
    fn at(&self, key: &str, revision: i64) -> Option<Stored> {
        let version = self
            .keys
            .get(key)?
            .iter()
            .rev()
            .find(|v| v.mod_revision <= revision)?;
        let value = version.value.as_ref()?;
        decode(key, value, version.mod_revision).ok()
    }

    fn check(&self, key: &str, expect: Expect) -> Result<Option<Stored>, StorageError> {
        let current = self.at(key, self.revision);
        let revision = current.as_ref().map_or(0, |c| c.mod_revision);
        match expect {
            Expect::Absent if current.is_some() => Err(StorageError::Exists(key.to_string())),
            Expect::At(at) if at != revision => Err(StorageError::Conflict),
            _ => Ok(current),
        }
    }

    fn write(&mut self, key: &str, value: Option<Vec<u8>>, expect: Expect) -> Batch {
        let previous = self.check(key, expect)?;
        self.revision += 1;
        let revision = self.revision;
        let object = value
            .as_ref()
            .map(|v| decode(key, v, revision))
            .transpose()?;
        let change = match (&previous, &object) {
            (_, None) => Change::Deleted,
            (None, Some(_)) => Change::Created,
            (Some(_), Some(_)) => Change::Updated,
        };
        let versions = self.keys.entry(key.to_string()).or_default();
        versions.push(Version {
            mod_revision: revision,
            value,
        });
        let event = StoreEvent {
            change,
            key: key.to_string(),
            object,
            previous: previous.map(Earlier::decoded),
            revision,
            unreadable: None,
        };
        self.events.push(event.clone());
        self.watchers.retain(|(prefix, sender)| {
            !key.starts_with(prefix.as_str()) || sender.send(Ok(vec![event.clone()])).is_ok()
        });
        Ok(vec![event])
    }

    /// Writes an object with its claims, as etcd's transaction does: the
    /// object's own expectation first, then the claims another holds.
    fn write_claiming(
        &mut self,
        key: &str,
        value: Option<&Value>,
        expect: Expect,
        claims: &[String],
        releases: &[String],
    ) -> Result<i64, StorageError> {
        let otherwise = match expect {
            Expect::Absent => StorageError::Exists(key.to_string()),
            Expect::At(_) => StorageError::Conflict,
        };
        let current = self.check(key, expect)?;
        let owner = value
            .or(current.as_ref().map(|c| &c.object))
            .map_or(String::new(), |o| owner_of(key, o));
        let held: Vec<&String> = claims
            .iter()
            .filter(|c| self.claims.contains_key(*c))
            .collect();
        if !held.is_empty() {
            let taken: Vec<String> = held
                .into_iter()
                .filter(|c| self.claims[*c] != owner)
                .cloned()
                .collect();
            return Err(match taken.is_empty() {
                true => otherwise,
                false => StorageError::Taken(taken),
            });
        }
        let expect = Expect::At(current.map_or(0, |c| c.mod_revision));
        let events = self.write(key, value.map(encode), expect)?;
        for claim in claims {
            self.claims.insert(claim.clone(), owner.clone());
        }
        for release in releases {
            self.claims.remove(release);
        }
        Ok(events.first().map_or(0, |e| e.revision))
    }

    /// Live keys in `[from, end of prefix)` at `revision`.
    fn live<'a>(
        &'a self,
        prefix: &'a str,
        from: &'a str,
        revision: i64,
    ) -> impl Iterator<Item = (&'a String, Stored)> + 'a {
        self.keys
            .range(from.to_string()..)
            .take_while(move |(key, _)| key.starts_with(prefix))
            .filter_map(move |(key, _)| Some((key, self.at(key, revision)?)))
    }
}

impl MemoryStorage {
    pub fn new() -> MemoryStorage {
        MemoryStorage::default()
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        // A test that panicked while holding the lock leaves usable state.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Forgets the history before `revision`, as etcd's compaction does.
    pub fn compact(&self, revision: i64) {
        let mut state = self.state();
        state.compacted = state.compacted.max(revision);
        let compacted = state.compacted;
        state.events.retain(|e| e.revision >= compacted);
        for versions in state.keys.values_mut() {
            let keep_from = versions
                .iter()
                .rposition(|v| v.mod_revision <= compacted)
                .unwrap_or(0);
            versions.drain(..keep_from);
        }
        state
            .keys
            .retain(|_, v| v.len() > 1 || v.first().is_some_and(|v| v.value.is_some()));
    }

    fn list(&self, prefix: &str, request: ListRequest<'_>) -> Result<Listing, StorageError> {
        let state = self.state();
        let current = state.revision;
        request.at.check(current)?;
        let requested = request.at.exact();
        if requested > current {
            return Err(StorageError::FutureRevision { requested, current });
        }
        if requested > 0 && requested < state.compacted {
            return Err(StorageError::Compacted {
                requested,
                compacted: Some(state.compacted),
            });
        }
        let at = if requested > 0 { requested } else { current };
        let from = request.start.unwrap_or(prefix);
        let all: Vec<(&String, Stored)> = state.live(prefix, from, at).collect();
        let total = all.len() as i64;
        let limit = match request.limit {
            1.. => request.limit.min(total),
            _ => total,
        };
        let page = &all[..limit as usize];
        let next_key = match total > limit {
            true => page.last().map(|(key, _)| format!("{key}\0")),
            false => None,
        };
        Ok(Listing {
            remaining: total - limit,
            items: page
                .iter()
                .map(|(key, s)| Object::new(key, s.object.clone(), s.mod_revision, &[]))
                .filter(|o| request.filter.is_none_or(|f| f.matches(o)))
                .map(Arc::new)
                .collect(),
            revision: current,
            next_key,
            unreadable: Vec::new(),
        })
    }

    fn open(&self, prefix: &str, from: i64) -> Result<EventStream, StorageError> {
        let mut state = self.state();
        if from > 0 && from < state.compacted {
            return Err(StorageError::Compacted {
                requested: from,
                compacted: Some(state.compacted),
            });
        }
        let from = if from > 0 { from } else { state.revision + 1 };
        let (sender, receiver) = mpsc::unbounded_channel();
        for event in state.events.iter() {
            if event.revision >= from && event.key.starts_with(prefix) {
                let _ = sender.send(Ok(vec![event.clone()]));
            }
        }
        state.watchers.push((prefix.to_string(), sender));
        let stream = futures::stream::unfold(receiver, |mut receiver| async move {
            receiver.recv().await.map(|batch| (batch, receiver))
        });
        Ok(stream.boxed())
    }
}

impl Interface for MemoryStorage {
    fn get<'a>(&'a self, key: &'a str) -> StorageFuture<'a, Option<Stored>> {
        let state = self.state();
        let found = state.at(key, state.revision);
        Box::pin(async move { Ok(found) })
    }

    fn get_list<'a>(
        &'a self,
        prefix: &'a str,
        request: ListRequest<'a>,
    ) -> StorageFuture<'a, Listing> {
        let listing = self.list(prefix, request);
        Box::pin(async move { listing })
    }

    fn count<'a>(&'a self, prefix: &'a str) -> StorageFuture<'a, i64> {
        let state = self.state();
        let count = state.live(prefix, prefix, state.revision).count() as i64;
        Box::pin(async move { Ok(count) })
    }

    fn freshness<'a>(&'a self, key: &'a str, prefix: bool) -> StorageFuture<'a, Freshness> {
        let state = self.state();
        let live: Vec<Stored> = match prefix {
            true => state
                .live(key, key, state.revision)
                .map(|(_, s)| s)
                .collect(),
            false => state.at(key, state.revision).into_iter().collect(),
        };
        let freshness = Freshness {
            revision: state.revision,
            newest: live.iter().map(|s| s.mod_revision).max().unwrap_or(0),
            count: live.len() as i64,
        };
        Box::pin(async move { Ok(freshness) })
    }

    fn watch<'a>(&'a self, prefix: &'a str, from: i64) -> StorageFuture<'a, EventStream> {
        let opened = self.open(prefix, from);
        Box::pin(async move { opened })
    }

    fn create_claiming<'a>(
        &'a self,
        key: &'a str,
        object: &'a Value,
        claims: &'a [String],
        _ttl: Option<Duration>,
    ) -> StorageFuture<'a, i64> {
        let written = self
            .state()
            .write_claiming(key, Some(object), Expect::Absent, claims, &[]);
        Box::pin(async move { written })
    }

    fn update_claiming<'a>(
        &'a self,
        key: &'a str,
        object: &'a Value,
        mod_revision: i64,
        claims: &'a [String],
        releases: &'a [String],
        _ttl: Option<Duration>,
    ) -> StorageFuture<'a, i64> {
        let expect = Expect::At(mod_revision);
        let written = self
            .state()
            .write_claiming(key, Some(object), expect, claims, releases);
        Box::pin(async move { written })
    }

    fn delete_releasing<'a>(
        &'a self,
        key: &'a str,
        mod_revision: i64,
        releases: &'a [String],
    ) -> StorageFuture<'a, i64> {
        let expect = Expect::At(mod_revision);
        let written = self
            .state()
            .write_claiming(key, None, expect, &[], releases);
        Box::pin(async move { written })
    }
}
