//! One direct link's socket, non-blocking: bytes the loop could not write
//! yet wait in a buffer until the socket is writable again, and bytes read
//! are cut into batches. On an `https://` peer's link the bytes go through
//! the rustls session the handshake (on the runtime) left behind.

use std::io::{self, Read, Write};
use std::time::{Duration, Instant};

use capstan_proto::peer::RaftBatch;
use mio::net::TcpStream;
use tokio_rustls::rustls;

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
    #[error("TLS: {0}")]
    Tls(#[from] rustls::Error),
}

pub struct Conn {
    pub stream: TcpStream,
    tls: Option<Box<rustls::Connection>>,
    reader: FrameReader,
    out: Vec<u8>,
    /// How much of `out` the socket (or the TLS session) took already.
    written: usize,
    /// When the socket last took bytes or `out` was last empty: a link
    /// whose bytes sit unsent too long is taken for dead.
    last_progress: Instant,
}

impl Conn {
    pub fn new(stream: TcpStream, tls: Option<Box<rustls::Connection>>) -> Conn {
        Conn {
            stream,
            tls,
            reader: FrameReader::default(),
            out: Vec::new(),
            written: 0,
            last_progress: Instant::now(),
        }
    }

    /// Bytes queued and not yet taken by the socket (a TLS session's own
    /// unsent records count as one).
    pub fn backlog(&self) -> usize {
        let sealed = self.tls.as_ref().is_some_and(|tls| tls.wants_write());
        self.out.len() - self.written + usize::from(sealed)
    }

    /// How long queued bytes have waited for the socket (zero if none).
    pub fn stalled_for(&self) -> Duration {
        match self.backlog() {
            0 => Duration::ZERO,
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
        let sent = match self.tls.is_some() {
            true => self.flush_tls()?,
            false => self.flush_plain()?,
        };
        if self.written == self.out.len() {
            self.out.clear();
            self.written = 0;
        }
        Ok(sent)
    }

    fn flush_plain(&mut self) -> Result<usize, ConnError> {
        let mut sent = 0;
        while self.written < self.out.len() {
            match write_some(&mut self.stream, &self.out[self.written..])? {
                Some(n) => {
                    self.written += n;
                    sent += n;
                    self.last_progress = Instant::now();
                }
                None => break,
            }
        }
        Ok(sent)
    }

    /// Seals queued bytes into the session (which holds a bounded amount)
    /// and writes its records, until both are drained or the socket is full.
    fn flush_tls(&mut self) -> Result<usize, ConnError> {
        let Some(tls) = self.tls.as_deref_mut() else {
            return Ok(0);
        };
        let mut sent = 0;
        loop {
            while tls.wants_write() {
                match tls.write_tls(&mut self.stream) {
                    Ok(0) => return Err(ConnError::Closed),
                    Ok(n) => {
                        sent += n;
                        self.last_progress = Instant::now();
                    }
                    Err(err) if err.kind() == io::ErrorKind::WouldBlock => return Ok(sent),
                    Err(err) if err.kind() == io::ErrorKind::Interrupted => {}
                    Err(err) => return Err(err.into()),
                }
            }
            if self.written == self.out.len() {
                return Ok(sent);
            }
            let sealed = tls.writer().write(&self.out[self.written..])?;
            self.written += sealed;
            if sealed == 0 && !tls.wants_write() {
                return Ok(sent);
            }
        }
    }

    /// Reads what has arrived, handing each whole batch to `on_batch`;
    /// returns how many bytes came.
    pub fn read(&mut self, on_batch: impl FnMut(RaftBatch)) -> Result<usize, ConnError> {
        match self.tls.is_some() {
            true => self.read_tls(on_batch),
            false => self.read_plain(on_batch),
        }
    }

    fn read_plain(&mut self, mut on_batch: impl FnMut(RaftBatch)) -> Result<usize, ConnError> {
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

    /// Feeds the session what the socket has, a record batch at a time
    /// (rustls buffers little unprocessed), and cuts the plaintext.
    fn read_tls(&mut self, mut on_batch: impl FnMut(RaftBatch)) -> Result<usize, ConnError> {
        let mut total = 0;
        loop {
            let Some(tls) = self.tls.as_deref_mut() else {
                return Ok(total);
            };
            let eof = match tls.read_tls(&mut self.stream) {
                Ok(0) => true,
                Ok(n) => {
                    total += n;
                    false
                }
                Err(err) if err.kind() == io::ErrorKind::WouldBlock => break,
                Err(err) if err.kind() == io::ErrorKind::Interrupted => continue,
                Err(err) => return Err(err.into()),
            };
            tls.process_new_packets()?;
            self.drain_plaintext(&mut on_batch)?;
            if eof {
                return Err(ConnError::Closed);
            }
        }
        // The session may owe the peer records of its own (a key update).
        self.flush()?;
        Ok(total)
    }

    fn drain_plaintext(&mut self, on_batch: &mut impl FnMut(RaftBatch)) -> Result<(), ConnError> {
        let Some(tls) = self.tls.as_deref_mut() else {
            return Ok(());
        };
        loop {
            let spare = self.reader.spare(READ_CHUNK);
            match tls.reader().read(spare) {
                Ok(0) => return Err(ConnError::Closed),
                Ok(n) => self.reader.filled(n),
                Err(err) if err.kind() == io::ErrorKind::WouldBlock => break,
                Err(err) => return Err(err.into()),
            }
        }
        while let Some(batch) = self.reader.next_batch()? {
            on_batch(batch);
        }
        Ok(())
    }
}

/// One non-blocking write: Some(bytes taken), None if the socket is full.
fn write_some(stream: &mut TcpStream, bytes: &[u8]) -> Result<Option<usize>, ConnError> {
    loop {
        match stream.write(bytes) {
            Ok(0) => return Err(ConnError::Closed),
            Ok(n) => return Ok(Some(n)),
            Err(err) if err.kind() == io::ErrorKind::WouldBlock => return Ok(None),
            Err(err) if err.kind() == io::ErrorKind::Interrupted => {}
            Err(err) => return Err(err.into()),
        }
    }
}
