//! A snapshot as the raft message carries it: [`SnapshotFile`] names a
//! file in `<data-dir>/snap` with its size and checksum; the file goes once
//! it is sent, installed or given up.

use std::fs::File;
use std::path::{Path, PathBuf};

use prost::Message;

use crate::error::{Result, StoreError};

/// What a raft snapshot's data is: where the dump is, and what it must be
/// (the receiver checks both before it installs anything).
#[derive(Clone, PartialEq, prost::Message)]
pub struct SnapshotFile {
    #[prost(string, tag = "1")]
    pub path: String,
    #[prost(uint64, tag = "2")]
    pub size: u64,
    #[prost(uint32, tag = "3")]
    pub crc32: u32,
}

impl SnapshotFile {
    pub fn decode_from(data: &[u8]) -> Result<SnapshotFile> {
        SnapshotFile::decode(data)
            .map_err(|err| StoreError::Corrupt(format!("raft snapshot descriptor: {err}")))
    }
}

/// Where a member keeps snapshot files.
pub fn dir(data_dir: &Path) -> PathBuf {
    data_dir.join("snap")
}

pub fn io_error(what: &str, path: &Path, err: std::io::Error) -> StoreError {
    StoreError::Storage(format!("{what} {}: {err}", path.display()))
}

/// Removes the file a snapshot's data names (sent, installed or given up).
pub fn discard(data: &[u8]) {
    if let Ok(described) = SnapshotFile::decode(data) {
        let _ = std::fs::remove_file(&described.path);
    }
}

/// Removes every snapshot file left by an earlier run (one being sent or
/// received when the member stopped).
pub fn clean(dir: &Path) -> Result<()> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Ok(());
    };
    for entry in entries.flatten() {
        if entry.path().extension().is_some_and(|ext| ext == "snap") {
            std::fs::remove_file(entry.path()).map_err(|e| io_error("remove", &entry.path(), e))?;
        }
    }
    Ok(())
}

/// Opens the file a snapshot's data names.
pub fn open(data: &[u8]) -> Result<(SnapshotFile, File)> {
    let described = SnapshotFile::decode_from(data)?;
    let path = PathBuf::from(&described.path);
    let file = File::open(&path).map_err(|e| io_error("open", &path, e))?;
    Ok((described, file))
}
