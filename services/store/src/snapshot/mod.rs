//! Raft snapshots for members too far behind for the log, as files: the
//! leader dumps its MVCC space to a file in `<data-dir>/snap`, the
//! transport streams it in chunks, the follower writes the chunks to a
//! file of its own as they arrive and installs the state machine from it,
//! a batch at a time. Neither side holds a whole snapshot in memory: the
//! raft message carries only a [`SnapshotFile`] naming the file.

mod file;
mod install;
mod receive;

use std::io::{BufWriter, Write};
use std::path::Path;

use prost::Message;

use crate::error::Result;
use crate::mvcc::MvccStore;
use file::io_error;

pub use file::{clean, dir, discard, open, SnapshotFile};
pub use install::{install, resume_interrupted_install};
pub use receive::Receiver;

/// Counts and checksums what goes through to the file.
struct Summing<W> {
    out: W,
    size: u64,
    crc: crc32fast::Hasher,
}

impl<W: Write> Write for Summing<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.out.write(buf)?;
        self.size += n as u64;
        self.crc.update(&buf[..n]);
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.out.flush()
    }
}

/// Dumps `mvcc` to a new file in `dir`; returns the raft snapshot data
/// naming it and the applied index the dump is at. The file goes once sent.
pub fn cut(mvcc: &MvccStore, dir: &Path) -> Result<(Vec<u8>, u64)> {
    crate::storage::ensure_private_dir(dir)?;
    let file = tempfile::Builder::new()
        .prefix("out-")
        .suffix(".snap")
        .tempfile_in(dir)
        .map_err(|e| io_error("create a file in", dir, e))?;
    let (file, path) = file
        .keep()
        .map_err(|e| io_error("keep a file in", dir, e.error))?;
    let mut out = Summing {
        out: BufWriter::with_capacity(1 << 20, file),
        size: 0,
        crc: crc32fast::Hasher::new(),
    };
    let dumped = mvcc.dump_to(&mut out).and_then(|dumped| {
        out.flush().map_err(|e| io_error("write", &path, e))?;
        Ok(dumped)
    });
    let dumped = match dumped {
        Ok(dumped) => dumped,
        Err(err) => {
            let _ = std::fs::remove_file(&path);
            return Err(err);
        }
    };
    let described = SnapshotFile {
        path: path.display().to_string(),
        size: out.size,
        crc32: out.crc.finalize(),
    };
    Ok((described.encode_to_vec(), dumped.applied_index))
}
