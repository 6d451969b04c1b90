//! An exec's or attach's websocket, carried as kube-apiserver carries
//! it: the kubelet's websocket is opened first with the subprotocols the
//! client offered (`v5.channel.k8s.io`, ...), the client's upgrade is
//! then answered with the one the kubelet chose, and frames are relayed
//! both ways until either side closes, its close code passed on. Each
//! direction awaits its send before it reads again, so a slow side slows
//! the other instead of filling a queue.

use actix_web::http::header;
use actix_web::{web, HttpRequest, HttpResponse};
use actix_ws::{AggregatedMessage, AggregatedMessageStream, CloseReason, Session};
use futures::{SinkExt, StreamExt};
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::Message;

use super::unreachable;
use crate::aggregator::resolve::Backend;
use crate::error::ApiError;
use crate::kubelet_client::{KubeletClient, KubeletSocket};
use crate::registry::subresource::Location;

/// The channel protocols kubectl offers, newest first.
pub const PROTOCOLS: [&str; 4] = [
    "v5.channel.k8s.io",
    "v4.channel.k8s.io",
    "v3.channel.k8s.io",
    "v2.channel.k8s.io",
];

/// The largest message a client may send (stdin, resize).
const MAX_CLIENT_MESSAGE: usize = 1 << 20;

/// A websocket upgrade (`Connection: Upgrade`, `Upgrade: websocket`).
pub fn is_websocket(req: &HttpRequest) -> bool {
    let has = |name: header::HeaderName, token: &str| {
        req.headers().get_all(name).any(|value| {
            let text = value.to_str().unwrap_or_default();
            text.split(',')
                .any(|t| t.trim().eq_ignore_ascii_case(token))
        })
    };
    has(header::CONNECTION, "upgrade") && has(header::UPGRADE, "websocket")
}

/// The subprotocols the client offered, in its order.
fn offered(req: &HttpRequest) -> Vec<String> {
    let values = req.headers().get_all(header::SEC_WEBSOCKET_PROTOCOL);
    let values = values.filter_map(|v| v.to_str().ok());
    let items = values.flat_map(|v| v.split(',').map(str::trim).map(str::to_string));
    items.filter(|p| !p.is_empty()).collect()
}

pub async fn relay(
    req: &HttpRequest,
    payload: web::Payload,
    kubelets: &KubeletClient,
    kubelet: &Backend,
    location: &Location,
) -> Result<HttpResponse, ApiError> {
    let offered = offered(req);
    let (upstream, chosen) = kubelets
        .websocket(kubelet, location, &offered)
        .await
        .map_err(unreachable)?;
    let chosen: Vec<&str> = chosen.iter().map(String::as_str).collect();
    let (response, session, messages) = actix_ws::handle_with_protocols(req, payload, &chosen)
        .map_err(|e| ApiError::BadRequest(format!("websocket upgrade: {e}")))?;
    let messages = messages
        .max_frame_size(MAX_CLIENT_MESSAGE)
        .aggregate_continuations()
        .max_continuation_size(MAX_CLIENT_MESSAGE);
    actix_rt::spawn(pump(session, messages, upstream));
    Ok(response)
}

/// Relays until either side closes or goes away; then both ends are
/// dropped, so nothing outlives the exchange.
async fn pump(session: Session, client: AggregatedMessageStream, upstream: KubeletSocket) {
    let (to_kubelet, from_kubelet) = upstream.split();
    tokio::select! {
        _ = upward(client, to_kubelet) => {}
        _ = downward(from_kubelet, session) => {}
    }
}

async fn upward(
    mut client: AggregatedMessageStream,
    mut kubelet: futures::stream::SplitSink<KubeletSocket, Message>,
) {
    while let Some(Ok(message)) = client.next().await {
        let (message, last) = match message {
            AggregatedMessage::Binary(data) => (Message::Binary(data), false),
            AggregatedMessage::Text(text) => (Message::Text(text.to_string().into()), false),
            AggregatedMessage::Ping(data) => (Message::Ping(data), false),
            AggregatedMessage::Pong(data) => (Message::Pong(data), false),
            AggregatedMessage::Close(reason) => (Message::Close(reason.map(close_frame)), true),
        };
        if kubelet.send(message).await.is_err() || last {
            return;
        }
    }
    // The client went away without a close: tell the kubelet.
    let _ = kubelet.send(Message::Close(None)).await;
}

async fn downward(mut kubelet: futures::stream::SplitStream<KubeletSocket>, mut session: Session) {
    while let Some(Ok(message)) = kubelet.next().await {
        let sent = match message {
            Message::Binary(data) => session.binary(data).await,
            Message::Text(text) => session.text(text.as_str().to_string()).await,
            Message::Ping(data) => session.ping(&data).await,
            Message::Pong(data) => session.pong(&data).await,
            Message::Close(frame) => {
                let _ = session.close(frame.map(close_reason)).await;
                return;
            }
            Message::Frame(_) => Ok(()),
        };
        if sent.is_err() {
            return;
        }
    }
    let _ = session.close(None).await;
}

fn close_frame(reason: CloseReason) -> CloseFrame {
    CloseFrame {
        code: u16::from(reason.code).into(),
        reason: reason.description.unwrap_or_default().into(),
    }
}

fn close_reason(frame: CloseFrame) -> CloseReason {
    CloseReason {
        code: u16::from(frame.code).into(),
        description: Some(frame.reason.as_str().to_string()).filter(|d| !d.is_empty()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use actix_web::test::TestRequest;

    #[test]
    fn an_upgrade_is_recognized_and_its_protocols_read_in_order() {
        let req = TestRequest::get()
            .insert_header(("Connection", "keep-alive, Upgrade"))
            .insert_header(("Upgrade", "websocket"))
            .insert_header((
                "Sec-WebSocket-Protocol",
                "v5.channel.k8s.io, v4.channel.k8s.io",
            ))
            .to_http_request();
        assert!(is_websocket(&req));
        assert_eq!(offered(&req), ["v5.channel.k8s.io", "v4.channel.k8s.io"]);
        let spdy = TestRequest::post()
            .insert_header(("Connection", "Upgrade"))
            .insert_header(("Upgrade", "SPDY/3.1"))
            .to_http_request();
        assert!(!is_websocket(&spdy));
    }

    #[test]
    fn close_codes_pass_both_ways() {
        let reason = CloseReason {
            code: 4000u16.into(),
            description: Some("done".into()),
        };
        let frame = close_frame(reason);
        assert_eq!(u16::from(frame.code), 4000);
        let back = close_reason(frame);
        assert_eq!(u16::from(back.code), 4000);
        assert_eq!(back.description.as_deref(), Some("done"));
    }
}
