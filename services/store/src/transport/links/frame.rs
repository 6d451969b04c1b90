//! The bytes of a direct peer link: a magic, then `RaftBatch` messages,
//! each prefixed with its length as a protobuf varint. The first batch
//! (the hello) names the sender and its cluster and carries no messages.

use capstan_proto::peer::RaftBatch;
use prost::Message as _;

/// What a direct link's first bytes are. Its first byte can begin neither
/// HTTP/2's preface ('P') nor a TLS record (0x16), so the peer listener
/// tells the two apart from one byte.
pub const MAGIC: &[u8; 8] = b"\0CPRAFT1";

/// Larger frames are refused: raft sends at most 1 MiB of entries per
/// message and the link at most a few hundred messages per batch.
pub const MAX_FRAME: usize = 256 * 1024 * 1024;

/// Appends `batch` as one frame.
pub fn put_frame(batch: &RaftBatch, out: &mut Vec<u8>) {
    batch
        .encode_length_delimited(out)
        .expect("a Vec grows to fit");
}

#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    #[error("a frame of {0} bytes is larger than a link allows")]
    TooLarge(usize),
    #[error("a frame's length does not decode")]
    BadLength,
    #[error("a frame does not decode: {0}")]
    Decode(#[from] prost::DecodeError),
}

/// Collects bytes as they arrive and cuts them into batches. The buffer
/// is zeroed only when it grows: `buf[start..end]` is what waits.
#[derive(Default)]
pub struct FrameReader {
    buf: Vec<u8>,
    start: usize,
    end: usize,
}

impl FrameReader {
    /// Room to read into, at least `at_least` bytes.
    pub fn spare(&mut self, at_least: usize) -> &mut [u8] {
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
        } else if self.start > self.buf.len() / 2 {
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        if self.buf.len() - self.end < at_least {
            self.buf.resize(self.end + at_least, 0);
        }
        &mut self.buf[self.end..]
    }

    /// Keeps `n` bytes of what `spare` handed out.
    pub fn filled(&mut self, n: usize) {
        self.end += n;
    }

    /// The next whole batch, if one has arrived.
    pub fn next_batch(&mut self) -> Result<Option<RaftBatch>, FrameError> {
        let mut rest = &self.buf[self.start..self.end];
        let before = rest.len();
        let Ok(len) = prost::decode_length_delimiter(&mut rest) else {
            // Up to ten bytes of varint: a short one is still arriving.
            return match before >= 10 {
                true => Err(FrameError::BadLength),
                false => Ok(None),
            };
        };
        if len > MAX_FRAME {
            return Err(FrameError::TooLarge(len));
        }
        if rest.len() < len {
            return Ok(None);
        }
        let header = before - rest.len();
        let batch = RaftBatch::decode(&rest[..len])?;
        self.start += header + len;
        Ok(Some(batch))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(from: u64, messages: usize) -> RaftBatch {
        RaftBatch {
            from,
            cluster_id: 9,
            messages: (0..messages).map(|i| vec![i as u8; 300]).collect(),
        }
    }

    /// Feeds `bytes` a few at a time, as a socket might.
    fn feed(reader: &mut FrameReader, bytes: &[u8], step: usize) -> Vec<RaftBatch> {
        let mut out = Vec::new();
        for piece in bytes.chunks(step) {
            let spare = reader.spare(4096);
            spare[..piece.len()].copy_from_slice(piece);
            reader.filled(piece.len());
            while let Some(batch) = reader.next_batch().unwrap() {
                out.push(batch);
            }
        }
        out
    }

    #[test]
    fn batches_come_out_whole_however_the_bytes_are_cut() {
        let sent = vec![batch(1, 0), batch(2, 3), batch(3, 1)];
        let mut bytes = Vec::new();
        for b in &sent {
            put_frame(b, &mut bytes);
        }
        for step in [1, 7, 300, bytes.len()] {
            let mut reader = FrameReader::default();
            assert_eq!(
                feed(&mut reader, &bytes, step),
                sent,
                "cut every {step} bytes"
            );
        }
    }

    #[test]
    fn an_oversized_frame_is_refused() {
        let mut bytes = Vec::new();
        prost::encode_length_delimiter(MAX_FRAME + 1, &mut bytes).unwrap();
        let mut reader = FrameReader::default();
        let spare = reader.spare(16);
        spare[..bytes.len()].copy_from_slice(&bytes);
        reader.filled(bytes.len());
        assert!(matches!(reader.next_batch(), Err(FrameError::TooLarge(_))));
    }

    #[test]
    fn the_magic_is_neither_http2_nor_tls() {
        assert_ne!(MAGIC[0], b'P');
        assert_ne!(MAGIC[0], 0x16);
    }
}
