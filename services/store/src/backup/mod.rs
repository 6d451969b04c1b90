//! Backups in etcd's format, both ways: `etcdctl snapshot save` downloads
//! the member's MVCC space as an etcd 3.4 database (a bbolt file with
//! etcd's buckets) followed by its SHA-256, as etcd sends its own; so
//! `etcdctl snapshot status|restore` and etcd itself read it.
//! `--restore-snapshot` starts the members of a new cluster from such a
//! file, whether capstan or etcd saved it. Revisions, history and leases
//! survive; the membership is the new cluster's.
//!
//! Neither way holds the database in memory: it is written to a temporary
//! file and streamed from it, and read back a page at a time.

mod bolt_page;
mod bolt_reader;
mod bolt_writer;
mod error;
mod etcd_layout;
mod export;
mod import;

use std::fs::File;
use std::io::{BufReader, Read, Seek, SeekFrom};
use std::path::Path;

use sha2::{Digest, Sha256};

use crate::error::{Result, StoreError};
use crate::mvcc::MvccStore;

pub use bolt_reader::BoltReader;
pub use error::BackupError;

const DIGEST_LEN: u64 = 32;
/// etcdctl takes a file whose length is 32 past a multiple of 512 to end
/// with a digest (a bbolt file is made of pages).
const ALIGN: u64 = 512;

/// A backup on its way out, as a stream of chunks: the database is
/// written to an unnamed temporary file first (the MVCC space is read a
/// page at a time, so memory stays flat however big the store), then read
/// back in chunks; the SHA-256 is computed on the way and sent last.
pub struct BackupStream {
    reader: BufReader<File>,
    hasher: Option<Sha256>,
    /// Bytes still to send, the digest included.
    remaining: u64,
}

impl BackupStream {
    /// Writes `mvcc` into a temporary file in `dir`, which goes away with
    /// the stream (or with the process).
    pub fn create(mvcc: &MvccStore, dir: &Path) -> Result<BackupStream> {
        let file = tempfile::tempfile_in(dir).map_err(BackupError::from)?;
        let mut file = export::write_database(mvcc, file)?;
        let len = file.stream_position().map_err(BackupError::from)?;
        file.seek(SeekFrom::Start(0)).map_err(BackupError::from)?;
        Ok(BackupStream {
            reader: BufReader::with_capacity(1 << 16, file),
            hasher: Some(Sha256::new()),
            remaining: len + DIGEST_LEN,
        })
    }

    /// The bytes still to come, the digest included.
    pub fn remaining(&self) -> u64 {
        self.remaining
    }

    /// The next chunk of at most `max` bytes; None after the digest.
    pub fn next_chunk(&mut self, max: usize) -> Result<Option<Vec<u8>>> {
        let body_left = self.remaining.saturating_sub(DIGEST_LEN);
        if body_left > 0 {
            let mut chunk = vec![0; body_left.min(max as u64) as usize];
            self.reader
                .read_exact(&mut chunk)
                .map_err(BackupError::from)?;
            if let Some(hasher) = &mut self.hasher {
                hasher.update(&chunk);
            }
            self.remaining -= chunk.len() as u64;
            return Ok(Some(chunk));
        }
        self.remaining = 0;
        Ok(self.hasher.take().map(|hasher| hasher.finalize().to_vec()))
    }
}

/// Checks the SHA-256 at the end of the snapshot in `file`; returns the
/// length of the database before it.
pub fn verify_digest(file: &mut File) -> std::result::Result<u64, BackupError> {
    let len = file.metadata()?.len();
    if len < DIGEST_LEN || len % ALIGN != DIGEST_LEN {
        return Err(BackupError::Invalid(
            "it does not end with a SHA-256 (a database copied from a data directory \
             is not a snapshot; save one with `etcdctl snapshot save`)"
                .into(),
        ));
    }
    let body = len - DIGEST_LEN;
    file.seek(SeekFrom::Start(0))?;
    let mut hasher = Sha256::new();
    std::io::copy(&mut file.take(body), &mut hasher)?;
    let mut digest = [0; DIGEST_LEN as usize];
    file.read_exact(&mut digest)?;
    if hasher.finalize().as_slice() != digest {
        return Err(BackupError::Invalid(
            "its SHA-256 does not match its contents (truncated or corrupted)".into(),
        ));
    }
    Ok(body)
}

/// Loads the snapshot at `path` into `mvcc`, leaving out the old members.
pub fn restore(path: &Path, mvcc: &MvccStore) -> Result<()> {
    let bad = |why: BackupError| StoreError::Config(format!("snapshot {}: {why}", path.display()));
    let mut file = File::open(path).map_err(|e| bad(e.into()))?;
    let len = verify_digest(&mut file).map_err(bad)?;
    let db = BoltReader::open(file, len).map_err(bad)?;
    mvcc.replace_with(|put| {
        import::read_database(&db, &mut |k, v| put(k, Some(v)).map_err(BackupError::from))
            .map_err(bad)
    })?;
    tracing::info!(
        snapshot = %path.display(),
        revision = mvcc.current_revision(),
        "restored from a snapshot"
    );
    Ok(())
}

#[cfg(test)]
mod tests;
