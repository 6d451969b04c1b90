//! A Kubernetes watch read as it streams, for the runs that time what a
//! user would see: one HTTP/1.1 request on a connection of its own to the
//! API server's plain port, its body split into JSON event lines.

use bytes::{Bytes, BytesMut};
use http_body_util::Empty;
use hyper::header::{ACCEPT, HOST};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

/// The largest event line a watch may send before the run gives up on it.
const MAX_EVENT_BYTES: usize = 64 << 20;

/// Opens the watch `path` (with its query) on the plain port; the body
/// streams its events. The connection ends with the body.
pub async fn open(port: u16, path: &str) -> Result<hyper::body::Incoming, String> {
    let stream = TcpStream::connect(("127.0.0.1", port))
        .await
        .map_err(|e| format!("connect the watch {path}: {e}"))?;
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| format!("watch handshake: {e}"))?;
    tokio::spawn(connection);
    let request = hyper::Request::get(path)
        .header(HOST, format!("127.0.0.1:{port}"))
        .header(ACCEPT, "application/json")
        .body(Empty::<Bytes>::new())
        .map_err(|e| e.to_string())?;
    let response = sender
        .send_request(request)
        .await
        .map_err(|e| format!("open the watch {path}: {e}"))?;
    if !response.status().is_success() {
        return Err(format!("the watch {path} answered {}", response.status()));
    }
    Ok(response.into_body())
}

/// A watch body's event lines as its frames arrive.
#[derive(Default)]
pub struct EventLines {
    buffer: BytesMut,
}

impl EventLines {
    /// Takes a frame's bytes; returns the lines it completed, blank ones
    /// left out. An unfinished line past 64 MiB is an error.
    pub fn push(&mut self, data: &[u8]) -> Result<Vec<BytesMut>, String> {
        self.buffer.extend_from_slice(data);
        let mut lines = Vec::new();
        while let Some(end) = self.buffer.iter().position(|b| *b == b'\n') {
            let line = self.buffer.split_to(end + 1);
            if !line.iter().all(u8::is_ascii_whitespace) {
                lines.push(line);
            }
        }
        if self.buffer.len() > MAX_EVENT_BYTES {
            return Err("a watch event larger than 64 MiB".into());
        }
        Ok(lines)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_split_across_frames_come_whole_and_blank_ones_go() {
        let mut lines = EventLines::default();
        assert!(lines.push(b"{\"type\":").unwrap().is_empty());
        let done = lines
            .push(b"\"ADDED\"}\n\n{\"type\":\"DELETED\"}\n{")
            .unwrap();
        assert_eq!(done, ["{\"type\":\"ADDED\"}\n", "{\"type\":\"DELETED\"}\n"]);
        assert_eq!(lines.push(b"}\n").unwrap(), ["{}\n"]);
    }
}
