//! Installing a received snapshot file into the MVCC space, a batch at a
//! time, so that a snapshot bigger than memory installs. Unlike one
//! atomic batch, batches can be cut short by a crash; a marker naming the
//! file is written with the first batch and removed with the last, and a
//! member that finds it on start installs the file again before anything
//! reads the half-written state. The applied index is written last, so a
//! half-installed state never looks complete.

use std::io::{BufRead, BufReader};

use capstan_proto::internal::SnapshotPair;
use prost::Message;

use super::file::{open, SnapshotFile};
use crate::error::{Result, StoreError};
use crate::mvcc::{MvccStore, META_APPLIED_INDEX};
use crate::storage::Space;

/// Present while an install is under way; its value is the file's
/// snapshot data.
const INSTALLING: &[u8] = b"m/installing_snapshot";

/// Replaces the MVCC space with the snapshot file `data` names.
pub fn install(mvcc: &MvccStore, data: &[u8]) -> Result<()> {
    let (described, file) = open(data)?;
    tracing::info!(file = %described.path, bytes = described.size, "installing a snapshot file");
    let mut reader = BufReader::with_capacity(1 << 20, file);
    mvcc.replace_with(|put| {
        put(INSTALLING.to_vec(), Some(data.to_vec()))?;
        let mut applied = None;
        while let Some(pair) = next_pair(&mut reader, &described)? {
            if pair.key == META_APPLIED_INDEX {
                applied = Some(pair.value);
                continue;
            }
            put(pair.key, Some(pair.value))?;
        }
        if let Some(applied) = applied {
            put(META_APPLIED_INDEX.to_vec(), Some(applied))?;
        }
        put(INSTALLING.to_vec(), None)
    })
}

/// Finishes an install a crash cut short, from its file (which stays
/// until the install is complete).
pub fn resume_interrupted_install(mvcc: &MvccStore) -> Result<()> {
    let Some(data) = mvcc.backend().get(Space::Mvcc, INSTALLING)? else {
        return Ok(());
    };
    tracing::warn!("finishing a snapshot install a crash interrupted");
    install(mvcc, &data)?;
    mvcc.backend().flush()
}

/// The next length-delimited pair of a dump, None at its end.
fn next_pair(reader: &mut impl BufRead, file: &SnapshotFile) -> Result<Option<SnapshotPair>> {
    let bad = |why: String| StoreError::Corrupt(format!("raft snapshot {}: {why}", file.path));
    if reader
        .fill_buf()
        .map_err(|e| bad(e.to_string()))?
        .is_empty()
    {
        return Ok(None);
    }
    let mut len = 0u64;
    for shift in (0..64).step_by(7) {
        let mut byte = [0];
        reader
            .read_exact(&mut byte)
            .map_err(|e| bad(e.to_string()))?;
        len |= u64::from(byte[0] & 0x7f) << shift;
        if byte[0] & 0x80 == 0 {
            break;
        }
    }
    let mut bytes = vec![0; len as usize];
    reader
        .read_exact(&mut bytes)
        .map_err(|e| bad(e.to_string()))?;
    let pair = SnapshotPair::decode(bytes.as_slice()).map_err(|e| bad(e.to_string()))?;
    Ok(Some(pair))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::super::cut;
    use super::*;
    use crate::storage::SledBackend;

    fn store(dir: &std::path::Path) -> MvccStore {
        let backend = Arc::new(SledBackend::open(&dir.join("db")).unwrap());
        MvccStore::open(backend).unwrap()
    }

    fn records(mvcc: &MvccStore) -> Vec<(Vec<u8>, Vec<u8>)> {
        mvcc.backend().scan(Space::Mvcc, &[], None).unwrap()
    }

    #[test]
    fn a_cut_file_installs_the_same_records_over_other_ones() {
        let dir = tempfile::tempdir().unwrap();
        let source = store(&dir.path().join("source"));
        let mut view = source.write();
        for i in 0..10_000 {
            view.put(format!("k{i:05}").as_bytes(), vec![1; 50], 0)
                .unwrap();
        }
        view.finish(7).unwrap();
        let (data, applied_index) = cut(&source, &dir.path().join("snap")).unwrap();
        assert_eq!(applied_index, 7);
        let target = store(&dir.path().join("target"));
        let mut view = target.write();
        view.put(b"old", b"gone".to_vec(), 0).unwrap();
        view.finish(3).unwrap();
        install(&target, &data).unwrap();
        assert_eq!(records(&target), records(&source));
        assert_eq!(target.applied_index().unwrap(), 7);
        assert_eq!(target.current_revision(), source.current_revision());
    }

    #[test]
    fn an_interrupted_install_is_finished_on_start() {
        let dir = tempfile::tempdir().unwrap();
        let source = store(&dir.path().join("source"));
        let mut view = source.write();
        view.put(b"k", b"v".to_vec(), 0).unwrap();
        view.finish(9).unwrap();
        let (data, _) = cut(&source, &dir.path().join("snap")).unwrap();
        // What a crash after the first batch leaves: the marker, part of
        // the records and no applied index.
        let target = store(&dir.path().join("target"));
        target
            .replace_with::<StoreError>(|put| put(INSTALLING.to_vec(), Some(data.clone())))
            .unwrap();
        assert_eq!(target.applied_index().unwrap(), 0);
        resume_interrupted_install(&target).unwrap();
        assert_eq!(records(&target), records(&source));
        resume_interrupted_install(&target).unwrap();
        assert_eq!(records(&target), records(&source));
    }
}
