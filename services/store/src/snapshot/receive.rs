//! A snapshot arriving from the leader, written to disk chunk by chunk.

use std::path::{Path, PathBuf};

use prost::Message;
use tokio::io::AsyncWriteExt;

use super::file::{io_error, SnapshotFile};
use crate::error::{Result, StoreError};

/// The file a snapshot is being received into; removed if dropped before
/// [`Receiver::finish`] (a broken stream, a bad checksum).
pub struct Receiver {
    file: tokio::fs::File,
    path: PathBuf,
    size: u64,
    crc: crc32fast::Hasher,
    kept: bool,
}

impl Receiver {
    pub async fn create(dir: &Path) -> Result<Receiver> {
        crate::storage::ensure_private_dir(dir)?;
        let name = format!("in-{:016x}.snap", rand::random::<u64>());
        let path = dir.join(name);
        let file = tokio::fs::File::create(&path)
            .await
            .map_err(|e| io_error("create", &path, e))?;
        Ok(Receiver {
            file,
            path,
            size: 0,
            crc: crc32fast::Hasher::new(),
            kept: false,
        })
    }

    /// Bytes written so far.
    pub fn size(&self) -> u64 {
        self.size
    }

    pub async fn write(&mut self, chunk: &[u8]) -> Result<()> {
        self.crc.update(chunk);
        self.size += chunk.len() as u64;
        self.file
            .write_all(chunk)
            .await
            .map_err(|e| io_error("write", &self.path, e))
    }

    /// Checks that what arrived is what the leader sent (`sent`, its
    /// snapshot data), makes it durable, and returns the snapshot data
    /// naming the local file.
    pub async fn finish(mut self, sent: &[u8]) -> Result<Vec<u8>> {
        let sent = SnapshotFile::decode_from(sent)?;
        let crc32 = std::mem::take(&mut self.crc).finalize();
        if sent.size != self.size || sent.crc32 != crc32 {
            return Err(StoreError::Corrupt(format!(
                "raft snapshot: received {} bytes (crc {crc32:08x}), the leader sent {} (crc {:08x})",
                self.size, sent.size, sent.crc32
            )));
        }
        self.file
            .sync_all()
            .await
            .map_err(|e| io_error("sync", &self.path, e))?;
        self.kept = true;
        let local = SnapshotFile {
            path: self.path.display().to_string(),
            size: self.size,
            crc32,
        };
        Ok(local.encode_to_vec())
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        if !self.kept {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}
