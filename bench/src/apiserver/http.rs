//! A minimal HTTP/1.1 client over one kept-alive loopback connection: all
//! a load generator needs against the API server (request line, a JSON
//! body, status and body back), without a client library's own costs in
//! the measurement.

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

pub struct Connection {
    stream: BufReader<TcpStream>,
}

impl Connection {
    pub async fn open(port: u16) -> Result<Connection, String> {
        let stream = TcpStream::connect(("127.0.0.1", port))
            .await
            .map_err(|e| format!("connect to 127.0.0.1:{port}: {e}"))?;
        stream.set_nodelay(true).map_err(|e| e.to_string())?;
        Ok(Connection {
            stream: BufReader::new(stream),
        })
    }

    /// Sends one request; the status code and the body.
    pub async fn request(
        &mut self,
        method: &str,
        path: &str,
        body: Option<&[u8]>,
    ) -> Result<(u16, Vec<u8>), String> {
        let body = body.unwrap_or_default();
        let head = format!(
            "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: application/json\r\n\
             Content-Type: application/json\r\nContent-Length: {}\r\n\r\n",
            body.len()
        );
        let writer = self.stream.get_mut();
        writer
            .write_all(head.as_bytes())
            .await
            .map_err(|e| e.to_string())?;
        writer.write_all(body).await.map_err(|e| e.to_string())?;
        let (status, length, chunked) = self.read_head().await?;
        let body = match chunked {
            true => self.read_chunked().await?,
            false => {
                let mut body = vec![0; length];
                self.stream
                    .read_exact(&mut body)
                    .await
                    .map_err(|e| e.to_string())?;
                body
            }
        };
        Ok((status, body))
    }

    async fn line(&mut self) -> Result<String, String> {
        let mut line = String::new();
        let read = self
            .stream
            .read_line(&mut line)
            .await
            .map_err(|e| e.to_string())?;
        if read == 0 {
            return Err("the server closed the connection".into());
        }
        Ok(line)
    }

    /// Status, Content-Length and whether the body is chunked.
    async fn read_head(&mut self) -> Result<(u16, usize, bool), String> {
        let status_line = self.line().await?;
        let status = status_line
            .split_whitespace()
            .nth(1)
            .and_then(|c| c.parse().ok())
            .ok_or_else(|| format!("not an HTTP status line: {status_line:?}"))?;
        let (mut length, mut chunked) = (0, false);
        loop {
            let line = self.line().await?.to_ascii_lowercase();
            let line = line.trim();
            if line.is_empty() {
                return Ok((status, length, chunked));
            }
            if let Some(value) = line.strip_prefix("content-length:") {
                length = value
                    .trim()
                    .parse()
                    .map_err(|_| format!("bad length: {line}"))?;
            }
            if line.starts_with("transfer-encoding:") && line.contains("chunked") {
                chunked = true;
            }
        }
    }

    async fn read_chunked(&mut self) -> Result<Vec<u8>, String> {
        let mut body = Vec::new();
        loop {
            let size_line = self.line().await?;
            let size = usize::from_str_radix(size_line.trim(), 16)
                .map_err(|_| format!("bad chunk size {size_line:?}"))?;
            let mut chunk = vec![0; size + 2];
            self.stream
                .read_exact(&mut chunk)
                .await
                .map_err(|e| e.to_string())?;
            if size == 0 {
                return Ok(body);
            }
            body.extend_from_slice(&chunk[..size]);
        }
    }
}
