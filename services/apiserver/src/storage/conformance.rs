//! One table of cases every [`Interface`] must pass, run against the
//! in-memory storage, the etcd one on a real `etcd` process and on a
//! `capstan-store` process (`conformance_processes.rs`), and the Cacher in
//! front of each (`cache/cacher_tests.rs`):
//! revisions, preconditions, paging snapshots, watch from a revision, 410
//! after compaction, guaranteed-update conflicts. Each case works under
//! its own prefix, so the cases can share one store.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use futures::StreamExt;
use serde_json::{json, Value};

use super::interface::{Change, GuaranteedUpdate, Interface, ListRequest, Preconditions, ReadAt};
use super::{EventStream, MemoryStorage, StorageError, StoreEvent};

/// A store under test, and how to compact it (not part of the interface:
/// compaction belongs to the store's operator, see `compactor.rs`).
pub struct Backend {
    pub storage: Arc<dyn Interface>,
    pub compact: Box<dyn Fn(i64) -> BoxFuture<'static, ()> + Send + Sync>,
}

type Case = for<'a> fn(&'a Backend, String) -> BoxFuture<'a, ()>;

pub const CASES: &[(&str, Case)] = &[
    ("create, get and revisions", |b, p| {
        Box::pin(create_and_get(b, p))
    }),
    ("update compares the revision", |b, p| {
        Box::pin(update_compares(b, p))
    }),
    ("delete with preconditions", |b, p| {
        Box::pin(delete_preconditions(b, p))
    }),
    ("paging reads one snapshot", |b, p| {
        Box::pin(paging_snapshot(b, p))
    }),
    ("a future revision is refused", |b, p| {
        Box::pin(future_revision(b, p))
    }),
    ("watch from a revision", |b, p| Box::pin(watch_from(b, p))),
    ("compacted history is gone", |b, p| {
        Box::pin(compacted(b, p))
    }),
    ("guaranteed update retries", |b, p| {
        Box::pin(guaranteed_update(b, p))
    }),
    ("count and freshness", |b, p| {
        Box::pin(count_and_freshness(b, p))
    }),
    ("claims are taken and released with their object", |b, p| {
        Box::pin(claims(b, p))
    }),
];

/// Runs every case, each under `<root>/<case number>/`.
pub async fn run_all(backend: &Backend, root: &str) {
    for (index, (name, case)) in CASES.iter().enumerate() {
        eprintln!("conformance: {name}");
        case(backend, format!("{root}/{index}/")).await;
    }
}

fn object(name: &str, data: &str) -> Value {
    json!({"kind": "ConfigMap", "apiVersion": "v1",
        "metadata": {"name": name, "uid": format!("uid-{name}")}, "data": {"v": data}})
}

async fn create_and_get(b: &Backend, p: String) {
    let s = b.storage.as_ref();
    let key = format!("{p}a");
    let revision = s.create(&key, &object("a", "1"), None).await.unwrap();
    let got = s
        .get(&key)
        .await
        .unwrap()
        .expect("the created object is there");
    assert_eq!(got.mod_revision, revision);
    assert_eq!(
        got.object["metadata"]["resourceVersion"],
        revision.to_string()
    );
    assert_eq!(got.object["data"]["v"], "1");
    let again = s.create(&key, &object("a", "2"), None).await;
    assert_eq!(again, Err(StorageError::Exists(key.clone())));
    let later = s
        .create(&format!("{p}b"), &object("b", "1"), None)
        .await
        .unwrap();
    assert!(later > revision, "every write makes a newer revision");
    assert_eq!(s.get(&format!("{p}none")).await.unwrap(), None);
}

async fn update_compares(b: &Backend, p: String) {
    let s = b.storage.as_ref();
    let key = format!("{p}a");
    let first = s.create(&key, &object("a", "1"), None).await.unwrap();
    let second = s.update(&key, &object("a", "2"), first).await.unwrap();
    assert!(second > first);
    let stale = s.update(&key, &object("a", "3"), first).await;
    assert_eq!(stale, Err(StorageError::Conflict));
    assert_eq!(s.get(&key).await.unwrap().unwrap().object["data"]["v"], "2");
    let missing = s.update(&format!("{p}none"), &object("none", "1"), 1).await;
    assert_eq!(missing, Err(StorageError::Conflict));
}

async fn delete_preconditions(b: &Backend, p: String) {
    let s = b.storage.as_ref();
    let key = format!("{p}a");
    let revision = s.create(&key, &object("a", "1"), None).await.unwrap();
    let wrong_uid = Preconditions {
        uid: Some("other".into()),
        ..Default::default()
    };
    let refused = s.delete(&key, &wrong_uid).await;
    assert!(matches!(
        refused,
        Err(StorageError::Precondition { what: "UID", .. })
    ));
    let wrong_rv = Preconditions {
        resource_version: Some((revision + 100).to_string()),
        ..Default::default()
    };
    let refused = s.delete(&key, &wrong_rv).await;
    assert!(matches!(
        refused,
        Err(StorageError::Precondition {
            what: "ResourceVersion",
            ..
        })
    ));
    let right = Preconditions {
        uid: Some("uid-a".into()),
        resource_version: Some(revision.to_string()),
    };
    let deleted = s.delete(&key, &right).await.unwrap();
    assert_eq!(deleted.mod_revision, revision);
    assert_eq!(s.get(&key).await.unwrap(), None);
    let gone = s.delete(&key, &Preconditions::default()).await;
    assert_eq!(gone, Err(StorageError::NotFound(key)));
}

async fn paging_snapshot(b: &Backend, p: String) {
    let s = b.storage.as_ref();
    for name in ["a", "b", "c", "d", "e"] {
        s.create(&format!("{p}{name}"), &object(name, "1"), None)
            .await
            .unwrap();
    }
    let first = s
        .get_list(
            &p,
            ListRequest {
                limit: 2,
                ..Default::default()
            },
        )
        .await
        .unwrap();
    let names = |items: &[Arc<super::Object>]| -> Vec<String> {
        items.iter().map(|i| i.name().to_string()).collect()
    };
    assert_eq!(names(&first.items), ["a", "b"]);
    assert_eq!(first.remaining, 3);
    let next = first.next_key.clone().expect("more remain");
    // Writes after the first page do not show in the next ones.
    let c = s.get(&format!("{p}c")).await.unwrap().unwrap();
    s.delete_at(&format!("{p}c"), c.mod_revision).await.unwrap();
    s.create(&format!("{p}f"), &object("f", "1"), None)
        .await
        .unwrap();
    let request = ListRequest {
        start: Some(&next),
        at: ReadAt::Exact(first.revision),
        limit: 2,
        ..Default::default()
    };
    let second = s.get_list(&p, request).await.unwrap();
    assert_eq!(names(&second.items), ["c", "d"]);
    assert_eq!(second.remaining, 1);
    let request = ListRequest {
        start: second.next_key.as_deref(),
        at: ReadAt::Exact(first.revision),
        limit: 2,
        ..Default::default()
    };
    let third = s.get_list(&p, request).await.unwrap();
    assert_eq!(names(&third.items), ["e"]);
    assert_eq!(third.next_key, None);
    let now = s.get_list(&p, ListRequest::default()).await.unwrap();
    assert_eq!(names(&now.items), ["a", "b", "d", "e", "f"]);
    assert!(now.revision > first.revision);
}

async fn future_revision(b: &Backend, p: String) {
    let s = b.storage.as_ref();
    let current = s
        .create(&format!("{p}a"), &object("a", "1"), None)
        .await
        .unwrap();
    let request = ListRequest {
        at: ReadAt::Exact(current + 1000),
        ..Default::default()
    };
    match s.get_list(&p, request).await {
        Err(StorageError::FutureRevision {
            requested,
            current: now,
        }) => {
            assert_eq!(requested, current + 1000);
            assert!(now >= current, "the current revision is reported");
        }
        other => panic!("a future revision must be refused, got {other:?}"),
    }
}

/// The next `n` events of `stream`, failing after a generous deadline.
async fn events(stream: &mut EventStream, n: usize) -> Vec<StoreEvent> {
    let mut seen = Vec::new();
    while seen.len() < n {
        let next = tokio::time::timeout(Duration::from_secs(20), stream.next()).await;
        match next {
            Ok(Some(Ok(batch))) => seen.extend(batch),
            Ok(other) => panic!("the watch ended after {} events: {other:?}", seen.len()),
            Err(_) => panic!("no watch event within 20s after {} events", seen.len()),
        }
    }
    seen
}

async fn watch_from(b: &Backend, p: String) {
    let s = b.storage.as_ref();
    let key = format!("{p}a");
    let created = s.create(&key, &object("a", "1"), None).await.unwrap();
    let updated = s.update(&key, &object("a", "2"), created).await.unwrap();
    s.delete_at(&key, updated).await.unwrap();
    let mut all = s.watch(&p, created).await.unwrap();
    let seen = events(&mut all, 3).await;
    let changes: Vec<Change> = seen.iter().map(|e| e.change).collect();
    assert_eq!(changes, [Change::Created, Change::Updated, Change::Deleted]);
    assert_eq!(seen[0].revision, created);
    assert_eq!(seen[1].revision, updated);
    assert_eq!(seen[1].object.as_ref().unwrap().object["data"]["v"], "2");
    assert_eq!(seen[1].previous.as_ref().unwrap().mod_revision, created);
    assert_eq!(seen[2].object, None);
    let previous = seen[2].previous.as_ref().unwrap().read().unwrap();
    assert_eq!(previous.object["data"]["v"], "2");
    // From the middle: only what came at or after it, then live events.
    let mut later = s.watch(&p, updated).await.unwrap();
    let seen = events(&mut later, 2).await;
    assert_eq!(seen[0].revision, updated);
    let live = s
        .create(&format!("{p}b"), &object("b", "1"), None)
        .await
        .unwrap();
    let seen = events(&mut later, 1).await;
    assert_eq!((seen[0].change, seen[0].revision), (Change::Created, live));
    // Keys outside the prefix are not seen.
    let other = format!("{}x/", p.trim_end_matches('/'));
    s.create(&format!("{other}c"), &object("c", "1"), None)
        .await
        .unwrap();
    let mine = s
        .create(&format!("{p}d"), &object("d", "1"), None)
        .await
        .unwrap();
    assert_eq!(events(&mut later, 1).await[0].revision, mine);
}

async fn compacted(b: &Backend, p: String) {
    let s = b.storage.as_ref();
    let key = format!("{p}a");
    let old = s.create(&key, &object("a", "1"), None).await.unwrap();
    let new = s.update(&key, &object("a", "2"), old).await.unwrap();
    (b.compact)(new).await;
    let request = ListRequest {
        at: ReadAt::Exact(old),
        ..Default::default()
    };
    let listed = s.get_list(&p, request).await;
    assert!(
        matches!(listed, Err(StorageError::Compacted { requested, .. }) if requested == old),
        "a list at a compacted revision: {listed:?}"
    );
    // etcd says so on the stream, after confirming the watch.
    let refused = match s.watch(&p, old).await {
        Err(err) => err,
        Ok(mut stream) => {
            match tokio::time::timeout(Duration::from_secs(20), stream.next()).await {
                Ok(Some(Err(err))) => err,
                other => panic!("a watch from a compacted revision must be refused: {other:?}"),
            }
        }
    };
    assert_eq!(
        refused,
        StorageError::Compacted {
            requested: old,
            compacted: Some(new)
        },
        "the refusal says where history starts"
    );
    let at = ListRequest {
        at: ReadAt::Exact(new),
        ..Default::default()
    };
    assert_eq!(s.get_list(&p, at).await.unwrap().items.len(), 1);
}

async fn guaranteed_update(b: &Backend, p: String) {
    let s = b.storage.as_ref();
    let key = format!("{p}a");
    s.create(&key, &object("a", "0"), None).await.unwrap();
    let attempts = AtomicUsize::new(0);
    // The first attempt loses a race with another writer: it is run again
    // on the newer object, so neither write is lost.
    let written = s
        .guaranteed_update::<StorageError, _, _, Value>(
            &key,
            &Preconditions::default(),
            |current| {
                let n = attempts.fetch_add(1, Ordering::SeqCst);
                let (key, storage) = (key.clone(), b.storage.clone());
                async move {
                    if n == 0 {
                        let mut rival = current.object.clone();
                        rival["data"]["rival"] = "yes".into();
                        storage.update(&key, &rival, current.mod_revision).await?;
                    }
                    let mut mine = current.object;
                    mine["data"]["v"] = "1".into();
                    Ok(mine)
                }
            },
        )
        .await
        .unwrap();
    assert_eq!(attempts.load(Ordering::SeqCst), 2);
    let stored = s.get(&key).await.unwrap().unwrap();
    assert_eq!(stored.object["data"], json!({"v": "1", "rival": "yes"}));
    assert_eq!(stored.mod_revision, written.mod_revision);
    let pinned = Preconditions {
        uid: Some("other".into()),
        ..Default::default()
    };
    let refused = s
        .guaranteed_update::<StorageError, _, _, Value>(
            &key,
            &pinned,
            |c| async move { Ok(c.object) },
        )
        .await;
    assert!(matches!(refused, Err(StorageError::Precondition { .. })));
    let missing = format!("{p}none");
    let none = s
        .guaranteed_update::<StorageError, _, _, Value>(
            &missing,
            &Preconditions::default(),
            |c| async move { Ok(c.object) },
        )
        .await;
    assert_eq!(none, Err(StorageError::NotFound(missing)));
}

async fn count_and_freshness(b: &Backend, p: String) {
    let s = b.storage.as_ref();
    assert_eq!(s.count(&p).await.unwrap(), 0);
    s.create(&format!("{p}a"), &object("a", "1"), None)
        .await
        .unwrap();
    let newest = s
        .create(&format!("{p}b"), &object("b", "1"), None)
        .await
        .unwrap();
    assert_eq!(s.count(&p).await.unwrap(), 2);
    let fresh = s.freshness(&p, true).await.unwrap();
    assert_eq!((fresh.count, fresh.newest), (2, newest));
    assert!(fresh.revision >= newest);
    let one = s.freshness(&format!("{p}a"), false).await.unwrap();
    assert_eq!(one.count, 1);
    assert_eq!(s.current_revision().await.unwrap(), fresh.revision);
}

async fn claims(b: &Backend, p: String) {
    let s = b.storage.as_ref();
    let claim = vec![format!("{p}claims/ip-10.0.0.1")];
    let (a, other) = (format!("{p}a"), format!("{p}b"));
    let created = s
        .create_claiming(&a, &object("a", "1"), &claim, None)
        .await
        .unwrap();
    let taken = s
        .create_claiming(&other, &object("b", "1"), &claim, None)
        .await;
    assert!(
        matches!(&taken, Err(StorageError::Taken(t)) if *t == claim),
        "{taken:?}"
    );
    assert_eq!(
        s.get(&other).await.unwrap(),
        None,
        "nothing of a refused write is kept"
    );
    let again = s.create_claiming(&a, &object("a", "2"), &[], None).await;
    assert!(matches!(again, Err(StorageError::Exists(_))));
    let stale = s
        .update_claiming(&a, &object("a", "2"), created - 1, &[], &claim, None)
        .await;
    assert!(matches!(stale, Err(StorageError::Conflict)));
    let released = s
        .update_claiming(&a, &object("a", "2"), created, &[], &claim, None)
        .await
        .unwrap();
    let b_rev = s
        .create_claiming(&other, &object("b", "1"), &claim, None)
        .await
        .unwrap();
    assert!(b_rev > released);
    s.delete_releasing(&other, b_rev, &claim).await.unwrap();
    s.create_claiming(&format!("{p}c"), &object("c", "1"), &claim, None)
        .await
        .unwrap();
}

#[tokio::test]
async fn the_memory_storage_conforms() {
    let memory = Arc::new(MemoryStorage::new());
    let compacting = memory.clone();
    let backend = Backend {
        storage: memory,
        compact: Box::new(move |revision| {
            compacting.compact(revision);
            Box::pin(async {})
        }),
    };
    run_all(&backend, "/registry/conformance").await;
}
