//! Objects, the event window, and the watchers served from them. Every
//! object is an `Arc<Object>` (see `storage::Object`): the current state,
//! the window's events and the watchers' queues share one copy of each
//! version.

use std::borrow::Borrow;
use std::collections::{BTreeSet, VecDeque};
use std::ops::Bound;
use std::sync::Arc;

use tokio::sync::mpsc;

use super::unreadable::Unreadable;
use crate::storage::{Freshness, Object, StorageError};

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum EventType {
    Added,
    Modified,
    Deleted,
    Bookmark,
    Error,
}

impl EventType {
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Added => "ADDED",
            EventType::Modified => "MODIFIED",
            EventType::Deleted => "DELETED",
            EventType::Bookmark => "BOOKMARK",
            EventType::Error => "ERROR",
        }
    }
}

/// A change seen in the store, at `revision`; its key is the object's.
/// A DELETED event's object is the last state, at the delete's revision.
#[derive(Debug, Clone)]
pub struct Event {
    pub kind: EventType,
    pub object: Arc<Object>,
    /// The object before the change (for selector transitions).
    pub previous: Option<Arc<Object>>,
    pub revision: i64,
}

/// What a watcher's stream carries: the event as this watcher sees it.
#[derive(Debug, Clone)]
pub struct WatchItem {
    pub kind: EventType,
    pub object: Arc<Object>,
    pub previous: Option<Arc<Object>>,
}

/// How deep a watcher's buffer may get before it is cut off, so one slow
/// consumer never holds up the others.
pub const WATCHER_BUFFER: usize = 1024;

/// Does an object belong to a watch (namespace, selectors, key prefix)?
pub type Filter = Box<dyn Fn(&Object) -> bool + Send + Sync>;

/// A registered watcher: its channel, filter, and where it starts.
pub struct Watcher {
    pub sender: mpsc::Sender<WatchItem>,
    pub filter: Filter,
    pub bookmarks: bool,
    /// Events at or before this revision were already seen by the client
    /// (the cache may lag the list it read from the store).
    pub after: i64,
}

/// A current object, ordered by its key (the store's order), so the set
/// holds each key once without a second copy of it.
#[derive(Debug, Clone)]
struct Keyed(Arc<Object>);

impl Borrow<str> for Keyed {
    fn borrow(&self) -> &str {
        self.0.key()
    }
}

impl PartialEq for Keyed {
    fn eq(&self, other: &Self) -> bool {
        self.0.key() == other.0.key()
    }
}

impl Eq for Keyed {}

impl PartialOrd for Keyed {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Keyed {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0.key().cmp(other.0.key())
    }
}

pub struct WatchCache {
    objects: BTreeSet<Keyed>,
    window: VecDeque<Event>,
    capacity: usize,
    /// The newest revision the cache reflects.
    revision: i64,
    /// Watches from any revision ≥ this can be replayed from the window.
    oldest: i64,
    watchers: Vec<Watcher>,
    /// Keys in the store whose values cannot be read (see unreadable.rs).
    pub unreadable: Unreadable,
}

impl WatchCache {
    /// A cache holding `objects` as of `revision`.
    pub fn new(
        objects: impl IntoIterator<Item = Arc<Object>>,
        revision: i64,
        capacity: usize,
    ) -> WatchCache {
        WatchCache {
            objects: objects.into_iter().map(Keyed).collect(),
            window: VecDeque::with_capacity(capacity),
            capacity,
            revision,
            oldest: revision,
            watchers: Vec::new(),
            unreadable: Unreadable::default(),
        }
    }

    /// A value at `key` that cannot be read was written at `revision`: the
    /// key answers `error` from now on. The object it replaces leaves the
    /// cache without an event (there is no readable state to send).
    pub fn set_unreadable(&mut self, key: &str, error: StorageError, revision: i64) {
        self.revision = self.revision.max(revision);
        self.objects.remove(key);
        self.unreadable.insert(key, error);
    }

    /// An unreadable key was deleted at `revision`.
    pub fn forget_unreadable(&mut self, key: &str, revision: i64) {
        if self.unreadable.get(key).is_some() {
            self.revision = self.revision.max(revision);
            self.unreadable.remove(key);
        }
    }

    pub fn revision(&self) -> i64 {
        self.revision
    }

    /// The oldest revision a watch can resume after.
    pub fn oldest(&self) -> i64 {
        self.oldest
    }

    /// A watcher's buffer size: the live margin plus room for every
    /// initial event it could be sent (the window's events from `from`, or
    /// every object), so a watch that replays much history or starts with
    /// the whole state is never refused for it, as kube's never is.
    pub fn buffer_for(&self, from: Option<i64>) -> usize {
        WATCHER_BUFFER
            + match from {
                Some(_) => self.window.len(),
                None => self.objects.len(),
            }
            + 1
    }

    pub fn watcher_count(&self) -> usize {
        self.watchers.len()
    }

    pub fn objects(&self) -> impl Iterator<Item = &Arc<Object>> {
        self.objects.iter().map(|k| &k.0)
    }

    /// The object stored under `key`.
    pub fn get(&self, key: &str) -> Option<&Arc<Object>> {
        self.objects.get(key).map(|k| &k.0)
    }

    /// Objects whose keys start with `prefix`, in key order, from `start`
    /// on (inclusive) when given.
    pub fn under<'a>(
        &'a self,
        prefix: &'a str,
        start: Option<&str>,
    ) -> impl Iterator<Item = &'a Arc<Object>> + 'a {
        let from = start.filter(|s| *s > prefix).unwrap_or(prefix);
        self.objects
            .range::<str, _>((Bound::Included(from), Bound::Unbounded))
            .map(|k| &k.0)
            .take_while(move |o| o.key().starts_with(prefix))
    }

    /// Does the cache hold the store's state as of a linearizable read
    /// of `key` (or of every key under it, when `prefix`)? See
    /// [`Freshness`] for why the count settles it.
    pub fn is_fresh(&self, key: &str, prefix: bool, store: &Freshness) -> bool {
        if self.revision >= store.revision {
            return true;
        }
        // Unreadable keys are in the store's count too.
        let count = match prefix {
            true => (self.under(key, None).count() + self.unreadable.count_under(key)) as i64,
            false => (self.objects.contains(key) || self.unreadable.get(key).is_some()) as i64,
        };
        self.revision >= store.newest && count == store.count
    }

    /// Forgets the window's events at or before `revision`, as if it had
    /// held no more (the cache's own compaction, for tests).
    pub fn forget_through(&mut self, revision: i64) {
        while self.window.front().is_some_and(|e| e.revision <= revision) {
            self.window.pop_front();
        }
        self.oldest = self.oldest.max(revision);
    }

    /// Records a store change and fans it out.
    pub fn apply(&mut self, event: Event) {
        self.revision = self.revision.max(event.revision);
        self.unreadable.remove(event.object.key());
        match event.kind {
            EventType::Deleted => self.objects.remove(event.object.key()),
            _ => self.objects.replace(Keyed(event.object.clone())).is_some(),
        };
        self.watchers.retain(|w| deliver(w, &event));
        if self.window.len() == self.capacity {
            if let Some(evicted) = self.window.pop_front() {
                self.oldest = evicted.revision;
            }
        }
        self.window.push_back(event);
    }

    /// Registers a watcher from `from` (exclusive). None replays the
    /// current state as ADDED events first. The initial items go into the
    /// channel before any live event, so order holds. A `from` older than
    /// the window is `Compacted` with the oldest revision it can serve.
    pub fn watch(
        &mut self,
        watcher: Watcher,
        from: Option<i64>,
        initial_end_bookmark: Option<Arc<Object>>,
    ) -> Result<(), StorageError> {
        let initial: Vec<WatchItem> = match from {
            Some(rv) if rv < self.oldest => {
                return Err(StorageError::Compacted {
                    requested: rv,
                    compacted: Some(self.oldest),
                });
            }
            Some(rv) => self
                .window
                .iter()
                .filter(|e| e.revision > rv)
                .filter_map(|e| transition(&watcher, e))
                .collect(),
            None => self
                .objects()
                .filter(|o| (watcher.filter)(o))
                .map(|o| item(EventType::Added, o.clone(), None))
                .collect(),
        };
        let end = initial_end_bookmark.map(|b| item(EventType::Bookmark, b, None));
        for item in initial.into_iter().chain(end) {
            if watcher.sender.try_send(item).is_err() {
                return Err(StorageError::Unavailable(
                    "too many initial events for one watch; use a list first".into(),
                ));
            }
        }
        self.watchers.push(watcher);
        Ok(())
    }

    /// Sends a BOOKMARK at the cache's revision to watchers that asked.
    pub fn bookmark(&mut self, make: impl Fn(i64) -> Object) {
        let object = Arc::new(make(self.revision));
        self.watchers.retain(|w| {
            !w.bookmarks
                || w.sender
                    .try_send(item(EventType::Bookmark, object.clone(), None))
                    .is_ok()
        });
    }

    /// Drops watchers whose clients went away.
    pub fn prune(&mut self) {
        self.watchers.retain(|w| !w.sender.is_closed());
    }
}

fn item(kind: EventType, object: Arc<Object>, previous: Option<Arc<Object>>) -> WatchItem {
    WatchItem {
        kind,
        object,
        previous,
    }
}

/// The event as this watcher sees it: an object that starts matching its
/// filter is ADDED, one that stops matching is DELETED.
fn transition(watcher: &Watcher, event: &Event) -> Option<WatchItem> {
    let now = event.kind != EventType::Deleted && (watcher.filter)(&event.object);
    let before = event.previous.as_ref().is_some_and(|p| (watcher.filter)(p));
    let kind = match (before, now) {
        (false, false) => return None,
        (false, true) => EventType::Added,
        (true, true) => event.kind,
        (true, false) => EventType::Deleted,
    };
    Some(item(kind, event.object.clone(), event.previous.clone()))
}

/// False when the watcher must go: its client left, or it fell behind.
fn deliver(watcher: &Watcher, event: &Event) -> bool {
    if event.revision <= watcher.after {
        return !watcher.sender.is_closed();
    }
    match transition(watcher, event) {
        None => !watcher.sender.is_closed(),
        Some(item) => watcher.sender.try_send(item).is_ok(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj(name: &str, app: &str) -> Arc<Object> {
        let value = json!({"metadata": {"name": name, "labels": {"app": app}}});
        Arc::new(Object::new(name, value, 1, &[]))
    }

    fn event(kind: EventType, name: &str, app: &str, prev: Option<&str>, revision: i64) -> Event {
        Event {
            kind,
            object: obj(name, app),
            previous: prev.map(|p| obj(name, p)),
            revision,
        }
    }

    fn watcher(app: &'static str) -> (Watcher, mpsc::Receiver<WatchItem>) {
        let (sender, receiver) = mpsc::channel(WATCHER_BUFFER);
        let filter = Box::new(move |o: &Object| o.label("app") == Some(app));
        (
            Watcher {
                sender,
                filter,
                bookmarks: true,
                after: 0,
            },
            receiver,
        )
    }

    #[test]
    fn replays_from_a_revision_and_reports_transitions() {
        let mut cache = WatchCache::new([obj("a", "web")], 10, 100);
        cache.apply(event(EventType::Modified, "a", "db", Some("web"), 11));
        cache.apply(event(EventType::Added, "b", "web", None, 12));
        let (w, mut rx) = watcher("web");
        cache.watch(w, Some(10), None).unwrap();
        assert_eq!(rx.try_recv().unwrap().kind, EventType::Deleted);
        assert_eq!(rx.try_recv().unwrap().kind, EventType::Added);
        cache.apply(event(EventType::Modified, "a", "web", Some("db"), 13));
        assert_eq!(rx.try_recv().unwrap().kind, EventType::Added);
    }

    #[test]
    fn a_replay_longer_than_the_live_buffer_is_sent_whole() {
        let count = WATCHER_BUFFER as i64 * 2;
        let mut cache = WatchCache::new(Vec::<Arc<Object>>::new(), 10, count as usize);
        for at in 0..count {
            let name = format!("o{at}");
            cache.apply(event(EventType::Added, &name, "web", None, 11 + at));
        }
        let (sender, mut rx) = mpsc::channel(cache.buffer_for(Some(10)));
        let filter = Box::new(|o: &Object| o.label("app") == Some("web"));
        let w = Watcher {
            sender,
            filter,
            bookmarks: false,
            after: 10,
        };
        cache.watch(w, Some(10), None).unwrap();
        assert_eq!(
            std::iter::from_fn(|| rx.try_recv().ok()).count(),
            count as usize
        );
    }

    #[test]
    fn too_old_is_expired_and_none_lists_state() {
        let mut cache = WatchCache::new([obj("a", "web")], 10, 1);
        cache.apply(event(EventType::Added, "b", "web", None, 11));
        cache.apply(event(EventType::Added, "c", "web", None, 12));
        let (w, _rx) = watcher("web");
        assert_eq!(
            cache.watch(w, Some(10), None).unwrap_err(),
            StorageError::Compacted {
                requested: 10,
                compacted: Some(11)
            }
        );
        let (w, mut rx) = watcher("web");
        cache.watch(w, None, Some(obj("bookmark", "-"))).unwrap();
        let kinds: Vec<_> = std::iter::from_fn(|| rx.try_recv().ok())
            .map(|i| i.kind)
            .collect();
        assert_eq!(
            kinds,
            vec![
                EventType::Added,
                EventType::Added,
                EventType::Added,
                EventType::Bookmark
            ]
        );
    }

    #[test]
    fn fresh_once_every_change_up_to_the_store_revision_is_in() {
        use crate::storage::Freshness;
        let objects = [("p/a", "x"), ("p/b", "x"), ("q/c", "x")].map(|(k, app)| obj(k, app));
        let mut cache = WatchCache::new(objects, 10, 100);
        // Nothing changed under p/ since 10; the store is at 20 (writes elsewhere).
        let quiet = Freshness {
            revision: 20,
            newest: 10,
            count: 2,
        };
        assert!(cache.is_fresh("p/", true, &quiet));
        // p/b was deleted at 15: the newest live write is still 10.
        let deleted = Freshness {
            revision: 20,
            newest: 10,
            count: 1,
        };
        assert!(!cache.is_fresh("p/", true, &deleted));
        cache.apply(event(EventType::Deleted, "p/b", "x", Some("x"), 15));
        assert!(cache.is_fresh("p/", true, &deleted));
        // p/a was rewritten at 18: not fresh until that event is in.
        let rewritten = Freshness {
            revision: 20,
            newest: 18,
            count: 1,
        };
        assert!(!cache.is_fresh("p/", true, &rewritten));
        assert!(!cache.is_fresh("p/a", false, &rewritten));
        cache.apply(event(EventType::Modified, "p/a", "y", Some("x"), 18));
        assert!(cache.is_fresh("p/", true, &rewritten));
        assert!(cache.is_fresh(
            "p/a",
            false,
            &Freshness {
                revision: 30,
                newest: 18,
                count: 1
            }
        ));
        assert!(!cache.is_fresh(
            "p/b",
            false,
            &Freshness {
                revision: 30,
                newest: 25,
                count: 1
            }
        ));
        assert_eq!(cache.under("p/", Some("p/a\0")).count(), 0);
        assert_eq!(cache.under("p/", None).count(), 1);
    }

    #[test]
    fn slow_watchers_are_cut_off() {
        let mut cache = WatchCache::new(Vec::<Arc<Object>>::new(), 1, 10);
        let (sender, _rx) = mpsc::channel(1);
        cache
            .watch(
                Watcher {
                    sender,
                    filter: Box::new(|_| true),
                    bookmarks: false,
                    after: 0,
                },
                Some(1),
                None,
            )
            .unwrap();
        cache.apply(event(EventType::Added, "a", "x", None, 2));
        cache.apply(event(EventType::Added, "b", "x", None, 3));
        assert_eq!(cache.watcher_count(), 0);
    }
}
