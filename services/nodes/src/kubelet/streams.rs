//! Kubernetes' channel protocol over a websocket (`v4.channel.k8s.io`,
//! `v5.channel.k8s.io`): every binary message starts with its stream's
//! number (0 stdin, 1 stdout, 2 stderr, 3 error, 4 resize); v5 adds 255,
//! with which a client closes one of its streams (stdin's end of input).

use axum::extract::ws::{close_code, CloseFrame, Message, WebSocket};
use bytes::{BufMut, Bytes, BytesMut};
use serde_json::json;

pub const V5: &str = "v5.channel.k8s.io";
pub const V4: &str = "v4.channel.k8s.io";
/// The protocols served, preferred first.
pub const PROTOCOLS: [&str; 2] = [V5, V4];

const STDIN: u8 = 0;
pub const STDOUT: u8 = 1;
pub const STDERR: u8 = 2;
const ERROR: u8 = 3;
const CLOSE: u8 = 255;

/// What the client sent.
pub enum Input {
    Data(Bytes),
    /// The client closed stdin (v5), or the whole connection.
    Closed,
    /// Anything else (a resize, a ping).
    Other,
}

/// Sends `data` on stream `channel`.
pub async fn send(socket: &mut WebSocket, channel: u8, data: &[u8]) -> bool {
    if data.is_empty() {
        return true;
    }
    let mut frame = BytesMut::with_capacity(data.len() + 1);
    frame.put_u8(channel);
    frame.put_slice(data);
    socket.send(Message::Binary(frame.freeze())).await.is_ok()
}

/// The next thing the client sent; `None` when it is gone.
pub async fn receive(socket: &mut WebSocket) -> Option<Input> {
    match socket.recv().await? {
        Ok(Message::Binary(data)) => Some(match data.first() {
            Some(&STDIN) => Input::Data(data.slice(1..)),
            Some(&CLOSE) if data.get(1) == Some(&STDIN) => Input::Closed,
            _ => Input::Other,
        }),
        Ok(Message::Close(_)) | Err(_) => Some(Input::Closed),
        Ok(_) => Some(Input::Other),
    }
}

/// Ends the exchange with the command's exit status on the error stream,
/// as the kubelet's streaming server reports it, then closes.
pub async fn finish(mut socket: WebSocket, command: &[String], code: i32) {
    let status = if code == 0 {
        json!({"metadata": {}, "status": "Success"})
    } else {
        json!({
            "metadata": {}, "status": "Failure",
            "message": format!("command terminated with non-zero exit code: error executing command [{}], exit code {code}", command.join(" ")),
            "reason": "NonZeroExitCode",
            "details": {"causes": [{"reason": "ExitCode", "message": code.to_string()}]},
        })
    };
    let _ = send(&mut socket, ERROR, status.to_string().as_bytes()).await;
    // A normal closure: clients (client-go) read code 1000 as the end
    // of every stream, and a close without a code as an error.
    let normal = CloseFrame {
        code: close_code::NORMAL,
        reason: "".into(),
    };
    let _ = socket.send(Message::Close(Some(normal))).await;
}
