//! The raft write-ahead log file: framed protobuf records appended to one
//! file, made durable with one write and one fdatasync per Ready.
//!
//! A frame is the payload's length (u32, little endian), its CRC-32 (u32,
//! little endian) and the payload, one [`WalRecord`]. Reading stops at the
//! first incomplete or corrupt frame: such a tail was being written when the
//! process died, so it was never synced and nothing in it was acknowledged;
//! it is cut off before the file is appended to again.

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::{Buf, Bytes};
use prost::Message;

use crate::error::{Result, StoreError};

const HEADER: usize = 8;

/// One change to the log. Replayed in field order: the truncation marker,
/// the states, then the entries.
#[derive(Clone, PartialEq, prost::Message)]
pub struct WalRecord {
    /// Contiguous entries replacing the log from the first one's index on.
    #[prost(message, repeated, tag = "1")]
    pub entries: Vec<WalEntry>,
    /// raft's `HardState`, in raft-proto's protobuf encoding.
    #[prost(bytes = "vec", optional, tag = "2")]
    pub hard_state: Option<Vec<u8>>,
    /// raft's `ConfState`, in raft-proto's protobuf encoding.
    #[prost(bytes = "vec", optional, tag = "3")]
    pub conf_state: Option<Vec<u8>>,
    /// The log now starts right after this position.
    #[prost(message, optional, tag = "4")]
    pub truncated: Option<Position>,
}

/// A raft entry (the fields of raft-proto's `Entry` that raft-rs uses).
#[derive(Clone, PartialEq, prost::Message)]
pub struct WalEntry {
    #[prost(uint64, tag = "1")]
    pub term: u64,
    #[prost(uint64, tag = "2")]
    pub index: u64,
    #[prost(int32, tag = "3")]
    pub entry_type: i32,
    #[prost(bytes = "bytes", tag = "4")]
    pub data: Bytes,
    #[prost(bytes = "bytes", tag = "5")]
    pub context: Bytes,
}

#[derive(Clone, Copy, PartialEq, prost::Message)]
pub struct Position {
    #[prost(uint64, tag = "1")]
    pub index: u64,
    #[prost(uint64, tag = "2")]
    pub term: u64,
}

fn io_err(path: &Path, err: std::io::Error) -> StoreError {
    StoreError::Storage(format!("{}: {err}", path.display()))
}

/// The open log file and the records staged for the next sync.
pub struct WalFile {
    /// Shared with a sync under way, which writes outside the log's lock.
    file: Arc<File>,
    path: PathBuf,
    pending: Vec<u8>,
}

impl WalFile {
    /// Opens (or creates) the log at `path` and returns every intact record.
    pub fn open(path: &Path) -> Result<(Self, Vec<WalRecord>)> {
        let _ = std::fs::remove_file(tmp_path(path));
        let mut file = OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .open(path)
            .map_err(|err| io_err(path, err))?;
        let mut contents = Vec::new();
        file.read_to_end(&mut contents)
            .map_err(|err| io_err(path, err))?;
        let (records, intact) = read_records(Bytes::from(contents));
        file.set_len(intact as u64)
            .map_err(|err| io_err(path, err))?;
        let wal = WalFile {
            file: Arc::new(file),
            path: path.to_path_buf(),
            pending: Vec::new(),
        };
        Ok((wal, records))
    }

    /// Queues `record` for the next [`WalFile::sync`].
    pub fn stage(&mut self, record: &WalRecord) {
        let len = record.encoded_len();
        self.pending.reserve(HEADER + len);
        let start = self.pending.len();
        self.pending.extend_from_slice(&(len as u32).to_le_bytes());
        self.pending.extend_from_slice(&[0; 4]);
        record
            .encode(&mut self.pending)
            .expect("a Vec grows to fit");
        let crc = crc32fast::hash(&self.pending[start + HEADER..]);
        self.pending[start + 4..start + HEADER].copy_from_slice(&crc.to_le_bytes());
    }

    pub fn has_pending(&self) -> bool {
        !self.pending.is_empty()
    }

    /// Writes everything staged and waits until it is on disk.
    #[cfg(test)]
    pub fn sync(&mut self) -> Result<()> {
        let staged = self.take_staged();
        staged.write()?;
        self.give_back(staged);
        Ok(())
    }

    /// Takes back a written [`Staged`]'s buffer to stage into again, if
    /// nothing was staged meanwhile (saves an allocation per Ready).
    pub fn give_back(&mut self, staged: Staged) {
        if self.pending.is_empty() {
            self.pending = staged.recycle();
        }
    }

    /// Hands what is staged to a [`Staged::write`] that may run without
    /// this file's lock, so staging goes on meanwhile.
    pub fn take_staged(&mut self) -> Staged {
        Staged {
            bytes: std::mem::take(&mut self.pending),
            file: self.file.clone(),
            path: self.path.clone(),
        }
    }

    /// Replaces the whole file with `record` (the complete state of the
    /// log), atomically: written beside it, synced, renamed over it. Anything
    /// staged is dropped, as `record` already holds it.
    pub fn rewrite(&mut self, record: &WalRecord) -> Result<()> {
        self.pending.clear();
        self.stage(record);
        let tmp = tmp_path(&self.path);
        let mut file = OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .truncate(false)
            .open(&tmp)
            .map_err(|err| io_err(&tmp, err))?;
        file.set_len(0)
            .and_then(|()| file.write_all(&self.pending))
            .and_then(|()| file.sync_all())
            .map_err(|err| io_err(&tmp, err))?;
        std::fs::rename(&tmp, &self.path).map_err(|err| io_err(&self.path, err))?;
        sync_dir(&self.path)?;
        self.pending.clear();
        self.file = Arc::new(file);
        Ok(())
    }
}

/// Staged records on their way to disk.
pub struct Staged {
    bytes: Vec<u8>,
    file: Arc<File>,
    path: PathBuf,
}

impl Staged {
    /// One write and one fdatasync (none if nothing was staged).
    pub fn write(&self) -> Result<()> {
        if self.bytes.is_empty() {
            return Ok(());
        }
        let mut file = &*self.file;
        file.write_all(&self.bytes)
            .and_then(|()| file.sync_data())
            .map_err(|err| io_err(&self.path, err))
    }

    /// The buffer, emptied, to stage into again without reallocating.
    pub fn recycle(mut self) -> Vec<u8> {
        self.bytes.clear();
        self.bytes
    }
}

fn tmp_path(path: &Path) -> PathBuf {
    path.with_extension("tmp")
}

/// Makes a rename in the log's directory durable.
fn sync_dir(path: &Path) -> Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    File::open(dir)
        .and_then(|dir| dir.sync_all())
        .map_err(|err| io_err(dir, err))
}

/// Decodes frames from the front of `contents`; returns the records and the
/// length of the intact prefix.
fn read_records(mut contents: Bytes) -> (Vec<WalRecord>, usize) {
    let total = contents.len();
    let mut records = Vec::new();
    while contents.len() >= HEADER {
        let len = u32::from_le_bytes(contents[..4].try_into().expect("4 bytes")) as usize;
        let crc = u32::from_le_bytes(contents[4..HEADER].try_into().expect("4 bytes"));
        if contents.len() < HEADER + len {
            break;
        }
        let payload = contents.slice(HEADER..HEADER + len);
        if crc32fast::hash(&payload) != crc {
            break;
        }
        let Ok(record) = WalRecord::decode(payload) else {
            break;
        };
        records.push(record);
        contents.advance(HEADER + len);
    }
    (records, total - contents.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(index: u64) -> WalRecord {
        WalRecord {
            entries: vec![WalEntry {
                term: 1,
                index,
                data: Bytes::from(vec![index as u8; 100]),
                ..Default::default()
            }],
            ..Default::default()
        }
    }

    fn indexes(records: &[WalRecord]) -> Vec<u64> {
        records.iter().map(|r| r.entries[0].index).collect()
    }

    #[test]
    fn synced_records_come_back_and_a_torn_tail_is_cut() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("wal");
        let (mut wal, records) = WalFile::open(&path).unwrap();
        assert!(records.is_empty());
        wal.stage(&record(1));
        wal.stage(&record(2));
        wal.sync().unwrap();
        drop(wal);
        // A write cut short by a crash: half of a third frame.
        let intact = std::fs::metadata(&path).unwrap().len();
        let mut torn = Vec::new();
        let mut scratch = WalFile {
            file: Arc::new(File::open(&path).unwrap()),
            path: path.clone(),
            pending: Vec::new(),
        };
        scratch.stage(&record(3));
        torn.extend_from_slice(&scratch.pending[..20]);
        OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap()
            .write_all(&torn)
            .unwrap();
        let (mut wal, records) = WalFile::open(&path).unwrap();
        assert_eq!(indexes(&records), vec![1, 2]);
        assert_eq!(std::fs::metadata(&path).unwrap().len(), intact);
        wal.stage(&record(3));
        wal.sync().unwrap();
        let (_, records) = WalFile::open(&path).unwrap();
        assert_eq!(indexes(&records), vec![1, 2, 3]);
    }

    #[test]
    fn a_corrupt_frame_ends_the_log() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("wal");
        let (mut wal, _) = WalFile::open(&path).unwrap();
        wal.stage(&record(1));
        wal.stage(&record(2));
        wal.sync().unwrap();
        let mut contents = std::fs::read(&path).unwrap();
        let last = contents.len() - 1;
        contents[last] ^= 0xff;
        std::fs::write(&path, contents).unwrap();
        let (_, records) = WalFile::open(&path).unwrap();
        assert_eq!(indexes(&records), vec![1]);
    }

    #[test]
    fn rewrite_replaces_the_file_and_appends_continue() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("wal");
        let (mut wal, _) = WalFile::open(&path).unwrap();
        wal.stage(&record(1));
        wal.sync().unwrap();
        wal.stage(&record(9));
        wal.rewrite(&record(2)).unwrap();
        wal.stage(&record(3));
        wal.sync().unwrap();
        let (_, records) = WalFile::open(&path).unwrap();
        assert_eq!(indexes(&records), vec![2, 3]);
    }
}
