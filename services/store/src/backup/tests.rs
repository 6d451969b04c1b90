use std::io::Write;
use std::sync::Arc;

use capstan_proto::internal::StoredLease;
use prost::Message;

use super::*;
use crate::apply::lease_key;
use crate::storage::{SledBackend, Space};

fn store(dir: &Path) -> MvccStore {
    let backend = Arc::new(SledBackend::open(&dir.join("db")).unwrap());
    MvccStore::open(backend).unwrap()
}

/// A store with history: overwrites, deletions, a lease and a compaction.
fn store_with_history(dir: &Path, keys: usize) -> MvccStore {
    let mvcc = store(dir);
    let mut view = mvcc.write();
    for i in 0..keys {
        view.put(format!("k{i:05}").as_bytes(), vec![7; 100], 0)
            .unwrap();
    }
    view.finish(2).unwrap();
    let mut view = mvcc.write();
    view.put(b"k00000", b"second".to_vec(), 0).unwrap();
    view.delete(b"k00001").unwrap();
    view.put_record(
        lease_key(42),
        StoredLease { id: 42, ttl: 60 }.encode_to_vec(),
    );
    view.put(b"leased", b"x".to_vec(), 42).unwrap();
    add_access_rules(&mut view);
    view.finish(3).unwrap();
    let mut view = mvcc.write();
    view.put(b"k00002", b"third".to_vec(), 0).unwrap();
    view.finish(4).unwrap();
    let mut view = mvcc.write();
    view.compact(3).unwrap();
    view.finish(5).unwrap();
    mvcc.settle_compaction();
    mvcc
}

/// A user with a role on a prefix, and auth on, as records.
fn add_access_rules(view: &mut crate::mvcc::WriteView) {
    use crate::auth::Records;
    use capstan_proto::authpb::{Permission, Role, User};
    view.put_user(&User {
        name: b"app".to_vec(),
        password: b"$2a$04$hash".to_vec(),
        roles: vec!["app-role".into()],
        options: None,
    });
    view.put_role(&Role {
        name: b"app-role".to_vec(),
        key_permission: vec![Permission {
            perm_type: 2,
            key: b"/app/".to_vec(),
            range_end: b"/app0".to_vec(),
        }],
    });
    view.put_enabled(true);
    view.put_revision(7);
}

/// The saved stream, in chunks of at most 4 KiB, as one file.
fn saved(mvcc: &MvccStore, dir: &Path) -> std::path::PathBuf {
    let mut stream = BackupStream::create(mvcc, dir).unwrap();
    let total = stream.remaining();
    let path = dir.join("snapshot.db");
    let mut file = File::create(&path).unwrap();
    let mut sent = 0;
    while let Some(chunk) = stream.next_chunk(4096).unwrap() {
        assert!(chunk.len() <= 4096);
        sent += chunk.len() as u64;
        file.write_all(&chunk).unwrap();
        assert_eq!(stream.remaining(), total - sent);
    }
    path
}

/// The records a backup carries: revisions, leases, the compaction and
/// the access rules.
fn carried(mvcc: &MvccStore) -> Vec<(Vec<u8>, Vec<u8>)> {
    let all = mvcc.backend().scan(Space::Mvcc, &[], None).unwrap();
    let metas: [&[u8]; 3] = [b"m/compact_rev", b"m/auth_enabled", b"m/auth_revision"];
    all.into_iter()
        .filter(|(k, _)| matches!(k[0], b'r' | b'l' | b'u' | b'o') || metas.contains(&k.as_slice()))
        .collect()
}

#[test]
fn a_saved_store_restores_with_every_revision_lease_the_compaction_and_the_rules() {
    let dir = tempfile::tempdir().unwrap();
    let source = store_with_history(&dir.path().join("source"), 3000);
    let path = saved(&source, dir.path());
    assert_eq!(std::fs::metadata(&path).unwrap().len() % 512, 32);
    let target = store(&dir.path().join("target"));
    restore(&path, &target).unwrap();
    let records = carried(&target);
    assert!(records.len() > 3000);
    assert_eq!(records, carried(&source));
    assert_eq!(target.current_revision(), source.current_revision());
    assert_eq!(target.compact_revision(), 3);
    let rules = crate::auth::AuthState::load(&**target.backend()).unwrap();
    assert!(rules.enabled && rules.revision == 7);
    assert_eq!(rules.user("app").unwrap().roles, ["app-role"]);
}

#[test]
fn a_damaged_or_truncated_snapshot_is_refused_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let source = store_with_history(&dir.path().join("source"), 10);
    let path = saved(&source, dir.path());
    let target = store_with_history(&dir.path().join("target"), 3);
    let before = carried(&target);
    let good = std::fs::read(&path).unwrap();
    let mut flipped = good.clone();
    flipped[5000] ^= 1;
    for bad in [flipped, good[..good.len() - 1].to_vec(), b"short".to_vec()] {
        std::fs::write(&path, &bad).unwrap();
        let err = restore(&path, &target).unwrap_err().to_string();
        assert!(err.contains("SHA-256"), "{err}");
        assert_eq!(carried(&target), before);
    }
}
