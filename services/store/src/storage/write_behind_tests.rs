use std::collections::BTreeMap;

use rand::{Rng, SeedableRng};

use super::*;
use crate::storage::SledBackend;

fn open(dir: &std::path::Path) -> WriteBehind {
    WriteBehind::new(SledBackend::open(&dir.join("db")).unwrap()).unwrap()
}

fn batch(ops: &[(&[u8], Option<&[u8]>)]) -> WriteBatch {
    let mut batch = WriteBatch::default();
    for (key, value) in ops {
        match value {
            Some(value) => batch.put(key.to_vec(), value.to_vec()),
            None => batch.delete(key.to_vec()),
        }
    }
    batch
}

#[test]
fn a_write_is_read_back_before_and_after_it_reaches_the_engine() {
    let dir = tempfile::tempdir().unwrap();
    let backend = open(dir.path());
    backend
        .write(
            Space::Mvcc,
            batch(&[(b"a", Some(b"1")), (b"b", Some(b"2"))]),
        )
        .unwrap();
    assert_eq!(backend.get(Space::Mvcc, b"a").unwrap(), Some(b"1".to_vec()));
    backend.shared.move_pending().unwrap();
    assert!(backend.shared.pending.read().fresh.is_empty());
    assert_eq!(backend.get(Space::Mvcc, b"b").unwrap(), Some(b"2".to_vec()));
    backend.write(Space::Mvcc, batch(&[(b"a", None)])).unwrap();
    assert_eq!(backend.get(Space::Mvcc, b"a").unwrap(), None);
    let all = backend.scan(Space::Mvcc, b"", None).unwrap();
    assert_eq!(all, vec![(b"b".to_vec(), b"2".to_vec())]);
}

#[test]
fn a_flush_hands_every_pending_write_to_the_engine_before_it_syncs() {
    let dir = tempfile::tempdir().unwrap();
    let backend = open(dir.path());
    backend
        .write(Space::Mvcc, batch(&[(b"k", Some(b"v"))]))
        .unwrap();
    backend.flush().unwrap();
    assert!(backend.shared.pending.read().fresh.is_empty());
    let engine = &backend.shared.engine;
    assert_eq!(engine.get(Space::Mvcc, b"k").unwrap(), Some(b"v".to_vec()));
}

#[test]
fn a_write_to_another_space_reaches_the_engine_after_earlier_mvcc_writes() {
    let dir = tempfile::tempdir().unwrap();
    let backend = open(dir.path());
    backend
        .write(Space::Mvcc, batch(&[(b"state", Some(b"1"))]))
        .unwrap();
    backend
        .write(Space::Raft, batch(&[(b"meta", Some(b"1"))]))
        .unwrap();
    let engine = &backend.shared.engine;
    assert_eq!(
        engine.get(Space::Mvcc, b"state").unwrap(),
        Some(b"1".to_vec())
    );
    assert_eq!(
        engine.get(Space::Raft, b"meta").unwrap(),
        Some(b"1".to_vec())
    );
}

#[test]
fn the_writer_thread_moves_pending_writes_on_its_own() {
    let dir = tempfile::tempdir().unwrap();
    let backend = open(dir.path());
    backend
        .write(Space::Mvcc, batch(&[(b"k", Some(b"v"))]))
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while backend
        .shared
        .engine
        .get(Space::Mvcc, b"k")
        .unwrap()
        .is_none()
    {
        assert!(
            Instant::now() < deadline,
            "the writer never moved the write"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(backend.shared.pending.read().fresh.is_empty());
}

/// Random writes, deletions and moves, checked against a plain map: every
/// read the store makes (get, scan, scan_limit, last_in) must agree.
#[test]
fn reads_agree_with_a_plain_map_whatever_is_still_pending() {
    let dir = tempfile::tempdir().unwrap();
    let backend = open(dir.path());
    let mut model: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    let key = |rng: &mut rand::rngs::StdRng| vec![b'k', rng.random_range(b'a'..=b'z')];
    for round in 0..400 {
        let mut ops = WriteBatch::default();
        for _ in 0..rng.random_range(1..6) {
            let k = key(&mut rng);
            if rng.random_bool(0.3) {
                model.remove(&k);
                ops.delete(k);
            } else {
                let v = format!("v{round}").into_bytes();
                model.insert(k.clone(), v.clone());
                ops.put(k, v);
            }
        }
        backend.write(Space::Mvcc, ops).unwrap();
        if rng.random_bool(0.2) {
            backend.shared.move_pending().unwrap();
        }
        let (a, b) = (key(&mut rng), key(&mut rng));
        let (start, end) = if a <= b { (a, b) } else { (b, a) };
        let expected: Vec<Pair> = model
            .range(start.clone()..end.clone())
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let limit = rng.random_range(1..8);
        assert_eq!(
            backend.scan(Space::Mvcc, &start, Some(&end)).unwrap(),
            expected
        );
        assert_eq!(
            backend
                .scan_limit(Space::Mvcc, &start, Some(&end), limit)
                .unwrap(),
            expected.iter().take(limit).cloned().collect::<Vec<_>>()
        );
        assert_eq!(
            backend.last_in(Space::Mvcc, &start, &end).unwrap(),
            expected.last().cloned()
        );
        assert_eq!(
            backend.get(Space::Mvcc, &start).unwrap(),
            model.get(&start).cloned()
        );
    }
}
