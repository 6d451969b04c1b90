//! The exec conversation over a real websocket on a loopback socket.

use axum::extract::ws::WebSocketUpgrade;
use axum::extract::RawQuery;
use axum::routing::get;
use axum::Router;
use futures::{SinkExt, StreamExt};
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::Message;

use super::*;

async fn server() -> u16 {
    let app = Router::new().route(
        "/exec",
        get(
            |upgrade: WebSocketUpgrade, RawQuery(query): RawQuery| async move {
                let request = parse(query.as_deref());
                let container = shell::Container {
                    hostname: "web".into(),
                    env: vec![("MODE".into(), "demo".into())],
                };
                upgrade
                    .protocols(PROTOCOLS)
                    .on_upgrade(move |socket| converse(socket, request, container))
            },
        ),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    port
}

/// Runs `query`'s command, sending `stdin` then closing it (v5); returns
/// (stdout, stderr, the error stream's status).
async fn exec(port: u16, query: &str, stdin: &[&str]) -> (String, String, serde_json::Value) {
    let mut request = format!("ws://127.0.0.1:{port}/exec?{query}")
        .into_client_request()
        .unwrap();
    request.headers_mut().insert(
        "Sec-WebSocket-Protocol",
        "v5.channel.k8s.io, v4.channel.k8s.io".parse().unwrap(),
    );
    let (mut socket, response) = tokio_tungstenite::connect_async(request).await.unwrap();
    assert_eq!(
        response.headers()["sec-websocket-protocol"],
        "v5.channel.k8s.io"
    );
    for data in stdin {
        let mut frame = vec![0u8];
        frame.extend_from_slice(data.as_bytes());
        socket.send(Message::Binary(frame.into())).await.unwrap();
    }
    socket
        .send(Message::Binary(vec![255u8, 0].into()))
        .await
        .unwrap();
    let (mut stdout, mut stderr, mut status) =
        (String::new(), String::new(), serde_json::Value::Null);
    while let Some(Ok(message)) = socket.next().await {
        let Message::Binary(data) = message else {
            continue;
        };
        let text = String::from_utf8_lossy(&data[1..]).to_string();
        match data[0] {
            1 => stdout.push_str(&text),
            2 => stderr.push_str(&text),
            3 => status = serde_json::from_str(&text).unwrap(),
            _ => {}
        }
    }
    (stdout, stderr, status)
}

#[tokio::test]
async fn a_command_answers_on_stdout_and_succeeds() {
    let port = server().await;
    let (stdout, stderr, status) =
        exec(port, "command=printenv&command=MODE&stdout=true", &[]).await;
    assert_eq!((stdout.as_str(), stderr.as_str()), ("demo\n", ""));
    assert_eq!(status["status"], "Success");
}

#[tokio::test]
async fn cat_echoes_stdin_until_it_closes() {
    let port = server().await;
    let (stdout, _, status) = exec(
        port,
        "command=cat&stdin=true&stdout=true",
        &["hello ", "world\n"],
    )
    .await;
    assert_eq!(stdout, "hello world\n");
    assert_eq!(status["status"], "Success");
}

#[tokio::test]
async fn an_exit_code_is_reported_as_kube_reports_it() {
    let port = server().await;
    let (_, _, status) = exec(port, "command=sh&command=-c&command=exit%203", &[]).await;
    assert_eq!(status["status"], "Failure");
    assert_eq!(status["reason"], "NonZeroExitCode");
    assert_eq!(
        status["details"]["causes"][0],
        serde_json::json!({"reason": "ExitCode", "message": "3"})
    );
    let (_, stderr, status) = exec(port, "command=nginx", &[]).await;
    assert!(stderr.contains("executable file not found"), "{stderr}");
    assert_eq!(status["details"]["causes"][0]["message"], "127");
}
