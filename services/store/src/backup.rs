//! Backups: `etcdctl snapshot save` downloads the member's MVCC space
//! (revisions, leases, members) followed by a SHA-256, as etcd appends one
//! to its database; `--restore-snapshot` starts the members of a new
//! cluster from such a file instead of from nothing. Revisions and leases
//! survive; the membership is the new cluster's.

use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Seek, SeekFrom, Write};
use std::path::Path;

use sha2::{Digest, Sha256};

use crate::error::{Result, StoreError};
use crate::mvcc::MvccStore;

const DIGEST_LEN: usize = 32;
/// etcdctl only accepts a download whose length before the digest is a
/// multiple of 512 (a bbolt file is made of pages); the dump is padded.
const ALIGN: usize = 512;
const MAGIC: &[u8; 8] = b"capstan1";
const HEADER_LEN: usize = 16;

/// A backup on its way out, as a stream of chunks: the header, the dump
/// and the padding are written to an unnamed temporary file first (the
/// dump reads the store a page at a time, so memory stays flat however
/// big the store), then read back in chunks; the SHA-256 is computed on
/// the way and sent last.
pub struct BackupStream {
    reader: BufReader<File>,
    hasher: Option<Sha256>,
    /// Bytes still to send, the digest included.
    remaining: u64,
}

fn io_error(err: std::io::Error) -> StoreError {
    StoreError::Storage(format!("writing a snapshot: {err}"))
}

impl BackupStream {
    /// Dumps `mvcc` into a temporary file in `dir`, which goes away with
    /// the stream (or with the process).
    pub fn create(mvcc: &MvccStore, dir: &Path) -> Result<BackupStream> {
        let mut file = tempfile::tempfile_in(dir).map_err(io_error)?;
        let mut out = BufWriter::new(&mut file);
        out.write_all(MAGIC).map_err(io_error)?;
        out.write_all(&[0; 8]).map_err(io_error)?;
        let length = mvcc.dump_to(&mut out)?;
        let padded = (HEADER_LEN as u64 + length).div_ceil(ALIGN as u64) * ALIGN as u64;
        let padding = padded - HEADER_LEN as u64 - length;
        out.write_all(&vec![0; padding as usize])
            .map_err(io_error)?;
        out.flush().map_err(io_error)?;
        drop(out);
        file.seek(SeekFrom::Start(MAGIC.len() as u64))
            .map_err(io_error)?;
        file.write_all(&length.to_be_bytes()).map_err(io_error)?;
        file.seek(SeekFrom::Start(0)).map_err(io_error)?;
        Ok(BackupStream {
            reader: BufReader::new(file),
            hasher: Some(Sha256::new()),
            remaining: padded + DIGEST_LEN as u64,
        })
    }

    /// The bytes still to come, the digest included.
    pub fn remaining(&self) -> u64 {
        self.remaining
    }

    /// The next chunk of at most `max` bytes; None after the digest.
    pub fn next_chunk(&mut self, max: usize) -> Result<Option<Vec<u8>>> {
        let body_left = self.remaining.saturating_sub(DIGEST_LEN as u64);
        if body_left > 0 {
            let mut chunk = vec![0; body_left.min(max as u64) as usize];
            self.reader.read_exact(&mut chunk).map_err(io_error)?;
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

/// The dump inside a backup, after checking its digest and header.
pub fn unseal(sealed: &[u8]) -> std::result::Result<&[u8], String> {
    if sealed.len() < HEADER_LEN + DIGEST_LEN {
        return Err("too short to be a snapshot".into());
    }
    let (body, digest) = sealed.split_at(sealed.len() - DIGEST_LEN);
    if Sha256::digest(body).as_slice() != digest {
        return Err("its SHA-256 does not match its contents (truncated or corrupted)".into());
    }
    if &body[..8] != MAGIC {
        return Err("not a capstan snapshot (an etcd database cannot be restored here)".into());
    }
    let length = u64::from_be_bytes(body[8..HEADER_LEN].try_into().expect("8 bytes")) as usize;
    body.get(HEADER_LEN..HEADER_LEN + length)
        .ok_or_else(|| "its recorded length exceeds the file".to_string())
}

/// Loads the backup at `path` into `mvcc`, leaving out the old members.
pub fn restore(path: &Path, mvcc: &MvccStore) -> Result<()> {
    let bad = |why: String| StoreError::Config(format!("snapshot {}: {why}", path.display()));
    let sealed = std::fs::read(path).map_err(|e| bad(e.to_string()))?;
    let dump = unseal(&sealed).map_err(bad)?;
    mvcc.restore(dump)
        .map_err(|e| bad(format!("does not decode: {e}")))?;
    crate::apply::members::clear_members(&**mvcc.backend())?;
    tracing::info!(
        snapshot = %path.display(),
        revision = mvcc.current_revision(),
        "restored from a snapshot"
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::storage::{SledBackend, Space};
    use capstan_proto::internal::SnapshotPair;
    use prost::Message;
    use std::sync::Arc;

    /// A store of `keys` keys and its backup, streamed in small chunks.
    fn streamed(dir: &Path, keys: usize) -> (MvccStore, Vec<u8>) {
        let backend = Arc::new(SledBackend::open(&dir.join("db")).unwrap());
        let mvcc = MvccStore::open(backend).unwrap();
        let mut view = mvcc.write();
        for i in 0..keys {
            view.put(format!("k{i:05}").as_bytes(), vec![7; 100], 0)
                .unwrap();
        }
        view.finish(2).unwrap();
        let mut stream = BackupStream::create(&mvcc, dir).unwrap();
        let total = stream.remaining();
        let mut sealed = Vec::new();
        while let Some(chunk) = stream.next_chunk(4096).unwrap() {
            assert!(chunk.len() <= 4096);
            sealed.extend(chunk);
            assert_eq!(stream.remaining(), total - sealed.len() as u64);
        }
        (mvcc, sealed)
    }

    #[test]
    fn a_streamed_backup_holds_the_whole_dump_and_any_change_is_caught() {
        let dir = tempfile::tempdir().unwrap();
        let (mvcc, sealed) = streamed(dir.path(), 3000);
        assert_eq!((sealed.len() - DIGEST_LEN) % ALIGN, 0);
        let mut dump = unseal(&sealed).unwrap();
        let mut pairs = Vec::new();
        while !dump.is_empty() {
            let pair = SnapshotPair::decode_length_delimited(&mut dump).unwrap();
            pairs.push((pair.key, pair.value));
        }
        // Paged across several pages, yet every record once, in order.
        let everything = mvcc.backend().scan(Space::Mvcc, &[], None).unwrap();
        assert!(everything.len() > 3000);
        assert_eq!(pairs, everything);
        let mut flipped = sealed.clone();
        flipped[0] ^= 1;
        assert!(unseal(&flipped).is_err());
        assert!(unseal(&sealed[..sealed.len() - 1]).is_err());
        assert!(unseal(b"short").is_err());
    }
}
