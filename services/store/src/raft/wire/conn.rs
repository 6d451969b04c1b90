//! One direct link's socket, non-blocking: bytes the loop could not write
//! yet wait in a buffer until the socket is writable again, and bytes read
//! are cut into batches.

use std::io::{self, Read, Write};
use std::time::Instant;

use capstan_proto::peer::RaftBatch;
use mio::net::TcpStream;

use super::frame::{FrameError, FrameReader};

/// Bytes read per `read` call at most.
const READ_CHUNK: usize = 64 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum ConnError {
    #[error("the peer closed the link")]
    Closed,
    #[error(transparent)]
    Io(#[from] io::Error),
    #[error(transparent)]
    Frame(#[from] FrameError),
}

pub struct Conn {
    pub stream: TcpStream,
    reader: FrameReader,
    out: Vec<u8>,
    /// How much of `out` the socket took already.
    written: usize,
    /// When the socket last took bytes or `out` was last empty: a link
    /// whose bytes sit unsent too long is taken for dead.
    last_progress: Instant,
}

impl Conn {
    pub fn new(stream: TcpStream) -> Conn {
        Conn {
            stream,
            reader: FrameReader::default(),
            out: Vec::new(),
            written: 0,
            last_progress: Instant::now(),
        }
    }

    /// Bytes queued and not yet taken by the socket.
    pub fn backlog(&self) -> usize {
        self.out.len() - self.written
    }

    /// How long queued bytes have waited for the socket (zero if none).
    pub fn stalled_for(&self) -> std::time::Duration {
        match self.backlog() {
            0 => std::time::Duration::ZERO,
            _ => self.last_progress.elapsed(),
        }
    }

    /// Queues bytes; `flush` sends them.
    pub fn queue(&mut self) -> &mut Vec<u8> {
        if self.backlog() == 0 {
            self.last_progress = Instant::now();
        }
        &mut self.out
    }

    /// Writes what the socket takes without blocking; returns how much.
    pub fn flush(&mut self) -> Result<usize, ConnError> {
        let before = self.written;
        while self.written < self.out.len() {
            match self.stream.write(&self.out[self.written..]) {
                Ok(0) => return Err(ConnError::Closed),
                Ok(n) => {
                    self.written += n;
                    self.last_progress = Instant::now();
                }
                Err(err) if err.kind() == io::ErrorKind::WouldBlock => {
                    return Ok(self.written - before)
                }
                Err(err) if err.kind() == io::ErrorKind::Interrupted => {}
                Err(err) => return Err(err.into()),
            }
        }
        let sent = self.written - before;
        self.out.clear();
        self.written = 0;
        Ok(sent)
    }

    /// Reads what has arrived, handing each whole batch to `on_batch`;
    /// returns how many bytes came.
    pub fn read(&mut self, mut on_batch: impl FnMut(RaftBatch)) -> Result<usize, ConnError> {
        let mut total = 0;
        loop {
            let spare = self.reader.spare(READ_CHUNK);
            let room = spare.len();
            match self.stream.read(spare) {
                Ok(0) => return Err(ConnError::Closed),
                Ok(n) => {
                    total += n;
                    self.reader.filled(n);
                    while let Some(batch) = self.reader.next_batch()? {
                        on_batch(batch);
                    }
                    // A short read emptied the socket: the next bytes
                    // bring a new readiness event (as tokio also assumes),
                    // so no read is spent to hear "would block".
                    if n < room {
                        return Ok(total);
                    }
                }
                Err(err) if err.kind() == io::ErrorKind::WouldBlock => return Ok(total),
                Err(err) if err.kind() == io::ErrorKind::Interrupted => {}
                Err(err) => return Err(err.into()),
            }
        }
    }
}
