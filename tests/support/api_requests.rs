//! Requests to an API server without kubectl: JSON requests over one
//! kept-alive connection (`Http`) and a watch's event stream read line by
//! line (`WatchEvents`).

use std::time::Duration;

use super::http::{parse_json, read_chunk, read_head, Connection, HttpError};
use super::tls::Identity;
use super::watchdog;

/// A kept-alive loopback connection for JSON requests, for tests that need
/// tight timing (kubectl's process start would hide a lagging cache). A
/// dropped connection or a body that is not JSON fails the test.
pub struct Http {
    connection: Connection,
}

impl Http {
    pub fn connect(port: u16) -> Http {
        Http::connect_as(port, &Identity::Admin)
    }

    /// A connection presenting `identity`'s credentials (see [`tls`]).
    pub fn connect_as(port: u16, identity: &Identity) -> Http {
        let connection = Connection::connect_as(port, identity).unwrap_or_else(|e| panic!("{e}"));
        Http { connection }
    }

    /// Sends a request with an optional JSON body (`PATCH` as a merge
    /// patch); the status and the JSON body (null when there is none).
    pub fn request(
        &mut self,
        method: &str,
        path: &str,
        body: Option<&serde_json::Value>,
    ) -> (u16, serde_json::Value) {
        self.try_request(method, path, body)
            .unwrap_or_else(|e| panic!("{method} {path}: {e}"))
    }

    /// [`Http::request`], handing failures to the caller.
    pub fn try_request(
        &mut self,
        method: &str,
        path: &str,
        body: Option<&serde_json::Value>,
    ) -> Result<(u16, serde_json::Value), HttpError> {
        let response = self.connection.send_json(method, path, body)?;
        if response.body.is_empty() {
            return Ok((response.status, serde_json::Value::Null));
        }
        Ok((response.status, response.json()?))
    }

    pub fn get(&mut self, path: &str) -> (u16, serde_json::Value) {
        self.request("GET", path, None)
    }
}

/// What reading a watch stream gave.
#[derive(Debug)]
pub enum WatchRead {
    Event(serde_json::Value),
    /// Nothing within the wait; the stream is still open.
    Quiet,
    /// The server ended the stream.
    Ended,
}

/// A watch request's event stream, one JSON event per line.
pub struct WatchEvents {
    connection: Connection,
    pending: Vec<u8>,
    ended: bool,
}

impl WatchEvents {
    /// Opens `GET <path>` (a `?watch=1` path) and checks for 200.
    pub fn open(port: u16, path: &str) -> WatchEvents {
        WatchEvents::connect(port).start(path)
    }

    /// A connection ready to send a watch request on, so that a test can
    /// connect first and ask right after a write.
    pub fn connect(port: u16) -> WatchEvents {
        WatchEvents::connect_as(port, &Identity::Admin)
    }

    /// [`WatchEvents::connect`] with `identity`'s credentials.
    pub fn connect_as(port: u16, identity: &Identity) -> WatchEvents {
        WatchEvents {
            connection: Connection::connect_as(port, identity).unwrap_or_else(|e| panic!("{e}")),
            pending: Vec::new(),
            ended: false,
        }
    }

    pub fn start(mut self, path: &str) -> WatchEvents {
        use std::io::Write;
        watchdog::waiting_for(format!("the head of watch {path}"));
        let authorization = match &self.connection.authorization {
            Some(value) => format!("Authorization: {value}\r\n"),
            None => String::new(),
        };
        let request = format!(
            "GET {path} HTTP/1.1\r\nHost: localhost\r\nAccept: application/json\r\n{authorization}\r\n"
        );
        let reader = &mut self.connection.reader;
        reader
            .get_mut()
            .write_all(request.as_bytes())
            .unwrap_or_else(|e| panic!("send watch {path}: {e}"));
        let (code, headers) = read_head(reader).unwrap_or_else(|e| panic!("watch {path}: {e}"));
        assert_eq!(code, 200, "watch {path}");
        let chunked = headers
            .iter()
            .any(|(n, v)| n == "transfer-encoding" && v.contains("chunked"));
        if !chunked {
            // A watch that ended before it began: one body, then nothing.
            let length = headers
                .iter()
                .find(|(n, _)| n == "content-length")
                .map_or(0, |(_, v)| v.parse().expect("a length"));
            let mut body = vec![0; length];
            std::io::Read::read_exact(reader, &mut body).expect("read a body");
            self.pending = body;
            self.pending.push(b'\n');
            self.ended = true;
        }
        self
    }

    /// The next event, or `Quiet` once `timeout` passes without one, or
    /// `Ended`; a broken connection or an event that is not JSON is an
    /// error.
    pub fn read(&mut self, timeout: Duration) -> Result<WatchRead, HttpError> {
        watchdog::waiting_for(format!("a watch event within {timeout:?}"));
        let reader = &mut self.connection.reader;
        reader.get_mut().set_read_timeout(Some(timeout))?;
        loop {
            if let Some(end) = self.pending.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = self.pending.drain(..=end).collect();
                if line.iter().all(u8::is_ascii_whitespace) {
                    continue;
                }
                return parse_json(&line).map(WatchRead::Event);
            }
            if self.ended {
                return Ok(WatchRead::Ended);
            }
            match read_chunk(reader) {
                Ok(Some(chunk)) => self.pending.extend(chunk),
                Ok(None) => self.ended = true,
                Err(HttpError::Timeout(_)) => return Ok(WatchRead::Quiet),
                Err(e) => return Err(e),
            }
        }
    }

    /// The next event, or None if the stream stays quiet for `timeout`.
    /// A stream that ends or breaks fails the test: "no event came" must
    /// not pass because the connection dropped.
    pub fn next(&mut self, timeout: Duration) -> Option<serde_json::Value> {
        match self.read(timeout) {
            Ok(WatchRead::Event(event)) => Some(event),
            Ok(WatchRead::Quiet) => None,
            Ok(WatchRead::Ended) => panic!("the watch stream ended"),
            Err(e) => panic!("reading the watch stream: {e}"),
        }
    }

    /// The stream's end (after any events left), within `timeout`.
    pub fn ends_within(&mut self, timeout: Duration) -> Result<Vec<serde_json::Value>, String> {
        let mut events = Vec::new();
        loop {
            match self.read(timeout) {
                Ok(WatchRead::Event(event)) => events.push(event),
                Ok(WatchRead::Ended) => return Ok(events),
                Ok(WatchRead::Quiet) => return Err(format!("still open after {events:?}")),
                Err(e) => return Err(format!("{e} after {events:?}")),
            }
        }
    }
}
