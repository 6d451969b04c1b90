//! A server's `/health`, read with a minimal HTTP/1.1 GET on loopback (no
//! client library: the bench must tell a server that answers from one that
//! does not before any of its own clients connect).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

pub fn is_healthy(body: &str) -> bool {
    let compact: String = body.chars().filter(|c| !c.is_whitespace()).collect();
    compact.contains("\"health\":\"true\"")
}

/// A minimal HTTP/1.1 GET on loopback, returning the body of a 200 answer.
pub fn http_get(port: u16, path: &str) -> Result<String, String> {
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(1))
        .map_err(|err| format!("connect: {err}"))?;
    stream
        .set_read_timeout(Some(Duration::from_secs(3)))
        .and_then(|()| stream.set_write_timeout(Some(Duration::from_secs(3))))
        .map_err(|err| err.to_string())?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n"
    )
    .map_err(|err| format!("send: {err}"))?;
    let mut response = Vec::new();
    stream
        .take(1 << 20)
        .read_to_end(&mut response)
        .map_err(|err| format!("read: {err}"))?;
    let response = String::from_utf8_lossy(&response);
    let (head, body) = response
        .split_once("\r\n\r\n")
        .ok_or_else(|| "malformed HTTP answer".to_string())?;
    let status = head.lines().next().unwrap_or_default();
    if !status.contains(" 200") {
        return Err(format!("{path}: {status}"));
    }
    if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        return Ok(dechunk(body));
    }
    Ok(body.to_string())
}

/// Joins the chunks of a chunked HTTP body (enough for small JSON answers).
fn dechunk(body: &str) -> String {
    let mut out = String::new();
    let mut rest = body;
    for _ in 0..1024 {
        let Some((size, tail)) = rest.split_once("\r\n") else {
            break;
        };
        let Ok(size) = usize::from_str_radix(size.trim(), 16) else {
            break;
        };
        if size == 0 || tail.len() < size {
            break;
        }
        out.push_str(&tail[..size]);
        rest = tail[size..].trim_start_matches("\r\n");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn health_bodies() {
        assert!(is_healthy(r#"{"health":"true"}"#));
        assert!(is_healthy(r#"{"health": "true", "reason": ""}"#));
        assert!(!is_healthy(r#"{"health":"false"}"#));
    }

    #[test]
    fn chunked_bodies() {
        assert_eq!(
            dechunk("5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n"),
            "hello world"
        );
    }
}
