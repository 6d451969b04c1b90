//! The raft write-ahead log file: framed protobuf records appended to one
//! file, made durable with one write and one fdatasync per Ready.
//!
//! A frame is the payload's length (u32, little endian), its CRC-32 (u32,
//! little endian) and the payload, one [`WalRecord`]. Reading stops at the
//! first incomplete or corrupt frame: such a tail was being written when the
//! process died, so it was never synced and nothing in it was acknowledged;
//! it is cut off before the file is appended to again.
//!
//! The file is kept longer than its frames, zeros past the last one (a
//! frame of length 0 ends the log), as etcd preallocates its WAL segments.
//! A write that grows a file changes its size, and fdatasync must then
//! write the inode too: on ext4 a second synchronous write per sync. Frames
//! written into space already there cost only their data. The space is
//! added [`PREALLOCATE`] bytes at a time, written as zeros and synced whole
//! (blocks fallocate'd but never written would need their extents marked
//! written at the first sync, metadata again).

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::{Buf, Bytes};
use parking_lot::Mutex;
use prost::Message;

use crate::error::{Result, StoreError};

const HEADER: usize = 8;
/// Space added past the last frame when a write needs more.
const PREALLOCATE: u64 = 4 << 20;

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
    file: Arc<LogFile>,
    pending: Vec<u8>,
}

/// The file, and where its frames end.
struct LogFile {
    file: File,
    path: PathBuf,
    tail: Mutex<Tail>,
}

/// Frames fill the file up to `end`; zeros follow up to `len`.
struct Tail {
    end: u64,
    len: u64,
}

impl LogFile {
    fn new(file: File, path: PathBuf, end: u64) -> Arc<Self> {
        Arc::new(LogFile {
            file,
            path,
            tail: Mutex::new(Tail { end, len: end }),
        })
    }

    /// Writes `bytes` after the last frame and waits until they are on disk.
    fn append(&self, bytes: &[u8]) -> Result<()> {
        let mut tail = self.tail.lock();
        let end = tail.end + bytes.len() as u64;
        if end > tail.len {
            tail.len = self.preallocate(tail.len, end + PREALLOCATE)?;
        }
        self.file
            .write_all_at(bytes, tail.end)
            .and_then(|()| self.file.sync_data())
            .map_err(|err| io_err(&self.path, err))?;
        tail.end = end;
        Ok(())
    }

    /// Writes zeros from `from` to `to` and syncs the file's new size.
    fn preallocate(&self, from: u64, to: u64) -> Result<u64> {
        const CHUNK: usize = 1 << 20;
        let zeros = vec![0; CHUNK];
        let mut at = from;
        while at < to {
            let n = CHUNK.min((to - at) as usize);
            self.file
                .write_all_at(&zeros[..n], at)
                .map_err(|err| io_err(&self.path, err))?;
            at += n as u64;
        }
        self.file
            .sync_all()
            .map_err(|err| io_err(&self.path, err))?;
        Ok(to)
    }
}

impl WalFile {
    /// Opens (or creates) the log at `path` and returns every intact record.
    pub fn open(path: &Path) -> Result<(Self, Vec<WalRecord>)> {
        let _ = std::fs::remove_file(tmp_path(path));
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .map_err(|err| io_err(path, err))?;
        let mut contents = Vec::new();
        file.read_to_end(&mut contents)
            .map_err(|err| io_err(path, err))?;
        let (records, intact) = read_records(Bytes::from(contents));
        // Also drops the zeros after the last frame: space is added again
        // when needed.
        file.set_len(intact as u64)
            .map_err(|err| io_err(path, err))?;
        let wal = WalFile {
            file: LogFile::new(file, path.to_path_buf(), intact as u64),
            pending: Vec::new(),
        };
        Ok((wal, records))
    }

    /// Queues `record` for the next [`WalFile::sync`].
    pub fn stage(&mut self, record: &WalRecord) {
        let len = record.encoded_len();
        if len == 0 {
            return; // changes nothing, and a frame of length 0 ends the log
        }
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
        }
    }

    /// Replaces the whole file with `record` (the complete state of the
    /// log), atomically: written beside it, synced, renamed over it. Anything
    /// staged is dropped, as `record` already holds it.
    pub fn rewrite(&mut self, record: &WalRecord) -> Result<()> {
        self.pending.clear();
        self.stage(record);
        let path = self.file.path.clone();
        let tmp = tmp_path(&path);
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&tmp)
            .map_err(|err| io_err(&tmp, err))?;
        file.write_all(&self.pending)
            .and_then(|()| file.sync_all())
            .map_err(|err| io_err(&tmp, err))?;
        std::fs::rename(&tmp, &path).map_err(|err| io_err(&path, err))?;
        sync_dir(&path)?;
        self.file = LogFile::new(file, path, self.pending.len() as u64);
        self.pending.clear();
        Ok(())
    }
}

/// Staged records on their way to disk.
pub struct Staged {
    bytes: Vec<u8>,
    file: Arc<LogFile>,
}

impl Staged {
    /// One write and one fdatasync (none if nothing was staged).
    pub fn write(&self) -> Result<()> {
        if self.bytes.is_empty() {
            return Ok(());
        }
        self.file.append(&self.bytes)
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
        if len == 0 || contents.len() < HEADER + len {
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
        let intact = wal.file.tail.lock().end;
        drop(wal);
        // A write cut short by a crash: half of a third frame, then the
        // zeros of the space added ahead.
        let mut scratch = WalFile {
            file: LogFile::new(File::open(&path).unwrap(), path.clone(), 0),
            pending: Vec::new(),
        };
        scratch.stage(&record(3));
        OpenOptions::new()
            .write(true)
            .open(&path)
            .unwrap()
            .write_all_at(&scratch.pending[..20], intact)
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
    fn frames_go_into_space_added_ahead_and_the_zeros_after_them_end_the_log() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("wal");
        let file_len = || std::fs::metadata(&path).unwrap().len();
        let (mut wal, _) = WalFile::open(&path).unwrap();
        wal.stage(&record(1));
        wal.sync().unwrap();
        let frame = wal.file.tail.lock().end;
        assert_eq!(file_len(), frame + PREALLOCATE, "space added ahead");
        wal.stage(&record(2));
        wal.sync().unwrap();
        assert_eq!(file_len(), frame + PREALLOCATE, "the second frame fits");
        drop(wal);

        let (mut wal, records) = WalFile::open(&path).unwrap();
        assert_eq!(indexes(&records), vec![1, 2]);
        assert_eq!(file_len(), 2 * frame, "the zeros are dropped on open");
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
        let last = wal.file.tail.lock().end as usize - 1;
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
