//! A minimal HTTP/1.1 client on one kept-alive loopback connection that
//! hands every failure back to the test (a dropped connection, a body that
//! is not JSON, a quiet stream) instead of turning it into a value. To a
//! port that serves TLS (see [`super::tls`]) it speaks HTTPS, as the admin
//! unless another identity is asked for.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use super::tls::{self, Identity};

/// The connection under the HTTP: plain TCP, or TLS over it.
pub enum Stream {
    Plain(TcpStream),
    Tls(Box<rustls::StreamOwned<rustls::ClientConnection, TcpStream>>),
}

impl Stream {
    fn socket(&self) -> &TcpStream {
        match self {
            Stream::Plain(socket) => socket,
            Stream::Tls(tls) => &tls.sock,
        }
    }

    pub fn set_read_timeout(&self, timeout: Option<Duration>) -> std::io::Result<()> {
        self.socket().set_read_timeout(timeout)
    }
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Stream::Plain(socket) => socket.read(buf),
            Stream::Tls(tls) => tls.read(buf),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            Stream::Plain(socket) => socket.write(buf),
            Stream::Tls(tls) => tls.write(buf),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            Stream::Plain(socket) => socket.flush(),
            Stream::Tls(tls) => tls.flush(),
        }
    }
}

/// How long one response may take before the read fails.
pub const READ_TIMEOUT: Duration = Duration::from_secs(30);

#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    #[error("cannot connect to 127.0.0.1:{port}: {source}")]
    Connect { port: u16, source: std::io::Error },
    #[error("no data within {0:?}")]
    Timeout(Duration),
    #[error("the connection failed: {0}")]
    Io(std::io::Error),
    #[error("the server closed the connection")]
    Closed,
    #[error("malformed response: {0}")]
    Malformed(String),
    #[error("the body is not JSON ({source}): {text}")]
    NotJson {
        source: serde_json::Error,
        text: String,
    },
}

impl From<std::io::Error> for HttpError {
    fn from(err: std::io::Error) -> HttpError {
        match err.kind() {
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => {
                HttpError::Timeout(READ_TIMEOUT)
            }
            std::io::ErrorKind::UnexpectedEof => HttpError::Closed,
            _ => HttpError::Io(err),
        }
    }
}

/// One response: status, headers (names lower-cased) and the whole body.
#[derive(Debug)]
pub struct Response {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Response {
    /// Every value of header `name` (lower case).
    pub fn header(&self, name: &str) -> Vec<&str> {
        self.headers
            .iter()
            .filter(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
            .collect()
    }

    pub fn json(&self) -> Result<serde_json::Value, HttpError> {
        parse_json(&self.body)
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

pub fn parse_json(bytes: &[u8]) -> Result<serde_json::Value, HttpError> {
    serde_json::from_slice(bytes).map_err(|source| HttpError::NotJson {
        source,
        text: String::from_utf8_lossy(bytes).into_owned(),
    })
}

/// One kept-alive connection.
pub struct Connection {
    pub(crate) reader: BufReader<Stream>,
    /// The `Authorization` header every request carries, if any.
    pub(crate) authorization: Option<String>,
}

impl Connection {
    /// A connection as the admin (to a TLS port) or plain.
    pub fn connect(port: u16) -> Result<Connection, HttpError> {
        Connection::connect_as(port, &Identity::Admin)
    }

    /// A connection presenting `identity`'s credentials.
    pub fn connect_as(port: u16, identity: &Identity) -> Result<Connection, HttpError> {
        let socket = TcpStream::connect(("127.0.0.1", port))
            .map_err(|source| HttpError::Connect { port, source })?;
        socket.set_read_timeout(Some(READ_TIMEOUT))?;
        socket.set_nodelay(true)?;
        let stream = match tls::client_config_for(port, identity) {
            None => Stream::Plain(socket),
            Some(config) => {
                let name = "127.0.0.1".try_into().expect("an IP name");
                let session = rustls::ClientConnection::new(config, name)
                    .map_err(|e| HttpError::Malformed(format!("TLS: {e}")))?;
                Stream::Tls(Box::new(rustls::StreamOwned::new(session, socket)))
            }
        };
        let authorization = match identity {
            Identity::Token(token) => Some(format!("Bearer {token}")),
            _ => None,
        };
        Ok(Connection {
            reader: BufReader::new(stream),
            authorization,
        })
    }

    /// Sends one request with `headers` and `body`, reads the response.
    pub fn send(
        &mut self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> Result<Response, HttpError> {
        let mut head = format!("{method} {path} HTTP/1.1\r\nHost: localhost\r\n");
        if let Some(authorization) = &self.authorization {
            head.push_str(&format!("Authorization: {authorization}\r\n"));
        }
        for (name, value) in headers {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        head.push_str(&format!("Content-Length: {}\r\n\r\n", body.len()));
        let stream = self.reader.get_mut();
        let sent = stream
            .write_all(head.as_bytes())
            .and_then(|()| stream.write_all(body));
        match (sent, self.read_response()) {
            (_, Ok(response)) => Ok(response),
            // A server may answer and close before reading a whole body;
            // then its answer counts, else the failed write says why.
            (Err(write), Err(_)) => Err(write.into()),
            (Ok(()), Err(read)) => Err(read),
        }
    }

    /// Sends a request's head and only `part` of its `length`-byte body:
    /// the request stays in flight until [`Connection::finish`] sends the
    /// rest and reads the answer.
    pub fn send_partial(
        &mut self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        length: usize,
        part: &[u8],
    ) -> Result<(), HttpError> {
        let mut head = format!("{method} {path} HTTP/1.1\r\nHost: localhost\r\n");
        if let Some(authorization) = &self.authorization {
            head.push_str(&format!("Authorization: {authorization}\r\n"));
        }
        for (name, value) in headers {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        head.push_str(&format!("Content-Length: {length}\r\n\r\n"));
        let stream = self.reader.get_mut();
        stream.write_all(head.as_bytes())?;
        stream.write_all(part)?;
        stream.flush()?;
        Ok(())
    }

    /// The rest of a [`Connection::send_partial`] body, and the answer.
    pub fn finish(&mut self, rest: &[u8]) -> Result<Response, HttpError> {
        let stream = self.reader.get_mut();
        stream.write_all(rest)?;
        stream.flush()?;
        self.read_response()
    }

    /// A JSON request (`PATCH` as a merge patch): the status and the body,
    /// which must be JSON.
    pub fn json(
        &mut self,
        method: &str,
        path: &str,
        body: Option<&serde_json::Value>,
    ) -> Result<(u16, serde_json::Value), HttpError> {
        let response = self.send_json(method, path, body)?;
        Ok((response.status, response.json()?))
    }

    /// Sends a JSON request (`PATCH` as a merge patch) and returns the raw
    /// response, for callers that decide what an empty body means.
    pub fn send_json(
        &mut self,
        method: &str,
        path: &str,
        body: Option<&serde_json::Value>,
    ) -> Result<Response, HttpError> {
        let content_type = match method {
            "PATCH" => "application/merge-patch+json",
            _ => "application/json",
        };
        let body = body.map(|b| b.to_string()).unwrap_or_default();
        let headers = [
            ("Accept", "application/json"),
            ("Content-Type", content_type),
        ];
        self.send(method, path, &headers, body.as_bytes())
    }

    fn read_response(&mut self) -> Result<Response, HttpError> {
        let (status, headers) = read_head(&mut self.reader)?;
        let chunked = headers
            .iter()
            .any(|(n, v)| n == "transfer-encoding" && v.contains("chunked"));
        let body = if chunked {
            let mut all = Vec::new();
            while let Some(chunk) = read_chunk(&mut self.reader)? {
                all.extend(chunk);
            }
            all
        } else {
            let length = match headers.iter().find(|(n, _)| n == "content-length") {
                Some((_, v)) => v
                    .parse()
                    .map_err(|_| HttpError::Malformed(format!("content-length {v:?}")))?,
                None => 0,
            };
            let mut bytes = vec![0; length];
            self.reader.read_exact(&mut bytes)?;
            bytes
        };
        Ok(Response {
            status,
            headers,
            body,
        })
    }
}

fn read_line(reader: &mut impl BufRead) -> Result<String, HttpError> {
    let mut line = String::new();
    if reader.read_line(&mut line)? == 0 {
        return Err(HttpError::Closed);
    }
    Ok(line)
}

/// The status line's code and the headers (names lower-cased).
pub(crate) fn read_head(
    reader: &mut impl BufRead,
) -> Result<(u16, Vec<(String, String)>), HttpError> {
    let status = read_line(reader)?;
    let code = status
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| HttpError::Malformed(format!("status line {status:?}")))?;
    let mut headers = Vec::new();
    loop {
        let line = read_line(reader)?;
        if line.trim().is_empty() {
            return Ok((code, headers));
        }
        let (name, value) = line
            .split_once(':')
            .ok_or_else(|| HttpError::Malformed(format!("header line {line:?}")))?;
        headers.push((name.trim().to_lowercase(), value.trim().to_string()));
    }
}

/// One chunk of a chunked body; None after the last (empty) one.
pub(crate) fn read_chunk(reader: &mut impl BufRead) -> Result<Option<Vec<u8>>, HttpError> {
    let size_line = read_line(reader)?;
    let size_text = size_line.trim().split(';').next().unwrap_or_default();
    let size = usize::from_str_radix(size_text, 16)
        .map_err(|_| HttpError::Malformed(format!("chunk size {size_line:?}")))?;
    let mut chunk = vec![0; size + 2];
    reader.read_exact(&mut chunk)?;
    chunk.truncate(size);
    Ok((size > 0).then_some(chunk))
}
