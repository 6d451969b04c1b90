//! A loopback proxy that adds `Authorization: Bearer <token>` to every
//! request it forwards: kubectl sends no bearer token over plain HTTP, so
//! until the API server serves HTTPS a test reaches it as a token's user
//! through one of these. Each request head is rewritten; bodies (sized by
//! Content-Length, as kubectl sends them) and responses pass unchanged.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::thread;

/// Listens on a free loopback port until the process ends.
pub fn start(target_port: u16, token: &str) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind a loopback port");
    let port = listener.local_addr().expect("a local address").port();
    let token = token.to_string();
    thread::spawn(move || {
        for client in listener.incoming().flatten() {
            let token = token.clone();
            thread::spawn(move || {
                if let Ok(server) = TcpStream::connect(("127.0.0.1", target_port)) {
                    relay(client, server, &token);
                }
            });
        }
    });
    port
}

fn relay(client: TcpStream, server: TcpStream, token: &str) {
    let (Ok(mut back_to), Ok(mut from_server)) = (client.try_clone(), server.try_clone()) else {
        return;
    };
    thread::spawn(move || {
        let _ = std::io::copy(&mut from_server, &mut back_to);
        let _ = back_to.shutdown(std::net::Shutdown::Both);
    });
    let mut reader = BufReader::new(client);
    let mut server = server;
    while forward_one(&mut reader, &mut server, token).unwrap_or(false) {}
    let _ = server.shutdown(std::net::Shutdown::Write);
}

/// Forwards one request with the token added; false at the end.
fn forward_one(
    reader: &mut BufReader<TcpStream>,
    server: &mut TcpStream,
    token: &str,
) -> std::io::Result<bool> {
    let mut head = String::new();
    let mut length = 0usize;
    let mut first = true;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 {
            return Ok(false);
        }
        let lower = line.to_ascii_lowercase();
        if let Some(value) = lower.strip_prefix("content-length:") {
            length = value.trim().parse().unwrap_or(0);
        }
        if !lower.starts_with("authorization:") {
            head.push_str(&line);
        }
        if first {
            head.push_str(&format!("Authorization: Bearer {token}\r\n"));
            first = false;
        }
        if line == "\r\n" {
            break;
        }
    }
    let mut body = vec![0u8; length];
    reader.read_exact(&mut body)?;
    server.write_all(head.as_bytes())?;
    server.write_all(&body)?;
    Ok(true)
}
